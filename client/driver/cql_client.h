/*
 * A C client for the CQL native protocol v4, on libevent.
 *
 * Two layers:
 *
 * 1. A pure codec (cql_client_codec.c): request encoders (STARTUP, OPTIONS,
 *    QUERY, PREPARE, EXECUTE) and a response decoder for READY, ERROR
 *    (code + message) and RESULT (void, rows, set_keyspace, prepared with its
 *    partition-key indexes, schema_change). The decoder takes untrusted
 *    bytes: every length is checked against what remains, every count is
 *    capped by the bytes that could hold it before an array is allocated, and
 *    decoded slices borrow the frame body.
 *
 * 2. A client (cql_client.c): a pool of connections per host, many requests
 *    in flight per connection (stream ids), prepared statements, per-request
 *    consistency, and token-aware routing. After the first connection is up
 *    the client reads system.local and system.peers_v2 (or system.peers),
 *    connects to the peers it did not know, and sends an EXECUTE whose
 *    statement has partition-key bind indexes to the primary replica of the
 *    Murmur3 token of the bound key (any ready host when that one has no
 *    ready connection).
 *
 * Threads: a client lives on one event_base and is used from its thread
 * only. Every callback runs on that loop. The *_sync helpers run the loop
 * themselves until their answer arrives; they are for simple tools and must
 * not be called from a callback.
 *
 * Not supported: authentication, compressing requests (LZ4 responses are
 * negotiated on request and decompressed), paging beyond the first page,
 * events, BATCH, protocol versions other than 4.
 */
#ifndef CASSINI_CLIENT_CQL_CLIENT_H
#define CASSINI_CLIENT_CQL_CLIENT_H

#include "client/proto/proto.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/inet.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

/* ---- codec --------------------------------------------------------------- */

#define CQL_CLIENT_VERSION 4

/* A column of a rows result or a bind marker of a prepared statement. */
struct cql_client_column {
	struct slice keyspace;
	struct slice table;
	struct slice name;
	uint16_t type; /* top-level enum cql_type_id */
};

struct cql_client_rows {
	int32_t flags; /* enum cql_rows_flag */
	int32_t column_count;
	struct cql_client_column *columns; /* NULL with NO_METADATA */
	struct slice paging_state;         /* empty unless HAS_MORE_PAGES */
	int32_t row_count;
	/* row_count * column_count values, row-major; borrowed from the body.
	 */
	struct cql_value *values;
};

struct cql_client_prepared_meta {
	struct slice id;
	int32_t bind_count;
	struct cql_client_column *binds;
	int32_t pk_count;
	uint16_t *pk_indexes; /* bind positions of the partition key parts */
	int32_t result_column_count;
};

struct cql_client_schema_change {
	struct slice change; /* CREATED, UPDATED, DROPPED */
	struct slice target; /* KEYSPACE, TABLE, ... */
	struct slice keyspace;
	struct slice name; /* empty for a KEYSPACE */
};

/* One decoded response. Slices borrow the body; arrays come from the arena
 * passed to the decoder. */
struct cql_client_response {
	uint8_t opcode; /* CQL_OP_READY, CQL_OP_ERROR, CQL_OP_RESULT, ... */
	/* ERROR */
	int32_t error_code; /* enum cql_error_code */
	struct slice error_message;
	/* RESULT */
	int32_t kind; /* enum cql_result_kind */
	struct cql_client_rows rows;
	struct cql_client_prepared_meta prepared;
	struct slice keyspace; /* SET_KEYSPACE */
	struct cql_client_schema_change schema_change;
};

/* The value at (row, col) of a rows result, or NULL out of range. */
const struct cql_value *cql_client_rows_cell(const struct cql_client_rows *r,
					     int32_t row, int32_t col);
/* A signed big-endian integer of 1, 2, 4 or 8 bytes (tinyint, smallint, int,
 * bigint, counter, timestamp). 0, or -1 (ERR_INVALID) for null or another
 * length. */
int cql_client_value_int(const struct cql_value *v, int64_t *out);
/* Text and blob values are their bytes: a borrowed slice (empty for null). */
struct slice cql_client_value_bytes(const struct cql_value *v);

/* Frame header of a response: version 4 with the response bit. Returns 0
 * and fills `h`, or -1 (ERR_PROTOCOL) for a wrong version or direction, or
 * a body longer than max_body. `p` holds CQL_HEADER_LEN bytes. */
int cql_client_header_decode(const uint8_t *p, uint32_t max_body,
			     struct cql_header *h);

/*
 * Decodes a response body (already decompressed) of `opcode` with the
 * header `flags` (tracing id, warnings and custom payload are skipped).
 * Returns 0, or -1 with ERR_PROTOCOL and a message naming what was wrong;
 * `out` is then unspecified. Never reads outside [body, body + len).
 */
int cql_client_response_decode(uint8_t opcode, uint8_t flags,
			       const uint8_t *body, size_t len, struct arena *a,
			       struct cql_client_response *out);

/* Request frames, appended whole to `b` (or `b` unchanged on failure). */
/* `lz4`: asks for LZ4 frame compression (COMPRESSION: lz4). */
int cql_client_encode_startup(struct buf *b, int16_t stream, bool lz4);
int cql_client_encode_options(struct buf *b, int16_t stream);
/* AUTH_RESPONSE with a SASL PLAIN token: NUL user NUL password. */
int cql_client_encode_auth_response(struct buf *b, int16_t stream,
				    const char *user, const char *password);
int cql_client_encode_query(struct buf *b, int16_t stream, const char *query,
			    uint16_t consistency,
			    const struct cql_value *values, uint16_t nvalues);
int cql_client_encode_prepare(struct buf *b, int16_t stream, const char *query);
/* Sets SKIP_METADATA: rows results come without column specs. */
int cql_client_encode_execute(struct buf *b, int16_t stream, const uint8_t *id,
			      uint16_t id_len, uint16_t consistency,
			      const struct cql_value *values, uint16_t nvalues);

/* "Unavailable", "WriteTimeout", ... for a protocol error code; "Error(0x..)"
 * style names are not produced: unknown codes give "Unknown". */
const char *cql_client_error_name(int32_t code);
/* "ONE", "QUORUM", ... (case-insensitive); 0 or -1 (ERR_INVALID). */
int cql_client_consistency_parse(const char *name, uint16_t *out);

/* ---- client -------------------------------------------------------------- */

struct cql_client;
struct cql_client_prepared;

struct cql_client_config {
	const struct inet_addr *contact_points; /* copied */
	size_t contact_count;
	int connections_per_host;       /* >= 1 */
	int max_streams_per_connection; /* 1..32768 */
	uint64_t connect_timeout_ms;
	uint64_t request_timeout_ms;
	uint32_t max_frame_size;
	bool token_aware;    /* route EXECUTEs to the primary replica */
	bool discover_peers; /* connect to hosts found in system.peers */
	bool lz4;            /* negotiate LZ4: responses come compressed */
	/* PasswordAuthenticator's credentials (SASL PLAIN in AUTH_RESPONSE
	 * when a server answers STARTUP with AUTHENTICATE); copied. NULL:
	 * none, and such a server's connections fail. */
	const char *username, *password;
	/* TLS (a server with client_encryption_options): a context from
	 * cql_client_tls_new, borrowed (it outlives the client); NULL:
	 * plaintext. */
	struct ssl_ctx_st *tls;
	/* With tls: the server's certificate must also name the address
	 * connected to (an IP subjectAltName), as drivers' check_hostname;
	 * for a contact point with a name in contact_names, that name (a DNS
	 * subjectAltName). */
	bool tls_check_hostname;
	/* NULL, or per contact point the host name it was resolved from
	 * (NULL or "": none); copied. */
	const char *const *contact_names;
};

/* "host", "host:port", an IPv4/IPv6 literal or "[v6]:port" as an address
 * (`default_port` without a port): a literal as it is, a host name by
 * getaddrinfo, its first IPv4 address, else its first. Blocking: call it
 * before the event loop runs. `name` (`cap` bytes) gets the host name,
 * "" for a literal. 0 or -1 (ERR_INVALID naming the host). */
int cql_client_resolve(const char *text, uint16_t default_port,
		       struct inet_addr *out, char *name, size_t cap);

/* A TLS client context: the server's certificate must chain to the PEM
 * `truststore` (NULL or "": not verified); `keystore` (NULL: none) is our
 * key and certificate for servers with require_client_auth. NULL with
 * err set (ERR_CONFIG naming the file). */
struct ssl_ctx_st;
struct ssl_ctx_st *cql_client_tls_new(const char *truststore,
				      const char *keystore,
				      const char *keystore_password);
void cql_client_tls_free(struct ssl_ctx_st *ctx);

/* 1 connection per host, 1024 streams, 5 s connect, 12 s request timeout,
 * 256 MiB frames, token-aware, discovering peers. */
void cql_client_config_defaults(struct cql_client_config *c);

/* How a request ended. */
enum cql_client_status {
	CQL_CLIENT_OK = 0,       /* a response arrived (may be ERROR) */
	CQL_CLIENT_TIMEOUT,      /* no response within request_timeout_ms */
	CQL_CLIENT_CONNECTION,   /* the connection failed or closed */
	CQL_CLIENT_NO_HOST,      /* no host has a ready connection */
	CQL_CLIENT_BAD_RESPONSE, /* the response did not decode */
};

/* "ClientTimeout", "ConnectionClosed", "NoHostAvailable", "BadResponse". */
const char *cql_client_status_name(enum cql_client_status s);

/*
 * Completion of one request. `resp` is NULL unless status is
 * CQL_CLIENT_OK; it and everything it points to live only during the call.
 * `message` explains a non-OK status (borrowed, call-long).
 */
typedef void (*cql_client_cb)(void *arg, enum cql_client_status status,
			      const struct cql_client_response *resp,
			      const char *message);

/* Copies the config. Connects nothing yet. NULL with err set. The base must
 * outlive the client. */
struct cql_client *cql_client_new(struct event_base *base,
				  const struct cql_client_config *config);
/* Closes every connection; requests in flight complete with
 * CQL_CLIENT_CONNECTION, and so do requests their callbacks submit. Prepared
 * statements are freed. Not from a callback. NULL is ignored. */
void cql_client_delete(struct cql_client *c);

/*
 * Opens the pools of the contact points, then (on the first ready
 * connection) reads the topology and opens the pools of discovered peers.
 * `done` runs once: status 0 when at least one connection is ready, else -1
 * and a message.
 */
typedef void (*cql_client_done_cb)(void *arg, int status, const char *message);
void cql_client_connect(struct cql_client *c, cql_client_done_cb done,
			void *arg);

/* Ready connections across hosts, and hosts known. */
size_t cql_client_ready_connections(const struct cql_client *c);
size_t cql_client_host_count(const struct cql_client *c);

/* A QUERY (text statement) to any ready host. Values are copied. */
void cql_client_query(struct cql_client *c, const char *query,
		      uint16_t consistency, const struct cql_value *values,
		      uint16_t nvalues, cql_client_cb cb, void *arg);

/*
 * PREPAREs `query` on every host with a ready connection. `done` gets the
 * statement (owned by the client, live until cql_client_delete) or NULL
 * with the first failure (status and response as for a request).
 */
typedef void (*cql_client_prepared_cb)(void *arg,
				       struct cql_client_prepared *stmt,
				       enum cql_client_status status,
				       const struct cql_client_response *resp,
				       const char *message);
void cql_client_prepare(struct cql_client *c, const char *query,
			cql_client_prepared_cb done, void *arg);

int32_t cql_client_prepared_bind_count(const struct cql_client_prepared *p);

/* EXECUTEs a prepared statement with `nvalues` bound values (copied) at
 * `consistency`, routed by the token of its partition key. */
void cql_client_execute(struct cql_client *c,
			const struct cql_client_prepared *p,
			const struct cql_value *values, uint16_t nvalues,
			uint16_t consistency, cql_client_cb cb, void *arg);

/* Token of the partition key that `values` bind for `p` (false when the
 * statement has no partition-key indexes or a part is null). */
bool cql_client_routing_token(const struct cql_client_prepared *p,
			      const struct cql_value *values, uint16_t nvalues,
			      int64_t *token);

/* Index of the host (0..host_count-1) that a token routes to, or -1. */
int cql_client_host_for_token(const struct cql_client *c, int64_t token);
/* The host's native-protocol address. */
struct inet_addr cql_client_host_address(const struct cql_client *c,
					 size_t host);

/* ---- blocking helpers (simple tools; not from a callback) ---------------- */

/* A response kept past its callback: the body is copied and decoded again
 * into `arena`. Zero-initialise, then cql_client_result_free. */
struct cql_client_result {
	enum cql_client_status status;
	char message[256]; /* non-OK status, or an ERROR's message */
	struct buf body;
	struct arena arena;
	struct cql_client_response resp;
	struct cql_client_prepared *prepared; /* cql_client_prepare_sync */
};
void cql_client_result_free(struct cql_client_result *r);

/* 0 when connected, else -1 with err set. */
int cql_client_connect_sync(struct cql_client *c);
/* 0 when a response arrived that is not an ERROR, else -1 with err set
 * (ERR_TIMEOUT, ERR_IO, ERR_PROTOCOL, or ERR_INVALID for a server error whose
 * name and message are in the text). `out` may be NULL. */
int cql_client_query_sync(struct cql_client *c, const char *query,
			  uint16_t consistency, struct cql_client_result *out);
struct cql_client_prepared *cql_client_prepare_sync(struct cql_client *c,
						    const char *query);
int cql_client_execute_sync(struct cql_client *c,
			    const struct cql_client_prepared *p,
			    const struct cql_value *values, uint16_t nvalues,
			    uint16_t consistency,
			    struct cql_client_result *out);

/*
 * Waits until every host with a ready connection reports the same
 * schema_version in its system.local and in every row of its system.peers
 * (both read through that host; peers the client cannot reach skipped),
 * polling every 200 ms for up to timeout_ms. 0, or -1 (ERR_TIMEOUT).
 */
int cql_client_wait_schema_agreement(struct cql_client *c, uint64_t timeout_ms);

#endif
