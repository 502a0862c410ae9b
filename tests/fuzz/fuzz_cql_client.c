/* libFuzzer: a server response (9-byte header, then body) goes through the C
 * client's header check and response decoder without crashing, leaking or
 * reading out of bounds; every decoded row value lies inside the body. */
#include "client/driver/cql_client.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cql_header h;
	if (size < CQL_HEADER_LEN ||
	    cql_client_header_decode(data, 1 << 20, &h) != 0)
		return 0;
	const uint8_t *body = data + CQL_HEADER_LEN;
	size_t len = size - CQL_HEADER_LEN;
	if (h.length < len)
		len = h.length;
	struct arena a;
	struct cql_client_response r;
	arena_create(&a, 0);
	if (cql_client_response_decode(h.opcode, h.flags, body, len, &a, &r) ==
		    0 &&
	    r.opcode == CQL_OP_RESULT && r.kind == CQL_RESULT_ROWS) {
		size_t n =
			(size_t)r.rows.row_count * (size_t)r.rows.column_count;
		for (size_t i = 0; i < n; i++) {
			const struct cql_value *v = &r.rows.values[i];
			if (v->len > 0 &&
			    (v->ptr < body || v->ptr + v->len > body + len))
				abort();
		}
	}
	arena_destroy(&a);
	return 0;
}
