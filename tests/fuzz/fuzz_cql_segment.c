/* libFuzzer: bytes read as v5 segments (plain and LZ4) and the envelopes
 * they carry, as the server reads them; and any response frame through
 * the METADATA_CHANGED marker, which parses the Rows it is given. Nothing
 * may crash, leak or read out of bounds. */
#include "client/proto/proto.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void segments(const uint8_t *data, size_t size, bool lz4)
{
	struct buf env;
	buf_init(&env);
	size_t pos = 0;
	while (pos < size) {
		size_t used = 0;
		bool whole;
		if (cql_segment_decode(data + pos, size - pos, lz4, &env, &used,
				       &whole) != CQL_SEGMENT_OK)
			break;
		pos += used;
	}
	/* the envelopes: v5 requests' keyspace and metadata id */
	for (size_t at = 0; env.len - at >= CQL_HEADER_LEN;) {
		struct cql_header h;
		if (cql_header_decode(env.data + at, 1 << 20, &h) !=
			    CQL_HEADER_OK ||
		    env.len - at - CQL_HEADER_LEN < h.length)
			break;
		const uint8_t *body = env.data + at + CQL_HEADER_LEN;
		struct slice ks;
		(void)cql_request_keyspace(body, h.length, h.version, h.opcode,
					   &ks);
		(void)cql_execute_result_metadata_id(body, h.length, h.version);
		at += CQL_HEADER_LEN + h.length;
	}
	buf_free(&env);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	segments(data, size, false);
	segments(data, size, true);
	if (size >= CQL_HEADER_LEN) {
		struct buf f;
		buf_init(&f);
		if (buf_append(&f, data, size) == 0) {
			be32_store(f.data + 5,
				   (uint32_t)(size - CQL_HEADER_LEN));
			(void)cql_frame_mark_metadata_changed(
				&f, slice_make(data, size > 16 ? 16 : size));
		}
		buf_free(&f);
	}
	return 0;
}
