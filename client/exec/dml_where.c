/*
 * DML's WHERE clause: the restrictions on the key columns (=, IN, and for
 * DELETE slices), checked as Cassandra checks them, and the partition keys
 * and clustering rows they expand to (IN gives several, duplicates once).
 */
#include "client/exec/dml_internal.h"

#include "common/err.h"
#include "common/murmur3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- WHERE --------------------------------------------------------------- */

static int key_kind(const struct storage_table_meta *m, int c)
{
	return c < 0 ? -1 : m->columns[c].kind;
}

/* A key column's value in a WHERE relation (or an INSERT's key column,
 * which Cassandra reads as one): neither null nor unset. */
static int condition_value(struct build *b, const struct cql_term *t,
			   const struct storage_column *col, struct val *out)
{
	if (cql_dml_resolve(b, t, col->type, col->name, out) != 0)
		return -1;
	if (out->len == UNSET)
		return err_set(ERR_INVALID, "Invalid unset value for column %s",
			       col->name);
	if (out->len < 0)
		return err_set(ERR_INVALID,
			       "Invalid null value in condition for column %s",
			       col->name);
	return 0;
}

static int restrict_column(struct build *b, struct restr *r,
			   const struct cql_relation *rel, int c,
			   bool allow_slice)
{
	const struct storage_column *col = &b->m->columns[c];
	if (rel->op == CQL_OP_EQ || rel->op == CQL_OP_IN) {
		if (r->eq || r->has_lo || r->has_hi)
			return err_set(
				ERR_INVALID,
				"%s cannot be restricted by more than one "
				"relation if it includes an Equal",
				col->name);
		r->eq = true;
		if (rel->op == CQL_OP_EQ) {
			r->vals = arena_alloc(&b->a, sizeof(*r->vals));
			r->n = 1;
			return r->vals ? condition_value(b, rel->value, col,
							 r->vals)
				       : -1;
		}
		const struct cql_term *v = rel->value;
		if (v->kind == CQL_TERM_TUPLE) {
			r->n = v->count;
			r->vals = arena_alloc(&b->a, (v->count + 1) *
							     sizeof(*r->vals));
			if (!r->vals)
				return -1;
			for (size_t i = 0; i < v->count; i++)
				if (condition_value(b, v->items[i], col,
						    &r->vals[i]) != 0)
					return -1;
			return 0;
		}
		/* IN ? : a bound list of values. */
		struct storage_type lt = STORAGE_TYPE_COLLECTION(
			STORAGE_TYPE_LIST, true, col->type);
		struct val list;
		if (cql_dml_resolve(b, v, &lt, col->name, &list) != 0)
			return -1;
		if (list.len == UNSET)
			return err_set(ERR_INVALID,
				       "Invalid unset value for column %s",
				       col->name);
		if (list.len < 0)
			return err_set(ERR_INVALID,
				       "Invalid null value for column %s",
				       col->name);
		struct cursor cur = cursor_make(list.ptr, (size_t)list.len);
		uint32_t n;
		if (cursor_be32(&cur, &n) != 0 || n > MAX_KEYS)
			return err_set(ERR_INVALID, "Invalid IN list for %s",
				       col->name);
		r->n = n;
		r->vals = arena_alloc(&b->a, (n + 1) * sizeof(*r->vals));
		if (!r->vals)
			return -1;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t len;
			struct slice s;
			if (cursor_be32(&cur, &len) != 0 || (int32_t)len < 0 ||
			    cursor_take(&cur, len, &s) != 0)
				return err_set(ERR_INVALID,
					       "Invalid IN list for %s",
					       col->name);
			r->vals[i] = (struct val){s.ptr, (int32_t)len};
		}
		return 0;
	}
	if (col->kind != STORAGE_COLUMN_CLUSTERING)
		return err_set(ERR_INVALID,
			       "Only EQ and IN relation are supported on the "
			       "partition key (unless you use the token() "
			       "function)");
	if (!allow_slice)
		return err_set(ERR_INVALID,
			       "Slice restrictions are not supported on the "
			       "clustering columns in UPDATE statements");
	bool lo = rel->op == CQL_OP_GT || rel->op == CQL_OP_GTE;
	bool incl = rel->op == CQL_OP_GTE || rel->op == CQL_OP_LTE;
	if (rel->op == CQL_OP_NEQ || rel->op == CQL_OP_CONTAINS ||
	    rel->op == CQL_OP_CONTAINS_KEY)
		return err_set(ERR_INVALID, "Unsupported \"%s\" relation on %s",
			       rel->op == CQL_OP_NEQ ? "!=" : "CONTAINS",
			       col->name);
	if (r->eq || (lo ? r->has_lo : r->has_hi))
		return err_set(ERR_INVALID,
			       "More than one restriction was found "
			       "for the %s bound on %s",
			       lo ? "start" : "end", col->name);
	struct val v;
	if (condition_value(b, rel->value, col, &v) != 0)
		return -1;
	if (lo) {
		r->has_lo = true;
		r->lo_incl = incl;
		r->lo = v;
	} else {
		r->has_hi = true;
		r->hi_incl = incl;
		r->hi = v;
	}
	return 0;
}

/* Whether a WHERE clause restricts a clustering column (a statement on
 * static columns only may not). */
bool cql_dml_where_names_clustering(const struct build *b,
				    const struct cql_relation *rels, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < rels[i].column_count; k++) {
			int c = rels[i].kind == CQL_REL_TOKEN
					? -1
					: cql_table_column(b->t,
							   rels[i].columns[k]);
			if (c >= 0 &&
			    b->m->columns[c].kind == STORAGE_COLUMN_CLUSTERING)
				return true;
		}
	return false;
}

static int by_name(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Cassandra's words for an UPDATE's or DELETE's WHERE on non-key columns:
 * every such column once, in its RestrictionSet's order (by name bytes,
 * as non-key columns have no position), joined by ", ", and the trailing
 * space its format string has. */
static int non_key_error(struct build *b, const struct cql_relation *rels,
			 size_t n)
{
	const char **names = malloc(n * sizeof(*names));
	if (!names)
		return err_set(ERR_NOMEM, "out of memory");
	size_t count = 0;
	for (size_t i = 0; i < n; i++) {
		int c = cql_table_column(b->t, rels[i].columns[0]);
		int kind = key_kind(b->m, c);
		if (kind != STORAGE_COLUMN_PARTITION_KEY &&
		    kind != STORAGE_COLUMN_CLUSTERING)
			names[count++] = b->m->columns[c].name;
	}
	qsort(names, count, sizeof(*names), by_name);
	char list[512];
	size_t len = 0;
	list[0] = '\0';
	for (size_t i = 0; i < count; i++) {
		if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
			continue;
		int w = snprintf(list + len, sizeof(list) - len, "%s%s",
				 len ? ", " : "", names[i]);
		if (w < 0 || (size_t)w >= sizeof(list) - len)
			break;
		len += (size_t)w;
	}
	free(names);
	return err_set(ERR_INVALID,
		       "Non PRIMARY KEY columns found in where clause: %s ",
		       list);
}

/* Fills rs[column] for each key column restricted by the WHERE clause. */
int cql_dml_restrict_where(struct build *b, const struct cql_relation *rels,
			   size_t n, struct restr *rs, bool allow_slice)
{
	bool non_key = false;
	for (size_t i = 0; i < n; i++) {
		const struct cql_relation *rel = &rels[i];
		if (rel->kind == CQL_REL_TOKEN)
			return err_set(
				ERR_INVALID,
				"The token function cannot be used in WHERE "
				"clauses for UPDATE and DELETE statements");
		if (rel->kind == CQL_REL_TUPLE)
			return err_set(
				ERR_UNSUPPORTED,
				"Multi-column relations in UPDATE and DELETE "
				"are not supported by Cassini yet");
		int c = cql_table_column(b->t, rel->columns[0]);
		if (c < 0)
			return err_set(
				ERR_INVALID,
				"Undefined column name %s in table %s.%s",
				rel->columns[0], b->m->keyspace, b->m->name);
		int kind = key_kind(b->m, c);
		if (kind != STORAGE_COLUMN_PARTITION_KEY &&
		    kind != STORAGE_COLUMN_CLUSTERING) {
			non_key = true; /* named after the key checks */
			continue;
		}
		if (restrict_column(b, &rs[c], rel, c, allow_slice) != 0)
			return -1;
	}
	return non_key ? non_key_error(b, rels, n) : 0;
}

/* Checks a key value: neither null nor unset (Cassandra's words for a
 * key column read as a condition). */
int cql_dml_key_value_ok(const struct storage_column *col, struct val v)
{
	if (v.len == UNSET)
		return err_set(ERR_INVALID, "Invalid unset value for column %s",
			       col->name);
	if (v.len < 0)
		return err_set(ERR_INVALID,
			       "Invalid null value in condition for column %s",
			       col->name);
	return 0;
}

/* Orders serialized keys (or clusterings) by their bytes, to find
 * repeats: Cassandra's IN restrictions are sets. */
struct key_ref {
	const uint8_t *ptr;
	size_t len;
	size_t at; /* where it came in the expansion */
};

static int key_ref_cmp(const void *a, const void *b)
{
	const struct key_ref *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = n ? memcmp(x->ptr, y->ptr, n) : 0;
	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/* Removes repeated keys from keys/offs (n of them), keeping the first of
 * each in place order; returns the count left. */
static size_t unique_keys(struct build *b, struct buf *keys, size_t *offs,
			  size_t n)
{
	if (n < 2)
		return n;
	struct key_ref *refs = arena_alloc(&b->a, n * sizeof(*refs));
	bool *dup = arena_alloc(&b->a, n * sizeof(*dup));
	if (!refs || !dup)
		return n; /* keep the repeats rather than fail */
	for (size_t i = 0; i < n; i++) {
		refs[i] = (struct key_ref){keys->data + offs[i],
					   offs[i + 1] - offs[i], i};
		dup[i] = false;
	}
	qsort(refs, n, sizeof(*refs), key_ref_cmp);
	for (size_t i = 1; i < n; i++)
		if (refs[i].len == refs[i - 1].len &&
		    (!refs[i].len ||
		     memcmp(refs[i].ptr, refs[i - 1].ptr, refs[i].len) == 0))
			dup[refs[i].at] = true;
	/* Compact in place: key bytes move down, offsets follow. */
	size_t w = 0, wpos = offs[0];
	for (size_t i = 0; i < n; i++) {
		size_t from = offs[i], len = offs[i + 1] - offs[i];
		if (dup[i])
			continue;
		memmove(keys->data + wpos, keys->data + from, len);
		offs[w++] = wpos;
		wpos += len;
	}
	offs[w] = wpos;
	keys->len = wpos;
	return w;
}

/* The partition keys (serialized) restricted by rs, without repeats. */
int cql_dml_partition_keys(struct build *b, struct restr *rs, struct buf *keys,
			   size_t **offsets, size_t *nkeys)
{
	const struct storage_table_meta *m = b->m;
	size_t total = 1;
	struct vec_missing {
		char names[256];
	} miss = {""};
	for (size_t i = 0; i < m->pk_count; i++) {
		const struct restr *r = &rs[m->pk[i]];
		if (!r->eq) {
			size_t l = strlen(miss.names);
			snprintf(miss.names + l, sizeof(miss.names) - l, "%s%s",
				 l ? ", " : "", m->columns[m->pk[i]].name);
			continue;
		}
		total *= r->n ? r->n : 1;
		if (total > MAX_KEYS)
			return err_set(ERR_INVALID,
				       "Too many partitions in IN restrictions "
				       "(more than %d)",
				       MAX_KEYS);
	}
	if (miss.names[0])
		return err_set(ERR_INVALID,
			       "Some partition key parts are missing: "
			       "%s",
			       miss.names);
	size_t *offs = arena_alloc(&b->a, (total + 1) * sizeof(*offs));
	if (!offs)
		return -1;
	size_t count = 0;
	for (size_t k = 0; k < total; k++) {
		size_t idx = k;
		struct slice parts[16];
		size_t len = 0;
		for (size_t i = m->pk_count; i-- > 0;) {
			const struct restr *r = &rs[m->pk[i]];
			if (r->n == 0) {
				*nkeys = 0; /* IN () matches nothing */
				*offsets = offs;
				return 0;
			}
			struct val v = r->vals[idx % r->n];
			idx /= r->n;
			if (cql_dml_key_value_ok(&m->columns[m->pk[i]], v) != 0)
				return -1;
			parts[i] = slice_make(v.ptr, (size_t)v.len);
			/* a compound key: 2-byte length, value, 0 */
			len += m->pk_count == 1 ? (size_t)v.len
						: 3 + (size_t)v.len;
		}
		/* Cassandra's key checks (Validation.validateKey) */
		if (len == 0)
			return err_set(ERR_INVALID, "Key may not be empty");
		if (len > MAX_KEY_LEN)
			return err_set(ERR_INVALID,
				       "Key length of %zu is longer than "
				       "maximum of %d",
				       len, MAX_KEY_LEN);
		offs[count++] = keys->len;
		if (m->pk_count == 1) {
			if (buf_append(keys, parts[0].ptr, parts[0].len) != 0)
				return -1;
		} else if (murmur3_compound_key(keys, parts, m->pk_count) !=
			   0) {
			return -1;
		}
	}
	offs[count] = keys->len;
	*offsets = offs;
	*nkeys = unique_keys(b, keys, offs, count);
	return 0;
}

/* Every full clustering (values in `rows`, ck_count slices each), without
 * repeats. */
int cql_dml_clusterings(struct build *b, struct restr *rs, struct slice **rows,
			size_t *nrows)
{
	const struct storage_table_meta *m = b->m;
	size_t total = 1;
	char missing[256] = "";
	for (size_t i = 0; i < m->ck_count; i++) {
		size_t l = strlen(missing);
		if (!rs[m->ck[i]].eq)
			snprintf(missing + l, sizeof(missing) - l, "%s%s",
				 l ? ", " : "", m->columns[m->ck[i]].name);
	}
	if (missing[0])
		return err_set(ERR_INVALID,
			       "Some clustering keys are missing: %s", missing);
	for (size_t i = 0; i < m->ck_count; i++) {
		const struct restr *r = &rs[m->ck[i]];
		total *= r->n;
		if (total > MAX_KEYS)
			return err_set(ERR_INVALID,
				       "Too many rows in IN "
				       "restrictions (more than %d)",
				       MAX_KEYS);
	}
	struct slice *out =
		arena_alloc(&b->a, (total * m->ck_count + 1) * sizeof(*out));
	if (!out)
		return -1;
	size_t kept = 0;
	for (size_t k = 0; k < total; k++) {
		size_t idx = k;
		size_t size = 0;
		bool too_long = false;
		struct slice *row = out + kept * m->ck_count;
		for (size_t i = m->ck_count; i-- > 0;) {
			const struct restr *r = &rs[m->ck[i]];
			struct val v = r->vals[idx % r->n];
			idx /= r->n;
			if (cql_dml_key_value_ok(&m->columns[m->ck[i]], v) != 0)
				return -1;
			row[i] = slice_make(v.ptr, (size_t)v.len);
			size += (size_t)v.len;
			too_long |= (size_t)v.len > MAX_KEY_LEN;
		}
		/* Cassandra 4 limits each component, and names the whole
		 * clustering's size. */
		if (too_long)
			return err_set(ERR_INVALID,
				       "Key length of %zu is longer than "
				       "maximum of %d",
				       size, MAX_KEY_LEN);
		bool repeat = false;
		for (size_t j = 0; j < kept && !repeat; j++) {
			repeat = true;
			for (size_t i = 0; repeat && i < m->ck_count; i++)
				repeat = slice_eq(out[j * m->ck_count + i],
						  row[i]);
		}
		if (!repeat)
			kept++;
	}
	*rows = out;
	*nrows = m->ck_count ? kept : 1;
	return 0;
}
