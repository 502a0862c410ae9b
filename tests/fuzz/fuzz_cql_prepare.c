/* libFuzzer: generated schemas with generated statements through PREPARE
 * and EXECUTE (and QUERY with values, and BATCH) on the real executor, in
 * process, with a data path that does what the node's does without a disk
 * or a ring: a write builds its mutations, a read plans, merges and
 * resolves what was written (storage_fragment_merge/_resolve) and encodes
 * its rows.
 *
 * The input drives a generator: a table of 2 to 8 columns of any type
 * (simple, duration, tuple<int, text>, vector<float, 2>, list/set/map of
 * them, frozen or not, frozen collections in the key), then statements of every
 * kind with markers, literals, nulls and some garbage in every position, each
 * prepared and run with values that are well typed for the markers the server
 * described, null, unset, random bytes or one byte off. Checked, besides the
 * sanitizers:
 *   - every request gets one well-formed RESULT or ERROR frame;
 *   - a PREPARED result parses completely, every type option whole;
 *   - every mutation a write builds passes storage_mutation_validate
 *     (what the client layer accepts, the engine never refuses).
 */
#include "client/driver/cql_client.h"
#include "client/exec/data_path.h"
#include "client/exec/dml.h"
#include "client/exec/executor.h"
#include "client/exec/select.h"
#include "common/err.h"
#include "common/log.h"
#include "common/murmur3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- the input ----------------------------------------------------------- */

struct src {
	const uint8_t *p;
	size_t n;
};

static unsigned pick(struct src *s, unsigned n)
{
	if (!s->n || n == 0)
		return 0;
	s->n--;
	return *s->p++ % n;
}

static bool chance(struct src *s, unsigned in)
{
	return pick(s, in) == 0;
}

/* ---- the schema ---------------------------------------------------------- */

static const char *const simple[] = {
	"ascii", "bigint", "blob", "boolean", "date", "decimal", "double",
	"float", "inet", "int", "smallint", "text", "time", "timestamp",
	"timeuuid", "tinyint", "uuid", "varint",
	/* the data model's: refused in keys and sets where Cassandra
	 * refuses them (duration), frozen by nature (tuple, vector) */
	"duration", "tuple<int, text>", "vector<float, 2>"};
#define NSIMPLE (sizeof(simple) / sizeof(simple[0]))

struct col {
	char name[8];
	char type[96];
	int kind; /* 0 pk, 1 ck, 2 regular, 3 static */
	int coll; /* 0 simple, 'l', 's', 'm' */
	bool frozen;
	const char *elem, *value;
};

struct table {
	struct col cols[8];
	int n;
};

static void gen_type(struct src *s, struct col *c, bool key)
{
	c->elem = simple[pick(s, NSIMPLE)];
	c->value = simple[pick(s, NSIMPLE)];
	unsigned k = pick(s, 8);
	c->coll = k < 5 ? 0 : "lsm"[k - 5];
	c->frozen = c->coll && (key || chance(s, 2));
	if (!c->coll) {
		snprintf(c->type, sizeof(c->type), "%s", c->elem);
		return;
	}
	char inner[64];
	if (c->coll == 'm')
		snprintf(inner, sizeof(inner), "map<%s, %s>", c->elem,
			 c->value);
	else
		snprintf(inner, sizeof(inner), "%s<%s>",
			 c->coll == 'l' ? "list" : "set", c->elem);
	snprintf(c->type, sizeof(c->type), c->frozen ? "frozen<%s>" : "%s",
		 inner);
}

static void gen_table(struct src *s, struct table *t, struct buf *ddl)
{
	int pk = 1 + (int)pick(s, 2), ck = (int)pick(s, 3);
	t->n = pk + ck + 1 + (int)pick(s, 4);
	for (int i = 0; i < t->n; i++) {
		struct col *c = &t->cols[i];
		snprintf(c->name, sizeof(c->name), "c%d", i);
		c->kind = i < pk ? 0 : i < pk + ck ? 1 : 2;
		if (c->kind == 2 && ck && chance(s, 4))
			c->kind = 3;
		gen_type(s, c, c->kind < 2);
	}
	char line[256];
	buf_clear(ddl);
	buf_append(ddl, "CREATE TABLE t (", 16);
	for (int i = 0; i < t->n; i++) {
		int n = snprintf(line, sizeof(line), "%s %s%s, ",
				 t->cols[i].name, t->cols[i].type,
				 t->cols[i].kind == 3 ? " static" : "");
		buf_append(ddl, line, (size_t)n);
	}
	buf_append(ddl, "PRIMARY KEY ((", 14);
	for (int i = 0; i < pk; i++) {
		int n = snprintf(line, sizeof(line), "%s%s", i ? ", " : "",
				 t->cols[i].name);
		buf_append(ddl, line, (size_t)n);
	}
	buf_append(ddl, ")", 1);
	for (int i = pk; i < pk + ck; i++) {
		int n = snprintf(line, sizeof(line), ", %s", t->cols[i].name);
		buf_append(ddl, line, (size_t)n);
	}
	buf_append(ddl, "))", 3); /* with the NUL */
}

/* ---- statements ---------------------------------------------------------- */

static void add(struct buf *b, const char *s)
{
	buf_append(b, s, strlen(s));
}

static const char *literal_of(struct src *s, const char *type)
{
	static const struct {
		const char *type, *lits[3];
	} lits[] = {
		{"ascii", {"'a'", "'é'", "''"}},
		{"bigint",
		 {"1", "-9223372036854775808", "9223372036854775808"}},
		{"blob", {"0x00ff", "0x", "0xabc"}},
		{"boolean", {"true", "false", "1"}},
		{"date", {"'2024-01-31'", "0", "'2023-02-29'"}},
		{"decimal", {"1.5", "123E1", "-0.0"}},
		{"double", {"NaN", "-Infinity", "1e308"}},
		{"float", {"1.5", "-0.0", "3.4e39"}},
		{"inet", {"'127.0.0.1'", "'::1'", "'nope'"}},
		{"int", {"1", "-2147483648", "2147483648"}},
		{"smallint", {"1", "32768", "-1"}},
		{"text", {"'x'", "'\xc3\xa9'", "$$y$$"}},
		{"time", {"'12:00:00'", "86399999999999", "'25:00:00'"}},
		{"timestamp", {"'2024-01-31 10:00:00'", "0", "now()"}},
		{"timeuuid",
		 {"now()", "00000000-0000-1000-8000-000000000000",
		  "550e8400-e29b-41d4-a716-446655440000"}},
		{"tinyint", {"1", "128", "-128"}},
		{"uuid",
		 {"uuid()", "550e8400-e29b-41d4-a716-446655440000", "now()"}},
		{"varint", {"0", "-1", "100000000000000000000000"}},
		{"duration", {"1h30m", "P1DT2H", "-1mo"}},
		{"tuple<int, text>", {"(1, 'a')", "(null, 'b')", "(1, 2, 3)"}},
		{"vector<float, 2>", {"[1.0, 2.5]", "[1.0]", "[NaN, -0.0]"}},
	};
	for (size_t i = 0; i < sizeof(lits) / sizeof(lits[0]); i++)
		if (strcmp(lits[i].type, type) == 0)
			return lits[i].lits[pick(s, 3)];
	return "1";
}

/* A term for a value of column `c` (whole = false: one element). */
static void gen_term(struct src *s, struct buf *b, const struct col *c,
		     bool whole)
{
	static const char *const junk[] = {
		"null",   "?",        ":name", "{}",  "[]",  "{1: 2}",
		"(1, 2)", "token(?)", "now()", "[?]", "{?}", "'unterminated",
		"0x",     "-",        "1.2.3"};
	switch (pick(s, 8)) {
	case 0:
	case 1:
	case 2:
	case 3:
		add(b, "?");
		return;
	case 4:
		add(b, ":v");
		return;
	case 5:
		add(b, junk[pick(s, sizeof(junk) / sizeof(junk[0]))]);
		return;
	default:
		break;
	}
	if (!c || !whole || !c->coll) {
		add(b, literal_of(s, c ? c->elem : simple[pick(s, NSIMPLE)]));
		return;
	}
	add(b, c->coll == 'l' ? "[" : "{");
	int n = (int)pick(s, 3);
	for (int i = 0; i < n; i++) {
		if (i)
			add(b, ", ");
		add(b, literal_of(s, c->elem));
		if (c->coll == 'm') {
			add(b, ": ");
			add(b, literal_of(s, c->value));
		}
	}
	add(b, c->coll == 'l' ? "]" : "}");
}

static const struct col *gen_col(struct src *s, const struct table *t,
				 struct buf *b)
{
	unsigned i = pick(s, (unsigned)t->n + 1);
	if (i == (unsigned)t->n) {
		add(b, "nope");
		return NULL;
	}
	add(b, t->cols[i].name);
	return &t->cols[i];
}

static void gen_where(struct src *s, const struct table *t, struct buf *b)
{
	static const char *const ops[] = {
		" = ",  " < ",  " > ",        " <= ",          " >= ",
		" != ", " IN ", " CONTAINS ", " CONTAINS KEY "};
	int n = (int)pick(s, 5), i = 0;
	/* Mostly the whole partition key first (and a clustering prefix),
	 * so statements get past the restrictions to their values. */
	for (int k = 0; !chance(s, 3) && k < t->n && t->cols[k].kind < 2; k++) {
		if (t->cols[k].kind == 1 && chance(s, 3))
			break;
		add(b, i++ ? " AND " : " WHERE ");
		add(b, t->cols[k].name);
		add(b, chance(s, 4) ? " IN " : " = ");
		gen_term(s, b, &t->cols[k], true);
	}
	for (n += i; i < n; i++) {
		add(b, i ? " AND " : " WHERE ");
		unsigned form = pick(s, 10);
		if (form == 0) {
			add(b, "token(c0) > ");
			add(b, chance(s, 2) ? "?" : "token(?)");
			continue;
		}
		if (form == 1) {
			add(b, "(c1, c2) ");
			add(b, ops[pick(s, 5)]);
			add(b, chance(s, 3) ? "?" : "(?, ?)");
			continue;
		}
		const struct col *c = gen_col(s, t, b);
		unsigned op = pick(s, 9);
		add(b, ops[op]);
		if (op == 6) {
			if (chance(s, 2)) {
				add(b, "?");
			} else {
				add(b, "(");
				gen_term(s, b, c, true);
				add(b, ", ");
				gen_term(s, b, c, true);
				add(b, ")");
			}
		} else {
			gen_term(s, b, c, op < 6);
		}
	}
}

static void gen_using(struct src *s, struct buf *b, bool ttl)
{
	if (chance(s, 2))
		return;
	add(b, " USING ");
	if (ttl && chance(s, 2)) {
		add(b, chance(s, 2) ? "TTL ?" : "TTL 10");
		if (chance(s, 2))
			add(b, " AND TIMESTAMP ?");
	} else {
		add(b, chance(s, 2) ? "TIMESTAMP ?" : "TIMESTAMP 5");
	}
}

static void gen_dml(struct src *s, const struct table *t, struct buf *b,
		    unsigned kind)
{
	if (kind == 0) { /* INSERT */
		add(b, "INSERT INTO t (");
		int n = 1 + (int)pick(s, (unsigned)t->n);
		const struct col *cs[9];
		for (int i = 0; i < n; i++) {
			if (i)
				add(b, ", ");
			if (i < t->n && !chance(s, 4)) { /* mostly in order */
				add(b, t->cols[i].name);
				cs[i] = &t->cols[i];
			} else {
				cs[i] = gen_col(s, t, b);
			}
		}
		add(b, ") VALUES (");
		for (int i = 0; i < n; i++) {
			if (i)
				add(b, ", ");
			gen_term(s, b, cs[i], true);
		}
		add(b, ")");
		gen_using(s, b, true);
		return;
	}
	if (kind == 1) { /* UPDATE */
		add(b, "UPDATE t");
		gen_using(s, b, true);
		add(b, " SET ");
		int n = 1 + (int)pick(s, 3);
		for (int i = 0; i < n; i++) {
			if (i)
				add(b, ", ");
			struct buf name;
			buf_init(&name);
			const struct col *c = gen_col(s, t, &name);
			buf_put_u8(&name, 0);
			const char *nm = (const char *)name.data;
			switch (pick(s, 5)) {
			case 0:
				add(b, nm);
				add(b, " = ");
				gen_term(s, b, c, true);
				break;
			case 1:
				add(b, nm);
				add(b, " = ");
				add(b, nm);
				add(b, " + ");
				gen_term(s, b, c, true);
				break;
			case 2:
				add(b, nm);
				add(b, " = ");
				gen_term(s, b, c, true);
				add(b, " + ");
				add(b, nm);
				break;
			case 3:
				add(b, nm);
				add(b, " = ");
				add(b, nm);
				add(b, " - ");
				gen_term(s, b, c, true);
				break;
			default:
				add(b, nm);
				add(b, "[");
				gen_term(s, b, c, false);
				add(b, "] = ");
				gen_term(s, b, c, false);
			}
			buf_free(&name);
		}
		gen_where(s, t, b);
		return;
	}
	add(b, "DELETE "); /* DELETE */
	int n = (int)pick(s, 3);
	for (int i = 0; i < n; i++) {
		if (i)
			add(b, ", ");
		const struct col *c = gen_col(s, t, b);
		if (chance(s, 2)) {
			add(b, "[");
			gen_term(s, b, c, false);
			add(b, "]");
		}
	}
	add(b, " FROM t");
	gen_using(s, b, false);
	gen_where(s, t, b);
}

static void gen_select(struct src *s, const struct table *t, struct buf *b)
{
	static const char *const fns[] = {
		"writetime",   "ttl",       "token",        "count", "max",
		"totimestamp", "intasblob", "maxwritetime", "sum"};
	add(b, chance(s, 4) ? "SELECT DISTINCT " : "SELECT ");
	if (chance(s, 2)) {
		add(b, "*");
	} else {
		int n = 1 + (int)pick(s, 3);
		for (int i = 0; i < n; i++) {
			if (i)
				add(b, ", ");
			unsigned f = pick(s, 12);
			if (f < (unsigned)(sizeof(fns) / sizeof(fns[0]))) {
				add(b, fns[f]);
				add(b, "(");
				gen_col(s, t, b);
				add(b, ")");
			} else if (f == 10) {
				gen_col(s, t, b);
				add(b, "[");
				gen_term(s, b, NULL, false);
				add(b, "]");
			} else {
				gen_col(s, t, b);
			}
		}
	}
	add(b, " FROM t");
	gen_where(s, t, b);
	if (chance(s, 4)) { /* mostly a key prefix, sometimes not */
		int n = 1 + (int)pick(s, 3);
		add(b, " GROUP BY ");
		for (int i = 0; i < n; i++) {
			char name[16];
			snprintf(name, sizeof(name), "%sc%d", i ? ", " : "", i);
			if (chance(s, 6)) {
				add(b, i ? ", " : "");
				gen_col(s, t, b);
			} else {
				add(b, name);
			}
		}
	}
	if (chance(s, 4))
		add(b, chance(s, 2) ? " ORDER BY c1 DESC" : " ORDER BY c2 ASC");
	if (chance(s, 3))
		add(b, chance(s, 2) ? " LIMIT ?" : " LIMIT 2");
	if (chance(s, 6))
		add(b, " PER PARTITION LIMIT ?");
	if (chance(s, 2))
		add(b, " ALLOW FILTERING");
}

static void gen_stmt(struct src *s, const struct table *t, struct buf *b)
{
	buf_clear(b);
	unsigned kind = pick(s, 10);
	if (kind < 4) {
		gen_select(s, t, b);
	} else if (kind < 9) {
		gen_dml(s, t, b, (kind - 4) % 3);
	} else {
		add(b, chance(s, 2) ? "BEGIN BATCH" : "BEGIN UNLOGGED BATCH");
		if (chance(s, 3))
			add(b, " USING TIMESTAMP ?");
		int n = 1 + (int)pick(s, 3);
		for (int i = 0; i < n; i++) {
			add(b, " ");
			gen_dml(s, t, b, pick(s, 3));
			add(b, ";");
		}
		add(b, " APPLY BATCH");
	}
	if (chance(s, 40) && s->n) { /* raw bytes of the input */
		size_t n = pick(s, 16);
		n = n < s->n ? n : s->n;
		buf_append(b, s->p, n);
		s->p += n;
		s->n -= n;
	}
	buf_put_u8(b, 0);
}

/* ---- the metadata of PREPARED, strictly ---------------------------------- */

struct ftype {
	uint16_t id;
	struct ftype *sub[2];
};

__attribute__((noreturn)) static void bad_metadata(const char *what)
{
	fprintf(stderr, "malformed PREPARED metadata: %s\n", what);
	abort();
}

static struct ftype *read_type(struct cursor *c, struct arena *a, int depth)
{
	struct ftype *t = arena_alloc(a, sizeof(*t));
	if (!t || depth > 3 || cql_read_short(c, &t->id))
		bad_metadata("type option");
	t->sub[0] = t->sub[1] = NULL;
	switch (t->id) {
	case CQL_TYPE_LIST:
	case CQL_TYPE_SET:
		t->sub[0] = read_type(c, a, depth + 1);
		break;
	case CQL_TYPE_MAP:
		t->sub[0] = read_type(c, a, depth + 1);
		t->sub[1] = read_type(c, a, depth + 1);
		break;
	case CQL_TYPE_ASCII:
	case CQL_TYPE_BIGINT:
	case CQL_TYPE_BLOB:
	case CQL_TYPE_BOOLEAN:
	case CQL_TYPE_COUNTER:
	case CQL_TYPE_DECIMAL:
	case CQL_TYPE_DOUBLE:
	case CQL_TYPE_FLOAT:
	case CQL_TYPE_INT:
	case CQL_TYPE_TIMESTAMP:
	case CQL_TYPE_UUID:
	case CQL_TYPE_VARCHAR:
	case CQL_TYPE_VARINT:
	case CQL_TYPE_TIMEUUID:
	case CQL_TYPE_INET:
	case CQL_TYPE_DATE:
	case CQL_TYPE_TIME:
	case CQL_TYPE_SMALLINT:
	case CQL_TYPE_TINYINT:
	case CQL_TYPE_DURATION:
		break;
	case CQL_TYPE_TUPLE: { /* only tuple<int, text> is generated */
		uint16_t n;
		if (cql_read_short(c, &n) || n != 2)
			bad_metadata("tuple arity");
		t->sub[0] = read_type(c, a, depth + 1);
		t->sub[1] = read_type(c, a, depth + 1);
		break;
	}
	case CQL_TYPE_CUSTOM: { /* only vector<float, 2>, as Cassandra 5.0
				 * names it (" , ") */
		struct slice name;
		static const char vec[] =
			"org.apache.cassandra.db.marshal.VectorType("
			"org.apache.cassandra.db.marshal.FloatType , 2)";
		if (cql_read_string(c, &name) || name.len != strlen(vec) ||
		    memcmp(name.ptr, vec, name.len) != 0)
			bad_metadata("custom type name");
		break;
	}
	default: /* the server names no UDT type here */
		bad_metadata("an unexpected type id");
	}
	return t;
}

static void read_specs(struct cursor *c, struct arena *a, int32_t flags,
		       int32_t n, struct ftype **types)
{
	struct slice s;
	if ((flags & CQL_ROWS_GLOBAL_TABLES_SPEC) &&
	    (cql_read_string(c, &s) || cql_read_string(c, &s)))
		bad_metadata("global table spec");
	for (int32_t i = 0; i < n; i++) {
		if (!(flags & CQL_ROWS_GLOBAL_TABLES_SPEC) &&
		    (cql_read_string(c, &s) || cql_read_string(c, &s)))
			bad_metadata("column table spec");
		if (cql_read_string(c, &s))
			bad_metadata("column name");
		struct ftype *t = read_type(c, a, 0);
		if (types)
			types[i] = t;
	}
}

/* The body of a RESULT after its kind: id, bind specs (their types into
 * *binds), result metadata; nothing may be left. */
static int32_t read_prepared(struct cursor *c, struct arena *a,
			     struct slice *id, struct ftype ***binds)
{
	int32_t flags, n, npk, rflags, rn;
	if (cql_read_short_bytes(c, id) || cql_read_int(c, &flags) ||
	    cql_read_int(c, &n) || cql_read_int(c, &npk) || n < 0 || n > 1000 ||
	    npk < 0 || npk > n)
		bad_metadata("prepared header");
	for (int32_t i = 0; i < npk; i++) {
		uint16_t ix;
		if (cql_read_short(c, &ix) || ix >= n)
			bad_metadata("partition key index");
	}
	*binds = arena_alloc(a, ((size_t)n + 1) * sizeof(**binds));
	read_specs(c, a, flags, n, *binds);
	if (cql_read_int(c, &rflags) || cql_read_int(c, &rn) || rn < 0 ||
	    rn > 1000)
		bad_metadata("result metadata");
	if (!(rflags & CQL_ROWS_NO_METADATA))
		read_specs(c, a, rflags, rn, NULL);
	if (cursor_left(c))
		bad_metadata("bytes after the metadata");
	return n;
}

/* ---- values -------------------------------------------------------------- */

static void put_random(struct src *s, struct buf *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf_put_u8(b, (uint8_t)pick(s, 256));
}

/* A valid serialized value of `t`. */
static void gen_valid(struct src *s, struct buf *b, const struct ftype *t)
{
	switch (t->id) {
	case CQL_TYPE_LIST:
	case CQL_TYPE_SET:
	case CQL_TYPE_MAP: {
		uint32_t n = pick(s, 4);
		buf_put_be32(b, n);
		for (uint32_t i = 0; i < n; i++) {
			for (int k = 0; k < (t->id == CQL_TYPE_MAP ? 2 : 1);
			     k++) {
				size_t mark = b->len;
				buf_put_be32(b, 0);
				gen_valid(s, b, t->sub[k]);
				be32_store(b->data + mark,
					   (uint32_t)(b->len - mark - 4));
			}
		}
		return;
	}
	case CQL_TYPE_TUPLE:
		for (int k = 0; k < 2; k++) {
			if (chance(s, 4)) { /* a null component */
				buf_put_be32(b, 0xffffffffu);
				continue;
			}
			size_t mark = b->len;
			buf_put_be32(b, 0);
			gen_valid(s, b, t->sub[k]);
			be32_store(b->data + mark,
				   (uint32_t)(b->len - mark - 4));
		}
		return;
	case CQL_TYPE_DURATION: { /* months, days, nanos: vints, one sign */
		bool neg = chance(s, 3);
		for (int k = 0; k < 3; k++)
			buf_put_u8(b, (uint8_t)(2 * pick(s, 60) + neg));
		return;
	}
	case CQL_TYPE_CUSTOM: /* vector<float, 2> */
	case CQL_TYPE_BIGINT:
	case CQL_TYPE_COUNTER:
	case CQL_TYPE_TIMESTAMP:
	case CQL_TYPE_DOUBLE:
	case CQL_TYPE_TIME:
		put_random(s, b, 8);
		return;
	case CQL_TYPE_INT:
	case CQL_TYPE_FLOAT:
	case CQL_TYPE_DATE:
		put_random(s, b, 4);
		return;
	case CQL_TYPE_SMALLINT:
		put_random(s, b, 2);
		return;
	case CQL_TYPE_TINYINT:
	case CQL_TYPE_BOOLEAN:
		put_random(s, b, 1);
		return;
	case CQL_TYPE_UUID:
	case CQL_TYPE_TIMEUUID: {
		size_t at = b->len;
		put_random(s, b, 16);
		if (t->id == CQL_TYPE_TIMEUUID)
			b->data[at + 6] =
				(uint8_t)(0x10 | (b->data[at + 6] & 15));
		return;
	}
	case CQL_TYPE_INET:
		put_random(s, b, chance(s, 2) ? 4 : 16);
		return;
	case CQL_TYPE_DECIMAL:
		buf_put_be32(b, pick(s, 5));
		put_random(s, b, 1 + pick(s, 3));
		return;
	case CQL_TYPE_ASCII:
	case CQL_TYPE_VARCHAR: {
		size_t n = pick(s, 6);
		for (size_t i = 0; i < n; i++)
			buf_put_u8(b, (uint8_t)('a' + pick(s, 26)));
		return;
	}
	default: /* blob, varint */
		put_random(s, b, pick(s, 6));
	}
}

static void gen_values(struct src *s, struct arena *a, struct ftype **types,
		       int32_t n, struct cql_value *out)
{
	for (int32_t i = 0; i < n; i++) {
		struct buf b;
		buf_init(&b);
		unsigned mode = pick(s, 12);
		if (mode == 0) {
			out[i] = (struct cql_value){CQL_VALUE_NULL, NULL};
			continue;
		}
		if (mode == 1) {
			out[i] = (struct cql_value){CQL_VALUE_UNSET, NULL};
			continue;
		}
		if (mode == 2)
			put_random(s, &b, pick(s, 24));
		else
			gen_valid(s, &b, types[i]);
		if (mode == 3 && b.len)
			b.len--; /* one byte short */
		if (mode == 4)
			buf_put_u8(&b, 0); /* one byte over */
		uint8_t *p =
			arena_memdup(a, b.data ? b.data : (uint8_t *)"", b.len);
		out[i] = (struct cql_value){(int32_t)b.len, p};
		buf_free(&b);
	}
}

/* ---- the executor in process --------------------------------------------- */

#define MAX_KEPT 64

/* FUZZ_STATS=1 prints what the inputs reached, every 500 inputs. */
static struct {
	unsigned long inputs, prepared, executed, results, writes, reads;
} stats;

struct fz {
	struct cql_schema *schema;
	struct cql_exec *exec;
	struct cql_timeuuid_gen uuids;
	uint64_t rnd;
	int ids;
	char keyspace[64];
	struct buf reply; /* the last reply frame */
	int replies;
	struct storage_mutation *kept[MAX_KEPT]; /* written, decoded */
	size_t nkept;
};

static void node_info(void *arg, struct cql_node_info *out)
{
	(void)arg;
	static const int64_t tokens[] = {0};
	memset(out, 0, sizeof(*out));
	out->cluster_name = "fuzz";
	out->dc = "dc1";
	out->rack = "rack1";
	out->tokens = tokens;
	out->token_count = 1;
}

static void new_table_id(void *arg, uint8_t id[16])
{
	struct fz *f = arg;
	memset(id, 0, 16);
	be32_store(id + 12, (uint32_t)++f->ids);
	id[6] = 0x40;
	id[8] = 0x80;
}

static uint64_t rnd(void *arg)
{
	struct fz *f = arg;
	return f->rnd =
		       f->rnd * 6364136223846793005ull + 1442695040888963407ull;
}

static void reply(struct cql_request *req, struct buf *b)
{
	cql_request_reply(req, b->data, b->len);
	buf_free(b);
}

static void fail(const struct cql_data_request *dr)
{
	struct buf b;
	buf_init(&b);
	cql_encode_error(&b, dr->info->version, dr->info->stream,
			 err_code() == ERR_NOMEM ? CQL_ERR_SERVER
						 : CQL_ERR_INVALID,
			 err_msg());
	reply(dr->req, &b);
}

static void keep(struct fz *f, const struct storage_mutation *m)
{
	struct buf b;
	buf_init(&b);
	if (storage_mutation_encode(m, &b) != 0) {
		buf_free(&b);
		return;
	}
	struct storage_mutation *d = storage_mutation_decode(b.data, b.len);
	buf_free(&b);
	if (!d) {
		fprintf(stderr, "a mutation does not decode: %s\n", err_msg());
		abort();
	}
	if (f->nkept == MAX_KEPT) {
		storage_mutation_delete(d);
		return;
	}
	f->kept[f->nkept++] = d;
}

static void run_write(struct fz *f, const struct cql_data_request *dr,
		      struct cql_fn_ctx *fn)
{
	struct cql_write_ctx ctx = {.timestamp = 1000, .now_sec = 1, .fn = fn};
	struct cql_mutations all;
	const struct cql_table **tables = NULL;
	if (cql_data_build_writes(dr, &ctx, &all, &tables) != 0) {
		fail(dr);
		return;
	}
	for (size_t i = 0; i < all.count; i++) {
		const struct storage_table_meta *m = cql_table_meta(tables[i]);
		if (storage_mutation_validate(m, all.items[i]) != 0) {
			fprintf(stderr,
				"the client layer built an invalid "
				"mutation: %s\n",
				err_msg());
			abort();
		}
		keep(f, all.items[i]);
	}
	stats.writes += all.count;
	cql_mutations_free(&all);
	free(tables);
	struct buf b;
	buf_init(&b);
	cql_encode_result_void(&b, dr->info->version, dr->info->stream);
	reply(dr->req, &b);
}

static int token_order(const void *x, const void *y)
{
	const struct storage_result *a = *(struct storage_result *const *)x;
	const struct storage_result *b = *(struct storage_result *const *)y;
	if (a->token != b->token)
		return a->token < b->token ? -1 : 1;
	return slice_cmp(a->key, b->key);
}

/* What a storage read of `key` would find among the kept writes. */
static struct storage_result *read_key(struct fz *f,
				       const struct storage_table_meta *m,
				       const struct storage_read_cmd *cmd,
				       struct slice key)
{
	struct storage_mutation *frags[MAX_KEPT];
	size_t n = 0;
	for (size_t i = 0; i < f->nkept; i++)
		if (memcmp(storage_mutation_table_id(f->kept[i]), m->id, 16) ==
			    0 &&
		    slice_eq(storage_mutation_key(f->kept[i]), key))
			frags[n++] = f->kept[i];
	if (!n)
		return NULL;
	struct storage_mutation *merged = storage_fragment_merge(m, frags, n);
	struct storage_result *r = NULL;
	if (merged && storage_fragment_resolve(m, merged, cmd, 1, &r) != 0)
		r = NULL;
	storage_mutation_delete(merged);
	return r;
}

static void run_read(struct fz *f, const struct cql_data_request *dr,
		     struct cql_fn_ctx *fn)
{
	struct arena a;
	arena_create(&a, 0);
	struct cql_select_plan *p =
		cql_select_plan_new(&a, &dr->stmt->u.select, dr->table,
				    dr->binds, dr->bind_count, fn);
	const struct cql_query_params *qp = dr->params;
	if (!p || cql_select_plan_page(p, qp->page_size,
				       qp->has_paging_state ? &qp->paging_state
							    : NULL) != 0) {
		fail(dr);
		arena_destroy(&a);
		return;
	}
	const struct storage_table_meta *m = cql_table_meta(dr->table);
	const struct storage_read_cmd *cmd = cql_select_plan_cmd(p);
	struct storage_result *rs[MAX_KEPT + 1];
	size_t n = 0;
	if (cql_select_plan_is_scan(p)) {
		for (size_t i = 0; i < f->nkept && n < MAX_KEPT; i++) {
			struct slice key = storage_mutation_key(f->kept[i]);
			bool seen = false;
			for (size_t k = 0; k < n && !seen; k++)
				seen = slice_eq(rs[k]->key, key);
			struct storage_result *r =
				seen ? NULL : read_key(f, m, cmd, key);
			if (r)
				rs[n++] = r;
		}
		qsort(rs, n, sizeof(rs[0]), token_order);
	} else {
		size_t keys = cql_select_plan_key_count(p);
		for (size_t i = cql_select_plan_first_key(p);
		     i < keys && n < MAX_KEPT; i++) {
			struct storage_result *r =
				read_key(f, m, cmd, cql_select_plan_key(p, i));
			if (r)
				rs[n++] = r;
		}
	}
	stats.reads++;
	struct buf b;
	buf_init(&b);
	if (cql_select_encode(p, rs, n, false, 1, dr->info->version,
			      dr->info->stream, &b) != 0) {
		buf_free(&b);
		fail(dr);
	} else {
		reply(dr->req, &b);
	}
	for (size_t i = 0; i < n; i++)
		storage_result_delete(rs[i]);
	arena_destroy(&a);
}

static void on_data(void *arg, const struct cql_data_request *dr)
{
	struct fz *f = arg;
	struct cql_fn_ctx fn = {.now_us = 1700000000000000ll,
				.timeuuids = &f->uuids,
				.random = rnd,
				.random_arg = f};
	if (dr->stmt && dr->stmt->kind == CQL_STMT_SELECT) {
		run_read(f, dr, &fn);
	} else if (dr->stmt && dr->stmt->kind == CQL_STMT_TRUNCATE) {
		struct buf b;
		buf_init(&b);
		cql_encode_result_void(&b, dr->info->version, dr->info->stream);
		reply(dr->req, &b);
	} else {
		run_write(f, dr, &fn);
	}
}

static void on_reply(void *arg, const uint8_t *frame, size_t len)
{
	struct fz *f = arg;
	f->replies++;
	buf_clear(&f->reply);
	buf_append(&f->reply, frame, len);
}

static void on_keyspace(void *arg, const char *ks)
{
	struct fz *f = arg;
	snprintf(f->keyspace, sizeof(f->keyspace), "%s", ks);
}

/* Runs one request frame (as the client codec encodes it) and checks
 * the one reply; returns its decoded form (borrowing f->reply). */
static struct cql_client_response run(struct fz *f, struct arena *a,
				      const struct buf *frame)
{
	struct cql_header h;
	if (frame->len < CQL_HEADER_LEN ||
	    cql_header_decode(frame->data, 1 << 24, &h) != CQL_HEADER_OK)
		abort();
	struct cql_request *req =
		cql_request_detached(on_reply, on_keyspace, f);
	if (!req)
		abort();
	struct cql_request_info info = {.version = 4,
					.stream = h.stream,
					.opcode = h.opcode,
					.keyspace = f->keyspace[0] ? f->keyspace
								   : NULL};
	int before = f->replies;
	cql_exec_execute(f->exec, req, &info, frame->data + CQL_HEADER_LEN,
			 frame->len - CQL_HEADER_LEN);
	if (f->replies != before + 1) {
		fprintf(stderr, "%d replies to one request\n",
			f->replies - before);
		abort();
	}
	struct cql_client_response r;
	struct cql_header rh;
	if (f->reply.len < CQL_HEADER_LEN ||
	    cql_client_header_decode(f->reply.data, 1 << 24, &rh) != 0 ||
	    rh.length != f->reply.len - CQL_HEADER_LEN ||
	    cql_client_response_decode(
		    rh.opcode, rh.flags, f->reply.data + CQL_HEADER_LEN,
		    f->reply.len - CQL_HEADER_LEN, a, &r) != 0 ||
	    (r.opcode != CQL_OP_RESULT && r.opcode != CQL_OP_ERROR)) {
		fprintf(stderr, "a malformed reply: %s\n", err_msg());
		abort();
	}
	return r;
}

static void query(struct fz *f, struct arena *a, const char *text)
{
	struct buf b;
	buf_init(&b);
	cql_client_encode_query(&b, 1, text, CQL_CL_ONE, NULL, 0);
	run(f, a, &b);
	buf_free(&b);
}

/* PREPARE, then EXECUTE (and QUERY with values, and a BATCH of it) with
 * values for what the server described. */
static void exercise(struct fz *f, struct src *s, const char *text)
{
	struct arena a;
	arena_create(&a, 0);
	struct buf b;
	buf_init(&b);
	cql_client_encode_prepare(&b, 2, text);
	struct cql_client_response r = run(f, &a, &b);
	if (r.opcode != CQL_OP_RESULT || r.kind != CQL_RESULT_PREPARED)
		goto done;
	struct cursor c = cursor_make(f->reply.data + CQL_HEADER_LEN + 4,
				      f->reply.len - CQL_HEADER_LEN - 4);
	struct slice id;
	struct ftype **types;
	int32_t n = read_prepared(&c, &a, &id, &types);
	stats.prepared++;
	uint8_t idb[64];
	if (id.len > sizeof(idb))
		bad_metadata("prepared id");
	memcpy(idb, id.ptr, id.len);
	int runs = 1 + (int)pick(s, 3);
	for (int k = 0; k < runs; k++) {
		struct cql_value *vals =
			arena_alloc(&a, ((size_t)n + 1) * sizeof(*vals));
		gen_values(s, &a, types, n, vals);
		buf_clear(&b);
		unsigned how = pick(s, 4);
		if (how == 0) {
			cql_client_encode_query(&b, 3, text, CQL_CL_ONE, vals,
						(uint16_t)n);
		} else if (how == 1) {
			struct cql_header bh = {.version = 4,
						.stream = 3,
						.opcode = CQL_OP_BATCH};
			uint8_t *hdr = buf_extend(&b, CQL_HEADER_LEN);
			if (!hdr)
				abort();
			buf_put_u8(&b, (uint8_t)pick(s, 2));
			cql_write_short(&b, 1);
			buf_put_u8(&b, 1);
			cql_write_short_bytes(&b, idb, (uint16_t)id.len);
			cql_write_short(&b, (uint16_t)n);
			for (int32_t i = 0; i < n; i++)
				cql_write_bytes(&b, vals[i].ptr, vals[i].len);
			cql_write_short(&b, CQL_CL_ONE);
			buf_put_u8(&b, 0);
			bh.length = (uint32_t)(b.len - CQL_HEADER_LEN);
			cql_header_encode(b.data, &bh);
		} else {
			cql_client_encode_execute(&b, 3, idb, (uint16_t)id.len,
						  CQL_CL_ONE, vals,
						  (uint16_t)n);
		}
		stats.results += run(f, &a, &b).opcode == CQL_OP_RESULT;
		stats.executed++;
	}
done:
	buf_free(&b);
	arena_destroy(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct src s = {data, size};
	log_set_level(LOG_LEVEL_ERROR);
	struct fz f = {.rnd = 1};
	struct cql_exec_hooks hooks = {.node_info = node_info,
				       .data = on_data,
				       .new_table_id = new_table_id,
				       .arg = &f};
	f.schema = cql_schema_new();
	f.exec = f.schema ? cql_exec_new(f.schema, &hooks) : NULL;
	if (!f.exec)
		abort();
	cql_timeuuid_gen_init(&f.uuids, 7);
	buf_init(&f.reply);
	struct arena a;
	arena_create(&a, 0);
	struct table t;
	struct buf text;
	buf_init(&text);
	gen_table(&s, &t, &text);
	query(&f, &a,
	      "CREATE KEYSPACE ks WITH replication = {'class': "
	      "'SimpleStrategy', 'replication_factor': 1}");
	query(&f, &a, "USE ks");
	query(&f, &a, (const char *)text.data);
	while (s.n) {
		gen_stmt(&s, &t, &text);
		exercise(&f, &s, (const char *)text.data);
	}
	buf_free(&text);
	arena_destroy(&a);
	for (size_t i = 0; i < f.nkept; i++)
		storage_mutation_delete(f.kept[i]);
	buf_free(&f.reply);
	if (++stats.inputs % 500 == 0 && getenv("FUZZ_STATS"))
		fprintf(stderr,
			"inputs %lu: prepared %lu, executed %lu (%lu results), "
			"writes %lu, reads %lu\n",
			stats.inputs, stats.prepared, stats.executed,
			stats.results, stats.writes, stats.reads);
	cql_exec_delete(f.exec);
	cql_schema_delete(f.schema);
	return 0;
}
