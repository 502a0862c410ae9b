/*
 * What the CQL server's two halves share (client/proto): the connection,
 * request and server structs, and the calls between them. server_conn.c
 * is the I/O: a connection's life, its output queue (v5: packed into
 * segments), socket and TLS reads and writes, flushes, timers, and
 * cutting frames and v5 envelopes from the input. server.c is the
 * protocol: STARTUP, authentication, REGISTER, statements and their
 * dispatch, replies to requests, and the server object.
 */
#ifndef CASSINI_CLIENT_PROTO_SERVER_INTERNAL_H
#define CASSINI_CLIENT_PROTO_SERVER_INTERNAL_H

#include "client/proto/server.h"

#include <event2/event.h>
#include <event2/util.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OUTPUT_HIGH_WATER (4u << 20)
#define READ_CHUNK        (16u << 10) /* bytes asked of one read */
#define BUF_KEEP          (4u << 10)  /* larger emptied buffers are freed */

enum {
	EVENT_TOPOLOGY = 1 << 0,
	EVENT_STATUS = 1 << 1,
	EVENT_SCHEMA = 1 << 2,
};

struct cql_conn {
	struct cql_server *srv;
	evutil_socket_t fd;
	struct event *rev;  /* readable; added while reading */
	struct event *wev;  /* writable; added while write_armed */
	struct event *kick; /* reruns the frame loop after a pause */
	struct buf in, out; /* in: bytes from in_pos on; out: from out_pos */
	size_t in_pos, out_pos;
	struct event *timer; /* handshake, then idle */
	struct inet_addr peer;
	/* TLS (client_encryption_options): the session once the client
	 * speaks TLS; `sniff` while an optional-TLS port has not seen the
	 * first byte yet. A read or write that OpenSSL answered "wants the
	 * other direction" waits for that direction's event. */
	SSL *ssl;
	bool sniff;
	bool read_wants_write, write_wants_read;
	uint8_t version; /* fixed by STARTUP; 0 before */
	bool ready;
	/* Logged in (or no authenticator). Until then only AUTH_RESPONSE is
	 * taken, one at a time. */
	bool authenticated;
	bool auth_pending;
	char *user;                         /* the logged-in role, or NULL */
	char *driver_name, *driver_version; /* from STARTUP, or NULL */
	uint64_t request_count;             /* requests taken */
	bool lz4;
	/* v5: set once the answer to STARTUP is queued; from then on bytes
	 * in both directions are segments. Envelopes cut from segments wait
	 * in `env` (from env_pos on) until dispatched. */
	bool segments;
	struct buf env;
	size_t env_pos;
	/* v5: replies queued since the last flush, not yet in segments; the
	 * flush packs them (several envelopes to a segment) */
	struct buf seg_pend;
	bool closed;  /* socket gone; struct lives while refs > 0 */
	bool closing; /* flushing a last reply, then closing */
	bool paused_requests;
	bool paused_output;
	bool reading;     /* rev added */
	bool dirty;       /* on the server's list of replies to flush */
	bool write_armed; /* wev added: the kernel took only part */
	unsigned events;
	int inflight;
	uint64_t inflight_bytes; /* this connection's share of the server's */
	int refs; /* 1 for the socket, 1 per request, 1 while read
		     callbacks run, 1 while dirty */
	uint64_t last_request_ms; /* loop time of the last frame, once ready */
	char *keyspace;
	struct cql_conn *prev, *next;
	struct cql_conn *dirty_next;
};

struct cql_request {
	struct cql_conn *conn; /* NULL for a detached request */
	cql_reply_fn detached_reply;
	cql_keyspace_fn detached_keyspace;
	void *detached_arg;
	uint8_t version;
	int16_t stream;
	uint8_t *body;
	size_t accounted; /* bytes counted in srv->inflight_bytes */
	char *keyspace;   /* v5: the request's keyspace flag, or NULL */
	/* v5 EXECUTE: the result_metadata_id the client sent, checked
	 * against the reply's rows (METADATA_CHANGED) */
	bool check_metadata;
	uint8_t metadata_id_len;
	uint8_t metadata_id[CQL_METADATA_ID_LEN];
};

struct cql_server {
	struct event_base *base;
	struct evconnlistener *listener;
	struct cql_server_config cfg;
	char cql_version[16];
	struct cql_executor exec;
	struct cql_authenticator auth;
	bool has_auth;
	struct cql_conn *conns;
	/* Connections with replies queued in this loop turn, written by
	 * one flush event once the turn's ready callbacks have run (one
	 * writev per connection per turn, no EV_WRITE round trip). */
	struct cql_conn *dirty;
	struct event *flush_ev;
	struct buf scratch; /* READ_CHUNK bytes: where reads land */
	struct inet_addr bound;
	struct cql_server_stats stats;
};

void cql_srv_conn_unref(struct cql_conn *c);
void cql_srv_conn_close(struct cql_conn *c, const char *why);
void cql_srv_conn_write(struct cql_conn *c, const uint8_t *p, size_t n);
void cql_srv_conn_send_frame(struct cql_conn *c, const uint8_t *frame,
			     size_t len);
void cql_srv_conn_set_reading(struct cql_conn *c, bool on);
void cql_srv_conn_fail(struct cql_conn *c, uint8_t version, int16_t stream,
		       const char *msg);
void cql_srv_conn_update_reading(struct cql_conn *c);
void cql_srv_conn_on_writable(evutil_socket_t fd, short what, void *arg);
void cql_srv_on_flush(evutil_socket_t fd, short what, void *arg);
void cql_srv_conn_on_timer(evutil_socket_t fd, short what, void *arg);
void cql_srv_conn_arm_timer(struct cql_conn *c);
void cql_srv_conn_on_readable(evutil_socket_t fd, short what, void *arg);
void cql_srv_conn_on_kick(evutil_socket_t fd, short what, void *arg);
void cql_srv_dispatch(struct cql_conn *c, const struct cql_header *h,
		      uint8_t *body, size_t len);

#endif
