/* client/dml: CQL writes become the right storage mutations, checked by
 * applying them to a real engine and reading the partitions back. */
#include "client/cql/cql_parse.h"
#include "client/exec/dml.h"
#include "client/schema/schema.h"
#include "common/env_real.h"
#include "common/err.h"
#include "common/murmur3.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct cql_schema *schema;
static struct env *env;
static struct storage *db;
static char dir[512];
static struct cql_timeuuid_gen gen;
static int64_t clock_us;

static uint64_t rnd(void *arg)
{
	(void)arg;
	return 42;
}

static void ddl(const char *q)
{
	struct arena a;
	int binds;
	uint8_t id[16] = {0};
	struct cql_schema_change ch;
	static int n;
	id[15] = (uint8_t)++n;
	arena_create(&a, 0);
	struct cql_stmt *s = cql_parse(&a, q, strlen(q), &binds, NULL);
	ck_assert_msg(s != NULL, "%s", err_msg());
	ck_assert_int_eq(cql_schema_apply(schema, s, "ks", id, &ch),
			 CQL_SCHEMA_OK);
	arena_destroy(&a);
}

static const struct cql_table *table(const char *name)
{
	return cql_schema_table(schema, "ks", name);
}

static void setup(void)
{
	char data[600], log[600];
	schema = cql_schema_new();
	ddl("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
	    "'replication_factor': 1}");
	ddl("CREATE TABLE ks.kv (k int PRIMARY KEY, v text, n bigint, "
	    "l list<int>, s set<text>, m map<text, int>, f frozen<list<int>>)");
	ddl("CREATE TABLE ks.wide (p text, c1 int, c2 int, v text, st int "
	    "static, "
	    "PRIMARY KEY ((p), c1, c2))");
	ddl("CREATE TABLE ks.ttl (k int PRIMARY KEY, v int) WITH "
	    "default_time_to_live = 100");
	ddl("CREATE TABLE ks.rev (p text, c1 int, c2 int, v text, "
	    "PRIMARY KEY ((p), c1, c2)) WITH CLUSTERING ORDER BY (c1 DESC, "
	    "c2 DESC)");
	env = env_real_new(NULL);
	snprintf(dir, sizeof(dir), "%s", test_tmpdir("dml"));
	snprintf(data, sizeof(data), "%s/data", dir);
	snprintf(log, sizeof(log), "%s/commitlog", dir);
	struct storage_options o;
	storage_options_default(&o);
	o.env = env;
	o.data_dir = data;
	o.commitlog_dir = log;
	db = storage_new(&o);
	const char *tables[] = {"kv", "wide", "ttl", "rev"};
	for (size_t i = 0; i < 4; i++)
		ck_assert_int_eq(
			storage_table_add(db, cql_table_meta(table(tables[i])),
					  true),
			0);
	ck_assert_msg(storage_start(db) == 0, "%s", err_msg());
	cql_timeuuid_gen_init(&gen, 7);
	/* The engine judges TTL expiry by its env clock: write in its time. */
	clock_us = env_wall_us(env);
}

static void teardown(void)
{
	storage_delete(db);
	env_real_delete(env);
	cql_schema_delete(schema);
	test_tmpdir_remove(dir);
}

/* Runs a DML statement at the next timestamp; returns 0 or -1. */
static int dml_binds(const char *q, const struct cql_value *binds, size_t n)
{
	struct arena a;
	int nb;
	arena_create(&a, 0);
	struct cql_stmt *s = cql_parse(&a, q, strlen(q), &nb, NULL);
	ck_assert_msg(s != NULL, "%s: %s", q, err_msg());
	const struct cql_qname *t =
		s->kind == CQL_STMT_INSERT   ? &s->u.insert.table
		: s->kind == CQL_STMT_UPDATE ? &s->u.update.table
					     : &s->u.del.table;
	clock_us += 1000;
	struct cql_fn_ctx fn = {
		.now_us = clock_us, .timeuuids = &gen, .random = rnd};
	struct cql_write_ctx ctx = {.timestamp = clock_us,
				    .now_sec = clock_us / 1000000,
				    .fn = &fn};
	struct cql_mutations muts;
	int rc = cql_dml_build(s, table(t->name), binds, n, &ctx, &muts);
	for (size_t i = 0; rc == 0 && i < muts.count; i++)
		ck_assert_msg(storage_apply_sync(db, muts.items[i]) == 0, "%s",
			      err_msg());
	if (rc == 0)
		cql_mutations_free(&muts);
	arena_destroy(&a);
	return rc;
}

static void dml(const char *q)
{
	ck_assert_msg(dml_binds(q, NULL, 0) == 0, "%s -> %s", q, err_msg());
}

static void dml_fails(const char *q, enum err_code code, const char *msg)
{
	ck_assert_msg(dml_binds(q, NULL, 0) == -1, "accepted: %s", q);
	ck_assert_msg(err_code() == code, "%s -> %s", q, err_msg());
	ck_assert_msg(strstr(err_msg(), msg), "%s -> '%s' lacks '%s'", q,
		      err_msg(), msg);
}

static struct storage_result *read_key(const char *tname, const void *key,
				       size_t len)
{
	struct storage_read_cmd cmd = {
		.key = key, .key_len = len, .with_static = true};
	struct storage_result *r;
	ck_assert_msg(storage_read(db, cql_table_meta(table(tname))->id, &cmd,
				   &r) == 0,
		      "%s", err_msg());
	return r;
}

static struct storage_result *read_int(const char *tname, int32_t k)
{
	uint8_t key[4];
	be32_store(key, (uint32_t)k);
	return read_key(tname, key, 4);
}

static const struct storage_cell_view *cell(const struct storage_row_view *row,
					    const char *tname, const char *col,
					    size_t nth)
{
	int c = cql_table_column(table(tname), col);
	for (size_t i = 0; i < row->cell_count; i++)
		if (row->cells[i].column == c && nth-- == 0)
			return &row->cells[i];
	return NULL;
}

static size_t cell_count(const struct storage_row_view *row, const char *tname,
			 const char *col)
{
	size_t n = 0;
	while (cell(row, tname, col, n))
		n++;
	return n;
}

START_TEST(insert_writes_marker_cells_and_replaces_collections)
{
	dml("INSERT INTO kv (k, v, l, s, m, f) VALUES (1, 'a', [3, 1], "
	    "{'y', 'x'}, {'b': 2, 'a': 1}, [9, 8])");
	struct storage_result *r = read_int("kv", 1);
	ck_assert_uint_eq(r->row_count, 1);
	const struct storage_row_view *row = &r->rows[0];
	ck_assert_int_ne(row->marker_ts, INT64_MIN); /* INSERT sets liveness */
	ck_assert(
		slice_eq(cell(row, "kv", "v", 0)->value, slice_from_cstr("a")));
	ck_assert_uint_eq(cell_count(row, "kv", "l"), 2);
	/* list order is the append order: 3 then 1 */
	ck_assert_uint_eq(be32_load(cell(row, "kv", "l", 0)->value.ptr), 3);
	ck_assert_uint_eq(be32_load(cell(row, "kv", "l", 1)->value.ptr), 1);
	/* set elements are paths, sorted */
	ck_assert(
		slice_eq(cell(row, "kv", "s", 0)->path, slice_from_cstr("x")));
	ck_assert(
		slice_eq(cell(row, "kv", "m", 1)->path, slice_from_cstr("b")));
	ck_assert_uint_eq(cell_count(row, "kv", "f"), 1); /* frozen: one cell */
	storage_result_delete(r);

	/* A second INSERT replaces the collections; null deletes v. */
	dml("INSERT INTO kv (k, v, s) VALUES (1, null, {'z'})");
	r = read_int("kv", 1);
	row = &r->rows[0];
	ck_assert_ptr_null(cell(row, "kv", "v", 0));
	ck_assert_uint_eq(cell_count(row, "kv", "s"), 1);
	ck_assert(
		slice_eq(cell(row, "kv", "s", 0)->path, slice_from_cstr("z")));
	ck_assert_uint_eq(cell_count(row, "kv", "l"), 2); /* untouched */
	storage_result_delete(r);

	/* Unset values write nothing; null values write tombstones. */
	struct cql_value binds[2] = {{4, (const uint8_t *)"\0\0\0\2"},
				     {CQL_VALUE_UNSET, NULL}};
	ck_assert_int_eq(
		dml_binds("INSERT INTO kv (k, v) VALUES (?, ?)", binds, 2), 0);
	r = read_int("kv", 2);
	ck_assert_uint_eq(r->rows[0].cell_count, 0);
	ck_assert_int_ne(r->rows[0].marker_ts, INT64_MIN);
	storage_result_delete(r);
}
END_TEST

START_TEST(update_adds_prepends_removes_and_sets_entries)
{
	dml("UPDATE kv SET l = [5], s = {'a', 'b'}, m = {'k': 1} WHERE k = 3");
	dml("UPDATE kv SET l = l + [6, 7], l = [4] + l, s = s - {'a'}, "
	    "s = s + {'c'}, m['j'] = 2, m = m - {'k'}, n = 10 WHERE k = 3");
	struct storage_result *r = read_int("kv", 3);
	const struct storage_row_view *row = &r->rows[0];
	ck_assert_int_eq(row->marker_ts, INT64_MIN); /* UPDATE sets no marker */
	int want[] = {4, 5, 6, 7};
	ck_assert_uint_eq(cell_count(row, "kv", "l"), 4);
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(
			be32_load(cell(row, "kv", "l", (size_t)i)->value.ptr),
			(uint32_t)want[i]);
	ck_assert_uint_eq(cell_count(row, "kv", "s"), 2);
	ck_assert(
		slice_eq(cell(row, "kv", "s", 0)->path, slice_from_cstr("b")));
	ck_assert_uint_eq(cell_count(row, "kv", "m"), 1);
	ck_assert(
		slice_eq(cell(row, "kv", "m", 0)->path, slice_from_cstr("j")));
	storage_result_delete(r);

	dml_fails("UPDATE kv SET l[0] = 1 WHERE k = 3", ERR_UNSUPPORTED,
		  "Setting a list element by index");
	dml_fails("UPDATE kv SET l = l - [4] WHERE k = 3", ERR_UNSUPPORTED,
		  "Removing list elements by value");
	dml_fails("UPDATE kv SET f = f + [1] WHERE k = 3", ERR_INVALID,
		  "Invalid operation (f = f + [1]) for frozen "
		  "collection column f");
	dml_fails("UPDATE kv SET k = 2 WHERE k = 3", ERR_INVALID,
		  "PRIMARY KEY part k found in SET part");
	dml_fails("UPDATE kv SET v = 'x' WHERE v = 'y'", ERR_INVALID,
		  "Non PRIMARY KEY columns found in where clause: v ");
	dml_fails("DELETE FROM kv WHERE v = 'y' AND k = 1 AND n = 2",
		  ERR_INVALID,
		  "Non PRIMARY KEY columns found in where clause: n, v ");
	dml_fails("UPDATE kv SET v = 'x' WHERE k > 1", ERR_INVALID,
		  "Only EQ and IN relation are supported on the partition key");
}
END_TEST

START_TEST(keys_in_expands_and_missing_parts_are_refused)
{
	dml("INSERT INTO wide (p, c1, c2, v, st) VALUES ('a', 1, 1, 'x', 7)");
	dml("UPDATE wide SET v = 'y' WHERE p IN ('a', 'b') AND c1 = 1 AND "
	    "c2 IN (1, 2)");
	struct storage_result *r = read_key("wide", "a", 1);
	ck_assert_uint_eq(r->row_count, 2);
	ck_assert_ptr_nonnull(r->static_row);
	ck_assert_uint_eq(
		be32_load(cell(r->static_row, "wide", "st", 0)->value.ptr), 7);
	storage_result_delete(r);
	r = read_key("wide", "b", 1);
	ck_assert_uint_eq(r->row_count, 2);
	storage_result_delete(r);

	dml("UPDATE wide SET st = 9 WHERE p = 'c'"); /* statics need no
							clustering */
	r = read_key("wide", "c", 1);
	ck_assert_uint_eq(r->row_count, 0);
	ck_assert_uint_eq(
		be32_load(cell(r->static_row, "wide", "st", 0)->value.ptr), 9);
	storage_result_delete(r);

	dml_fails("INSERT INTO wide (p, c1, v) VALUES ('a', 1, 'x')",
		  ERR_INVALID, "Some clustering keys are missing: c2");
	dml_fails("UPDATE wide SET v = 'x' WHERE c1 = 1 AND c2 = 1",
		  ERR_INVALID, "Some partition key parts are missing: p");
	dml_fails("UPDATE wide SET st = 1 WHERE p = 'a' AND c1 = 1",
		  ERR_INVALID, "modifies only static columns");
	dml_fails("INSERT INTO wide (p, c1, c2) VALUES ('', 1, 1)", ERR_INVALID,
		  "Key may not be empty");
	dml_fails("INSERT INTO wide (p, c1, c2) VALUES (null, 1, 1)",
		  ERR_INVALID, "Invalid null value");
	dml_fails("INSERT INTO kv (k, nope) VALUES (1, 2)", ERR_INVALID,
		  "Undefined column name nope in table ks.kv");
}
END_TEST

START_TEST(deletes_cells_rows_ranges_and_partitions)
{
	for (int c1 = 1; c1 <= 3; c1++)
		for (int c2 = 1; c2 <= 3; c2++) {
			char q[160];
			snprintf(q, sizeof(q),
				 "INSERT INTO wide (p, c1, c2, v, st) VALUES "
				 "('p', %d, %d, 'v', 1)",
				 c1, c2);
			dml(q);
		}
	dml("DELETE v FROM wide WHERE p = 'p' AND c1 = 1 AND c2 = 1");
	dml("DELETE FROM wide WHERE p = 'p' AND c1 = 1 AND c2 = 2");
	dml("DELETE FROM wide WHERE p = 'p' AND c1 = 2 AND c2 > 1");
	dml("DELETE FROM wide WHERE p = 'p' AND c1 >= 3");
	dml("DELETE st FROM wide WHERE p = 'p'");
	struct storage_result *r = read_key("wide", "p", 1);
	/* Left: (1,1) with its marker but no v, (1,3), (2,1). */
	ck_assert_uint_eq(r->row_count, 3);
	ck_assert_uint_eq(be32_load(r->rows[0].clustering[1].ptr), 1);
	ck_assert_ptr_null(cell(&r->rows[0], "wide", "v", 0));
	ck_assert_uint_eq(be32_load(r->rows[1].clustering[1].ptr), 3);
	ck_assert_uint_eq(be32_load(r->rows[2].clustering[0].ptr), 2);
	ck_assert(!r->static_row || r->static_row->cell_count == 0);
	storage_result_delete(r);

	dml("DELETE FROM wide WHERE p = 'p'");
	r = read_key("wide", "p", 1);
	ck_assert_uint_eq(r->row_count, 0);
	storage_result_delete(r);

	dml("INSERT INTO kv (k, v, m) VALUES (5, 'a', {'x': 1, 'y': 2})");
	dml("DELETE m['x'] FROM kv WHERE k = 5");
	r = read_int("kv", 5);
	ck_assert_uint_eq(cell_count(&r->rows[0], "kv", "m"), 1);
	storage_result_delete(r);
	dml("DELETE m, v FROM kv WHERE k = 5");
	r = read_int("kv", 5);
	ck_assert_uint_eq(r->rows[0].cell_count, 0);
	storage_result_delete(r);

	dml_fails("DELETE v FROM wide WHERE p = 'p' AND c1 = 1", ERR_INVALID,
		  "Range deletions are not supported for specific columns");
	dml_fails("DELETE FROM wide WHERE p = 'p' AND c2 = 1", ERR_INVALID,
		  "cannot be restricted as preceding column \"c1\" is not "
		  "restricted");
	dml_fails("DELETE l[0] FROM kv WHERE k = 5", ERR_UNSUPPORTED,
		  "list element by index");
	dml_fails("DELETE k FROM kv WHERE k = 5", ERR_INVALID,
		  "should not be a PRIMARY KEY part");
}
END_TEST

/* On columns in DESC clustering order, a range's bounds swap ends: c1 >=
 * 3 starts the partition. Before, "c1 >= 3" deleted every row and "c1 > 0
 * AND c1 < 2" none. */
START_TEST(range_deletions_on_desc_columns_delete_the_same_rows)
{
	for (int c1 = 1; c1 <= 3; c1++)
		for (int c2 = 1; c2 <= 3; c2++) {
			char q[160];
			snprintf(q, sizeof(q),
				 "INSERT INTO rev (p, c1, c2, v) VALUES "
				 "('p', %d, %d, 'v')",
				 c1, c2);
			dml(q);
		}
	dml("DELETE FROM rev WHERE p = 'p' AND c1 = 2 AND c2 > 1");
	dml("DELETE FROM rev WHERE p = 'p' AND c1 >= 3");
	dml("DELETE FROM rev WHERE p = 'p' AND c1 > 0 AND c1 < 2");
	struct storage_result *r = read_key("rev", "p", 1);
	ck_assert_uint_eq(r->row_count, 1); /* (2, 1) */
	ck_assert_uint_eq(be32_load(r->rows[0].clustering[0].ptr), 2);
	ck_assert_uint_eq(be32_load(r->rows[0].clustering[1].ptr), 1);
	storage_result_delete(r);
}
END_TEST

START_TEST(ttl_and_timestamps)
{
	dml("INSERT INTO ttl (k, v) VALUES (1, 1)"); /* table default 100 s */
	dml("INSERT INTO ttl (k, v) VALUES (2, 2) USING TTL 7 AND TIMESTAMP "
	    "42");
	dml("INSERT INTO ttl (k, v) VALUES (3, 3) USING TTL 0");
	struct storage_result *r = read_int("ttl", 1);
	ck_assert_int_eq(cell(&r->rows[0], "ttl", "v", 0)->ttl, 100);
	storage_result_delete(r);
	r = read_int("ttl", 2);
	ck_assert_int_eq(cell(&r->rows[0], "ttl", "v", 0)->ttl, 7);
	ck_assert_int_eq(cell(&r->rows[0], "ttl", "v", 0)->ts, 42);
	storage_result_delete(r);
	r = read_int("ttl", 3);
	ck_assert_int_eq(cell(&r->rows[0], "ttl", "v", 0)->ttl, 0);
	storage_result_delete(r);
	/* An older timestamp loses. */
	dml("UPDATE ttl USING TIMESTAMP 41 SET v = 99 WHERE k = 2");
	r = read_int("ttl", 2);
	ck_assert_uint_eq(
		be32_load(cell(&r->rows[0], "ttl", "v", 0)->value.ptr), 2);
	storage_result_delete(r);
	dml_fails("INSERT INTO ttl (k, v) VALUES (4, 4) USING TTL 700000000",
		  ERR_INVALID,
		  "ttl is too large. requested (700000000) maximum "
		  "(630720000)");
	dml_fails("INSERT INTO ttl (k, v) VALUES (4, 4) USING TTL -1",
		  ERR_INVALID,
		  "A TTL must be greater or equal to 0, but was -1");
}
END_TEST

START_TEST(compound_partition_keys_hash_like_drivers)
{
	ddl("CREATE TABLE ks.ck (a int, b text, v int, PRIMARY KEY ((a, b)))");
	storage_table_add(db, cql_table_meta(table("ck")), true);
	dml("INSERT INTO ck (a, b, v) VALUES (1, 'a', 5)");
	/* The routing key drivers hash: u16 len, bytes, 0 per component. */
	uint8_t key[] = {0, 4, 0, 0, 0, 1, 0, 0, 1, 'a', 0};
	struct storage_result *r = read_key("ck", key, sizeof(key));
	ck_assert_uint_eq(r->row_count, 1);
	ck_assert_int_eq(r->token, 6516349416904725244ll); /* the driver's */
	storage_result_delete(r);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("dml");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, insert_writes_marker_cells_and_replaces_collections);
	tcase_add_test(tc, update_adds_prepends_removes_and_sets_entries);
	tcase_add_test(tc, keys_in_expands_and_missing_parts_are_refused);
	tcase_add_test(tc, deletes_cells_rows_ranges_and_partitions);
	tcase_add_test(tc,
		       range_deletions_on_desc_columns_delete_the_same_rows);
	tcase_add_test(tc, ttl_and_timestamps);
	tcase_add_test(tc, compound_partition_keys_hash_like_drivers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
