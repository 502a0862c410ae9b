/*
 * Native protocol: response encoding. Every function appends one whole
 * frame (or one body element) to a buffer and either succeeds or leaves the
 * buffer as it was (ERR_NOMEM).
 */
#include "client/proto/proto.h"

#include "common/err.h"
#include "common/murmur3.h"

#include <stdio.h>
#include <string.h>

/* ---- primitives ---------------------------------------------------------- */

int cql_write_short(struct buf *b, uint16_t v)
{
	return buf_put_be16(b, v);
}

int cql_write_int(struct buf *b, int32_t v)
{
	return buf_put_be32(b, (uint32_t)v);
}

int cql_write_long(struct buf *b, int64_t v)
{
	return buf_put_be64(b, (uint64_t)v);
}

int cql_write_string(struct buf *b, const char *s, size_t len)
{
	if (len > UINT16_MAX)
		return err_set(ERR_INVALID, "[string] longer than 65535 bytes");
	if (buf_reserve(b, 2 + len) != 0)
		return -1;
	buf_put_be16(b, (uint16_t)len);
	return buf_append(b, s, len);
}

int cql_write_cstring(struct buf *b, const char *s)
{
	return cql_write_string(b, s, strlen(s));
}

int cql_write_long_string(struct buf *b, const char *s, size_t len)
{
	if (len > INT32_MAX)
		return err_set(ERR_INVALID, "[long string] too long");
	if (buf_reserve(b, 4 + len) != 0)
		return -1;
	buf_put_be32(b, (uint32_t)len);
	return buf_append(b, s, len);
}

int cql_write_bytes(struct buf *b, const void *p, int32_t len)
{
	if (len < 0)
		return buf_put_be32(b, (uint32_t)CQL_VALUE_NULL);
	if (buf_reserve(b, 4 + (size_t)len) != 0)
		return -1;
	buf_put_be32(b, (uint32_t)len);
	return buf_append(b, p, (size_t)len);
}

int cql_write_short_bytes(struct buf *b, const void *p, uint16_t len)
{
	if (buf_reserve(b, 2 + (size_t)len) != 0)
		return -1;
	buf_put_be16(b, len);
	return buf_append(b, p, len);
}

int cql_write_string_list(struct buf *b, const char *const *items, size_t n)
{
	size_t mark = b->len;
	if (n > UINT16_MAX)
		return err_set(ERR_INVALID, "[string list] too long");
	if (buf_put_be16(b, (uint16_t)n) != 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (cql_write_cstring(b, items[i]) != 0) {
			b->len = mark;
			return -1;
		}
	}
	return 0;
}

int cql_write_inet(struct buf *b, const struct inet_addr *a)
{
	size_t n = a->family == INET_V6 ? 16 : 4;
	if (buf_reserve(b, 1 + n + 4) != 0)
		return -1;
	buf_put_u8(b, (uint8_t)n);
	buf_append(b, a->ip, n);
	return buf_put_be32(b, a->port);
}

/* ---- frames -------------------------------------------------------------- */

long cql_frame_begin(struct buf *b, uint8_t version, uint8_t flags,
		     int16_t stream, uint8_t opcode)
{
	struct cql_header h = {
		.version = version,
		.response = true,
		.flags = flags,
		.stream = stream,
		.opcode = opcode,
		.length = 0,
	};
	long start = (long)b->len;
	uint8_t *p = buf_extend(b, CQL_HEADER_LEN);
	if (!p)
		return -1;
	cql_header_encode(p, &h);
	return start;
}

void cql_frame_end(struct buf *b, long start)
{
	size_t body = b->len - (size_t)start - CQL_HEADER_LEN;
	be32_store(b->data + start + 5, (uint32_t)body);
}

/* Runs `body` between begin and end; rolls back on failure. */
#define FRAME(b, version, stream, opcode, body)                                \
	do {                                                                   \
		long start_ = cql_frame_begin(b, version, 0, stream, opcode);  \
		if (start_ < 0)                                                \
			return -1;                                             \
		if ((body) != 0) {                                             \
			(b)->len = (size_t)start_;                             \
			return -1;                                             \
		}                                                              \
		cql_frame_end(b, start_);                                      \
		return 0;                                                      \
	} while (0)

int cql_encode_ready(struct buf *b, uint8_t version, int16_t stream)
{
	FRAME(b, version, stream, CQL_OP_READY, 0);
}

static int supported_body(struct buf *b, const char *cql_version, bool lz4)
{
	static const char *const versions[] = {"3/v3", "4/v4", "5/v5"};
	static const char *const lz4_only[] = {"lz4"};
	return cql_write_short(b, 3) || cql_write_cstring(b, "CQL_VERSION") ||
	       cql_write_string_list(b, &cql_version, 1) ||
	       cql_write_cstring(b, "COMPRESSION") ||
	       cql_write_string_list(b, lz4_only, lz4 ? 1 : 0) ||
	       cql_write_cstring(b, "PROTOCOL_VERSIONS") ||
	       cql_write_string_list(b, versions, 3);
}

int cql_encode_supported(struct buf *b, uint8_t version, int16_t stream,
			 const char *cql_version, bool lz4)
{
	FRAME(b, version, stream, CQL_OP_SUPPORTED,
	      supported_body(b, cql_version, lz4));
}

/* ---- errors -------------------------------------------------------------- */

static int error_head(struct buf *b, uint32_t code, const char *msg)
{
	/* A [string] holds 65535 bytes; cut long messages rather than fail. */
	size_t n = strlen(msg);
	if (n > UINT16_MAX)
		n = UINT16_MAX;
	return cql_write_int(b, (int32_t)code) || cql_write_string(b, msg, n);
}

/*
 * A function's failure (Cassandra's FunctionExecutionException, message
 * "execution of 'ks.fn[t1, t2]' failed: ..."): FunctionFailure, 0x1400,
 * its body the message, then keyspace, function and argument types. An
 * InvalidRequest whose message has that form is sent as one, so every
 * path that reports a function's error (local, coordinator, LWT) gives
 * drivers Cassandra's error class.
 */
static bool function_failure(const char *msg, const char **name, size_t *len)
{
	static const char pre[] = "execution of '";
	if (strncmp(msg, pre, sizeof(pre) - 1) != 0)
		return false;
	*name = msg + sizeof(pre) - 1;
	const char *end = strstr(*name, "]' failed: ");
	const char *dot = memchr(*name, '.', end ? (size_t)(end - *name) : 0);
	const char *open = end ? memchr(*name, '[', (size_t)(end - *name)) : 0;
	if (!end || !dot || !open || dot > open)
		return false;
	*len = (size_t)(end - *name) + 1;
	return true;
}

static int function_failure_body(struct buf *b, const char *msg,
				 const char *name, size_t len)
{
	const char *dot = memchr(name, '.', len);
	const char *open = memchr(name, '[', len);
	const char *args = open + 1, *end = name + len - 1;
	size_t n = 0;
	const char *items[64];
	char copy[ERR_MSG_MAX];
	size_t alen = (size_t)(end - args);
	if (alen >= sizeof(copy))
		alen = sizeof(copy) - 1;
	memcpy(copy, args, alen);
	copy[alen] = 0;
	for (char *p = copy; *p && n < 64;) {
		items[n++] = p;
		char *sep = strstr(p, ", ");
		if (!sep)
			break;
		*sep = 0;
		p = sep + 2;
	}
	return error_head(b, CQL_ERR_FUNCTION_FAILURE, msg) ||
	       cql_write_string(b, name, (size_t)(dot - name)) ||
	       cql_write_string(b, dot + 1, (size_t)(open - dot - 1)) ||
	       cql_write_string_list(b, items, n);
}

int cql_encode_error(struct buf *b, uint8_t version, int16_t stream,
		     uint32_t code, const char *msg)
{
	const char *fn;
	size_t fn_len;
	if ((code == CQL_ERR_INVALID || code == CQL_ERR_FUNCTION_FAILURE) &&
	    function_failure(msg, &fn, &fn_len)) {
		FRAME(b, version, stream, CQL_OP_ERROR,
		      function_failure_body(b, msg, fn, fn_len));
	}
	FRAME(b, version, stream, CQL_OP_ERROR, error_head(b, code, msg));
}

int cql_encode_version_error(struct buf *b, int16_t stream,
			     unsigned asked_version)
{
	char msg[128];
	snprintf(msg, sizeof(msg),
		 "Invalid or unsupported protocol version (%u); supported "
		 "versions are (3/v3, 4/v4, 5/v5)",
		 asked_version);
	/* a v4 frame, never segmented: what every driver can read */
	return cql_encode_error(b, 4, stream, CQL_ERR_PROTOCOL, msg);
}

int cql_encode_unavailable(struct buf *b, uint8_t version, int16_t stream,
			   const char *msg, uint16_t cl, int32_t required,
			   int32_t alive)
{
	FRAME(b, version, stream, CQL_OP_ERROR,
	      error_head(b, CQL_ERR_UNAVAILABLE, msg) ||
		      cql_write_short(b, cl) || cql_write_int(b, required) ||
		      cql_write_int(b, alive));
}

int cql_encode_write_timeout(struct buf *b, uint8_t version, int16_t stream,
			     const char *msg, uint16_t cl, int32_t received,
			     int32_t block_for, const char *write_type)
{
	FRAME(b, version, stream, CQL_OP_ERROR,
	      error_head(b, CQL_ERR_WRITE_TIMEOUT, msg) ||
		      cql_write_short(b, cl) || cql_write_int(b, received) ||
		      cql_write_int(b, block_for) ||
		      cql_write_cstring(b, write_type));
}

int cql_encode_read_timeout(struct buf *b, uint8_t version, int16_t stream,
			    const char *msg, uint16_t cl, int32_t received,
			    int32_t block_for, bool data_present)
{
	FRAME(b, version, stream, CQL_OP_ERROR,
	      error_head(b, CQL_ERR_READ_TIMEOUT, msg) ||
		      cql_write_short(b, cl) || cql_write_int(b, received) ||
		      cql_write_int(b, block_for) ||
		      buf_put_u8(b, data_present ? 1 : 0));
}

/* <failures> before v5, <reasonmap> from v5: an [int] n and n pairs of
 * [inetaddr] and a [short] code. */
static int write_failures(struct buf *b, uint8_t version,
			  const struct cql_failure_reason *reasons, size_t n,
			  int32_t count)
{
	if (version < 5)
		return cql_write_int(b, count);
	if (cql_write_int(b, (int32_t)n) != 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct inet_addr *a = &reasons[i].endpoint;
		size_t len = a->family == INET_V6 ? 16 : 4;
		if (buf_put_u8(b, (uint8_t)len) || buf_append(b, a->ip, len) ||
		    cql_write_short(b, reasons[i].code))
			return -1;
	}
	return 0;
}

static int read_failure(struct buf *b, uint8_t version, int16_t stream,
			const char *msg, uint16_t cl, int32_t received,
			int32_t block_for,
			const struct cql_failure_reason *reasons, size_t n,
			int32_t count, bool data_present)
{
	if (version < 4) /* v3 has no Read_failure: a timeout is the nearest */
		return cql_encode_read_timeout(b, version, stream, msg, cl,
					       received, block_for,
					       data_present);
	FRAME(b, version, stream, CQL_OP_ERROR,
	      error_head(b, CQL_ERR_READ_FAILURE, msg) ||
		      cql_write_short(b, cl) || cql_write_int(b, received) ||
		      cql_write_int(b, block_for) ||
		      write_failures(b, version, reasons, n, count) ||
		      buf_put_u8(b, data_present ? 1 : 0));
}

static int write_failure(struct buf *b, uint8_t version, int16_t stream,
			 const char *msg, uint16_t cl, int32_t received,
			 int32_t block_for,
			 const struct cql_failure_reason *reasons, size_t n,
			 int32_t count, const char *write_type)
{
	if (version < 4)
		return cql_encode_write_timeout(b, version, stream, msg, cl,
						received, block_for,
						write_type);
	FRAME(b, version, stream, CQL_OP_ERROR,
	      error_head(b, CQL_ERR_WRITE_FAILURE, msg) ||
		      cql_write_short(b, cl) || cql_write_int(b, received) ||
		      cql_write_int(b, block_for) ||
		      write_failures(b, version, reasons, n, count) ||
		      cql_write_cstring(b, write_type));
}

int cql_encode_read_failure(struct buf *b, uint8_t version, int16_t stream,
			    const char *msg, uint16_t cl, int32_t received,
			    int32_t block_for, int32_t failures,
			    bool data_present)
{
	return read_failure(b, version, stream, msg, cl, received, block_for,
			    NULL, 0, failures, data_present);
}

int cql_encode_write_failure(struct buf *b, uint8_t version, int16_t stream,
			     const char *msg, uint16_t cl, int32_t received,
			     int32_t block_for, int32_t failures,
			     const char *write_type)
{
	return write_failure(b, version, stream, msg, cl, received, block_for,
			     NULL, 0, failures, write_type);
}

int cql_encode_read_failure_reasons(struct buf *b, uint8_t version,
				    int16_t stream, const char *msg,
				    uint16_t cl, int32_t received,
				    int32_t block_for,
				    const struct cql_failure_reason *reasons,
				    size_t n, bool data_present)
{
	return read_failure(b, version, stream, msg, cl, received, block_for,
			    reasons, n, (int32_t)n, data_present);
}

int cql_encode_write_failure_reasons(struct buf *b, uint8_t version,
				     int16_t stream, const char *msg,
				     uint16_t cl, int32_t received,
				     int32_t block_for,
				     const struct cql_failure_reason *reasons,
				     size_t n, const char *write_type)
{
	return write_failure(b, version, stream, msg, cl, received, block_for,
			     reasons, n, (int32_t)n, write_type);
}

int cql_encode_cas_write_unknown(struct buf *b, uint8_t version, int16_t stream,
				 const char *msg, uint16_t cl, int32_t received,
				 int32_t block_for)
{
	if (version < 5)
		return cql_encode_write_timeout(b, version, stream, msg, cl,
						received, block_for, "CAS");
	FRAME(b, version, stream, CQL_OP_ERROR,
	      error_head(b, CQL_ERR_CAS_WRITE_UNKNOWN, msg) ||
		      cql_write_short(b, cl) || cql_write_int(b, received) ||
		      cql_write_int(b, block_for));
}

int cql_encode_already_exists(struct buf *b, uint8_t version, int16_t stream,
			      const char *msg, const char *keyspace,
			      const char *table)
{
	FRAME(b, version, stream, CQL_OP_ERROR,
	      error_head(b, CQL_ERR_ALREADY_EXISTS, msg) ||
		      cql_write_cstring(b, keyspace) ||
		      cql_write_cstring(b, table));
}

int cql_encode_unprepared(struct buf *b, uint8_t version, int16_t stream,
			  const char *msg, const uint8_t *id, uint16_t id_len)
{
	FRAME(b, version, stream, CQL_OP_ERROR,
	      error_head(b, CQL_ERR_UNPREPARED, msg) ||
		      cql_write_short_bytes(b, id, id_len));
}

/* ---- results ------------------------------------------------------------- */

int cql_encode_result_void(struct buf *b, uint8_t version, int16_t stream)
{
	FRAME(b, version, stream, CQL_OP_RESULT,
	      cql_write_int(b, CQL_RESULT_VOID));
}

int cql_frame_add_tracing_id(struct buf *frame, const uint8_t id[16])
{
	if (frame->len < CQL_HEADER_LEN || (frame->data[1] & CQL_FLAG_TRACING))
		return err_set(ERR_INVALID, "not an untraced response frame");
	if (buf_reserve(frame, 16) != 0)
		return -1;
	uint8_t *body = frame->data + CQL_HEADER_LEN;
	memmove(body + 16, body, frame->len - CQL_HEADER_LEN);
	memcpy(body, id, 16);
	frame->len += 16;
	frame->data[1] |= CQL_FLAG_TRACING;
	be32_store(frame->data + 5, (uint32_t)(frame->len - CQL_HEADER_LEN));
	return 0;
}

int cql_encode_result_set_keyspace(struct buf *b, uint8_t version,
				   int16_t stream, const char *keyspace)
{
	FRAME(b, version, stream, CQL_OP_RESULT,
	      cql_write_int(b, CQL_RESULT_SET_KEYSPACE) ||
		      cql_write_cstring(b, keyspace));
}

int cql_encode_schema_change_body(struct buf *b, const char *change,
				  const char *target, const char *keyspace,
				  const char *name)
{
	size_t mark = b->len;
	int rc = cql_write_cstring(b, change) || cql_write_cstring(b, target) ||
		 cql_write_cstring(b, keyspace) ||
		 (name && cql_write_cstring(b, name));
	if (rc)
		b->len = mark;
	return rc ? -1 : 0;
}

int cql_encode_result_schema_change(struct buf *b, uint8_t version,
				    int16_t stream, const char *change,
				    const char *target, const char *keyspace,
				    const char *name)
{
	FRAME(b, version, stream, CQL_OP_RESULT,
	      cql_write_int(b, CQL_RESULT_SCHEMA_CHANGE) ||
		      cql_encode_schema_change_body(b, change, target, keyspace,
						    name));
}

/* ---- events -------------------------------------------------------------- */

int cql_encode_event_topology(struct buf *b, uint8_t version,
			      const char *change, const struct inet_addr *node)
{
	FRAME(b, version, -1, CQL_OP_EVENT,
	      cql_write_cstring(b, "TOPOLOGY_CHANGE") ||
		      cql_write_cstring(b, change) || cql_write_inet(b, node));
}

int cql_encode_event_status(struct buf *b, uint8_t version, const char *change,
			    const struct inet_addr *node)
{
	FRAME(b, version, -1, CQL_OP_EVENT,
	      cql_write_cstring(b, "STATUS_CHANGE") ||
		      cql_write_cstring(b, change) || cql_write_inet(b, node));
}

int cql_encode_event_schema(struct buf *b, uint8_t version, const char *change,
			    const char *target, const char *keyspace,
			    const char *name)
{
	FRAME(b, version, -1, CQL_OP_EVENT,
	      cql_write_cstring(b, "SCHEMA_CHANGE") ||
		      cql_encode_schema_change_body(b, change, target, keyspace,
						    name));
}

/* ---- metadata ------------------------------------------------------------ */

int cql_write_type_option(struct buf *b, const struct cql_type_option *t)
{
	/* A collection without its element types cannot be described: an
	 * error, never a read through NULL. */
	bool map = t && t->id == CQL_TYPE_MAP;
	bool coll =
		map || (t && (t->id == CQL_TYPE_LIST || t->id == CQL_TYPE_SET));
	if (!t || (coll && !t->sub[0]) || (map && !t->sub[1]))
		return err_set(ERR_INVALID, "incomplete type option 0x%04x",
			       t ? t->id : 0);
	if (cql_write_short(b, t->id) != 0)
		return -1;
	switch (t->id) {
	case CQL_TYPE_CUSTOM:
		return cql_write_cstring(b, t->custom_class ? t->custom_class
							    : "");
	case CQL_TYPE_LIST:
	case CQL_TYPE_SET:
		return cql_write_type_option(b, t->sub[0]);
	case CQL_TYPE_MAP:
		return cql_write_type_option(b, t->sub[0]) ||
		       cql_write_type_option(b, t->sub[1]);
	case CQL_TYPE_TUPLE:
		if (!t->subs || cql_write_short(b, t->count) != 0)
			return err_set(ERR_INVALID, "incomplete tuple option");
		for (size_t i = 0; i < t->count; i++)
			if (cql_write_type_option(b, t->subs[i]) != 0)
				return -1;
		return 0;
	case CQL_TYPE_UDT:
		if ((t->count && (!t->subs || !t->field_names)) ||
		    cql_write_cstring(b, t->keyspace ? t->keyspace : "") ||
		    cql_write_cstring(b, t->name ? t->name : "") ||
		    cql_write_short(b, t->count))
			return err_set(ERR_INVALID, "incomplete UDT option");
		for (size_t i = 0; i < t->count; i++)
			if (cql_write_cstring(b, t->field_names[i]) ||
			    cql_write_type_option(b, t->subs[i]))
				return -1;
		return 0;
	default:
		return 0;
	}
}

static bool same_table(const struct cql_column_spec *cols, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (strcmp(cols[i].keyspace, cols[0].keyspace) != 0 ||
		    strcmp(cols[i].table, cols[0].table) != 0)
			return false;
	return n > 0;
}

static int write_col_specs(struct buf *b, const struct cql_column_spec *cols,
			   size_t n, bool global)
{
	if (global && (cql_write_cstring(b, cols[0].keyspace) ||
		       cql_write_cstring(b, cols[0].table)))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!global && (cql_write_cstring(b, cols[i].keyspace) ||
				cql_write_cstring(b, cols[i].table)))
			return -1;
		if (cql_write_cstring(b, cols[i].name) ||
		    cql_write_type_option(b, cols[i].type))
			return -1;
	}
	return 0;
}

int cql_write_rows_metadata(struct buf *b, const struct cql_column_spec *cols,
			    size_t ncols, const struct slice *paging_state,
			    bool no_metadata)
{
	size_t mark = b->len;
	bool global = !no_metadata && same_table(cols, ncols);
	int32_t flags = (global ? CQL_ROWS_GLOBAL_TABLES_SPEC : 0) |
			(paging_state ? CQL_ROWS_HAS_MORE_PAGES : 0) |
			(no_metadata ? CQL_ROWS_NO_METADATA : 0);
	int rc = cql_write_int(b, flags) || cql_write_int(b, (int32_t)ncols);
	if (!rc && paging_state)
		rc = cql_write_bytes(b, paging_state->ptr,
				     (int32_t)paging_state->len);
	if (!rc && !no_metadata)
		rc = write_col_specs(b, cols, ncols, global);
	if (rc)
		b->len = mark;
	return rc ? -1 : 0;
}

/* The id of column specs as they are on the wire (from the global table
 * spec or the first column on): their murmur3, seeded by the flag. */
static void metadata_id_of(const uint8_t *p, size_t n, bool global,
			   uint8_t id[CQL_METADATA_ID_LEN])
{
	uint64_t h[2];
	murmur3_hash128(p, n, global ? 0x6d64 : 0x6d65, h);
	be64_store(id, h[0]);
	be64_store(id + 8, h[1]);
}

int cql_result_metadata_id(const struct cql_column_spec *cols, size_t ncols,
			   uint8_t id[CQL_METADATA_ID_LEN])
{
	struct buf b;
	buf_init(&b);
	bool global = same_table(cols, ncols);
	if (write_col_specs(&b, cols, ncols, global) != 0) {
		buf_free(&b);
		return -1;
	}
	metadata_id_of(b.data, b.len, global, id);
	buf_free(&b);
	return 0;
}

int cql_write_prepared(struct buf *b, uint8_t version, const uint8_t *id,
		       uint16_t id_len, const struct cql_column_spec *binds,
		       size_t nbinds, const uint16_t *pk_indexes, size_t npk,
		       const struct cql_column_spec *results, size_t nresults)
{
	size_t mark = b->len;
	bool global = same_table(binds, nbinds);
	int rc = cql_write_short_bytes(b, id, id_len);
	if (!rc && version >= 5) {
		uint8_t meta[CQL_METADATA_ID_LEN];
		rc = cql_result_metadata_id(results, nresults, meta) ||
		     cql_write_short_bytes(b, meta, sizeof(meta));
	}
	rc = rc || cql_write_int(b, global ? CQL_ROWS_GLOBAL_TABLES_SPEC : 0) ||
	     cql_write_int(b, (int32_t)nbinds);
	if (!rc && version >= 4) {
		rc = cql_write_int(b, (int32_t)npk);
		for (size_t i = 0; !rc && i < npk; i++)
			rc = cql_write_short(b, pk_indexes[i]);
	}
	if (!rc)
		rc = write_col_specs(b, binds, nbinds, global);
	if (!rc)
		rc = cql_write_rows_metadata(b, results, nresults, NULL,
					     nresults == 0);
	if (rc)
		b->len = mark;
	return rc ? -1 : 0;
}

/* Skips one [option] type; false when malformed or nested too deep. */
static bool skip_type_option(struct cursor *c, int depth)
{
	uint16_t id, n;
	struct slice s;
	if (depth > 64 || cql_read_short(c, &id) != 0)
		return false;
	switch (id) {
	case CQL_TYPE_CUSTOM:
		return cql_read_string(c, &s) == 0;
	case CQL_TYPE_LIST:
	case CQL_TYPE_SET:
		return skip_type_option(c, depth + 1);
	case CQL_TYPE_MAP:
		return skip_type_option(c, depth + 1) &&
		       skip_type_option(c, depth + 1);
	case CQL_TYPE_TUPLE:
		if (cql_read_short(c, &n) != 0)
			return false;
		for (uint16_t i = 0; i < n; i++)
			if (!skip_type_option(c, depth + 1))
				return false;
		return true;
	case CQL_TYPE_UDT:
		if (cql_read_string(c, &s) || cql_read_string(c, &s) ||
		    cql_read_short(c, &n))
			return false;
		for (uint16_t i = 0; i < n; i++)
			if (cql_read_string(c, &s) != 0 ||
			    !skip_type_option(c, depth + 1))
				return false;
		return true;
	default:
		return true;
	}
}

/* Whether `frame` is a Rows result whose column specs hash to something
 * other than client_id; then where its flags and specs start, the flags,
 * and the id they hash to. */
static bool stale_rows(const uint8_t *frame, size_t len, struct slice client_id,
		       size_t *flags_at, size_t *specs_at, int32_t *flags,
		       uint8_t id[CQL_METADATA_ID_LEN])
{
	if (len < CQL_HEADER_LEN || frame[4] != CQL_OP_RESULT ||
	    (frame[1] & CQL_FLAG_COMPRESSION))
		return false;
	uint8_t fflags = frame[1];
	struct cursor c =
		cursor_make(frame + CQL_HEADER_LEN, len - CQL_HEADER_LEN);
	struct slice s;
	uint16_t n;
	int32_t kind, ncols;
	if ((fflags & CQL_FLAG_TRACING) && cursor_skip(&c, 16) != 0)
		return false;
	if (fflags & CQL_FLAG_WARNING) {
		if (cql_read_short(&c, &n) != 0)
			return false;
		for (uint16_t i = 0; i < n; i++)
			if (cql_read_string(&c, &s) != 0)
				return false;
	}
	if ((fflags & CQL_FLAG_CUSTOM_PAYLOAD) &&
	    cql_skip_custom_payload(&c) != 0)
		return false;
	if (cql_read_int(&c, &kind) != 0 || kind != CQL_RESULT_ROWS)
		return false;
	*flags_at = (size_t)(c.pos - frame);
	if (cql_read_int(&c, flags) != 0 || cql_read_int(&c, &ncols) != 0 ||
	    ncols < 0 ||
	    (*flags & (CQL_ROWS_NO_METADATA | CQL_ROWS_METADATA_CHANGED)))
		return false;
	if (*flags & CQL_ROWS_HAS_MORE_PAGES) {
		struct cql_value v;
		if (cql_read_value(&c, false, &v) != 0)
			return false;
	}
	*specs_at = (size_t)(c.pos - frame);
	bool global = *flags & CQL_ROWS_GLOBAL_TABLES_SPEC;
	if (global && (cql_read_string(&c, &s) || cql_read_string(&c, &s)))
		return false;
	for (int32_t i = 0; i < ncols; i++) {
		if (!global &&
		    (cql_read_string(&c, &s) || cql_read_string(&c, &s)))
			return false;
		if (cql_read_string(&c, &s) || !skip_type_option(&c, 0))
			return false;
	}
	metadata_id_of(frame + *specs_at, (size_t)(c.pos - frame) - *specs_at,
		       global, id);
	return client_id.len != CQL_METADATA_ID_LEN ||
	       memcmp(client_id.ptr, id, CQL_METADATA_ID_LEN) != 0;
}

bool cql_frame_metadata_stale(const uint8_t *frame, size_t len,
			      struct slice client_id)
{
	size_t flags_at, specs_at;
	int32_t flags;
	uint8_t id[CQL_METADATA_ID_LEN];
	return stale_rows(frame, len, client_id, &flags_at, &specs_at, &flags,
			  id);
}

int cql_frame_mark_metadata_changed(struct buf *frame, struct slice client_id)
{
	size_t flags_at, specs_at;
	int32_t flags;
	uint8_t id[CQL_METADATA_ID_LEN];
	if (!stale_rows(frame->data, frame->len, client_id, &flags_at,
			&specs_at, &flags, id))
		return 0;
	/* [short bytes] new_metadata_id, before the column specs */
	size_t add = 2 + sizeof(id);
	if (buf_reserve(frame, add) != 0)
		return -1;
	uint8_t *at = frame->data + specs_at;
	memmove(at + add, at, frame->len - specs_at);
	be16_store(at, (uint16_t)sizeof(id));
	memcpy(at + 2, id, sizeof(id));
	frame->len += add;
	be32_store(frame->data + flags_at,
		   (uint32_t)flags | CQL_ROWS_METADATA_CHANGED);
	be32_store(frame->data + 5, (uint32_t)(frame->len - CQL_HEADER_LEN));
	return 0;
}

int cql_frame_add_warning(struct buf *frame, const char *warning)
{
	if (frame->len < CQL_HEADER_LEN || (frame->data[0] & 0x7f) < 4)
		return 0; /* warnings exist from v4 on */
	struct buf w;
	buf_init(&w);
	if (cql_write_string_list(&w, &warning, 1) != 0 ||
	    buf_reserve(frame, w.len) != 0) {
		buf_free(&w);
		return -1;
	}
	uint8_t *body = frame->data + CQL_HEADER_LEN;
	memmove(body + w.len, body, frame->len - CQL_HEADER_LEN);
	memcpy(body, w.data, w.len);
	frame->len += w.len;
	frame->data[1] |= CQL_FLAG_WARNING;
	be32_store(frame->data + 5, (uint32_t)(frame->len - CQL_HEADER_LEN));
	buf_free(&w);
	return 0;
}
