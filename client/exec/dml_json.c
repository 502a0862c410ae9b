/*
 * INSERT JSON (Cassandra's Json.parseJson and its DEFAULT NULL / UNSET):
 * the values map becomes the INSERT of every column of the table, each
 * given as a bound value, so the rest of dml.c treats it as any INSERT.
 * Keys name columns as CQL does (quoted keys keep their case); a column
 * the map leaves out is null, or unset with DEFAULT UNSET; a key that is
 * no column is refused. Values decode with the column type's JSON rules
 * (client/cql/cql_json.h), then are validated and, for frozen sets and
 * maps, put in canonical order, as bound values are.
 */
#include "client/exec/dml.h"

#include "client/cql/cql_json.h"
#include "common/err.h"

#include <stdio.h>
#include <string.h>

static int decode_column(struct arena *a, const struct storage_column *col,
			 const struct cql_json *j, struct cql_value *out)
{
	struct buf v = {0}, norm = {0};
	const struct cql_json_type *t = cql_json_type_of(a, col->type);
	if (!t)
		return -1;
	int rc = cql_json_decode(t, j, a, &v);
	if (rc < 0) {
		if (err_code() == ERR_NOMEM)
			return -1;
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		return err_set(ERR_INVALID,
			       "Error decoding JSON value for %s: %s",
			       col->name, msg);
	}
	if (rc == 1) {
		*out = (struct cql_value){CQL_VALUE_NULL, NULL};
		return 0;
	}
	rc = storage_value_validate(col->type, v.data, v.len);
	if (rc == 0)
		rc = storage_value_normalize(col->type, v.data, v.len, &norm);
	if (rc == 0) {
		out->ptr = arena_memdup(
			a, norm.data ? norm.data : (const uint8_t *)"",
			norm.len);
		out->len = (int32_t)norm.len;
		rc = out->ptr ? 0 : err_set(ERR_NOMEM, "out of memory");
	}
	buf_free(&v);
	buf_free(&norm);
	return rc;
}

int cql_dml_json_insert(struct arena *a, const struct cql_insert *in,
			const struct cql_table *t,
			const struct cql_value *binds, size_t nbinds,
			struct cql_insert *out, const struct cql_value **obinds,
			size_t *onbinds)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	const char *text;
	size_t len;
	if (in->json->kind == CQL_TERM_BIND) {
		if ((size_t)in->json->bind_index >= nbinds)
			return err_set(ERR_INVALID,
				       "No value given for bind marker %d",
				       in->json->bind_index);
		const struct cql_value *v = &binds[in->json->bind_index];
		if (v->len < 0)
			return err_set(ERR_INVALID,
				       "Got null for INSERT JSON values");
		text = (const char *)v->ptr;
		len = (size_t)v->len;
	} else {
		text = in->json->text;
		len = in->json->len;
	}
	size_t n = m->column_count;
	const char **names = arena_alloc(a, (n + 1) * sizeof(*names));
	const struct cql_json **vals = arena_alloc(a, (n + 1) * sizeof(*vals));
	int *cols = arena_alloc(a, (n + 1) * sizeof(*cols));
	struct cql_value *nb = arena_alloc(a, (nbinds + n + 1) * sizeof(*nb));
	struct cql_term *terms = arena_alloc(a, (n + 1) * sizeof(*terms));
	struct cql_term **tv = arena_alloc(a, (n + 1) * sizeof(*tv));
	if (!names || !vals || !cols || !nb || !terms || !tv)
		return err_set(ERR_NOMEM, "out of memory");
	size_t k = 0;
	for (size_t c = 0; c < n; c++) {
		if (cql_table_column_dropped(t, c))
			continue;
		cols[k] = (int)c;
		names[k++] = m->columns[c].name;
	}
	if (cql_json_insert_values(text, len, names, k, a, vals) != 0)
		return -1;
	if (nbinds)
		memcpy(nb, binds, nbinds * sizeof(*nb));
	for (size_t i = 0; i < k; i++) {
		struct cql_value *v = &nb[nbinds + i];
		if (!vals[i])
			*v = (struct cql_value){in->default_unset
							? CQL_VALUE_UNSET
							: CQL_VALUE_NULL,
						NULL};
		else if (decode_column(a, &m->columns[cols[i]], vals[i], v) !=
			 0)
			return -1;
		terms[i] = (struct cql_term){.kind = CQL_TERM_BIND,
					     .bind_index = (int)(nbinds + i)};
		tv[i] = &terms[i];
	}
	*out = *in;
	out->json = NULL;
	out->columns = names;
	out->values = tv;
	out->column_count = k;
	*obinds = nb;
	*onbinds = nbinds + k;
	return 0;
}
