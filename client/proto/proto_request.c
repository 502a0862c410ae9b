/*
 * Native protocol: frame headers, body primitives, request decoding and LZ4
 * body compression. Every read is bounded by the cursor; every count is
 * checked against the bytes that could hold it before an array is allocated.
 */
#include "client/proto/proto.h"

#include "common/err.h"

#include <lz4.h>
#include <string.h>

static int proto_err(const char *what)
{
	return err_set(ERR_PROTOCOL, "%s", what);
}

const char *cql_consistency_name(uint16_t cl)
{
	static const char *const names[] = {
		"ANY",    "ONE",          "TWO",          "THREE",
		"QUORUM", "ALL",          "LOCAL_QUORUM", "EACH_QUORUM",
		"SERIAL", "LOCAL_SERIAL", "LOCAL_ONE",
	};
	return cl < sizeof(names) / sizeof(names[0]) ? names[cl] : NULL;
}

/* ---- header -------------------------------------------------------------- */

enum cql_header_status cql_header_decode(const uint8_t *p, uint32_t max_body,
					 struct cql_header *h)
{
	h->version = p[0] & 0x7f;
	h->response = (p[0] & CQL_RESPONSE_BIT) != 0;
	h->flags = p[1];
	/* v1/v2 had a one-byte stream at p[2]; keep it for the refusal. */
	h->stream = h->version >= 3 ? (int16_t)be16_load(p + 2) : (int8_t)p[2];
	h->opcode = p[4];
	h->length = be32_load(p + 5);
	if (h->version < CQL_VERSION_MIN || h->version > CQL_VERSION_MAX)
		return CQL_HEADER_BAD_VERSION;
	if (h->response)
		return CQL_HEADER_BAD_DIRECTION;
	if (h->length > max_body)
		return CQL_HEADER_TOO_LARGE;
	return CQL_HEADER_OK;
}

void cql_header_encode(uint8_t *p, const struct cql_header *h)
{
	p[0] = (uint8_t)(h->version | (h->response ? CQL_RESPONSE_BIT : 0));
	p[1] = h->flags;
	be16_store(p + 2, (uint16_t)h->stream);
	p[4] = h->opcode;
	be32_store(p + 5, h->length);
}

/* ---- primitives ---------------------------------------------------------- */

int cql_read_short(struct cursor *c, uint16_t *out)
{
	return cursor_be16(c, out) == 0 ? 0 : proto_err("truncated [short]");
}

int cql_read_int(struct cursor *c, int32_t *out)
{
	uint32_t v;
	if (cursor_be32(c, &v) != 0)
		return proto_err("truncated [int]");
	*out = (int32_t)v;
	return 0;
}

int cql_read_long(struct cursor *c, int64_t *out)
{
	uint64_t v;
	if (cursor_be64(c, &v) != 0)
		return proto_err("truncated [long]");
	*out = (int64_t)v;
	return 0;
}

int cql_read_string(struct cursor *c, struct slice *out)
{
	uint16_t n;
	if (cursor_be16(c, &n) != 0 || cursor_take(c, n, out) != 0)
		return proto_err("truncated [string]");
	return 0;
}

int cql_read_long_string(struct cursor *c, struct slice *out)
{
	uint32_t n;
	if (cursor_be32(c, &n) != 0)
		return proto_err("truncated [long string]");
	if ((int32_t)n < 0)
		return proto_err("negative [long string] length");
	if (cursor_take(c, n, out) != 0)
		return proto_err("truncated [long string]");
	return 0;
}

int cql_read_short_bytes(struct cursor *c, struct slice *out)
{
	uint16_t n;
	if (cursor_be16(c, &n) != 0 || cursor_take(c, n, out) != 0)
		return proto_err("truncated [short bytes]");
	return 0;
}

int cql_read_value(struct cursor *c, bool allow_unset, struct cql_value *out)
{
	int32_t n = 0;
	if (cql_read_int(c, &n) != 0)
		return proto_err("truncated [value]");
	if (n >= 0) {
		struct slice s;
		if (cursor_take(c, (size_t)n, &s) != 0)
			return proto_err("truncated [value]");
		out->len = n;
		out->ptr = s.ptr;
		return 0;
	}
	if (n == CQL_VALUE_NULL || (n == CQL_VALUE_UNSET && allow_unset)) {
		out->len = n;
		out->ptr = NULL;
		return 0;
	}
	return proto_err("invalid [value] length");
}

/* Checks that `count` items of at least `min_size` bytes could fit, then
 * allocates them zeroed. */
static void *alloc_items(struct cursor *c, struct arena *a, size_t count,
			 size_t min_size, size_t item_size, const char *what)
{
	if (count == 0)
		return NULL;
	if (count > cursor_left(c) / min_size) {
		err_set(ERR_PROTOCOL, "%s: count %zu exceeds the frame", what,
			count);
		return NULL;
	}
	void *p = arena_alloc(a, count * item_size);
	if (!p)
		return NULL;
	memset(p, 0, count * item_size);
	return p;
}

int cql_read_string_list(struct cursor *c, struct arena *a, struct slice **out,
			 uint16_t *count)
{
	uint16_t n;
	if (cql_read_short(c, &n) != 0)
		return -1;
	struct slice *items =
		alloc_items(c, a, n, 2, sizeof(*items), "[string list]");
	if (n && !items)
		return -1;
	for (uint16_t i = 0; i < n; i++)
		if (cql_read_string(c, &items[i]) != 0)
			return -1;
	*out = items;
	*count = n;
	return 0;
}

int cql_read_string_map(struct cursor *c, struct arena *a,
			struct cql_pair **out, uint16_t *count)
{
	uint16_t n;
	if (cql_read_short(c, &n) != 0)
		return -1;
	struct cql_pair *pairs =
		alloc_items(c, a, n, 4, sizeof(*pairs), "[string map]");
	if (n && !pairs)
		return -1;
	for (uint16_t i = 0; i < n; i++)
		if (cql_read_string(c, &pairs[i].key) != 0 ||
		    cql_read_string(c, &pairs[i].value) != 0)
			return -1;
	*out = pairs;
	*count = n;
	return 0;
}

int cql_skip_custom_payload(struct cursor *c)
{
	uint16_t n;
	if (cql_read_short(c, &n) != 0)
		return -1;
	for (uint16_t i = 0; i < n; i++) {
		struct slice key;
		struct cql_value v;
		if (cql_read_string(c, &key) != 0 ||
		    cql_read_value(c, false, &v) != 0)
			return proto_err("truncated custom payload");
	}
	return 0;
}

/* ---- requests ------------------------------------------------------------ */

int cql_decode_startup(struct cursor *c, struct arena *a,
		       struct cql_pair **opts, uint16_t *count)
{
	return cql_read_string_map(c, a, opts, count);
}

int cql_decode_register(struct cursor *c, struct arena *a,
			struct slice **events, uint16_t *count)
{
	return cql_read_string_list(c, a, events, count);
}

static int read_values(struct cursor *c, uint8_t version, struct arena *a,
		       bool named, uint16_t *count, struct cql_value **values,
		       struct slice **names)
{
	uint16_t n;
	if (cql_read_short(c, &n) != 0)
		return -1;
	size_t min = named ? 6 : 4;
	struct cql_value *v = alloc_items(c, a, n, min, sizeof(*v), "values");
	struct slice *nm = NULL;
	if (n && !v)
		return -1;
	if (named && n) {
		nm = arena_alloc(a, n * sizeof(*nm));
		if (!nm)
			return -1;
	}
	for (uint16_t i = 0; i < n; i++) {
		if (named && cql_read_string(c, &nm[i]) != 0)
			return -1;
		if (cql_read_value(c, version >= 4, &v[i]) != 0)
			return -1;
	}
	*count = n;
	*values = v;
	*names = nm;
	return 0;
}

/* Query flags: a [byte] before v5, an [int] from v5. */
static int read_flags(struct cursor *c, uint8_t version, uint32_t *flags)
{
	if (version >= 5) {
		int32_t v = 0;
		if (cql_read_int(c, &v) != 0)
			return -1;
		*flags = (uint32_t)v;
		return 0;
	}
	uint8_t b;
	if (cursor_u8(c, &b) != 0)
		return -1;
	*flags = b;
	return 0;
}

/* v5's [keyspace][now_in_seconds] after the other parameters. */
static int read_v5_tail(struct cursor *c, uint8_t version, uint32_t flags,
			bool *has_ks, struct slice *ks, bool *has_now,
			int32_t *now)
{
	if (version < 5)
		return 0;
	if (flags & CQL_QF_KEYSPACE) {
		if (cql_read_string(c, ks) != 0)
			return -1;
		if (ks->len == 0)
			return proto_err("Invalid empty keyspace in the "
					 "keyspace flag");
		*has_ks = true;
	}
	if (flags & CQL_QF_NOW_IN_SECONDS) {
		if (cql_read_int(c, now) != 0)
			return -1;
		*has_now = true;
	}
	return 0;
}

static int read_params(struct cursor *c, uint8_t version, struct arena *a,
		       struct cql_query_params *p)
{
	memset(p, 0, sizeof(*p));
	p->page_size = -1;
	p->serial_consistency = CQL_CL_SERIAL;
	if (cql_read_short(c, &p->consistency) != 0 ||
	    read_flags(c, version, &p->flags) != 0)
		return proto_err("truncated query parameters");
	if (p->flags & CQL_QF_VALUES) {
		if (read_values(c, version, a, p->flags & CQL_QF_VALUE_NAMES,
				&p->value_count, &p->values,
				&p->value_names) != 0)
			return -1;
	}
	if ((p->flags & CQL_QF_PAGE_SIZE) &&
	    cql_read_int(c, &p->page_size) != 0)
		return -1;
	if (p->flags & CQL_QF_PAGING_STATE) {
		struct cql_value v;
		if (cql_read_value(c, false, &v) != 0)
			return -1;
		if (v.len >= 0) {
			p->has_paging_state = true;
			p->paging_state = slice_make(v.ptr, (size_t)v.len);
		}
	}
	if ((p->flags & CQL_QF_SERIAL_CONSISTENCY) &&
	    cql_read_short(c, &p->serial_consistency) != 0)
		return -1;
	if (p->flags & CQL_QF_DEFAULT_TIMESTAMP) {
		if (cql_read_long(c, &p->timestamp) != 0)
			return -1;
		if (p->timestamp == INT64_MIN)
			return proto_err("out of bound timestamp, must be in "
					 "[-9223372036854775807, "
					 "9223372036854775807]");
		p->has_timestamp = true;
	}
	return read_v5_tail(c, version, p->flags, &p->has_keyspace,
			    &p->keyspace, &p->has_now_in_seconds,
			    &p->now_in_seconds);
}

int cql_decode_query(struct cursor *c, uint8_t version, struct arena *a,
		     struct cql_query *out)
{
	if (cql_read_long_string(c, &out->query) != 0)
		return -1;
	return read_params(c, version, a, &out->params);
}

int cql_decode_prepare(struct cursor *c, struct slice *query)
{
	return cql_read_long_string(c, query);
}

int cql_decode_execute(struct cursor *c, uint8_t version, struct arena *a,
		       struct cql_execute *out)
{
	if (cql_read_short_bytes(c, &out->id) != 0)
		return -1;
	out->result_metadata_id = slice_make(NULL, 0);
	if (version >= 5 &&
	    cql_read_short_bytes(c, &out->result_metadata_id) != 0)
		return -1;
	return read_params(c, version, a, &out->params);
}

static int read_batch_statement(struct cursor *c, uint8_t version,
				struct arena *a, struct cql_batch_statement *s)
{
	uint8_t kind;
	struct slice *names;
	if (cursor_u8(c, &kind) != 0)
		return proto_err("truncated batch statement");
	if (kind == 0) {
		if (cql_read_long_string(c, &s->query_or_id) != 0)
			return -1;
	} else if (kind == 1) {
		if (cql_read_short_bytes(c, &s->query_or_id) != 0)
			return -1;
	} else {
		return err_set(ERR_PROTOCOL, "invalid batch statement kind %u",
			       kind);
	}
	s->prepared = kind == 1;
	return read_values(c, version, a, false, &s->value_count, &s->values,
			   &names);
}

int cql_decode_batch(struct cursor *c, uint8_t version, struct arena *a,
		     struct cql_batch *out)
{
	memset(out, 0, sizeof(*out));
	out->serial_consistency = CQL_CL_SERIAL;
	if (cursor_u8(c, &out->type) != 0 ||
	    cql_read_short(c, &out->count) != 0)
		return proto_err("truncated batch");
	if (out->type > CQL_BATCH_COUNTER)
		return err_set(ERR_PROTOCOL, "invalid batch type %u",
			       out->type);
	out->statements = alloc_items(c, a, out->count, 5,
				      sizeof(*out->statements), "batch");
	if (out->count && !out->statements)
		return -1;
	for (uint16_t i = 0; i < out->count; i++)
		if (read_batch_statement(c, version, a, &out->statements[i]) !=
		    0)
			return -1;
	if (cql_read_short(c, &out->consistency) != 0 ||
	    read_flags(c, version, &out->flags) != 0)
		return proto_err("truncated batch parameters");
	if (out->flags & CQL_QF_VALUE_NAMES)
		return proto_err("named values are not supported in batches");
	if ((out->flags & CQL_QF_SERIAL_CONSISTENCY) &&
	    cql_read_short(c, &out->serial_consistency) != 0)
		return -1;
	if (out->flags & CQL_QF_DEFAULT_TIMESTAMP) {
		if (cql_read_long(c, &out->timestamp) != 0)
			return -1;
		out->has_timestamp = true;
	}
	return read_v5_tail(c, version, out->flags, &out->has_keyspace,
			    &out->keyspace, &out->has_now_in_seconds,
			    &out->now_in_seconds);
}

int cql_request_keyspace(const uint8_t *body, size_t len, uint8_t version,
			 uint8_t opcode, struct slice *keyspace)
{
	if (version < 5)
		return 0;
	struct cursor c = cursor_make(body, len);
	struct slice q;
	if (opcode == CQL_OP_PREPARE) {
		int32_t flags = 0;
		if (cql_read_long_string(&c, &q) != 0)
			return -1;
		if (cursor_left(&c) == 0)
			return 0; /* no flags: a v4-shaped PREPARE */
		if (cql_read_int(&c, &flags) != 0)
			return -1;
		if (!(flags & CQL_PREPARE_WITH_KEYSPACE))
			return 0;
		if (cql_read_string(&c, keyspace) != 0)
			return -1;
		if (keyspace->len == 0)
			return proto_err("Invalid empty keyspace in the "
					 "keyspace flag");
		return 1;
	}
	if (opcode != CQL_OP_QUERY && opcode != CQL_OP_BATCH)
		return 0;
	if (opcode == CQL_OP_QUERY) {
		/* the flags sit at a known place: decode the rest only
		 * when they name a keyspace */
		uint16_t cl;
		int32_t flags = 0;
		if (cql_read_long_string(&c, &q) != 0 ||
		    cql_read_short(&c, &cl) != 0 ||
		    cql_read_int(&c, &flags) != 0)
			return -1;
		if (!(flags & CQL_QF_KEYSPACE))
			return 0;
	}
	struct arena a;
	arena_create(&a, 0);
	c = cursor_make(body, len);
	int rc;
	if (opcode == CQL_OP_QUERY) {
		struct cql_query qq;
		rc = cql_decode_query(&c, version, &a, &qq);
		if (rc == 0 && qq.params.has_keyspace) {
			*keyspace = qq.params.keyspace;
			rc = 1;
		}
	} else {
		struct cql_batch b;
		rc = cql_decode_batch(&c, version, &a, &b);
		if (rc == 0 && b.has_keyspace) {
			*keyspace = b.keyspace;
			rc = 1;
		}
	}
	arena_destroy(&a);
	return rc;
}

struct slice cql_execute_result_metadata_id(const uint8_t *body, size_t len,
					    uint8_t version)
{
	struct cursor c = cursor_make(body, len);
	struct slice id, meta = slice_make(NULL, 0);
	if (version < 5 || cql_read_short_bytes(&c, &id) != 0 ||
	    cql_read_short_bytes(&c, &meta) != 0)
		return slice_make(NULL, 0);
	return meta;
}

int cql_decode_auth_response(struct cursor *c, struct cql_value *token)
{
	return cql_read_value(c, false, token);
}

/* ---- compression --------------------------------------------------------- */

int cql_lz4_compress(const uint8_t *src, size_t len, struct buf *out)
{
	if (len > (size_t)LZ4_MAX_INPUT_SIZE)
		return err_set(ERR_INVALID, "body too large to compress");
	int bound = LZ4_compressBound((int)len);
	uint8_t *p = buf_extend(out, 4 + (size_t)bound);
	if (!p)
		return -1;
	be32_store(p, (uint32_t)len);
	int n = LZ4_compress_default((const char *)src, (char *)p + 4, (int)len,
				     bound);
	if (n <= 0) {
		out->len -= 4 + (size_t)bound;
		return err_set(ERR_INVALID, "LZ4 compression failed");
	}
	out->len -= (size_t)(bound - n);
	return 0;
}

int cql_lz4_decompress(const uint8_t *src, size_t len, size_t max_len,
		       struct buf *out)
{
	if (len < 4)
		return proto_err(
			"compressed body shorter than its length prefix");
	uint32_t raw = be32_load(src);
	if (raw > max_len || raw > (uint32_t)LZ4_MAX_INPUT_SIZE)
		return err_set(ERR_PROTOCOL,
			       "decompressed body of %u bytes exceeds the "
			       "%zu-byte limit",
			       raw, max_len);
	if (len - 4 > (size_t)INT32_MAX)
		return proto_err("compressed body too large");
	if (raw == 0)
		return 0;
	uint8_t *dst = buf_extend(out, raw);
	if (!dst)
		return -1;
	int n = LZ4_decompress_safe((const char *)src + 4, (char *)dst,
				    (int)(len - 4), (int)raw);
	if (n < 0 || (uint32_t)n != raw) {
		out->len -= raw;
		return proto_err("corrupt LZ4 body");
	}
	return 0;
}
