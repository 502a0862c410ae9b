/*
 * gossip/: Cassandra's gossip protocol and the phi-accrual failure detector,
 * written as a state machine over the env seam (no sockets, clock, random or
 * files of its own), so the daemon and the simulator run the same code.
 *
 * Every round (gossip_config.interval_us, 1 s by default) the node bumps its
 * heartbeat, sends a SYN with one digest (address, generation, max version)
 * per known endpoint to one random live peer, perhaps one unreachable peer
 * and perhaps a seed, then checks the failure detector. The receiver answers
 * with an ACK (states the sender lacks + digests of what it wants), the
 * sender finishes with an ACK2. Versions come from one per-node counter
 * shared by the heartbeat and every application state; a higher generation
 * (the node restarted) replaces the whole endpoint state.
 *
 * UP/DOWN is a local judgement, never gossiped: a peer is marked UP only
 * after it answered an ECHO (so a channel to it works both ways), and DOWN
 * when its phi passes the threshold, when it announces a shutdown, or when
 * the operator removes it. A node whose own loop stalled for more than
 * GOSSIP_MAX_LOCAL_PAUSE_US convicts nobody for that long afterwards.
 *
 * Deliberately not here: token arithmetic (ring/), sockets (node/), files
 * (node/ persists generation, host id and tokens and passes them in).
 */
#ifndef CASSINI_GOSSIP_GOSSIP_H
#define CASSINI_GOSSIP_GOSSIP_H

#include "common/env.h"
#include "common/inet.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gossip;

/* Verbs gossip sends and receives through env_send(); the range 1..15 is
 * reserved for gossip. */
enum gossip_verb {
	GOSSIP_VERB_SYN = 1,
	GOSSIP_VERB_ACK = 2,
	GOSSIP_VERB_ACK2 = 3,
	GOSSIP_VERB_SHUTDOWN = 4,
	GOSSIP_VERB_ECHO_REQ = 5,
	GOSSIP_VERB_ECHO_RSP = 6,
	GOSSIP_VERB_MAX = 15,
};

/* Application states (the subset of Cassandra's ApplicationState we use).
 * The number is the key on the wire; never renumber. */
enum gossip_app_state {
	GOSSIP_STATE_STATUS_WITH_PORT =
		0,           /* "NORMAL,<token>", "shutdown,true" */
	GOSSIP_STATE_TOKENS, /* comma-separated decimal tokens */
	GOSSIP_STATE_DC,
	GOSSIP_STATE_RACK,
	GOSSIP_STATE_HOST_ID, /* UUID text */
	GOSSIP_STATE_SCHEMA,  /* schema version UUID */
	GOSSIP_STATE_LOAD,    /* bytes on disk, decimal */
	GOSSIP_STATE_RELEASE_VERSION,
	GOSSIP_STATE_NATIVE_ADDRESS_AND_PORT,
	GOSSIP_STATE_RPC_READY, /* "true" / "false" */
	/* The listen address and storage port ("10.0.0.5:7000"), gossiped
	 * with GossipingPropertyFileSnitch: peers of the same DC with
	 * prefer_local connect to it instead of the broadcast address. */
	GOSSIP_STATE_INTERNAL_ADDRESS_AND_PORT,
	GOSSIP_STATE_COUNT,
};

/* The first word of STATUS_WITH_PORT. */
enum gossip_status {
	GOSSIP_STATUS_UNKNOWN = 0, /* no STATUS yet */
	GOSSIP_STATUS_BOOT,
	GOSSIP_STATUS_NORMAL,
	GOSSIP_STATUS_LEAVING,
	GOSSIP_STATUS_LEFT,
	GOSSIP_STATUS_SHUTDOWN,
};

/* Cassandra's defaults, in microseconds (the pause guard is its
 * cassandra.max_local_pause_in_ms). */
#define GOSSIP_MAX_LOCAL_PAUSE_US 5000000u
#define GOSSIP_QUARANTINE_US      60000000u /* 2 * RING_DELAY */
#define GOSSIP_FD_WINDOW          1000u     /* ArrivalWindow SAMPLE_SIZE */

struct gossip_config {
	const char *cluster_name;      /* borrowed; must stay live */
	const char *partitioner;       /* borrowed; must stay live */
	struct inet_addr self;         /* our internode address */
	const struct inet_addr *seeds; /* copied */
	size_t seed_count;
	int64_t generation;   /* seconds; the caller makes it only grow */
	uint64_t interval_us; /* 0 = 1 s */
	double phi_convict_threshold; /* 0 = 8 */
	uint32_t fd_window;           /* samples per endpoint; 0 = 1000 */
	/* Intervals longer than this are not sampled and cap phi's mean
	 * (Cassandra's MAX_INTERVAL); 0 = 2 * interval. */
	uint64_t fd_max_interval_us;
	/* 0 = GOSSIP_QUARANTINE_US. */
	uint64_t quarantine_us;
};

/* What subscribers hear. Addresses are borrowed for the call. Callbacks run
 * on the env's loop, inside gossip calls: they must not delete the gossip. */
struct gossip_listener {
	/* A new endpoint (or a new generation of one) is known. */
	void (*on_join)(void *arg, const struct inet_addr *ep);
	/* An application state of a peer (or of ourselves) changed. */
	void (*on_change)(void *arg, const struct inet_addr *ep,
			  enum gossip_app_state key, const char *value);
	void (*on_alive)(void *arg, const struct inet_addr *ep);
	void (*on_dead)(void *arg, const struct inet_addr *ep);
	/* The endpoint was removed (operator action or LEFT expiry). */
	void (*on_remove)(void *arg, const struct inet_addr *ep);
};

/* Borrowed view of one endpoint; strings stay valid until the next call
 * that processes input or changes state. */
struct gossip_endpoint_info {
	struct inet_addr addr;
	bool is_self;
	bool alive;
	enum gossip_status status;
	int64_t generation;
	int32_t heartbeat;
	double phi;         /* current suspicion (scaled as Cassandra's) */
	double fd_mean_us;  /* mean heartbeat inter-arrival time */
	uint64_t update_us; /* env_mono_us() of the last news from it */
	const char *states[GOSSIP_STATE_COUNT]; /* NULL when absent */
	int32_t versions[GOSSIP_STATE_COUNT];
};

/* Returns NULL with err set. The env must stay live while the gossip is. */
struct gossip *gossip_new(struct env *env, const struct gossip_config *cfg);
void gossip_delete(struct gossip *g);

/* Sets one of our own states (a new version); subscribers hear it. */
int gossip_set_local_state(struct gossip *g, enum gossip_app_state key,
			   const char *value);

/* Starts gossiping: a shadow round to the seeds (an empty SYN answered with
 * every known state), then a round every interval. */
int gossip_start(struct gossip *g);

/* Input: a message from `from`. Install with env_set_receiver or call from
 * a dispatcher. Malformed messages are counted and dropped. */
void gossip_process(struct gossip *g, const struct inet_addr *from,
		    uint32_t verb, const uint8_t *msg, size_t len);

/* While on, every round also asks a seed for everything it knows (the
 * shadow round's empty SYN): a joining node then knows every node the
 * seeds know before it chooses tokens, not only those gossip happened to
 * bring. Off by default. */
void gossip_set_follow_seeds(struct gossip *g, bool on);

/* Graceful stop: STATUS becomes shutdown, every live peer is told, rounds
 * stop. A node whose STATUS is LEFT (decommissioned) only stops: its
 * peers keep LEFT. */
void gossip_announce_shutdown(struct gossip *g);

/* After gossip_announce_shutdown (nodetool disablegossip): gossip again
 * with a newer generation and the STATUS we had before the stop.
 * ERR_INVALID before gossip_start or once this node has left; 0 if
 * running. */
int gossip_resume(struct gossip *g);

/* Started and not stopped. */
bool gossip_running(const struct gossip *g);

/* On behalf of a dead endpoint (removenode): sets one of its states with
 * a version newer than any it gossiped, so every peer takes the change
 * from us. Refused (ERR_INVALID) for ourselves, for an endpoint we see
 * alive or know only from a saved state, ERR_NOT_FOUND for an unknown one. If
 * the endpoint comes back, its own states (a new generation) replace ours. */
int gossip_set_remote_state(struct gossip *g, const struct inet_addr *ep,
			    enum gossip_app_state key, const char *value);

/* A peer as this node last knew it (node/ saves the ring's peers and
 * loads them at start, as Cassandra's system.peers): its states (TOKENS,
 * STATUS_WITH_PORT, DC, RACK, HOST_ID...) at generation 0, DOWN, so a
 * restarted node knows the ring before gossip brings it. The first real
 * state of the peer (any generation, from anyone) replaces them all.
 * Such a state is never sent: a peer that forgot the endpoint does not
 * learn it again from us, and digests of generation 0 are never asked
 * for. Call before gossip_start; refused for ourselves and for an
 * endpoint already known. */
int gossip_add_saved_endpoint(struct gossip *g, const struct inet_addr *ep,
			      const char *const states[GOSSIP_STATE_COUNT]);

/* Operator removal: forget the endpoint and ignore news of it for the
 * quarantine period. */
int gossip_remove_endpoint(struct gossip *g, const struct inet_addr *ep);

int gossip_subscribe(struct gossip *g, const struct gossip_listener *l,
		     void *arg);

/* Queries. Endpoints are ordered by address; index 0..count-1. */
size_t gossip_endpoint_count(const struct gossip *g);
int gossip_endpoint_at(struct gossip *g, size_t index,
		       struct gossip_endpoint_info *out);
int gossip_endpoint_find(struct gossip *g, const struct inet_addr *ep,
			 struct gossip_endpoint_info *out);
bool gossip_is_alive(const struct gossip *g, const struct inet_addr *ep);
size_t gossip_live_count(const struct gossip *g); /* peers, not self */
const struct inet_addr *gossip_self(const struct gossip *g);

struct gossip_stats {
	uint64_t rounds;
	uint64_t syn_sent, ack_sent, ack2_sent;
	uint64_t bad_messages;  /* failed to decode or validate */
	uint64_t wrong_cluster; /* SYN from another cluster/partitioner */
	uint64_t convictions;
	uint64_t local_pauses; /* stalls of our own loop detected */
};
void gossip_get_stats(const struct gossip *g, struct gossip_stats *out);

/* Names: "STATUS_WITH_PORT", ... / "NORMAL", ... */
const char *gossip_app_state_name(enum gossip_app_state key);
const char *gossip_status_name(enum gossip_status st);
enum gossip_status gossip_status_parse(const char *value);

#endif
