/*
 * SELECT JSON and toJson() (Cassandra's Selection.rowToJson and
 * ToJsonFct), over the rows select_rows.c writes: a toJson(x) column is x
 * planned as any selector and sent as its JSON text; SELECT JSON sends each
 * row as one text column, [json], holding an object of the row's columns
 * keyed by their names (aliases included; names that are not all lower
 * case in quotes: "\"Name\""). Both rewrite the encoded rows, so they
 * work the same for plain rows, aggregates, GROUP BY and paging.
 */
#include "client/exec/select_internal.h"

#include "client/cql/cql_json.h"
#include "common/err.h"

#include <stdio.h>
#include <string.h>

static const struct storage_type *text_type(void)
{
	return storage_type_simple(STORAGE_TYPE_TEXT);
}

int cql_select_plan_to_json(struct cql_select_plan *p,
			    const struct cql_selector *s)
{
	if (s->kind != CQL_SEL_FUNCTION)
		return 1;
	if (strcmp(s->name, "fromjson") == 0 ||
	    strcmp(s->name, "from_json") == 0)
		return err_set(ERR_INVALID,
			       "fromJson() cannot be used in the selection "
			       "clause of a SELECT statement");
	if (strcmp(s->name, "tojson") != 0 && strcmp(s->name, "to_json") != 0)
		return 1;
	if (s->arg_count != 1)
		return err_set(ERR_INVALID,
			       "toJson() only accepts one argument (got %zu)",
			       s->arg_count);
	struct cql_selector inner = s->args[0];
	inner.alias = NULL;
	size_t at = p->nouts;
	if (cql_select_plan_selector(p, &inner) != 0)
		return -1;
	if (p->nouts != at + 1)
		return err_set(ERR_UNSUPPORTED,
			       "This argument of toJson() is not supported by "
			       "Cassini yet");
	struct out_col *o = &p->outs[at];
	if (o->to_json == UINT8_MAX)
		return err_set(ERR_INVALID, "toJson() nested too deeply");
	if (o->to_json++ == 0)
		o->json_type = o->type;
	o->type = text_type();
	if (s->alias) {
		o->name = arena_strdup(p->a, s->alias);
	} else {
		size_t n = strlen(o->name) + 16;
		char *name = arena_alloc(p->a, n);
		if (name)
			snprintf(name, n, "system.%s(%s)", s->name, o->name);
		o->name = name;
	}
	return o->name ? 0 : err_set(ERR_NOMEM, "out of memory");
}

struct cql_column_spec *cql_select_specs(const struct cql_select_plan *p,
					 size_t *n)
{
	size_t count = p->json ? 1 : p->nouts;
	struct cql_column_spec *sp =
		arena_alloc(p->a, (count + 1) * sizeof(*sp));
	if (!sp)
		return NULL;
	for (size_t i = 0; i < count; i++) {
		const struct out_col *o = &p->outs[i];
		sp[i] = (struct cql_column_spec){
			p->m->keyspace, p->m->name,
			p->json ? "[json]" : o->name,
			cql_type_option_of(p->a,
					   p->json ? text_type() : o->type)};
		if (!sp[i].type)
			return NULL;
	}
	*n = count;
	return sp;
}

/* One column's JSON text; a null is "null". */
static int json_of(const struct cql_json_type *t, const uint8_t *v, int32_t len,
		   struct buf *out)
{
	if (len < 0)
		return buf_append(out, "null", 4);
	return cql_json_format(t, v, (size_t)len, out);
}

/* A toJson() column: the JSON text of its value, once per toJson. */
static int to_json_value(const struct cql_select_plan *p,
			 const struct out_col *o, const uint8_t **v,
			 int32_t *len, struct buf *scratch)
{
	const struct cql_json_type *text = cql_json_type_of(p->a, text_type());
	const struct cql_json_type *first =
		cql_json_type_of(p->a, o->json_type);
	if (!text || !first)
		return -1;
	for (uint8_t k = 0; k < o->to_json; k++) {
		struct buf b = {0};
		if (json_of(k == 0 ? first : text, *v, *len, &b) != 0) {
			buf_free(&b);
			return -1;
		}
		buf_free(scratch);
		*scratch = b;
		*v = b.data ? b.data : (const uint8_t *)"";
		*len = (int32_t)b.len;
	}
	return 0;
}

int cql_select_json_rows(const struct cql_select_plan *p, struct buf *rows,
			 size_t nrows)
{
	bool any = p->json;
	for (size_t i = 0; i < p->nouts; i++)
		any |= p->outs[i].to_json > 0;
	if (!any)
		return 0;
	const struct cql_json_type **types =
		arena_alloc(p->a, (p->nouts + 1) * sizeof(*types));
	if (!types)
		return err_set(ERR_NOMEM, "out of memory");
	for (size_t i = 0; i < p->nouts; i++)
		if (!(types[i] = cql_json_type_of(p->a, p->outs[i].type)))
			return -1;
	struct buf out = {0}, scratch = {0};
	const uint8_t *pos = rows->data, *end = rows->data + rows->len;
	int rc = 0;
	for (size_t r = 0; rc == 0 && r < nrows; r++) {
		size_t mark = out.len;
		if (p->json)
			rc = buf_put_be32(&out, 0) || buf_put_u8(&out, '{');
		for (size_t i = 0; rc == 0 && i < p->nouts; i++) {
			const struct out_col *o = &p->outs[i];
			if (end - pos < 4) {
				rc = err_set(ERR_INVALID, "malformed rows");
				break;
			}
			int32_t len = (int32_t)be32_load(pos);
			pos += 4;
			const uint8_t *v = pos;
			if (len > 0 && end - pos < len) {
				rc = err_set(ERR_INVALID, "malformed rows");
				break;
			}
			pos += len > 0 ? len : 0;
			if (o->to_json)
				rc = to_json_value(p, o, &v, &len, &scratch);
			if (rc == 0 && !p->json) {
				rc = cql_write_bytes(&out, v, len);
				continue;
			}
			if (rc == 0 && i > 0)
				rc = buf_append(&out, ", ", 2);
			if (rc == 0)
				rc = cql_json_key(&out, o->name,
						  strlen(o->name));
			if (rc == 0)
				rc = buf_append(&out, ": ", 2);
			if (rc == 0)
				rc = json_of(types[i], v, len, &out);
		}
		if (rc == 0 && p->json) {
			rc = buf_put_u8(&out, '}');
			if (rc == 0)
				be32_store(out.data + mark,
					   (uint32_t)(out.len - mark - 4));
		}
	}
	buf_free(&scratch);
	if (rc != 0) {
		buf_free(&out);
		return -1;
	}
	buf_free(rows);
	*rows = out;
	return 0;
}
