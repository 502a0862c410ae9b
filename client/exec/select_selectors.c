/*
 * SELECT planning, selectors: *, columns, WRITETIME/TTL, token(),
 * aggregates, collection elements and native function calls.
 */
#include "client/exec/select_internal.h"

#include "client/cql/cql_floor.h"
#include "client/cql/cql_values.h"
#include "common/err.h"
#include "common/murmur3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- selectors ----------------------------------------------------------- */

/* Names are copied: the statement's text dies with its request, while the
 * plan lives until the rows are encoded, after the reads. */
static int add_out(struct cql_select_plan *p, enum out_kind k, int column,
		   const char *name, const struct storage_type *type)
{
	const char *copy = arena_strdup(p->a, name);
	if (!type)
		type = storage_type_simple(STORAGE_TYPE_BLOB);
	if (!copy)
		return -1;
	p->outs[p->nouts++] = (struct out_col){
		.kind = k, .column = column, .name = copy, .type = type};
	return 0;
}

int cql_select_plan_star(struct cql_select_plan *p)
{
	const struct storage_table_meta *m = p->m;
	/* Schema names outlive the plan: no copies needed here. */
	for (size_t i = 0; i < m->pk_count; i++)
		p->outs[p->nouts++] =
			(struct out_col){.kind = OUT_COLUMN,
					 .column = m->pk[i],
					 .name = m->columns[m->pk[i]].name,
					 .type = m->columns[m->pk[i]].type};
	for (size_t i = 0; i < m->ck_count; i++)
		p->outs[p->nouts++] =
			(struct out_col){.kind = OUT_COLUMN,
					 .column = m->ck[i],
					 .name = m->columns[m->ck[i]].name,
					 .type = m->columns[m->ck[i]].type};
	/* Then the static columns, then the regular ones, each by name
	 * (Cassandra's TableMetadata.allColumnsInSelectOrder). */
	for (int pass = 0; pass < 2; pass++) {
		uint8_t want = pass == 0 ? STORAGE_COLUMN_STATIC
					 : STORAGE_COLUMN_REGULAR;
		size_t first = p->nouts;
		for (size_t c = 0; c < m->column_count; c++) {
			if (m->columns[c].kind != want ||
			    cql_table_column_dropped(p->t, c))
				continue;
			size_t at = p->nouts++;
			while (at > first && strcmp(p->outs[at - 1].name,
						    m->columns[c].name) > 0) {
				p->outs[at] = p->outs[at - 1];
				at--;
			}
			p->outs[at] =
				(struct out_col){.kind = OUT_COLUMN,
						 .column = (int)c,
						 .name = m->columns[c].name,
						 .type = m->columns[c].type};
		}
	}
	return 0;
}

/* The column a function of one column takes, or -1 with the error. */
static int function_column(const struct cql_select_plan *p,
			   const struct cql_selector *s)
{
	if (s->arg_count != 1 || s->args[0].kind != CQL_SEL_COLUMN)
		return err_set(ERR_INVALID,
			       "Invalid call to function system.%s: it takes "
			       "one column (other arguments are not supported "
			       "by Cassini yet)",
			       s->name);
	int c = cql_table_column(p->t, s->args[0].name);
	if (c < 0)
		return err_set(ERR_INVALID, "Undefined column name %s",
			       s->args[0].name);
	return c;
}

/* count(col), min, max, sum and avg of one column, as Cassandra's native
 * aggregates: sum and avg of the integer and floating types (varint and
 * decimal would need arbitrary precision), min and max of any type that is
 * not a collection. NULL values are skipped. */
static int plan_aggregate(struct cql_select_plan *p,
			  const struct cql_selector *s, enum agg_fn fn)
{
	const struct storage_table_meta *m = p->m;
	int c = function_column(p, s);
	if (c < 0)
		return -1;
	const struct storage_type *type = m->columns[c].type;
	uint16_t k = type->kind;
	bool numeric = select_int_width(k) || k == STORAGE_TYPE_FLOAT ||
		       k == STORAGE_TYPE_DOUBLE;
	if ((fn == AGG_SUM || fn == AGG_AVG) && !numeric)
		return err_set(
			k == STORAGE_TYPE_VARINT || k == STORAGE_TYPE_DECIMAL
				? ERR_UNSUPPORTED
				: ERR_INVALID,
			"%s of a %s column is not supported%s", s->name,
			k == STORAGE_TYPE_VARINT    ? "varint"
			: k == STORAGE_TYPE_DECIMAL ? "decimal"
						    : "non-numeric",
			k == STORAGE_TYPE_VARINT || k == STORAGE_TYPE_DECIMAL
				? " by Cassini yet"
				: "");
	if (fn != AGG_COUNT && storage_type_is_collection(k))
		return err_set(ERR_INVALID,
			       "Invalid call to function system.%s on the "
			       "collection %s",
			       s->name, m->columns[c].name);
	if (fn == AGG_COUNT)
		type = storage_type_simple(STORAGE_TYPE_BIGINT);
	char name[160];
	snprintf(name, sizeof(name), "system.%s(%s)", s->name,
		 m->columns[c].name);
	if (add_out(p, OUT_AGG, c, s->alias ? s->alias : name, type) != 0)
		return -1;
	p->outs[p->nouts - 1].agg = fn;
	p->aggregate = true;
	return 0;
}

/* m['k'] and s[e] (Cassandra 4.0): a map's value at a key, a set's
 * element if present; NULL otherwise. */
/* The column, field positions (outermost first) and type of u.f, u.f.g
 * (Selectable.WithFieldSelection), with Cassandra's refusals; `name` gets
 * "u.f.g". */
static int field_chain(struct cql_select_plan *p, const struct cql_selector *s,
		       int *col, uint16_t fields[OUT_FIELD_DEPTH],
		       size_t *depth_out, const struct storage_type **type_out,
		       char *name, size_t name_size)
{
	const struct cql_selector *chain[OUT_FIELD_DEPTH];
	size_t depth = 0;
	const struct cql_selector *base = s;
	while (base->kind == CQL_SEL_FIELD) {
		if (depth == OUT_FIELD_DEPTH)
			return err_set(ERR_UNSUPPORTED,
				       "Field selections deeper than %d are "
				       "not supported by Cassini yet",
				       OUT_FIELD_DEPTH);
		chain[depth++] = base;
		base = &base->args[0];
	}
	if (base->kind != CQL_SEL_COLUMN)
		return err_set(ERR_UNSUPPORTED,
			       "Field selection on anything but a column is "
			       "not supported by Cassini yet");
	int c = cql_table_column(p->t, base->name);
	if (c < 0)
		return err_set(ERR_INVALID,
			       "Undefined column name %s in selection clause",
			       base->name);
	const struct storage_type *type = p->m->columns[c].type;
	snprintf(name, name_size, "%s", base->name);
	for (size_t d = 0; d < depth; d++) {
		const char *f = chain[depth - 1 - d]->name;
		char text[160] = "?";
		cql_type_text(type, text, sizeof(text));
		if (type->kind != STORAGE_TYPE_UDT)
			return err_set(ERR_INVALID,
				       "Invalid field selection: %s of type %s "
				       "is not a user type",
				       name, text);
		size_t i = 0;
		while (i < type->count && strcmp(type->field_names[i], f) != 0)
			i++;
		if (i == type->count)
			return err_set(ERR_INVALID,
				       "%s of type %s has no field %s", name,
				       text, f);
		fields[d] = (uint16_t)i;
		type = type->sub[i];
		size_t n = strlen(name);
		snprintf(name + n, name_size - n, ".%s", f);
	}
	*col = c;
	*depth_out = depth;
	*type_out = type;
	return 0;
}

/* u.f, u.f.g: fields of a user type column, frozen or not. */
static int plan_field(struct cql_select_plan *p, const struct cql_selector *s)
{
	char name[256];
	uint16_t fields[OUT_FIELD_DEPTH];
	size_t depth;
	int c;
	const struct storage_type *type;
	if (field_chain(p, s, &c, fields, &depth, &type, name, sizeof(name)) !=
	    0)
		return -1;
	if (add_out(p, OUT_FIELD, c, s->alias ? s->alias : name, type) != 0)
		return -1;
	struct out_col *o = &p->outs[p->nouts - 1];
	memcpy(o->fields, fields, depth * sizeof(fields[0]));
	o->field_depth = depth;
	return 0;
}

static int plan_element(struct cql_select_plan *p, const struct cql_selector *s)
{
	const struct storage_table_meta *m = p->m;
	int c = cql_table_column(p->t, s->name);
	if (c < 0)
		return err_set(ERR_INVALID,
			       "Undefined column name %s in selection clause",
			       s->name);
	const struct storage_type *type = m->columns[c].type;
	if (type->kind != STORAGE_TYPE_MAP && type->kind != STORAGE_TYPE_SET)
		return err_set(ERR_INVALID,
			       "Element selection is only allowed on sets and "
			       "maps, but %s is not one",
			       s->name);
	if (type->frozen)
		return err_set(ERR_UNSUPPORTED,
			       "Element selection on frozen collections is "
			       "not supported by Cassini yet");
	if (s->term->kind == CQL_TERM_BIND)
		return err_set(ERR_UNSUPPORTED,
			       "Bind markers in selections are not supported "
			       "by Cassini yet");
	struct slice k;
	enum given given;
	if (cql_select_value_of(p, s->term, type->sub[0], s->name, NULL, 0, &k,
				&given) != 0)
		return -1;
	if (given != GIVEN_VALUE)
		return err_set(ERR_INVALID,
			       "Invalid null value for an element of %s",
			       s->name);
	char name[160];
	snprintf(name, sizeof(name), "%s[%.*s]", s->name,
		 s->term->text ? (int)s->term->len : 1,
		 s->term->text ? s->term->text : "?");
	const struct storage_type *result =
		type->sub[type->kind == STORAGE_TYPE_MAP ? 1 : 0];
	if (add_out(p, OUT_ELEMENT, c, s->alias ? s->alias : name, result) != 0)
		return -1;
	p->outs[p->nouts - 1].element = k;
	return 0;
}

static int plan_expr(struct cql_select_plan *p, const struct cql_selector *s,
		     struct sel_expr **out, char *name, size_t cap);

/* floor(x, duration[, start]) as a selector (Cassandra 5.0's
 * TimeFcts.FloorFunction): x a timestamp, timeuuid, date or time
 * expression, the rest constants, checked as GROUP BY floor() checks
 * them. A timeuuid floors to a timestamp. */
static int plan_floor(struct cql_select_plan *p, const struct cql_selector *s,
		      struct sel_expr *e, char *name, size_t cap)
{
	if (s->arg_count < 2 || s->arg_count > 3)
		return cql_select_floor_signatures_error();
	const struct cql_term *terms[2];
	for (size_t i = 1; i < s->arg_count; i++) {
		if (s->args[i].kind != CQL_SEL_TERM)
			return cql_select_floor_signatures_error();
		terms[i - 1] = s->args[i].term;
	}
	struct sel_expr *a;
	char text[160];
	int rc = plan_expr(p, &s->args[0], &a, text, sizeof(text));
	if (rc != 0)
		return rc < 0 ? -1 : rc;
	if (a->is_const)
		return cql_select_floor_signatures_error();
	struct cql_floor_spec *fl = arena_alloc(p->a, sizeof(*fl));
	if (!fl)
		return -1;
	if (cql_select_floor_args(a->type, terms, s->arg_count - 1, fl) != 0 ||
	    cql_floor_check((enum cql_floor_kind)fl->kind, &fl->dur) != 0)
		return -1;
	e->floor = fl;
	e->arg = a;
	e->type = fl->kind == CQL_FLOOR_DATE   ? STORAGE_TYPE_DATE
		  : fl->kind == CQL_FLOOR_TIME ? STORAGE_TYPE_TIME
					       : STORAGE_TYPE_TIMESTAMP;
	size_t at = (size_t)snprintf(name, cap, "system.floor(%s", text);
	for (size_t i = 0; i + 1 < s->arg_count && at + 2 < cap; i++) {
		char t[80];
		cql_fn_term_text(terms[i], t, sizeof(t));
		at += (size_t)snprintf(name + at, cap - at, ", %s", t);
	}
	if (at + 1 < cap)
		snprintf(name + at, cap - at, ")");
	return 0;
}

/* A selector made of native functions, casts, columns and constants
 * (Selectable.WithFunction, WithCast, WithTerm): its expression, its
 * type and its name as Cassandra's result metadata gives it
 * ("system.blobasint(b)", "cast(v as int)"). 1 when `s` is a function
 * that is not a native scalar one (the caller looks further). */
static int plan_expr(struct cql_select_plan *p, const struct cql_selector *s,
		     struct sel_expr **out, char *name, size_t cap)
{
	struct sel_expr *e = arena_alloc(p->a, sizeof(*e));
	if (!e)
		return -1;
	memset(e, 0, sizeof(*e));
	e->column = -1;
	*out = e;
	if (s->kind == CQL_SEL_COLUMN) {
		int c = cql_table_column(p->t, s->name);
		if (c < 0)
			return err_set(ERR_INVALID,
				       "Undefined column name %s in "
				       "selection clause",
				       s->name);
		e->column = c;
		e->type = p->m->columns[c].type->kind;
		if (p->m->columns[c].type->count)
			e->type = CQL_FN_TYPE_COLLECTION;
		snprintf(name, cap, "%s", s->name);
		return 0;
	}
	if (s->kind == CQL_SEL_TERM) {
		cql_fn_term_text(s->term, name, cap);
		if (s->term->kind == CQL_TERM_BIND)
			return err_set(ERR_UNSUPPORTED,
				       "Bind markers in selections are not "
				       "supported by Cassini yet");
		if (s->term->kind != CQL_TERM_HINT &&
		    s->term->kind != CQL_TERM_FUNCTION) {
			e->is_const = true;
			e->literal = s->term; /* typed by the call */
			return 0;
		}
		struct buf b;
		buf_init(&b);
		int rc = cql_fn_term_eval(s->term, p->fn, NULL, &e->type, &b);
		if (rc >= 0) {
			e->is_const = true;
			e->null = rc == 1;
			e->value.ptr = arena_memdup(
				p->a, b.data ? b.data : (const uint8_t *)"",
				b.len);
			e->value.len = b.len;
			rc = e->value.ptr ? 0 : -1;
		}
		buf_free(&b);
		return rc;
	}
	if (s->kind == CQL_SEL_FUNCTION && strcmp(s->name, "floor") == 0)
		return plan_floor(p, s, e, name, cap);
	const char *fname = s->name;
	char cast_name[48];
	if (s->kind == CQL_SEL_CAST) {
		uint16_t to = s->type && !s->type->param_count
				      ? cql_fn_type_of_name(s->type->name)
				      : 0;
		if (!to)
			return err_set(ERR_INVALID,
				       "Invalid cast to type %s: only native "
				       "types can be cast to",
				       s->type ? s->type->name : "?");
		snprintf(cast_name, sizeof(cast_name), "cast_as_%s",
			 strcmp(s->type->name, "varchar") == 0 ? "text"
							       : s->type->name);
		fname = cast_name;
	} else if (s->kind != CQL_SEL_FUNCTION) {
		return err_set(ERR_UNSUPPORTED,
			       "This selector is not supported as a "
			       "function argument by Cassini yet");
	}
	struct cql_fn_arg args[4];
	struct sel_expr *argx[4];
	char texts[4][160];
	size_t n = s->arg_count < 4 ? s->arg_count : 4;
	for (size_t i = 0; i < n; i++) {
		const struct cql_selector *a = &s->args[i];
		if (a->kind == CQL_SEL_FUNCTION ||
		    a->kind == CQL_SEL_COUNT_STAR) {
			struct cql_fn probe;
			struct cql_fn_arg none[4] = {{0}};
			if (a->kind == CQL_SEL_COUNT_STAR ||
			    cql_fn_resolve(a->name, none, 0, &probe) == 1) {
				/* not a native scalar: writetime, ttl,
				 * token, an aggregate */
				err_clear();
				return err_set(ERR_UNSUPPORTED,
					       "Function %s as an argument of "
					       "another function is not "
					       "supported by Cassini yet",
					       a->kind == CQL_SEL_COUNT_STAR
						       ? "count"
						       : a->name);
			}
			err_clear();
		}
		int rc = plan_expr(p, a, &argx[i], texts[i], sizeof(texts[i]));
		if (rc != 0)
			return rc < 0 ? -1 : rc;
		args[i] = (struct cql_fn_arg){argx[i]->type, argx[i]->literal,
					      texts[i]};
	}
	if (s->kind == CQL_SEL_CAST) {
		char tn[40];
		snprintf(tn, sizeof(tn), "%s", s->type->name);
		snprintf(name, cap, "cast(%s as %s)", texts[0], tn);
		if (argx[0]->type == cql_fn_type_of_name(s->type->name)) {
			*out = argx[0]; /* the same type: the value itself */
			return 0;
		}
	} else {
		size_t at = (size_t)snprintf(name, cap, "system.%s(", fname);
		for (size_t i = 0; i < n && at + 2 < cap; i++)
			at += (size_t)snprintf(name + at, cap - at, "%s%s",
					       i ? ", " : "", texts[i]);
		if (at + 1 < cap)
			snprintf(name + at, cap - at, ")");
	}
	int rc = cql_fn_resolve(fname, args, s->arg_count, &e->fn);
	if (rc == 1 && s->kind == CQL_SEL_CAST)
		return err_set(ERR_INVALID, "%s cannot be cast to %s", texts[0],
			       s->type->name);
	if (rc != 0)
		return rc;
	if (cql_fn_check_supported(&e->fn) != 0)
		return -1;
	e->type = e->fn.ret;
	if (e->fn.nargs) {
		struct sel_expr *a = argx[0];
		if (a->literal) {
			/* the literal, for the argument's type */
			struct buf b;
			const struct storage_type *ct =
				storage_type_simple(e->fn.arg);
			char spec[64];
			snprintf(spec, sizeof(spec), "arg0(system.%s)", fname);
			buf_init(&b);
			int r = ct ? cql_term_serialize(a->literal, ct, spec,
							p->fn, NULL, &b)
				   : err_set(ERR_INVALID, "Invalid argument");
			if (r >= 0) {
				a->null = r == 1;
				a->value.ptr = arena_memdup(
					p->a,
					b.data ? b.data : (const uint8_t *)"",
					b.len);
				a->value.len = b.len;
				a->type = e->fn.arg;
			}
			buf_free(&b);
			if (r < 0 || !a->value.ptr)
				return -1;
		}
		e->arg = a;
	}
	/* no column below: one value for the whole query (now() too) */
	if (!e->arg || e->arg->is_const) {
		struct buf b;
		buf_init(&b);
		rc = cql_fn_apply(
			&e->fn,
			e->arg && !e->arg->null ? e->arg->value.ptr : NULL,
			e->arg && !e->arg->null ? (int32_t)e->arg->value.len
						: -1,
			p->fn, &b);
		if (rc >= 0) {
			e->is_const = true;
			e->null = rc == 1;
			e->value.ptr = arena_memdup(
				p->a, b.data ? b.data : (const uint8_t *)"",
				b.len);
			e->value.len = b.len;
			rc = e->value.ptr ? 0 : -1;
		}
		buf_free(&b);
	}
	return rc;
}

/* A selector of native functions, a cast or a typed constant. 1 when `s`
 * is none of them. */
static int plan_function(struct cql_select_plan *p,
			 const struct cql_selector *s)
{
	if (s->kind == CQL_SEL_TERM && s->term->kind != CQL_TERM_HINT &&
	    s->term->kind != CQL_TERM_FUNCTION) {
		char text[160];
		cql_fn_term_text(s->term, text, sizeof(text));
		return err_set(ERR_INVALID,
			       "Cannot infer type for term %s in selection "
			       "clause (try using a cast to force a type)",
			       text);
	}
	if (s->kind == CQL_SEL_FUNCTION && strcmp(s->name, "floor") != 0) {
		struct cql_fn probe;
		struct cql_fn_arg none[4] = {{0}};
		int rc = cql_fn_resolve(s->name, none, 0, &probe);
		err_clear();
		if (rc == 1)
			return 1;
	}
	struct sel_expr *e;
	char name[256];
	if (plan_expr(p, s, &e, name, sizeof(name)) != 0)
		return -1;
	if (add_out(p, OUT_FN, -1, s->alias ? s->alias : name,
		    storage_type_simple(e->type)) != 0)
		return -1;
	p->outs[p->nouts - 1].expr = e;
	return 0;
}

int cql_select_plan_selector(struct cql_select_plan *p,
			     const struct cql_selector *s)
{
	const struct storage_table_meta *m = p->m;
	const struct storage_type *bigint =
		storage_type_simple(STORAGE_TYPE_BIGINT);
	const struct storage_type *integer =
		storage_type_simple(STORAGE_TYPE_INT);
	if (s->kind == CQL_SEL_COUNT_STAR ||
	    (s->kind == CQL_SEL_FUNCTION && strcmp(s->name, "count") == 0 &&
	     s->arg_count == 1 && s->args[0].kind == CQL_SEL_TERM)) {
		p->aggregate = true;
		return add_out(p, OUT_COUNT, -1, s->alias ? s->alias : "count",
			       bigint);
	}
	if (s->kind == CQL_SEL_COLUMN) {
		int c = cql_table_column(p->t, s->name);
		if (c < 0)
			return err_set(ERR_INVALID,
				       "Undefined column name %s in "
				       "selection clause",
				       s->name);
		return add_out(p, OUT_COLUMN, c, s->alias ? s->alias : s->name,
			       m->columns[c].type);
	}
	if (s->kind == CQL_SEL_ELEMENT)
		return plan_element(p, s);
	if (s->kind == CQL_SEL_FIELD)
		return plan_field(p, s);
	if (s->kind == CQL_SEL_TERM || s->kind == CQL_SEL_CAST)
		return plan_function(p, s);
	int json = cql_select_plan_to_json(p, s);
	if (json <= 0)
		return json;
	if (strcmp(s->name, "token") == 0) {
		bool ok = s->arg_count == m->pk_count;
		for (size_t i = 0; ok && i < m->pk_count; i++)
			ok = s->args[i].kind == CQL_SEL_COLUMN &&
			     strcmp(s->args[i].name,
				    m->columns[m->pk[i]].name) == 0;
		if (!ok)
			return err_set(ERR_INVALID,
				       "The token function arguments "
				       "must be the partition key "
				       "columns, in order");
		char *name = arena_alloc(p->a, 256);
		if (!name)
			return -1;
		int n = snprintf(name, 256, "system.token(");
		for (size_t i = 0; i < m->pk_count && n < 240; i++)
			n += snprintf(name + n, 256 - (size_t)n, "%s%s",
				      i ? ", " : "", m->columns[m->pk[i]].name);
		snprintf(name + n, 256 - (size_t)n, ")");
		return add_out(p, OUT_TOKEN, -1, s->alias ? s->alias : name,
			       bigint);
	}
	static const struct {
		const char *name;
		enum agg_fn fn;
	} aggs[] = {{"count", AGG_COUNT},
		    {"min", AGG_MIN},
		    {"max", AGG_MAX},
		    {"sum", AGG_SUM},
		    {"avg", AGG_AVG}};
	for (size_t i = 0; i < sizeof(aggs) / sizeof(aggs[0]); i++)
		if (strcmp(s->name, aggs[i].name) == 0)
			return plan_aggregate(p, s, aggs[i].fn);
	int conv = plan_function(p, s);
	if (conv <= 0)
		return conv;
	bool wt = strcmp(s->name, "writetime") == 0,
	     ttl = strcmp(s->name, "ttl") == 0,
	     maxwt = strcmp(s->name, "maxwritetime") == 0;
	if (!wt && !ttl && !maxwt)
		return err_set(ERR_INVALID, "Unknown function '%s'", s->name);
	/* writetime(u.f) (Cassandra 5.0's WritetimeOrTTL over a field
	 * selection): the field's cell in a non-frozen user type, the
	 * column's cell in a frozen one; one value either way */
	char field_name[256] = "";
	uint16_t fields[OUT_FIELD_DEPTH];
	size_t depth = 0;
	const struct storage_type *ftype;
	int c;
	if (s->arg_count == 1 && s->args[0].kind == CQL_SEL_FIELD) {
		if (field_chain(p, &s->args[0], &c, fields, &depth, &ftype,
				field_name, sizeof(field_name)) != 0)
			return -1;
	} else if ((c = function_column(p, s)) < 0) {
		return -1;
	}
	const struct storage_column *col = &m->columns[c];
	const char *fname = wt ? "writeTime" : maxwt ? "maxwritetime" : "ttl";
	if (col->kind == STORAGE_COLUMN_PARTITION_KEY ||
	    col->kind == STORAGE_COLUMN_CLUSTERING)
		return err_set(ERR_INVALID,
			       "Cannot use selection function %s on "
			       "PRIMARY KEY part %s",
			       fname, col->name);
	size_t nlen =
		strlen(s->name) + strlen(field_name) + strlen(col->name) + 3;
	char *name = arena_alloc(p->a, nlen);
	if (!name)
		return -1;
	snprintf(name, nlen, "%s(%s)", s->name, depth ? field_name : col->name);
	const char *out = s->alias ? s->alias : name;
	/* Cassandra 5.0: a non-frozen collection's cells, one element each,
	 * a non-frozen user type's fields, one element each (select_times.c);
	 * maxwritetime() is their latest */
	if (storage_type_is_multicell(col->type) && depth == 0) {
		if (maxwt)
			return add_out(p, OUT_MAXWRITETIME, c, out, bigint);
		return add_out(p, wt ? OUT_WRITETIMES : OUT_TTLS, c, out,
			       cql_select_times_type(!wt));
	}
	if (add_out(p, wt || maxwt ? OUT_WRITETIME : OUT_TTL, c, out,
		    wt || maxwt ? bigint : integer) != 0)
		return -1;
	if (depth && storage_type_is_multicell(col->type)) {
		struct out_col *o = &p->outs[p->nouts - 1];
		o->fields[0] = fields[0];
		o->field_depth = 1;
	}
	return 0;
}
