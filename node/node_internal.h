/* Private to node/: the node struct, shared by node.c and node_admin.c. */
#ifndef CASSINI_NODE_INTERNAL_H
#define CASSINI_NODE_INTERNAL_H

#include "conf/conf.h"
#include "node/local_state.h"
#include "node/node.h"

#include <stdbool.h>
#include <stdint.h>

struct event;
struct event_base;
struct env;
struct env_timer;
struct transport;
struct gossip;
struct admin;
struct members;
struct cql_service;
struct cql_peer_info;
struct node_repair;
struct inet_addr;

/* Internode verbs of node/ (gossip's are below GOSSIP_VERB_MAX). */
enum node_verb {
	NODE_VERB_SCHEMA_PUSH = 20, /* one-way: a schema record */
	NODE_VERB_SCHEMA_PULL = 21, /* request: every record, in order */
};

struct node {
	struct conf conf;
	struct event_base *base;
	struct env *env;
	struct event *sig_term;
	struct event *sig_int;
	struct event *sig_hup; /* reopens system.log (logrotate) */
	int lock_fd;
	const char *stop_reason;
	bool failed; /* stopped by node_fail: the process exits 1 */

	struct local_state local; /* host id, tokens (none yet: joining) */
	int64_t start_wall_us;
	struct transport *transport;
	/* server_encryption_options (internode_tls.c), or NULL */
	struct ssl_ctx_st *internode_tls_server, *internode_tls_client;
	struct gossip *gossip;
	struct members *members;
	struct admin *admin;
	/* toppartitions windows running (admin_toppartitions.c) */
	struct node_toppartitions *toppartitions;
	struct ssl_ctx_st *admin_tls; /* jmx_encryption_options, or NULL */
	struct node_metrics *metrics; /* NULL: metrics_port 0 */
	struct env_timer *join_timer; /* first start: choosing tokens */
	struct workers *join_worker;  /* runs the token choice (lazily) */
	struct loopq *join_q;         /* its completion, on the loop */
	unsigned join_rounds;
	struct inet_addr join_waiting; /* the joiner ahead waited for */
	unsigned join_wait_rounds;     /* rounds it has kept us waiting */
	bool drained;
	struct env_timer *stop_timer; /* node_stop waits for the coordinator */
	uint64_t stop_deadline_us;

	struct cql_service *cql;
	struct cql_peer_info
		*cql_peers; /* system.peers rows, rebuilt per call */
	size_t cql_peer_count;
	size_t cql_other_members;
	struct env_timer *schema_timer; /* compare schema versions with peers */
	struct env_timer *load_timer;   /* gossip LOAD every minute */
	bool schema_pull_in_flight;
	/* Schema pulls made (tpstats MigrationStage); after a pull that
	 * changed nothing here, schema_tick skips schema_pull_skip rounds,
	 * twice as many each time (schema_pull_backoff, at most
	 * SCHEMA_PULL_BACKOFF_MAX), until our schema changes. */
	uint64_t schema_pulls;
	unsigned schema_pull_skip, schema_pull_backoff;
	int64_t *cql_peer_tokens;
	struct node_repair *repair;
	struct node_move *bootstrap; /* while fetching our data (BOOT) */
	struct node_moves *moves;    /* decommission, removenode, rebuild */
	struct node_events *events;  /* peers' changes told to hints, drivers */
	struct node_peers *peers;    /* saved_caches/peers */
	struct node_tls_reload *tls_reload; /* NULL: no TLS, or period 0 */
	struct env_timer *settle_timer;     /* native port opens once settled */
	uint64_t settle_deadline_us;        /* serve by then, settled or not */
};

/* The ring's peers saved for the next start (peers.c): loads the file
 * into gossip (before gossip starts), then rewrites it as the ring
 * changes. After the CQL service (its loop queue); deleted before it. */
struct node_peers;
struct node_peers *node_peers_new(struct node *n);
void node_peers_delete(struct node_peers *p);

/* Hinted handoff's cues and the drivers' TOPOLOGY_CHANGE / STATUS_CHANGE
 * events from gossip (node_events.c). After the CQL service; deleted
 * after the gossip. */
struct node_events;
int node_events_new(struct node *n);
/* The thread pools as tpstats shows them (admin_data.c), for tpstats and
 * system_views.thread_pools; fills up to `cap`, returns how many. */
struct cql_thread_pool;
size_t node_thread_pools(void *arg, struct cql_thread_pool *out, size_t cap);
struct cql_view_rows;
/* The node-made system_views tables (node_views.c). */
int node_view_rows(void *arg, const char *table, struct cql_view_rows *rows);
/* node_views_repair.c: system_views.repairs, or repair_sessions. */
int node_view_repairs(struct node *n, struct cql_view_rows *rows,
		      bool sessions);
struct storage_table_meta;
/* The meta of the table with this id in the node's schema, or NULL. */
const struct storage_table_meta *node_table_by_id(struct node *n,
						  const uint8_t id[16]);
/* compactionstats (admin_compaction.c). */
int node_admin_register_compaction(struct node *n);
/* flush, compact, cleanup, verify, snapshots, tablestats, drain
 * (admin_tables.c). */
int node_admin_register_tables(struct node *n);
/* The ranges this node replicates under the table's keyspace (cleanup,
 * import), appended to *keep (storage's form: no MIN right bounds);
 * -1 with err written. */
struct storage_token_range;
struct buf;
int node_owned_ranges(struct node *n, const struct storage_table_meta *t,
		      struct storage_token_range **keep, size_t *nkeep,
		      size_t *cap, struct buf *err);
/* admin_import.c: import, refresh */
int node_admin_register_import(struct node *n);
/* gettraceprobability, settraceprobability (admin_trace.c). */
int node_admin_register_trace(struct node *n);
/* toppartitions (admin_toppartitions.c); _stop answers the windows
 * running with an error and ends their sampling. */
int node_admin_register_toppartitions(struct node *n);
void node_toppartitions_stop(struct node *n);
void node_events_delete(struct node_events *e);

/* prefer_local (prefer_local.c): gossips our listen address as
 * INTERNAL_ADDRESS_AND_PORT (GossipingPropertyFileSnitch) and, with
 * prefer_local=true, has the transport connect to the peers of our DC on
 * theirs. Start after the transport and gossip exist; sweep once the
 * saved peers are loaded. */
int node_prefer_local_start(struct node *n);
void node_prefer_local_sweep(struct node *n);

/* Whether a live peer gossips a schema version other than ours; *peer
 * (may be NULL) is the first such one. */
bool node_schema_disagreement(struct node *n, struct inet_addr *peer);

/* The Prometheus endpoint (metrics.c, docs/observability.md): NULL when
 * metrics_port is 0, or with err set when it cannot listen. On the loop;
 * before the CQL service is deleted. node_metrics_render appends the text
 * exposition of every metric to `b`. */
struct node_metrics;
struct buf;
struct node_metrics *node_metrics_new(struct node *n);
void node_metrics_delete(struct node_metrics *m);
int node_metrics_render(struct node *n, struct buf *b);

/* Registers the admin commands of this issue (node_admin.c). */
int node_admin_register(struct node *n);
/* The coordinator and hinted handoff commands (admin_data.c). */
int node_admin_register_data(struct node *n);
/* netfault and clockskew (admin_fault.c); gives the transport its fault
 * table when test_fault_injection is on. */
int node_admin_register_faults(struct node *n);

/* Repair (node_repair.c): sessions over this node's storage, scans on a
 * worker; registers the `repair` admin command. After the CQL service;
 * deleted before it. */
struct node_repair *node_repair_new(struct node *n);
void node_repair_receive(struct node_repair *r, const struct inet_addr *from,
			 uint32_t verb, const uint8_t *msg, size_t len);
void node_repair_delete(struct node_repair *r);

/* A repair request under construction (node_repair.c): the tables of a
 * keyspace (those `wanted` says, NULL: all) named "ks.table", and ranges
 * pushed one by one with their replicas (and those replicas' DCs, or
 * NULL). node_repair_job_request points a request at them; they live
 * until node_repair_job_free. Zero-initialised is empty. */
struct repair_table;
struct repair_request;
struct repair_range;
struct cql_keyspace;
struct node_repair_job {
	struct repair_table *tables;
	char (*names)[300];
	size_t ntables;
	struct repair_range *ranges;
	size_t nranges, cap;
	struct inet_addr *addrs; /* REPAIR_MAX_REPLICAS per range */
	const char **dcs;        /* theirs, borrowed */
};
int node_repair_job_tables(struct node_repair_job *j,
			   const struct cql_keyspace *k,
			   bool (*wanted)(void *arg, const char *name),
			   void *arg);
int node_repair_job_push(struct node_repair_job *j, int64_t l, int64_t r,
			 const struct inet_addr *reps, const char *const *dcs,
			 size_t nrep);
void node_repair_job_request(struct node_repair_job *j,
			     struct repair_request *q);
void node_repair_job_free(struct node_repair_job *j);

/* Starts a session of the node's repair (a scheduled segment running is
 * preempted, to be retried): repair_start's contract, without progress
 * lines. For bootstrap. */
struct repair_request;
struct repair_summary;
int node_repair_start(struct node_repair *r, const struct repair_request *q,
		      void (*done)(void *arg, const struct repair_summary *s),
		      void *arg);

/* Range movements (movement.c): once the moving endpoint's state is
 * gossiped (BOOT, LEAVING), streams the ranges that change hands with
 * `r`'s sessions, then calls done once, on the loop. Deleting it stops
 * waiting; a session it started goes with the repair. */
enum node_move_kind {
	NODE_MOVE_BOOTSTRAP,    /* this node joins: it fetches its ranges */
	NODE_MOVE_DECOMMISSION, /* this node leaves: it hands them over */
	NODE_MOVE_REMOVE,       /* a dead node leaves: the live copies go */
	NODE_MOVE_REBUILD,      /* this node refetches the ranges it has */
};
struct node_move_config {
	enum node_move_kind kind;
	struct inet_addr ep;   /* the node that joins or leaves */
	const char *source_dc; /* rebuild: fetch from there (NULL: any) */
	unsigned max_attempts; /* failed sessions before giving up; 0: none */
	void (*progress)(void *arg, const char *line); /* optional */
	/* `error` is "" when ok; done may delete the movement. */
	void (*done)(void *arg, bool ok, const char *error);
	void *arg;
};
struct node_move;
struct node_move *node_move_start(struct node *n, struct node_repair *r,
				  const struct node_move_config *c);
void node_move_delete(struct node_move *m);
/* Where a movement is (the metrics endpoint): its keyspaces and
 * (keyspace, range) pieces to stream, counted when streaming begins (0
 * before), those streamed so far, and the rows and bytes they sent. The
 * bytes to come are not known: repair's sync sends what differs. */
struct node_move_progress {
	const char *kind; /* node_move_kind_name's */
	bool streaming;   /* not done yet */
	uint64_t ranges_total, ranges_done;
	uint64_t keyspaces_total, keyspaces_done;
	uint64_t rows, bytes;
};
void node_move_get_progress(const struct node_move *m,
			    struct node_move_progress *out);
/* "bootstrap", "decommission", "removenode", "rebuild". */
const char *node_move_kind_name(enum node_move_kind kind);

/* decommission, removenode and rebuild (node_moves.c): registers the
 * admin commands. After the repair; deleted before it. */
struct node_moves;
struct node_moves *node_moves_new(struct node *n);
void node_moves_delete(struct node_moves *l);
/* The movement decommission, removenode or rebuild runs, or NULL. */
const struct node_move *node_moves_current(const struct node_moves *l);

/* Scheduled repair (node_repair_sched.c) over `repair`'s sessions; its
 * state file is read here, before the loop runs. NULL with err set (a bad
 * repair_scheduler key). */
struct repair;
struct buf;
struct node_repair_sched;
struct node_repair_sched *node_repair_sched_new(struct node *n,
						struct repair *repair);
void node_repair_sched_delete(struct node_repair_sched *ns);
/* Whether the local session is a scheduled segment; preempting cancels
 * it (to be retried) so a manual repair can run. */
bool node_repair_sched_running(struct node_repair_sched *ns);
void node_repair_sched_preempt(struct node_repair_sched *ns);
/* A line on the running scheduled segment, appended to `out`; false
 * when none runs. */
bool node_repair_sched_describe_running(struct node_repair_sched *ns,
					struct buf *out);
/* `repair schedule ...`: the admin command's contract (admin.h). */
int node_repair_sched_cmd(struct node_repair_sched *ns, size_t argc,
			  const char *const *argv, struct buf *out,
			  struct buf *err);

/* internode_tls.c: server_encryption_options into the transport's
 * config (the contexts are the node's, freed by node_internode_tls_free),
 * and the transport's locate hook. */
struct transport_config;
struct transport_location;
int node_internode_tls(struct node *n, struct transport_config *tc);
void node_internode_tls_free(struct node *n);
/* The two contexts made from the options' files (thread-safe: it reads
 * only `se`), or -1 with err set ("server_encryption_options: ..."). */
struct ssl_ctx_st;
int node_internode_tls_contexts(const struct conf_server_encryption *se,
				struct ssl_ctx_st **server,
				struct ssl_ctx_st **client);
/* Connections from now on use these (owned from here); open ones keep
 * theirs. */
void node_internode_tls_install(struct node *n, struct ssl_ctx_st *server,
				struct ssl_ctx_st *client);

/* tls_reload.c: certificate hot reloading, as Cassandra 4.1's SSLFactory:
 * every ssl_hot_reload_period the keystore and truststore files of
 * client_encryption_options and server_encryption_options are looked at
 * (on a worker thread); when one changed, that section's contexts are made
 * anew and new connections use them, or, when the new files are broken,
 * the old ones stay and the error is logged. */
int node_tls_reload_start(struct node *n);
void node_tls_reload_stop(struct node *n);
/* Under dc/rack: gossip news of a peer's place reconnects to it as the
 * mode says (transport_reconsider). */
int node_internode_tls_start(struct node *n);
bool node_locate_peer(void *arg, const struct inet_addr *ep,
		      struct transport_location *out);

#endif
