#include "client/schema/describe.h"

#include "client/cql/cql_values.h"
#include "client/proto/proto.h"
#include "common/arena.h"
#include "common/err.h"
#include "common/uuid.h"
#include "ring/ring.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- text helpers -------------------------------------------------------- */

/* Cassandra 4.0's reserved keywords (ReservedKeywords): names equal to one
 * of them are quoted. */
static const char *const reserved[] = {
	"add",          "allow",        "alter",   "and",      "apply",
	"asc",          "authorize",    "batch",   "begin",    "by",
	"columnfamily", "create",       "default", "delete",   "desc",
	"describe",     "drop",         "entries", "execute",  "from",
	"full",         "grant",        "if",      "in",       "index",
	"infinity",     "insert",       "into",    "is",       "keyspace",
	"limit",        "materialized", "mbean",   "mbeans",   "modify",
	"nan",          "norecursive",  "not",     "null",     "of",
	"on",           "or",           "order",   "primary",  "rename",
	"replace",      "revoke",       "schema",  "select",   "set",
	"table",        "to",           "token",   "truncate", "unlogged",
	"unset",        "update",       "use",     "using",    "view",
	"where",        "with",
};

static int put(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

static int putf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int putf(struct buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return err_set(ERR_NOMEM, "describe text too long");
	return buf_append(b, tmp, (size_t)n);
}

static bool needs_quotes(const char *name)
{
	if (!(name[0] >= 'a' && name[0] <= 'z'))
		return true;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '_'))
			return true;
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (strcmp(name, reserved[i]) == 0)
			return true;
	return false;
}

int cql_describe_name(const char *name, struct buf *out)
{
	if (!needs_quotes(name))
		return put(out, name);
	if (buf_put_u8(out, '"') != 0)
		return -1;
	for (const char *p = name; *p; p++)
		if ((*p == '"' && buf_put_u8(out, '"') != 0) ||
		    buf_put_u8(out, (uint8_t)*p) != 0)
			return -1;
	return buf_put_u8(out, '"');
}

/* A double as Java's Double.toString prints it: the shortest digits that
 * read back the same, "1.0" style between 10^-3 and 10^7, else "1.0E-4". */
static int put_double(struct buf *b, double v)
{
	char e[40];
	int prec = 1;
	for (; prec <= 17; prec++) {
		snprintf(e, sizeof(e), "%.*e", prec - 1, v);
		if (strtod(e, NULL) == v)
			break;
	}
	/* e: [-]d[.ddd]e[+-]XX */
	const char *p = e;
	char digits[24];
	size_t nd = 0;
	bool neg = *p == '-';
	if (neg)
		p++;
	for (; *p && *p != 'e'; p++)
		if (*p >= '0' && *p <= '9' && nd < sizeof(digits) - 1)
			digits[nd++] = *p;
	int exp = *p == 'e' ? atoi(p + 1) : 0;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = '\0';
	char out[64];
	size_t n = 0;
	if (neg)
		out[n++] = '-';
	if (v == 0.0) {
		n += (size_t)snprintf(out + n, sizeof(out) - n, "0.0");
	} else if (exp >= -3 && exp < 7) {
		if (exp < 0) {
			out[n++] = '0';
			out[n++] = '.';
			for (int i = -1; i > exp; i--)
				out[n++] = '0';
			for (size_t i = 0; i < nd; i++)
				out[n++] = digits[i];
		} else {
			for (int i = 0; i <= exp; i++)
				out[n++] = (size_t)i < nd ? digits[i] : '0';
			out[n++] = '.';
			if ((size_t)exp + 1 < nd)
				for (size_t i = (size_t)exp + 1; i < nd; i++)
					out[n++] = digits[i];
			else
				out[n++] = '0';
		}
	} else {
		out[n++] = digits[0];
		out[n++] = '.';
		if (nd > 1)
			for (size_t i = 1; i < nd; i++)
				out[n++] = digits[i];
		else
			out[n++] = '0';
		n += (size_t)snprintf(out + n, sizeof(out) - n, "E%d", exp);
	}
	return buf_append(b, out, n);
}

/* {'k': 'v', ...} with the keys sorted, as CqlBuilder.append(Map). */
static int put_map(struct buf *b, const char **keys, const char **values,
		   size_t n)
{
	size_t order[72];
	if (n > sizeof(order) / sizeof(order[0]))
		return err_set(ERR_NOMEM, "too many map entries");
	for (size_t i = 0; i < n; i++) {
		size_t p = i;
		while (p > 0 && strcmp(keys[order[p - 1]], keys[i]) > 0) {
			order[p] = order[p - 1];
			p--;
		}
		order[p] = i;
	}
	if (buf_put_u8(b, '{') != 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if ((i && put(b, ", ") != 0) ||
		    cql_put_string_literal(b, keys[order[i]]) != 0 ||
		    put(b, ": ") != 0 ||
		    cql_put_string_literal(b, values[order[i]]) != 0)
			return -1;
	return buf_put_u8(b, '}');
}

static int put_cstr(struct buf *b)
{
	return buf_put_u8(b, '\0');
}

/* ---- CREATE KEYSPACE ----------------------------------------------------- */

int cql_describe_keyspace_text(const struct cql_keyspace *k, struct buf *out)
{
	const struct storage_keyspace_meta *m = cql_keyspace_meta(k);
	if (cql_system_keyspace_is_view(m->name)) {
		/* for reference only, as Cassandra's KeyspaceMetadata does */
		if (put(out, "/*\nWarning: Keyspace ") ||
		    cql_describe_name(m->name, out) ||
		    put(out, " is a virtual keyspace and cannot be recreated "
			     "with CQL.\nStructure, for reference:\n"
			     "VIRTUAL KEYSPACE ") ||
		    cql_describe_name(m->name, out) || put(out, ";\n*/"))
			return -1;
		return 0;
	}
	static const char prefix[] = "org.apache.cassandra.locator.";
	const char *klass = m->replication_class ? m->replication_class : "";
	if (strncmp(klass, prefix, sizeof(prefix) - 1) == 0 &&
	    !strchr(klass + sizeof(prefix) - 1, '.'))
		klass += sizeof(prefix) - 1;
	const char *keys[65], *values[65];
	size_t n = 0;
	keys[n] = "class";
	values[n++] = klass;
	for (size_t i = 0; i < m->replication_count && n < 65; i++, n++) {
		keys[n] = m->replication_keys[i];
		values[n] = m->replication_values[i];
	}
	if (put(out, "CREATE KEYSPACE ") != 0 ||
	    cql_describe_name(m->name, out) != 0 ||
	    put(out, " WITH replication = ") != 0 ||
	    put_map(out, keys, values, n) != 0 ||
	    putf(out, "  AND durable_writes = %s;",
		 m->durable_writes ? "true" : "false") != 0)
		return -1;
	return 0;
}

/* ---- CREATE TABLE -------------------------------------------------------- */

/* Cassandra's order for the columns after the primary key: statics, then
 * regulars; within each, simple columns before multi-cell ones (non-frozen
 * collections), each group by name. */
static int rest_rank(const struct storage_column *c)
{
	bool complex = storage_type_is_multicell(c->type);
	return (c->kind == STORAGE_COLUMN_STATIC ? 0 : 2) + (complex ? 1 : 0);
}

static bool rest_before(const struct storage_column *a,
			const struct storage_column *b)
{
	int ra = rest_rank(a), rb = rest_rank(b);
	if (ra != rb)
		return ra < rb;
	return strcmp(a->name, b->name) < 0;
}

static int put_column(struct buf *b, const struct storage_column *c)
{
	char type[1024];
	if (cql_type_text(c->type, type, sizeof(type)) != 0)
		return -1;
	return cql_describe_name(c->name, b) || put(b, " ") || put(b, type) ||
	       (c->kind == STORAGE_COLUMN_STATIC && put(b, " static"));
}

static int put_uuid(struct buf *b, const uint8_t v[16])
{
	char text[UUID_TEXT_LEN + 1];
	uuid_format(v, text);
	return put(b, text);
}

static int put_table_options(struct buf *b, const struct cql_table *t)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	const struct storage_table_options *o = &m->options;
	const struct cql_table_options *co = cql_table_options(t);
	const char *cache_keys[] = {"keys", "rows_per_partition"};
	const char *cache_values[] = {co->caching_keys, co->caching_rows};
	char chunk[16];
	snprintf(chunk, sizeof(chunk), "%u", o->chunk_length / 1024);
	struct cql_compaction_map cm;
	cql_compaction_map(o, &cm);
	const char *cz_keys[] = {"chunk_length_in_kb", "class"};
	const char *cz_values[] = {chunk,
				   o->compression == STORAGE_COMPRESSION_DEFLATE
					   ? "org.apache.cassandra.io.compress."
					     "DeflateCompressor"
					   : "org.apache.cassandra.io.compress."
					     "LZ4Compressor"};
	const char *off_keys[] = {"enabled"};
	const char *off_values[] = {"false"};
	bool cz = o->compression != STORAGE_COMPRESSION_NONE;
	return put(b, "additional_write_policy = '99p'") ||
	       put(b, "\n    AND bloom_filter_fp_chance = ") ||
	       put_double(b, o->bloom_filter_fp_chance) ||
	       put(b, "\n    AND caching = ") ||
	       put_map(b, cache_keys, cache_values, 2) ||
	       put(b, "\n    AND cdc = false") ||
	       put(b, "\n    AND comment = ") ||
	       cql_put_string_literal(b, co->comment) ||
	       put(b, "\n    AND compaction = ") ||
	       put_map(b, cm.keys, cm.values, cm.count) ||
	       put(b, "\n    AND compression = ") ||
	       put_map(b, cz ? cz_keys : off_keys, cz ? cz_values : off_values,
		       cz ? 2 : 1) ||
	       put(b, "\n    AND crc_check_chance = ") ||
	       put_double(b, co->crc_check_chance) ||
	       putf(b, "\n    AND default_time_to_live = %d",
		    o->default_time_to_live) ||
	       put(b, "\n    AND extensions = {}") ||
	       putf(b, "\n    AND gc_grace_seconds = %lld",
		    (long long)o->gc_grace_seconds) ||
	       putf(b, "\n    AND max_index_interval = %d",
		    co->max_index_interval) ||
	       putf(b, "\n    AND memtable_flush_period_in_ms = %d",
		    co->memtable_flush_period_in_ms) ||
	       putf(b, "\n    AND min_index_interval = %d",
		    co->min_index_interval) ||
	       putf(b, "\n    AND read_repair = '%s'",
		    co->read_repair_blocking ? "BLOCKING" : "NONE") ||
	       put(b, "\n    AND speculative_retry = ") ||
	       cql_put_string_literal(b, co->speculative_retry) || put(b, ";");
}

/* The latest drop of a name: the one WITH INTERNALS renders. */
static bool latest_drop(const struct storage_table_meta *m, size_t c)
{
	if (!m->columns[c].dropped)
		return false;
	for (size_t i = c + 1; i < m->column_count; i++)
		if (m->columns[i].dropped &&
		    strcmp(m->columns[i].name, m->columns[c].name) == 0)
			return false;
	return true;
}

static bool name_dropped(const struct storage_table_meta *m,
			 const size_t *drops, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(m->columns[drops[i]].name, name) == 0)
			return true;
	return false;
}

/* WITH INTERNALS, after the CREATE: each dropped column's DROP with its
 * time and, for a name added again, that ADD (Cassandra's rendering). */
static int put_drops(struct buf *out, const struct cql_table *t,
		     const size_t *drops, size_t n)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	for (size_t i = 0; i < n; i++) {
		const struct storage_column *d = &m->columns[drops[i]];
		if (put(out, "\nALTER TABLE ") ||
		    cql_describe_name(m->keyspace, out) || put(out, ".") ||
		    cql_describe_name(m->name, out) || put(out, " DROP ") ||
		    cql_describe_name(d->name, out) ||
		    putf(out, " USING TIMESTAMP %lld;",
			 (long long)d->dropped_at))
			return -1;
		int live = cql_table_column(t, d->name);
		if (live >= 0 &&
		    (put(out, "\nALTER TABLE ") ||
		     cql_describe_name(m->keyspace, out) || put(out, ".") ||
		     cql_describe_name(m->name, out) || put(out, " ADD ") ||
		     put_column(out, &m->columns[live]) || put(out, ";")))
			return -1;
	}
	return 0;
}

int cql_describe_table_text(const struct cql_table *t, bool internals,
			    struct buf *out)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	size_t rest[512], nrest = 0, drops[256], ndrops = 0;
	for (size_t i = 0; internals && i < m->column_count; i++) {
		if (!latest_drop(m, i))
			continue;
		if (ndrops == sizeof(drops) / sizeof(drops[0]))
			return err_set(ERR_NOMEM, "too many dropped columns");
		size_t p = ndrops++;
		while (p > 0 && strcmp(m->columns[drops[p - 1]].name,
				       m->columns[i].name) > 0) {
			drops[p] = drops[p - 1];
			p--;
		}
		drops[p] = i;
	}
	for (size_t i = 0; i < m->column_count; i++) {
		const struct storage_column *c = &m->columns[i];
		if (c->kind == STORAGE_COLUMN_PARTITION_KEY ||
		    c->kind == STORAGE_COLUMN_CLUSTERING ||
		    cql_table_column_dropped(t, i))
			continue;
		if (nrest == sizeof(rest) / sizeof(rest[0]))
			return err_set(ERR_NOMEM, "too many columns");
		size_t p = nrest++;
		while (p > 0 && rest_before(c, &m->columns[rest[p - 1]])) {
			rest[p] = rest[p - 1];
			p--;
		}
		rest[p] = i;
	}
	bool single = m->pk_count == 1 && m->ck_count == 0;
	/* A virtual table is shown for reference inside a comment, as
	 * Cassandra's TableMetadata.appendCqlTo does. */
	bool virtual = cql_system_keyspace_is_view(m->keyspace);
	if (virtual &&
	    (put(out, "/*\nWarning: Table ") ||
	     cql_describe_name(m->keyspace, out) || put(out, ".") ||
	     cql_describe_name(m->name, out) ||
	     put(out, " is a virtual table and cannot be recreated with "
		      "CQL.\nStructure, for reference:\n")))
		return -1;
	if (put(out, virtual ? "VIRTUAL TABLE " : "CREATE TABLE ") ||
	    cql_describe_name(m->keyspace, out) || put(out, ".") ||
	    cql_describe_name(m->name, out) || put(out, " (\n"))
		return -1;
	size_t total = m->pk_count + m->ck_count + nrest;
	for (size_t i = 0; i < total; i++) {
		size_t col = i < m->pk_count ? m->pk[i]
			     : i < m->pk_count + m->ck_count
				     ? m->ck[i - m->pk_count]
				     : rest[i - m->pk_count - m->ck_count];
		const struct storage_column *c = &m->columns[col];
		/* A name added again after a drop shows as DROP then ADD. */
		if (i >= m->pk_count + m->ck_count &&
		    name_dropped(m, drops, ndrops, c->name))
			continue;
		if (put(out, "    ") || put_column(out, c) ||
		    (single && i == 0 && put(out, " PRIMARY KEY")) ||
		    ((!single || ndrops || i + 1 < total) && put(out, ",")) ||
		    put(out, "\n"))
			return -1;
	}
	for (size_t i = 0; i < ndrops; i++)
		if (put(out, "    ") ||
		    put_column(out, &m->columns[drops[i]]) ||
		    (!single && put(out, ",")) || put(out, "\n"))
			return -1;
	if (!single) {
		if (put(out, "    PRIMARY KEY (") ||
		    (m->pk_count > 1 && put(out, "(")))
			return -1;
		for (size_t i = 0; i < m->pk_count; i++)
			if ((i && put(out, ", ")) ||
			    cql_describe_name(m->columns[m->pk[i]].name, out))
				return -1;
		if (m->pk_count > 1 && put(out, ")"))
			return -1;
		for (size_t i = 0; i < m->ck_count; i++)
			if (put(out, ", ") ||
			    cql_describe_name(m->columns[m->ck[i]].name, out))
				return -1;
		if (put(out, ")\n"))
			return -1;
	}
	if (put(out, ") WITH "))
		return -1;
	if (internals && (put(out, "ID = ") || put_uuid(out, m->id) ||
			  put(out, "\n    AND ")))
		return -1;
	if (m->ck_count) {
		if (put(out, "CLUSTERING ORDER BY ("))
			return -1;
		for (size_t i = 0; i < m->ck_count; i++) {
			const struct storage_column *c = &m->columns[m->ck[i]];
			if ((i && put(out, ", ")) ||
			    cql_describe_name(c->name, out) ||
			    put(out, c->desc ? " DESC" : " ASC"))
				return -1;
		}
		if (put(out, ")\n    AND "))
			return -1;
	}
	if (virtual) {
		/* its only option */
		const char *comment = cql_view_comment(m->keyspace, m->name);
		if (put(out, "comment = ") ||
		    cql_put_string_literal(out, comment) || put(out, ";\n*/"))
			return -1;
		return 0;
	}
	return put_table_options(out, t) || put_drops(out, t, drops, ndrops);
}

int cql_describe_type_text(const struct cql_user_type *t, struct buf *out)
{
	if (put(out, "CREATE TYPE ") ||
	    cql_describe_name(cql_user_type_keyspace(t), out) ||
	    put(out, ".") || cql_describe_name(cql_user_type_name(t), out) ||
	    put(out, " ("))
		return -1;
	for (size_t i = 0; i < cql_user_type_field_count(t); i++)
		if (put(out, i ? ",\n    " : "\n    ") ||
		    cql_describe_name(cql_user_type_field_name(t, i), out) ||
		    put(out, " ") || put(out, cql_user_type_field_type(t, i)))
			return -1;
	return put(out, "\n);");
}

int cql_describe_index_text(const struct cql_table *t,
			    const struct cql_index *ix, struct buf *out)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	char target[200];
	if (cql_index_target_text(t, ix, target, sizeof(target)) != 0)
		return err_set(ERR_INVALID, "index target too long");
	if (put(out, "CREATE CUSTOM INDEX ") ||
	    cql_describe_name(ix->name, out) || put(out, " ON ") ||
	    cql_describe_name(m->keyspace, out) || put(out, ".") ||
	    cql_describe_name(m->name, out) ||
	    putf(out, " (%s) USING ", target) ||
	    cql_put_string_literal(out, CQL_SAI_CLASS))
		return -1;
	if (ix->option_count) {
		const char *keys[CQL_INDEX_OPTION_MAX],
			*values[CQL_INDEX_OPTION_MAX];
		for (size_t i = 0; i < ix->option_count; i++) {
			keys[i] = ix->option_keys[i];
			values[i] = ix->option_values[i];
		}
		if (put(out, " WITH OPTIONS = ") ||
		    put_map(out, keys, values, ix->option_count))
			return -1;
	}
	return put(out, ";");
}

/* ---- the statement ------------------------------------------------------- */

enum { ROW_MAX_COLS = 4 };

struct rows {
	struct arena *a;
	char *(*cells)[ROW_MAX_COLS];
	size_t count, cap;
	size_t ncols;
};

/* Appends a row; with `names` the first and third cells are CQL names
 * (keyspace and element), quoted when needed. `cells` may hold NULLs. */
static int row_add(struct rows *r, const char *const cells[ROW_MAX_COLS],
		   bool names)
{
	if (r->count == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 16;
		char *(*grown)[ROW_MAX_COLS] =
			arena_alloc(r->a, cap * sizeof(*grown));
		if (!grown)
			return err_set(ERR_NOMEM, "out of memory");
		if (r->count)
			memcpy(grown, r->cells, r->count * sizeof(*grown));
		r->cells = grown;
		r->cap = cap;
	}
	for (size_t i = 0; i < ROW_MAX_COLS; i++) {
		r->cells[r->count][i] = NULL;
		if (i >= r->ncols || !cells[i])
			continue;
		struct buf b;
		buf_init(&b);
		int rc = names && (i == 0 || i == 2)
				 ? cql_describe_name(cells[i], &b)
				 : put(&b, cells[i]);
		if (rc == 0)
			rc = put_cstr(&b);
		if (rc == 0)
			r->cells[r->count][i] =
				arena_memdup(r->a, b.data, b.len);
		buf_free(&b);
		if (rc != 0 || !r->cells[r->count][i])
			return err_set(ERR_NOMEM, "out of memory");
	}
	r->count++;
	return 0;
}

static int element_row(struct rows *r, const char *ks, const char *type,
		       const char *name, struct buf *cql)
{
	const char *cells[ROW_MAX_COLS] = {ks, type, name, NULL};
	if (cql) {
		if (put_cstr(cql) != 0)
			return -1;
		cells[3] = (const char *)cql->data;
	}
	return row_add(r, cells, true);
}

/* What DESCRIBE sees: the schema and the virtual keyspaces' registry, as
 * Cassandra's DescribeStatement joins its distributed, local and virtual
 * keyspaces. */
struct sources {
	const struct cql_schema *schema;
	const struct cql_schema *views; /* may be NULL */
};

static const struct cql_keyspace *find_keyspace(const struct sources *s,
						const char *ks)
{
	const struct cql_keyspace *k = cql_schema_keyspace(s->schema, ks);
	if (!k && s->views)
		k = cql_schema_keyspace(s->views, ks);
	return k;
}

static const struct cql_table *find_table(const struct sources *s,
					  const char *ks, const char *name)
{
	const struct cql_table *t = cql_schema_table(s->schema, ks, name);
	if (!t && s->views)
		t = cql_schema_table(s->views, ks, name);
	return t;
}

/* Keyspaces (or a keyspace's tables) in Cassandra's NAME_COMPARATOR order:
 * case-insensitive, ties in registry order. */
static size_t sorted_keyspaces(const struct sources *s,
			       const struct cql_keyspace **out, size_t cap)
{
	size_t n = 0, nk = cql_schema_keyspace_count(s->schema);
	size_t nv = s->views ? cql_schema_keyspace_count(s->views) : 0;
	for (size_t i = 0; i < nk + nv && n < cap; i++) {
		const struct cql_keyspace *k =
			i < nk ? cql_schema_keyspace_at(s->schema, i)
			       : cql_schema_keyspace_at(s->views, i - nk);
		const char *name = cql_keyspace_meta(k)->name;
		size_t p = n++;
		while (p > 0 && strcasecmp(cql_keyspace_meta(out[p - 1])->name,
					   name) > 0) {
			out[p] = out[p - 1];
			p--;
		}
		out[p] = k;
	}
	return n;
}

static size_t sorted_tables(const struct cql_keyspace *k,
			    const struct cql_table **out, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < cql_keyspace_table_count(k) && n < cap; i++) {
		const struct cql_table *t = cql_keyspace_table_at(k, i);
		const char *name = cql_table_meta(t)->name;
		size_t p = n++;
		while (p > 0 &&
		       strcasecmp(cql_table_meta(out[p - 1])->name, name) > 0) {
			out[p] = out[p - 1];
			p--;
		}
		out[p] = t;
	}
	return n;
}

static int index_element(struct rows *r, const struct cql_table *t,
			 const struct cql_index *ix)
{
	struct buf b;
	buf_init(&b);
	int rc = cql_describe_index_text(t, ix, &b);
	if (rc == 0)
		rc = element_row(r, cql_table_meta(t)->keyspace, "index",
				 ix->name, &b);
	buf_free(&b);
	return rc;
}

static int table_element(struct rows *r, const struct cql_table *t,
			 bool internals)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	struct buf b;
	buf_init(&b);
	int rc = cql_describe_table_text(t, internals, &b);
	if (rc == 0)
		rc = element_row(r, m->keyspace, "table", m->name, &b);
	buf_free(&b);
	/* then its indexes, by name, as Cassandra's DESCRIBE TABLE lists
	 * them */
	size_t n = cql_table_index_count(t), order[64], k = 0;
	for (size_t i = 0; rc == 0 && i < n && k < 64; i++) {
		size_t p = k++;
		while (p > 0 &&
		       strcmp(cql_table_index_at(t, order[p - 1])->name,
			      cql_table_index_at(t, i)->name) > 0) {
			order[p] = order[p - 1];
			p--;
		}
		order[p] = i;
	}
	for (size_t i = 0; rc == 0 && i < k; i++)
		rc = index_element(r, t, cql_table_index_at(t, order[i]));
	return rc;
}

static int type_element(struct rows *r, const struct cql_user_type *t)
{
	struct buf b;
	buf_init(&b);
	int rc = cql_describe_type_text(t, &b);
	if (rc == 0)
		rc = element_row(r, cql_user_type_keyspace(t), "type",
				 cql_user_type_name(t), &b);
	buf_free(&b);
	return rc;
}

/* A keyspace's types in dependency order (cql_keyspace_types_ordered). */
static const struct cql_user_type **ordered_types(struct rows *r,
						  const struct cql_keyspace *k)
{
	size_t n = cql_keyspace_type_count(k);
	const struct cql_user_type **types =
		arena_alloc(r->a, (n ? n : 1) * sizeof(*types));
	if (!types) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	return cql_keyspace_types_ordered(k, types) == 0 ? types : NULL;
}

enum { MAX_LIST = 4096 };

static int keyspace_elements(struct rows *r, const struct cql_keyspace *k,
			     bool only, bool internals)
{
	const char *name = cql_keyspace_meta(k)->name;
	struct buf b;
	buf_init(&b);
	int rc = cql_describe_keyspace_text(k, &b);
	if (rc == 0)
		rc = element_row(r, name, "keyspace", name, &b);
	buf_free(&b);
	if (rc != 0 || only)
		return rc;
	const struct cql_user_type **types = ordered_types(r, k);
	if (!types)
		return -1;
	for (size_t i = 0; i < cql_keyspace_type_count(k); i++)
		if (type_element(r, types[i]) != 0)
			return -1;
	const struct cql_table **tables =
		arena_alloc(r->a, MAX_LIST * sizeof(*tables));
	if (!tables)
		return err_set(ERR_NOMEM, "out of memory");
	size_t n = sorted_tables(k, tables, MAX_LIST);
	for (size_t i = 0; i < n; i++)
		if (table_element(r, tables[i], internals) != 0)
			return -1;
	return 0;
}

/* Answers with Invalid (the error is set): the caller encodes it. */
static int invalid(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int invalid(const char *fmt, ...)
{
	char msg[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return err_set(ERR_INVALID, "%s", msg);
}

static const struct cql_keyspace *keyspace_of(const struct sources *s,
					      const char *ks)
{
	const struct cql_keyspace *k = find_keyspace(s, ks);
	if (!k)
		invalid("'%s' not found in keyspaces", ks);
	return k;
}

/* The keyspace an element statement works in: the named one or the USE
 * keyspace. */
static const struct cql_keyspace *element_keyspace(const struct sources *s,
						   const char *named,
						   const char *current)
{
	if (!named && !current) {
		invalid("No keyspace specified and no current keyspace");
		return NULL;
	}
	return keyspace_of(s, named ? named : current);
}

static int describe_rows(const struct sources *s, const struct cql_describe *d,
			 const char *current, struct rows *r)
{
	const struct cql_keyspace *k;
	const char *ks = d->name.keyspace;
	const char *name = d->name.name;
	switch (d->kind) {
	case CQL_DESCRIBE_KEYSPACES:
	case CQL_DESCRIBE_TABLES:
	case CQL_DESCRIBE_TYPES:
	case CQL_DESCRIBE_FUNCTIONS:
	case CQL_DESCRIBE_AGGREGATES: {
		r->ncols = 3;
		const struct cql_keyspace **all =
			arena_alloc(r->a, MAX_LIST * sizeof(*all));
		if (!all)
			return err_set(ERR_NOMEM, "out of memory");
		size_t n;
		if (d->kind != CQL_DESCRIBE_KEYSPACES && current) {
			if (!(all[0] = keyspace_of(s, current)))
				return -1;
			n = 1;
		} else {
			n = sorted_keyspaces(s, all, MAX_LIST);
		}
		for (size_t i = 0; i < n; i++) {
			const char *kn = cql_keyspace_meta(all[i])->name;
			if (d->kind == CQL_DESCRIBE_KEYSPACES) {
				if (element_row(r, kn, "keyspace", kn, NULL))
					return -1;
				continue;
			}
			if (d->kind == CQL_DESCRIBE_TYPES) {
				/* by name, as Cassandra lists them */
				for (size_t j = 0;
				     j < cql_keyspace_type_count(all[i]); j++)
					if (element_row(
						    r, kn, "type",
						    cql_user_type_name(
							    cql_keyspace_type_at(
								    all[i], j)),
						    NULL))
						return -1;
				continue;
			}
			if (d->kind != CQL_DESCRIBE_TABLES)
				continue; /* no functions, aggregates */
			const struct cql_table **tables =
				arena_alloc(r->a, MAX_LIST * sizeof(*tables));
			if (!tables)
				return err_set(ERR_NOMEM, "out of memory");
			size_t nt = sorted_tables(all[i], tables, MAX_LIST);
			for (size_t j = 0; j < nt; j++)
				if (element_row(r, kn, "table",
						cql_table_meta(tables[j])->name,
						NULL))
					return -1;
		}
		return 0;
	}
	case CQL_DESCRIBE_SCHEMA: {
		const struct cql_keyspace **all =
			arena_alloc(r->a, MAX_LIST * sizeof(*all));
		if (!all)
			return err_set(ERR_NOMEM, "out of memory");
		size_t n = sorted_keyspaces(s, all, MAX_LIST);
		for (size_t i = 0; i < n; i++)
			/* the virtual keyspaces are system ones too */
			if ((d->full || !cql_keyspace_is_system(all[i])) &&
			    keyspace_elements(r, all[i], false, d->internals))
				return -1;
		return 0;
	}
	case CQL_DESCRIBE_KEYSPACE:
		if (!(k = element_keyspace(s, name, current)))
			return -1;
		return keyspace_elements(r, k, d->only, d->internals);
	case CQL_DESCRIBE_NAME: {
		if (!ks && (k = find_keyspace(s, name)))
			return keyspace_elements(r, k, false, d->internals);
		if (!(k = keyspace_of(s, ks ? ks : current ? current : name)))
			return -1;
		const char *kn = cql_keyspace_meta(k)->name;
		const struct cql_table *t = find_table(s, kn, name);
		if (t)
			return table_element(r, t, d->internals);
		if (cql_keyspace_type(k, name))
			return type_element(r, cql_keyspace_type(k, name));
		return invalid("'%s' not found in keyspace '%s'", name, kn);
	}
	case CQL_DESCRIBE_TABLE: {
		if (!(k = element_keyspace(s, ks, current)))
			return -1;
		const char *kn = cql_keyspace_meta(k)->name;
		const struct cql_table *t = find_table(s, kn, name);
		if (!t)
			return invalid("Table '%s' not found in keyspace '%s'",
				       name, kn);
		return table_element(r, t, d->internals);
	}
	case CQL_DESCRIBE_TYPE:
	case CQL_DESCRIBE_FUNCTION:
	case CQL_DESCRIBE_AGGREGATE:
	case CQL_DESCRIBE_INDEX:
	case CQL_DESCRIBE_VIEW: {
		if (!(k = element_keyspace(s, ks, current)))
			return -1;
		const char *kn = cql_keyspace_meta(k)->name;
		switch (d->kind) {
		case CQL_DESCRIBE_TYPE:
			if (cql_keyspace_type(k, name))
				return type_element(r,
						    cql_keyspace_type(k, name));
			return invalid("User defined type '%s' not found in "
				       "'%s'",
				       name, kn);
		case CQL_DESCRIBE_FUNCTION:
			return invalid("User defined function '%s' not found "
				       "in '%s'",
				       name, kn);
		case CQL_DESCRIBE_AGGREGATE:
			return invalid("User defined aggregate '%s' not found "
				       "in '%s'",
				       name, kn);
		case CQL_DESCRIBE_INDEX: {
			const struct cql_table *it = NULL;
			const struct cql_index *ix =
				cql_keyspace_index(k, name, &it);
			if (ix)
				return index_element(r, it, ix);
			/* Cassandra's words for a missing index too */
			return invalid("Table for existing index '%s' not "
				       "found in '%s'",
				       name, kn);
		}
		default:
			return invalid("Materialized view '%s' not found in "
				       "'%s'",
				       name, kn);
		}
	}
	case CQL_DESCRIBE_CLUSTER:
		break;
	}
	return err_set(ERR_INVALID, "unknown DESCRIBE");
}

/* The paging state: version, row offset, schema version. */
enum { PAGING_VERSION = 1, PAGING_LEN = 2 + 8 + 16 };

static const char schema_changed[] =
	"The schema has changed since the previous page of the DESCRIBE "
	"statement result. Please retry the DESCRIBE statement.";

/* The first row to send: 0 without a paging state. -1 with err set. */
static int64_t page_offset(const struct cql_query_params *params,
			   const uint8_t schema_version[16])
{
	if (!params || !params->has_paging_state)
		return 0;
	const uint8_t *p = params->paging_state.ptr;
	if (params->paging_state.len != PAGING_LEN ||
	    be16_load(p) != PAGING_VERSION)
		return invalid("Incompatible paging state");
	if (memcmp(p + 10, schema_version, 16) != 0)
		return invalid("%s", schema_changed);
	return (int64_t)(be64_load(p + 2) & INT64_MAX);
}

static int encode(struct buf *out, const struct rows *r, size_t offset,
		  const struct cql_query_params *params,
		  const uint8_t schema_version[16], uint8_t version,
		  int16_t stream)
{
	static const struct cql_type_option text = {.id = CQL_TYPE_VARCHAR};
	static const struct cql_column_spec element_cols[] = {
		{"system", "describe", "keyspace_name", &text},
		{"system", "describe", "type", &text},
		{"system", "describe", "name", &text},
		{"system", "describe", "create_statement", &text},
	};
	size_t first = offset < r->count ? offset : r->count;
	size_t n = r->count - first;
	bool more = false;
	uint8_t state[PAGING_LEN];
	struct slice paging = {state, sizeof(state)};
	if (params && params->page_size > 0 && n >= (size_t)params->page_size) {
		/* As Cassandra: a full page always says more may follow. */
		n = (size_t)params->page_size;
		more = true;
		be16_store(state, PAGING_VERSION);
		be64_store(state + 2, (uint64_t)(first + n));
		memcpy(state + 10, schema_version, 16);
	}
	long start = cql_frame_begin(out, version, 0, stream, CQL_OP_RESULT);
	if (start < 0)
		return -1;
	int rc = cql_write_int(out, CQL_RESULT_ROWS) ||
		 cql_write_rows_metadata(out, element_cols, r->ncols,
					 more ? &paging : NULL, false) ||
		 cql_write_int(out, (int32_t)n);
	for (size_t i = first; rc == 0 && i < first + n; i++)
		for (size_t c = 0; rc == 0 && c < r->ncols; c++) {
			const char *v = r->cells[i][c];
			rc = cql_write_bytes(out, v,
					     v ? (int32_t)strlen(v) : -1);
		}
	if (rc) {
		out->len = (size_t)start;
		return -1;
	}
	cql_frame_end(out, start);
	return 0;
}

/* ---- DESCRIBE CLUSTER ---------------------------------------------------- */

/* The ring as the node info describes it: this node and its peers. */
static struct ring *node_ring(const struct cql_node_info *n)
{
	struct ring_builder *b = ring_builder_new();
	if (!b)
		return NULL;
	struct ring_endpoint ep = {
		.addr = n->broadcast_address,
		.dc = n->dc && *n->dc ? n->dc : "datacenter1",
		.rack = n->rack && *n->rack ? n->rack : "rack1",
		.status = RING_STATUS_NORMAL,
		.tokens = n->tokens,
		.num_tokens = n->token_count,
	};
	memcpy(ep.host_id, n->host_id, 16);
	int rc = ring_builder_set_endpoint(b, &ep);
	for (size_t i = 0; rc == 0 && i < n->peer_count; i++) {
		const struct cql_peer_info *p = &n->peers[i];
		struct ring_endpoint pe = {
			.addr = p->address,
			.dc = p->dc && *p->dc ? p->dc : ep.dc,
			.rack = p->rack && *p->rack ? p->rack : ep.rack,
			.status = RING_STATUS_NORMAL,
			.tokens = p->tokens,
			.num_tokens = p->token_count,
		};
		memcpy(pe.host_id, p->host_id, 16);
		rc = ring_builder_set_endpoint(b, &pe);
	}
	ring_builder_set_local(b, &n->broadcast_address);
	struct ring *r = rc == 0 ? ring_builder_build(b) : NULL;
	ring_builder_delete(b);
	return r;
}

struct ownership {
	char token[24];
	size_t start, len; /* the serialized list<text>, in `lists` */
};

static int ownership_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ownership *)a)->token,
		      ((const struct ownership *)b)->token);
}

/*
 * Cassandra's range_ownership for the USE keyspace: map<text, list<text>>
 * from each range's end token to the replicas of the range
 * ("127.0.0.1:7000", replica order), keys in text order as a map
 * serializes. 1 when the ring cannot be built (the column is left out).
 */
static int range_ownership(const struct cql_node_info *n,
			   const struct ring_strategy *s, struct arena *a,
			   struct buf *cell)
{
	struct ring *r = node_ring(n);
	if (!r)
		return err_code() == ERR_NOMEM ? -1 : 1;
	size_t count = ring_token_count(r);
	struct ownership *own =
		arena_alloc(a, (count ? count : 1) * sizeof(*own));
	struct buf lists;
	buf_init(&lists);
	int rc = own ? 0 : err_set(ERR_NOMEM, "out of memory");
	for (size_t i = 0; rc == 0 && i < count; i++) {
		int64_t t = ring_token_at(r, i);
		struct ring_replicas rep;
		if ((rc = ring_replicas_for_token(r, s, t, &rep)) != 0)
			break;
		snprintf(own[i].token, sizeof(own[i].token), "%lld",
			 (long long)t);
		own[i].start = lists.len;
		rc = cql_write_int(&lists, (int32_t)rep.n_natural);
		for (size_t j = 0; rc == 0 && j < rep.n_natural; j++) {
			char addr[INET_ADDR_STRLEN];
			inet_addr_format(
				&ring_endpoint_get(r, rep.natural[j])->addr,
				addr, sizeof(addr));
			rc = cql_write_bytes(&lists, addr,
					     (int32_t)strlen(addr));
		}
		own[i].len = lists.len - own[i].start;
	}
	if (rc == 0 && count)
		qsort(own, count, sizeof(*own), ownership_cmp);
	if (rc == 0)
		rc = cql_write_int(cell, (int32_t)count);
	for (size_t i = 0; rc == 0 && i < count; i++)
		rc = cql_write_bytes(cell, own[i].token,
				     (int32_t)strlen(own[i].token)) ||
		     cql_write_bytes(cell, lists.data + own[i].start,
				     (int32_t)own[i].len);
	buf_free(&lists);
	ring_unref(r);
	return rc ? -1 : 0;
}

static int describe_cluster(const struct cql_schema *schema,
			    const struct cql_node_info *n, const char *keyspace,
			    struct arena *a, uint8_t version, int16_t stream,
			    struct buf *out)
{
	static const struct cql_type_option text = {.id = CQL_TYPE_VARCHAR};
	static const struct cql_type_option list = {.id = CQL_TYPE_LIST,
						    .sub = {&text}};
	static const struct cql_type_option map = {.id = CQL_TYPE_MAP,
						   .sub = {&text, &list}};
	static const struct cql_column_spec cols[] = {
		{"system", "describe", "cluster", &text},
		{"system", "describe", "partitioner", &text},
		{"system", "describe", "snitch", &text},
		{"system", "describe", "range_ownership", &map},
	};
	/* Cassandra trims the org.apache.cassandra.{dht,locator} packages;
	 * Cassini always uses Murmur3. */
	const char *cells[] = {n->cluster_name ? n->cluster_name : "",
			       "Murmur3Partitioner",
			       n->snitch ? n->snitch : "SimpleSnitch"};
	/* The ranges only under USE of a non-system keyspace. */
	const struct cql_keyspace *k =
		keyspace ? cql_schema_keyspace(schema, keyspace) : NULL;
	struct buf owned;
	buf_init(&owned);
	int rc = 0;
	if (k && !cql_keyspace_is_system(k)) {
		rc = range_ownership(n, cql_keyspace_strategy(k), a, &owned);
		if (rc == 1) {
			k = NULL;
			rc = 0;
		}
	} else {
		k = NULL;
	}
	long start = rc == 0 ? cql_frame_begin(out, version, 0, stream,
					       CQL_OP_RESULT)
			     : -1;
	if (start < 0) {
		buf_free(&owned);
		return -1;
	}
	rc = cql_write_int(out, CQL_RESULT_ROWS) ||
	     cql_write_rows_metadata(out, cols, k ? 4 : 3, NULL, false) ||
	     cql_write_int(out, 1);
	for (size_t i = 0; rc == 0 && i < 3; i++)
		rc = cql_write_bytes(out, cells[i], (int32_t)strlen(cells[i]));
	if (rc == 0 && k)
		rc = cql_write_bytes(out, owned.data, (int32_t)owned.len);
	buf_free(&owned);
	if (rc) {
		out->len = (size_t)start;
		return -1;
	}
	cql_frame_end(out, start);
	return 0;
}

int cql_describe(const struct cql_schema *schema,
		 const struct cql_schema *views,
		 const struct cql_node_info *node, const struct cql_describe *d,
		 const char *keyspace, const struct cql_query_params *params,
		 uint8_t version, int16_t stream, struct buf *out)
{
	const struct sources src = {schema, views};
	struct arena a;
	arena_create(&a, 0);
	struct rows r = {.a = &a, .ncols = 4};
	if (d->kind == CQL_DESCRIBE_CLUSTER) {
		int rc = describe_cluster(schema, node, keyspace, &a, version,
					  stream, out);
		arena_destroy(&a);
		return rc;
	}
	uint8_t schema_version[16];
	cql_schema_version(schema, schema_version);
	int64_t offset = page_offset(params, schema_version);
	int rc = offset < 0 ? -1 : describe_rows(&src, d, keyspace, &r);
	if (rc == 0) {
		rc = encode(out, &r, (size_t)offset, params, schema_version,
			    version, stream);
	} else if (err_code() != ERR_NOMEM) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		rc = cql_encode_error(out, version, stream, CQL_ERR_INVALID,
				      msg);
	}
	arena_destroy(&a);
	return rc;
}
