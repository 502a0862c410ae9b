/*
 * Internode transport: TCP on storage_port with libevent bufferevents.
 *
 * Wire (messaging.proto): every frame is a 4-byte big-endian length then a
 * protobuf message; the length is checked against internode_max_message_size
 * before the body is buffered. The connecting side sends a Handshake
 * (cluster name, partitioner, messaging version, host id, dc, rack, its
 * address); the accepting side checks it, answers with its own, or logs the
 * reason and closes. Then Envelopes (verb, request id, deadline, payload).
 *
 * Peers are named by their broadcast address (the one they advertise in
 * the handshake and gossip). We connect to that address unless another
 * one is preferred for the peer (prefer_local: its private address in our
 * datacenter); outbound connections bind to our listen address when its
 * family matches, as Cassandra's do.
 *
 * Connections are one-way, as Cassandra's: we send on the outbound
 * connection we opened to a peer and receive on connections peers opened to
 * us; a response travels over the responder's own outbound connection.
 * Outbound connections open on first send, reconnect with exponential
 * backoff (100 ms doubling to 2 s; reset when the peer connects to us), and
 * queue at most `max_queue_bytes` each: past that a send fails with
 * ERR_OVERLOADED (back-pressure) and the drop is counted. Sends during a
 * backoff fail with ERR_UNAVAILABLE.
 *
 * Received envelopes whose deadline has passed are dropped and counted per
 * verb. Responses go to the request's callback; requests and one-way
 * messages of a verb with a handler go to it; anything else goes to the
 * env's receiver (env_deliver), which is how gossip is fed.
 *
 * Everything runs on the loop of the event_base; nothing blocks.
 */
#ifndef CASSINI_NODE_TRANSPORT_H
#define CASSINI_NODE_TRANSPORT_H

#include "common/buf.h"
#include "common/env.h"
#include "common/inet.h"
#include "node/netfault.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct transport;
struct ssl_ctx_st;

/* server_encryption_options.internode_encryption */
enum transport_encryption {
	TRANSPORT_ENCRYPT_NONE = 0,
	TRANSPORT_ENCRYPT_ALL,
	TRANSPORT_ENCRYPT_DC,   /* connections to other datacenters */
	TRANSPORT_ENCRYPT_RACK, /* to other racks or datacenters */
};

/* Where the node's view of the ring (gossip, the saved peers) places the
 * peer named `ep`: false when it is unknown. `internal` gets the private
 * address it gossips (INTERNAL_ADDRESS_AND_PORT), or INET_NONE. */
struct transport_location {
	char dc[64], rack[64];
	struct inet_addr internal;
};
typedef bool (*transport_locate_fn)(void *arg, const struct inet_addr *ep,
				    struct transport_location *out);

#define TRANSPORT_MAX_VERB 255

struct transport_config {
	const char *cluster_name; /* borrowed; must stay live */
	const char *partitioner;
	const char *host_id;
	const char *dc;
	const char *rack;
	struct inet_addr listen; /* bind address and port */
	/* Advertised in handshakes: our name on every peer (the broadcast
	 * address). INET_NONE: `listen`. */
	struct inet_addr broadcast;
	/* Also accept connections on `broadcast` (when it differs). */
	bool listen_on_broadcast;
	uint64_t max_message_size;
	uint64_t connect_timeout_ms;
	size_t max_queue_bytes; /* per peer; 0 = 2 * max_message_size */
	/* TLS (docs/security.md). With a mode other than NONE both contexts
	 * are set (borrowed: they outlive the transport) and `locate` is
	 * given: outbound connections to a peer the mode covers (or one not
	 * located) are TLS; inbound ones are TLS or plaintext (told apart by
	 * their first byte), and a plaintext one from a peer the mode covers
	 * is refused unless `optional`. */
	enum transport_encryption encryption;
	bool encryption_optional;
	/* The peer's certificate must name the address we connect to, and
	 * a connecting peer's the address it claims in its handshake. */
	bool endpoint_verification;
	struct ssl_ctx_st *tls_server, *tls_client;
	transport_locate_fn locate;
	void *locate_arg;
};

/* Borrowed: base and env must stay live while the transport is. */
struct transport *transport_new(struct event_base *base, struct env *env,
				const struct transport_config *cfg);
void transport_delete(struct transport *t);

/* Binds and listens on `listen` (and `broadcast` with
 * listen_on_broadcast); ERR_IO naming the address when it is in use. */
int transport_listen(struct transport *t);

/* Connect to the peer named `ep` at `via` from now on (NULL: at `ep`
 * itself), as Cassandra's reconnectWithNewIp: an open connection to the
 * old address is closed once what is queued on it has gone, and the next
 * send connects to the new one. No-op when nothing changes. */
int transport_prefer(struct transport *t, const struct inet_addr *ep,
		     const struct inet_addr *via);

/* The node's view of where `ep` is changed (its DC or RACK): under `dc`
 * or `rack`, an outbound connection that is TLS where it need not be, or
 * plaintext where it must not be, drains and closes; the next send
 * connects as the mode says. */
/* Connections made or accepted from now on use these contexts (certificate
 * reloading; borrowed as the config's); open ones keep theirs. */
void transport_set_tls(struct transport *t, struct ssl_ctx_st *server,
		       struct ssl_ctx_st *client);
void transport_reconsider(struct transport *t, const struct inet_addr *ep);

/* The address connections to `ep` go to: the preferred one, else `ep`. */
struct inet_addr transport_connect_address(const struct transport *t,
					   const struct inet_addr *ep);

/* One-way message; the shape of env_send_fn so env_real_set_transport()
 * can install it. `t` is the transport. */
int transport_send(void *t, const struct inet_addr *to, uint32_t verb,
		   const void *msg, size_t len);

/* A response (status 0) or a failure (-1: ERR_TIMEOUT when no answer came
 * in time). `payload` is borrowed for the call. Runs on the loop. */
typedef void (*transport_response_fn)(void *arg, int status,
				      const uint8_t *payload, size_t len);

/* Sends a request with a deadline of now + timeout_ms; `cb` runs exactly
 * once, unless the transport is deleted first (then never). */
int transport_request(struct transport *t, const struct inet_addr *to,
		      uint32_t verb, const void *payload, size_t len,
		      uint64_t timeout_ms, transport_response_fn cb, void *arg);

/* A request or one-way message of `verb` arrived; request_id is 0 for
 * one-way messages. Answer with transport_respond (now or later). */
typedef void (*transport_handler_fn)(void *arg, const struct inet_addr *from,
				     uint32_t verb, uint64_t request_id,
				     const uint8_t *payload, size_t len);
int transport_set_handler(struct transport *t, uint32_t verb,
			  transport_handler_fn fn, void *arg);
int transport_respond(struct transport *t, const struct inet_addr *to,
		      uint32_t verb, uint64_t request_id, const void *payload,
		      size_t len);

/* Whether our outbound connection to `to` has completed its handshake. */
bool transport_connected(const struct transport *t, const struct inet_addr *to);

struct transport_stats {
	uint64_t accepted, rejected; /* inbound connections; bad ones */
	uint64_t connects, connect_failures;
	uint64_t sent, received;
	uint64_t dropped_overload;    /* queue full */
	uint64_t dropped_unavailable; /* peer in backoff */
	uint64_t dropped_expired;     /* past their deadline */
	uint64_t expired_by_verb[TRANSPORT_MAX_VERB + 1];
	uint64_t timeouts;                  /* requests with no answer */
	uint64_t tls_inbound, tls_outbound; /* handshakes completed */
	uint64_t tls_failures;              /* handshakes that failed */
	uint64_t plaintext_refused; /* inbound plaintext, encryption required */
};
void transport_get_stats(const struct transport *t,
			 struct transport_stats *out);

/* One peer's messages to it (Cassandra 4's internode_outbound): `addr`
 * its name. Sent: taken by the socket; pending: queued (and held by a
 * test fault) but not yet; overload: refused, its queue full; error:
 * refused as unreachable, or lost with a connection that closed. */
struct transport_outbound_stats {
	struct inet_addr addr;
	uint64_t pending_count, pending_bytes;
	uint64_t sent_count, sent_bytes;
	uint64_t overload_count, overload_bytes;
	uint64_t error_count, error_bytes;
	uint64_t active_connections; /* 0 or 1, handshaken */
	uint64_t connection_attempts, successful_connection_attempts;
};
/* One peer's messages from it (internode_inbound), by the address its
 * handshake advertised. Received: every frame after the handshake;
 * processed: those handled (not expired); expired: past their deadline on
 * arrival; error: a frame that could not be decoded (the connection is
 * closed: Cassandra's unrecovered corrupt frame); using_bytes: read from
 * its connections and not yet handled. */
struct transport_inbound_stats {
	struct inet_addr addr;
	uint64_t using_bytes;
	uint64_t received_count, received_bytes;
	uint64_t processed_count, processed_bytes;
	uint64_t expired_count, expired_bytes;
	uint64_t error_count, error_bytes;
};
/* The peers' counters, up to `cap` into `out` (NULL with 0: count only).
 * Return how many peers there are. */
size_t transport_outbound_peers(const struct transport *t,
				struct transport_outbound_stats *out,
				size_t cap);
size_t transport_inbound_peers(const struct transport *t,
			       struct transport_inbound_stats *out, size_t cap);

/* One line per handshaken connection: direction, peer, and `encrypted
 * <protocol> <cipher>` or `plaintext` (the admin command
 * `internodeconnections`). */
void transport_describe_connections(const struct transport *t, struct buf *out);

/*
 * WAN faults, for test clusters only (netfault.h; node.yaml
 * `test_fault_injection`). Until transport_enable_faults the transport has
 * no fault table, every send takes the plain path, and the calls below
 * fail with ERR_INVALID. Messages a link holds wait in a per-peer queue
 * (counted against max_queue_bytes) released by an env timer, in order.
 */
int transport_enable_faults(struct transport *t);
bool transport_faults_enabled(const struct transport *t);
int transport_fault_set(struct transport *t, const struct inet_addr *to,
			const struct netfault_link *l);
/* Removes the rule for `to` (NULL: all) and sends what it held at once.
 * Returns the rules removed, or -1. */
int transport_fault_clear(struct transport *t, const struct inet_addr *to);
/* The rules and their counters, then the messages held now. */
int transport_fault_describe(struct transport *t, struct buf *out);

#endif
