/*
 * sstable_fixture DIR: writes, through the engine, the SSTables the
 * cassini-tool sstablemetadata / sstabledump test (tool_sstable_test.py)
 * reads. Table ks.t (pk text, c int, v text), wall clock fixed at
 * 1700000000 s:
 *
 *   ca-1: 10 rows (keys live0..live9, c = 1, v = 'v'), 30 row deletions
 *         (dead0..dead29), one row with TTL 3600 (ttl0) and a partition
 *         deletion (gone)
 *   ca-2: one row deletion (del2), nothing else: fully expired at gc
 *         grace 0, blocked by ca-1 (older data)
 *   ca-3: one row deletion (del3), as ca-2
 *
 * It prints the table directory.
 */
#include "common/env_real.h"
#include "common/err.h"
#include "conf/conf.h"
#include "storage/storage.h"
#include "tests/unit/storage_fault_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 1700000000LL

static struct storage_table_meta *t;
static struct storage *db;
static int64_t ts = 1000;

static struct storage_mutation *row(const char *key, int c)
{
	struct storage_mutation *m =
		storage_mutation_new(t, (const uint8_t *)key, strlen(key));
	uint8_t cb[4];
	be32_store(cb, (uint32_t)c);
	struct slice ck = slice_make(cb, 4);
	if (!m || storage_mutation_set_row(m, &ck, 1))
		exit(2);
	return m;
}

static void apply(struct storage_mutation *m)
{
	if (storage_apply_sync(db, m)) {
		fprintf(stderr, "apply: %s\n", err_msg());
		exit(2);
	}
	storage_mutation_delete(m);
}

static void put(const char *key, int32_t ttl)
{
	struct storage_mutation *m = row(key, 1);
	if (storage_mutation_put_marker(m, ts, ttl, T0) ||
	    storage_mutation_put(m, 2, NULL, 0, (const uint8_t *)"v", 1, ts,
				 ttl, T0))
		exit(2);
	ts++;
	apply(m);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: sstable_fixture DIR\n");
		return 2;
	}
	struct env *real = env_real_new(NULL);
	struct fault_env *fe = fault_env_new(real);
	struct env *env = fault_env_env(fe);
	fault_env_set_wall_us(fe, T0 * 1000000);
	char data[1024], log[1024];
	snprintf(data, sizeof(data), "%s/data", argv[1]);
	snprintf(log, sizeof(log), "%s/commitlog", argv[1]);
	struct storage_options o;
	storage_options_default(&o);
	o.env = env;
	o.data_dir = data;
	o.commitlog_dir = log;
	o.commitlog_sync = CONF_COMMITLOG_SYNC_PERIODIC;
	o.auto_compaction = false;
	uint8_t id[16] = {0x70, 0x32};
	t = storage_table_meta_new("ks", "t", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &tx,
				      false);
	/* never written: for the column layout sstablemetadata prints */
	storage_table_meta_add_column(t, "s", STORAGE_COLUMN_STATIC, &ti,
				      false);
	storage_table_meta_add_column(t, "gone", STORAGE_COLUMN_REGULAR, &ti,
				      false);
	t->columns[t->column_count - 1].dropped = true;
	t->columns[t->column_count - 1].dropped_at = 1;
	db = storage_new(&o);
	if (!db || storage_table_add(db, t, true) || storage_start(db)) {
		fprintf(stderr, "start: %s\n", err_msg());
		return 2;
	}
	char k[32];
	for (int i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "live%d", i);
		put(k, 0);
	}
	for (int i = 0; i < 30; i++) {
		snprintf(k, sizeof(k), "dead%d", i);
		struct storage_mutation *m = row(k, 1);
		if (storage_mutation_delete_row(m, ts++, T0))
			return 2;
		apply(m);
	}
	put("ttl0", 3600);
	struct storage_mutation *m = storage_mutation_new(
		t, (const uint8_t *)"gone", strlen("gone"));
	if (!m || storage_mutation_delete_partition(m, ts++, T0))
		return 2;
	apply(m);
	if (storage_flush(db, NULL)) {
		fprintf(stderr, "flush: %s\n", err_msg());
		return 2;
	}
	for (int g = 2; g <= 3; g++) {
		snprintf(k, sizeof(k), "del%d", g);
		m = row(k, 1);
		if (storage_mutation_delete_row(m, ts++, T0))
			return 2;
		apply(m);
		if (storage_flush(db, NULL)) {
			fprintf(stderr, "flush: %s\n", err_msg());
			return 2;
		}
	}
	storage_delete(db);
	storage_table_meta_delete(t);
	fault_env_delete(fe);
	env_real_delete(real);
	printf("%s/ks/t-", data);
	for (int i = 0; i < 16; i++)
		printf("%02x", id[i]);
	printf("\n");
	return 0;
}
