/*
 * The client's internals, shared by cql_client.c (hosts, routing, prepared
 * statements, topology, life cycle), cql_client_conn.c (connections:
 * sockets, streams, backlog, timeouts) and cql_client_sync.c (the blocking
 * helpers). Nothing outside client/cql_client*.c includes it.
 */
#ifndef CASSINI_CLIENT_CQL_CLIENT_INTERNAL_H
#define CASSINI_CLIENT_CQL_CLIENT_INTERNAL_H

#include "client/driver/cql_client.h"

#include <event2/util.h>

#define CQL_CLIENT_TICK_MS    100
#define CQL_CLIENT_RETRY_MS   1000
#define CQL_CLIENT_MSG_MAX    256
#define CQL_CLIENT_HOSTS_MAX  1024
#define CQL_CLIENT_TOKENS_MAX (1u << 20)

enum cql_conn_state {
	CQL_CONN_DOWN = 0,
	CQL_CONN_CONNECTING,
	CQL_CONN_STARTUP,
	CQL_CONN_READY,
};

/* Who waits for a request. An EXECUTE names its statement so that an
 * Unprepared answer can be healed: PREPARE on that connection, then the same
 * frame again, once. */
struct cql_req {
	cql_client_cb cb; /* NULL: timed out (orphan) */
	void *arg;
	const struct cql_client_prepared *stmt;
	bool retried;
};

struct cql_slot {
	struct cql_req req;
	uint64_t deadline_ms;
	bool used;
};

/* A frame waiting for a stream id (or a ready connection). */
struct cql_pending {
	struct cql_pending *next;
	struct cql_req req;
	uint64_t deadline_ms;
	size_t len;
	uint8_t frame[]; /* stream bytes patched when sent */
};

/* A failure delivered from the defer event. */
struct cql_deferred {
	struct cql_deferred *next;
	cql_client_cb cb;
	void *arg;
	enum cql_client_status status;
	char message[CQL_CLIENT_MSG_MAX];
};

struct cql_host;

struct cql_conn {
	struct cql_client *client;
	struct cql_host *host;
	int fd;               /* -1 when down */
	struct ssl_st *ssl;   /* with cfg.tls, once connected */
	bool tls_handshaking; /* ssl's handshake runs (state STARTUP) */
	struct event *rev, *wev;
	struct buf in; /* received bytes; frames parsed from in_pos */
	size_t in_pos;
	struct buf out; /* frames not yet sent, from out_pos */
	size_t out_pos;
	bool dirty; /* on the client's flush list */
	struct cql_conn *next_dirty;
	enum cql_conn_state state;
	bool settled; /* has been ready or failed once (connect progress) */
	struct cql_slot *slots;
	struct buf *frames; /* per stream: the EXECUTE sent, for a retry */
	int16_t *free_ids;  /* stack */
	int nfree;
	int hiwater; /* streams [0, hiwater) have been used */
	int inflight;
	struct cql_pending *backlog, *backlog_tail;
	uint64_t connect_deadline_ms;
	struct event *retry;
	struct arena arena; /* decoded responses; reset after each */
	struct buf plain;   /* a decompressed response body */
};

struct cql_host {
	struct inet_addr addr;
	char name[256]; /* the contact point's host name, or "" */
	struct cql_conn *conns;
	int nconns;
	unsigned rr;
	bool started;
};

struct cql_token_entry {
	int64_t token;
	uint32_t host;
};

struct cql_client_prepared {
	struct cql_client_prepared *next;
	char *query;
	uint8_t *id;
	uint16_t id_len;
	int32_t bind_count;
	int32_t pk_count;
	uint16_t *pk_indexes;
};

struct cql_client {
	struct event_base *base;
	struct cql_client_config cfg;
	struct inet_addr *contacts;
	struct cql_host **hosts;
	size_t nhosts;
	unsigned host_rr;
	struct cql_token_entry *tokens;
	size_t ntokens;
	struct cql_client_prepared *prepared;
	uint64_t stats_reprepared;
	struct event *tick;
	struct event *defer_ev;
	struct cql_deferred *deferred, *deferred_tail;
	struct buf scratch;
	/* Connections with unsent frames, flushed once per read pass (so the
	 * requests issued by one batch of responses leave in one send) or from
	 * flush_ev for requests submitted outside a callback. */
	struct cql_conn *dirty;
	int depth; /* > 0 while dispatching */
	struct event *flush_ev;
	/* The frame being dispatched (for the blocking helpers). */
	uint8_t cur_opcode, cur_flags;
	struct slice cur_body;
	/* Connect progress. */
	cql_client_done_cb done;
	void *done_arg;
	bool topology_asked;
	bool topology_done;
	int topology_waiting;
	char last_error[CQL_CLIENT_MSG_MAX];
	bool closing; /* in cql_client_delete: new requests fail */
};

/* The frame being dispatched, valid only inside a request callback. */
struct cql_client_frame {
	uint8_t opcode;
	uint8_t flags;
	struct slice body;
};
struct cql_client_frame cql_client_current_frame(const struct cql_client *c);

struct event_base *cql_client_base(const struct cql_client *c);

/* ---- shared by cql_client.c and cql_client_conn.c ------------------------ */

uint64_t cql_client_now_ms(void);

/* Sets up `k` (not connected) for host `h`. 0 or -1 (ERR_NOMEM). */
int cql_conn_init(struct cql_conn *k, struct cql_client *c, struct cql_host *h);
/* Opens the socket; the outcome arrives through callbacks. */
void cql_conn_start(struct cql_conn *k);
/* Closes `k`, fails what it carries, and schedules a reconnect. */
void cql_conn_fail(struct cql_conn *k, const char *why);
/* Submits an encoded frame (stream placeholder) on `k`; starting
 * connections and full ones keep a copy in the backlog. `internal` frames
 * (STARTUP) may go out before the connection is ready. */
void cql_conn_submit(struct cql_conn *k, uint8_t *frame, size_t len,
		     const struct cql_req *req, bool internal);

/* Queues a failure for delivery from the loop (never inline). */
void cql_client_defer_fail(struct cql_client *c, cql_client_cb cb, void *arg,
			   enum cql_client_status status, const char *msg);
/* Event callbacks (arg: the client). */
void cql_client_on_defer(evutil_socket_t fd, short what, void *arg);
void cql_client_on_flush(evutil_socket_t fd, short what, void *arg);
void cql_client_on_tick(evutil_socket_t fd, short what, void *arg);

/* In cql_client.c: a connection settled (ready or failed once). */
void cql_client_connect_progress(struct cql_client *c);

/* Whether host `host` (an index of c->hosts) has a ready connection. */
bool cql_client_host_ready(const struct cql_client *c, size_t host);
/* cql_client_query through host `host` (-1: any; a host with no ready
 * connection: another one, as every request). */
void cql_client_query_host(struct cql_client *c, int host, const char *query,
			   uint16_t consistency, cql_client_cb cb, void *arg);

/* Whether the client has a ready connection to the node whose native
 * address is `ip` (4 or 16 bytes): schema agreement, as drivers do, only
 * waits for nodes that are up. */
bool cql_client_peer_up(const struct cql_client *c, const uint8_t *ip,
			size_t len);

#endif
