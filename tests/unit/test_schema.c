/* client/schema: DDL applied with Cassandra's rules, system keyspaces,
 * versioning, and old metadata staying valid across ALTERs for the readers
 * that pinned it (and freed once none does). */
#include "client/cql/cql_parse.h"
#include "client/schema/describe.h"
#include "client/schema/schema.h"
#include "common/err.h"
#include "ring/ring.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <string.h>

static struct cql_schema *schema;
static struct cql_schema_change change;
static int next_id;

static void setup(void)
{
	schema = cql_schema_new();
	ck_assert_msg(schema != NULL, "%s", err_msg());
	next_id = 1;
}

static void teardown(void)
{
	cql_schema_delete(schema);
}

static enum cql_schema_status run_in(struct cql_schema *s, const char *q,
				     const char *ks)
{
	struct arena a;
	int binds;
	uint8_t id[16] = {0};
	id[15] = (uint8_t)next_id++;
	arena_create(&a, 0);
	struct cql_stmt *st = cql_parse(&a, q, strlen(q), &binds, NULL);
	ck_assert_msg(st != NULL, "%s: %s", q, err_msg());
	enum cql_schema_status rc = cql_schema_apply(s, st, ks, id, &change);
	arena_destroy(&a);
	return rc;
}

static enum cql_schema_status run(const char *q)
{
	return run_in(schema, q, "ks");
}

static void ok(const char *q)
{
	enum cql_schema_status rc = run(q);
	ck_assert_msg(rc == CQL_SCHEMA_OK, "%s -> %d %s", q, rc, err_msg());
}

static void refused(const char *q, enum cql_schema_status want, const char *msg)
{
	enum cql_schema_status rc = run(q);
	ck_assert_msg(rc == want, "%s -> %d (%s), wanted %d", q, rc, err_msg(),
		      want);
	ck_assert_msg(strstr(err_msg(), msg) != NULL, "%s -> '%s' lacks '%s'",
		      q, err_msg(), msg);
}

static const struct storage_column *col(const struct cql_table *t,
					const char *name)
{
	int c = cql_table_column(t, name);
	ck_assert_msg(c >= 0, "no column %s", name);
	return &cql_table_meta(t)->columns[c];
}

START_TEST(system_keyspaces_hold_the_tables_drivers_read)
{
	const char *ks[] = {"system", "system_auth", "system_distributed",
			    "system_schema", "system_traces"};
	ck_assert_uint_eq(cql_schema_keyspace_count(schema), 5);
	for (size_t i = 0; i < 5; i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(schema, i);
		ck_assert_str_eq(cql_keyspace_meta(k)->name, ks[i]);
		ck_assert(cql_keyspace_is_system(k));
	}
	ck_assert_int_eq(ring_strategy_class(cql_keyspace_strategy(
				 cql_schema_keyspace(schema, "system"))),
			 RING_STRATEGY_LOCAL);
	const struct cql_table *local =
		cql_schema_table(schema, "system", "local");
	ck_assert_ptr_nonnull(local);
	char type[64];
	cql_type_text(col(local, "tokens")->type, type, sizeof(type));
	ck_assert_str_eq(type, "set<text>");
	cql_type_text(col(local, "truncated_at")->type, type, sizeof(type));
	ck_assert_str_eq(type, "map<uuid, blob>");
	ck_assert_int_eq(col(local, "key")->kind, STORAGE_COLUMN_PARTITION_KEY);
	const struct cql_table *peers =
		cql_schema_table(schema, "system", "peers_v2");
	ck_assert_int_eq(col(peers, "peer_port")->kind,
			 STORAGE_COLUMN_CLUSTERING);
	const struct cql_table *tables =
		cql_schema_table(schema, "system_schema", "tables");
	cql_type_text(col(tables, "flags")->type, type, sizeof(type));
	ck_assert_str_eq(type, "frozen<set<text>>");
	const char *names[] = {"keyspaces",      "tables",    "columns",
			       "types",          "functions", "aggregates",
			       "triggers",       "indexes",   "views",
			       "dropped_columns"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ck_assert_msg(
			cql_schema_table(schema, "system_schema", names[i]),
			"%s", names[i]);
	/* Users cannot change them. */
	refused("DROP KEYSPACE system", CQL_SCHEMA_UNAUTHORIZED,
		"system keyspace is not user-modifiable.");
	refused("CREATE TABLE system.mine (k int PRIMARY KEY)",
		CQL_SCHEMA_UNAUTHORIZED, "not user-modifiable");
	refused("ALTER TABLE system_schema.tables WITH comment = 'x'",
		CQL_SCHEMA_UNAUTHORIZED, "not user-modifiable");
	refused("CREATE KEYSPACE system_views WITH replication = "
		"{'class': 'SimpleStrategy', 'replication_factor': 1}",
		CQL_SCHEMA_UNAUTHORIZED, "not user-modifiable");
}
END_TEST

START_TEST(keyspaces_validate_replication)
{
	ok("CREATE KEYSPACE ks WITH replication = {'class': "
	   "'NetworkTopologyStrategy', 'dc1': 3, 'dc2': '2'} AND "
	   "durable_writes = false");
	ck_assert_str_eq(change.change, "CREATED");
	ck_assert_str_eq(change.target, "KEYSPACE");
	const struct cql_keyspace *k = cql_schema_keyspace(schema, "ks");
	ck_assert(!cql_keyspace_meta(k)->durable_writes);
	ck_assert_str_eq(
		cql_keyspace_meta(k)->replication_class,
		"org.apache.cassandra.locator.NetworkTopologyStrategy");
	ck_assert_int_eq(ring_strategy_rf(cql_keyspace_strategy(k), "dc1"), 3);

	refused("CREATE KEYSPACE ks WITH replication = {'class': "
		"'SimpleStrategy', 'replication_factor': 1}",
		CQL_SCHEMA_ALREADY_EXISTS,
		"Cannot add existing keyspace \"ks\"");
	ck_assert_int_eq(
		run("CREATE KEYSPACE IF NOT EXISTS ks WITH replication "
		    "= {'class': 'SimpleStrategy', "
		    "'replication_factor': 1}"),
		CQL_SCHEMA_NOOP);
	refused("CREATE KEYSPACE k2 WITH replication = {'class': "
		"'NetworkTopologyStrategy', 'replication_factor': 3}",
		CQL_SCHEMA_CONFIG,
		"replication_factor is an option for "
		"SimpleStrategy, not NetworkTopologyStrategy");
	refused("CREATE KEYSPACE k2 WITH replication = {'class': 'Foo'}",
		CQL_SCHEMA_CONFIG, "Unable to find replication strategy class");
	refused("CREATE KEYSPACE k2 WITH replication = {'class': "
		"'LocalStrategy'}",
		CQL_SCHEMA_CONFIG, "LocalStrategy");
	refused("CREATE KEYSPACE k2 WITH durable_writes = true",
		CQL_SCHEMA_CONFIG, "Missing mandatory option 'replication'");
	refused("CREATE KEYSPACE k2 WITH replication = {'class': "
		"'SimpleStrategy', 'replication_factor': 1} AND foo = 1",
		CQL_SCHEMA_SYNTAX, "Unknown property 'foo'");
	refused("CREATE KEYSPACE \"bad-name\" WITH replication = {'class': "
		"'SimpleStrategy', 'replication_factor': 1}",
		CQL_SCHEMA_INVALID, "Keyspace name must not be empty");

	/* ALTER keeps what it does not mention; tables survive. */
	ok("CREATE TABLE t (k int PRIMARY KEY)");
	ok("ALTER KEYSPACE ks WITH durable_writes = true");
	k = cql_schema_keyspace(schema, "ks");
	ck_assert(cql_keyspace_meta(k)->durable_writes);
	ck_assert_int_eq(ring_strategy_rf(cql_keyspace_strategy(k), "dc2"), 2);
	ck_assert_ptr_nonnull(cql_schema_table(schema, "ks", "t"));

	ok("DROP KEYSPACE ks");
	ck_assert_ptr_null(cql_schema_keyspace(schema, "ks"));
	ck_assert_int_eq(run("DROP KEYSPACE IF EXISTS ks"), CQL_SCHEMA_NOOP);
	refused("DROP KEYSPACE ks", CQL_SCHEMA_CONFIG,
		"Cannot drop non existing keyspace 'ks'.");
}
END_TEST

START_TEST(tables_get_keys_order_types_and_options)
{
	ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
	   "'replication_factor': 1}");
	ok("CREATE TABLE ks.events (day date, \"Sensor\" text, ts timeuuid, "
	   "seq int, v double, tags set<text>, meta frozen<map<text, int>>, "
	   "owner text static, PRIMARY KEY ((day, \"Sensor\"), ts, seq)) "
	   "WITH CLUSTERING ORDER BY (ts DESC, seq ASC) "
	   "AND default_time_to_live = 3600 AND gc_grace_seconds = 60 "
	   "AND compaction = {'class': 'TimeWindowCompactionStrategy', "
	   "'compaction_window_unit': 'HOURS', 'compaction_window_size': 6} "
	   "AND compression = {'class': 'DeflateCompressor', "
	   "'chunk_length_in_kb': 64} AND read_repair = 'NONE' "
	   "AND speculative_retry = '95p' AND comment = 'sensor data' "
	   "AND caching = {'keys': 'NONE'}");
	ck_assert_str_eq(change.target, "TABLE");
	ck_assert_str_eq(change.name, "events");
	const struct cql_table *t = cql_schema_table(schema, "ks", "events");
	const struct storage_table_meta *m = cql_table_meta(t);
	ck_assert_uint_eq(m->pk_count, 2);
	ck_assert_uint_eq(m->ck_count, 2);
	ck_assert_str_eq(m->columns[m->pk[1]].name, "Sensor");
	ck_assert(col(t, "ts")->desc);
	ck_assert(!col(t, "seq")->desc);
	ck_assert_int_eq(col(t, "owner")->kind, STORAGE_COLUMN_STATIC);
	ck_assert_int_eq(col(t, "tags")->type->kind, STORAGE_TYPE_SET);
	ck_assert(!col(t, "tags")->type->frozen);
	ck_assert(col(t, "meta")->type->frozen);
	ck_assert_int_eq(m->options.default_time_to_live, 3600);
	ck_assert_int_eq(m->options.gc_grace_seconds, 60);
	ck_assert_int_eq(m->options.compaction, STORAGE_COMPACTION_TIME_WINDOW);
	ck_assert_int_eq(m->options.compaction_window_seconds, 6 * 3600);
	ck_assert(m->options.tombstone_threshold == 0.2);
	ck_assert_int_eq(m->options.tombstone_compaction_interval, 86400);
	ck_assert(!m->options.unchecked_tombstone_compaction);
	ck_assert_int_eq(m->options.compression, STORAGE_COMPRESSION_DEFLATE);
	ck_assert_uint_eq(m->options.chunk_length, 64 * 1024);
	const struct cql_table_options *o = cql_table_options(t);
	ck_assert(!o->read_repair_blocking);
	ck_assert_str_eq(o->speculative_retry, "95p");
	ck_assert_str_eq(o->comment, "sensor data");
	ck_assert_str_eq(o->caching_keys, "NONE");
	ok("CREATE TABLE ks.tomb (k int PRIMARY KEY) WITH compaction = "
	   "{'class': 'SizeTieredCompactionStrategy', "
	   "'tombstone_threshold': '0.5', 'tombstone_compaction_interval': "
	   "'60', 'unchecked_tombstone_compaction': 'true'}");
	m = cql_table_meta(cql_schema_table(schema, "ks", "tomb"));
	ck_assert(m->options.tombstone_threshold == 0.5);
	ok("CREATE TABLE ks.lcs (k int PRIMARY KEY) WITH compaction = "
	   "{'class': 'org.apache.cassandra.db.compaction."
	   "LeveledCompactionStrategy', 'sstable_size_in_mb': 64, "
	   "'fanout_size': 8, 'single_sstable_uplevel': 'false'}");
	const struct storage_table_meta *lm =
		cql_table_meta(cql_schema_table(schema, "ks", "lcs"));
	ck_assert_int_eq(lm->options.compaction, STORAGE_COMPACTION_LEVELED);
	ck_assert_uint_eq(lm->options.sstable_size_bytes, 64u << 20);
	ck_assert_uint_eq(lm->options.fanout_size, 8);
	ck_assert_int_eq(m->options.tombstone_compaction_interval, 60);
	ck_assert(m->options.unchecked_tombstone_compaction);

	refused("CREATE TABLE events (k int PRIMARY KEY)",
		CQL_SCHEMA_ALREADY_EXISTS,
		"Cannot add already existing table \"events\" to keyspace "
		"\"ks\"");
	ck_assert_int_eq(run("CREATE TABLE IF NOT EXISTS events (k int PRIMARY "
			     "KEY)"),
			 CQL_SCHEMA_NOOP);
	ck_assert_int_eq(
		run_in(schema, "CREATE TABLE t (k int PRIMARY KEY)", NULL),
		CQL_SCHEMA_INVALID);
	ck_assert_str_eq(err_msg(), "No keyspace has been specified. USE a "
				    "keyspace, or explicitly specify "
				    "keyspace.tablename");
}
END_TEST

START_TEST(table_definitions_are_checked_like_cassandra)
{
	ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
	   "'replication_factor': 1}");
	refused("CREATE TABLE nosuch.t (k int PRIMARY KEY)", CQL_SCHEMA_INVALID,
		"Keyspace 'nosuch' doesn't exist");
	refused("CREATE TABLE t (k int PRIMARY KEY, k text)",
		CQL_SCHEMA_INVALID, "Multiple definition of identifier k");
	refused("CREATE TABLE t (k int, v int, PRIMARY KEY (k, x))",
		CQL_SCHEMA_INVALID,
		"Unknown definition x referenced in PRIMARY KEY");
	refused("CREATE TABLE t (k int PRIMARY KEY, v addr)",
		CQL_SCHEMA_INVALID, "Unknown type ks.addr");
	refused("CREATE TABLE t (k list<int> PRIMARY KEY)", CQL_SCHEMA_INVALID,
		"Invalid non-frozen collection type for PRIMARY KEY component "
		"k");
	ok("CREATE TABLE fk (k frozen<list<int>> PRIMARY KEY)");
	refused("CREATE TABLE t (k int PRIMARY KEY, s int static)",
		CQL_SCHEMA_INVALID, "Static columns are only useful");
	refused("CREATE TABLE t (k int, c int, v int, PRIMARY KEY (k, c)) WITH "
		"CLUSTERING ORDER BY (v DESC)",
		CQL_SCHEMA_INVALID, "Only clustering key columns");
	refused("CREATE TABLE t (k int, a int, b int, PRIMARY KEY (k, a, b)) "
		"WITH CLUSTERING ORDER BY (b DESC, a ASC)",
		CQL_SCHEMA_INVALID, "must be the one of the clustering key");
	refused("CREATE TABLE t (k int PRIMARY KEY, c counter, v int)",
		CQL_SCHEMA_INVALID, "Cannot mix counter and non counter");
	refused("CREATE TABLE t (k counter PRIMARY KEY, c counter)",
		CQL_SCHEMA_INVALID,
		"counter type is not supported for PRIMARY KEY column 'k'");
	refused("CREATE TABLE t (k int PRIMARY KEY, l list<list<int>>)",
		CQL_SCHEMA_INVALID,
		"Non-frozen collections are not allowed inside collections: "
		"list<list<int>>");
	refused("CREATE TABLE t (k int PRIMARY KEY, m map<set<int>, int>)",
		CQL_SCHEMA_INVALID,
		"Non-frozen collections are not allowed inside collections: "
		"map<set<int>, int>");
	refused("CREATE TABLE t (k int PRIMARY KEY, s set<duration>)",
		CQL_SCHEMA_INVALID,
		"Durations are not allowed inside sets: set<duration>");
	refused("CREATE TABLE t (k int PRIMARY KEY, m map<duration, text>)",
		CQL_SCHEMA_INVALID,
		"Durations are not allowed as map keys: map<duration, text>");
	refused("CREATE TABLE t (k duration PRIMARY KEY)", CQL_SCHEMA_INVALID,
		"duration type is not supported for PRIMARY KEY part k");
	refused("CREATE TABLE t (k int, c frozen<tuple<int, duration>>, "
		"PRIMARY KEY (k, c))",
		CQL_SCHEMA_INVALID,
		"duration type is not supported for PRIMARY KEY part c");
	refused("CREATE TABLE t (k int PRIMARY KEY, l list<counter>)",
		CQL_SCHEMA_INVALID,
		"Counters are not allowed inside collections: list<counter>");
	refused("CREATE TABLE t (k int PRIMARY KEY, v vector<float, 0>)",
		CQL_SCHEMA_INVALID,
		"vectors may only have positive dimentions; given 0");
	ok("CREATE TABLE nested (k frozen<map<frozen<set<int>>, text>> PRIMARY "
	   "KEY, l list<frozen<list<int>>>, f frozen<list<list<int>>>, "
	   "t tuple<int, list<text>>, d duration, ld list<duration>, "
	   "v vector<float, 3>)");
	{
		const struct cql_table *nt =
			cql_schema_table(schema, "ks", "nested");
		static const struct {
			const char *col, *text;
		} want[] = {
			{"k", "frozen<map<frozen<set<int>>, text>>"},
			{"l", "list<frozen<list<int>>>"},
			{"f", "frozen<list<frozen<list<int>>>>"},
			{"t", "frozen<tuple<int, frozen<list<text>>>>"},
			{"d", "duration"},
			{"ld", "list<duration>"},
			{"v", "vector<float, 3>"},
		};
		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			char text[128];
			ck_assert_int_eq(
				cql_type_text(col(nt, want[i].col)->type, text,
					      sizeof(text)),
				0);
			ck_assert_str_eq(text, want[i].text);
		}
	}
	refused("CREATE TABLE t (k int PRIMARY KEY, v frozen<int>)",
		CQL_SCHEMA_INVALID, "frozen<> is only allowed on collections");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH read_repair_chance = "
		"0.1",
		CQL_SCHEMA_SYNTAX, "Unknown property 'read_repair_chance'");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH gc_grace_seconds = -1",
		CQL_SCHEMA_CONFIG,
		"gc_grace_seconds must be greater than or "
		"equal to 0 (got -1)");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH "
		"bloom_filter_fp_chance "
		"= 2",
		CQL_SCHEMA_CONFIG,
		"bloom_filter_fp_chance must be larger than 6.71E-5");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH compaction = "
		"{'class': "
		"'UnifiedCompactionStrategy'}",
		CQL_SCHEMA_UNSUPPORTED,
		"UnifiedCompactionStrategy is not "
		"supported");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH compaction = "
		"{'class': 'LeveledCompactionStrategy', "
		"'single_sstable_uplevel': 'true'}",
		CQL_SCHEMA_UNSUPPORTED,
		"single_sstable_uplevel is not supported by Cassini yet");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH compaction = "
		"{'class': 'LeveledCompactionStrategy', "
		"'sstable_size_in_mb': 0}",
		CQL_SCHEMA_CONFIG,
		"sstable_size_in_mb must be larger than 0, but was 0");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH compaction = "
		"{'class': 'LeveledCompactionStrategy', "
		"'compaction_window_size': 1}",
		CQL_SCHEMA_CONFIG,
		"Properties specified [compaction_window_size] are not "
		"understood by LeveledCompactionStrategy");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH compaction = "
		"{'class': "
		"'SizeTieredCompactionStrategy', 'colour': 'red'}",
		CQL_SCHEMA_CONFIG,
		"Properties specified [colour] are not "
		"understood by SizeTieredCompactionStrategy");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH compaction = "
		"{'class': 'SizeTieredCompactionStrategy', "
		"'tombstone_threshold': -1}",
		CQL_SCHEMA_CONFIG,
		"tombstone_threshold must be greater than 0, but was "
		"-1.000000");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH compaction = "
		"{'class': 'SizeTieredCompactionStrategy', "
		"'tombstone_compaction_interval': 'soon'}",
		CQL_SCHEMA_CONFIG,
		"soon is not a parsable int (base10) for "
		"tombstone_compaction_interval");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH compaction = "
		"{'class': 'TimeWindowCompactionStrategy', "
		"'unchecked_tombstone_compaction': 'maybe'}",
		CQL_SCHEMA_CONFIG,
		"'unchecked_tombstone_compaction' should be either 'true' or "
		"'false', not 'maybe'");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH compaction = "
		"{'class': "
		"'SizeTieredCompactionStrategy', 'min_threshold': 8, "
		"'max_threshold': 4}",
		CQL_SCHEMA_CONFIG,
		"min_threshold cannot be greater than "
		"max_threshold");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH read_repair = "
		"'SOMETIMES'",
		CQL_SCHEMA_CONFIG,
		"Invalid value 'SOMETIMES' for option "
		"'read_repair'");
	refused("CREATE TABLE t (k int PRIMARY KEY) WITH compression = "
		"{'class': "
		"'LZ4Compressor', 'chunk_length_in_kb': 3}",
		CQL_SCHEMA_CONFIG, "chunk_length_in_kb must be a power of 2");
	/* A refused CREATE leaves nothing behind. */
	ck_assert_ptr_null(cql_schema_table(schema, "ks", "t"));
}
END_TEST

START_TEST(alter_and_drop_table_keep_old_metadata_valid)
{
	ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
	   "'replication_factor': 1}");
	ok("CREATE TABLE t (k int, c int, v text, PRIMARY KEY (k, c))");
	/* a reader keeping what it looks up across the changes below */
	struct cql_schema_pin pin;
	cql_schema_pin(schema, &pin);
	const struct cql_table *before = cql_schema_table(schema, "ks", "t");
	const struct storage_table_meta *old_meta = cql_table_meta(before);
	uint8_t v1[16], v2[16];
	cql_schema_version(schema, v1);

	ok("ALTER TABLE t ADD (n int, s set<text> static)");
	ck_assert_str_eq(change.change, "UPDATED");
	const struct cql_table *t = cql_schema_table(schema, "ks", "t");
	ck_assert_ptr_ne(t, before);
	ck_assert_uint_eq(cql_table_meta(t)->column_count, 5);
	ck_assert_uint_eq(old_meta->column_count, 3); /* still the old one */
	ck_assert_int_eq(col(t, "s")->kind, STORAGE_COLUMN_STATIC);
	cql_schema_version(schema, v2);
	ck_assert_int_ne(memcmp(v1, v2, 16), 0);

	ok("ALTER TABLE t DROP v");
	t = cql_schema_table(schema, "ks", "t");
	ck_assert_int_eq(cql_table_column(t, "v"), -1);
	ck_assert(cql_table_column_dropped(t, 2));
	ck_assert_int_eq(cql_table_meta(t)->columns[2].dropped_at, 0);
	refused("ALTER TABLE t DROP v", CQL_SCHEMA_INVALID,
		"Column v was not found in table 'ks.t'");
	refused("ALTER TABLE t DROP (n, nosuch)", CQL_SCHEMA_INVALID,
		"Column nosuch was not found in table 'ks.t'");
	ck_assert_int_ge(
		cql_table_column(cql_schema_table(schema, "ks", "t"), "n"), 0);
	refused("ALTER TABLE t DROP k", CQL_SCHEMA_INVALID,
		"Cannot drop PRIMARY KEY column k");
	refused("ALTER TABLE t ADD n text", CQL_SCHEMA_INVALID,
		"Column with name 'n' already exists");
	refused("ALTER TABLE t ADD c2 counter", CQL_SCHEMA_CONFIG,
		"ks.t: Cannot have a counter column (\"c2\") in a non counter "
		"table");
	refused("ALTER TABLE t ADD d set<duration>", CQL_SCHEMA_INVALID,
		"Durations are not allowed inside sets: set<duration>");
	refused("ALTER TABLE t ADD a addr", CQL_SCHEMA_INVALID,
		"Unknown type ks.addr");
	refused("ALTER TABLE t ADD v blob", CQL_SCHEMA_INVALID,
		"Cannot re-add previously dropped column 'v' of type blob, "
		"incompatible with previous type text");
	refused("ALTER TABLE t ADD v text static", CQL_SCHEMA_INVALID,
		"Cannot re-add previously dropped column 'v' of kind STATIC, "
		"incompatible with previous kind REGULAR");
	ok("ALTER TABLE t ADD v text"); /* a new slot, not the dropped one */
	t = cql_schema_table(schema, "ks", "t");
	ck_assert_int_eq(cql_table_column(t, "v"), 5);
	ck_assert(!cql_table_meta(t)->columns[5].dropped);
	ok("ALTER TABLE t DROP (v, n, v) USING TIMESTAMP 1234567");
	t = cql_schema_table(schema, "ks", "t");
	ck_assert(cql_table_meta(t)->columns[5].dropped);
	ck_assert_int_eq(cql_table_meta(t)->columns[5].dropped_at, 1234567);
	ck_assert_int_eq(cql_table_meta(t)->columns[3].dropped_at, 1234567);
	ok("ALTER TABLE t ADD (v text, n int)");
	t = cql_schema_table(schema, "ks", "t");
	/* cells up to the latest drop of the name stay hidden */
	ck_assert_int_eq(
		cql_table_meta(t)->columns[cql_table_column(t, "v")].dropped_at,
		1234567);

	ok("ALTER TABLE t RENAME c TO c2");
	ck_assert_int_ge(
		cql_table_column(cql_schema_table(schema, "ks", "t"), "c2"), 0);
	refused("ALTER TABLE t RENAME n TO m", CQL_SCHEMA_INVALID,
		"Cannot rename non PRIMARY KEY column n");
	ok("ALTER TABLE t WITH comment = 'hi' AND gc_grace_seconds = 5");
	t = cql_schema_table(schema, "ks", "t");
	ck_assert_str_eq(cql_table_options(t)->comment, "hi");
	ck_assert_int_eq(cql_table_meta(t)->options.gc_grace_seconds, 5);
	refused("ALTER TABLE nosuch ADD x int", CQL_SCHEMA_INVALID,
		"Table 'ks.nosuch' doesn't exist");
	refused("ALTER TABLE nosuch DROP x", CQL_SCHEMA_INVALID,
		"Table 'ks.nosuch' doesn't exist");
	ok("CREATE TABLE u (k int PRIMARY KEY, v int)");
	refused("ALTER TABLE u ADD s int static", CQL_SCHEMA_INVALID,
		"Static columns are only useful (and thus allowed) if the "
		"table has at least one clustering column");
	ok("DROP TABLE u");

	ok("DROP TABLE t");
	ck_assert_str_eq(change.change, "DROPPED");
	ck_assert_ptr_null(cql_schema_table(schema, "ks", "t"));
	ck_assert_str_eq(old_meta->name, "t"); /* retired, not freed */
	ck_assert_int_eq(run("DROP TABLE IF EXISTS t"), CQL_SCHEMA_NOOP);
	refused("DROP TABLE t", CQL_SCHEMA_INVALID,
		"Table 'ks.t' doesn't exist");
	struct cql_schema_retained r;
	cql_schema_retained(schema, &r);
	ck_assert_uint_ge(r.objects, 9); /* every version of t, and u */
	cql_schema_unpin(schema, &pin);
	cql_schema_retained(schema, &r);
	ck_assert_uint_eq(r.objects, 0);
	ck_assert_uint_eq(r.pins, 0);
}
END_TEST

static size_t retained(void)
{
	struct cql_schema_retained r;
	cql_schema_retained(schema, &r);
	return r.objects;
}

/* The lifetime rule (schema.h): a replaced or dropped object lives while
 * a reader pinned before its change does, and no longer. Before, every
 * version of every table stayed until the registry was deleted (10 KB a
 * CREATE/DROP pair on a node, 1.6 GB after a long schema churn). */
START_TEST(retired_objects_live_while_an_older_pin_does)
{
	ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
	   "'replication_factor': 1}");
	ok("CREATE TABLE t (k int PRIMARY KEY, v int)");
	/* no reader: a change frees what it replaced at once */
	ok("ALTER TABLE t WITH comment = 'one'");
	ok("DROP TABLE t");
	ck_assert_uint_eq(retained(), 0);

	ok("CREATE TABLE t (k int PRIMARY KEY, v int)");
	struct cql_schema_pin a, b;
	cql_schema_pin(schema, &a);
	const struct cql_table *t1 = cql_schema_table(schema, "ks", "t");
	ok("ALTER TABLE t WITH comment = 'two'"); /* retires t1 */
	cql_schema_pin(schema, &b);
	const struct cql_table *t2 = cql_schema_table(schema, "ks", "t");
	ok("ALTER TABLE t WITH comment = 'three'"); /* retires t2 */
	ck_assert_uint_eq(retained(), 2);
	/* both still readable (ASan checks) */
	ck_assert_str_eq(cql_table_options(t1)->comment, "");
	ck_assert_str_eq(cql_table_options(t2)->comment, "two");
	/* releasing the younger pin frees nothing: a holds both */
	cql_schema_unpin(schema, &b);
	ck_assert_uint_eq(retained(), 2);
	cql_schema_pin(schema, &b);
	t2 = NULL; /* b is a new pin: what it may hold is current */
	/* the oldest goes: t1 and t2 were retired before b was taken */
	cql_schema_unpin(schema, &a);
	ck_assert_uint_eq(retained(), 0);
	ok("DROP KEYSPACE ks"); /* b holds the keyspace and its table */
	ck_assert_uint_eq(retained(), 1);
	cql_schema_unpin(schema, &b);
	ck_assert_uint_eq(retained(), 0);
	(void)t2;
}
END_TEST

/* CREATE and DROP TABLE 2000 times (a schema churn) with no reader
 * holding anything: the heap comes back to where it was. The tolerance
 * (16 KiB, 8 bytes a table) is far below one kept table (about 600 bytes
 * with its meta). */
START_TEST(a_schema_churn_returns_its_memory)
{
	ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
	   "'replication_factor': 1}");
	char q[128];
	for (int i = 0; i < 100; i++) { /* warm the allocator's caches */
		snprintf(q, sizeof(q), "CREATE TABLE w%d (k int PRIMARY KEY)",
			 i);
		ok(q);
		snprintf(q, sizeof(q), "DROP TABLE w%d", i);
		ok(q);
	}
	size_t before = test_heap_in_use();
	for (int i = 0; i < 2000; i++) {
		/* ok() asserts: Check records each in memory when not
		 * forking; compare statuses by hand */
		if (run("CREATE TABLE churn (k int PRIMARY KEY, v text, "
			"s set<int>)") != CQL_SCHEMA_OK ||
		    run("DROP TABLE churn") != CQL_SCHEMA_OK)
			ck_abort_msg("churn %d: %s", i, err_msg());
	}
	size_t after = test_heap_in_use();
	ck_assert_msg(after < before + 16 * 1024,
		      "heap grew from %zu to %zu bytes over 2000 tables",
		      before, after);
	ck_assert_uint_eq(retained(), 0);
}
END_TEST

/* Every schema change moves the generation a reader caches lookups by;
 * a lookup alone does not. */
START_TEST(every_change_moves_the_generation)
{
	const char *ddl[] = {
		"CREATE KEYSPACE g WITH replication = {'class': "
		"'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE g.t (k int PRIMARY KEY, v text)",
		"ALTER TABLE g.t ADD w int",
		"ALTER TABLE g.t WITH comment = 'x'",
		"ALTER KEYSPACE g WITH replication = {'class': "
		"'SimpleStrategy', 'replication_factor': 2}",
		"DROP TABLE g.t",
		"DROP KEYSPACE g",
	};
	for (size_t i = 0; i < sizeof(ddl) / sizeof(ddl[0]); i++) {
		uint64_t before = cql_schema_generation(schema);
		ok(ddl[i]);
		ck_assert_msg(cql_schema_generation(schema) != before, "%s",
			      ddl[i]);
	}
	uint64_t now = cql_schema_generation(schema);
	ck_assert_ptr_null(cql_schema_table(schema, "g", "t"));
	ck_assert_uint_eq(cql_schema_generation(schema), now);
}
END_TEST

START_TEST(same_ddl_gives_the_same_version_on_every_node)
{
	struct cql_schema *other = cql_schema_new();
	uint8_t a[16], b[16];
	cql_schema_version(schema, a);
	cql_schema_version(other, b);
	ck_assert_int_eq(memcmp(a, b, 16), 0);
	ck_assert_uint_eq(a[6] >> 4, 3); /* a valid v3 uuid */
	const char *ddl[] = {"CREATE KEYSPACE ks WITH replication = {'class': "
			     "'SimpleStrategy', 'replication_factor': 2}",
			     "CREATE TABLE ks.kv (k text PRIMARY KEY, v blob)"};
	for (size_t i = 0; i < 2; i++) {
		next_id = 10;
		ck_assert_int_eq(run_in(schema, ddl[i], NULL), CQL_SCHEMA_OK);
		next_id = 10;
		ck_assert_int_eq(run_in(other, ddl[i], NULL), CQL_SCHEMA_OK);
	}
	cql_schema_version(schema, a);
	cql_schema_version(other, b);
	ck_assert_int_eq(memcmp(a, b, 16), 0);
	ck_assert_int_eq(
		run_in(other, "ALTER TABLE ks.kv WITH comment = 'x'", NULL),
		CQL_SCHEMA_OK);
	cql_schema_version(other, b);
	ck_assert_int_ne(memcmp(a, b, 16), 0);
	cql_schema_delete(other);
}
END_TEST

/* The version is kept up to date table by table (a digest per table,
 * summed per keyspace) rather than rebuilt from every column: it still
 * moves with every change of a table, a column or a keyspace, comes back
 * when a change is undone (a table dropped, or altered back), and does
 * not depend on the order the tables came in. */
START_TEST(the_version_follows_every_change_and_only_the_schema)
{
	struct cql_schema *other = cql_schema_new();
	uint8_t v[8][16], w[16];
	ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
	   "'replication_factor': 1}");
	cql_schema_version(schema, v[0]);
	ok("CREATE TABLE a (k int PRIMARY KEY, v int)");
	cql_schema_version(schema, v[1]);
	ok("CREATE TABLE b (k int PRIMARY KEY, v int)");
	cql_schema_version(schema, v[2]);
	ok("ALTER TABLE b ADD w text");
	cql_schema_version(schema, v[3]);
	ok("ALTER TABLE b WITH gc_grace_seconds = 7");
	cql_schema_version(schema, v[4]);
	ok("ALTER KEYSPACE ks WITH replication = {'class': "
	   "'SimpleStrategy', 'replication_factor': 2}");
	cql_schema_version(schema, v[5]);
	ok("DROP TABLE b");
	cql_schema_version(schema, v[6]);
	for (int i = 0; i < 7; i++)
		for (int j = 0; j < i; j++)
			ck_assert_msg(memcmp(v[i], v[j], 16) != 0,
				      "versions %d and %d", i, j);
	/* b gone: the same tables as after step 1, replication aside */
	ok("ALTER KEYSPACE ks WITH replication = {'class': "
	   "'SimpleStrategy', 'replication_factor': 1}");
	cql_schema_version(schema, w);
	ck_assert_int_eq(memcmp(w, v[1], 16), 0);

	/* the same schema built in another order: the same version */
	ck_assert_int_eq(run_in(other,
				"CREATE KEYSPACE ks WITH replication = "
				"{'class': 'SimpleStrategy', "
				"'replication_factor': 1}",
				NULL),
			 CQL_SCHEMA_OK);
	next_id = 1; /* ids as `schema` gave them: c 1, a 2 */
	ok("CREATE TABLE c (k int PRIMARY KEY)");
	next_id = 1;
	ck_assert_int_eq(
		run_in(other, "CREATE TABLE c (k int PRIMARY KEY)", "ks"),
		CQL_SCHEMA_OK);
	next_id = 2;
	ck_assert_int_eq(run_in(other,
				"CREATE TABLE a (k int PRIMARY KEY, v int)",
				"ks"),
			 CQL_SCHEMA_OK);
	cql_schema_version(schema, v[7]);
	cql_schema_version(other, w);
	ck_assert_int_eq(memcmp(w, v[7], 16), 0);
	cql_schema_delete(other);
}
END_TEST

/* The CREATE text DESCRIBE returns (client/schema/describe.c). */
static void describes_as(const char *ks, const char *table, const char *want)
{
	struct buf b;
	buf_init(&b);
	int rc = table ? cql_describe_table_text(
				 cql_schema_table(schema, ks, table), false, &b)
		       : cql_describe_keyspace_text(
				 cql_schema_keyspace(schema, ks), &b);
	ck_assert_msg(rc == 0, "%s", err_msg());
	ck_assert_int_eq(buf_put_u8(&b, '\0'), 0);
	ck_assert_str_eq((const char *)b.data, want);
	buf_free(&b);
}

START_TEST(describe_prints_cassandras_create_statements)
{
	ok("CREATE KEYSPACE ks WITH replication = {'class': "
	   "'NetworkTopologyStrategy', 'dc2': 1, 'dc1': '3'} AND "
	   "durable_writes = false");
	describes_as("ks", NULL,
		     "CREATE KEYSPACE ks WITH replication = {'class': "
		     "'NetworkTopologyStrategy', 'dc1': '3', 'dc2': '1'}  AND "
		     "durable_writes = false;");
	ok("CREATE TABLE \"Tab\" (\"Key\" int PRIMARY KEY, l list<int>, "
	   "b boolean, \"from\" frozen<set<text>>) WITH comment = 'x''y' AND "
	   "compression = {'enabled': false} AND bloom_filter_fp_chance = "
	   "0.0001 AND gc_grace_seconds = 0");
	describes_as("ks", "Tab",
		     "CREATE TABLE ks.\"Tab\" (\n"
		     "    \"Key\" int PRIMARY KEY,\n"
		     "    b boolean,\n"
		     "    \"from\" frozen<set<text>>,\n"
		     "    l list<int>\n"
		     ") WITH additional_write_policy = '99p'\n"
		     "    AND bloom_filter_fp_chance = 1.0E-4\n"
		     "    AND caching = {'keys': 'ALL', 'rows_per_partition': "
		     "'NONE'}\n"
		     "    AND cdc = false\n"
		     "    AND comment = 'x''y'\n"
		     "    AND compaction = {'class': "
		     "'org.apache.cassandra.db.compaction."
		     "SizeTieredCompactionStrategy', 'max_threshold': '32', "
		     "'min_threshold': '4'}\n"
		     "    AND compression = {'enabled': 'false'}\n"
		     "    AND crc_check_chance = 1.0\n"
		     "    AND default_time_to_live = 0\n"
		     "    AND extensions = {}\n"
		     "    AND gc_grace_seconds = 0\n"
		     "    AND max_index_interval = 2048\n"
		     "    AND memtable_flush_period_in_ms = 0\n"
		     "    AND min_index_interval = 128\n"
		     "    AND read_repair = 'BLOCKING'\n"
		     "    AND speculative_retry = '99p';");
	ok("CREATE TABLE t (p1 int, p2 text, c1 int, c2 int, s int static, "
	   "v int, PRIMARY KEY ((p1, p2), c1, c2)) WITH CLUSTERING ORDER BY "
	   "(c1 DESC, c2 ASC) AND compaction = {'class': "
	   "'TimeWindowCompactionStrategy', 'compaction_window_unit': 'DAYS', "
	   "'compaction_window_size': 1}");
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(cql_describe_table_text(
				 cql_schema_table(schema, "ks", "t"), true, &b),
			 0);
	ck_assert_int_eq(buf_put_u8(&b, '\0'), 0);
	const char *text = (const char *)b.data;
	static const char head[] =
		"CREATE TABLE ks.t (\n"
		"    p1 int,\n"
		"    p2 text,\n"
		"    c1 int,\n"
		"    c2 int,\n"
		"    s int static,\n"
		"    v int,\n"
		"    PRIMARY KEY ((p1, p2), c1, c2)\n"
		") WITH ID = 00000000-0000-0000-0000-0000000000";
	ck_assert_msg(strncmp(text, head, strlen(head)) == 0, "%s", text);
	ck_assert_ptr_nonnull(
		strstr(text, "\n    AND CLUSTERING ORDER BY (c1 DESC, c2 ASC)\n"
			     "    AND additional_write_policy = '99p'\n"));
	ck_assert_ptr_nonnull(
		strstr(text, "'compaction_window_size': '1440', "
			     "'compaction_window_unit': 'MINUTES', "
			     "'max_threshold': '32', 'min_threshold': '4'}"));
	/* tombstone options show when given, in key order */
	ok("CREATE TABLE tt (k int PRIMARY KEY) WITH compaction = {'class': "
	   "'SizeTieredCompactionStrategy', 'tombstone_threshold': '0.5', "
	   "'unchecked_tombstone_compaction': 'true'}");
	buf_clear(&b);
	ck_assert_int_eq(
		cql_describe_table_text(cql_schema_table(schema, "ks", "tt"),
					true, &b),
		0);
	ck_assert_int_eq(buf_put_u8(&b, '\0'), 0);
	text = (const char *)b.data;
	ck_assert_msg(strstr(text, "'min_threshold': '4', "
				   "'tombstone_threshold': '0.5', "
				   "'unchecked_tombstone_compaction': 'true'}"),
		      "%s", text);
	ok("CREATE TABLE tl (k int PRIMARY KEY) WITH compaction = {'class': "
	   "'LeveledCompactionStrategy', 'sstable_size_in_mb': 64}");
	buf_clear(&b);
	ck_assert_int_eq(
		cql_describe_table_text(cql_schema_table(schema, "ks", "tl"),
					true, &b),
		0);
	ck_assert_int_eq(buf_put_u8(&b, '\0'), 0);
	text = (const char *)b.data;
	ck_assert_msg(strstr(text,
			     "{'class': 'org.apache.cassandra.db."
			     "compaction.LeveledCompactionStrategy', "
			     "'max_threshold': '32', 'min_threshold': '4', "
			     "'sstable_size_in_mb': '64'}"),
		      "%s", text);
	buf_free(&b);
}
END_TEST

static const char *field_type(const char *ks, const char *type, size_t i)
{
	const struct cql_keyspace *k = cql_schema_keyspace(schema, ks);
	ck_assert(k != NULL);
	const struct cql_user_type *t = cql_keyspace_type(k, type);
	ck_assert_msg(t != NULL, "no type %s", type);
	ck_assert_uint_gt(cql_user_type_field_count(t), i);
	return cql_user_type_field_type(t, i);
}

/* User types: kept in their keyspace with Cassandra's field type text,
 * replaced (not changed) by ALTER so pinned readers keep the old one,
 * moved with the keyspace by ALTER KEYSPACE, gone with DROP KEYSPACE,
 * part of the schema version, and settled the same way on every node
 * when two nodes create one at once. */
START_TEST(user_types_live_in_their_keyspace)
{
	ok("CREATE KEYSPACE ks WITH replication = {'class': "
	   "'SimpleStrategy', 'replication_factor': 1}");
	uint8_t v0[16], v1[16];
	cql_schema_version(schema, v0);
	ok("CREATE TYPE point (x int, \"Y\" varchar)");
	ck_assert_str_eq(change.change, "CREATED");
	ck_assert_str_eq(change.target, "TYPE");
	ck_assert_str_eq(change.keyspace, "ks");
	ck_assert_str_eq(change.name, "point");
	cql_schema_version(schema, v1);
	ck_assert_int_ne(memcmp(v0, v1, 16), 0);
	ok("CREATE TYPE ks.addr (loc frozen<point>, l list<frozen<point>>, "
	   "t tuple<int, frozen<list<int>>>, m frozen<map<text, "
	   "frozen<set<int>>>>, d duration)");
	ck_assert_str_eq(field_type("ks", "point", 1), "text");
	ck_assert_str_eq(field_type("ks", "addr", 0), "frozen<point>");
	ck_assert_str_eq(field_type("ks", "addr", 1), "list<frozen<point>>");
	ck_assert_str_eq(field_type("ks", "addr", 2),
			 "frozen<tuple<int, frozen<list<int>>>>");
	ck_assert_str_eq(field_type("ks", "addr", 3),
			 "frozen<map<text, frozen<set<int>>>>");

	/* DESCRIBE order: by name, each after what it names */
	const struct cql_keyspace *k = cql_schema_keyspace(schema, "ks");
	const struct cql_user_type *order[2];
	ck_assert_int_eq(cql_keyspace_types_ordered(k, order), 0);
	ck_assert_str_eq(cql_user_type_name(order[0]), "point");
	ck_assert_str_eq(cql_user_type_name(order[1]), "addr");
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(cql_describe_type_text(order[0], &b), 0);
	buf_append(&b, "", 1);
	ck_assert_str_eq((char *)b.data, "CREATE TYPE ks.point (\n    x int,\n"
					 "    \"Y\" text\n);");
	buf_free(&b);

	/* ALTER replaces the object; a pinned reader keeps the old one */
	struct cql_schema_pin pin;
	cql_schema_pin(schema, &pin);
	const struct cql_user_type *before = cql_keyspace_type(k, "point");
	ok("ALTER TYPE point ADD z int");
	ck_assert_str_eq(change.change, "UPDATED");
	ok("ALTER TYPE point RENAME x TO xx");
	ck_assert_uint_eq(cql_user_type_field_count(before), 2);
	ck_assert_str_eq(cql_user_type_field_name(before, 0), "x");
	const struct cql_user_type *now =
		cql_keyspace_type(cql_schema_keyspace(schema, "ks"), "point");
	ck_assert_uint_eq(cql_user_type_field_count(now), 3);
	ck_assert_str_eq(cql_user_type_field_name(now, 0), "xx");
	cql_schema_unpin(schema, &pin);

	/* ALTER KEYSPACE keeps its types */
	ok("ALTER KEYSPACE ks WITH replication = {'class': "
	   "'SimpleStrategy', 'replication_factor': 3}");
	ck_assert_str_eq(field_type("ks", "addr", 0), "frozen<point>");

	refused("DROP TYPE point", CQL_SCHEMA_INVALID,
		"Cannot drop user type 'ks.point' as it is still used by user "
		"types addr");
	refused("CREATE TYPE other.t (a int)", CQL_SCHEMA_INVALID,
		"Keyspace 'other' doesn't exist");
	refused("CREATE TYPE system.t (a int)", CQL_SCHEMA_UNAUTHORIZED,
		"system keyspace is not user-modifiable.");
	ck_assert_int_eq(run_in(schema, "CREATE TYPE t (a int)", NULL),
			 CQL_SCHEMA_INVALID);
	ck_assert_str_eq(err_msg(), "No keyspace has been specified. USE a "
				    "keyspace, or explicitly specify "
				    "keyspace.tablename");
	ck_assert_int_eq(run("CREATE TYPE IF NOT EXISTS point (q int)"),
			 CQL_SCHEMA_NOOP);
	ck_assert_int_eq(run("DROP TYPE IF EXISTS nope"), CQL_SCHEMA_NOOP);
	ck_assert_int_eq(run("DROP TYPE IF EXISTS other.nope"),
			 CQL_SCHEMA_NOOP);

	/* the same statements give the same version on another node; a
	 * CREATE that raced with another definition settles on the one
	 * that sorts first whichever arrives first */
	struct cql_schema *other = cql_schema_new();
	const char *ddl[] = {
		("CREATE KEYSPACE ks WITH replication = {'class': "
		 "'SimpleStrategy', 'replication_factor': 1}"),
		"CREATE TYPE ks.r (b int)",
		"CREATE TYPE ks.r (a int)",
	};
	uint8_t id[16] = {0};
	struct arena a;
	arena_create(&a, 0);
	int binds;
	for (size_t i = 0; i < 3; i++) {
		struct cql_stmt *st =
			cql_parse(&a, ddl[i], strlen(ddl[i]), &binds, NULL);
		ck_assert(st != NULL);
		enum cql_schema_status rc = cql_schema_apply_replicated(
			other, st, NULL, id, -1, &change);
		ck_assert_msg(rc == CQL_SCHEMA_OK, "%s: %s", ddl[i], err_msg());
	}
	ck_assert_str_eq(change.change, "UPDATED");
	struct cql_stmt *st =
		cql_parse(&a, ddl[1], strlen(ddl[1]), &binds, NULL);
	ck_assert_int_eq(
		cql_schema_apply_replicated(other, st, NULL, id, -1, &change),
		CQL_SCHEMA_NOOP);
	const struct cql_user_type *r =
		cql_keyspace_type(cql_schema_keyspace(other, "ks"), "r");
	ck_assert_str_eq(cql_user_type_field_name(r, 0), "a");
	arena_destroy(&a);
	cql_schema_delete(other);

	ok("DROP KEYSPACE ks"); /* its types go with it (ASan: no leak) */
	ck_assert_ptr_null(cql_schema_keyspace(schema, "ks"));
}
END_TEST

START_TEST(indexes_reach_the_table_meta)
{
	ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
	   "'replication_factor': 1}");
	ok("CREATE TABLE t (k int, c int, v text, m map<int, text>, "
	   "f frozen<list<int>>, PRIMARY KEY (k, c))");
	ok("CREATE INDEX ON t (c)");
	ok("CREATE CUSTOM INDEX vi ON t (v) USING 'sai' WITH OPTIONS = "
	   "{'case_sensitive': 'false'}");
	ok("CREATE INDEX mk ON t (keys(m))");
	ok("CREATE INDEX me ON t (entries(m))");
	ok("CREATE INDEX mv ON t (m)");
	ok("CREATE INDEX ff ON t (full(f))");
	const struct storage_table_meta *m =
		cql_table_meta(cql_schema_table(schema, "ks", "t"));
	ck_assert_uint_eq(m->index_count, 6);
	const struct storage_index *ix = storage_table_meta_index(m, "t_c_idx");
	ck_assert_ptr_nonnull(ix);
	ck_assert_uint_eq(ix->column, 1);
	ck_assert_uint_eq(ix->target, STORAGE_INDEX_VALUE);
	ck_assert(!ix->analyzer);
	ix = storage_table_meta_index(m, "vi");
	ck_assert(ix->analyzer);
	ck_assert_uint_eq(ix->column, 2);
	ck_assert_uint_eq(storage_table_meta_index(m, "mk")->target,
			  STORAGE_INDEX_KEYS);
	ck_assert_uint_eq(storage_table_meta_index(m, "me")->target,
			  STORAGE_INDEX_ENTRIES);
	ck_assert_uint_eq(storage_table_meta_index(m, "mv")->target,
			  STORAGE_INDEX_VALUES);
	ck_assert_uint_eq(storage_table_meta_index(m, "ff")->target,
			  STORAGE_INDEX_FULL);
	/* ALTER keeps them (the clone), DROP INDEX removes one */
	ok("ALTER TABLE t ADD w int");
	m = cql_table_meta(cql_schema_table(schema, "ks", "t"));
	ck_assert_uint_eq(m->index_count, 6);
	ok("DROP INDEX vi");
	m = cql_table_meta(cql_schema_table(schema, "ks", "t"));
	ck_assert_uint_eq(m->index_count, 5);
	ck_assert_ptr_null(storage_table_meta_index(m, "vi"));
	ck_assert_ptr_nonnull(storage_table_meta_index(m, "mk"));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("schema");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, system_keyspaces_hold_the_tables_drivers_read);
	tcase_add_test(tc, keyspaces_validate_replication);
	tcase_add_test(tc, every_change_moves_the_generation);
	tcase_add_test(tc, tables_get_keys_order_types_and_options);
	tcase_add_test(tc, table_definitions_are_checked_like_cassandra);
	tcase_add_test(tc, alter_and_drop_table_keep_old_metadata_valid);
	tcase_add_test(tc, retired_objects_live_while_an_older_pin_does);
	tcase_add_test(tc, a_schema_churn_returns_its_memory);
	tcase_add_test(tc, same_ddl_gives_the_same_version_on_every_node);
	tcase_add_test(tc,
		       the_version_follows_every_change_and_only_the_schema);
	tcase_add_test(tc, describe_prints_cassandras_create_statements);
	tcase_add_test(tc, user_types_live_in_their_keyspace);
	tcase_add_test(tc, indexes_reach_the_table_meta);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
