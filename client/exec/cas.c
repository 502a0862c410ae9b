/* Conditional writes, the CQL side (cas.h). */
#include "client/exec/cas.h"

#include "client/exec/data_path.h"
#include "client/exec/dml.h"
#include "client/schema/schema.h"
#include "common/arena.h"
#include "common/err.h"
#include "storage/types.h"

#include <stdlib.h>
#include <string.h>

#define CQL_TYPE_ID_COUNTER 0x0005

/* A value: len -1 is null. */
struct val {
	const uint8_t *ptr;
	int32_t len;
};

struct cond {
	int col;
	bool has_elem;
	struct val elem; /* map key, or list index (int) */
	int field;       /* u.f: the field's index, else -1 */
	enum cql_op op;
	struct val *vals; /* one, or IN's list */
	size_t nvals;
};

enum item_kind { ITEM_PLAIN, ITEM_EXISTS, ITEM_NOT_EXISTS, ITEM_CONDS };

/* One statement of the request: which row its conditions read. */
struct item {
	enum item_kind kind;
	struct val ck[32];
	size_t nck; /* < ck_count: the conditions are on static columns */
	struct cond *conds;
	size_t nconds;
};

struct cql_cas {
	struct arena a;
	const struct cql_table *t;
	const struct storage_table_meta *m;
	struct storage_mutation *mut;
	struct item *items;
	size_t nitems;
	bool batch;
};

static const struct cql_stmt *item_stmt(const struct cql_data_request *dr,
					size_t i)
{
	return dr->stmt ? dr->stmt : dr->batch[i].stmt;
}

static bool stmt_conditional(const struct cql_stmt *s)
{
	switch (s->kind) {
	case CQL_STMT_INSERT:
		return s->u.insert.if_not_exists;
	case CQL_STMT_UPDATE:
		return s->u.update.has_conditions;
	case CQL_STMT_DELETE:
		return s->u.del.has_conditions;
	default:
		return false;
	}
}

bool cql_cas_is_conditional(const struct cql_data_request *dr)
{
	size_t n = dr->stmt ? 1 : dr->batch_count;
	for (size_t i = 0; i < n; i++)
		if (stmt_conditional(item_stmt(dr, i)))
			return true;
	return false;
}

static const struct cql_using *stmt_using(const struct cql_stmt *s)
{
	return s->kind == CQL_STMT_INSERT   ? &s->u.insert.using
	       : s->kind == CQL_STMT_UPDATE ? &s->u.update.using
					    : &s->u.del.using;
}

/* A term's value for a column of type `ty` (bind or literal), copied.
 * With `unset`, an unset value (a marker, or a literal Cassandra binds to
 * UNSET_VALUE: [?] with ? unset) sets *unset instead of failing. */
static int resolve(struct cql_cas *c, const struct cql_term *t,
		   const struct storage_type *ty, const char *column,
		   const struct cql_value *binds, size_t nbinds,
		   const struct cql_write_ctx *ctx, struct val *out,
		   bool *unset)
{
	if (unset)
		*unset = false;
	if (t->kind == CQL_TERM_BIND) {
		if ((size_t)t->bind_index >= nbinds)
			return err_set(ERR_INVALID,
				       "No value given for bind marker %d",
				       t->bind_index);
		const struct cql_value *v = &binds[t->bind_index];
		if (v->len == CQL_VALUE_UNSET && unset) {
			*unset = true;
			*out = (struct val){NULL, -1};
			return 0;
		}
		if (v->len == CQL_VALUE_UNSET)
			return err_set(ERR_INVALID,
				       "Invalid unset value for column %s",
				       column);
		out->len = v->len < 0 ? -1 : v->len;
		out->ptr = out->len > 0
				   ? arena_memdup(&c->a, v->ptr, (size_t)v->len)
				   : (const uint8_t *)"";
		return out->ptr ? 0 : err_set(ERR_NOMEM, "out of memory");
	}
	struct buf tmp = {0};
	struct cql_fn_ctx fn = {0};
	if (ctx->fn)
		fn = *ctx->fn;
	fn.binds = binds;
	fn.nbinds = nbinds;
	int rc = unset ? cql_term_serialize_or_unset(t, ty, column, &fn,
						     ctx->cmp, &tmp)
		       : cql_term_serialize(t, ty, column, &fn, ctx->cmp, &tmp);
	if (rc < 0) {
		buf_free(&tmp);
		return -1;
	}
	if (rc == 2) {
		*unset = true;
		*out = (struct val){NULL, -1};
	} else if (rc == 1) {
		*out = (struct val){NULL, -1};
	} else {
		out->len = (int32_t)tmp.len;
		out->ptr = arena_memdup(
			&c->a, tmp.data ? tmp.data : (const uint8_t *)"",
			tmp.len ? tmp.len : 1);
	}
	buf_free(&tmp);
	return out->len < 0 || out->ptr ? 0
					: err_set(ERR_NOMEM, "out of memory");
}

static const struct storage_type *simple_type(uint16_t kind)
{
	const struct storage_type *t = storage_type_simple(kind);
	return t ? t : storage_type_simple(STORAGE_TYPE_BLOB);
}

static const char *op_text(enum cql_op op)
{
	static const char *t[] = {"=", "<", "<=", ">", ">=", "!=", "IN"};
	return op <= CQL_OP_IN ? t[op] : "?";
}

static int add_cond(struct cql_cas *c, struct item *it,
		    const struct cql_condition *cd,
		    const struct cql_value *binds, size_t nbinds,
		    const struct cql_write_ctx *ctx, struct cond *out)
{
	int col = cql_table_column(c->t, cd->column.name);
	if (col < 0)
		return err_set(ERR_INVALID, "Undefined column name %s",
			       cd->column.name);
	const struct storage_column *sc = &c->m->columns[col];
	if (sc->kind == STORAGE_COLUMN_PARTITION_KEY ||
	    sc->kind == STORAGE_COLUMN_CLUSTERING)
		return err_set(ERR_INVALID,
			       "PRIMARY KEY column '%s' cannot have IF "
			       "conditions",
			       sc->name);
	if (sc->kind != STORAGE_COLUMN_STATIC && it->nck < c->m->ck_count)
		return err_set(ERR_INVALID,
			       "Some clustering keys are missing: %s",
			       c->m->columns[c->m->ck[it->nck]].name);
	const struct storage_type *ty = sc->type;
	*out = (struct cond){.col = col, .op = cd->op, .field = -1};
	if (cd->column.field) {
		/* u.f op v (ColumnCondition.UDTFieldCondition), frozen or not
		 */
		if (ty->kind != STORAGE_TYPE_UDT)
			return err_set(ERR_INVALID,
				       "Invalid field selection: %s is not a "
				       "user type",
				       sc->name);
		for (size_t f = 0; f < ty->count && out->field < 0; f++)
			if (strcmp(ty->field_names[f], cd->column.field) == 0)
				out->field = (int)f;
		if (out->field < 0)
			return err_set(ERR_INVALID,
				       "Unknown field %s for column %s",
				       cd->column.field, sc->name);
	}
	if (cd->op == CQL_OP_CONTAINS || cd->op == CQL_OP_CONTAINS_KEY)
		return err_set(ERR_INVALID, "Unsupported operator %s in IF",
			       cd->op == CQL_OP_CONTAINS ? "CONTAINS"
							 : "CONTAINS KEY");
	if (cd->column.element) {
		if (ty->kind != STORAGE_TYPE_MAP &&
		    ty->kind != STORAGE_TYPE_LIST)
			return err_set(ERR_INVALID,
				       "Invalid element access syntax for "
				       "non-collection column %s",
				       sc->name);
		bool map = ty->kind == STORAGE_TYPE_MAP;
		const struct storage_type *kt =
			map ? ty->sub[0] : simple_type(STORAGE_TYPE_INT);
		out->has_elem = true;
		if (resolve(c, cd->column.element, kt, sc->name, binds, nbinds,
			    ctx, &out->elem, NULL) != 0)
			return -1;
		if (out->elem.len < 0)
			return err_set(ERR_INVALID,
				       "Invalid null value for %s element "
				       "access",
				       map ? "map" : "list");
		ty = map ? ty->sub[1] : ty->sub[0];
	} else if (out->field >= 0) {
		ty = ty->sub[out->field];
	} else if (storage_type_is_collection(ty->kind) && !ty->frozen &&
		   cd->op != CQL_OP_EQ && cd->op != CQL_OP_NEQ &&
		   cd->op != CQL_OP_IN) {
		return err_set(ERR_UNSUPPORTED,
			       "Conditions with %s on a whole non-frozen "
			       "collection are not supported by Cassini yet",
			       op_text(cd->op));
	}
	const struct cql_term *v = cd->value;
	if (cd->op == CQL_OP_IN && v->kind != CQL_TERM_BIND) {
		if (v->kind != CQL_TERM_TUPLE && v->kind != CQL_TERM_LIST)
			return err_set(ERR_INVALID,
				       "Invalid IN condition on %s", sc->name);
		out->vals =
			arena_alloc(&c->a, (v->count + 1) * sizeof(*out->vals));
		if (!out->vals)
			return err_set(ERR_NOMEM, "out of memory");
		/* unset values leave IN's list (ColumnCondition
		 * .filterUnsetValuesIfNeeded) */
		out->nvals = 0;
		for (size_t i = 0; i < v->count; i++) {
			bool unset;
			if (resolve(c, v->items[i], ty, sc->name, binds, nbinds,
				    ctx, &out->vals[out->nvals], &unset) != 0)
				return -1;
			out->nvals += !unset;
		}
		return 0;
	}
	if (cd->op == CQL_OP_IN) { /* IN ?: a serialized list */
		struct val list;
		const struct storage_type *elem[1] = {ty};
		struct storage_type lt = {.kind = STORAGE_TYPE_LIST,
					  .frozen = true,
					  .count = 1,
					  .sub = elem};
		bool unset;
		if (resolve(c, v, &lt, sc->name, binds, nbinds, ctx, &list,
			    &unset) != 0)
			return -1;
		if (unset)
			return err_set(ERR_INVALID,
				       "Invalid 'unset' value in condition");
		if (list.len < 0)
			return err_set(ERR_INVALID,
				       "Invalid null list in IN condition");
		struct cursor cur = cursor_make(list.ptr, (size_t)list.len);
		uint32_t n;
		if (cursor_be32(&cur, &n) != 0 || n > 65535)
			return err_set(ERR_INVALID, "Invalid IN list");
		out->nvals = n;
		out->vals = arena_alloc(&c->a, (n + 1) * sizeof(*out->vals));
		if (!out->vals)
			return err_set(ERR_NOMEM, "out of memory");
		for (uint32_t i = 0; i < n; i++) {
			uint32_t len;
			struct slice s;
			if (cursor_be32(&cur, &len) != 0)
				return err_set(ERR_INVALID, "Invalid IN list");
			if ((int32_t)len < 0) {
				out->vals[i] = (struct val){NULL, -1};
				continue;
			}
			if (cursor_take(&cur, len, &s) != 0)
				return err_set(ERR_INVALID, "Invalid IN list");
			out->vals[i] = (struct val){s.ptr, (int32_t)len};
		}
		return 0;
	}
	out->nvals = 1;
	out->vals = arena_alloc(&c->a, sizeof(*out->vals));
	bool unset = false;
	if (!out->vals || resolve(c, v, ty, sc->name, binds, nbinds, ctx,
				  out->vals, &unset) != 0)
		return out->vals ? -1 : err_set(ERR_NOMEM, "out of memory");
	if (unset) /* Bound.checkForUnsetValues */
		return err_set(ERR_INVALID,
			       "Invalid 'unset' value in condition");
	if (out->vals[0].len < 0 && cd->op != CQL_OP_EQ && cd->op != CQL_OP_NEQ)
		return err_set(ERR_INVALID,
			       "Invalid comparison with null for operator "
			       "\"%s\"",
			       op_text(cd->op));
	return 0;
}

/* The clustering the statement's conditions read: INSERT's values, or
 * UPDATE/DELETE's WHERE equalities (IN on keys is refused). */
static int item_key(struct cql_cas *c, struct item *it,
		    const struct cql_stmt *s, const struct cql_value *binds,
		    size_t nbinds, const struct cql_write_ctx *ctx)
{
	const struct storage_table_meta *m = c->m;
	const struct cql_relation *where = NULL;
	size_t nwhere = 0;
	if (s->kind == CQL_STMT_UPDATE) {
		where = s->u.update.where;
		nwhere = s->u.update.where_count;
	} else if (s->kind == CQL_STMT_DELETE) {
		where = s->u.del.where;
		nwhere = s->u.del.where_count;
	}
	for (size_t i = 0; i < nwhere; i++) {
		const struct cql_relation *r = &where[i];
		if (r->kind != CQL_REL_COLUMN || r->op != CQL_OP_IN)
			continue;
		int col = cql_table_column(c->t, r->columns[0]);
		if (col >= 0 &&
		    m->columns[col].kind == STORAGE_COLUMN_PARTITION_KEY)
			return err_set(ERR_INVALID,
				       "IN on the partition key is not "
				       "supported with conditional %s",
				       s->kind == CQL_STMT_DELETE ? "deletions"
								  : "updates");
		if (col >= 0 &&
		    m->columns[col].kind == STORAGE_COLUMN_CLUSTERING)
			return err_set(ERR_INVALID,
				       "IN on the clustering key columns is "
				       "not supported with conditional %s",
				       s->kind == CQL_STMT_DELETE ? "deletions"
								  : "updates");
	}
	it->nck = 0;
	for (size_t k = 0; k < m->ck_count; k++) {
		const struct storage_column *col = &m->columns[m->ck[k]];
		const struct cql_term *t = NULL;
		if (s->kind == CQL_STMT_INSERT) {
			for (size_t i = 0; i < s->u.insert.column_count; i++)
				if (!strcmp(s->u.insert.columns[i], col->name))
					t = s->u.insert.values[i];
		} else {
			for (size_t i = 0; i < nwhere; i++)
				if (where[i].kind == CQL_REL_COLUMN &&
				    where[i].op == CQL_OP_EQ &&
				    !strcmp(where[i].columns[0], col->name))
					t = where[i].value;
		}
		if (!t)
			break;
		if (resolve(c, t, col->type, col->name, binds, nbinds, ctx,
			    &it->ck[k], NULL) != 0)
			return -1;
		it->nck = k + 1;
	}
	return 0;
}

static int add_item(struct cql_cas *c, struct item *it,
		    const struct cql_stmt *s, const struct cql_value *binds,
		    size_t nbinds, const struct cql_write_ctx *ctx)
{
	const struct cql_using *u = stmt_using(s);
	if (u->timestamp)
		return err_set(ERR_INVALID,
			       c->batch ? "Cannot provide custom timestamp for "
					  "conditional BATCH"
					: "Cannot provide custom timestamp for "
					  "conditional updates");
	if (item_key(c, it, s, binds, nbinds, ctx) != 0)
		return -1;
	it->kind = ITEM_PLAIN;
	const struct cql_condition *conds = NULL;
	size_t n = 0;
	if (s->kind == CQL_STMT_INSERT) {
		if (s->u.insert.if_not_exists)
			it->kind = ITEM_NOT_EXISTS;
	} else if (s->kind == CQL_STMT_UPDATE && s->u.update.has_conditions) {
		it->kind = s->u.update.if_exists ? ITEM_EXISTS : ITEM_CONDS;
		conds = s->u.update.conditions;
		n = s->u.update.condition_count;
	} else if (s->kind == CQL_STMT_DELETE && s->u.del.has_conditions) {
		it->kind = s->u.del.if_exists ? ITEM_EXISTS : ITEM_CONDS;
		conds = s->u.del.conditions;
		n = s->u.del.condition_count;
	}
	if (it->kind == ITEM_NOT_EXISTS || it->kind == ITEM_EXISTS) {
		if (it->nck < c->m->ck_count && c->m->ck_count > 0 &&
		    s->kind != CQL_STMT_INSERT)
			it->nck = it->nck; /* a static or partition write */
		return 0;
	}
	if (!n)
		return 0;
	it->conds = arena_alloc(&c->a, n * sizeof(*it->conds));
	if (!it->conds)
		return err_set(ERR_NOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (add_cond(c, it, &conds[i], binds, nbinds, ctx,
			     &it->conds[i]) != 0)
			return -1;
	it->nconds = n;
	return 0;
}

struct cql_cas *cql_cas_new(const struct cql_data_request *dr,
			    const struct cql_write_ctx *ctx)
{
	struct cql_cas *c = calloc(1, sizeof(*c));
	if (!c) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	arena_create(&c->a, 0);
	c->batch = dr->stmt == NULL;
	c->t = dr->stmt ? dr->table : dr->batch[0].table;
	c->m = cql_table_meta(c->t);
	c->nitems = dr->stmt ? 1 : dr->batch_count;
	for (size_t i = 0; i < c->m->column_count; i++)
		if (c->m->columns[i].type->kind == CQL_TYPE_ID_COUNTER) {
			err_set(ERR_INVALID, "Conditional updates are not "
					     "supported on counter tables");
			goto fail;
		}
	/* dr->batch_timestamp is not checked: drivers send their default
	 * timestamp with every batch, which Cassandra ignores for
	 * conditional ones (only USING TIMESTAMP is refused, per statement) */
	c->items = arena_alloc(&c->a, c->nitems * sizeof(*c->items));
	if (!c->items) {
		err_set(ERR_NOMEM, "out of memory");
		goto fail;
	}
	memset(c->items, 0, c->nitems * sizeof(*c->items));
	for (size_t i = 0; i < c->nitems; i++) {
		const struct cql_stmt *s = item_stmt(dr, i);
		const struct cql_value *binds =
			dr->stmt ? dr->binds : dr->batch[i].binds;
		size_t nb = dr->stmt ? dr->bind_count : dr->batch[i].bind_count;
		if (!dr->stmt && dr->batch[i].table != c->t) {
			err_set(ERR_INVALID, "Batch with conditions cannot "
					     "span multiple tables");
			goto fail;
		}
		/* INSERT JSON: its values map read as the INSERT of every
		 * column (dml_json.c), so the key is found as for any INSERT */
		struct cql_stmt *js;
		if (s->kind == CQL_STMT_INSERT && s->u.insert.json) {
			if (!(js = arena_alloc(&c->a, sizeof(*js)))) {
				err_set(ERR_NOMEM, "out of memory");
				goto fail;
			}
			*js = *s;
			if (cql_dml_json_insert(&c->a, &s->u.insert, c->t,
						binds, nb, &js->u.insert,
						&binds, &nb) != 0)
				goto fail;
			s = js;
		}
		if (add_item(c, &c->items[i], s, binds, nb, ctx) != 0)
			goto fail;
	}
	/* the write, stamped 0 (cql_cas_mutation's user shifts it) */
	struct cql_write_ctx wc = *ctx;
	wc.timestamp = 0;
	struct cql_data_request d2 = *dr;
	d2.batch_timestamp = INT64_MIN;
	struct cql_mutations all = {0};
	const struct cql_table **tables = NULL;
	if (cql_data_build_writes(&d2, &wc, &all, &tables) != 0)
		goto fail;
	free(tables);
	for (size_t i = 1; i < all.count; i++)
		if (!slice_eq(storage_mutation_key(all.items[i]),
			      storage_mutation_key(all.items[0]))) {
			cql_mutations_free(&all);
			err_set(ERR_INVALID,
				c->batch
					? "Batch with conditions cannot span "
					  "multiple partitions"
					: "IN on the partition key is not "
					  "supported with conditional updates");
			goto fail;
		}
	if (all.count == 1) {
		c->mut = all.items[0];
		all.items[0] = NULL;
		all.count = 0;
	} else if (all.count > 1) {
		c->mut = storage_fragment_merge(c->m, all.items, all.count);
	}
	cql_mutations_free(&all);
	if (!c->mut) {
		err_set(ERR_INVALID, "the conditional write changes nothing");
		goto fail;
	}
	return c;
fail:
	cql_cas_delete(c);
	return NULL;
}

void cql_cas_delete(struct cql_cas *c)
{
	if (!c)
		return;
	storage_mutation_delete(c->mut);
	arena_destroy(&c->a);
	free(c);
}

const struct storage_mutation *cql_cas_mutation(const struct cql_cas *c)
{
	return c->mut;
}

const struct cql_table *cql_cas_table(const struct cql_cas *c)
{
	return c->t;
}

/* ---- evaluation -----------------------------------------------------------
 */

static const struct storage_row_view *find_row(const struct cql_cas *c,
					       const struct storage_result *r,
					       const struct item *it,
					       bool is_static)
{
	if (!r)
		return NULL;
	if (is_static || c->m->ck_count == 0)
		return is_static && c->m->ck_count ? r->static_row
		       : r->row_count              ? &r->rows[0]
						   : NULL;
	for (size_t i = 0; i < r->row_count; i++) {
		const struct storage_row_view *row = &r->rows[i];
		if (row->clustering_count < it->nck)
			continue;
		bool eq = true;
		for (size_t k = 0; k < it->nck && eq; k++)
			eq = it->ck[k].len >= 0 &&
			     slice_eq(row->clustering[k],
				      slice_make(it->ck[k].ptr,
						 (size_t)it->ck[k].len));
		if (eq)
			return row;
	}
	return NULL;
}

/* A collection column's cells as its serialized value. */
static int collection_value(const struct storage_row_view *row, int col,
			    uint16_t kind, struct buf *out)
{
	uint32_t n = 0;
	for (size_t i = 0; row && i < row->cell_count; i++)
		n += row->cells[i].column == col;
	if (n == 0)
		return 1;
	if (buf_put_be32(out, n) != 0)
		return -1;
	for (size_t i = 0; i < row->cell_count; i++) {
		const struct storage_cell_view *c = &row->cells[i];
		if (c->column != col)
			continue;
		struct slice first =
			kind == STORAGE_TYPE_LIST ? c->value : c->path;
		if (buf_put_be32(out, (uint32_t)first.len) ||
		    buf_append(out, first.ptr, first.len))
			return -1;
		if (kind == STORAGE_TYPE_MAP &&
		    (buf_put_be32(out, (uint32_t)c->value.len) ||
		     buf_append(out, c->value.ptr, c->value.len)))
			return -1;
	}
	return 0;
}

/* A non-frozen user type's cells as its serialized value, every field
 * present or null (UserType.serializeForNativeProtocol): 1 when it has no
 * cell (a null value). */
static int udt_value(const struct storage_row_view *row, int col,
		     const struct storage_type *ty, struct buf *out)
{
	bool any = false;
	for (size_t f = 0; f < ty->count; f++) {
		const struct storage_cell_view *hit = NULL;
		for (size_t i = 0; !hit && i < row->cell_count; i++) {
			const struct storage_cell_view *cv = &row->cells[i];
			if (cv->column == col && cv->path.len == 2 &&
			    be16_load(cv->path.ptr) == f)
				hit = cv;
		}
		any |= hit != NULL;
		if (hit ? buf_put_be32(out, (uint32_t)hit->value.len) ||
				    buf_append(out, hit->value.ptr,
					       hit->value.len)
			: buf_put_be32(out, UINT32_MAX))
			return -1;
	}
	return any ? 0 : 1;
}

/* Field `idx` of a frozen user type value ([int length][bytes] per field,
 * negative for null, trailing fields missing): false when null/missing. */
static bool frozen_field(struct slice v, size_t idx, struct slice *out)
{
	size_t pos = 0;
	for (size_t i = 0; i <= idx; i++) {
		if (v.len < pos + 4)
			return false;
		uint32_t n = be32_load(v.ptr + pos);
		pos += 4;
		if (n & 0x80000000u) {
			if (i == idx)
				return false;
			continue;
		}
		if (n > v.len - pos)
			return false;
		if (i == idx) {
			*out = slice_make(v.ptr + pos, n);
			return true;
		}
		pos += n;
	}
	return false;
}

/* The current value a condition compares: 1 and *v when present. */
static int current(const struct cql_cas *c, const struct storage_row_view *row,
		   const struct cond *cd, struct buf *scratch, struct slice *v)
{
	const struct storage_column *sc = &c->m->columns[cd->col];
	const struct storage_type *ty = sc->type;
	if (!row)
		return 0;
	if (ty->kind == STORAGE_TYPE_UDT && !ty->frozen) {
		if (cd->field >= 0) { /* the field's own cell */
			for (size_t i = 0; i < row->cell_count; i++) {
				const struct storage_cell_view *cv =
					&row->cells[i];
				if (cv->column == cd->col &&
				    cv->path.len == 2 &&
				    be16_load(cv->path.ptr) ==
					    (uint16_t)cd->field) {
					*v = cv->value;
					return 1;
				}
			}
			return 0;
		}
		buf_clear(scratch);
		int rc = udt_value(row, cd->col, ty, scratch);
		if (rc < 0)
			return -1;
		*v = buf_slice(scratch);
		return rc == 0;
	}
	if (storage_type_is_collection(ty->kind) && !ty->frozen) {
		if (cd->has_elem) {
			int32_t idx = -1;
			if (ty->kind == STORAGE_TYPE_LIST && cd->elem.len == 4)
				idx = (int32_t)be32_load(cd->elem.ptr);
			int32_t at = 0;
			for (size_t i = 0; i < row->cell_count; i++) {
				const struct storage_cell_view *cv =
					&row->cells[i];
				if (cv->column != cd->col)
					continue;
				if (ty->kind == STORAGE_TYPE_MAP
					    ? slice_eq(cv->path,
						       slice_make(
							       cd->elem.ptr,
							       (size_t)cd->elem
								       .len))
					    : at == idx) {
					*v = cv->value;
					return 1;
				}
				at++;
			}
			return 0;
		}
		buf_clear(scratch);
		int rc = collection_value(row, cd->col, ty->kind, scratch);
		if (rc < 0)
			return -1;
		*v = buf_slice(scratch);
		return rc == 0;
	}
	for (size_t i = 0; i < row->cell_count; i++)
		if (row->cells[i].column == cd->col) {
			*v = row->cells[i].value;
			return cd->field < 0 ||
			       frozen_field(*v, (size_t)cd->field, v);
		}
	return 0;
}

static const struct storage_type *cond_type(const struct cql_cas *c,
					    const struct cond *cd)
{
	const struct storage_type *ty = c->m->columns[cd->col].type;
	if (cd->has_elem)
		return ty->kind == STORAGE_TYPE_MAP ? ty->sub[1] : ty->sub[0];
	if (cd->field >= 0)
		return ty->sub[cd->field];
	return ty;
}

static bool value_eq(const struct storage_type *ty, bool present,
		     struct slice cur, struct val v)
{
	if (v.len < 0)
		return !present;
	if (!present)
		return false;
	return storage_type_cmp(ty, cur.ptr, cur.len, v.ptr, (size_t)v.len) ==
	       0;
}

static int cond_holds(const struct cql_cas *c,
		      const struct storage_row_view *row, const struct cond *cd,
		      bool *holds)
{
	struct buf scratch = {0};
	struct slice cur = {0};
	int present = current(c, row, cd, &scratch, &cur);
	if (present < 0) {
		buf_free(&scratch);
		return err_set(ERR_NOMEM, "out of memory");
	}
	const struct storage_type *ty = cond_type(c, cd);
	switch (cd->op) {
	case CQL_OP_EQ:
		*holds = value_eq(ty, present, cur, cd->vals[0]);
		break;
	case CQL_OP_NEQ:
		*holds = !value_eq(ty, present, cur, cd->vals[0]);
		break;
	case CQL_OP_IN:
		*holds = false;
		for (size_t i = 0; i < cd->nvals && !*holds; i++)
			*holds = value_eq(ty, present, cur, cd->vals[i]);
		break;
	default: {
		if (!present) {
			*holds = false;
			break;
		}
		int r = storage_type_cmp(ty, cur.ptr, cur.len, cd->vals[0].ptr,
					 (size_t)cd->vals[0].len);
		*holds = cd->op == CQL_OP_LT    ? r < 0
			 : cd->op == CQL_OP_LTE ? r <= 0
			 : cd->op == CQL_OP_GT  ? r > 0
						: r >= 0;
	}
	}
	buf_free(&scratch);
	return 0;
}

static bool row_exists(const struct storage_row_view *row)
{
	return row && (row->marker_ts != INT64_MIN || row->cell_count > 0);
}

int cql_cas_eval(const struct cql_cas *c, const struct storage_result *cur,
		 bool *applied)
{
	*applied = true;
	for (size_t i = 0; i < c->nitems && *applied; i++) {
		const struct item *it = &c->items[i];
		bool is_static = it->nck < c->m->ck_count;
		const struct storage_row_view *row =
			find_row(c, cur, it, is_static);
		switch (it->kind) {
		case ITEM_PLAIN:
			break;
		case ITEM_EXISTS:
			*applied = row_exists(row);
			break;
		case ITEM_NOT_EXISTS:
			*applied = !row_exists(row);
			break;
		case ITEM_CONDS:
			for (size_t k = 0; k < it->nconds && *applied; k++) {
				const struct cond *cd = &it->conds[k];
				bool st = c->m->columns[cd->col].kind ==
					  STORAGE_COLUMN_STATIC;
				const struct storage_row_view *r =
					st ? (c->m->ck_count
						      ? (cur ? cur->static_row
							     : NULL)
						      : row)
					   : find_row(c, cur, it, false);
				if (cond_holds(c, r, cd, applied) != 0)
					return -1;
			}
			break;
		}
	}
	return 0;
}

/* ---- the answer -----------------------------------------------------------
 */

static int write_column(const struct cql_cas *c, struct buf *out,
			const struct storage_result *r,
			const struct storage_row_view *row, int col)
{
	const struct storage_column *sc = &c->m->columns[col];
	if (sc->kind == STORAGE_COLUMN_PARTITION_KEY) {
		struct slice k =
			storage_pk_component(c->m, r->key, sc->position);
		return cql_write_bytes(out, k.ptr, (int32_t)k.len);
	}
	if (sc->kind == STORAGE_COLUMN_CLUSTERING) {
		if (!row || row->is_static ||
		    sc->position >= row->clustering_count)
			return cql_write_bytes(out, NULL, -1);
		struct slice v = row->clustering[sc->position];
		return cql_write_bytes(out, v.ptr, (int32_t)v.len);
	}
	const struct storage_row_view *src =
		sc->kind == STORAGE_COLUMN_STATIC && c->m->ck_count
			? r->static_row
			: row;
	struct cond probe = {.col = col, .field = -1};
	struct buf scratch = {0};
	struct slice v;
	int present = current(c, src, &probe, &scratch, &v);
	int rc = present < 0 ? -1
		 : present   ? cql_write_bytes(out, v.ptr, (int32_t)v.len)
			     : cql_write_bytes(out, NULL, -1);
	buf_free(&scratch);
	return rc;
}

/* Appends the static then the regular columns not yet seen, each by name:
 * Selection.wildcard's TableMetadata.allColumnsInSelectOrder, as SELECT *
 * (cql_select_plan_star). */
static size_t add_select_order(const struct storage_table_meta *m, int *cols,
			       size_t ncols, bool *seen)
{
	for (int pass = 0; pass < 2; pass++) {
		uint8_t want = pass == 0 ? STORAGE_COLUMN_STATIC
					 : STORAGE_COLUMN_REGULAR;
		size_t first = ncols;
		for (size_t k = 0; k < m->column_count && k < 1024; k++) {
			if (m->columns[k].kind != want || seen[k] ||
			    m->columns[k].dropped)
				continue;
			seen[k] = true;
			size_t at = ncols++;
			while (at > first &&
			       strcmp(m->columns[cols[at - 1]].name,
				      m->columns[k].name) > 0) {
				cols[at] = cols[at - 1];
				at--;
			}
			cols[at] = (int)k;
		}
	}
	return ncols;
}

/* Appends an item's condition columns not yet seen, in IF order, the
 * regular ones before the static ones (ColumnConditions.getColumns). */
static size_t add_cond_columns(const struct storage_table_meta *m,
			       const struct item *it, int *cols, size_t ncols,
			       bool *seen)
{
	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < it->nconds; k++) {
			int col = it->conds[k].col;
			bool is_static =
				m->columns[col].kind == STORAGE_COLUMN_STATIC;
			if (is_static != (pass == 1) || col >= 1024 ||
			    seen[col])
				continue;
			seen[col] = true;
			cols[ncols++] = col;
		}
	return ncols;
}

int cql_cas_encode(const struct cql_cas *c, const struct storage_result *cur,
		   bool applied, uint8_t version, int16_t stream,
		   struct buf *out)
{
	struct arena a;
	arena_create(&a, 0);
	const struct storage_table_meta *m = c->m;
	int *cols = arena_alloc(&a, (m->column_count + 1) * sizeof(int));
	size_t ncols = 0;
	bool wildcard = false;
	/* the rows the conditions read that exist, one per item */
	const struct storage_row_view **rows =
		arena_alloc(&a, (c->nitems + 1) * sizeof(*rows));
	size_t nrows = 0;
	if (!cols || !rows)
		goto nomem;
	if (!applied) {
		for (size_t i = 0; i < c->nitems; i++) {
			const struct item *it = &c->items[i];
			if (it->kind == ITEM_PLAIN)
				continue;
			if (it->kind != ITEM_CONDS)
				wildcard = true;
			bool is_static = it->nck < m->ck_count;
			const struct storage_row_view *row =
				find_row(c, cur, it, is_static);
			if (!row && it->kind == ITEM_CONDS && m->ck_count &&
			    cur && cur->static_row) {
				/* static conditions still show their values */
				for (size_t k = 0; k < it->nconds; k++)
					if (m->columns[it->conds[k].col].kind ==
					    STORAGE_COLUMN_STATIC)
						row = cur->static_row;
			}
			if (row_exists(row) ||
			    (row && row == (cur ? cur->static_row : NULL)))
				rows[nrows++] = row;
		}
		if (nrows) {
			bool seen[1024] = {false};
			if (c->batch || wildcard) {
				for (size_t k = 0; k < m->pk_count; k++)
					cols[ncols++] = m->pk[k];
				for (size_t k = 0; k < m->ck_count; k++)
					cols[ncols++] = m->ck[k];
				for (size_t k = 0; k < ncols; k++)
					seen[cols[k]] = true;
			}
			if (wildcard)
				ncols = add_select_order(m, cols, ncols, seen);
			for (size_t i = 0; i < c->nitems; i++)
				ncols = add_cond_columns(m, &c->items[i], cols,
							 ncols, seen);
		}
	}
	struct cql_column_spec *specs =
		arena_alloc(&a, (ncols + 1) * sizeof(*specs));
	static const struct cql_type_option boolean = {.id = CQL_TYPE_BOOLEAN};
	if (!specs)
		goto nomem;
	specs[0] = (struct cql_column_spec){m->keyspace, m->name, "[applied]",
					    &boolean};
	for (size_t k = 0; k < ncols; k++) {
		specs[k + 1] = (struct cql_column_spec){
			m->keyspace, m->name, m->columns[cols[k]].name,
			cql_type_option_of(&a, m->columns[cols[k]].type)};
		if (!specs[k + 1].type)
			goto nomem;
	}
	size_t nout = nrows ? nrows : 1;
	long start = cql_frame_begin(out, version, 0, stream, CQL_OP_RESULT);
	uint8_t flag = applied ? 1 : 0;
	if (start < 0 || cql_write_int(out, CQL_RESULT_ROWS) ||
	    cql_write_rows_metadata(out, specs, ncols + 1, NULL, false) ||
	    cql_write_int(out, (int32_t)nout))
		goto nomem;
	for (size_t i = 0; i < nout; i++) {
		if (cql_write_bytes(out, &flag, 1))
			goto nomem;
		for (size_t k = 0; k < ncols; k++)
			if (write_column(c, out, cur, nrows ? rows[i] : NULL,
					 cols[k]) != 0)
				goto nomem;
	}
	cql_frame_end(out, start);
	arena_destroy(&a);
	return 0;
nomem:
	arena_destroy(&a);
	return err_set(ERR_NOMEM, "out of memory encoding the CAS result");
}
