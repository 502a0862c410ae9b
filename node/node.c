/*
 * Node lifecycle: directories, ownership checks, the event loop, signals.
 *
 * Start-up order: log first (so every later failure is in system.log), then
 * directories, then the cluster-ownership check and the lock, then the loop.
 * A data directory remembers the cluster it was created for in a small file
 * (DATA_DIR/cassini-cluster); starting with another cluster_name is refused,
 * as Cassandra refuses a saved cluster name that differs from the yaml.
 * The lock (DATA_DIR/cassinid.lock, flock) stops two processes from sharing
 * one data directory.
 */
#define LOG_MODULE "node"
#include "node/node.h"

#include "common/env_real.h"
#include "common/err.h"
#include "common/log.h"
#include "common/loopq.h"
#include "common/uuid.h"
#include "common/workers.h"
#include "gossip/gossip.h"
#include "node/admin.h"
#include "node/cql_service.h"
#include "node/members.h"
#include "node/node_internal.h"
#include "node/transport.h"
#include "repair/repair.h"
#include "replication/paxos.h"
#include "replication/replication.h"
#include "ring/ring.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define CLUSTER_MARKER   "cassini-cluster"
#define LOCK_FILE        "cassinid.lock"
#define CLUSTER_NAME_MAX 256

#define JOIN_MIN_ROUNDS    4  /* learn the ring before choosing tokens */
#define JOIN_STUCK_ROUNDS  60 /* then a joiner ahead of us is not waited for */
#define JOIN_SILENT_ROUNDS 5  /* a joiner not heard of for longer failed */
#define SETTLE_ROUNDS      5  /* longest wait for gossip before serving */
#define SETTLE_POLL_US     100000 /* how often that wait looks */
#define SHUTDOWN_FLUSH_MS  200
#define STOP_POLL_US       50000u /* node_stop's look at the coordinator */

static void log_path(const struct node *n, char *path, size_t cap)
{
	snprintf(path, cap, "%s/system.log", n->conf.log_directory);
}

static int open_log(struct node *n)
{
	char path[PATH_MAX];
	log_set_level((enum log_level)n->conf.log_level);
	if (env_mkdir_p(n->env, n->conf.log_directory) != 0)
		return err_prefix("log_directory");
	log_path(n, path, sizeof(path));
	return log_open_file(path);
}

/* SIGHUP: logrotate has moved system.log away; write to a new one. */
static void on_hangup(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	char path[PATH_MAX];
	log_path(arg, path, sizeof(path));
	if (log_reopen_file(path) != 0)
		LOG_WARN("SIGHUP: %s; still writing to the old file",
			 err_msg());
	else
		LOG_INFO("reopened %s (SIGHUP)", path);
}

static int make_dirs(struct node *n)
{
	const struct conf *c = &n->conf;
	for (size_t i = 0; i < c->data_file_directories.count; i++)
		if (env_mkdir_p(n->env, c->data_file_directories.items[i]) != 0)
			return err_prefix("data_file_directories");
	if (env_mkdir_p(n->env, c->commitlog_directory) != 0)
		return err_prefix("commitlog_directory");
	if (env_mkdir_p(n->env, c->hints_directory) != 0)
		return err_prefix("hints_directory");
	if (env_mkdir_p(n->env, c->saved_caches_directory) != 0)
		return err_prefix("saved_caches_directory");
	return 0;
}

/* Refuses a data directory created for another cluster; marks a new one. */
static int check_cluster_marker(struct node *n, const char *dir)
{
	char path[PATH_MAX];
	uint8_t *saved;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", dir, CLUSTER_MARKER);
	if (env_read_file(n->env, path, CLUSTER_NAME_MAX, &saved, &len) == 0) {
		while (len &&
		       (saved[len - 1] == '\n' || saved[len - 1] == '\r'))
			saved[--len] = '\0';
		int same = strcmp((char *)saved, n->conf.cluster_name) == 0;
		if (!same)
			err_set(ERR_CONFIG,
				"data directory %s belongs to cluster '%s', "
				"not "
				"'%s' (cluster_name in node.yaml)",
				dir, (char *)saved, n->conf.cluster_name);
		free(saved);
		return same ? 0 : -1;
	}
	if (err_code() != ERR_NOT_FOUND)
		return -1;
	char text[CLUSTER_NAME_MAX + 2];
	int tl = snprintf(text, sizeof(text), "%s\n", n->conf.cluster_name);
	if (tl < 0 || (size_t)tl >= sizeof(text))
		return err_set(ERR_CONFIG, "cluster_name is too long");
	LOG_INFO("claiming data directory %s for cluster '%s'", dir,
		 n->conf.cluster_name);
	return env_write_file_atomic(n->env, path, text, (size_t)tl);
}

static int take_lock(struct node *n)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s",
		 n->conf.data_file_directories.items[0], LOCK_FILE);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return err_set_errno(errno, "cannot open %s", path);
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		char pid[32] = "?";
		ssize_t r = pread(fd, pid, sizeof(pid) - 1, 0);
		if (r > 0) {
			pid[r] = '\0';
			pid[strcspn(pid, "\n")] = '\0';
		}
		close(fd);
		return err_set(
			ERR_EXISTS,
			"data directory %s is in use by another cassinid "
			"(pid %s)",
			n->conf.data_file_directories.items[0], pid);
	}
	char pid[32];
	int pl = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)pl, 0) != pl) {
		close(fd);
		return err_set_errno(errno, "cannot write %s", path);
	}
	n->lock_fd = fd;
	return 0;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	struct node *n = arg;
	if (n->stop_reason) {
		LOG_WARN("second %s: exiting now", strsignal((int)sig));
		event_base_loopbreak(n->base);
		return;
	}
	node_stop(n, sig == SIGTERM ? "SIGTERM" : "SIGINT");
}

static int setup_loop(struct node *n)
{
	n->base = event_base_new();
	if (!n->base)
		return err_set(ERR_NOMEM, "cannot create the event loop");
	n->env = env_real_new(n->base);
	if (!n->env)
		return -1;
	n->sig_term = evsignal_new(n->base, SIGTERM, on_signal, n);
	n->sig_int = evsignal_new(n->base, SIGINT, on_signal, n);
	n->sig_hup = evsignal_new(n->base, SIGHUP, on_hangup, n);
	if (!n->sig_term || !n->sig_int || !n->sig_hup ||
	    evsignal_add(n->sig_term, NULL) != 0 ||
	    evsignal_add(n->sig_int, NULL) != 0 ||
	    evsignal_add(n->sig_hup, NULL) != 0)
		return err_set(ERR_IO, "cannot install signal handlers");
	return 0;
}

/* ---- membership ---------------------------------------------------------- */

static void dispatch(void *arg, const struct inet_addr *from, uint32_t verb,
		     const uint8_t *msg, size_t len)
{
	struct node *n = arg;
	if (verb <= GOSSIP_VERB_MAX && n->gossip) {
		gossip_process(n->gossip, from, verb, msg, len);
		return;
	}
	if (((verb >= REPL_VERB_FIRST && verb <= REPL_VERB_LAST) ||
	     (verb >= PAXOS_VERB_FIRST && verb <= PAXOS_VERB_LAST)) &&
	    n->cql) {
		cql_service_receive(n->cql, from, verb, msg, len);
		return;
	}
	if (verb >= REPAIR_VERB_FIRST && verb <= REPAIR_VERB_LAST &&
	    n->repair) {
		node_repair_receive(n->repair, from, verb, msg, len);
		return;
	}
	char a[INET_ADDR_STRLEN];
	LOG_DEBUG("dropping a message of unknown verb %u from %s", verb,
		  inet_addr_format(from, a, sizeof(a)));
}

/* Gossips our tokens with `status` (BOOT or NORMAL). */
static int gossip_tokens(struct node *n, const char *status)
{
	char *text = local_state_tokens_text(&n->local);
	if (!text)
		return -1;
	char value[48];
	snprintf(value, sizeof(value), "%s,%lld", status,
		 (long long)n->local.tokens[0]);
	int rc = gossip_set_local_state(n->gossip, GOSSIP_STATE_TOKENS, text);
	if (rc == 0)
		rc = gossip_set_local_state(
			n->gossip, GOSSIP_STATE_STATUS_WITH_PORT, value);
	free(text);
	return rc;
}

/* Whether gossip has settled enough to coordinate requests (Cassandra's
 * waitToSettle, in our terms): every ring member known (saved or
 * gossiped) that has not announced a shutdown is UP, and some peer has
 * been heard from (unless we are the only seed). A restarted node's
 * saved peers are DOWN until they answer; serving before would answer
 * Unavailable for what they replicate. */
static bool gossip_settled(struct node *n)
{
	bool heard = false, other_seed = false;
	for (size_t i = 0; i < n->conf.seed_count; i++)
		other_seed |= !inet_addr_eq(&n->conf.seeds[i],
					    &n->conf.broadcast_address);
	for (size_t i = 0; i < gossip_endpoint_count(n->gossip); i++) {
		struct gossip_endpoint_info info;
		if (gossip_endpoint_at(n->gossip, i, &info) != 0 ||
		    info.is_self)
			continue;
		heard |= info.generation > 0;
		if (info.states[GOSSIP_STATE_TOKENS] && !info.alive &&
		    (info.status == GOSSIP_STATUS_NORMAL ||
		     info.status == GOSSIP_STATUS_LEAVING ||
		     info.status == GOSSIP_STATUS_BOOT))
			return false;
	}
	return heard || !other_seed;
}

static int serve(struct node *n)
{
	int rc = cql_service_serve(n->cql);
	if (rc == 0)
		rc = gossip_set_local_state(n->gossip, GOSSIP_STATE_RPC_READY,
					    "true");
	return rc;
}

static uint64_t settle_poll_us(const struct node *n)
{
	uint64_t round = n->conf.gossip_interval_ms * 1000u;
	return round < SETTLE_POLL_US ? round : SETTLE_POLL_US;
}

/* Opens the native port once gossip settled (looked at every 100 ms, so a
 * restart serves as soon as its peers are UP), or after SETTLE_ROUNDS
 * rounds whatever it says (a peer may be down for good). */
static void settle_tick(void *arg)
{
	struct node *n = arg;
	bool settled = gossip_settled(n);
	if (!settled && env_mono_us(n->env) < n->settle_deadline_us) {
		env_timer_arm(n->env, n->settle_timer, settle_poll_us(n));
		return;
	}
	if (!settled)
		LOG_WARN("serving clients with peers still down (%zu of %zu "
			 "peers up after %u gossip rounds)",
			 gossip_live_count(n->gossip),
			 gossip_endpoint_count(n->gossip) - 1, SETTLE_ROUNDS);
	if (serve(n) != 0) {
		LOG_ERROR("cannot serve clients: %s", err_msg());
		node_fail(n, "cannot serve");
	}
}

/* Gossips our tokens and NORMAL status, then opens the CQL port once
 * gossip has settled: clients are served once the node is part of the
 * ring and knows who else is. */
static int announce_tokens(struct node *n)
{
	int rc = gossip_tokens(n, "NORMAL");
	if (rc != 0 || !n->cql)
		return rc;
	if (gossip_settled(n))
		return serve(n);
	if (!n->settle_timer &&
	    !(n->settle_timer = env_timer_new(n->env, settle_tick, n)))
		return -1;
	LOG_INFO("waiting for gossip to settle before serving clients");
	n->settle_deadline_us =
		env_mono_us(n->env) +
		(uint64_t)SETTLE_ROUNDS * n->conf.gossip_interval_ms * 1000u;
	env_timer_arm(n->env, n->settle_timer, settle_poll_us(n));
	return 0;
}

static bool is_seed(const struct conf *c)
{
	for (size_t i = 0; i < c->seed_count; i++)
		if (c->seeds[i].family == c->broadcast_address.family &&
		    memcmp(c->seeds[i].ip, c->broadcast_address.ip,
			   sizeof(c->seeds[i].ip)) == 0)
			return true;
	return false;
}

/* Whether a node choosing its tokens now fetches data before it serves:
 * Cassandra's rule (auto_bootstrap, and seeds never do). */
static bool wants_bootstrap(const struct node *n)
{
	if (!n->conf.auto_bootstrap || !n->repair)
		return false;
	if (is_seed(&n->conf)) {
		LOG_INFO("not bootstrapping: this node is a seed");
		return false;
	}
	return true;
}

static void bootstrap_done(void *arg, bool ok, const char *error)
{
	struct node *n = arg;
	node_move_delete(n->bootstrap);
	n->bootstrap = NULL;
	if (!ok) {
		/* Bootstrap retries until it works (no max_attempts), so this
		 * only guards a future limit: the node keeps its bootstrapping
		 * state, and a restart resumes it, as Cassandra's does. */
		LOG_ERROR("bootstrap failed: %s", error);
		node_fail(n, "bootstrap failed");
		return;
	}
	n->local.bootstrapping = false;
	if (local_state_save(n->env, n->conf.saved_caches_directory,
			     &n->local) != 0 ||
	    announce_tokens(n) != 0) {
		LOG_ERROR("cannot join the ring: %s", err_msg());
		node_fail(n, "cannot join");
	}
}

/* With our tokens known (chosen now, or saved by a run that a restart cut
 * short while it bootstrapped): NORMAL at once, or BOOT while bootstrap.c
 * fetches what we will replicate, then NORMAL. */
static int join_ring(struct node *n)
{
	if (!n->local.bootstrapping)
		return announce_tokens(n);
	if (gossip_tokens(n, "BOOT") != 0)
		return -1;
	LOG_INFO("bootstrapping: %zu tokens gossiped as BOOT",
		 n->local.token_count);
	struct node_move_config mc = {.kind = NODE_MOVE_BOOTSTRAP,
				      .ep = n->conf.broadcast_address,
				      .done = bootstrap_done,
				      .arg = n};
	n->bootstrap = node_move_start(n, n->repair, &mc);
	return n->bootstrap ? 0 : -1;
}

/* Whether endpoint i (in *info) is a joiner: another node with no tokens
 * yet, not shut down or gone, heard of within JOIN_SILENT_ROUNDS (else it
 * failed or stopped before choosing). */
static bool is_joiner(struct node *n, size_t i,
		      struct gossip_endpoint_info *info)
{
	uint64_t silent = (uint64_t)JOIN_SILENT_ROUNDS *
			  n->conf.gossip_interval_ms * 1000u;
	return gossip_endpoint_at(n->gossip, i, info) == 0 && !info->is_self &&
	       info->status != GOSSIP_STATUS_SHUTDOWN &&
	       info->status != GOSSIP_STATUS_LEFT &&
	       !info->states[GOSSIP_STATE_TOKENS] &&
	       env_mono_us(n->env) - info->update_us <= silent;
}

/* Whether the joiner `info` goes before (generation, address) gen/addr. */
static bool joins_before(const struct gossip_endpoint_info *info, int64_t gen,
			 const struct inet_addr *addr)
{
	return info->generation < gen || (info->generation == gen &&
					  inet_addr_cmp(&info->addr, addr) < 0);
}

/* A joiner of our DC ahead of us that has no tokens yet, or NULL. Joiners
 * go in the order they started (gossip generation), then by address, so
 * each allocation sees the nodes before it (concurrent choices split the
 * same ranges), and one started late waits for those already waiting. A
 * joiner whose DC is not known yet counts. */
static const struct inet_addr *joiner_ahead(struct node *n,
					    struct gossip_endpoint_info *info)
{
	for (size_t i = 0; i < gossip_endpoint_count(n->gossip); i++) {
		if (!is_joiner(n, i, info) ||
		    !joins_before(info, n->local.generation,
				  &n->conf.broadcast_address))
			continue;
		const char *dc = info->states[GOSSIP_STATE_DC];
		if (!dc || strcmp(dc, n->conf.dc) == 0)
			return &info->addr;
	}
	return NULL;
}

/* The rack of the next joiner of our DC behind us (a copy, or NULL when
 * none is waiting, or the next one that may be of our DC has not told its
 * DC or rack yet). The allocator then prepares the ring for that join:
 * nodes started together, as scripts/cluster starts them, form such a
 * queue. */
static char *joiner_behind(struct node *n)
{
	struct gossip_endpoint_info info, next = {0};
	const char *rack = NULL;
	bool found = false;
	for (size_t i = 0; i < gossip_endpoint_count(n->gossip); i++) {
		if (!is_joiner(n, i, &info) ||
		    joins_before(&info, n->local.generation,
				 &n->conf.broadcast_address) ||
		    (found &&
		     !joins_before(&info, next.generation, &next.addr)))
			continue;
		const char *dc = info.states[GOSSIP_STATE_DC];
		if (dc && strcmp(dc, n->conf.dc) != 0)
			continue;
		next = info;
		found = true;
		rack = dc ? info.states[GOSSIP_STATE_RACK] : NULL;
	}
	return rack ? strdup(rack) : NULL;
}

static bool has_initial_token(const struct conf *c)
{
	return c->initial_token && *c->initial_token;
}

/* Choosing tokens runs on a worker: the allocator takes up to a second of
 * CPU with 16 tokens (more with more), and the loop keeps gossiping. */
struct token_job {
	struct node *n;
	struct ring *ring; /* a reference, for the worker */
	size_t count;
	int alloc_rf;
	uint64_t seed;
	int64_t *tokens;
	int rc;
	char *next_rack;  /* joiner_behind's, or NULL */
	bool fell_back;   /* the allocator failed; random tokens */
	char why[256];    /* the allocator's error, or the final one */
	enum err_code ec; /* with rc != 0 */
};

static void token_job_run(void *arg)
{
	struct token_job *j = arg;
	const struct conf *c = &j->n->conf;
	j->rc = ring_tokens_choose(j->ring, c->initial_token, j->count,
				   j->alloc_rf, c->dc, c->rack, j->next_rack,
				   j->seed, j->tokens);
	if (j->rc != 0 && !has_initial_token(c)) {
		snprintf(j->why, sizeof(j->why), "%s", err_msg());
		j->fell_back = true;
		j->rc = ring_tokens_choose(j->ring, NULL, j->count, 0, c->dc,
					   c->rack, NULL, j->seed, j->tokens);
	}
	if (j->rc != 0) {
		snprintf(j->why, sizeof(j->why), "%s", err_msg());
		j->ec = err_code();
	}
}

/* Jitter, save and announce the chosen tokens (loop thread). */
static int tokens_chosen(struct node *n, struct token_job *j)
{
	bool initial = has_initial_token(&n->conf);
	if (j->fell_back)
		LOG_WARN("token allocator failed (%s); using random tokens",
			 j->why);
	if (j->rc != 0) {
		err_set(j->ec, "%s", j->why);
		return initial ? err_prefix("initial_token") : -1;
	}
	int64_t *tokens = j->tokens;
	size_t count = j->count;
	j->tokens = NULL;
	if (!initial) {
		/* Two nodes that joined unaware of each other may have run
		 * the allocator on the same ring and picked the same points. */
		struct rng g;
		rng_seed(&g, env_random(n->env));
		ring_tokens_jitter(j->ring, &g, tokens, count);
	}
	n->local.tokens = tokens;
	n->local.token_count = count;
	n->local.bootstrapping = wants_bootstrap(n);
	if (local_state_save(n->env, n->conf.saved_caches_directory,
			     &n->local) != 0)
		return -1;
	size_t peers = 0; /* of our DC, in the ring the choice saw */
	for (size_t i = 0; i < ring_endpoint_count(j->ring); i++) {
		const struct ring_endpoint *e = ring_endpoint_get(j->ring, i);
		peers += e->num_tokens && strcmp(e->dc, n->conf.dc) == 0;
	}
	bool alloc = !initial && !j->fell_back && j->alloc_rf > 0;
	LOG_INFO("chose %zu tokens (%s%s%s) after %u gossip rounds, with %zu "
		 "other nodes of %s in the ring",
		 count,
		 initial ? "initial_token"
		 : alloc ? "allocator"
			 : "random",
		 alloc && j->next_rack ? ", ready for the next joiner on " : "",
		 alloc && j->next_rack ? j->next_rack : "", n->join_rounds,
		 peers, n->conf.dc);
	return join_ring(n);
}

static void token_job_done(void *arg)
{
	struct token_job *j = arg;
	struct node *n = j->n;
	/* one choice per life: the worker's thread goes (it is idle now) */
	workers_delete(n->join_worker);
	n->join_worker = NULL;
	if (!n->stop_reason && tokens_chosen(n, j) != 0) {
		LOG_ERROR("cannot choose tokens: %s", err_msg());
		node_fail(n, "no tokens");
	}
	ring_unref(j->ring);
	free(j->next_rack);
	free(j->tokens);
	free(j);
}

static int choose_tokens(struct node *n)
{
	struct token_job *j = calloc(1, sizeof(*j));
	if (!j || !(j->tokens = malloc((size_t)n->conf.num_tokens *
				       sizeof(*j->tokens)))) {
		free(j);
		return err_set(ERR_NOMEM, "tokens");
	}
	if (!n->join_q && !(n->join_q = loopq_new(n->base))) {
		free(j->tokens);
		free(j);
		return -1;
	}
	/* no worker (threads short): the job runs inline */
	if (!n->join_worker)
		n->join_worker = workers_new_background(1, "tokens");
	j->n = n;
	j->ring = ring_ref(members_ring(n->members));
	j->count = (size_t)n->conf.num_tokens;
	j->alloc_rf = (int)n->conf.allocate_tokens_for_local_replication_factor;
	j->seed = env_random(n->env);
	j->next_rack = joiner_behind(n);
	workers_offload(n->join_worker, n->join_q, token_job_run,
			token_job_done, j);
	return 0;
}

static void join_tick(void *arg)
{
	struct node *n = arg;
	n->join_rounds++;
	/* Only the allocator's choice depends on the nodes before it. */
	bool allocating =
		!has_initial_token(&n->conf) &&
		n->conf.allocate_tokens_for_local_replication_factor > 0;
	struct gossip_endpoint_info info;
	const struct inet_addr *wait =
		allocating ? joiner_ahead(n, &info) : NULL;
	/* Joiners ahead of us finish one by one, each resetting the count:
	 * a large cluster started at once may take minutes, but one joiner
	 * that stays ahead of us for JOIN_STUCK_ROUNDS is not waited for. */
	if (!wait)
		n->join_wait_rounds = 0;
	else if (n->join_wait_rounds && inet_addr_eq(wait, &n->join_waiting))
		n->join_wait_rounds++;
	else {
		n->join_waiting = *wait;
		n->join_wait_rounds = 1;
	}
	if (n->join_rounds < JOIN_MIN_ROUNDS ||
	    (wait && n->join_wait_rounds < JOIN_STUCK_ROUNDS)) {
		env_timer_arm(n->env, n->join_timer,
			      n->conf.gossip_interval_ms * 1000u);
		return;
	}
	if (wait) {
		char a[INET_ADDR_STRLEN];
		inet_addr_format(wait, a, sizeof(a));
		LOG_WARN("choosing tokens while %s is still joining (it made "
			 "no progress for %u gossip rounds)",
			 a, n->join_wait_rounds);
	}
	gossip_set_follow_seeds(n->gossip, false);
	if (choose_tokens(n) != 0) {
		LOG_ERROR("cannot choose tokens: %s", err_msg());
		node_fail(n, "no tokens");
	}
}

static int setup_membership(struct node *n)
{
	const struct conf *c = &n->conf;
	if (local_state_load(n->env, c->saved_caches_directory, &n->local) != 0)
		return err_prefix("saved_caches_directory");
	if (n->local.decommissioned)
		return err_set(ERR_CONFIG,
			       "this node was decommissioned and will not "
			       "rejoin the ring; to add it again as a new "
			       "node, empty its data_file_directories, "
			       "commitlog_directory, hints_directory and "
			       "saved_caches_directory");
	n->start_wall_us = env_wall_us(n->env);
	struct transport_config tc = {
		.cluster_name = c->cluster_name,
		.partitioner = c->partitioner,
		.host_id = n->local.host_id,
		.dc = c->dc,
		.rack = c->rack,
		.listen = c->listen_address,
		.broadcast = c->broadcast_address,
		.listen_on_broadcast = c->listen_on_broadcast_address,
		.max_message_size = c->internode_max_message_size,
		.connect_timeout_ms = c->internode_tcp_connect_timeout_ms,
	};
	if (node_internode_tls(n, &tc) != 0)
		return -1;
	n->transport = transport_new(n->base, n->env, &tc);
	if (!n->transport || transport_listen(n->transport) != 0)
		return -1;
	env_real_set_transport(n->env, transport_send, n->transport);
	env_set_receiver(n->env, dispatch, n);

	struct gossip_config gc = {
		.cluster_name = c->cluster_name,
		.partitioner = c->partitioner,
		.self = c->broadcast_address,
		.seeds = c->seeds,
		.seed_count = c->seed_count,
		.generation = n->local.generation,
		.interval_us = c->gossip_interval_ms * 1000u,
		.phi_convict_threshold = c->phi_convict_threshold,
	};
	n->gossip = gossip_new(n->env, &gc);
	if (!n->gossip)
		return -1;
	n->members = members_new(n->gossip, &c->broadcast_address);
	if (!n->members || node_internode_tls_start(n) != 0)
		return -1;
	n->join_timer = env_timer_new(n->env, join_tick, n);
	if (!n->join_timer)
		return -1;

	char native[INET_ADDR_STRLEN];
	inet_addr_format(&c->broadcast_rpc_address, native, sizeof(native));
	if (gossip_set_local_state(n->gossip, GOSSIP_STATE_DC, c->dc) ||
	    gossip_set_local_state(n->gossip, GOSSIP_STATE_RACK, c->rack) ||
	    gossip_set_local_state(n->gossip, GOSSIP_STATE_HOST_ID,
				   n->local.host_id) ||
	    gossip_set_local_state(n->gossip, GOSSIP_STATE_RELEASE_VERSION,
				   CASSINI_VERSION) ||
	    gossip_set_local_state(
		    n->gossip, GOSSIP_STATE_NATIVE_ADDRESS_AND_PORT, native) ||
	    gossip_set_local_state(n->gossip, GOSSIP_STATE_LOAD, "0") ||
	    gossip_set_local_state(n->gossip, GOSSIP_STATE_RPC_READY,
				   "false") ||
	    node_prefer_local_start(n) != 0)
		return -1;

	n->admin = admin_new(n->base, &c->admin_address);
	if (!n->admin || node_admin_register(n) != 0)
		return -1;
	if (c->jmx_encryption.enabled) {
		n->admin_tls = cql_service_tls_context(
			&c->jmx_encryption, "jmx_encryption_options");
		if (!n->admin_tls)
			return -1;
		admin_set_tls(n->admin, n->admin_tls);
	}
	if (admin_listen(n->admin) != 0)
		return -1;
	if (c->metrics_port != 0 && !(n->metrics = node_metrics_new(n)))
		return -1;
	return 0;
}

/* ---- CQL ----------------------------------------------------------------- */

/* Peers as system.peers shows them: gossip endpoints with tokens, a dc, a
 * rack and a host id, that have not left. The arrays live in the node until
 * the next call. */
static void collect_peers(struct node *n)
{
	size_t count = gossip_endpoint_count(n->gossip);
	free(n->cql_peers);
	free(n->cql_peer_tokens);
	n->cql_peers = calloc(count ? count : 1, sizeof(*n->cql_peers));
	n->cql_peer_tokens = NULL;
	n->cql_peer_count = 0;
	n->cql_other_members = 0;
	size_t total = 0;
	int64_t **lists = calloc(count ? count : 1, sizeof(*lists));
	size_t *lens = calloc(count ? count : 1, sizeof(*lens));
	if (!n->cql_peers || !lists || !lens)
		goto done;
	for (size_t i = 0; i < count; i++) {
		struct gossip_endpoint_info info;
		if (gossip_endpoint_at(n->gossip, i, &info) != 0 ||
		    info.is_self || info.status == GOSSIP_STATUS_LEFT)
			continue;
		n->cql_other_members++;
		const char *const *st = info.states;
		struct cql_peer_info *p = &n->cql_peers[n->cql_peer_count];
		if (!st[GOSSIP_STATE_TOKENS] || !st[GOSSIP_STATE_DC] ||
		    !st[GOSSIP_STATE_RACK] || !st[GOSSIP_STATE_HOST_ID] ||
		    members_parse_host_id(st[GOSSIP_STATE_HOST_ID],
					  p->host_id) != 0 ||
		    node_tokens_parse(st[GOSSIP_STATE_TOKENS],
				      &lists[n->cql_peer_count],
				      &lens[n->cql_peer_count]) < 0)
			continue;
		p->address = info.addr;
		p->preferred =
			transport_connect_address(n->transport, &info.addr);
		if (inet_addr_eq(&p->preferred, &info.addr))
			p->preferred = (struct inet_addr){0};
		p->native_address = info.addr;
		p->native_address.port =
			(uint16_t)n->conf.native_transport_port;
		if (st[GOSSIP_STATE_NATIVE_ADDRESS_AND_PORT])
			inet_addr_parse(
				st[GOSSIP_STATE_NATIVE_ADDRESS_AND_PORT],
				(uint16_t)n->conf.native_transport_port,
				&p->native_address);
		p->dc = st[GOSSIP_STATE_DC];
		p->rack = st[GOSSIP_STATE_RACK];
		if (st[GOSSIP_STATE_SCHEMA])
			members_parse_host_id(st[GOSSIP_STATE_SCHEMA],
					      p->schema_version);
		total += lens[n->cql_peer_count];
		n->cql_peer_count++;
	}
	/* One array for every peer's tokens. */
	n->cql_peer_tokens = malloc((total ? total : 1) * sizeof(int64_t));
	size_t at = 0;
	for (size_t i = 0; n->cql_peer_tokens && i < n->cql_peer_count; i++) {
		memcpy(n->cql_peer_tokens + at, lists[i],
		       lens[i] * sizeof(int64_t));
		n->cql_peers[i].tokens = n->cql_peer_tokens + at;
		n->cql_peers[i].token_count = lens[i];
		at += lens[i];
	}
	if (!n->cql_peer_tokens)
		n->cql_peer_count = 0;
done:
	for (size_t i = 0; lists && i < count; i++)
		free(lists[i]);
	free(lists);
	free(lens);
}

/* What system.local and system.peers report. The strings in `out` point
 * into gossip's state and stay valid until the loop runs again. */
static struct ring *node_ring(void *arg)
{
	struct node *n = arg;
	return members_ring(n->members);
}

static bool node_peer_alive(void *arg, const struct inet_addr *ep)
{
	struct node *n = arg;
	return n->gossip && gossip_is_alive(n->gossip, ep);
}

static void node_cql_info(void *arg, struct cql_node_info *out)
{
	struct node *n = arg;
	memset(out, 0, sizeof(*out));
	out->cluster_name = n->conf.cluster_name;
	out->snitch = n->conf.endpoint_snitch ? "GossipingPropertyFileSnitch"
					      : "SimpleSnitch";
	out->dc = n->conf.dc;
	out->rack = n->conf.rack;
	members_parse_host_id(n->local.host_id, out->host_id);
	out->listen_address = n->conf.listen_address;
	out->broadcast_address = n->conf.broadcast_address;
	out->rpc_address = n->conf.broadcast_rpc_address;
	out->gossip_generation = (int32_t)n->local.generation;
	out->tokens = n->local.tokens;
	out->token_count = n->local.token_count;
	collect_peers(n);
	out->peers = n->cql_peers;
	out->peer_count = n->cql_peer_count;
	out->other_members = n->cql_other_members;
}

/* Gossip carries our schema version so peers (and drivers) see agreement;
 * our own changes are pushed to every live peer at once. */
static void node_schema_changed(void *arg, const uint8_t *record, size_t len,
				bool local)
{
	struct node *n = arg;
	uint8_t v[16];
	char text[37];
	n->schema_pull_skip = n->schema_pull_backoff = 0;
	cql_service_schema_version(n->cql, v);
	uuid_format(v, text);
	if (gossip_set_local_state(n->gossip, GOSSIP_STATE_SCHEMA, text) != 0)
		LOG_WARN("cannot gossip the schema version: %s", err_msg());
	if (!local || !record)
		return;
	for (size_t i = 0; i < gossip_endpoint_count(n->gossip); i++) {
		struct gossip_endpoint_info info;
		if (gossip_endpoint_at(n->gossip, i, &info) != 0 ||
		    info.is_self || !info.alive)
			continue;
		/* A peer we miss now catches up by pulling. */
		transport_send(n->transport, &info.addr, NODE_VERB_SCHEMA_PUSH,
			       record, len);
	}
}

static void on_schema_push(void *arg, const struct inet_addr *from,
			   uint32_t verb, uint64_t request_id,
			   const uint8_t *payload, size_t len)
{
	(void)from;
	(void)verb;
	(void)request_id;
	struct node *n = arg;
	cql_service_apply_record(n->cql, payload, len);
}

static void on_schema_pull(void *arg, const struct inet_addr *from,
			   uint32_t verb, uint64_t request_id,
			   const uint8_t *payload, size_t len)
{
	(void)payload;
	(void)len;
	struct node *n = arg;
	struct buf b;
	buf_init(&b);
	if (cql_service_records(n->cql, &b) == 0)
		transport_respond(n->transport, from, verb, request_id,
				  b.data ? b.data : (const uint8_t *)"", b.len);
	buf_free(&b);
}

/* Rounds of schema_tick skipped at most after pulls that changed nothing
 * (about a minute at the default gossip interval). */
#define SCHEMA_PULL_BACKOFF_MAX 32u

static void on_pull_response(void *arg, int status, const uint8_t *payload,
			     size_t len)
{
	struct node *n = arg;
	n->schema_pull_in_flight = false;
	if (status != 0)
		return;
	uint8_t before[16], after[16];
	cql_service_schema_version(n->cql, before);
	struct cursor c = cursor_make(payload, len);
	uint32_t n_len;
	struct slice rec;
	while (cursor_be32(&c, &n_len) == 0 &&
	       cursor_take(&c, n_len, &rec) == 0)
		cql_service_apply_record(n->cql, rec.ptr, rec.len);
	cql_service_schema_version(n->cql, after);
	if (memcmp(before, after, 16) != 0)
		return;
	/* Nothing new: the versions differ for good (a table whose columns
	 * were numbered differently, a raced ALTER ... WITH) or the peer
	 * lags. Pushes still arrive at once; pull less and less often. */
	unsigned b = n->schema_pull_backoff ? 2 * n->schema_pull_backoff : 1;
	n->schema_pull_backoff =
		b < SCHEMA_PULL_BACKOFF_MAX ? b : SCHEMA_PULL_BACKOFF_MAX;
	n->schema_pull_skip = n->schema_pull_backoff;
}

/* Pull from a live peer whose schema version differs from ours (every
 * other gossip round, backing off while pulls bring nothing). */
static void schema_tick(void *arg)
{
	struct node *n = arg;
	env_timer_arm(n->env, n->schema_timer,
		      2 * n->conf.gossip_interval_ms * 1000u);
	if (n->schema_pull_in_flight)
		return;
	if (n->schema_pull_skip > 0) {
		n->schema_pull_skip--;
		return;
	}
	struct inet_addr peer;
	if (node_schema_disagreement(n, &peer) &&
	    transport_request(n->transport, &peer, NODE_VERB_SCHEMA_PULL, "", 0,
			      2000, on_pull_response, n) == 0) {
		n->schema_pull_in_flight = true;
		n->schema_pulls++;
	}
}

bool node_schema_disagreement(struct node *n, struct inet_addr *peer)
{
	uint8_t v[16];
	char ours[37];
	cql_service_schema_version(n->cql, v);
	uuid_format(v, ours);
	for (size_t i = 0; i < gossip_endpoint_count(n->gossip); i++) {
		struct gossip_endpoint_info info;
		if (gossip_endpoint_at(n->gossip, i, &info) != 0 ||
		    info.is_self || !info.alive ||
		    !info.states[GOSSIP_STATE_SCHEMA] ||
		    strcmp(info.states[GOSSIP_STATE_SCHEMA], ours) == 0)
			continue;
		if (peer)
			*peer = info.addr;
		return true;
	}
	return false;
}

/* LOAD as Cassandra's LoadBroadcaster spreads it: live SSTable bytes as a
 * double, once a minute. */
#define LOAD_INTERVAL_US (60u * 1000000u)

static void load_tick(void *arg)
{
	struct node *n = arg;
	char v[32];
	snprintf(v, sizeof(v), "%.1f", (double)cql_service_load_bytes(n->cql));
	if (gossip_set_local_state(n->gossip, GOSSIP_STATE_LOAD, v) != 0)
		LOG_WARN("cannot gossip LOAD: %s", err_msg());
	env_timer_arm(n->env, n->load_timer, LOAD_INTERVAL_US);
}

static int setup_schema_sync(struct node *n)
{
	n->schema_timer = env_timer_new(n->env, schema_tick, n);
	if (!n->schema_timer ||
	    transport_set_handler(n->transport, NODE_VERB_SCHEMA_PUSH,
				  on_schema_push, n) != 0 ||
	    transport_set_handler(n->transport, NODE_VERB_SCHEMA_PULL,
				  on_schema_pull, n) != 0)
		return -1;
	cql_service_on_schema_change(n->cql, node_schema_changed, n);
	node_schema_changed(n, NULL, 0, false);
	env_timer_arm(n->env, n->schema_timer,
		      2 * n->conf.gossip_interval_ms * 1000u);
	return 0;
}

struct node *node_new(struct conf *conf)
{
	struct node *n = calloc(1, sizeof(*n));
	if (!n) {
		conf_free(conf);
		err_set(ERR_NOMEM, "cannot allocate the node");
		return NULL;
	}
	n->conf = *conf;
	memset(conf, 0, sizeof(*conf));
	n->lock_fd = -1;
	signal(SIGPIPE, SIG_IGN);

	if (setup_loop(n) != 0 || open_log(n) != 0 || make_dirs(n) != 0)
		goto fail;
	for (size_t i = 0; i < n->conf.data_file_directories.count; i++)
		if (check_cluster_marker(
			    n, n->conf.data_file_directories.items[i]) != 0)
			goto fail;
	if (take_lock(n) != 0 || setup_membership(n) != 0)
		goto fail;
	struct cql_service_hooks ch = {.node_info = node_cql_info,
				       .ring = node_ring,
				       .is_alive = node_peer_alive,
				       .thread_pools = node_thread_pools,
				       .view_rows = node_view_rows};
	n->cql = cql_service_new(&n->conf, n->base, n->env, &ch, n);
	if (!n->cql)
		goto fail;
	if (setup_schema_sync(n) != 0 || node_events_new(n) != 0 ||
	    !(n->peers = node_peers_new(n)))
		goto fail;
	node_prefer_local_sweep(n); /* the saved peers of our DC */
	if (!(n->repair = node_repair_new(n)) ||
	    !(n->moves = node_moves_new(n)))
		goto fail;
	n->load_timer = env_timer_new(n->env, load_tick, n);
	if (!n->load_timer || node_tls_reload_start(n) != 0)
		goto fail;
	load_tick(n);
	return n;
fail:
	/* main() prints the one stderr line; the log file gets it too. */
	log_set_stderr(false);
	LOG_ERROR("cannot start: %s", err_msg());
	log_set_stderr(true);
	node_delete(n);
	return NULL;
}

int node_run(struct node *n)
{
	char listen[INET_ADDR_STRLEN], b[INET_ADDR_STRLEN];
	char bcast[INET_ADDR_STRLEN + 16] = "";
	inet_addr_format(&n->conf.listen_address, listen, sizeof(listen));
	if (!inet_addr_eq(&n->conf.listen_address, &n->conf.broadcast_address))
		snprintf(bcast, sizeof(bcast), ", broadcast %s",
			 inet_addr_format(&n->conf.broadcast_address, b,
					  sizeof(b)));
	LOG_INFO("cassinid %s starting: cluster '%s', %s/%s, listen %s%s, pid "
		 "%ld",
		 CASSINI_VERSION, n->conf.cluster_name, n->conf.dc,
		 n->conf.rack, listen, bcast, (long)getpid());
	if (n->local.token_count) {
		if (join_ring(n) != 0) {
			LOG_ERROR("cannot start: %s", err_msg());
			return NODE_EXIT_FAILURE;
		}
	} else {
		gossip_set_follow_seeds(n->gossip, true);
		env_timer_arm(n->env, n->join_timer,
			      n->conf.gossip_interval_ms * 1000u);
	}
	if (gossip_start(n->gossip) != 0) {
		LOG_ERROR("cannot start gossip: %s", err_msg());
		return NODE_EXIT_FAILURE;
	}
	LOG_INFO("generation %lld, host id %s", (long long)n->local.generation,
		 n->local.host_id);
	/* scripts/cluster reads what comes next from this line */
	LOG_INFO("cassinid ready (%s)",
		 !n->local.token_count ? "tokens chosen once the ring is known"
		 : n->local.bootstrapping
			 ? "bootstrapping"
			 : "clients served once gossip settles");
	if (event_base_dispatch(n->base) < 0) {
		LOG_ERROR("event loop failed");
		return NODE_EXIT_FAILURE;
	}
	LOG_INFO("shutdown complete (%s)",
		 n->stop_reason ? n->stop_reason : "loop ended");
	return n->failed ? NODE_EXIT_FAILURE : NODE_EXIT_OK;
}

/* node_stop's second step, once the coordinator has no operation left
 * (or write_request_timeout and a little more have passed): gossip tells
 * live peers we are going, and the loop runs a little longer so the
 * announcement leaves the socket buffers. */
static void stop_tick(void *arg)
{
	struct node *n = arg;
	struct repl_stats st = {0};
	if (n->cql)
		cql_service_data_stats(n->cql, &st);
	uint64_t busy = st.inflight + st.background;
	if (busy && n->stop_timer &&
	    env_mono_us(n->env) < n->stop_deadline_us) {
		env_timer_arm(n->env, n->stop_timer, STOP_POLL_US);
		return;
	}
	if (busy)
		LOG_WARN("stopping with %" PRIu64 " coordinator operations "
			 "unfinished",
			 busy);
	struct timeval flush = {0, SHUTDOWN_FLUSH_MS * 1000};
	if (n->gossip && !n->drained)
		gossip_announce_shutdown(n->gossip);
	n->drained = true; /* also lets an admin answer (stopdaemon) leave */
	event_base_loopexit(n->base, &flush);
}

void node_fail(struct node *n, const char *reason)
{
	n->failed = true;
	node_stop(n, reason);
}

void node_stop(struct node *n, const char *reason)
{
	if (n->stop_reason)
		return;
	n->stop_reason = reason;
	LOG_INFO("shutting down (%s)", reason);
	/* As Cassandra's drain: clients go first, then the writes this node
	 * coordinates finish (acknowledged, or hinted at their timeout: a
	 * write answered at ONE from our own replica must still reach the
	 * others or leave hints), then peers are told. Modules are stopped
	 * in node_delete, in reverse start order. */
	if (n->cql)
		cql_service_stop_serving(n->cql);
	n->stop_deadline_us = env_mono_us(n->env) +
			      (n->conf.write_request_timeout_ms + 500) * 1000u;
	if (!n->stop_timer)
		n->stop_timer = env_timer_new(n->env, stop_tick, n);
	stop_tick(n);
}

void node_delete(struct node *n)
{
	if (!n)
		return;
	if (n->sig_term)
		event_free(n->sig_term);
	if (n->sig_int)
		event_free(n->sig_int);
	if (n->sig_hup)
		event_free(n->sig_hup);
	/* A token choice in flight finishes; its completion sees stop_reason
	 * (or no loop) and only frees. */
	if (!n->stop_reason)
		n->stop_reason = "deleted";
	workers_delete(n->join_worker);
	n->join_worker = NULL;
	if (n->join_q)
		loopq_delete(n->join_q);
	if (n->env && n->schema_timer)
		env_timer_free(n->env, n->schema_timer);
	if (n->env && n->load_timer)
		env_timer_free(n->env, n->load_timer);
	node_tls_reload_stop(n);        /* before the contexts' owners */
	node_moves_delete(n->moves);    /* its movement uses the repair */
	node_repair_delete(n->repair);  /* before the storage it scans */
	node_move_delete(n->bootstrap); /* its session went with it */
	node_peers_delete(n->peers);    /* its file's queue is the CQL loop's */
	node_toppartitions_stop(n);     /* its samplers are the storage's */
	node_metrics_delete(n->metrics); /* it reads the CQL service */
	cql_service_delete(n->cql);      /* before gossip: callbacks read it */
	free(n->cql_peers);
	free(n->cql_peer_tokens);
	admin_delete(n->admin);
	SSL_CTX_free(n->admin_tls);
	members_delete(n->members);
	gossip_delete(n->gossip);
	node_events_delete(n->events); /* after its subscription */
	transport_delete(n->transport);
	node_internode_tls_free(n);
	if (n->env && n->join_timer)
		env_timer_free(n->env, n->join_timer);
	if (n->env && n->settle_timer)
		env_timer_free(n->env, n->settle_timer);
	if (n->env && n->stop_timer)
		env_timer_free(n->env, n->stop_timer);
	local_state_free(&n->local);
	if (n->env)
		env_real_delete(n->env);
	if (n->base)
		event_base_free(n->base);
	if (n->lock_fd >= 0)
		close(n->lock_fd); /* releases the flock */
	conf_free(&n->conf);
	log_close_file();
	free(n);
}
