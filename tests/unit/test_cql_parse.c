/* client/cql_parse: the statements drivers, cqlsh and users send. */
#include "client/cql/cql_parse.h"
#include "common/err.h"
#include "common/rand.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct arena arena;
static int binds;
static const char **bind_names;
static uint64_t seed;

static void setup(void)
{
	arena_create(&arena, 0);
}

static void teardown(void)
{
	arena_destroy(&arena);
}

static struct cql_stmt *parse(const char *q)
{
	struct cql_stmt *s =
		cql_parse(&arena, q, strlen(q), &binds, &bind_names);
	ck_assert_msg(s != NULL, "%s\n-> %s", q, err_msg());
	return s;
}

static const char *parse_fails(const char *q, enum err_code code)
{
	struct cql_stmt *s = cql_parse(&arena, q, strlen(q), &binds, NULL);
	ck_assert_msg(s == NULL, "accepted: %s", q);
	ck_assert_msg(err_code() == code, "%s -> %s", q, err_msg());
	return err_msg();
}

static bool term_is(const struct cql_term *t, enum cql_term_kind k,
		    const char *text)
{
	return t && t->kind == k &&
	       (!text ||
		(t->len == strlen(text) && memcmp(t->text, text, t->len) == 0));
}

START_TEST(driver_control_queries_parse)
{
	/* What the Python and Node.js drivers and cqlsh send on connect. */
	const char *queries[] = {
		"SELECT * FROM system.peers_v2",
		"SELECT * FROM system.local WHERE key='local'",
		"select * from system.local where key = 'local'",
		"SELECT * FROM system_schema.keyspaces",
		"SELECT * from system_virtual_schema.keyspaces",
		"SELECT host_id, peer, peer_port, native_address, native_port, "
		"schema_version FROM system.peers_v2",
		"SELECT * FROM system_schema.tables WHERE keyspace_name = 'ks' "
		"AND table_name = 't'",
		"SELECT * FROM system_schema.keyspaces where keyspace_name = "
		"'nks'",
		"SELECT schema_version FROM system.local WHERE key='local';",
		"USE \"ks\"",
	};
	for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++)
		parse(queries[i]);
	struct cql_stmt *s =
		parse("SELECT * FROM system.local WHERE key='local'");
	ck_assert_int_eq(s->kind, CQL_STMT_SELECT);
	ck_assert(s->u.select.star);
	ck_assert_str_eq(s->u.select.table.keyspace, "system");
	ck_assert_str_eq(s->u.select.table.name, "local");
	ck_assert_uint_eq(s->u.select.where_count, 1);
	ck_assert_str_eq(s->u.select.where[0].columns[0], "key");
	ck_assert(
		term_is(s->u.select.where[0].value, CQL_TERM_STRING, "local"));
	s = parse("USE \"MyKs\"");
	ck_assert_str_eq(s->u.use_keyspace, "MyKs");
	s = parse("use MyKs");
	ck_assert_str_eq(s->u.use_keyspace, "myks");
}
END_TEST

START_TEST(create_keyspace_and_table)
{
	struct cql_stmt *s = parse(
		"CREATE KEYSPACE IF NOT EXISTS ks WITH replication = "
		"{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': '2'} "
		"AND durable_writes = false");
	ck_assert_int_eq(s->kind, CQL_STMT_CREATE_KEYSPACE);
	ck_assert(s->u.keyspace.if_not_exists);
	ck_assert_uint_eq(s->u.keyspace.option_count, 2);
	ck_assert_str_eq(s->u.keyspace.options[0].name, "replication");
	const struct cql_term *m = s->u.keyspace.options[0].value;
	ck_assert_int_eq(m->kind, CQL_TERM_MAP);
	ck_assert_uint_eq(m->count, 6);
	ck_assert(term_is(m->items[3], CQL_TERM_INTEGER, "3"));
	ck_assert(term_is(s->u.keyspace.options[1].value, CQL_TERM_BOOLEAN,
			  "false"));

	s = parse(
		"CREATE TABLE ks.events (\n"
		"  day date, \"Sensor\" text, ts timeuuid, v double,\n"
		"  tags set<text>, attrs frozen<map<text, list<int>>>,\n"
		"  owner text static,\n"
		"  PRIMARY KEY ((day, \"Sensor\"), ts)\n"
		") WITH CLUSTERING ORDER BY (ts DESC)\n"
		"  AND default_time_to_live = 86400\n"
		"  AND compaction = {'class': 'TimeWindowCompactionStrategy'}\n"
		"  AND comment = 'it''s events';");
	const struct cql_create_table *ct = &s->u.create_table;
	ck_assert_int_eq(s->kind, CQL_STMT_CREATE_TABLE);
	ck_assert_uint_eq(ct->column_count, 7);
	ck_assert_str_eq(ct->columns[1].name, "Sensor");
	ck_assert_str_eq(ct->columns[4].type->name, "set");
	ck_assert_str_eq(ct->columns[4].type->params[0]->name, "text");
	ck_assert(ct->columns[5].type->frozen);
	ck_assert_str_eq(ct->columns[5].type->name, "map");
	ck_assert_str_eq(ct->columns[5].type->params[1]->name, "list");
	ck_assert(ct->columns[6].is_static);
	ck_assert_uint_eq(ct->partition_key_count, 2);
	ck_assert_str_eq(ct->partition_key[1], "Sensor");
	ck_assert_uint_eq(ct->clustering_count, 1);
	ck_assert_uint_eq(ct->order_count, 1);
	ck_assert(ct->order[0].descending);
	ck_assert_uint_eq(ct->option_count, 3);
	ck_assert(
		term_is(ct->options[2].value, CQL_TERM_STRING, "it's events"));

	s = parse("create table t (k int primary key, v text)");
	ck_assert_uint_eq(s->u.create_table.partition_key_count, 1);
	ck_assert_str_eq(s->u.create_table.partition_key[0], "k");
	ck_assert_uint_eq(s->u.create_table.clustering_count, 0);
}
END_TEST

START_TEST(alter_drop_truncate_describe)
{
	struct cql_stmt *s =
		parse("ALTER TABLE ks.t ADD (a int, b list<text>)");
	ck_assert_int_eq(s->u.alter_table.kind, CQL_ALTER_ADD);
	ck_assert_uint_eq(s->u.alter_table.column_count, 2);
	s = parse("ALTER TABLE t DROP v");
	ck_assert_int_eq(s->u.alter_table.kind, CQL_ALTER_DROP);
	ck_assert(!s->u.alter_table.has_timestamp);
	s = parse("alter table ks.t drop (a, \"B\") using timestamp 42;");
	ck_assert_int_eq(s->u.alter_table.kind, CQL_ALTER_DROP);
	ck_assert_uint_eq(s->u.alter_table.name_count, 2);
	ck_assert_str_eq(s->u.alter_table.names[1], "B");
	ck_assert(s->u.alter_table.has_timestamp);
	ck_assert_int_eq(s->u.alter_table.timestamp, 42);
	s = parse("ALTER TABLE t ADD s int static");
	ck_assert(s->u.alter_table.columns[0].is_static);
	s = parse("ALTER TABLE t WITH gc_grace_seconds = 3600 AND "
		  "read_repair = 'NONE'");
	ck_assert_uint_eq(s->u.alter_table.option_count, 2);
	s = parse("ALTER TABLE t RENAME a TO b AND c TO d");
	ck_assert_uint_eq(s->u.alter_table.name_count, 4);
	s = parse("ALTER KEYSPACE ks WITH replication = {'class': "
		  "'SimpleStrategy', 'replication_factor': 1}");
	ck_assert_int_eq(s->kind, CQL_STMT_ALTER_KEYSPACE);
	s = parse("DROP KEYSPACE IF EXISTS ks");
	ck_assert(s->u.keyspace.if_exists);
	s = parse("DROP TABLE ks.t");
	ck_assert_int_eq(s->kind, CQL_STMT_DROP_TABLE);
	s = parse("TRUNCATE TABLE ks.t");
	ck_assert_str_eq(s->u.truncate.name, "t");
	s = parse("TRUNCATE t");
	ck_assert_int_eq(s->kind, CQL_STMT_TRUNCATE);
	s = parse("DESCRIBE KEYSPACES");
	ck_assert_int_eq(s->u.describe.kind, CQL_DESCRIBE_KEYSPACES);
	s = parse("DESC TABLE ks.t");
	ck_assert_int_eq(s->u.describe.kind, CQL_DESCRIBE_TABLE);
	s = parse("describe keyspace");
	ck_assert_ptr_null(s->u.describe.name.name);
	s = parse("DESCRIBE CLUSTER");
	ck_assert_int_eq(s->u.describe.kind, CQL_DESCRIBE_CLUSTER);
	s = parse("DESCRIBE ks");
	ck_assert_int_eq(s->u.describe.kind, CQL_DESCRIBE_NAME);
	s = parse("DESCRIBE FULL SCHEMA");
	ck_assert_int_eq(s->u.describe.kind, CQL_DESCRIBE_SCHEMA);
	ck_assert(s->u.describe.full);
	s = parse("DESC SCHEMA");
	ck_assert(!s->u.describe.full);
	s = parse("DESCRIBE ONLY KEYSPACE ks WITH INTERNALS");
	ck_assert_int_eq(s->u.describe.kind, CQL_DESCRIBE_KEYSPACE);
	ck_assert(s->u.describe.only && s->u.describe.internals);
	ck_assert_str_eq(s->u.describe.name.name, "ks");
	s = parse("DESCRIBE KEYSPACE WITH INTERNALS");
	ck_assert_ptr_null(s->u.describe.name.name);
	ck_assert(s->u.describe.internals);
	s = parse("DESCRIBE only");
	ck_assert_int_eq(s->u.describe.kind, CQL_DESCRIBE_NAME);
	ck_assert_str_eq(s->u.describe.name.name, "only");
	s = parse("DESCRIBE TYPES");
	ck_assert_int_eq(s->u.describe.kind, CQL_DESCRIBE_TYPES);
	s = parse("DESCRIBE MATERIALIZED VIEW ks.v");
	ck_assert_int_eq(s->u.describe.kind, CQL_DESCRIBE_VIEW);
	s = parse("DESCRIBE FUNCTION ks.f");
	ck_assert_int_eq(s->u.describe.kind, CQL_DESCRIBE_FUNCTION);
	ck_assert_str_eq(s->u.describe.name.keyspace, "ks");
}
END_TEST

START_TEST(insert_update_delete)
{
	struct cql_stmt *s = parse(
		"INSERT INTO ks.t (k, c, v, l, m, s, u, b, f, n) VALUES "
		"(?, -5, 'x', [1, 2], {'a': 1}, {1, 2}, "
		"550e8400-e29b-41d4-a716-446655440000, 0xCAFE, -1.5e3, null) "
		"USING TTL 60 AND TIMESTAMP :ts");
	const struct cql_insert *in = &s->u.insert;
	ck_assert_uint_eq(in->column_count, 10);
	ck_assert_int_eq(in->values[0]->kind, CQL_TERM_BIND);
	ck_assert(term_is(in->values[1], CQL_TERM_INTEGER, "5"));
	ck_assert(in->values[1]->negative);
	ck_assert_int_eq(in->values[3]->kind, CQL_TERM_LIST);
	ck_assert_int_eq(in->values[4]->kind, CQL_TERM_MAP);
	ck_assert_int_eq(in->values[5]->kind, CQL_TERM_SET);
	ck_assert(term_is(in->values[6], CQL_TERM_UUID,
			  "550e8400-e29b-41d4-a716-446655440000"));
	ck_assert(term_is(in->values[7], CQL_TERM_BLOB, "CAFE"));
	ck_assert(term_is(in->values[8], CQL_TERM_FLOAT, "1.5e3"));
	ck_assert_int_eq(in->values[9]->kind, CQL_TERM_NULL);
	ck_assert(term_is(in->using.ttl, CQL_TERM_INTEGER, "60"));
	ck_assert_int_eq(in->using.timestamp->kind, CQL_TERM_BIND);
	ck_assert_int_eq(binds, 2);
	ck_assert_ptr_null(bind_names[0]);
	ck_assert_str_eq(bind_names[1], "ts");

	s = parse(
		"UPDATE t USING TTL 10 SET v = 'a', l = l + [3], l = [0] + l, "
		"s = s - {1}, m['k'] = 7, n = n + 1 WHERE k = 1 AND c = ?");
	const struct cql_update *up = &s->u.update;
	ck_assert_uint_eq(up->assignment_count, 6);
	ck_assert_int_eq(up->assignments[0].kind, CQL_ASSIGN_SET);
	ck_assert_int_eq(up->assignments[1].kind, CQL_ASSIGN_ADD);
	ck_assert_int_eq(up->assignments[2].kind, CQL_ASSIGN_PREPEND);
	ck_assert_int_eq(up->assignments[3].kind, CQL_ASSIGN_REMOVE);
	ck_assert(term_is(up->assignments[4].target.element, CQL_TERM_STRING,
			  "k"));
	ck_assert_int_eq(up->assignments[5].kind, CQL_ASSIGN_ADD);
	ck_assert_uint_eq(up->where_count, 2);

	s = parse("DELETE FROM t WHERE k = 1");
	ck_assert_uint_eq(s->u.del.column_count, 0);
	s = parse("DELETE v, m['x'], l[0] FROM t USING TIMESTAMP 5 WHERE k IN "
		  "(1, 2) AND c >= 3 AND c < 9");
	ck_assert_uint_eq(s->u.del.column_count, 3);
	ck_assert_ptr_nonnull(s->u.del.columns[1].element);
	ck_assert_int_eq(s->u.del.where[0].op, CQL_OP_IN);
	ck_assert_int_eq(s->u.del.where[0].value->kind, CQL_TERM_TUPLE);
	ck_assert_uint_eq(s->u.del.where[0].value->count, 2);
	ck_assert_int_eq(s->u.del.where[1].op, CQL_OP_GTE);
	s = parse("DELETE FROM t WHERE k = 1 AND (c1, c2) > (1, 'a')");
	ck_assert_int_eq(s->u.del.where[1].kind, CQL_REL_TUPLE);
	ck_assert_uint_eq(s->u.del.where[1].column_count, 2);
}
END_TEST

START_TEST(select_forms)
{
	struct cql_stmt *s = parse(
		"SELECT k, v AS value, writetime(v), ttl(v), token(k), "
		"toTimestamp(now()), count(*) FROM t WHERE token(k) > ? AND "
		"token(k) <= 100 ORDER BY c DESC PER PARTITION LIMIT 2 LIMIT "
		"10 "
		"ALLOW FILTERING");
	const struct cql_select *q = &s->u.select;
	ck_assert_uint_eq(q->selector_count, 7);
	ck_assert_str_eq(q->selectors[1].alias, "value");
	ck_assert_int_eq(q->selectors[2].kind, CQL_SEL_FUNCTION);
	ck_assert_str_eq(q->selectors[2].name, "writetime");
	ck_assert_str_eq(q->selectors[2].args[0].name, "v");
	ck_assert_str_eq(q->selectors[4].name, "token");
	ck_assert_str_eq(q->selectors[5].name, "totimestamp");
	ck_assert_str_eq(q->selectors[5].args[0].name, "now");
	ck_assert_int_eq(q->selectors[5].args[0].kind, CQL_SEL_FUNCTION);
	ck_assert_int_eq(q->selectors[6].kind, CQL_SEL_COUNT_STAR);
	ck_assert_int_eq(q->where[0].kind, CQL_REL_TOKEN);
	ck_assert_int_eq(q->where[0].op, CQL_OP_GT);
	ck_assert_uint_eq(q->order_count, 1);
	ck_assert(q->order[0].descending);
	ck_assert(term_is(q->per_partition_limit, CQL_TERM_INTEGER, "2"));
	ck_assert(term_is(q->limit, CQL_TERM_INTEGER, "10"));
	ck_assert(q->allow_filtering);

	s = parse("SELECT DISTINCT k FROM t");
	ck_assert(s->u.select.distinct);
	s = parse("SELECT count(1) FROM t WHERE k IN ?");
	ck_assert_int_eq(s->u.select.selectors[0].args[0].kind, CQL_SEL_TERM);
	ck_assert_int_eq(s->u.select.where[0].value->kind, CQL_TERM_BIND);
	/* Non-reserved keywords stay usable as column names. */
	s = parse("SELECT key, value, type, ttl, writetime FROM t");
	ck_assert_uint_eq(s->u.select.selector_count, 5);
	s = parse("SELECT * FROM t WHERE tags CONTAINS 'x' ALLOW FILTERING");
	ck_assert_int_eq(s->u.select.where[0].op, CQL_OP_CONTAINS);
}
END_TEST

START_TEST(batches_comments_and_strings)
{
	struct cql_stmt *s =
		parse("-- a comment\nBEGIN UNLOGGED BATCH USING TIMESTAMP 1\n"
		      "  INSERT INTO t (k) VALUES (1); /* inline */\n"
		      "  UPDATE t SET v = $$it's raw$$ WHERE k = 2;\n"
		      "  DELETE FROM t WHERE k = 3 // trailing\n"
		      "APPLY BATCH;");
	ck_assert_int_eq(s->kind, CQL_STMT_BATCH);
	ck_assert_int_eq(s->u.batch.type, 1);
	ck_assert_uint_eq(s->u.batch.count, 3);
	ck_assert(
		term_is(s->u.batch.statements[1]->u.update.assignments[0].value,
			CQL_TERM_STRING, "it's raw"));
	s = parse("begin batch insert into t (k) values (?) apply batch");
	ck_assert_int_eq(s->u.batch.type, 0);
	ck_assert_int_eq(binds, 1);
	s = parse("SELECT * FROM t WHERE k = 'multi\nline'");
	ck_assert(term_is(s->u.select.where[0].value, CQL_TERM_STRING,
			  "multi\nline"));
	s = parse("INSERT INTO t (k, v) VALUES (1, {})");
	ck_assert_uint_eq(s->u.insert.values[1]->count, 0);
	s = parse("SELECT * FROM t WHERE f = -Infinity AND g = NaN");
	ck_assert(s->u.select.where[0].value->negative);
}
END_TEST

START_TEST(syntax_errors_read_like_cassandras)
{
	/* Cassandra's ErrorCollector: the header, ANTLR's message, then the
	 * query from 10 buffer tokens (whitespace counts) before the
	 * bracketed one to the one the parser stopped at */
	const char *m = parse_fails("SELEC * FROM t", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:0 no viable alternative at input 'SELEC' "
			    "([SELEC]...)");
	m = parse_fails("SELECT * FORM t", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:9 mismatched input 'FORM' expecting K_FROM "
			    "(SELECT * [FORM]...)");
	/* the end of input is Cassandra's lexer's bare EOF: no position */
	m = parse_fails("SELECT * FROM", ERR_INVALID);
	ck_assert_str_eq(m, "line 0:-1 no viable alternative at input '<EOF>'");
	m = parse_fails("SELECT * FROM t\nWHERE k = ", ERR_INVALID);
	ck_assert_str_eq(m, "line 0:-1 no viable alternative at input '<EOF>'");
	m = parse_fails("SELECT * FROM t WHERE k = 'open", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:26 unterminated string");
	m = parse_fails("SELECT * FROM t extra", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:16 mismatched input 'extra' expecting EOF "
			    "(SELECT * FROM t [extra])");
	m = parse_fails("SELECT * FROM t WHERE m['a'] IN (1, 2)", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:29 no viable alternative at input 'IN' "
			    "(... t WHERE m['a'] [IN]...)");
	ck_assert_ptr_nonnull(parse("UPDATE t SET v = 1 WHERE k = 1 IF "
				    "m['a'] IN (1, 2)"));
	m = parse_fails("SELECT * FROM table", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:14 no viable alternative at input 'table' "
			    "(SELECT * FROM [table])");
	/* Cassandra's InvalidRequests (and its spelling) */
	m = parse_fails("INSERT INTO t (a, b) VALUES (1)", ERR_UNSUPPORTED);
	ck_assert_str_eq(m, "Unmatched column names/values");
	m = parse_fails("CREATE TABLE t (a int, b int)", ERR_UNSUPPORTED);
	ck_assert_str_eq(m,
			 "No PRIMARY KEY specifed for table 't' (exactly one "
			 "required)");
	m = parse_fails("CREATE TABLE ks.t (a int PRIMARY KEY, b int, "
			"PRIMARY KEY (b))",
			ERR_UNSUPPORTED);
	ck_assert_str_eq(m, "Multiple PRIMARY KEYs specifed (exactly one "
			    "required)");
	m = parse_fails("SELECT * FROM t WHERE k = 1 # x", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:28 no viable alternative at character '#'");
	parse_fails("SELECT * FROM t /* never closed", ERR_INVALID);
	parse_fails("", ERR_INVALID);
	parse_fails(";", ERR_INVALID);
	parse_fails("SELECT * FROM t WHERE k = 12abc", ERR_INVALID);
	parse_fails("UPDATE t SET v = w + 1 WHERE k = 1", ERR_INVALID);
}
END_TEST

START_TEST(conditional_writes)
{
	struct cql_stmt *s = parse("INSERT INTO t (k, v) VALUES (1, 'a') "
				   "IF NOT EXISTS USING TTL 10");
	ck_assert(s->u.insert.if_not_exists);
	ck_assert_ptr_nonnull(s->u.insert.using.ttl);
	s = parse("UPDATE t SET v = 1 WHERE k = 1 IF EXISTS");
	ck_assert(s->u.update.has_conditions && s->u.update.if_exists);
	s = parse("UPDATE t SET v = 1 WHERE k = 1 IF v = 0 AND m['x'] != ? "
		  "AND w IN (1, 2) AND z = null");
	const struct cql_update *u = &s->u.update;
	ck_assert(u->has_conditions && !u->if_exists);
	ck_assert_uint_eq(u->condition_count, 4);
	ck_assert_str_eq(u->conditions[0].column.name, "v");
	ck_assert_int_eq(u->conditions[0].op, CQL_OP_EQ);
	ck_assert_str_eq(u->conditions[1].column.name, "m");
	ck_assert_ptr_nonnull(u->conditions[1].column.element);
	ck_assert_int_eq(u->conditions[1].op, CQL_OP_NEQ);
	ck_assert_int_eq(u->conditions[1].value->kind, CQL_TERM_BIND);
	ck_assert_int_eq(u->conditions[2].op, CQL_OP_IN);
	ck_assert_int_eq(u->conditions[3].value->kind, CQL_TERM_NULL);
	s = parse("DELETE v FROM t WHERE k = 1 IF v >= 3");
	ck_assert(s->u.del.has_conditions);
	ck_assert_uint_eq(s->u.del.condition_count, 1);
	ck_assert_int_eq(s->u.del.conditions[0].op, CQL_OP_GTE);
	s = parse("DELETE FROM t WHERE k = 1 IF EXISTS");
	ck_assert(s->u.del.if_exists);
	parse_fails("INSERT INTO t (k) VALUES (1) IF EXISTS", ERR_INVALID);
	parse_fails("UPDATE t SET v = 1 WHERE k = 1 IF", ERR_INVALID);
}
END_TEST

START_TEST(index_statements)
{
	struct cql_stmt *s = parse("CREATE INDEX ON t (v)");
	ck_assert_int_eq(s->kind, CQL_STMT_CREATE_INDEX);
	ck_assert_ptr_null(s->u.index.name.name);
	ck_assert_str_eq(s->u.index.table.name, "t");
	ck_assert_str_eq(s->u.index.column, "v");
	ck_assert_int_eq(s->u.index.target, CQL_INDEX_SIMPLE);
	s = parse("CREATE CUSTOM INDEX IF NOT EXISTS ks.i ON ks.t (keys(m)) "
		  "USING 'sai' WITH OPTIONS = {'case_sensitive': 'false'}");
	ck_assert(s->u.index.custom && s->u.index.if_not_exists);
	ck_assert_str_eq(s->u.index.name.keyspace, "ks");
	ck_assert_str_eq(s->u.index.name.name, "i");
	ck_assert_str_eq(s->u.index.column, "m");
	ck_assert_int_eq(s->u.index.target, CQL_INDEX_KEYS);
	ck_assert_str_eq(s->u.index.using, "sai");
	ck_assert_ptr_nonnull(s->u.index.options);
	s = parse("CREATE INDEX \"I\" ON t (full(f))");
	ck_assert_str_eq(s->u.index.name.name, "I");
	ck_assert_int_eq(s->u.index.target, CQL_INDEX_FULL);
	s = parse("DROP INDEX IF EXISTS ks.i");
	ck_assert_int_eq(s->kind, CQL_STMT_DROP_INDEX);
	ck_assert(s->u.index.if_exists);
	ck_assert_str_eq(s->u.index.name.name, "i");
	parse_fails("CREATE INDEX ON t (a, b)", ERR_UNSUPPORTED);
	parse_fails("CREATE INDEX ON t v", ERR_INVALID);
	parse_fails("CREATE INDEX ON t (keys(m)", ERR_INVALID);
	parse_fails("CREATE INDEX ON t (v) USING sai", ERR_INVALID);
	parse_fails("CREATE INDEX ON t (v) WITH OPTIONS = 1", ERR_INVALID);
}
END_TEST

/* The snippet as ErrorCollector.appendSnippet builds it, on messages
 * Cassandra 4.1 is known to give (its audit log test, cqlsh sessions). */
START_TEST(syntax_error_snippets)
{
	const char *m = parse_fails("SELECT * FORM ks.t", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:9 mismatched input 'FORM' expecting K_FROM "
			    "(SELECT * [FORM]...)");
	m = parse_fails("SELECT * zeppelin.albums;", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:9 mismatched input 'zeppelin' expecting "
			    "K_FROM (SELECT * [zeppelin]...)");
	m = parse_fails("DELETE cqlkeyspace.t;", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:20 mismatched input ';' expecting K_FROM "
			    "(DELETE cqlkeyspace.t[;])");
	/* statement dispatch reads ahead and rewinds: DROP is bracketed */
	m = parse_fails("DROP cqlkeyspace.t;", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:5 no viable alternative at input "
			    "'cqlkeyspace' ([DROP] cqlkeyspace...)");
	/* lines are joined without their newline */
	m = parse_fails("select*\n;", ERR_INVALID);
	ck_assert_str_eq(m, "line 2:0 mismatched input ';' expecting K_FROM "
			    "(select*[;])");
	/* 10 buffer tokens back, whitespace and comments among them */
	m = parse_fails("SELECT a, b, c FROM t WHERE k = 1 LIMIT x",
			ERR_INVALID);
	ck_assert_str_eq(m, "line 1:40 no viable alternative at input 'x' "
			    "(...WHERE k = 1 LIMIT [x])");
	m = parse_fails("SELECT a /* c */ FROM t -- why\nWHERE k = 1 garbage",
			ERR_INVALID);
	ck_assert_str_eq(m, "line 2:12 mismatched input 'garbage' expecting "
			    "EOF (... -- whyWHERE k = 1 [garbage])");
	m = parse_fails("SELECT * FROM t\nWHERE k = 1\nAND v = 2 nope\n",
			ERR_INVALID);
	ck_assert_str_eq(m, "line 3:10 mismatched input 'nope' expecting EOF "
			    "(...1AND v = 2 [nope])");
	/* a string's text is its content: Cassandra's brackets land short */
	m = parse_fails("SELECT * FROM t WHERE k = 'a' 'bc'", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:30 mismatched input 'bc' expecting EOF "
			    "(...t WHERE k = 'a' ['b]...)");
	/* a token after a string spanning lines is placed on its own line;
	 * a multi-line offending token is shown escaped, and gets no snippet
	 * (Java's would throw) */
	m = parse_fails("SELECT * FROM t WHERE k = $$a\nb$$ x", ERR_INVALID);
	ck_assert_str_eq(m, "line 2:4 mismatched input 'x' expecting EOF "
			    "(...t WHERE k = $$ab$$ [x])");
	m = parse_fails("SELECT * FROM t WHERE k = 'a\nb' x", ERR_INVALID);
	ck_assert_str_eq(m, "line 2:3 mismatched input 'x' expecting EOF "
			    "(...t WHERE k = 'ab' [x])");
	m = parse_fails("SELECT * FROM t WHERE k = 1 'a\nb'", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:28 mismatched input 'a\\nb' expecting "
			    "EOF");
	m = parse_fails("BEGIN BATCH SELECT * FROM t APPLY BATCH", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:12 mismatched input 'SELECT' expecting "
			    "K_APPLY (BEGIN BATCH [SELECT]...)");
	m = parse_fails("INSERT INTO t (k) VALUES (1) USING TTL", ERR_INVALID);
	ck_assert_str_eq(m, "line 0:-1 no viable alternative at input '<EOF>'");
	m = parse_fails("DELETE FROM t USING TTL 1 WHERE k = 1", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:20 mismatched input 'TTL' expecting "
			    "K_TIMESTAMP (DELETE FROM t USING [TTL]...)");
}
END_TEST

/* Parser.g's relation shapes (Cassandra 4.1): what its grammar refuses is
 * a syntax error, what it parses and then refuses an invalid request. */
START_TEST(relation_shapes_as_cassandras_grammar_has_them)
{
	/* token() takes relationType only: no IN (nor CONTAINS) */
	const char *m = parse_fails("SELECT * FROM t WHERE token(k) IN (1, 2)",
				    ERR_INVALID);
	ck_assert_str_eq(m, "line 1:31 no viable alternative at input 'IN' "
			    "(... t WHERE token(k) [IN]...)");
	m = parse_fails("SELECT * FROM t WHERE token(k, c) in ?", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:34 no viable alternative at input 'in' "
			    "(...WHERE token(k, c) [in]...)");
	m = parse_fails("SELECT * FROM t WHERE token(k) CONTAINS 1",
			ERR_INVALID);
	ck_assert_msg(strstr(m, "no viable alternative at input 'CONTAINS'"),
		      "%s", m);
	/* != parses, Relation.toRestriction refuses it */
	m = parse_fails("SELECT * FROM t WHERE token(k) != 1", ERR_UNSUPPORTED);
	ck_assert_str_eq(m, "Unsupported \"!=\" relation: token(k) != 1");
	ck_assert_ptr_nonnull(parse("SELECT * FROM t WHERE token(k) >= ?"));
	/* IS NOT NULL parses; only a view may use it */
	m = parse_fails("SELECT * FROM t WHERE v IS NOT NULL", ERR_UNSUPPORTED);
	ck_assert_str_eq(m, "Unsupported restriction: v IS NOT NULL");
	m = parse_fails("DELETE FROM t WHERE k = 1 AND v IS NOT NULL",
			ERR_UNSUPPORTED);
	ck_assert_str_eq(m, "Unsupported restriction: v IS NOT NULL");
	m = parse_fails("SELECT * FROM t WHERE v IS NULL", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:27 mismatched input 'NULL' expecting K_NOT "
			    "(...FROM t WHERE v IS [NULL])");
	/* a parenthesized relation is one relation */
	struct cql_stmt *s =
		parse("SELECT * FROM t WHERE (k = 1) AND ((c > 2))");
	ck_assert_uint_eq(s->u.select.where_count, 2);
	ck_assert_int_eq(s->u.select.where[0].kind, CQL_REL_COLUMN);
	ck_assert_int_eq(s->u.select.where[1].op, CQL_OP_GT);
	s = parse("SELECT * FROM t WHERE (token(k) > 1)");
	ck_assert_int_eq(s->u.select.where[0].kind, CQL_REL_TOKEN);
	m = parse_fails("SELECT * FROM t WHERE (k = 1 AND c = 2)", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:29 mismatched input 'AND' expecting ')' "
			    "(... WHERE (k = 1 [AND]...)");
	/* IN takes a marker or a parenthesized list; the relation's
	 * prediction reads name, IN and what follows, then rewinds */
	m = parse_fails("SELECT * FROM t WHERE k IN 1", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:27 no viable alternative at input '1' "
			    "(SELECT * FROM t WHERE [k] IN...)");
	m = parse_fails("SELECT * FROM t WHERE k BETWEEN 1 AND 2", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:24 no viable alternative at input "
			    "'BETWEEN' (SELECT * FROM t WHERE [k] BETWEEN...)");
	ck_assert_ptr_nonnull(parse("SELECT * FROM t WHERE k IN ()"));
	ck_assert_ptr_nonnull(parse("SELECT * FROM t WHERE k IN :ks"));
	/* a tuple of names compares with a tuple literal or a marker */
	m = parse_fails("SELECT * FROM t WHERE (a, b) = 1", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:31 no viable alternative at input '1' "
			    "(... WHERE (a, b) [=] 1)");
	m = parse_fails("SELECT * FROM t WHERE (a, b) IN (1, 2)", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:33 no viable alternative at input '1' "
			    "(... (a, b) IN [(]1...)");
	m = parse_fails("SELECT * FROM t WHERE (c) = 1", ERR_INVALID);
	ck_assert_msg(strstr(m, "no viable alternative at input '1'"), "%s", m);
	ck_assert_ptr_nonnull(
		parse("SELECT * FROM t WHERE (a, b) IN ((1, 2))"));
	ck_assert_ptr_nonnull(parse("SELECT * FROM t WHERE (a, b) IN (?, ?)"));
	ck_assert_ptr_nonnull(parse("SELECT * FROM t WHERE (a, b) IN ?"));
	ck_assert_ptr_nonnull(parse("SELECT * FROM t WHERE (a, b) >= ?"));
	ck_assert_ptr_nonnull(parse("SELECT * FROM t WHERE (a) = (1)"));
	/* m[k] takes relationType only */
	m = parse_fails("SELECT * FROM t WHERE m[1] CONTAINS 1", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:27 no viable alternative at input "
			    "'CONTAINS' (... t WHERE m[1] [CONTAINS]...)");
	/* OR and NOT IN are not in 4.1's grammar */
	m = parse_fails("SELECT * FROM t WHERE k = 1 OR k = 2", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:28 mismatched input 'OR' expecting EOF "
			    "(...t WHERE k = 1 [OR]...)");
	m = parse_fails("SELECT * FROM t WHERE k NOT IN (1)", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:24 no viable alternative at input 'NOT' "
			    "(SELECT * FROM t WHERE [k] NOT...)");
}
END_TEST

START_TEST(unsupported_features_get_a_clear_refusal)
{
	/* disabled as in Cassandra 4.1's default cassandra.yaml */
	const char *m =
		parse_fails("CREATE MATERIALIZED VIEW mv AS SELECT * FROM t",
			    ERR_UNSUPPORTED);
	ck_assert_str_eq(m, "Materialized views are disabled. Enable in "
			    "cassandra.yaml to use.");
	m = parse_fails("CREATE FUNCTION f () RETURNS int", ERR_UNSUPPORTED);
	ck_assert_str_eq(m, "User-defined functions are disabled in "
			    "cassandra.yaml - set "
			    "user_defined_functions_enabled=true to enable");
	m = parse_fails("CREATE OR REPLACE FUNCTION f () RETURNS int",
			ERR_UNSUPPORTED);
	ck_assert_str_eq(m, "User-defined functions are disabled in "
			    "cassandra.yaml - set "
			    "user_defined_functions_enabled=true to enable");
	m = parse_fails("CREATE OR REPLACE AGGREGATE IF NOT EXISTS a (int) "
			"SFUNC f STYPE int",
			ERR_UNSUPPORTED);
	ck_assert_str_eq(m, "Cannot use both 'OR REPLACE' and 'IF NOT EXISTS' "
			    "directives");
	m = parse_fails("CREATE OR REPLACE TABLE t (k int PRIMARY KEY)",
			ERR_INVALID);
	ck_assert_msg(strncmp(m, "line 1:", 7) == 0, "%s", m);
	parse_fails("ALTER TABLE t DROP v USING TIMESTAMP ?", ERR_INVALID);
	parse_fails("ALTER TABLE t DROP v USING TTL 5", ERR_INVALID);
	m = parse_fails("DROP TRIGGER tr ON t", ERR_UNSUPPORTED);
	ck_assert_str_eq(m, "Triggers are not supported by Cassini yet");
	/* role options take '=' (the USER form does not) */
	parse_fails("ALTER ROLE bob WITH PASSWORD 'x'", ERR_INVALID);
	parse_fails("DROP NONSENSE x", ERR_INVALID);
	parse_fails("CREATE TABLE t (k int PRIMARY KEY) WITH COMPACT STORAGE",
		    ERR_UNSUPPORTED);
}
END_TEST

START_TEST(json_forms)
{
	struct cql_stmt *s = parse("SELECT JSON * FROM t");
	ck_assert(s->u.select.json && s->u.select.star);
	s = parse("SELECT JSON DISTINCT k, v AS x FROM t");
	ck_assert(s->u.select.json && s->u.select.distinct);
	/* json is also a column name */
	s = parse("SELECT json FROM t");
	ck_assert(!s->u.select.json);
	ck_assert_str_eq(s->u.select.selectors[0].name, "json");
	s = parse("SELECT json, k FROM t");
	ck_assert(!s->u.select.json);
	s = parse("SELECT json AS j FROM t");
	ck_assert(!s->u.select.json);
	s = parse("SELECT JSON json FROM t");
	ck_assert(s->u.select.json);
	s = parse("INSERT INTO t JSON '{\"k\": 1}'");
	ck_assert_int_eq(s->u.insert.json->kind, CQL_TERM_STRING);
	ck_assert(!s->u.insert.default_unset);
	ck_assert_uint_eq(s->u.insert.column_count, 0);
	s = parse("INSERT INTO t JSON ? DEFAULT UNSET USING TTL 10");
	ck_assert_int_eq(s->u.insert.json->kind, CQL_TERM_BIND);
	ck_assert(s->u.insert.default_unset);
	ck_assert_ptr_nonnull(s->u.insert.using.ttl);
	s = parse("INSERT INTO t JSON :j DEFAULT NULL");
	ck_assert(!s->u.insert.default_unset);
	parse_fails("INSERT INTO t JSON 1", ERR_INVALID);
	parse_fails("INSERT INTO t JSON '{}' DEFAULT 1", ERR_INVALID);
	s = parse(
		"INSERT INTO t JSON ? DEFAULT UNSET IF NOT EXISTS USING TTL 5");
	ck_assert(s->u.insert.if_not_exists && s->u.insert.default_unset);
	ck_assert_ptr_nonnull(s->u.insert.using.ttl);
	s = parse("INSERT INTO t JSON '{}' IF NOT EXISTS");
	ck_assert(s->u.insert.if_not_exists);
	parse_fails("INSERT INTO t JSON '{}' IF EXISTS", ERR_INVALID);
	parse_fails("INSERT INTO t JSON '{}' USING TTL 1 IF NOT EXISTS",
		    ERR_INVALID);
}
END_TEST

static const struct cql_role_stmt *role(const char *q)
{
	struct cql_stmt *s = parse(q);
	ck_assert_int_eq(s->kind, CQL_STMT_ROLE);
	return &s->u.role;
}

START_TEST(role_statements)
{
	const struct cql_role_stmt *r = role(
		"CREATE ROLE IF NOT EXISTS Alice WITH PASSWORD = 'p''w' AND "
		"LOGIN = true AND SUPERUSER = false");
	ck_assert_int_eq(r->op, CQL_ROLE_CREATE);
	ck_assert(r->if_not_exists && !r->user);
	ck_assert_str_eq(r->role, "alice"); /* unquoted: lowercased */
	ck_assert_str_eq(r->password, "p'w");
	ck_assert_int_eq(r->login, 1);
	ck_assert_int_eq(r->superuser, 0);
	r = role("CREATE ROLE \"Bob\"");
	ck_assert_str_eq(r->role, "Bob");
	ck_assert_int_eq(r->login, -1);
	ck_assert(!r->password);
	r = role("CREATE ROLE 'Carol' WITH OPTIONS = {'a': 'b'}");
	ck_assert_str_eq(r->role, "Carol");
	ck_assert(r->options);
	r = role("ALTER ROLE IF EXISTS bob WITH SUPERUSER = true");
	ck_assert_int_eq(r->op, CQL_ROLE_ALTER);
	ck_assert(r->if_exists);
	ck_assert_int_eq(r->superuser, 1);
	r = role("DROP ROLE IF EXISTS bob;");
	ck_assert_int_eq(r->op, CQL_ROLE_DROP);
	ck_assert(r->if_exists);
	r = role("GRANT admins TO bob");
	ck_assert_int_eq(r->op, CQL_ROLE_GRANT);
	ck_assert_str_eq(r->role, "admins");
	ck_assert_str_eq(r->grantee, "bob");
	r = role("REVOKE admins FROM bob");
	ck_assert_int_eq(r->op, CQL_ROLE_REVOKE);
	r = role("LIST ROLES");
	ck_assert_int_eq(r->op, CQL_ROLE_LIST);
	ck_assert(!r->role && !r->norecursive);
	r = role("LIST ROLES OF bob NORECURSIVE");
	ck_assert_str_eq(r->role, "bob");
	ck_assert(r->norecursive);
	r = role("CREATE USER IF NOT EXISTS Dave WITH PASSWORD 'x' SUPERUSER");
	ck_assert(r->user && r->if_not_exists);
	ck_assert_str_eq(r->role, "Dave"); /* USER names keep their case */
	ck_assert_str_eq(r->password, "x");
	ck_assert_int_eq(r->superuser, 1);
	r = role("ALTER USER dave NOSUPERUSER");
	ck_assert(r->user);
	ck_assert_int_eq(r->superuser, 0);
	r = role("DROP USER dave");
	ck_assert(r->user);
	ck_assert_int_eq(r->op, CQL_ROLE_DROP);
	r = role("LIST USERS");
	ck_assert_int_eq(r->op, CQL_ROLE_LIST_USERS);
	r = role("CREATE ROLE r WITH ACCESS TO ALL DATACENTERS");

	const char *m =
		parse_fails("CREATE ROLE r WITH LOGIN = 1", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:27 mismatched input '1' expecting BOOLEAN "
			    "(...ROLE r WITH LOGIN = [1])");
	m = parse_fails("CREATE ROLE r WITH LOGIN = true AND LOGIN = false",
			ERR_INVALID);
	ck_assert_str_eq(m, "Multiple definition for property LOGIN");
	m = parse_fails("CREATE ROLE ''", ERR_INVALID);
	ck_assert_str_eq(m, "Role name can't be an empty string");
	m = parse_fails("CREATE USER \"Eve\"", ERR_INVALID);
	ck_assert_str_eq(m, "Quoted strings are are not supported for user "
			    "names and USER is deprecated, please use ROLE");
	parse_fails("CREATE ROLE r WITH PASSWORD = 5", ERR_INVALID);
	parse_fails("CREATE ROLE r extra", ERR_INVALID);
	parse_fails("GRANT a b", ERR_INVALID);
	parse_fails("LIST ROLES OF", ERR_INVALID);
	parse_fails("CREATE ROLE ?", ERR_INVALID);
	parse_fails("CREATE ROLE r WITH ACCESS TO DATACENTERS {'dc1'}",
		    ERR_UNSUPPORTED);
}
END_TEST

START_TEST(permission_statements)
{
	const struct cql_role_stmt *r =
		role("GRANT SELECT ON KEYSPACE Ks TO Alice");
	ck_assert_int_eq(r->op, CQL_ROLE_GRANT_PERMISSION);
	ck_assert_uint_eq(r->permissions, CQL_PERM_SELECT);
	ck_assert_int_eq(r->resource.kind, CQL_RES_KEYSPACE);
	ck_assert_str_eq(r->resource.keyspace, "ks");
	ck_assert_str_eq(r->grantee, "alice");
	r = role("GRANT MODIFY PERMISSION ON TABLE ks.\"T\" TO bob");
	ck_assert_uint_eq(r->permissions, CQL_PERM_MODIFY);
	ck_assert_int_eq(r->resource.kind, CQL_RES_TABLE);
	ck_assert_str_eq(r->resource.keyspace, "ks");
	ck_assert_str_eq(r->resource.name, "T");
	r = role("GRANT ALTER ON t TO bob"); /* the USE keyspace, later */
	ck_assert_int_eq(r->resource.kind, CQL_RES_TABLE);
	ck_assert_ptr_null(r->resource.keyspace);
	ck_assert_str_eq(r->resource.name, "t");
	/* ALL means what applies: a table has no CREATE */
	r = role("GRANT ALL PERMISSIONS ON ks.t TO bob");
	ck_assert_uint_eq(r->permissions,
			  CQL_PERM_ALTER | CQL_PERM_DROP | CQL_PERM_SELECT |
				  CQL_PERM_MODIFY | CQL_PERM_AUTHORIZE);
	r = role("REVOKE ALL ON ALL KEYSPACES FROM bob");
	ck_assert_int_eq(r->op, CQL_ROLE_REVOKE_PERMISSION);
	ck_assert_int_eq(r->resource.kind, CQL_RES_ALL_KEYSPACES);
	ck_assert(r->permissions & CQL_PERM_CREATE);
	ck_assert(!(r->permissions & CQL_PERM_DESCRIBE));
	r = role("GRANT ALL ON ALL ROLES TO bob");
	ck_assert_uint_eq(r->permissions,
			  CQL_PERM_CREATE | CQL_PERM_ALTER | CQL_PERM_DROP |
				  CQL_PERM_AUTHORIZE | CQL_PERM_DESCRIBE);
	r = role("GRANT ALTER ON ROLE 'Carol' TO bob");
	ck_assert_int_eq(r->resource.kind, CQL_RES_ROLE);
	ck_assert_str_eq(r->resource.name, "Carol");
	r = role("GRANT EXECUTE ON ALL FUNCTIONS IN KEYSPACE ks TO bob");
	ck_assert_int_eq(r->resource.kind, CQL_RES_KEYSPACE_FUNCTIONS);
	r = role("GRANT EXECUTE ON FUNCTION ks.f(int, frozen<list<Text>>) TO "
		 "bob");
	ck_assert_int_eq(r->resource.kind, CQL_RES_FUNCTION);
	ck_assert_str_eq(r->resource.name, "f(int, frozen<list<text>>)");
	r = role("GRANT SELECT ON ALL MBEANS TO bob");
	ck_assert_int_eq(r->resource.kind, CQL_RES_ALL_MBEANS);
	r = role("LIST ALL PERMISSIONS");
	ck_assert_int_eq(r->op, CQL_ROLE_LIST_PERMISSIONS);
	ck_assert_uint_eq(r->permissions, CQL_PERM_ALL);
	ck_assert_int_eq(r->resource.kind, CQL_RES_NONE);
	ck_assert_ptr_null(r->role);
	r = role("LIST SELECT ON ks.t OF bob NORECURSIVE;");
	ck_assert_uint_eq(r->permissions, CQL_PERM_SELECT);
	ck_assert_int_eq(r->resource.kind, CQL_RES_TABLE);
	ck_assert_str_eq(r->role, "bob");
	ck_assert(r->norecursive);
	r = role("LIST ALL OF bob");
	ck_assert_str_eq(r->role, "bob");
	/* a role statement still: the role is not a permission */
	r = role("GRANT admins TO on");
	ck_assert_int_eq(r->op, CQL_ROLE_GRANT);

	const char *m = parse_fails("GRANT CREATE ON ks.t TO bob", ERR_INVALID);
	ck_assert_str_eq(m, "Resource type DataResource does not support any "
			    "of the requested permissions");
	m = parse_fails("GRANT SELECT ON ALL ROLES TO bob", ERR_INVALID);
	ck_assert_str_eq(m, "Resource type RoleResource does not support any "
			    "of the requested permissions");
	m = parse_fails("GRANT SELECT ON FUNCTION ks.f() TO bob", ERR_INVALID);
	ck_assert_str_eq(m, "Resource type FunctionResource does not support "
			    "any of the requested permissions");
	m = parse_fails("GRANT EXECUTE ON FUNCTION f() TO bob",
			ERR_UNSUPPORTED);
	ck_assert_str_eq(m, "In this context function name must be explictly "
			    "qualified by a keyspace");
	m = parse_fails("GRANT SELECT ON MBEAN '*:*' TO bob", ERR_INVALID);
	ck_assert_str_eq(m, "Please use ALL MBEANS instead of wildcard "
			    "pattern");
	parse_fails("GRANT UNMASK ON ks.t TO bob", ERR_UNSUPPORTED);
	m = parse_fails("GRANT SELECT ON ks.t bob", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:21 mismatched input 'bob' expecting K_TO "
			    "(GRANT SELECT ON ks.t [bob])");
	parse_fails("GRANT SELECT ON ks.t TO", ERR_INVALID);
	parse_fails("GRANT SELECT ON TO bob", ERR_INVALID);
	parse_fails("GRANT SELECT ON ALL TABLES TO bob", ERR_INVALID);
	parse_fails("REVOKE SELECT ON ks.t TO bob", ERR_INVALID);
	parse_fails("GRANT SELECT ON ks.? TO bob", ERR_INVALID);
	parse_fails("GRANT SELECT ON KEYSPACE 'ks' TO bob", ERR_INVALID);
	parse_fails("GRANT EXECUTE ON FUNCTION ks.f(int TO bob", ERR_INVALID);
	parse_fails("LIST SELECT ON ks.t OF", ERR_INVALID);
	parse_fails("LIST SELECT ON ks.t extra", ERR_INVALID);
	parse_fails("GRANT SELECT ON ks.t TO ''", ERR_INVALID);
}
END_TEST

START_TEST(random_bytes_never_crash_the_parser)
{
	struct rng r;
	rng_seed(&r, seed);
	static const char *const pieces[] = {
		"SELECT",      "*",           "FROM",   "t",
		"WHERE",       "k",           "=",      "?",
		"(",           ")",           "'",      "\"",
		"[",           "{",           "}",      "]",
		",",           ":",           "AND",    "IN",
		"-",           "1",           "0x",     "token",
		"BEGIN",       "BATCH",       "APPLY",  ";",
		"/*",          "--",          "$$",     "INSERT",
		"INTO",        "VALUES",      "UPDATE", "SET",
		"+",           "CREATE",      "ROLE",   "USER",
		"GRANT",       "LIST",        "ROLES",  "OF",
		"WITH",        "LOGIN",       "=",      "true",
		"TO",          "ON",          "ALL",    "KEYSPACES",
		"KEYSPACE",    "PERMISSIONS", "SELECT", "MODIFY",
		"FUNCTION",    "FUNCTIONS",   "MBEAN",  "REVOKE",
		"NORECURSIVE", "AUTHORIZE",   "TABLE",  "<",
		">",           ".",
	};
	size_t npieces = sizeof(pieces) / sizeof(pieces[0]);
	char q[512];
	for (int i = 0; i < 20000; i++) {
		size_t n = 0;
		int words = 1 + (int)rng_below(&r, 20);
		for (int w = 0; w < words && n < sizeof(q) - 40; w++)
			n += (size_t)snprintf(q + n, sizeof(q) - n, "%s ",
					      pieces[rng_below(&r, npieces)]);
		int b;
		struct cql_stmt *s = cql_parse(&arena, q, n, &b, NULL);
		if (!s)
			ck_assert(err_code() == ERR_INVALID ||
				  err_code() == ERR_UNSUPPORTED);
		if (i % 1000 == 999) {
			arena_destroy(&arena);
			arena_create(&arena, 0);
		}
	}
}
END_TEST

START_TEST(trailing_commas_sizes_and_depth)
{
	/* Cassandra's cfamDefinition: '(' column (',' column?)* ')' */
	struct cql_stmt *s =
		parse("CREATE TABLE t (k int PRIMARY KEY, v int,)");
	ck_assert_uint_eq(s->u.create_table.column_count, 2);
	s = parse("CREATE TABLE t (k int, v int, PRIMARY KEY (k),)");
	ck_assert_uint_eq(s->u.create_table.column_count, 2);
	s = parse("CREATE TABLE t (k int,, v int, PRIMARY KEY (k))");
	ck_assert_uint_eq(s->u.create_table.column_count, 2);
	parse_fails("CREATE TABLE t (, k int PRIMARY KEY)", ERR_INVALID);
	parse_fails("CREATE TABLE t ()", ERR_INVALID);

	/* Type hints; (true) and (null) stay one-element tuples. */
	s = parse("SELECT * FROM t WHERE k = (int)? AND c IN (true)");
	ck_assert_int_eq(s->u.select.where[0].value->kind, CQL_TERM_HINT);
	ck_assert_str_eq(s->u.select.where[0].value->type->name, "int");
	ck_assert_int_eq(s->u.select.where[0].value->items[0]->kind,
			 CQL_TERM_BIND);
	ck_assert_int_eq(s->u.select.where[1].value->kind, CQL_TERM_TUPLE);
	s = parse("INSERT INTO t (k, v) VALUES ((frozen<list<int>>)[1], "
		  "(null))");
	ck_assert_int_eq(s->u.insert.values[0]->kind, CQL_TERM_HINT);
	ck_assert(s->u.insert.values[0]->type->frozen);
	ck_assert_int_eq(s->u.insert.values[1]->kind, CQL_TERM_TUPLE);
	s = parse("SELECT CAST(v AS text), cast(k as bigint) AS x FROM t");
	ck_assert_int_eq(s->u.select.selectors[0].kind, CQL_SEL_CAST);
	ck_assert_str_eq(s->u.select.selectors[0].type->name, "text");
	ck_assert_str_eq(s->u.select.selectors[0].args[0].name, "v");
	ck_assert_str_eq(s->u.select.selectors[1].alias, "x");
	parse_fails("SELECT CAST(v text) FROM t", ERR_INVALID);

	/* A statement above 1 MiB (a 3 MiB blob) parses. */
	size_t n = 3u << 20;
	char *big = malloc(n + 64);
	ck_assert_ptr_nonnull(big);
	int len = snprintf(big, 64, "INSERT INTO t (k, b) VALUES (1, 0x");
	memset(big + len, 'a', n);
	memcpy(big + len + n, ")", 2);
	s = cql_parse(&arena, big, strlen(big), &binds, NULL);
	ck_assert_msg(s != NULL, "%s", err_msg());
	ck_assert_uint_eq(s->u.insert.values[1]->len, n);

	/* A huge bad statement answers a short error. */
	memcpy(big, "SELECT ", 7);
	memset(big + 7, 'x', n);
	memcpy(big + 7 + n, " FORM t", 8);
	s = cql_parse(&arena, big, strlen(big), &binds, NULL);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	ck_assert_uint_lt(strlen(err_msg()), 1024);

	/* Deep nesting is a syntax error, not a stack overflow; the limit
	 * itself still parses. */
	size_t deep = 100000;
	char *q = malloc(deep * 2 + 64);
	ck_assert_ptr_nonnull(q);
	const char *kinds[] = {"[", "(", "{"};
	for (size_t k = 0; k < 3; k++) {
		len = snprintf(q, 64, "INSERT INTO t (k, v) VALUES (1, ");
		memset(q + len, kinds[k][0], deep);
		q[len + deep] = '\0';
		s = cql_parse(&arena, q, strlen(q), &binds, NULL);
		ck_assert_ptr_null(s);
		ck_assert_int_eq(err_code(), ERR_INVALID);
		ck_assert_msg(strstr(err_msg(), "nested more than") != NULL,
			      "%s", err_msg());
	}
	len = snprintf(q, 64, "CREATE TABLE t (k int PRIMARY KEY, v ");
	for (size_t i = 0; i < deep / 8; i++)
		len += snprintf(q + len, 16, "list<");
	q[len] = '\0';
	s = cql_parse(&arena, q, strlen(q), &binds, NULL);
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(err_msg(), "nested more than") != NULL, "%s",
		      err_msg());
	len = snprintf(q, 64, "SELECT ");
	for (size_t i = 0; i < deep / 8; i++)
		len += snprintf(q + len, 16, "f(");
	q[len] = '\0';
	s = cql_parse(&arena, q, strlen(q), &binds, NULL);
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(err_msg(), "nested more than") != NULL, "%s",
		      err_msg());
	/* 60 levels of lists: fine */
	len = snprintf(q, 64, "INSERT INTO t (k, v) VALUES (1, ");
	memset(q + len, '[', 60);
	memset(q + len + 60, ']', 60);
	memcpy(q + len + 120, ")", 2);
	parse(q);
	free(q);
	free(big);
}
END_TEST

static const struct cql_type_stmt *type_stmt(const char *q,
					     enum cql_stmt_kind kind)
{
	struct cql_stmt *s = parse(q);
	ck_assert_int_eq(s->kind, kind);
	ck_assert_int_eq(binds, 0);
	return &s->u.type;
}

START_TEST(type_statements)
{
	const struct cql_type_stmt *t = type_stmt(
		"CREATE TYPE IF NOT EXISTS Ks.Addr (Street text, \"Zip\" int, "
		"tags frozen<list<text>>, home frozen<ks.point>, "
		"m map<text, frozen<tuple<int, text>>>,)",
		CQL_STMT_CREATE_TYPE);
	ck_assert(t->if_not_exists);
	ck_assert_str_eq(t->name.keyspace, "ks");
	ck_assert_str_eq(t->name.name, "addr");
	ck_assert_uint_eq(t->field_count, 5);
	ck_assert_str_eq(t->fields[0], "street"); /* unquoted: lowercased */
	ck_assert_str_eq(t->fields[1], "Zip");
	ck_assert_str_eq(t->types[0]->name, "text");
	ck_assert(t->types[2]->frozen);
	ck_assert_str_eq(t->types[2]->name, "list");
	ck_assert_str_eq(t->types[2]->params[0]->name, "text");
	ck_assert(t->types[3]->frozen);
	ck_assert_str_eq(t->types[3]->keyspace, "ks");
	ck_assert_str_eq(t->types[3]->name, "point");
	ck_assert_str_eq(t->types[4]->params[1]->name, "tuple");
	ck_assert_uint_eq(t->types[4]->params[1]->param_count, 2);

	t = type_stmt("create type point (x int);", CQL_STMT_CREATE_TYPE);
	ck_assert(!t->name.keyspace && !t->if_not_exists);
	ck_assert_str_eq(t->name.name, "point");

	t = type_stmt("ALTER TYPE IF EXISTS ks.addr ADD IF NOT EXISTS zip2 "
		      "frozen<point>",
		      CQL_STMT_ALTER_TYPE);
	ck_assert(t->if_exists && t->field_if);
	ck_assert_int_eq(t->alter, CQL_ALTER_TYPE_ADD);
	ck_assert_uint_eq(t->field_count, 1);
	ck_assert_str_eq(t->fields[0], "zip2");
	ck_assert_str_eq(t->types[0]->name, "point");

	t = type_stmt("ALTER TYPE addr RENAME street TO road AND zip TO \"Z\"",
		      CQL_STMT_ALTER_TYPE);
	ck_assert_int_eq(t->alter, CQL_ALTER_TYPE_RENAME);
	ck_assert(!t->field_if);
	ck_assert_uint_eq(t->field_count, 4);
	ck_assert_str_eq(t->fields[0], "street");
	ck_assert_str_eq(t->fields[1], "road");
	ck_assert_str_eq(t->fields[3], "Z");

	t = type_stmt("ALTER TYPE addr RENAME IF EXISTS a TO b",
		      CQL_STMT_ALTER_TYPE);
	ck_assert(t->field_if);

	t = type_stmt("DROP TYPE IF EXISTS ks.addr", CQL_STMT_DROP_TYPE);
	ck_assert(t->if_exists);
	ck_assert_str_eq(t->name.keyspace, "ks");
	t = type_stmt("DROP TYPE addr", CQL_STMT_DROP_TYPE);
	ck_assert(!t->if_exists && !t->name.keyspace);

	/* field types and names that Cassandra's grammar takes */
	type_stmt("CREATE TYPE t (type text, key int, \"select\" int)",
		  CQL_STMT_CREATE_TYPE);

	t = type_stmt("ALTER TYPE addr ALTER zip TYPE bigint",
		      CQL_STMT_ALTER_TYPE);
	ck_assert_int_eq(t->alter, CQL_ALTER_TYPE_ALTER); /* refused later */
	const char *m = parse_fails("CREATE TYPE int (a int)", ERR_INVALID);
	ck_assert_str_eq(m, "line 1:12 no viable alternative at input 'int' "
			    "(CREATE TYPE [int] (...)");
	m = parse_fails("CREATE TYPE ks.enum (a int)", ERR_INVALID);
	ck_assert_str_eq(m, "Invalid (reserved) user type name enum");
	parse_fails("CREATE TYPE t ()", ERR_INVALID);
	parse_fails("CREATE TYPE t (a)", ERR_INVALID);
	parse_fails("CREATE TYPE t (a int", ERR_INVALID);
	parse_fails("CREATE TYPE t (a list<int)", ERR_INVALID);
	parse_fails("CREATE TYPE t (select int)", ERR_INVALID);
	parse_fails("ALTER TYPE t DROP a", ERR_INVALID);
	parse_fails("ALTER TYPE t RENAME a b", ERR_INVALID);
	parse_fails("DROP TYPE t extra", ERR_INVALID);
	parse_fails("CREATE TYPE t (a 'org.Custom')", ERR_UNSUPPORTED);
	/* user type values, fields and qualified type names elsewhere */
	struct cql_stmt *st = parse("INSERT INTO t (k, u) VALUES (1, {a: 1, "
				    "\"B\": 'x', c: {d: ?}})");
	const struct cql_term *u = st->u.insert.values[1];
	ck_assert_int_eq(u->kind, CQL_TERM_UDT);
	ck_assert_uint_eq(u->count, 3);
	ck_assert_str_eq(u->names[0], "a");
	ck_assert_str_eq(u->names[1], "B");
	ck_assert(term_is(u->items[1], CQL_TERM_STRING, "x"));
	ck_assert_int_eq(u->items[2]->kind, CQL_TERM_UDT);
	ck_assert_int_eq(u->items[2]->items[0]->kind, CQL_TERM_BIND);
	st = parse("INSERT INTO t (k, m) VALUES (1, {true: 1, 'a': 2})");
	ck_assert_int_eq(st->u.insert.values[1]->kind, CQL_TERM_MAP);
	st = parse("UPDATE t SET u.f = ?, v = 1 WHERE k = 1");
	ck_assert_str_eq(st->u.update.assignments[0].target.name, "u");
	ck_assert_str_eq(st->u.update.assignments[0].target.field, "f");
	ck_assert_ptr_null(st->u.update.assignments[1].target.field);
	st = parse("DELETE u.f, v FROM t WHERE k = 1");
	ck_assert_str_eq(st->u.del.columns[0].field, "f");
	st = parse("SELECT u.f, u.g.h AS x, v FROM t");
	const struct cql_selector *sel = st->u.select.selectors;
	ck_assert_int_eq(sel[0].kind, CQL_SEL_FIELD);
	ck_assert_str_eq(sel[0].name, "f");
	ck_assert_int_eq(sel[0].args[0].kind, CQL_SEL_COLUMN);
	ck_assert_str_eq(sel[0].args[0].name, "u");
	ck_assert_int_eq(sel[1].kind, CQL_SEL_FIELD);
	ck_assert_str_eq(sel[1].name, "h");
	ck_assert_str_eq(sel[1].alias, "x");
	ck_assert_int_eq(sel[1].args[0].kind, CQL_SEL_FIELD);
	ck_assert_str_eq(sel[1].args[0].args[0].name, "u");
	st = parse("CREATE TABLE t (k int PRIMARY KEY, a frozen<ks.addr>)");
	ck_assert_str_eq(st->u.create_table.columns[1].type->keyspace, "ks");
	ck_assert_str_eq(st->u.create_table.columns[1].type->name, "addr");
	ck_assert(st->u.create_table.columns[1].type->frozen);

	/* deep nesting is refused, not a stack overflow */
	char deep[2048] = "CREATE TYPE t (a ";
	for (int i = 0; i < 100; i++)
		strcat(deep, "frozen<list<");
	strcat(deep, "int");
	for (int i = 0; i < 100; i++)
		strcat(deep, ">>");
	strcat(deep, ")");
	parse_fails(deep, ERR_INVALID);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("cql_parse");
	TCase *tc = tcase_create("core");
	seed = test_seed(77);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, driver_control_queries_parse);
	tcase_add_test(tc, syntax_error_snippets);
	tcase_add_test(tc, relation_shapes_as_cassandras_grammar_has_them);
	tcase_add_test(tc, conditional_writes);
	tcase_add_test(tc, create_keyspace_and_table);
	tcase_add_test(tc, alter_drop_truncate_describe);
	tcase_add_test(tc, insert_update_delete);
	tcase_add_test(tc, select_forms);
	tcase_add_test(tc, json_forms);
	tcase_add_test(tc, batches_comments_and_strings);
	tcase_add_test(tc, syntax_errors_read_like_cassandras);
	tcase_add_test(tc, unsupported_features_get_a_clear_refusal);
	tcase_add_test(tc, role_statements);
	tcase_add_test(tc, permission_statements);
	tcase_add_test(tc, type_statements);
	tcase_add_test(tc, index_statements);
	tcase_add_test(tc, random_bytes_never_crash_the_parser);
	tcase_add_test(tc, trailing_commas_sizes_and_depth);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
