/*
 * Exposes the native-protocol codec to the driver-based tests
 * (test_proto_driver.py):
 *
 *   cql_proto_cli encode          one line per response frame: "name hex"
 *   cql_proto_cli decode HEX      decodes a request frame, prints its fields
 *
 * The Python side encodes requests with the DataStax driver and decodes our
 * responses with it, so both directions are checked against a real client.
 */
#include "client/proto/proto.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_hex(const char *name, const struct buf *b)
{
	printf("%s ", name);
	for (size_t i = 0; i < b->len; i++)
		printf("%02x", b->data[i]);
	printf("\n");
}

#define EMIT(name, call)                                                       \
	do {                                                                   \
		buf_clear(&b);                                                 \
		if ((call) != 0) {                                             \
			fprintf(stderr, "%s: %s\n", name, err_msg());          \
			return 1;                                              \
		}                                                              \
		print_hex(name, &b);                                           \
	} while (0)

static int encode_all(void)
{
	static const struct cql_type_option t_int = {.id = CQL_TYPE_INT};
	static const struct cql_type_option t_text = {.id = CQL_TYPE_VARCHAR};
	static const struct cql_type_option t_set = {.id = CQL_TYPE_SET,
						     .sub = {&t_text, NULL}};
	static const struct cql_type_option t_map = {.id = CQL_TYPE_MAP,
						     .sub = {&t_text, &t_int}};
	static const struct cql_column_spec cols[] = {
		{"ks", "kv", "k", &t_int},
		{"ks", "kv", "tags", &t_set},
		{"ks", "kv", "m", &t_map},
	};
	static const struct cql_column_spec mixed[] = {
		{"ks", "kv", "k", &t_int},
		{"system", "local", "key", &t_text},
	};
	static const uint16_t pk[] = {0};
	static const uint8_t id[] = {0x0a, 0x0b};
	struct inet_addr node;
	struct buf b;
	buf_init(&b);
	inet_addr_parse("127.0.0.2", 9042, &node);

	EMIT("ready", cql_encode_ready(&b, 4, 1));
	EMIT("supported", cql_encode_supported(&b, 4, 2, "3.4.5", true));
	EMIT("supported_nolz4", cql_encode_supported(&b, 4, 2, "3.4.5", false));
	EMIT("version_error", cql_encode_version_error(&b, 7, 6));
	EMIT("server_error",
	     cql_encode_error(&b, 4, 1, CQL_ERR_SERVER, "boom"));
	EMIT("syntax_error",
	     cql_encode_error(&b, 4, 1, CQL_ERR_SYNTAX,
			      "line 1:0 no viable alternative"));
	EMIT("invalid", cql_encode_error(&b, 4, 1, CQL_ERR_INVALID,
					 "unconfigured table nosuch"));
	EMIT("unavailable", cql_encode_unavailable(&b, 4, 1, "Cannot achieve",
						   CQL_CL_QUORUM, 2, 1));
	EMIT("write_timeout",
	     cql_encode_write_timeout(&b, 4, 1, "timed out", CQL_CL_QUORUM, 1,
				      2, "BATCH_LOG"));
	EMIT("read_timeout", cql_encode_read_timeout(&b, 4, 1, "timed out",
						     CQL_CL_ALL, 1, 3, true));
	EMIT("read_failure",
	     cql_encode_read_failure(&b, 4, 1, "failed", CQL_CL_ONE, 0, 1, 1,
				     false));
	EMIT("write_failure",
	     cql_encode_write_failure(&b, 4, 1, "failed", CQL_CL_ONE, 0, 1, 1,
				      "SIMPLE"));
	EMIT("already_exists_table",
	     cql_encode_already_exists(&b, 4, 1, "exists", "ks", "kv"));
	EMIT("already_exists_keyspace",
	     cql_encode_already_exists(&b, 4, 1, "exists", "ks", ""));
	EMIT("unprepared",
	     cql_encode_unprepared(&b, 4, 1, "not found", id, sizeof(id)));
	EMIT("result_void", cql_encode_result_void(&b, 4, 3));
	EMIT("result_set_keyspace",
	     cql_encode_result_set_keyspace(&b, 4, 3, "ks"));
	EMIT("result_schema_table",
	     cql_encode_result_schema_change(&b, 4, 3, "CREATED", "TABLE", "ks",
					     "kv"));
	EMIT("result_schema_keyspace",
	     cql_encode_result_schema_change(&b, 4, 3, "DROPPED", "KEYSPACE",
					     "ks", NULL));
	EMIT("event_topology",
	     cql_encode_event_topology(&b, 4, "NEW_NODE", &node));
	EMIT("event_status", cql_encode_event_status(&b, 4, "DOWN", &node));
	EMIT("event_schema",
	     cql_encode_event_schema(&b, 4, "UPDATED", "TABLE", "ks", "kv"));

	/* RESULT Rows: metadata for 3 columns, one row, a paging state. */
	buf_clear(&b);
	long start = cql_frame_begin(&b, 4, 0, 9, CQL_OP_RESULT);
	struct slice paging = slice_from_cstr("PAGE");
	if (cql_write_int(&b, CQL_RESULT_ROWS) ||
	    cql_write_rows_metadata(&b, cols, 3, &paging, false) ||
	    cql_write_int(&b, 1) || cql_write_bytes(&b, "\0\0\0\x2a", 4) ||
	    /* set<text> {'a'}: n=1, len=1, 'a' */
	    cql_write_bytes(&b,
			    "\0\0\0\x01\0\0\0\x01"
			    "a",
			    9) ||
	    cql_write_bytes(&b, NULL, -1))
		return 1;
	cql_frame_end(&b, start);
	print_hex("result_rows", &b);

	/* Columns from two tables: no global spec. */
	buf_clear(&b);
	start = cql_frame_begin(&b, 4, 0, 9, CQL_OP_RESULT);
	if (cql_write_int(&b, CQL_RESULT_ROWS) ||
	    cql_write_rows_metadata(&b, mixed, 2, NULL, false) ||
	    cql_write_int(&b, 0))
		return 1;
	cql_frame_end(&b, start);
	print_hex("result_rows_mixed", &b);

	/* RESULT Prepared for an INSERT (no result columns) and a SELECT. */
	buf_clear(&b);
	start = cql_frame_begin(&b, 4, 0, 11, CQL_OP_RESULT);
	if (cql_write_int(&b, CQL_RESULT_PREPARED) ||
	    cql_write_prepared(&b, 4, id, sizeof(id), cols, 3, pk, 1, NULL, 0))
		return 1;
	cql_frame_end(&b, start);
	print_hex("result_prepared_insert", &b);
	buf_clear(&b);
	start = cql_frame_begin(&b, 4, 0, 11, CQL_OP_RESULT);
	if (cql_write_int(&b, CQL_RESULT_PREPARED) ||
	    cql_write_prepared(&b, 4, id, sizeof(id), cols, 1, pk, 1, cols, 3))
		return 1;
	cql_frame_end(&b, start);
	print_hex("result_prepared_select", &b);

	/* v5: PREPARED with its result_metadata_id; the same Rows marked
	 * METADATA_CHANGED for a client holding a stale id; a reason map. */
	buf_clear(&b);
	start = cql_frame_begin(&b, 5, 0, 11, CQL_OP_RESULT);
	if (cql_write_int(&b, CQL_RESULT_PREPARED) ||
	    cql_write_prepared(&b, 5, id, sizeof(id), cols, 1, pk, 1, cols, 3))
		return 1;
	cql_frame_end(&b, start);
	print_hex("result_prepared_select_v5", &b);
	buf_clear(&b);
	start = cql_frame_begin(&b, 5, 0, 9, CQL_OP_RESULT);
	if (cql_write_int(&b, CQL_RESULT_ROWS) ||
	    cql_write_rows_metadata(&b, cols, 3, &paging, false) ||
	    cql_write_int(&b, 1) || cql_write_bytes(&b, "\0\0\0\x2a", 4) ||
	    cql_write_bytes(&b, NULL, -1) || cql_write_bytes(&b, NULL, -1))
		return 1;
	cql_frame_end(&b, start);
	if (cql_frame_mark_metadata_changed(&b, slice_from_cstr("stale")))
		return 1;
	print_hex("result_rows_changed_v5", &b);
	struct cql_failure_reason why[2] = {
		{.endpoint = node,
		 .code = CQL_FAILURE_READ_TOO_MANY_TOMBSTONES},
		{.endpoint = {.family = INET_V4, .ip = {127, 0, 0, 3}},
		 .code = CQL_FAILURE_UNKNOWN},
	};
	EMIT("read_failure_v5",
	     cql_encode_read_failure_reasons(&b, 5, 1, "failed", CQL_CL_ONE, 0,
					     1, why, 2, true));
	EMIT("write_failure_v5",
	     cql_encode_write_failure_reasons(&b, 5, 1, "failed", CQL_CL_ONE, 0,
					      1, why, 1, "SIMPLE"));

	/* A compressed READY-sized body round trip is covered in C; here a
	 * compressed RESULT Void so the driver's lz4 path decodes it. */
	buf_clear(&b);
	struct buf body;
	buf_init(&body);
	cql_write_int(&body, CQL_RESULT_VOID);
	start = cql_frame_begin(&b, 4, CQL_FLAG_COMPRESSION, 4, CQL_OP_RESULT);
	if (cql_lz4_compress(body.data, body.len, &b) != 0)
		return 1;
	cql_frame_end(&b, start);
	print_hex("result_void_lz4", &b);
	buf_free(&body);
	buf_free(&b);
	return 0;
}

static void print_slice(const char *label, struct slice s)
{
	printf("%s=", label);
	for (size_t i = 0; i < s.len; i++)
		printf("%02x", s.ptr[i]);
}

static void print_values(const struct cql_value *v, uint16_t n,
			 const struct slice *names)
{
	for (uint16_t i = 0; i < n; i++) {
		printf("value %u", i);
		if (names)
			print_slice(" name", names[i]);
		if (v[i].len == CQL_VALUE_NULL)
			printf(" null\n");
		else if (v[i].len == CQL_VALUE_UNSET)
			printf(" unset\n");
		else {
			print_slice(" hex",
				    slice_make(v[i].ptr, (size_t)v[i].len));
			printf("\n");
		}
	}
}

static void print_params(const struct cql_query_params *p)
{
	printf("params consistency=%u flags=%u values=%u page_size=%d",
	       p->consistency, p->flags, p->value_count, p->page_size);
	if (p->has_paging_state)
		print_slice(" paging_state", p->paging_state);
	printf(" serial=%u", p->serial_consistency);
	if (p->has_timestamp)
		printf(" timestamp=%lld", (long long)p->timestamp);
	if (p->has_keyspace)
		printf(" keyspace=%.*s", (int)p->keyspace.len,
		       (const char *)p->keyspace.ptr);
	if (p->has_now_in_seconds)
		printf(" now=%d", p->now_in_seconds);
	printf("\n");
	print_values(p->values, p->value_count, p->value_names);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int decode(const char *hex)
{
	size_t n = strlen(hex) / 2;
	uint8_t *frame = malloc(n ? n : 1);
	for (size_t i = 0; i < n; i++)
		frame[i] = (uint8_t)(hexval(hex[2 * i]) << 4 |
				     hexval(hex[2 * i + 1]));
	struct cql_header h;
	if (n < CQL_HEADER_LEN)
		return 1;
	enum cql_header_status st = cql_header_decode(frame, 1 << 20, &h);
	printf("header status=%d version=%u flags=%u stream=%d opcode=%u "
	       "length=%u\n",
	       st, h.version, h.flags, h.stream, h.opcode, h.length);
	if (st != CQL_HEADER_OK || h.length != n - CQL_HEADER_LEN)
		return 1;
	struct arena a;
	arena_create(&a, 0);
	struct cursor c = cursor_make(frame + CQL_HEADER_LEN, h.length);
	int rc = 0;
	if (h.flags & CQL_FLAG_CUSTOM_PAYLOAD)
		rc = cql_skip_custom_payload(&c);
	switch (rc ? 0xff : h.opcode) {
	case CQL_OP_STARTUP: {
		struct cql_pair *opts;
		uint16_t count;
		rc = cql_decode_startup(&c, &a, &opts, &count);
		for (uint16_t i = 0; !rc && i < count; i++)
			printf("option %.*s=%.*s\n", (int)opts[i].key.len,
			       (const char *)opts[i].key.ptr,
			       (int)opts[i].value.len,
			       (const char *)opts[i].value.ptr);
		break;
	}
	case CQL_OP_REGISTER: {
		struct slice *ev;
		uint16_t count;
		rc = cql_decode_register(&c, &a, &ev, &count);
		for (uint16_t i = 0; !rc && i < count; i++)
			printf("event %.*s\n", (int)ev[i].len,
			       (const char *)ev[i].ptr);
		break;
	}
	case CQL_OP_OPTIONS:
		break;
	case CQL_OP_QUERY: {
		struct cql_query q;
		rc = cql_decode_query(&c, h.version, &a, &q);
		if (!rc) {
			printf("query %.*s\n", (int)q.query.len,
			       (const char *)q.query.ptr);
			print_params(&q.params);
		}
		break;
	}
	case CQL_OP_PREPARE: {
		struct slice q;
		rc = cql_decode_prepare(&c, &q);
		if (!rc)
			printf("prepare %.*s\n", (int)q.len,
			       (const char *)q.ptr);
		struct slice ks;
		int has = rc ? 0
			     : cql_request_keyspace(frame + CQL_HEADER_LEN,
						    h.length, h.version,
						    h.opcode, &ks);
		if (has == 1)
			printf("prepare keyspace=%.*s\n", (int)ks.len,
			       (const char *)ks.ptr);
		if (!rc && h.version >= 5) {
			int32_t flags = 0;
			rc = cql_read_int(&c, &flags);
			if (!rc && (flags & CQL_PREPARE_WITH_KEYSPACE))
				rc = cql_read_string(&c, &ks);
		}
		break;
	}
	case CQL_OP_EXECUTE: {
		struct cql_execute e;
		rc = cql_decode_execute(&c, h.version, &a, &e);
		if (!rc) {
			print_slice("execute id", e.id);
			if (h.version >= 5)
				print_slice(" result_metadata_id",
					    e.result_metadata_id);
			printf("\n");
			print_params(&e.params);
		}
		break;
	}
	case CQL_OP_BATCH: {
		struct cql_batch bt;
		rc = cql_decode_batch(&c, h.version, &a, &bt);
		if (rc)
			break;
		printf("batch type=%u count=%u consistency=%u flags=%u",
		       bt.type, bt.count, bt.consistency, bt.flags);
		if (bt.has_timestamp)
			printf(" timestamp=%lld", (long long)bt.timestamp);
		if (bt.has_keyspace)
			printf(" keyspace=%.*s", (int)bt.keyspace.len,
			       (const char *)bt.keyspace.ptr);
		printf("\n");
		for (uint16_t i = 0; i < bt.count; i++) {
			const struct cql_batch_statement *s = &bt.statements[i];
			if (s->prepared) {
				print_slice("statement id", s->query_or_id);
				printf("\n");
			} else {
				printf("statement query %.*s\n",
				       (int)s->query_or_id.len,
				       (const char *)s->query_or_id.ptr);
			}
			print_values(s->values, s->value_count, NULL);
		}
		break;
	}
	default:
		rc = err_set(ERR_PROTOCOL, "unexpected opcode");
	}
	if (rc)
		printf("error %s\n", err_msg());
	else
		printf("left %zu\n", cursor_left(&c));
	arena_destroy(&a);
	free(frame);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "encode") == 0)
		return encode_all();
	if (argc == 3 && strcmp(argv[1], "decode") == 0)
		return decode(argv[2]);
	fprintf(stderr, "usage: cql_proto_cli encode | decode HEX\n");
	return 2;
}
