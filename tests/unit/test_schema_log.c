/* client/schema_log: replay rebuilds the same schema; torn tails and
 * corruption are handled as the format promises. */
#include "client/cql/cql_parse.h"
#include "client/schema/schema_log.h"
#include "common/env_real.h"
#include "common/err.h"
#include "ring/ring.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct env *env;
static char dir[512], path[600], path_b[600]; /* path_b: another node's */

static void setup(void)
{
	env = env_real_new(NULL);
	snprintf(dir, sizeof(dir), "%s", test_tmpdir("schemalog"));
	snprintf(path, sizeof(path), "%s/schema.log", dir);
	snprintf(path_b, sizeof(path_b), "%s/schema-b.log", dir);
}

static struct cql_schema_log *open_log(const char *at)
{
	struct cql_schema_log *l = cql_schema_log_open(env, at);
	ck_assert_ptr_nonnull(l);
	return l;
}

static void teardown(void)
{
	test_tmpdir_remove(dir);
	env_real_delete(env);
}

/* Applies and logs, as the node does. */
static void apply_logged(struct cql_schema *s, struct cql_schema_log *l,
			 const char *ks, const char *q, uint8_t idbyte)
{
	struct arena a;
	int binds;
	uint8_t id[16] = {0};
	id[15] = idbyte;
	struct cql_schema_change ch;
	arena_create(&a, 0);
	struct cql_stmt *st = cql_parse(&a, q, strlen(q), &binds, NULL);
	ck_assert_ptr_nonnull(st);
	ck_assert_msg(cql_schema_apply(s, st, ks, id, &ch) == CQL_SCHEMA_OK,
		      "%s", err_msg());
	ck_assert_int_eq(cql_schema_log_append(l, ks, id, q, strlen(q)), 0);
	arena_destroy(&a);
}

static void assert_same_version(const struct cql_schema *a,
				const struct cql_schema *b)
{
	uint8_t va[16], vb[16];
	cql_schema_version(a, va);
	cql_schema_version(b, vb);
	ck_assert_int_eq(memcmp(va, vb, 16), 0);
}

static struct cql_schema *build_logged(void)
{
	struct cql_schema *s = cql_schema_new();
	struct cql_schema_log *l = open_log(path);
	apply_logged(s, l, NULL,
		     "CREATE KEYSPACE ks WITH replication = {'class': "
		     "'SimpleStrategy', 'replication_factor': 1}",
		     0);
	apply_logged(s, l, NULL,
		     "CREATE TABLE ks.t (k int PRIMARY KEY, a int, "
		     "b int)",
		     7);
	apply_logged(s, l, "ks", "ALTER TABLE t DROP a", 0);
	apply_logged(s, l, "ks", "ALTER TABLE t ADD c text", 0);
	apply_logged(s, l, "ks", "CREATE TABLE t2 (k int PRIMARY KEY)", 8);
	apply_logged(s, l, "ks", "DROP TABLE t2", 0);
	ck_assert_int_eq(cql_schema_log_sync(l), 0);
	cql_schema_log_close(l);
	return s;
}

START_TEST(replay_rebuilds_ids_versions_and_column_slots)
{
	struct cql_schema *a = build_logged();
	struct cql_schema *b = cql_schema_new();
	struct cql_schema_log *l = cql_schema_log_open(env, path);
	ck_assert_int_eq(cql_schema_log_replay(l, b, NULL, NULL), 6);
	cql_schema_log_close(l);
	assert_same_version(a, b);
	const struct cql_table *t = cql_schema_table(b, "ks", "t");
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(cql_table_meta(t)->id[15], 7);
	ck_assert(cql_table_column_dropped(t, 1)); /* a keeps its slot */
	ck_assert_int_eq(cql_table_column(t, "c"), 3);
	ck_assert_ptr_null(cql_schema_table(b, "ks", "t2"));
	cql_schema_delete(a);
	cql_schema_delete(b);
}
END_TEST

START_TEST(a_drop_records_its_time_for_every_replay_and_peer)
{
	struct cql_schema *s = build_logged();
	struct cql_schema_log *l = open_log(path);
	const char *q = "ALTER TABLE t DROP b";
	struct buf body;
	buf_init(&body);
	ck_assert_int_eq(cql_schema_record_encode(&body, "ks", (uint8_t[16]){0},
						  q, strlen(q),
						  1700000000123456, -1),
			 0);
	ck_assert_uint_eq(body.data[0], 2); /* a version-2 record */
	struct cql_schema_change ch;
	ck_assert_int_eq(cql_schema_record_apply(s, body.data, body.len, &ch),
			 CQL_SCHEMA_OK);
	ck_assert_int_eq(cql_schema_log_append_record(l, body.data, body.len),
			 0);
	buf_free(&body);
	cql_schema_log_close(l);
	const struct storage_table_meta *m =
		cql_table_meta(cql_schema_table(s, "ks", "t"));
	ck_assert(m->columns[2].dropped);
	ck_assert_int_eq(m->columns[2].dropped_at, 1700000000123456);
	ck_assert_int_eq(m->columns[1].dropped_at, 0); /* a version-1 DROP */

	struct cql_schema *b = cql_schema_new();
	l = cql_schema_log_open(env, path);
	ck_assert_int_eq(cql_schema_log_replay(l, b, NULL, NULL), 7);
	cql_schema_log_close(l);
	m = cql_table_meta(cql_schema_table(b, "ks", "t"));
	ck_assert_int_eq(m->columns[2].dropped_at, 1700000000123456);
	assert_same_version(s, b);
	cql_schema_delete(s);
	cql_schema_delete(b);
}
END_TEST

/* A record of one node's CREATE TABLE, applied on another: the
 * cql_service_apply_record path. */
static enum cql_schema_status apply_record_of(struct cql_schema *s,
					      const char *q, uint8_t idbyte,
					      struct cql_schema_change *ch)
{
	uint8_t id[16] = {0};
	id[15] = idbyte;
	struct buf body;
	buf_init(&body);
	ck_assert_int_eq(
		cql_schema_record_encode(&body, "ks", id, q, strlen(q), 0, -1),
		0);
	enum cql_schema_status st =
		cql_schema_record_apply(s, body.data, body.len, ch);
	buf_free(&body);
	return st;
}

/* Two nodes create the same table at once (apps run CREATE TABLE IF NOT
 * EXISTS at startup against different coordinators): each applies its own
 * id, then the other's record. Both must end with one table, the id that
 * sorts first, whatever the order, and so must a replay of the log of the
 * node whose table was replaced. Before, each kept its own id and every
 * write to the table failed on the other replicas ("unknown table"). */
START_TEST(a_create_table_race_settles_on_one_id_everywhere)
{
	const char *ks = "CREATE KEYSPACE ks WITH replication = {'class': "
			 "'SimpleStrategy', 'replication_factor': 1}";
	const char *qa = "CREATE TABLE IF NOT EXISTS ks.r (k int PRIMARY KEY)";
	const char *qb = "CREATE TABLE IF NOT EXISTS ks.r (k int PRIMARY KEY, "
			 "v text)";
	struct cql_schema *a = cql_schema_new(), *b = cql_schema_new();
	struct cql_schema_log *l = open_log(path);
	apply_logged(a, l, NULL, ks, 0);
	apply_logged(a, l, NULL, qa, 9);
	struct cql_schema_log *lb = open_log(path_b);
	apply_logged(b, lb, NULL, ks, 0);
	apply_logged(b, lb, NULL, qb, 5);
	cql_schema_log_close(lb);

	struct cql_schema_change ch;
	/* b's id sorts first: a takes b's table */
	ck_assert_int_eq(apply_record_of(a, qb, 5, &ch), CQL_SCHEMA_OK);
	ck_assert_str_eq(ch.change, "UPDATED");
	ck_assert(ch.replaced);
	ck_assert_uint_eq(ch.old_id[15], 9);
	/* a's loses on b */
	ck_assert_int_eq(apply_record_of(b, qa, 9, &ch), CQL_SCHEMA_NOOP);
	/* the same record twice, or the winner again: nothing to do */
	ck_assert_int_eq(apply_record_of(a, qb, 5, &ch), CQL_SCHEMA_NOOP);

	const struct storage_table_meta *m =
		cql_table_meta(cql_schema_table(a, "ks", "r"));
	ck_assert_uint_eq(m->id[15], 5);
	ck_assert_uint_eq(m->column_count, 2); /* b's definition */
	assert_same_version(a, b);

	/* a logs the record it took after its own: a replay ends the same */
	uint8_t id[16] = {0};
	id[15] = 5;
	ck_assert_int_eq(cql_schema_log_append(l, "ks", id, qb, strlen(qb)), 0);
	cql_schema_log_close(l);
	struct cql_schema *r = cql_schema_new();
	l = cql_schema_log_open(env, path);
	ck_assert_int_eq(cql_schema_log_replay(l, r, NULL, NULL), 3);
	cql_schema_log_close(l);
	assert_same_version(a, r);

	/* a client's CREATE of an existing table still gets Already_exists */
	struct arena ar;
	int binds;
	arena_create(&ar, 0);
	const char *q = "CREATE TABLE ks.r (k int PRIMARY KEY)";
	struct cql_stmt *st = cql_parse(&ar, q, strlen(q), &binds, NULL);
	id[15] = 1;
	ck_assert_int_eq(cql_schema_apply(a, st, NULL, id, &ch),
			 CQL_SCHEMA_ALREADY_EXISTS);
	arena_destroy(&ar);
	cql_schema_delete(a);
	cql_schema_delete(b);
	cql_schema_delete(r);
}
END_TEST

/* A peer's ALTER TABLE ADD record, run where the table had `before`
 * columns. */
static enum cql_schema_status add_record_of(struct cql_schema *s, const char *q,
					    int before,
					    struct cql_schema_change *ch)
{
	struct buf body;
	buf_init(&body);
	ck_assert_int_eq(cql_schema_record_encode(&body, "ks", (uint8_t[16]){0},
						  q, strlen(q), 0, before),
			 0);
	enum cql_schema_status st =
		cql_schema_record_apply(s, body.data, body.len, ch);
	buf_free(&body);
	return st;
}

/* Logs an ALTER TABLE ADD record, run where the table had `before`
 * columns. */
static void log_add(struct cql_schema_log *l, const char *q, int before)
{
	struct buf body;
	buf_init(&body);
	ck_assert_int_eq(cql_schema_record_encode(&body, "ks", (uint8_t[16]){0},
						  q, strlen(q), 0, before),
			 0);
	ck_assert_int_eq(cql_schema_log_append_record(l, body.data, body.len),
			 0);
	buf_free(&body);
}

static bool diverged(const struct cql_schema *s)
{
	return cql_table_columns_diverged(cql_schema_table(s, "ks", "t"));
}

/* Two nodes add a column each to one table at the same moment: each
 * numbers its own column 3 and the other's 4, and cells travel by number,
 * so a value written as one column was read as the other (a text read as
 * a bigint, checked with the driver). Every node must see that it
 * happened, in any order, and replays too; ADDs one after the other must
 * not be taken for it. */
START_TEST(adds_that_raced_mark_the_table_on_every_node)
{
	const char *qa = "ALTER TABLE ks.t ADD x text";
	const char *qb = "ALTER TABLE ks.t ADD y bigint";
	struct cql_schema *a = build_logged(); /* ks.t: k, a, b, c: 4 */
	struct cql_schema_log *l = open_log(path);
	struct cql_schema *b = cql_schema_new(), *c = cql_schema_new();
	ck_assert_int_eq(cql_schema_log_replay(l, b, NULL, NULL), 6);
	ck_assert_int_eq(cql_schema_log_replay(l, c, NULL, NULL), 6);
	struct cql_schema_change ch;
	/* each node runs its own ADD, then gets the other's record */
	ck_assert_int_eq(add_record_of(a, qa, -1, &ch), CQL_SCHEMA_OK);
	ck_assert_int_eq(add_record_of(b, qb, -1, &ch), CQL_SCHEMA_OK);
	ck_assert(!diverged(a) && !diverged(b));
	ck_assert_int_eq(add_record_of(a, qb, 4, &ch), CQL_SCHEMA_OK);
	ck_assert(ch.diverged && diverged(a));
	ck_assert_int_eq(add_record_of(b, qa, 4, &ch), CQL_SCHEMA_OK);
	ck_assert(ch.diverged && diverged(b));
	/* a third node gets both: the first applies, the second tells */
	ck_assert_int_eq(add_record_of(c, qa, 4, &ch), CQL_SCHEMA_OK);
	ck_assert(!ch.diverged && !diverged(c));
	ck_assert_int_eq(add_record_of(c, qb, 4, &ch), CQL_SCHEMA_OK);
	ck_assert(ch.diverged && diverged(c));
	/* a later ADD keeps the mark, and says nothing new */
	ck_assert_int_eq(add_record_of(c, "ALTER TABLE ks.t ADD z int", 6, &ch),
			 CQL_SCHEMA_OK);
	ck_assert(!ch.diverged && diverged(c));

	/* one after the other: no mark, and a replay of the records */
	log_add(l, qa, 4);
	log_add(l, qb, 5);
	struct cql_schema *r = cql_schema_new();
	ck_assert_int_eq(cql_schema_log_replay(l, r, NULL, NULL), 8);
	ck_assert(!diverged(r));
	/* the raced pair in a log marks the table again on replay */
	log_add(l, "ALTER TABLE ks.t ADD w int", 5);
	struct cql_schema *r2 = cql_schema_new();
	ck_assert_int_eq(cql_schema_log_replay(l, r2, NULL, NULL), 9);
	ck_assert(diverged(r2));
	cql_schema_log_close(l);
	cql_schema_delete(a);
	cql_schema_delete(b);
	cql_schema_delete(c);
	cql_schema_delete(r);
	cql_schema_delete(r2);
}
END_TEST

/* The same for a keyspace created on two nodes at once with other options:
 * both end with the options that sort first (RF 1 before RF 3 here), and
 * the tables created in the other one stay. Identical creations are the
 * same keyspace. */
START_TEST(a_create_keyspace_race_settles_on_one_replication)
{
	const char *k1 = "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = "
			 "{'class': 'SimpleStrategy', 'replication_factor': 1}";
	const char *k3 = "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = "
			 "{'class': 'SimpleStrategy', 'replication_factor': 3}";
	struct cql_schema *a = cql_schema_new(), *b = cql_schema_new();
	struct cql_schema_log *l = open_log(path);
	apply_logged(a, l, NULL, k1, 0);
	cql_schema_log_close(l);
	l = open_log(path_b);
	apply_logged(b, l, NULL, k3, 0);
	apply_logged(b, l, NULL, "CREATE TABLE ks.t (k int PRIMARY KEY)", 4);
	cql_schema_log_close(l);

	struct cql_schema_change ch;
	ck_assert_int_eq(apply_record_of(a, k3, 0, &ch), CQL_SCHEMA_NOOP);
	ck_assert_int_eq(apply_record_of(b, k1, 0, &ch), CQL_SCHEMA_OK);
	ck_assert_str_eq(ch.change, "UPDATED");
	ck_assert_str_eq(ch.target, "KEYSPACE");
	ck_assert(ch.replaced);
	ck_assert_int_eq(apply_record_of(b, k1, 0, &ch), CQL_SCHEMA_NOOP);
	ck_assert_int_eq(ring_strategy_rf(cql_keyspace_strategy(
						  cql_schema_keyspace(b, "ks")),
					  "dc1"),
			 1);
	ck_assert_ptr_nonnull(cql_schema_table(b, "ks", "t"));
	ck_assert_int_eq(
		apply_record_of(a, "CREATE TABLE ks.t (k int PRIMARY KEY)", 4,
				&ch),
		CQL_SCHEMA_OK);
	assert_same_version(a, b);
	cql_schema_delete(a);
	cql_schema_delete(b);
}
END_TEST

/* A peer's record stamped at `time_us`, applied here and, when it
 * applied, logged to `l` (NULL: not logged), as cql_service does. */
static enum cql_schema_status timed_record(struct cql_schema *s,
					   struct cql_schema_log *l,
					   const char *q, int64_t time_us)
{
	struct buf body;
	struct cql_schema_change ch;
	buf_init(&body);
	ck_assert_int_eq(cql_schema_record_encode(&body, "ks", (uint8_t[16]){0},
						  q, strlen(q), time_us, -1),
			 0);
	enum cql_schema_status st =
		cql_schema_record_apply(s, body.data, body.len, &ch);
	if (st == CQL_SCHEMA_OK && l)
		ck_assert_int_eq(
			cql_schema_log_append_record(l, body.data, body.len),
			0);
	buf_free(&body);
	return st;
}

static const struct cql_table_options *options_of(const struct cql_schema *s)
{
	return cql_table_options(cql_schema_table(s, "ks", "t"));
}

static int64_t gc_grace_of(const struct cql_schema *s)
{
	return cql_table_meta(cql_schema_table(s, "ks", "t"))
		->options.gc_grace_seconds;
}

/* Two operators (or migration tools) change options on two nodes at once.
 * Each node used to keep whichever change reached it last, so the nodes
 * kept different options and schema versions for good, and drivers waited
 * out their agreement timeout on every later DDL. Now, per option, the
 * write stamped later wins on every node in any order; a replay of a log
 * does the same; a change that lost every option changes nothing. */
START_TEST(alters_of_options_that_raced_keep_the_later_write_everywhere)
{
	const char *qa = "ALTER TABLE ks.t WITH comment = 'from a' AND "
			 "gc_grace_seconds = 100";
	const char *qb = "ALTER TABLE ks.t WITH comment = 'from b' AND "
			 "default_time_to_live = 60";
	const char *r2 = "ALTER KEYSPACE ks WITH replication = {'class': "
			 "'SimpleStrategy', 'replication_factor': 2}";
	const char *r3 = "ALTER KEYSPACE ks WITH replication = {'class': "
			 "'SimpleStrategy', 'replication_factor': 3}";
	const char *nd = "ALTER KEYSPACE ks WITH durable_writes = false";
	struct cql_schema *a = build_logged();
	struct cql_schema_log *l = open_log(path);
	struct cql_schema *b = cql_schema_new();
	ck_assert_int_eq(cql_schema_log_replay(l, b, NULL, NULL), 6);
	cql_schema_log_close(l);
	l = open_log(path); /* a's log: what a applies, in its order */

	/* each node runs its own change first, then gets the other's */
	ck_assert_int_eq(timed_record(a, l, qa, 1000), CQL_SCHEMA_OK);
	ck_assert_int_eq(timed_record(b, NULL, qb, 2000), CQL_SCHEMA_OK);
	ck_assert_int_eq(timed_record(a, l, qb, 2000), CQL_SCHEMA_OK);
	/* b keeps its later comment, and takes a's gc_grace_seconds */
	ck_assert_int_eq(timed_record(b, NULL, qa, 1000), CQL_SCHEMA_OK);
	ck_assert_str_eq(options_of(a)->comment, "from b");
	ck_assert_str_eq(options_of(b)->comment, "from b");
	ck_assert_int_eq(gc_grace_of(a), 100);
	ck_assert_int_eq(gc_grace_of(b), 100);
	assert_same_version(a, b);

	/* a change older than every option it sets changes nothing */
	ck_assert_int_eq(timed_record(a, l,
				      "ALTER TABLE ks.t WITH comment = 'old'",
				      1500),
			 CQL_SCHEMA_NOOP);
	/* ... and is still checked */
	ck_assert_int_eq(timed_record(a, l,
				      "ALTER TABLE ks.t WITH comment = 'x' AND "
				      "gc_grace_seconds = -1",
				      1500),
			 CQL_SCHEMA_CONFIG);

	/* keyspaces: replication and durable_writes each keep the later */
	ck_assert_int_eq(timed_record(a, l, r3, 2500), CQL_SCHEMA_OK);
	ck_assert_int_eq(timed_record(b, NULL, r2, 3000), CQL_SCHEMA_OK);
	ck_assert_int_eq(timed_record(b, NULL, nd, 2600), CQL_SCHEMA_OK);
	ck_assert_int_eq(timed_record(b, NULL, r3, 2500), CQL_SCHEMA_NOOP);
	ck_assert_int_eq(timed_record(a, l, nd, 2600), CQL_SCHEMA_OK);
	ck_assert_int_eq(timed_record(a, l, r2, 3000), CQL_SCHEMA_OK);
	for (int i = 0; i < 2; i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace(i ? b : a, "ks");
		ck_assert_int_eq(
			ring_strategy_rf(cql_keyspace_strategy(k), "dc1"), 2);
		ck_assert(!cql_keyspace_meta(k)->durable_writes);
	}
	assert_same_version(a, b);

	/* a replay of a's log, and a record without a time (written before
	 * times were kept), which applies in log order */
	struct cql_schema *r = cql_schema_new();
	ck_assert_int_eq(cql_schema_log_replay(l, r, NULL, NULL), 11);
	assert_same_version(a, r);
	ck_assert_int_eq(timed_record(r, NULL,
				      "ALTER TABLE ks.t WITH comment = 'v1'",
				      0),
			 CQL_SCHEMA_OK);
	ck_assert_str_eq(options_of(r)->comment, "v1");
	cql_schema_log_close(l);
	cql_schema_delete(a);
	cql_schema_delete(b);
	cql_schema_delete(r);
}
END_TEST

START_TEST(a_torn_last_record_is_dropped)
{
	cql_schema_delete(build_logged());
	FILE *f = fopen(path, "ab");
	fwrite("\0\0\0\x40garbage", 1, 11, f); /* a header promising 64 bytes */
	fclose(f);
	struct cql_schema *b = cql_schema_new();
	struct cql_schema_log *l = cql_schema_log_open(env, path);
	ck_assert_int_eq(cql_schema_log_replay(l, b, NULL, NULL), 6);
	/* Cut back, so new records follow the good ones. */
	ck_assert_int_eq(cql_schema_log_append(l, "ks", (uint8_t[16]){0},
					       "ALTER TABLE t ADD d int", 23),
			 0);
	cql_schema_log_close(l);
	cql_schema_delete(b);
	b = cql_schema_new();
	l = cql_schema_log_open(env, path);
	ck_assert_int_eq(cql_schema_log_replay(l, b, NULL, NULL), 7);
	ck_assert_int_ge(cql_table_column(cql_schema_table(b, "ks", "t"), "d"),
			 0);
	cql_schema_log_close(l);
	cql_schema_delete(b);
}
END_TEST

START_TEST(corruption_before_the_end_refuses_with_the_offset)
{
	cql_schema_delete(build_logged());
	FILE *f = fopen(path, "r+b");
	fseek(f, 20, SEEK_SET);
	fputc('X', f); /* inside the first record */
	fclose(f);
	struct cql_schema *b = cql_schema_new();
	struct cql_schema_log *l = cql_schema_log_open(env, path);
	ck_assert_int_eq(cql_schema_log_replay(l, b, NULL, NULL), -1);
	ck_assert_int_eq(err_code(), ERR_CORRUPT);
	ck_assert_ptr_nonnull(
		strstr(err_msg(), "checksum mismatch at offset 0"));
	cql_schema_log_close(l);
	cql_schema_delete(b);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("schema_log");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, replay_rebuilds_ids_versions_and_column_slots);
	tcase_add_test(tc, a_torn_last_record_is_dropped);
	tcase_add_test(tc, a_drop_records_its_time_for_every_replay_and_peer);
	tcase_add_test(tc, a_create_table_race_settles_on_one_id_everywhere);
	tcase_add_test(tc, adds_that_raced_mark_the_table_on_every_node);
	tcase_add_test(tc, a_create_keyspace_race_settles_on_one_replication);
	tcase_add_test(
		tc,
		alters_of_options_that_raced_keep_the_later_write_everywhere);
	tcase_add_test(tc, corruption_before_the_end_refuses_with_the_offset);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
