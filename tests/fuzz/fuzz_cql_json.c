/* libFuzzer: any text parses as JSON or fails with Jackson's words; a
 * parsed value decodes as each of a few types or fails cleanly, and what
 * decodes formats back. The first byte picks the type. */
#include "client/cql/cql_json.h"
#include "common/arena.h"
#include "common/err.h"
#include "storage/types.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct cql_json_type elems[2] = {
		{.kind = STORAGE_TYPE_INT}, {.kind = STORAGE_TYPE_TEXT}};
	static const char *const names[2] = {"a", "B"};
	static const struct cql_json_type types[] = {
		{.kind = STORAGE_TYPE_INT},
		{.kind = STORAGE_TYPE_DECIMAL},
		{.kind = STORAGE_TYPE_VARINT},
		{.kind = STORAGE_TYPE_DOUBLE},
		{.kind = STORAGE_TYPE_TIMESTAMP},
		{.kind = STORAGE_TYPE_BLOB},
		{.kind = STORAGE_TYPE_INET},
		{.kind = CQL_JSON_TYPE_DURATION},
		{.kind = CQL_JSON_TYPE_LIST, .count = 1, .sub = elems},
		{.kind = CQL_JSON_TYPE_SET, .count = 1, .sub = elems},
		{.kind = CQL_JSON_TYPE_MAP, .count = 2, .sub = elems},
		{.kind = CQL_JSON_TYPE_TUPLE, .count = 2, .sub = elems},
		{.kind = CQL_JSON_TYPE_UDT,
		 .count = 2,
		 .sub = elems,
		 .names = names,
		 .name = "t"},
		{.kind = CQL_JSON_TYPE_VECTOR,
		 .count = 1,
		 .sub = elems,
		 .dimension = 2},
	};
	if (size == 0)
		return 0;
	const struct cql_json_type *t =
		&types[data[0] % (sizeof(types) / sizeof(types[0]))];
	struct arena a;
	arena_create(&a, 0);
	const struct cql_json *j;
	if (cql_json_parse((const char *)data + 1, size - 1, &a, &j) != 0) {
		if (err_code() != ERR_INVALID && err_code() != ERR_NOMEM)
			abort();
	} else {
		struct buf v = {0}, out = {0};
		int rc = cql_json_decode(t, j, &a, &v);
		if (rc < 0 && err_code() != ERR_INVALID &&
		    err_code() != ERR_NOMEM)
			abort();
		if (rc == 0 && cql_json_format(t, v.data, v.len, &out) != 0)
			abort(); /* what decodes must format */
		buf_free(&v);
		buf_free(&out);
		/* the same bytes as a serialized value */
		(void)cql_json_format(t, data + 1, size - 1, &out);
		buf_free(&out);
		const struct cql_json *vals[2];
		(void)cql_json_insert_values((const char *)data + 1, size - 1,
					     names, 2, &a, vals);
	}
	arena_destroy(&a);
	return 0;
}
