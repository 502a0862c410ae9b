/* The storage suites' engine fixture (storage_fixture.h). */
#include "tests/unit/storage_fixture.h"

#include "common/env_real.h"
#include "common/err.h"
#include "tests/lib/testutil.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

void storage_fx_prepare(struct storage_fx *f, const char *tag)
{
	memset(f, 0, sizeof(*f));
	f->real = env_real_new(NULL);
	ck_assert_ptr_nonnull(f->real);
	f->fe = fault_env_new(f->real);
	ck_assert_ptr_nonnull(f->fe);
	f->env = fault_env_env(f->fe);
	snprintf(f->dir, sizeof(f->dir), "%s", test_tmpdir(tag));
	snprintf(f->data, sizeof(f->data), "%s/data", f->dir);
	snprintf(f->log, sizeof(f->log), "%s/commitlog", f->dir);
	storage_options_default(&f->o);
	f->o.env = f->env;
	f->o.data_dir = f->data;
	f->o.commitlog_dir = f->log;
	f->o.auto_compaction = false;
	f->ts = 1000;
}

void storage_fx_open(struct storage_fx *f)
{
	f->db = storage_new(&f->o);
	ck_assert_ptr_nonnull(f->db);
	if (f->t)
		ck_assert_int_eq(storage_table_add(f->db, f->t, true), 0);
	if (f->u)
		ck_assert_int_eq(storage_table_add(f->db, f->u, true), 0);
	if (storage_start(f->db))
		ck_abort_msg("start: %s", err_msg());
}

void storage_fx_init(struct storage_fx *f, const char *tag, uint8_t id0)
{
	storage_fx_prepare(f, tag);
	f->t = storage_fx_kv_table("t", id0, 1);
	f->u = storage_fx_kv_table("u", id0, 2);
	storage_fx_open(f);
}

void storage_fx_restart(struct storage_fx *f)
{
	storage_delete(f->db);
	storage_fx_open(f);
}

void storage_fx_free(struct storage_fx *f)
{
	storage_delete(f->db);
	storage_table_meta_delete(f->t);
	storage_table_meta_delete(f->u);
	test_tmpdir_remove(f->dir);
	fault_env_delete(f->fe);
	env_real_delete(f->real);
}

struct storage_table_meta *storage_fx_kv_table(const char *name, uint8_t id0,
					       uint8_t tag)
{
	uint8_t id[16] = {id0, tag};
	struct storage_table_meta *t = storage_table_meta_new("ks", name, id);
	ck_assert_ptr_nonnull(t);
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	struct storage_type tb = {.kind = STORAGE_TYPE_BLOB};
	ck_assert_int_ge(
		storage_table_meta_add_column(
			t, "pk", STORAGE_COLUMN_PARTITION_KEY, &tx, false),
		0);
	ck_assert_int_ge(storage_table_meta_add_column(
				 t, "v", STORAGE_COLUMN_REGULAR, &tb, false),
			 0);
	return t;
}
