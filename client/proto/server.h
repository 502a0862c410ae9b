/*
 * The CQL native-protocol server: connections, framing and the handshake.
 *
 * It owns everything a driver sees before a statement runs: version
 * negotiation (v3/v4; anything else gets the refusal drivers downgrade on),
 * OPTIONS/SUPPORTED at any time, STARTUP (CQL_VERSION 3.x, COMPRESSION
 * lz4), REGISTER for events, LZ4 frames, and the limits: frame size checked
 * before anything is allocated, a connection cap, a cap on requests in
 * flight per connection (the server stops reading: back-pressure) and on
 * bytes in flight across connections (Overloaded), and handshake and idle
 * timeouts.
 *
 * Statements (QUERY, PREPARE, EXECUTE, BATCH) go to an executor, which
 * answers later, possibly after replicas have replied, with
 * cql_request_reply(). A request stays valid until replied to, even if its
 * connection closes meanwhile (the reply is then dropped).
 *
 * Threads: everything runs on the event loop the server was created with.
 */
#ifndef CASSINI_CLIENT_SERVER_H
#define CASSINI_CLIENT_SERVER_H

#include "client/proto/proto.h"
#include "common/inet.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct cql_server;
struct cql_request;

/* What a statement needs from its connection. */
struct cql_request_info {
	uint8_t version;
	int16_t stream;
	uint8_t opcode;       /* QUERY, PREPARE, EXECUTE or BATCH */
	const char *keyspace; /* the connection's USE keyspace, or NULL */
	struct inet_addr client;
	/* The role the connection logged in as; NULL when no authenticator
	 * is configured (Cassandra's anonymous user). */
	const char *user;
	/* Set only by callers inside the node (the role manager's own
	 * statements on system_auth, the tracer's writes to system_traces);
	 * never by a connection. An internal request skips the authorizer
	 * and the data path's batch size guards (batch_size_warn_threshold,
	 * batch_size_fail_threshold). */
	bool internal;
	/* The client set the frame's TRACING flag: whoever wraps the
	 * executor opens a trace session and answers with its id. */
	bool tracing;
	/* The open trace session's events, or NULL when untraced. */
	struct cql_trace *trace;
};

/* A trace session's sink (system_traces.events): the executor and the
 * data path tell it what they do; the wrapper that opened the session
 * stamps, stores and writes the events. Called on the loop thread. */
struct cql_trace {
	void (*event)(struct cql_trace *t, const char *activity);
	uint8_t id[16]; /* the session id: internode requests carry it */
};

/* One event in `info`'s trace session, if it has one (printf format). */
void cql_trace_event(const struct cql_request_info *info, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

struct cql_auth_attempt;

/*
 * An authenticator (PasswordAuthenticator): the server answers STARTUP with
 * AUTHENTICATE naming `class_name`, and hands each AUTH_RESPONSE token to
 * authenticate(), which calls cql_auth_attempt_done() exactly once, now or
 * later, on the server's loop thread. Until one succeeds, the connection
 * refuses every other message as Cassandra does.
 */
struct cql_authenticator {
	const char *class_name;
	void (*authenticate)(void *arg, struct cql_auth_attempt *at,
			     const uint8_t *token, size_t len,
			     const struct inet_addr *client);
	void *arg;
};

/* `role` non-NULL: logged in as it (AUTH_SUCCESS). NULL: refused with
 * `code` (Bad credentials: CQL_ERR_BAD_CREDENTIALS) and `msg`, after the
 * server's failure delay. A closed connection drops the answer. */
void cql_auth_attempt_done(struct cql_auth_attempt *at, const char *role,
			   uint32_t code, const char *msg);

struct cql_executor {
	/*
	 * A statement arrived. `body` is the decoded-from bytes (decompressed,
	 * custom payload skipped); it stays valid until the reply. The
	 * executor must call cql_request_reply() exactly once, now or later.
	 */
	void (*execute)(void *arg, struct cql_request *req,
			const struct cql_request_info *info,
			const uint8_t *body, size_t len);
	void *arg;
	/* The executor opens trace sessions (info->tracing). Without it a
	 * statement with the TRACING flag is refused, not run untraced. */
	bool traces;
};

struct ssl_ctx_st;

struct cql_server_config {
	struct inet_addr address;        /* rpc_address:native_transport_port */
	uint32_t max_frame_size;         /* body bytes accepted */
	int max_connections;             /* -1: unlimited */
	int max_requests_per_connection; /* in flight before reading stops */
	uint64_t max_inflight_bytes;   /* across connections, then Overloaded */
	uint64_t handshake_timeout_ms; /* until STARTUP */
	uint64_t idle_timeout_ms;      /* 0: never */
	const char *cql_version;       /* advertised, e.g. "3.4.5" */
	/* NULL: AllowAllAuthenticator. Copied; must outlive the server. */
	const struct cql_authenticator *authenticator;
	/* A refused AUTH_RESPONSE is answered this much later (a timer on
	 * the loop, nothing blocks). */
	uint64_t auth_failure_delay_ms;
	/* TLS (client_encryption_options): NULL for plain connections;
	 * else every connection speaks TLS, or with tls_optional those
	 * whose first byte starts a TLS handshake. The context
	 * (cql_tls_context_new) must outlive the server. */
	struct ssl_ctx_st *tls;
	bool tls_optional;
};

/* Fills the defaults used by cassinid (frame 16 MiB, 128 requests per
 * connection, 256 MiB in flight, 10 s handshake, no idle timeout). */
void cql_server_config_defaults(struct cql_server_config *c);

/* Binds and listens (not when config->address's family is INET_NONE: then
 * connections come only by cql_server_adopt). Returns NULL with err set
 * (e.g. address in use). The base must outlive the server. */
struct cql_server *cql_server_new(struct event_base *base,
				  const struct cql_server_config *config,
				  const struct cql_executor *executor);
/* Closes the listener and every connection; pending requests are replied
 * to into the void. */
void cql_server_delete(struct cql_server *s);

/* Stops the native transport (nodetool drain, disablebinary): closes the
 * listener and every connection; the server object stays (broadcasts then
 * reach no one) until cql_server_delete. */
void cql_server_stop(struct cql_server *s);
/* Listens again after cql_server_stop, on the address it was bound to
 * (nodetool enablebinary). 0, or -1 with err set. */
int cql_server_listen(struct cql_server *s);
bool cql_server_listening(const struct cql_server *s);
/* Connections accepted from now on use `ctx` (certificate reloading; it
 * must not be NULL when the server was made with TLS, nor set when it was
 * not); established ones keep theirs (OpenSSL counts its references). */
void cql_server_set_tls(struct cql_server *s, struct ssl_ctx_st *ctx);

/* Serves the connected socket `fd` (the server owns it from now on) as if
 * accepted from `peer`: what the listener does with each connection, for
 * callers that make their own (a fuzzer's socketpair). */
void cql_server_adopt(struct cql_server *s, int fd,
		      const struct inet_addr *peer);

/* The bound address (useful with port 0 in tests). */
struct inet_addr cql_server_address(const struct cql_server *s);

/*
 * Completes a request. `frame` is one whole response frame (built with the
 * cql_encode_* functions using the request's version and stream); the
 * server compresses it when the connection negotiated LZ4. Ownership of the
 * request ends here. A failed connection drops the reply silently.
 */
void cql_request_reply(struct cql_request *req, const uint8_t *frame,
		       size_t len);

/* Records `keyspace` as the connection's current keyspace (after USE). */
void cql_request_set_keyspace(struct cql_request *req, const char *keyspace);

/* A request of no connection, for callers that run the executor in
 * process (tests, fuzzers): its reply goes to reply(arg, frame, len)
 * (the frame borrowed for the call) and a USE to keyspace(arg, name)
 * (may be NULL). Freed by cql_request_reply. NULL on ERR_NOMEM. */
typedef void (*cql_reply_fn)(void *arg, const uint8_t *frame, size_t len);
typedef void (*cql_keyspace_fn)(void *arg, const char *keyspace);
struct cql_request *cql_request_detached(cql_reply_fn reply,
					 cql_keyspace_fn keyspace, void *arg);

/* Events to connections that REGISTERed for the type ("TOPOLOGY_CHANGE",
 * "STATUS_CHANGE", "SCHEMA_CHANGE"). `build` appends the frame for a
 * version. */
typedef int (*cql_event_builder)(struct buf *b, uint8_t version, void *arg);
void cql_server_broadcast(struct cql_server *s, const char *event_type,
			  cql_event_builder build, void *arg);

/* Counters for tools and tests. */
struct cql_server_stats {
	uint64_t connections; /* open now */
	uint64_t connections_total;
	uint64_t connections_refused; /* over max_connections */
	uint64_t requests;
	uint64_t protocol_errors;
	uint64_t overloaded;
	uint64_t inflight_bytes;
};
void cql_server_stats(const struct cql_server *s, struct cql_server_stats *out);

/* One native-protocol connection, as system_views.clients shows it. The
 * strings are borrowed: valid until the loop runs again. */
struct cql_server_client {
	struct inet_addr address; /* the client's address and port */
	const char *stage;        /* "established", "authenticating", "ready" */
	const char *user;         /* the logged-in role, or NULL */
	const char *driver_name;  /* STARTUP's DRIVER_NAME, or NULL */
	const char *driver_version;
	uint8_t version; /* protocol version; 0 before STARTUP */
	uint64_t request_count;
	bool ssl;                     /* speaks TLS */
	const char *ssl_protocol;     /* "TLSv1.3"; NULL without TLS */
	const char *ssl_cipher_suite; /* IANA name; NULL before the handshake */
};

/* The open connections, up to `cap` of them, into `out`; returns how many
 * are open (may exceed `cap`). */
size_t cql_server_clients(const struct cql_server *s,
			  struct cql_server_client *out, size_t cap);

#endif
