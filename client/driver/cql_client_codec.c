/*
 * Client side of the native protocol v4: request encoders and response
 * decoders. Pure functions over buffers; the body primitives (cql_read_*,
 * cql_write_*) are the server's, shared through client/proto/proto.h.
 *
 * Response bodies are untrusted. Counts are checked against the bytes that
 * could hold them before anything is allocated (a column spec takes at least
 * 4 bytes, a value at least 4), type options nest at most
 * TYPE_DEPTH_MAX deep, and anything left unread after a body is ignored, as
 * drivers do (later protocol revisions append fields).
 */
#include "client/driver/cql_client.h"

#include "common/err.h"

#include <string.h>
#include <strings.h>

#define TYPE_DEPTH_MAX 16

static int bad(const char *what)
{
	return err_set(ERR_PROTOCOL, "%s", what);
}

/* ---- requests ------------------------------------------------------------ */

static long request_begin(struct buf *b, int16_t stream, uint8_t opcode)
{
	struct cql_header h = {
		.version = CQL_CLIENT_VERSION,
		.response = false,
		.flags = 0,
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

/* Patches the length, or rolls the frame back when `rc` failed. */
static int request_end(struct buf *b, long start, int rc)
{
	if (rc != 0) {
		b->len = (size_t)start;
		return -1;
	}
	size_t body = b->len - (size_t)start - CQL_HEADER_LEN;
	be32_store(b->data + start + 5, (uint32_t)body);
	return 0;
}

int cql_client_encode_startup(struct buf *b, int16_t stream, bool lz4)
{
	long start = request_begin(b, stream, CQL_OP_STARTUP);
	if (start < 0)
		return -1;
	int rc = cql_write_short(b, lz4 ? 2 : 1) ||
		 cql_write_cstring(b, "CQL_VERSION") ||
		 cql_write_cstring(b, "3.0.0");
	if (!rc && lz4)
		rc = cql_write_cstring(b, "COMPRESSION") ||
		     cql_write_cstring(b, "lz4");
	return request_end(b, start, rc);
}

int cql_client_encode_auth_response(struct buf *b, int16_t stream,
				    const char *user, const char *password)
{
	long start = request_begin(b, stream, CQL_OP_AUTH_RESPONSE);
	if (start < 0)
		return -1;
	size_t ul = strlen(user), pl = strlen(password);
	int rc = cql_write_int(b, (int32_t)(ul + pl + 2)) || buf_put_u8(b, 0) ||
		 buf_append(b, user, ul) || buf_put_u8(b, 0) ||
		 buf_append(b, password, pl);
	return request_end(b, start, rc);
}

int cql_client_encode_options(struct buf *b, int16_t stream)
{
	long start = request_begin(b, stream, CQL_OP_OPTIONS);
	if (start < 0)
		return -1;
	return request_end(b, start, 0);
}

static int write_params(struct buf *b, uint16_t consistency, uint8_t flags,
			const struct cql_value *values, uint16_t nvalues)
{
	if (nvalues)
		flags |= CQL_QF_VALUES;
	if (cql_write_short(b, consistency) || buf_put_u8(b, flags))
		return -1;
	if (!nvalues)
		return 0;
	if (cql_write_short(b, nvalues))
		return -1;
	for (uint16_t i = 0; i < nvalues; i++) {
		const struct cql_value *v = &values[i];
		if (v->len < 0) {
			if (cql_write_int(b, v->len))
				return -1;
		} else if (cql_write_bytes(b, v->ptr, v->len)) {
			return -1;
		}
	}
	return 0;
}

int cql_client_encode_query(struct buf *b, int16_t stream, const char *query,
			    uint16_t consistency,
			    const struct cql_value *values, uint16_t nvalues)
{
	long start = request_begin(b, stream, CQL_OP_QUERY);
	if (start < 0)
		return -1;
	int rc = cql_write_long_string(b, query, strlen(query)) ||
		 write_params(b, consistency, 0, values, nvalues);
	return request_end(b, start, rc);
}

int cql_client_encode_prepare(struct buf *b, int16_t stream, const char *query)
{
	long start = request_begin(b, stream, CQL_OP_PREPARE);
	if (start < 0)
		return -1;
	int rc = cql_write_long_string(b, query, strlen(query));
	return request_end(b, start, rc);
}

int cql_client_encode_execute(struct buf *b, int16_t stream, const uint8_t *id,
			      uint16_t id_len, uint16_t consistency,
			      const struct cql_value *values, uint16_t nvalues)
{
	long start = request_begin(b, stream, CQL_OP_EXECUTE);
	if (start < 0)
		return -1;
	int rc = cql_write_short_bytes(b, id, id_len) ||
		 write_params(b, consistency, CQL_QF_SKIP_METADATA, values,
			      nvalues);
	return request_end(b, start, rc);
}

/* ---- responses ----------------------------------------------------------- */

int cql_client_header_decode(const uint8_t *p, uint32_t max_body,
			     struct cql_header *h)
{
	enum cql_header_status st = cql_header_decode(p, max_body, h);
	if (st == CQL_HEADER_BAD_VERSION || h->version != CQL_CLIENT_VERSION)
		return err_set(ERR_PROTOCOL,
			       "response of protocol version %u (expected 4)",
			       h->version);
	if (!h->response)
		return bad("a request frame sent to a client");
	if (h->length > max_body)
		return err_set(ERR_PROTOCOL,
			       "response body of %u bytes exceeds %u",
			       h->length, max_body);
	return 0;
}

static int skip_type(struct cursor *c, int depth)
{
	uint16_t id;
	struct slice s;
	if (depth > TYPE_DEPTH_MAX)
		return bad("type options nest too deep");
	if (cql_read_short(c, &id) != 0)
		return -1;
	switch (id) {
	case CQL_TYPE_CUSTOM:
		return cql_read_string(c, &s);
	case CQL_TYPE_LIST:
	case CQL_TYPE_SET:
		return skip_type(c, depth + 1);
	case CQL_TYPE_MAP:
		return skip_type(c, depth + 1) || skip_type(c, depth + 1) ? -1
									  : 0;
	case CQL_TYPE_UDT: {
		uint16_t n;
		if (cql_read_string(c, &s) || cql_read_string(c, &s) ||
		    cql_read_short(c, &n))
			return -1;
		for (uint16_t i = 0; i < n; i++)
			if (cql_read_string(c, &s) || skip_type(c, depth + 1))
				return -1;
		return 0;
	}
	case CQL_TYPE_TUPLE: {
		uint16_t n;
		if (cql_read_short(c, &n))
			return -1;
		for (uint16_t i = 0; i < n; i++)
			if (skip_type(c, depth + 1))
				return -1;
		return 0;
	}
	default:
		if (id > CQL_TYPE_TINYINT && id != 0x0015 /* duration */)
			return err_set(ERR_PROTOCOL, "unknown type id 0x%04x",
				       id);
		return 0;
	}
}

/* Reads the type of a column: its id, then skips any sub-types. */
static int read_type(struct cursor *c, uint16_t *id)
{
	struct cursor peek = *c;
	if (cql_read_short(&peek, id) != 0)
		return -1;
	return skip_type(c, 0);
}

/* `count` items of at least `min_size` bytes must fit in what remains. */
static void *alloc_counted(struct cursor *c, struct arena *a, int32_t count,
			   size_t min_size, size_t item_size, const char *what)
{
	if (count < 0) {
		err_set(ERR_PROTOCOL, "negative %s count", what);
		return NULL;
	}
	if ((uint64_t)count * min_size > cursor_left(c)) {
		err_set(ERR_PROTOCOL, "%s count %d exceeds the body", what,
			count);
		return NULL;
	}
	if (count == 0)
		return arena_alloc(a, 1);
	void *p = arena_alloc(a, (size_t)count * item_size);
	if (p)
		memset(p, 0, (size_t)count * item_size);
	return p;
}

static int read_column_specs(struct cursor *c, struct arena *a, int32_t flags,
			     int32_t count, struct cql_client_column **out)
{
	struct slice ks = {0}, table = {0};
	bool global = (flags & CQL_ROWS_GLOBAL_TABLES_SPEC) != 0;
	if (global && (cql_read_string(c, &ks) || cql_read_string(c, &table)))
		return -1;
	/* A column spec is at least a name (2) and a type (2). */
	struct cql_client_column *cols =
		alloc_counted(c, a, count, 4, sizeof(*cols), "column");
	if (!cols)
		return -1;
	for (int32_t i = 0; i < count; i++) {
		struct cql_client_column *col = &cols[i];
		if (global) {
			col->keyspace = ks;
			col->table = table;
		} else if (cql_read_string(c, &col->keyspace) ||
			   cql_read_string(c, &col->table)) {
			return -1;
		}
		if (cql_read_string(c, &col->name) || read_type(c, &col->type))
			return -1;
	}
	*out = cols;
	return 0;
}

/* Rows metadata (§4.2.5.2) without the rows. */
static int read_rows_metadata(struct cursor *c, struct arena *a,
			      struct cql_client_rows *r)
{
	if (cql_read_int(c, &r->flags) || cql_read_int(c, &r->column_count))
		return -1;
	if (r->column_count < 0)
		return bad("negative column count");
	if (r->flags & CQL_ROWS_HAS_MORE_PAGES) {
		struct cql_value v;
		if (cql_read_value(c, false, &v))
			return -1;
		if (v.len > 0)
			r->paging_state = slice_make(v.ptr, (size_t)v.len);
	}
	if (r->flags & CQL_ROWS_NO_METADATA)
		return 0;
	return read_column_specs(c, a, r->flags, r->column_count, &r->columns);
}

static int read_rows(struct cursor *c, struct arena *a,
		     struct cql_client_rows *r)
{
	if (read_rows_metadata(c, a, r) || cql_read_int(c, &r->row_count))
		return -1;
	if (r->row_count < 0)
		return bad("negative row count");
	uint64_t n = (uint64_t)r->row_count * (uint64_t)r->column_count;
	if (n * 4 > cursor_left(c))
		return bad("row count exceeds the body");
	if (n == 0)
		return 0;
	r->values = arena_alloc(a, (size_t)n * sizeof(*r->values));
	if (!r->values)
		return -1;
	for (uint64_t i = 0; i < n; i++)
		if (cql_read_value(c, false, &r->values[i]))
			return -1;
	return 0;
}

static int read_prepared(struct cursor *c, struct arena *a,
			 struct cql_client_prepared_meta *p)
{
	int32_t flags;
	if (cql_read_short_bytes(c, &p->id) || cql_read_int(c, &flags) ||
	    cql_read_int(c, &p->bind_count) || cql_read_int(c, &p->pk_count))
		return -1;
	if (p->id.len == 0)
		return bad("empty prepared id");
	if (p->bind_count < 0 || p->pk_count < 0)
		return bad("negative bind or partition key count");
	p->pk_indexes = alloc_counted(c, a, p->pk_count, 2,
				      sizeof(*p->pk_indexes), "partition key");
	if (!p->pk_indexes)
		return -1;
	for (int32_t i = 0; i < p->pk_count; i++) {
		if (cql_read_short(c, &p->pk_indexes[i]))
			return -1;
		if (p->pk_indexes[i] >= p->bind_count)
			return bad("partition key index out of range");
	}
	if (read_column_specs(c, a, flags, p->bind_count, &p->binds))
		return -1;
	struct cql_client_rows meta = {0};
	if (read_rows_metadata(c, a, &meta))
		return -1;
	p->result_column_count = meta.column_count;
	return 0;
}

static int read_result(struct cursor *c, struct arena *a,
		       struct cql_client_response *out)
{
	if (cql_read_int(c, &out->kind))
		return -1;
	switch (out->kind) {
	case CQL_RESULT_VOID:
		return 0;
	case CQL_RESULT_ROWS:
		return read_rows(c, a, &out->rows);
	case CQL_RESULT_SET_KEYSPACE:
		return cql_read_string(c, &out->keyspace);
	case CQL_RESULT_PREPARED:
		return read_prepared(c, a, &out->prepared);
	case CQL_RESULT_SCHEMA_CHANGE: {
		struct cql_client_schema_change *s = &out->schema_change;
		if (cql_read_string(c, &s->change) ||
		    cql_read_string(c, &s->target) ||
		    cql_read_string(c, &s->keyspace))
			return -1;
		if (s->target.len == 8 &&
		    memcmp(s->target.ptr, "KEYSPACE", 8) == 0)
			return 0;
		return cql_read_string(c, &s->name);
	}
	default:
		return err_set(ERR_PROTOCOL, "unknown result kind %d",
			       out->kind);
	}
}

/* Tracing id, warnings and custom payload precede the body proper. */
static int skip_prefix(struct cursor *c, uint8_t flags, struct arena *a)
{
	if ((flags & CQL_FLAG_TRACING) && cursor_skip(c, 16) != 0)
		return bad("truncated tracing id");
	if (flags & CQL_FLAG_WARNING) {
		struct slice *w;
		uint16_t n;
		if (cql_read_string_list(c, a, &w, &n))
			return -1;
	}
	if ((flags & CQL_FLAG_CUSTOM_PAYLOAD) && cql_skip_custom_payload(c))
		return -1;
	return 0;
}

int cql_client_response_decode(uint8_t opcode, uint8_t flags,
			       const uint8_t *body, size_t len, struct arena *a,
			       struct cql_client_response *out)
{
	struct cursor c = cursor_make(body, len);
	memset(out, 0, sizeof(*out));
	out->opcode = opcode;
	if (flags & CQL_FLAG_COMPRESSION)
		return bad("compressed response on an uncompressed connection");
	if (skip_prefix(&c, flags, a))
		return err_prefix("response prefix");
	int rc = 0;
	switch (opcode) {
	case CQL_OP_READY:
		break;
	case CQL_OP_ERROR:
		rc = cql_read_int(&c, &out->error_code) ||
		     cql_read_string(&c, &out->error_message);
		break;
	case CQL_OP_RESULT:
		rc = read_result(&c, a, out);
		break;
	case CQL_OP_SUPPORTED: {
		/* A [string multimap]: keys, each with a string list. */
		uint16_t count;
		rc = cql_read_short(&c, &count);
		for (uint16_t i = 0; !rc && i < count; i++) {
			struct slice k, *l;
			uint16_t n;
			rc = cql_read_string(&c, &k) ||
			     cql_read_string_list(&c, a, &l, &n);
		}
		break;
	}
	case CQL_OP_AUTHENTICATE:   /* the authenticator's class name */
	case CQL_OP_AUTH_SUCCESS:   /* a final token */
	case CQL_OP_AUTH_CHALLENGE: /* a token (PLAIN sends none) */
		break;
	case CQL_OP_EVENT:
		break;
	default:
		return err_set(ERR_PROTOCOL,
			       "unexpected response opcode 0x%02x", opcode);
	}
	return rc ? -1 : 0;
}

/* ---- values -------------------------------------------------------------- */

const struct cql_value *cql_client_rows_cell(const struct cql_client_rows *r,
					     int32_t row, int32_t col)
{
	if (row < 0 || col < 0 || row >= r->row_count ||
	    col >= r->column_count || !r->values)
		return NULL;
	return &r->values[(size_t)row * (size_t)r->column_count + (size_t)col];
}

int cql_client_value_int(const struct cql_value *v, int64_t *out)
{
	switch (v->len) {
	case 1:
		*out = (int8_t)v->ptr[0];
		return 0;
	case 2:
		*out = (int16_t)be16_load(v->ptr);
		return 0;
	case 4:
		*out = (int32_t)be32_load(v->ptr);
		return 0;
	case 8:
		*out = (int64_t)be64_load(v->ptr);
		return 0;
	default:
		return err_set(ERR_INVALID, "not an integer value (%d bytes)",
			       v->len);
	}
}

struct slice cql_client_value_bytes(const struct cql_value *v)
{
	return v->len > 0 ? slice_make(v->ptr, (size_t)v->len)
			  : slice_make(NULL, 0);
}

/* ---- names --------------------------------------------------------------- */

const char *cql_client_error_name(int32_t code)
{
	static const struct {
		int32_t code;
		const char *name;
	} names[] = {
		{CQL_ERR_SERVER, "ServerError"},
		{CQL_ERR_PROTOCOL, "ProtocolError"},
		{CQL_ERR_BAD_CREDENTIALS, "BadCredentials"},
		{CQL_ERR_UNAVAILABLE, "Unavailable"},
		{CQL_ERR_OVERLOADED, "Overloaded"},
		{CQL_ERR_IS_BOOTSTRAPPING, "IsBootstrapping"},
		{CQL_ERR_TRUNCATE, "TruncateError"},
		{CQL_ERR_WRITE_TIMEOUT, "WriteTimeout"},
		{CQL_ERR_READ_TIMEOUT, "ReadTimeout"},
		{CQL_ERR_READ_FAILURE, "ReadFailure"},
		{CQL_ERR_FUNCTION_FAILURE, "FunctionFailure"},
		{CQL_ERR_WRITE_FAILURE, "WriteFailure"},
		{CQL_ERR_SYNTAX, "SyntaxError"},
		{CQL_ERR_UNAUTHORIZED, "Unauthorized"},
		{CQL_ERR_INVALID, "Invalid"},
		{CQL_ERR_CONFIG, "ConfigError"},
		{CQL_ERR_ALREADY_EXISTS, "AlreadyExists"},
		{CQL_ERR_UNPREPARED, "Unprepared"},
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].code == code)
			return names[i].name;
	return "Unknown";
}

int cql_client_consistency_parse(const char *name, uint16_t *out)
{
	for (uint16_t cl = 0; cl <= CQL_CL_LOCAL_ONE; cl++) {
		const char *n = cql_consistency_name(cl);
		if (n && strcasecmp(n, name) == 0) {
			*out = cl;
			return 0;
		}
	}
	return err_set(ERR_INVALID, "unknown consistency level '%s'", name);
}
