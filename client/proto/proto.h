/*
 * CQL native protocol v3/v4/v5: frames (v5: envelopes), body primitives,
 * request decoding, response encoding and v5's segments. Pure codec: no
 * sockets, no state beyond one frame.
 *
 * Frame (doc/native_protocol_v4.spec §1-2), all integers big-endian:
 *
 *   0        1        2        4        5                 9
 *   +--------+--------+--------+--------+-----------------+------ ... ---+
 *   |version | flags  | stream | opcode | length (int32)  | body         |
 *   +--------+--------+--------+--------+-----------------+------ ... ---+
 *   version: 0x03/0x04/0x05 request, | 0x80 response. flags: 0x01
 *   compressed (LZ4: 4-byte uncompressed length + block; v3/v4 only), 0x02
 *   tracing, 0x04 custom payload, 0x08 warning, 0x10 beta (ignored).
 *
 * v5 calls this frame an envelope and, once the server has answered
 * STARTUP, carries envelopes inside checksummed segments (see "segments"
 * below); the envelope's own compression flag is not used.
 *
 * Decoders take untrusted bytes: every length is checked against what
 * remains before use, every count is capped by the bytes that could hold it
 * before anything is allocated, and decoded strings and values are borrowed
 * slices of the frame body (they live as long as the body does). Arrays are
 * allocated from the caller's arena.
 *
 * Versions other than 3, 4 and 5 are refused with the exact text drivers
 * look for when downgrading: "Invalid or unsupported protocol version (N);
 * supported versions are (3/v3, 4/v4, 5/v5)".
 */
#ifndef CASSINI_CLIENT_PROTO_H
#define CASSINI_CLIENT_PROTO_H

#include "common/arena.h"
#include "common/buf.h"
#include "common/inet.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CQL_HEADER_LEN   9
#define CQL_VERSION_MIN  3
#define CQL_VERSION_MAX  5
#define CQL_RESPONSE_BIT 0x80

enum cql_opcode {
	CQL_OP_ERROR = 0x00,
	CQL_OP_STARTUP = 0x01,
	CQL_OP_READY = 0x02,
	CQL_OP_AUTHENTICATE = 0x03,
	CQL_OP_OPTIONS = 0x05,
	CQL_OP_SUPPORTED = 0x06,
	CQL_OP_QUERY = 0x07,
	CQL_OP_RESULT = 0x08,
	CQL_OP_PREPARE = 0x09,
	CQL_OP_EXECUTE = 0x0A,
	CQL_OP_REGISTER = 0x0B,
	CQL_OP_EVENT = 0x0C,
	CQL_OP_BATCH = 0x0D,
	CQL_OP_AUTH_CHALLENGE = 0x0E,
	CQL_OP_AUTH_RESPONSE = 0x0F,
	CQL_OP_AUTH_SUCCESS = 0x10,
};

enum cql_frame_flag {
	CQL_FLAG_COMPRESSION = 0x01,
	CQL_FLAG_TRACING = 0x02,
	CQL_FLAG_CUSTOM_PAYLOAD = 0x04,
	CQL_FLAG_WARNING = 0x08,
};

enum cql_error_code {
	CQL_ERR_SERVER = 0x0000,
	CQL_ERR_PROTOCOL = 0x000A,
	CQL_ERR_BAD_CREDENTIALS = 0x0100,
	CQL_ERR_UNAVAILABLE = 0x1000,
	CQL_ERR_OVERLOADED = 0x1001,
	CQL_ERR_IS_BOOTSTRAPPING = 0x1002,
	CQL_ERR_TRUNCATE = 0x1003,
	CQL_ERR_WRITE_TIMEOUT = 0x1100,
	CQL_ERR_READ_TIMEOUT = 0x1200,
	CQL_ERR_READ_FAILURE = 0x1300,
	CQL_ERR_FUNCTION_FAILURE = 0x1400,
	CQL_ERR_WRITE_FAILURE = 0x1500,
	CQL_ERR_CDC_WRITE_FAILURE = 0x1600,
	CQL_ERR_CAS_WRITE_UNKNOWN = 0x1700, /* v5 */
	CQL_ERR_SYNTAX = 0x2000,
	CQL_ERR_UNAUTHORIZED = 0x2100,
	CQL_ERR_INVALID = 0x2200,
	CQL_ERR_CONFIG = 0x2300,
	CQL_ERR_ALREADY_EXISTS = 0x2400,
	CQL_ERR_UNPREPARED = 0x2500,
};

enum cql_consistency {
	CQL_CL_ANY = 0x0000,
	CQL_CL_ONE = 0x0001,
	CQL_CL_TWO = 0x0002,
	CQL_CL_THREE = 0x0003,
	CQL_CL_QUORUM = 0x0004,
	CQL_CL_ALL = 0x0005,
	CQL_CL_LOCAL_QUORUM = 0x0006,
	CQL_CL_EACH_QUORUM = 0x0007,
	CQL_CL_SERIAL = 0x0008,
	CQL_CL_LOCAL_SERIAL = 0x0009,
	CQL_CL_LOCAL_ONE = 0x000A,
};

/* Upper-case name ("QUORUM"), or NULL for an unknown code. */
const char *cql_consistency_name(uint16_t cl);

/* ---- frame header -------------------------------------------------------- */

struct cql_header {
	uint8_t version; /* 3, 4 or 5, direction bit removed */
	bool response;
	uint8_t flags;
	int16_t stream;
	uint8_t opcode;
	uint32_t length; /* body bytes */
};

enum cql_header_status {
	CQL_HEADER_OK = 0,
	CQL_HEADER_BAD_VERSION,   /* answer with cql_encode_version_error */
	CQL_HEADER_BAD_DIRECTION, /* a response sent to a server */
	CQL_HEADER_TOO_LARGE,     /* length above max_body */
};

/*
 * Decodes the 9 header bytes at p (the caller has them all). Fills `h`
 * even on failure so the error can carry the stream id.
 */
enum cql_header_status cql_header_decode(const uint8_t *p, uint32_t max_body,
					 struct cql_header *h);
void cql_header_encode(uint8_t *p, const struct cql_header *h);

/* ---- body primitives (spec §3) ------------------------------------------- */

/* [value] lengths with a meaning: */
#define CQL_VALUE_NULL  (-1)
#define CQL_VALUE_UNSET (-2) /* v4 only */

struct cql_value {
	int32_t len; /* >= 0, CQL_VALUE_NULL or CQL_VALUE_UNSET */
	const uint8_t *ptr;
};

struct cql_pair {
	struct slice key;
	struct slice value;
};

int cql_read_short(struct cursor *c, uint16_t *out);
int cql_read_int(struct cursor *c, int32_t *out);
int cql_read_long(struct cursor *c, int64_t *out);
int cql_read_string(struct cursor *c, struct slice *out); /* [string] */
int cql_read_long_string(struct cursor *c,
			 struct slice *out); /* [long string] */
int cql_read_short_bytes(struct cursor *c,
			 struct slice *out); /* [short bytes] */
/* [bytes] / [value]: negative lengths become null (and unset when
 * allow_unset). */
int cql_read_value(struct cursor *c, bool allow_unset, struct cql_value *out);
int cql_read_string_list(struct cursor *c, struct arena *a, struct slice **out,
			 uint16_t *count);
int cql_read_string_map(struct cursor *c, struct arena *a,
			struct cql_pair **out, uint16_t *count);

int cql_write_short(struct buf *b, uint16_t v);
int cql_write_int(struct buf *b, int32_t v);
int cql_write_long(struct buf *b, int64_t v);
int cql_write_string(struct buf *b, const char *s, size_t len);
int cql_write_cstring(struct buf *b, const char *s);
int cql_write_long_string(struct buf *b, const char *s, size_t len);
int cql_write_bytes(struct buf *b, const void *p, int32_t len); /* -1 null */
int cql_write_short_bytes(struct buf *b, const void *p, uint16_t len);
int cql_write_string_list(struct buf *b, const char *const *items, size_t n);
int cql_write_inet(struct buf *b, const struct inet_addr *a);

/* ---- requests ------------------------------------------------------------ */

enum cql_query_flag {
	CQL_QF_VALUES = 0x01,
	CQL_QF_SKIP_METADATA = 0x02,
	CQL_QF_PAGE_SIZE = 0x04,
	CQL_QF_PAGING_STATE = 0x08,
	CQL_QF_SERIAL_CONSISTENCY = 0x10,
	CQL_QF_DEFAULT_TIMESTAMP = 0x20,
	CQL_QF_VALUE_NAMES = 0x40,
	CQL_QF_KEYSPACE = 0x80,        /* v5 */
	CQL_QF_NOW_IN_SECONDS = 0x100, /* v5 */
};

/* PREPARE's flags (v5). */
#define CQL_PREPARE_WITH_KEYSPACE 0x01

/* The parameters QUERY and EXECUTE share (and BATCH in part). */
struct cql_query_params {
	uint16_t consistency;
	uint32_t flags; /* a [byte] before v5, an [int] from v5 */
	uint16_t value_count;
	struct cql_value *values;
	struct slice *value_names; /* only with CQL_QF_VALUE_NAMES */
	int32_t page_size;         /* -1 when absent */
	bool has_paging_state;
	struct slice paging_state;
	uint16_t serial_consistency; /* SERIAL when absent */
	bool has_timestamp;
	int64_t timestamp;
	/* v5: the keyspace to resolve names in instead of the connection's
	 * (the server hands it over as cql_request_info.keyspace), and the
	 * client's "now" (read, not used: expiry follows the node's clock) */
	bool has_keyspace;
	struct slice keyspace;
	bool has_now_in_seconds;
	int32_t now_in_seconds;
};

struct cql_query {
	struct slice query;
	struct cql_query_params params;
};

struct cql_execute {
	struct slice id;
	struct slice result_metadata_id; /* v5; empty before */
	struct cql_query_params params;
};

enum cql_batch_type {
	CQL_BATCH_LOGGED = 0,
	CQL_BATCH_UNLOGGED = 1,
	CQL_BATCH_COUNTER = 2,
};

struct cql_batch_statement {
	bool prepared; /* id holds a prepared id, else query text */
	struct slice query_or_id;
	uint16_t value_count;
	struct cql_value *values;
};

struct cql_batch {
	uint8_t type;
	uint16_t count;
	struct cql_batch_statement *statements;
	uint16_t consistency;
	uint32_t flags;
	uint16_t serial_consistency;
	bool has_timestamp;
	int64_t timestamp;
	bool has_keyspace; /* v5, as in cql_query_params */
	struct slice keyspace;
	bool has_now_in_seconds;
	int32_t now_in_seconds;
};

/*
 * Request body decoders. `version` is the connection's. On failure they
 * return -1 with ERR_PROTOCOL and a message fit for a Protocol_error reply.
 * The body must outlive the result; arrays come from `a`.
 */
int cql_decode_startup(struct cursor *c, struct arena *a,
		       struct cql_pair **opts, uint16_t *count);
int cql_decode_register(struct cursor *c, struct arena *a,
			struct slice **events, uint16_t *count);
int cql_decode_query(struct cursor *c, uint8_t version, struct arena *a,
		     struct cql_query *out);
/* The query only: v5's flags and keyspace after it are left unread (the
 * server reads them with cql_request_keyspace). */
int cql_decode_prepare(struct cursor *c, struct slice *query);
int cql_decode_execute(struct cursor *c, uint8_t version, struct arena *a,
		       struct cql_execute *out);
int cql_decode_batch(struct cursor *c, uint8_t version, struct arena *a,
		     struct cql_batch *out);
int cql_decode_auth_response(struct cursor *c, struct cql_value *token);

/*
 * v5: the keyspace a QUERY, PREPARE or BATCH body names with its keyspace
 * flag. 1 with *keyspace set when it names one, 0 when not (or for another
 * opcode or version), -1 on a malformed body (ERR_PROTOCOL).
 */
int cql_request_keyspace(const uint8_t *body, size_t len, uint8_t version,
			 uint8_t opcode, struct slice *keyspace);
/* v5: an EXECUTE body's result_metadata_id (an empty slice before v5 or
 * when the body is too short to hold one). */
struct slice cql_execute_result_metadata_id(const uint8_t *body, size_t len,
					    uint8_t version);

/* Skips a custom payload ([bytes map]) at the start of a request body. */
int cql_skip_custom_payload(struct cursor *c);

/* ---- compression (LZ4; v4 §5) -------------------------------------------- */

/* Body := 4-byte big-endian uncompressed length + LZ4 block. Decompression
 * refuses an uncompressed length above max_len. */
int cql_lz4_compress(const uint8_t *src, size_t len, struct buf *out);
int cql_lz4_decompress(const uint8_t *src, size_t len, size_t max_len,
		       struct buf *out);

/* ---- responses ----------------------------------------------------------- */

/* Starts a frame in `b` (header with a placeholder length); returns its
 * offset for cql_frame_end, or -1. */
long cql_frame_begin(struct buf *b, uint8_t version, uint8_t flags,
		     int16_t stream, uint8_t opcode);
/* Patches the body length of the frame started at `start`. */
void cql_frame_end(struct buf *b, long start);

/* Whole frames, appended to `b`. */
int cql_encode_ready(struct buf *b, uint8_t version, int16_t stream);
/* SUPPORTED: CQL_VERSION, COMPRESSION and PROTOCOL_VERSIONS. */
int cql_encode_supported(struct buf *b, uint8_t version, int16_t stream,
			 const char *cql_version, bool lz4);
int cql_encode_error(struct buf *b, uint8_t version, int16_t stream,
		     uint32_t code, const char *msg);
/* The refusal drivers downgrade on: always a v4 frame. */
int cql_encode_version_error(struct buf *b, int16_t stream,
			     unsigned asked_version);
int cql_encode_unavailable(struct buf *b, uint8_t version, int16_t stream,
			   const char *msg, uint16_t cl, int32_t required,
			   int32_t alive);
/* write_type: SIMPLE, BATCH, UNLOGGED_BATCH, COUNTER, BATCH_LOG, CAS, VIEW,
 * CDC — the driver rejects anything else. */
int cql_encode_write_timeout(struct buf *b, uint8_t version, int16_t stream,
			     const char *msg, uint16_t cl, int32_t received,
			     int32_t block_for, const char *write_type);
int cql_encode_read_timeout(struct buf *b, uint8_t version, int16_t stream,
			    const char *msg, uint16_t cl, int32_t received,
			    int32_t block_for, bool data_present);
int cql_encode_read_failure(struct buf *b, uint8_t version, int16_t stream,
			    const char *msg, uint16_t cl, int32_t received,
			    int32_t block_for, int32_t failures,
			    bool data_present);
int cql_encode_write_failure(struct buf *b, uint8_t version, int16_t stream,
			     const char *msg, uint16_t cl, int32_t received,
			     int32_t block_for, int32_t failures,
			     const char *write_type);

/* v5 replaces the failure count with a reason map: each failed replica's
 * address and why (RequestFailureReason's codes). The functions above
 * write an empty map in v5 (the caller did not say which replicas
 * failed); these write `n` reasons (and n as the count before v5). */
enum cql_failure_code {
	CQL_FAILURE_UNKNOWN = 0x0000,
	CQL_FAILURE_READ_TOO_MANY_TOMBSTONES = 0x0001,
	CQL_FAILURE_TIMEOUT = 0x0002,
	CQL_FAILURE_INCOMPATIBLE_SCHEMA = 0x0003,
	CQL_FAILURE_READ_SIZE = 0x0004,
	CQL_FAILURE_NODE_DOWN = 0x0005,
	CQL_FAILURE_INDEX_NOT_AVAILABLE = 0x0006,
};
struct cql_failure_reason {
	struct inet_addr endpoint; /* the port is not sent */
	uint16_t code;
};
int cql_encode_read_failure_reasons(struct buf *b, uint8_t version,
				    int16_t stream, const char *msg,
				    uint16_t cl, int32_t received,
				    int32_t block_for,
				    const struct cql_failure_reason *reasons,
				    size_t n, bool data_present);
int cql_encode_write_failure_reasons(struct buf *b, uint8_t version,
				     int16_t stream, const char *msg,
				     uint16_t cl, int32_t received,
				     int32_t block_for,
				     const struct cql_failure_reason *reasons,
				     size_t n, const char *write_type);
/* A CAS whose proposal some replicas accepted, but not a quorum: v5's
 * CAS_WRITE_UNKNOWN (<cl><received><blockfor>); before v5 a WriteTimeout
 * with write type CAS, as Cassandra answers v3/v4 connections. */
int cql_encode_cas_write_unknown(struct buf *b, uint8_t version, int16_t stream,
				 const char *msg, uint16_t cl, int32_t received,
				 int32_t block_for);
/* table "" for a keyspace. */
int cql_encode_already_exists(struct buf *b, uint8_t version, int16_t stream,
			      const char *msg, const char *keyspace,
			      const char *table);
int cql_encode_unprepared(struct buf *b, uint8_t version, int16_t stream,
			  const char *msg, const uint8_t *id, uint16_t id_len);

/* RESULT kinds. */
enum cql_result_kind {
	CQL_RESULT_VOID = 0x0001,
	CQL_RESULT_ROWS = 0x0002,
	CQL_RESULT_SET_KEYSPACE = 0x0003,
	CQL_RESULT_PREPARED = 0x0004,
	CQL_RESULT_SCHEMA_CHANGE = 0x0005,
};

int cql_encode_result_void(struct buf *b, uint8_t version, int16_t stream);
/* Adds one warning to a complete, uncompressed response frame (v4 and
 * later; v3 frames are left alone): the WARNING flag and a [string list]
 * before the body. */
int cql_frame_add_warning(struct buf *frame, const char *warning);
/* Marks a complete, uncompressed response frame as traced (v4 §2.2): the
 * TRACING flag and the 16-byte session id first in the body, before any
 * warnings. Call it last, after every cql_frame_add_warning. A frame
 * already traced or shorter than a header is refused (-1, ERR_INVALID). */
int cql_frame_add_tracing_id(struct buf *frame, const uint8_t id[16]);
int cql_encode_result_set_keyspace(struct buf *b, uint8_t version,
				   int16_t stream, const char *keyspace);

/* Schema change target: KEYSPACE, TABLE, TYPE, FUNCTION, AGGREGATE. name is
 * NULL for a KEYSPACE. (Functions and aggregates are not supported.) */
int cql_encode_schema_change_body(struct buf *b, const char *change,
				  const char *target, const char *keyspace,
				  const char *name);
int cql_encode_result_schema_change(struct buf *b, uint8_t version,
				    int16_t stream, const char *change,
				    const char *target, const char *keyspace,
				    const char *name);

/* EVENT pushes (stream -1). */
int cql_encode_event_topology(struct buf *b, uint8_t version,
			      const char *change, /* NEW_NODE, REMOVED_NODE */
			      const struct inet_addr *node);
int cql_encode_event_status(struct buf *b, uint8_t version,
			    const char *change, /* UP, DOWN */
			    const struct inet_addr *node);
int cql_encode_event_schema(struct buf *b, uint8_t version, const char *change,
			    const char *target, const char *keyspace,
			    const char *name);

/* Type [option]s for result and bind metadata (§4.2.5.2). */
enum cql_type_id {
	CQL_TYPE_CUSTOM = 0x0000,
	CQL_TYPE_ASCII = 0x0001,
	CQL_TYPE_BIGINT = 0x0002,
	CQL_TYPE_BLOB = 0x0003,
	CQL_TYPE_BOOLEAN = 0x0004,
	CQL_TYPE_COUNTER = 0x0005,
	CQL_TYPE_DECIMAL = 0x0006,
	CQL_TYPE_DOUBLE = 0x0007,
	CQL_TYPE_FLOAT = 0x0008,
	CQL_TYPE_INT = 0x0009,
	CQL_TYPE_TIMESTAMP = 0x000B,
	CQL_TYPE_UUID = 0x000C,
	CQL_TYPE_VARCHAR = 0x000D,
	CQL_TYPE_VARINT = 0x000E,
	CQL_TYPE_TIMEUUID = 0x000F,
	CQL_TYPE_INET = 0x0010,
	CQL_TYPE_DATE = 0x0011,
	CQL_TYPE_TIME = 0x0012,
	CQL_TYPE_SMALLINT = 0x0013,
	CQL_TYPE_TINYINT = 0x0014,
	CQL_TYPE_DURATION = 0x0015,
	CQL_TYPE_LIST = 0x0020,
	CQL_TYPE_MAP = 0x0021,
	CQL_TYPE_SET = 0x0022,
	CQL_TYPE_UDT = 0x0030,
	CQL_TYPE_TUPLE = 0x0031,
};

/* A type tree as the wire describes it. list/set use sub[0]; map uses
 * sub[0] (key) and sub[1] (value). A tuple has `count` components in
 * `subs`; a UDT its keyspace, name and `count` fields (field_names,
 * subs). */
struct cql_type_option {
	uint16_t id;
	const char *custom_class; /* CQL_TYPE_CUSTOM only */
	const struct cql_type_option *sub[2];
	uint16_t count;
	const struct cql_type_option *const *subs;
	const char *keyspace, *name;    /* UDT */
	const char *const *field_names; /* UDT */
};

int cql_write_type_option(struct buf *b, const struct cql_type_option *t);

struct cql_column_spec {
	const char *keyspace;
	const char *table;
	const char *name;
	const struct cql_type_option *type;
};

enum cql_rows_flag {
	CQL_ROWS_GLOBAL_TABLES_SPEC = 0x0001,
	CQL_ROWS_HAS_MORE_PAGES = 0x0002,
	CQL_ROWS_NO_METADATA = 0x0004,
	CQL_ROWS_METADATA_CHANGED = 0x0008, /* v5: new_metadata_id follows */
};

/* v5's result_metadata_id: a hash of the column specs a Rows result
 * describes (as cql_write_rows_metadata writes them). */
#define CQL_METADATA_ID_LEN 16
int cql_result_metadata_id(const struct cql_column_spec *cols, size_t ncols,
			   uint8_t id[CQL_METADATA_ID_LEN]);

/*
 * v5 EXECUTE: `frame` is a whole, uncompressed response. When it is a Rows
 * result whose metadata hashes to something other than `client_id` (the
 * id the client sent), sets METADATA_CHANGED and inserts the new id, so the
 * driver learns the statement's columns changed (a column added to a
 * SELECT * table). Anything else is left alone. 0, or -1 on ERR_NOMEM.
 */
int cql_frame_mark_metadata_changed(struct buf *frame, struct slice client_id);
/* Whether cql_frame_mark_metadata_changed would change `frame` (so that
 * a reply is copied only then). */
bool cql_frame_metadata_stale(const uint8_t *frame, size_t len,
			      struct slice client_id);

/*
 * Rows metadata. Uses the global table spec when every column shares one
 * keyspace and table. paging_state may be NULL.
 */
int cql_write_rows_metadata(struct buf *b, const struct cql_column_spec *cols,
			    size_t ncols, const struct slice *paging_state,
			    bool no_metadata);

/*
 * PREPARED body after the kind: id, (v5) result_metadata_id, bind metadata
 * (with partition-key indexes so token-aware drivers route), result
 * metadata.
 */
int cql_write_prepared(struct buf *b, uint8_t version, const uint8_t *id,
		       uint16_t id_len, const struct cql_column_spec *binds,
		       size_t nbinds, const uint16_t *pk_indexes, size_t npk,
		       const struct cql_column_spec *results, size_t nresults);

/* ---- v5 segments (native_protocol_v5.spec §2, "frames" there) ------------
 *
 * After the server answers a v5 STARTUP (READY or AUTHENTICATE), both
 * directions carry envelopes in segments:
 *
 *   header: 3 bytes little-endian, bits 0-16 payload length, bit 17
 *           self-contained; with LZ4, 5 bytes: bits 0-16 compressed length,
 *           17-33 uncompressed length (0: sent uncompressed), bit 34
 *           self-contained
 *   CRC24 of the header bytes (3 bytes little-endian)
 *   payload (at most 128 KiB - 1 bytes; an LZ4 block when compressed)
 *   CRC32 of the payload, seeded with the bytes fa 2d 55 ca (4 bytes LE)
 *
 * A self-contained segment holds whole envelopes; a larger envelope is
 * cut into segments that are not.
 */
#define CQL_SEGMENT_MAX_PAYLOAD ((128u << 10) - 1)

/* CRC24 (polynomial 0x1974f0b, init 0x875060) over the first `len` bytes
 * of `bytes` read little-endian, as the header is. */
uint32_t cql_crc24(uint64_t bytes, int len);
/* CRC32 (IEEE) of fa 2d 55 ca followed by p[0, n). */
uint32_t cql_segment_crc32(const uint8_t *p, size_t n);

/* Appends envelope bytes p[0, n) as segments to `out`: one self-contained
 * segment when they fit, else segments of the maximum payload. With lz4,
 * each payload is compressed unless that does not make it smaller. */
int cql_segment_encode(struct buf *out, const uint8_t *p, size_t n, bool lz4);

enum cql_segment_status {
	CQL_SEGMENT_OK = 0,
	CQL_SEGMENT_PARTIAL, /* need more bytes */
	CQL_SEGMENT_CORRUPT, /* err says why; the connection must close */
};

/* Decodes the segment at the start of p[0, n): on OK appends its payload
 * (decompressed) to `payload` and sets *used and *self_contained. */
enum cql_segment_status cql_segment_decode(const uint8_t *p, size_t n, bool lz4,
					   struct buf *payload, size_t *used,
					   bool *self_contained);

#endif
