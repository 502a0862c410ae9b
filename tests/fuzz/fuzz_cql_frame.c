/* libFuzzer: a client frame (header + body, possibly LZ4-compressed, with a
 * custom payload) goes through every request decoder without crashing,
 * leaking or reading out of bounds. */
#include "client/proto/proto.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void decode_body(const struct cql_header *h, const uint8_t *p, size_t n,
			struct arena *a)
{
	struct cursor c = cursor_make(p, n);
	struct cql_pair *pairs;
	struct slice *list, s;
	uint16_t count;
	struct cql_query q;
	struct cql_execute e;
	struct cql_batch b;
	struct cql_value v;

	if ((h->flags & CQL_FLAG_CUSTOM_PAYLOAD) &&
	    cql_skip_custom_payload(&c) != 0)
		return;
	switch (h->opcode) {
	case CQL_OP_STARTUP:
		(void)cql_decode_startup(&c, a, &pairs, &count);
		break;
	case CQL_OP_REGISTER:
		(void)cql_decode_register(&c, a, &list, &count);
		break;
	case CQL_OP_QUERY:
		(void)cql_decode_query(&c, h->version, a, &q);
		break;
	case CQL_OP_PREPARE:
		(void)cql_decode_prepare(&c, &s);
		break;
	case CQL_OP_EXECUTE:
		(void)cql_decode_execute(&c, h->version, a, &e);
		break;
	case CQL_OP_BATCH:
		(void)cql_decode_batch(&c, h->version, a, &b);
		break;
	case CQL_OP_AUTH_RESPONSE:
		(void)cql_decode_auth_response(&c, &v);
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cql_header h;
	if (size < CQL_HEADER_LEN)
		return 0;
	if (cql_header_decode(data, 1 << 20, &h) != CQL_HEADER_OK)
		return 0;
	const uint8_t *body = data + CQL_HEADER_LEN;
	size_t n = size - CQL_HEADER_LEN;
	if (n > h.length)
		n = h.length;
	struct arena a;
	arena_create(&a, 0);
	if (h.flags & CQL_FLAG_COMPRESSION) {
		struct buf raw;
		buf_init(&raw);
		if (cql_lz4_decompress(body, n, 1 << 20, &raw) == 0)
			decode_body(&h, raw.data, raw.len, &a);
		buf_free(&raw);
	} else {
		decode_body(&h, body, n, &a);
	}
	arena_destroy(&a);
	return 0;
}
