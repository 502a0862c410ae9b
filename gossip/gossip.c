/*
 * The gossip state machine (see gossip.h for the protocol summary).
 *
 * State: one `struct endpoint` per known node, kept in an array sorted by
 * address (binary search; deterministic iteration for the simulator), our own
 * among them. Input arrives through gossip_process() and the round timer;
 * output leaves through env_send(). No other side effects.
 *
 * Invariants:
 *  - versions of our own states and heartbeat come from one counter
 *    (`version`), so "max version" orders every change we make;
 *  - an endpoint's generation only grows; a higher one replaces all of it;
 *  - `alive` is set only by an ECHO answer, cleared by conviction, shutdown
 *    or restart; it is never sent to anyone.
 */
#define LOG_MODULE "gossip"
#include "gossip/gossip.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "gossip/gossip_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LISTENERS             8
#define MAX_GENERATION_DIFFERENCE (86400LL * 365)
#define SHADOW_ROUNDS             5 /* rounds to wait for a seed before going on alone */
/* Status checks per gossip round. Cassandra checks once a round; checking
 * more often convicts at the same phi, just closer to the moment it is
 * crossed (up to a round sooner). */
#define FD_CHECKS 4

struct app_value {
	char *value; /* NULL: absent */
	int32_t version;
};

struct endpoint {
	struct inet_addr addr;
	int64_t generation;
	int32_t heartbeat;
	uint32_t beats;   /* heartbeats of this generation (0: not known) */
	uint64_t born_us; /* when `heartbeat` was born, on our clock */
	struct app_value apps[GOSSIP_STATE_COUNT];
	enum gossip_status status;
	bool alive;
	uint64_t echo_sent_us; /* 0: no ECHO outstanding */
	uint64_t update_us;
	struct gossip_fd_window fd;
};

/* A growable list of outgoing states, reused between messages. Apps of
 * state i start at app_off[i]; pointers are fixed by state_list_finish once
 * the arrays stop moving. */
struct state_list {
	struct gossip_wire_state *st;
	size_t *app_off;
	size_t n, cap;
	struct gossip_wire_app *apps;
	size_t napps, apps_cap;
	uint64_t now_us; /* when the message is built */
};

struct quarantine {
	struct inet_addr addr;
	uint64_t until_us;
};

struct gossip {
	struct env *env;
	const char *cluster_name;
	const char *partitioner;
	struct inet_addr self;
	struct inet_addr *seeds;
	size_t seed_count;
	uint64_t interval_us;
	double phi_threshold;
	uint32_t fd_window;
	uint64_t fd_max_interval_us;
	uint64_t quarantine_us;

	struct endpoint **eps; /* sorted by address */
	size_t ep_count, ep_cap;
	struct endpoint *me;
	int32_t version;

	struct env_timer *timer;
	bool started, stopped, shadow;
	char *status_before_stop; /* STATUS_WITH_PORT before the stop */
	bool follow_seeds;        /* gossip_set_follow_seeds */
	unsigned shadow_rounds;
	struct env_timer *fd_timer; /* status checks, FD_CHECKS per round */
	uint64_t last_check_us;
	uint64_t pause_until_us;

	struct quarantine *quar;
	size_t quar_count;

	struct {
		struct gossip_listener l;
		void *arg;
	} listeners[MAX_LISTENERS];
	size_t listener_count;

	struct gossip_stats stats;
	struct buf out;
	struct state_list scratch;
};

/* ---- names --------------------------------------------------------------- */

static const char *const app_names[GOSSIP_STATE_COUNT] = {
	"STATUS_WITH_PORT",
	"TOKENS",
	"DC",
	"RACK",
	"HOST_ID",
	"SCHEMA",
	"LOAD",
	"RELEASE_VERSION",
	"NATIVE_ADDRESS_AND_PORT",
	"RPC_READY",
	"INTERNAL_ADDRESS_AND_PORT",
};

const char *gossip_app_state_name(enum gossip_app_state key)
{
	return (unsigned)key < GOSSIP_STATE_COUNT ? app_names[key] : "?";
}

static const char *const status_names[] = {
	"", "BOOT", "NORMAL", "LEAVING", "LEFT", "shutdown",
};

const char *gossip_status_name(enum gossip_status st)
{
	return (unsigned)st <= GOSSIP_STATUS_SHUTDOWN ? status_names[st] : "?";
}

enum gossip_status gossip_status_parse(const char *value)
{
	if (!value)
		return GOSSIP_STATUS_UNKNOWN;
	size_t n = strcspn(value, ",");
	for (int i = GOSSIP_STATUS_BOOT; i <= GOSSIP_STATUS_SHUTDOWN; i++)
		if (strlen(status_names[i]) == n &&
		    strncmp(value, status_names[i], n) == 0)
			return (enum gossip_status)i;
	return GOSSIP_STATUS_UNKNOWN;
}

static bool dead_state(const struct endpoint *ep)
{
	return ep->status == GOSSIP_STATUS_LEFT ||
	       ep->status == GOSSIP_STATUS_SHUTDOWN;
}

static const char *fmt(const struct inet_addr *a, char *buf)
{
	return inet_addr_format(a, buf, INET_ADDR_STRLEN);
}

/* ---- endpoints ----------------------------------------------------------- */

static size_t ep_lower_bound(const struct gossip *g, const struct inet_addr *a)
{
	size_t lo = 0, hi = g->ep_count;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (inet_addr_cmp(&g->eps[mid]->addr, a) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct endpoint *ep_find(const struct gossip *g,
				const struct inet_addr *a)
{
	size_t i = ep_lower_bound(g, a);
	if (i < g->ep_count && inet_addr_eq(&g->eps[i]->addr, a))
		return g->eps[i];
	return NULL;
}

/* As ep_find, for lists that usually arrive in address order (digests are
 * built that way): tries the slot after the previous hit first. */
static struct endpoint *ep_find_hinted(const struct gossip *g,
				       const struct inet_addr *a, size_t *hint)
{
	size_t i = *hint;
	if (i >= g->ep_count || !inet_addr_eq(&g->eps[i]->addr, a)) {
		i = ep_lower_bound(g, a);
		if (i >= g->ep_count || !inet_addr_eq(&g->eps[i]->addr, a)) {
			*hint = i;
			return NULL;
		}
	}
	*hint = i + 1;
	return g->eps[i];
}

static void ep_free(struct endpoint *ep)
{
	if (!ep)
		return;
	for (int k = 0; k < GOSSIP_STATE_COUNT; k++)
		free(ep->apps[k].value);
	gossip_fd_free(&ep->fd);
	free(ep);
}

static struct endpoint *ep_add(struct gossip *g, const struct inet_addr *a,
			       int64_t generation)
{
	if (g->ep_count == g->ep_cap) {
		size_t cap = g->ep_cap ? g->ep_cap * 2 : 16;
		struct endpoint **n = realloc(g->eps, cap * sizeof(*n));
		if (!n) {
			err_set(ERR_NOMEM, "gossip endpoints");
			return NULL;
		}
		g->eps = n;
		g->ep_cap = cap;
	}
	struct endpoint *ep = calloc(1, sizeof(*ep));
	if (!ep) {
		err_set(ERR_NOMEM, "gossip endpoint");
		return NULL;
	}
	ep->addr = *a;
	ep->generation = generation;
	gossip_fd_init(&ep->fd, g->fd_window);
	size_t i = ep_lower_bound(g, a);
	memmove(&g->eps[i + 1], &g->eps[i],
		(g->ep_count - i) * sizeof(*g->eps));
	g->eps[i] = ep;
	g->ep_count++;
	return ep;
}

static void ep_remove(struct gossip *g, struct endpoint *ep)
{
	size_t i = ep_lower_bound(g, &ep->addr);
	memmove(&g->eps[i], &g->eps[i + 1],
		(g->ep_count - i - 1) * sizeof(*g->eps));
	g->ep_count--;
	ep_free(ep);
}

static int32_t ep_max_version(const struct endpoint *ep)
{
	int32_t v = ep->heartbeat;
	for (int k = 0; k < GOSSIP_STATE_COUNT; k++)
		if (ep->apps[k].value && ep->apps[k].version > v)
			v = ep->apps[k].version;
	return v;
}

static bool quarantined(const struct gossip *g, const struct inet_addr *a)
{
	for (size_t i = 0; i < g->quar_count; i++)
		if (inet_addr_eq(&g->quar[i].addr, a))
			return true;
	return false;
}

/* ---- notifications ------------------------------------------------------- */

#define NOTIFY(g, cb, ...)                                                     \
	do {                                                                   \
		for (size_t i_ = 0; i_ < (g)->listener_count; i_++)            \
			if ((g)->listeners[i_].l.cb)                           \
				(g)->listeners[i_].l.cb(                       \
					(g)->listeners[i_].arg, __VA_ARGS__);  \
	} while (0)

static void mark_dead(struct gossip *g, struct endpoint *ep, const char *why)
{
	char a[INET_ADDR_STRLEN];
	ep->echo_sent_us = 0;
	if (!ep->alive)
		return;
	ep->alive = false;
	LOG_INFO("%s is now DOWN (%s)", fmt(&ep->addr, a), why);
	NOTIFY(g, on_dead, &ep->addr);
}

static void mark_alive(struct gossip *g, struct endpoint *ep)
{
	char a[INET_ADDR_STRLEN];
	ep->echo_sent_us = 0;
	if (ep->alive)
		return;
	ep->alive = true;
	/* The answer is news too: without it a stale last arrival would
	 * convict the node again on the next check. */
	gossip_fd_touch(&ep->fd, env_mono_us(g->env));
	LOG_INFO("%s is now UP", fmt(&ep->addr, a));
	NOTIFY(g, on_alive, &ep->addr);
}

/* Asks `ep` to prove a channel works; the answer marks it UP. */
static void send_echo(struct gossip *g, struct endpoint *ep)
{
	uint64_t now = env_mono_us(g->env);
	if (ep->echo_sent_us && now - ep->echo_sent_us < g->interval_us)
		return;
	ep->echo_sent_us = now;
	env_send(g->env, &ep->addr, GOSSIP_VERB_ECHO_REQ, NULL, 0);
}

/* Sets one state value (copying it); notifies. */
static int set_app(struct gossip *g, struct endpoint *ep,
		   enum gossip_app_state key, const char *value,
		   int32_t version)
{
	char *copy = strdup(value);
	if (!copy)
		return err_set(ERR_NOMEM, "gossip state value");
	free(ep->apps[key].value);
	ep->apps[key].value = copy;
	ep->apps[key].version = version;
	if (key == GOSSIP_STATE_STATUS_WITH_PORT)
		ep->status = gossip_status_parse(copy);
	NOTIFY(g, on_change, &ep->addr, key, copy);
	return 0;
}

/* ---- lifecycle ----------------------------------------------------------- */

static void on_tick(void *arg);
static void on_fd_check(void *arg);
static void state_list_free(struct state_list *l);

struct gossip *gossip_new(struct env *env, const struct gossip_config *cfg)
{
	if (!cfg->cluster_name || !cfg->partitioner || cfg->generation <= 0) {
		err_set(ERR_INVALID, "gossip needs a cluster name, a "
				     "partitioner and a positive generation");
		return NULL;
	}
	struct gossip *g = calloc(1, sizeof(*g));
	if (!g) {
		err_set(ERR_NOMEM, "gossip");
		return NULL;
	}
	g->env = env;
	g->cluster_name = cfg->cluster_name;
	g->partitioner = cfg->partitioner;
	g->self = cfg->self;
	g->interval_us = cfg->interval_us ? cfg->interval_us : 1000000u;
	g->phi_threshold =
		cfg->phi_convict_threshold > 0 ? cfg->phi_convict_threshold : 8;
	g->fd_window = cfg->fd_window ? cfg->fd_window : GOSSIP_FD_WINDOW;
	g->fd_max_interval_us = cfg->fd_max_interval_us
					? cfg->fd_max_interval_us
					: 2 * g->interval_us;
	g->quarantine_us =
		cfg->quarantine_us ? cfg->quarantine_us : GOSSIP_QUARANTINE_US;
	if (cfg->seed_count) {
		g->seeds = calloc(cfg->seed_count, sizeof(*g->seeds));
		if (!g->seeds)
			goto nomem;
		memcpy(g->seeds, cfg->seeds,
		       cfg->seed_count * sizeof(*g->seeds));
		g->seed_count = cfg->seed_count;
	}
	g->me = ep_add(g, &g->self, cfg->generation);
	g->timer = env_timer_new(env, on_tick, g);
	g->fd_timer = env_timer_new(env, on_fd_check, g);
	if (!g->me || !g->timer || !g->fd_timer) {
		gossip_delete(g);
		return NULL;
	}
	g->me->alive = true;
	return g;
nomem:
	err_set(ERR_NOMEM, "gossip");
	gossip_delete(g);
	return NULL;
}

void gossip_delete(struct gossip *g)
{
	if (!g)
		return;
	env_timer_free(g->env, g->timer);
	env_timer_free(g->env, g->fd_timer);
	for (size_t i = 0; i < g->ep_count; i++)
		ep_free(g->eps[i]);
	free(g->eps);
	free(g->seeds);
	free(g->quar);
	free(g->status_before_stop);
	buf_free(&g->out);
	state_list_free(&g->scratch);
	free(g);
}

int gossip_subscribe(struct gossip *g, const struct gossip_listener *l,
		     void *arg)
{
	if (g->listener_count == MAX_LISTENERS)
		return err_set(ERR_NOMEM, "too many gossip listeners");
	g->listeners[g->listener_count].l = *l;
	g->listeners[g->listener_count].arg = arg;
	g->listener_count++;
	return 0;
}

int gossip_set_local_state(struct gossip *g, enum gossip_app_state key,
			   const char *value)
{
	if ((unsigned)key >= GOSSIP_STATE_COUNT || !value)
		return err_set(ERR_INVALID, "bad gossip state");
	return set_app(g, g->me, key, value, ++g->version);
}

int gossip_set_remote_state(struct gossip *g, const struct inet_addr *a,
			    enum gossip_app_state key, const char *value)
{
	struct endpoint *ep = ep_find(g, a);
	if (!ep)
		return err_set(ERR_NOT_FOUND, "no such peer");
	if ((unsigned)key >= GOSSIP_STATE_COUNT || !value || ep == g->me ||
	    ep->alive)
		return err_set(ERR_INVALID, "only a dead peer's state can be "
					    "set on its behalf");
	if (ep->generation == 0)
		return err_set(ERR_INVALID, "its state is not known yet (no "
					    "news of it since this node "
					    "started)");
	return set_app(g, ep, key, value, ep_max_version(ep) + 1);
}

int gossip_add_saved_endpoint(struct gossip *g, const struct inet_addr *a,
			      const char *const states[GOSSIP_STATE_COUNT])
{
	if (inet_addr_eq(a, &g->self) || ep_find(g, a))
		return err_set(ERR_INVALID, "endpoint already known");
	struct endpoint *ep = ep_add(g, a, 0);
	if (!ep)
		return -1;
	NOTIFY(g, on_join, &ep->addr);
	for (int k = 0; k < GOSSIP_STATE_COUNT; k++)
		if (states[k] &&
		    set_app(g, ep, (enum gossip_app_state)k, states[k], 1) != 0)
			return -1;
	return 0;
}

/* ---- sending ------------------------------------------------------------- */

static void send_buf(struct gossip *g, const struct inet_addr *to,
		     uint32_t verb)
{
	env_send(g->env, to, verb, g->out.data, g->out.len);
}

static bool is_seed(const struct gossip *g, const struct inet_addr *a)
{
	for (size_t i = 0; i < g->seed_count; i++)
		if (inet_addr_eq(&g->seeds[i], a))
			return true;
	return false;
}

/* SYN with a digest per known endpoint (none in the shadow round). */
static int build_syn(struct gossip *g, bool empty)
{
	struct gossip_digest *d = NULL;
	size_t n = empty ? 0 : g->ep_count;
	if (n) {
		d = malloc(n * sizeof(*d));
		if (!d)
			return err_set(ERR_NOMEM, "digests");
		for (size_t i = 0; i < n; i++) {
			d[i].addr = g->eps[i]->addr;
			d[i].generation = g->eps[i]->generation;
			d[i].max_version = ep_max_version(g->eps[i]);
		}
	}
	buf_clear(&g->out);
	int rc = gossip_msg_encode_syn(g->cluster_name, g->partitioner, d, n,
				       &g->out);
	free(d);
	return rc;
}

static void send_syn(struct gossip *g, const struct inet_addr *to)
{
	g->stats.syn_sent++;
	send_buf(g, to, GOSSIP_VERB_SYN);
}

static size_t other_seeds(const struct gossip *g)
{
	size_t n = 0;
	for (size_t i = 0; i < g->seed_count; i++)
		n += !inet_addr_eq(&g->seeds[i], &g->self);
	return n;
}

/* Sends the SYN in g->out to every seed other than us. */
static void send_syn_to_seeds(struct gossip *g)
{
	for (size_t i = 0; i < g->seed_count; i++)
		if (!inet_addr_eq(&g->seeds[i], &g->self))
			send_syn(g, &g->seeds[i]);
}

/* Sends the SYN in g->out to a random seed other than us. REQUIRES:
 * other_seeds(g) > 0. */
static void send_syn_to_a_seed(struct gossip *g)
{
	uint64_t pick = env_random(g->env) % other_seeds(g);
	for (size_t i = 0; i < g->seed_count; i++) {
		if (inet_addr_eq(&g->seeds[i], &g->self))
			continue;
		if (pick-- == 0) {
			send_syn(g, &g->seeds[i]);
			return;
		}
	}
}

/* Cassandra's peer choice: one random live peer, an unreachable one with
 * probability unreachable/(live+1), a seed when the live peer was not one
 * (or fewer live than seeds) with probability seeds/(live+unreachable). */
static void gossip_round(struct gossip *g)
{
	size_t live = 0, unreachable = 0;
	for (size_t i = 0; i < g->ep_count; i++) {
		struct endpoint *ep = g->eps[i];
		if (ep == g->me)
			continue;
		if (ep->alive)
			live++;
		else if (!dead_state(ep) ||
			 ep->status == GOSSIP_STATUS_SHUTDOWN)
			unreachable++;
	}
	if (build_syn(g, false) != 0) {
		LOG_WARN("cannot build a SYN: %s", err_msg());
		return;
	}
	bool to_seed = false;
	if (live) {
		uint64_t pick = env_random(g->env) % live;
		for (size_t i = 0; i < g->ep_count; i++) {
			struct endpoint *ep = g->eps[i];
			if (ep == g->me || !ep->alive)
				continue;
			if (pick-- == 0) {
				send_syn(g, &ep->addr);
				to_seed = is_seed(g, &ep->addr);
				break;
			}
		}
	}
	if (unreachable) {
		double p = (double)unreachable / (double)(live + 1);
		double r = (double)(env_random(g->env) >> 11) * 0x1.0p-53;
		if (r < p) {
			uint64_t pick = env_random(g->env) % unreachable;
			for (size_t i = 0; i < g->ep_count; i++) {
				struct endpoint *ep = g->eps[i];
				if (ep == g->me || ep->alive ||
				    (dead_state(ep) &&
				     ep->status != GOSSIP_STATUS_SHUTDOWN))
					continue;
				if (pick-- == 0) {
					send_syn(g, &ep->addr);
					break;
				}
			}
		}
	}
	if (other_seeds(g) && (!to_seed || live < g->seed_count)) {
		double p = live == 0 ? 1.0
				     : (double)g->seed_count /
					       (double)(live + unreachable);
		double r = (double)(env_random(g->env) >> 11) * 0x1.0p-53;
		if (r <= p)
			send_syn_to_a_seed(g);
	}
}

/* ---- failure detection --------------------------------------------------- */

static void evict_expired(struct gossip *g);

static void status_check(struct gossip *g, uint64_t now)
{
	char a[INET_ADDR_STRLEN];
	uint64_t period = g->interval_us / FD_CHECKS;
	if (g->last_check_us &&
	    now - g->last_check_us > period + GOSSIP_MAX_LOCAL_PAUSE_US) {
		/* Our own loop stalled: the silence we saw was ours. */
		g->stats.local_pauses++;
		g->pause_until_us = now + GOSSIP_MAX_LOCAL_PAUSE_US;
		LOG_WARN("local pause of %llu ms: no peer is convicted for %u "
			 "ms",
			 (unsigned long long)(now - g->last_check_us) / 1000,
			 GOSSIP_MAX_LOCAL_PAUSE_US / 1000);
	}
	g->last_check_us = now;
	bool paused = now < g->pause_until_us;
	for (size_t i = 0; i < g->ep_count; i++) {
		struct endpoint *ep = g->eps[i];
		if (ep == g->me || !ep->alive || paused)
			continue;
		double phi = gossip_fd_phi(&ep->fd, now);
		if (phi > g->phi_threshold) {
			g->stats.convictions++;
			LOG_DEBUG("convicting %s with phi %.2f",
				  fmt(&ep->addr, a), phi);
			mark_dead(g, ep, "phi over threshold");
		}
	}
	evict_expired(g);
	/* Quarantine expiry. */
	for (size_t i = 0; i < g->quar_count;) {
		if (now >= g->quar[i].until_us)
			g->quar[i] = g->quar[--g->quar_count];
		else
			i++;
	}
}

static void on_fd_check(void *arg)
{
	struct gossip *g = arg;
	if (g->stopped)
		return;
	env_timer_arm(g->env, g->fd_timer, g->interval_us / FD_CHECKS);
	status_check(g, env_mono_us(g->env));
}

/* An empty SYN to a random seed other than us: its ACK carries every
 * state the seed knows. */
static void ask_a_seed(struct gossip *g)
{
	if (other_seeds(g) && build_syn(g, true) == 0)
		send_syn_to_a_seed(g);
}

static void on_tick(void *arg)
{
	struct gossip *g = arg;
	if (g->stopped)
		return;
	env_timer_arm(g->env, g->timer, g->interval_us);

	if (g->shadow) {
		if (++g->shadow_rounds < SHADOW_ROUNDS) {
			if (build_syn(g, true) == 0)
				send_syn_to_seeds(g);
			return;
		}
		LOG_WARN("no seed answered the shadow round; gossiping anyway");
		g->shadow = false;
	}
	g->stats.rounds++;
	g->me->heartbeat = ++g->version;
	g->me->beats++;
	g->me->born_us = env_mono_us(g->env);
	gossip_round(g);
	if (g->follow_seeds)
		ask_a_seed(g);
}

int gossip_start(struct gossip *g)
{
	if (g->started)
		return 0;
	g->started = true;
	g->last_check_us = env_mono_us(g->env);
	env_timer_arm(g->env, g->fd_timer, g->interval_us / FD_CHECKS);
	if (other_seeds(g)) {
		g->shadow = true;
		if (build_syn(g, true) != 0)
			return -1;
		send_syn_to_seeds(g);
	}
	/* A random phase, so nodes started together do not gossip in step. */
	env_timer_arm(g->env, g->timer,
		      g->interval_us / 2 + env_random(g->env) % g->interval_us);
	return 0;
}

void gossip_set_follow_seeds(struct gossip *g, bool on)
{
	g->follow_seeds = on;
}

void gossip_announce_shutdown(struct gossip *g)
{
	if (g->stopped)
		return;
	/* A node that left the ring goes silently (Cassandra's silent
	 * shutdown states): its peers keep LEFT, not a shutdown to wait
	 * out. */
	bool left = g->me->status == GOSSIP_STATUS_LEFT;
	const char *was = g->me->apps[GOSSIP_STATE_STATUS_WITH_PORT].value;
	free(g->status_before_stop);
	g->status_before_stop = was ? strdup(was) : NULL;
	if (!left)
		gossip_set_local_state(g, GOSSIP_STATE_STATUS_WITH_PORT,
				       "shutdown,true");
	for (size_t i = 0; !left && i < g->ep_count; i++) {
		struct endpoint *ep = g->eps[i];
		if (ep != g->me && ep->alive)
			env_send(g->env, &ep->addr, GOSSIP_VERB_SHUTDOWN, NULL,
				 0);
	}
	g->stopped = true;
	env_timer_cancel(g->env, g->timer);
	env_timer_cancel(g->env, g->fd_timer);
}

bool gossip_running(const struct gossip *g)
{
	return g->started && !g->stopped;
}

int gossip_resume(struct gossip *g)
{
	if (!g->started)
		return err_set(ERR_INVALID, "gossip has not started");
	if (!g->stopped)
		return 0;
	if (g->me->status == GOSSIP_STATUS_LEFT)
		return err_set(ERR_INVALID, "this node has left the ring");
	/* A newer generation: peers that saw our shutdown take us as a
	 * restarted endpoint, as after Cassandra's startGossiping. */
	g->me->generation++;
	g->me->heartbeat = ++g->version;
	g->me->beats = 1;
	g->me->born_us = env_mono_us(g->env);
	if (g->status_before_stop &&
	    gossip_set_local_state(g, GOSSIP_STATE_STATUS_WITH_PORT,
				   g->status_before_stop) != 0)
		return -1;
	g->stopped = false;
	/* The gap since the last check reads as a local pause, so no peer
	 * is convicted before its heartbeats reach us again. */
	env_timer_arm(g->env, g->fd_timer, g->interval_us / FD_CHECKS);
	env_timer_arm(g->env, g->timer, g->interval_us / 2);
	return 0;
}

/* Forgets `ep` and ignores news of it for the quarantine period. */
static int forget(struct gossip *g, struct endpoint *ep, const char *why)
{
	struct quarantine *q =
		realloc(g->quar, (g->quar_count + 1) * sizeof(*q));
	if (!q)
		return err_set(ERR_NOMEM, "quarantine");
	g->quar = q;
	struct inet_addr a = ep->addr;
	g->quar[g->quar_count++] = (struct quarantine){
		.addr = a, .until_us = env_mono_us(g->env) + g->quarantine_us};
	mark_dead(g, ep, why);
	NOTIFY(g, on_remove, &a);
	ep_remove(g, ep);
	return 0;
}

int gossip_remove_endpoint(struct gossip *g, const struct inet_addr *a)
{
	struct endpoint *ep = ep_find(g, a);
	if (!ep || ep == g->me)
		return err_set(ERR_NOT_FOUND, "no such peer");
	return forget(g, ep, "removed");
}

/* Whether a LEFT endpoint's state says it expired: "LEFT,token,ms", ms
 * of the wall clock (Cassandra's: 3 days after it left, so every node
 * hears of it first). */
static bool left_expired(const struct endpoint *ep, uint64_t wall_ms)
{
	const char *v = ep->apps[GOSSIP_STATE_STATUS_WITH_PORT].value;
	const char *c = v ? strchr(v, ',') : NULL;
	c = c ? strchr(c + 1, ',') : NULL;
	if (!c)
		return false;
	char *end;
	unsigned long long ms = strtoull(c + 1, &end, 10);
	return end != c + 1 && ms > 0 && wall_ms > ms;
}

/* Forgets the LEFT endpoints whose state expired. */
static void evict_expired(struct gossip *g)
{
	uint64_t wall_ms = (uint64_t)env_wall_us(g->env) / 1000;
	for (size_t i = 0; i < g->ep_count;) {
		struct endpoint *ep = g->eps[i];
		if (ep != g->me && ep->status == GOSSIP_STATUS_LEFT &&
		    left_expired(ep, wall_ms) &&
		    forget(g, ep, "left the ring; its state expired") == 0)
			continue; /* eps[i] is the next one now */
		i++;
	}
}

/* ---- applying remote state ----------------------------------------------- */

/* A newer heartbeat: when it was born is our clock less its age (0 from a
 * peer that does not send one: born now, as Cassandra counts it). */
static void fd_news(struct gossip *g, struct endpoint *ep,
		    const struct gossip_wire_state *ws)
{
	uint64_t now = env_mono_us(g->env);
	ep->update_us = now;
	ep->beats = ws->beats;
	ep->born_us = now > ws->age_us ? now - ws->age_us : 1;
	gossip_fd_report(&ep->fd, ep->born_us, ws->beats, 2 * g->interval_us,
			 g->fd_max_interval_us);
}

static void apply_apps(struct gossip *g, struct endpoint *ep,
		       const struct gossip_wire_state *ws)
{
	for (size_t j = 0; j < ws->count; j++) {
		const struct gossip_wire_app *app = &ws->apps[j];
		struct app_value *cur = &ep->apps[app->key];
		if (cur->value && cur->version >= app->version)
			continue;
		if (set_app(g, ep, (enum gossip_app_state)app->key, app->value,
			    app->version) != 0)
			LOG_WARN("dropping a state update: %s", err_msg());
	}
}

static void apply_state(struct gossip *g, const struct gossip_wire_state *ws)
{
	char a[INET_ADDR_STRLEN];
	if (inet_addr_eq(&ws->addr, &g->self) || quarantined(g, &ws->addr))
		return;
	if (ws->generation <= 0)
		return; /* only saved states have generation 0; never sent */
	struct endpoint *ep = ep_find(g, &ws->addr);
	if (ep && ep->generation > 0 &&
	    ws->generation > ep->generation + MAX_GENERATION_DIFFERENCE) {
		LOG_WARN("ignoring %s: generation %lld jumps too far from %lld",
			 fmt(&ws->addr, a), (long long)ws->generation,
			 (long long)ep->generation);
		return;
	}
	if (!ep || ws->generation > ep->generation) {
		bool restarted = ep && ep->generation > 0,
		     saved = ep && ep->generation == 0;
		if (ep) {
			/* A restart: the new incarnation replaces it all. */
			mark_dead(g, ep, "restarted");
			for (int k = 0; k < GOSSIP_STATE_COUNT; k++) {
				free(ep->apps[k].value);
				ep->apps[k].value = NULL;
				ep->apps[k].version = 0;
			}
			ep->status = GOSSIP_STATUS_UNKNOWN;
			ep->generation = ws->generation;
			gossip_fd_restart(&ep->fd);
		} else {
			ep = ep_add(g, &ws->addr, ws->generation);
			if (!ep) {
				LOG_WARN("cannot track %s: %s",
					 fmt(&ws->addr, a), err_msg());
				return;
			}
		}
		ep->heartbeat = ws->heartbeat;
		LOG_INFO("%s %s (generation %lld)",
			 restarted ? "restarted:"
			 : saved   ? "heard from:"
				   : "new endpoint:",
			 fmt(&ws->addr, a), (long long)ws->generation);
		NOTIFY(g, on_join, &ep->addr);
		apply_apps(g, ep, ws);
		fd_news(g, ep, ws);
		if (!dead_state(ep))
			send_echo(g, ep);
		return;
	}
	if (ws->generation < ep->generation)
		return; /* an older incarnation's news */
	int32_t remote_max = ws->heartbeat;
	for (size_t j = 0; j < ws->count; j++)
		if (ws->apps[j].version > remote_max)
			remote_max = ws->apps[j].version;
	if (remote_max > ep_max_version(ep)) {
		if (ws->heartbeat > ep->heartbeat) {
			fd_news(g, ep, ws);
			ep->heartbeat = ws->heartbeat;
		}
		apply_apps(g, ep, ws);
	}
	if (!ep->alive && !dead_state(ep))
		send_echo(g, ep);
}

/* Copies the part of `ep` newer than `version` into ws (borrowing
 * strings). Returns false when there is nothing newer. */
static bool state_newer_than(const struct endpoint *ep, int32_t version,
			     uint64_t now_us, struct gossip_wire_state *ws,
			     struct gossip_wire_app *apps)
{
	if (ep->generation == 0)
		return false; /* a saved state: only the peer's own news */
	ws->addr = ep->addr;
	ws->generation = ep->generation;
	ws->heartbeat = ep->heartbeat;
	ws->beats = ep->beats;
	ws->age_us = 0;
	if (ep->born_us && now_us > ep->born_us)
		ws->age_us = now_us - ep->born_us < GOSSIP_MAX_HEARTBEAT_AGE_US
				     ? (uint32_t)(now_us - ep->born_us)
				     : GOSSIP_MAX_HEARTBEAT_AGE_US;
	ws->apps = apps;
	ws->count = 0;
	for (int k = 0; k < GOSSIP_STATE_COUNT; k++) {
		if (!ep->apps[k].value || ep->apps[k].version <= version)
			continue;
		apps[ws->count++] = (struct gossip_wire_app){
			.key = (uint32_t)k,
			.value = ep->apps[k].value,
			.version = ep->apps[k].version};
	}
	return ws->count > 0 || ep->heartbeat > version;
}

/* Empties the list for a message sent at `now_us` (heartbeat ages are
 * taken then). */
static void state_list_clear(struct state_list *l, uint64_t now_us)
{
	l->now_us = now_us;
	l->n = 0;
	l->napps = 0;
}

static void state_list_free(struct state_list *l)
{
	free(l->st);
	free(l->app_off);
	free(l->apps);
	memset(l, 0, sizeof(*l));
}

static int state_list_add(struct state_list *l, const struct endpoint *ep,
			  int32_t version)
{
	struct gossip_wire_app apps[GOSSIP_STATE_COUNT];
	struct gossip_wire_state ws;
	if (!state_newer_than(ep, version, l->now_us, &ws, apps))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct gossip_wire_state *st =
			realloc(l->st, cap * sizeof(*st));
		if (!st)
			return err_set(ERR_NOMEM, "state list");
		l->st = st;
		size_t *off = realloc(l->app_off, cap * sizeof(*off));
		if (!off)
			return err_set(ERR_NOMEM, "state list");
		l->app_off = off;
		l->cap = cap;
	}
	if (l->napps + ws.count > l->apps_cap) {
		size_t cap = l->apps_cap ? l->apps_cap * 2 : 64;
		while (cap < l->napps + ws.count)
			cap *= 2;
		struct gossip_wire_app *a = realloc(l->apps, cap * sizeof(*a));
		if (!a)
			return err_set(ERR_NOMEM, "state list");
		l->apps = a;
		l->apps_cap = cap;
	}
	if (ws.count)
		memcpy(&l->apps[l->napps], apps, ws.count * sizeof(*apps));
	l->app_off[l->n] = l->napps;
	l->napps += ws.count;
	l->st[l->n++] = ws;
	return 0;
}

static void state_list_finish(struct state_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		l->st[i].apps = l->st[i].count ? &l->apps[l->app_off[i]] : NULL;
}

/* ---- message handlers ---------------------------------------------------- */

static void process_syn(struct gossip *g, const struct inet_addr *from,
			const struct gossip_msg *m)
{
	char a[INET_ADDR_STRLEN];
	if (strcmp(m->cluster_name, g->cluster_name) != 0 ||
	    strcmp(m->partitioner, g->partitioner) != 0) {
		/* Logged on the 1st, 2nd, 4th, 8th... time: visible, not a
		 * flood. */
		uint64_t nth = ++g->stats.wrong_cluster;
		if ((nth & (nth - 1)) == 0)
			LOG_WARN("ignoring SYN from %s: cluster '%s' "
				 "partitioner "
				 "'%s' (we are '%s', '%s')",
				 fmt(from, a), m->cluster_name, m->partitioner,
				 g->cluster_name, g->partitioner);
		return;
	}
	struct state_list *out = &g->scratch;
	state_list_clear(out, env_mono_us(g->env));
	struct gossip_digest *req =
		malloc((m->digest_count ? m->digest_count : 1) * sizeof(*req));
	if (!req) {
		LOG_WARN("cannot answer a SYN: out of memory");
		return;
	}
	size_t nreq = 0;
	int rc = 0;
	if (m->digest_count == 0) {
		/* Shadow round probe: everything we know. */
		for (size_t i = 0; i < g->ep_count && rc == 0; i++)
			rc = state_list_add(out, g->eps[i], 0);
	}
	size_t hint = 0;
	for (size_t i = 0; i < m->digest_count && rc == 0; i++) {
		const struct gossip_digest *d = &m->digests[i];
		if (quarantined(g, &d->addr))
			continue;
		struct endpoint *ep = ep_find_hinted(g, &d->addr, &hint);
		if (d->generation <= 0) {
			/* the sender's saved state: tell it what we know */
			if (ep && ep->generation > 0)
				rc = state_list_add(out, ep, 0);
		} else if (!ep || d->generation > ep->generation) {
			req[nreq++] = (struct gossip_digest){
				.addr = d->addr,
				.generation = d->generation,
				.max_version = 0};
		} else if (d->generation < ep->generation) {
			rc = state_list_add(out, ep, 0);
		} else {
			int32_t local = ep_max_version(ep);
			if (d->max_version > local)
				req[nreq++] = (struct gossip_digest){
					.addr = d->addr,
					.generation = d->generation,
					.max_version = local};
			else if (d->max_version < local)
				rc = state_list_add(out, ep, d->max_version);
		}
	}
	state_list_finish(out);
	buf_clear(&g->out);
	if (rc == 0 &&
	    gossip_msg_encode_ack(req, nreq, out->st, out->n, &g->out) == 0) {
		g->stats.ack_sent++;
		send_buf(g, from, GOSSIP_VERB_ACK);
	}
	free(req);
}

static void apply_states(struct gossip *g, const struct gossip_msg *m)
{
	for (size_t i = 0; i < m->state_count; i++)
		apply_state(g, &m->states[i]);
}

static void process_ack(struct gossip *g, const struct inet_addr *from,
			const struct gossip_msg *m)
{
	if (g->shadow) {
		char a[INET_ADDR_STRLEN];
		LOG_INFO("shadow round answered by %s: %zu endpoints",
			 fmt(from, a), m->state_count);
		g->shadow = false;
	}
	apply_states(g, m);
	if (m->digest_count == 0)
		return;
	struct state_list *out = &g->scratch;
	state_list_clear(out, env_mono_us(g->env));
	int rc = 0;
	size_t hint = 0;
	for (size_t i = 0; i < m->digest_count && rc == 0; i++) {
		struct endpoint *ep =
			ep_find_hinted(g, &m->digests[i].addr, &hint);
		if (ep)
			rc = state_list_add(out, ep, m->digests[i].max_version);
	}
	state_list_finish(out);
	buf_clear(&g->out);
	if (rc == 0 && gossip_msg_encode_ack2(out->st, out->n, &g->out) == 0) {
		g->stats.ack2_sent++;
		send_buf(g, from, GOSSIP_VERB_ACK2);
	}
}

static void process_shutdown(struct gossip *g, const struct inet_addr *from)
{
	struct endpoint *ep = ep_find(g, from);
	if (!ep || ep == g->me)
		return;
	/* As Cassandra's markAsShutdown: record it so no older news revives
	 * the node, and convict it now. */
	int32_t v = ep_max_version(ep);
	set_app(g, ep, GOSSIP_STATE_STATUS_WITH_PORT, "shutdown,true",
		v < INT32_MAX ? v + 1 : v);
	ep->heartbeat = INT32_MAX;
	mark_dead(g, ep, "announced shutdown");
}

void gossip_process(struct gossip *g, const struct inet_addr *from,
		    uint32_t verb, const uint8_t *msg, size_t len)
{
	char a[INET_ADDR_STRLEN];
	if (g->stopped)
		return;
	switch (verb) {
	case GOSSIP_VERB_ECHO_REQ:
		env_send(g->env, from, GOSSIP_VERB_ECHO_RSP, NULL, 0);
		return;
	case GOSSIP_VERB_ECHO_RSP: {
		struct endpoint *ep = ep_find(g, from);
		if (ep && ep != g->me && !dead_state(ep))
			mark_alive(g, ep);
		return;
	}
	case GOSSIP_VERB_SHUTDOWN:
		process_shutdown(g, from);
		return;
	case GOSSIP_VERB_SYN:
	case GOSSIP_VERB_ACK:
	case GOSSIP_VERB_ACK2:
		break;
	default:
		g->stats.bad_messages++;
		return;
	}
	struct gossip_msg m;
	if (gossip_msg_decode(verb, msg, len, &m) != 0) {
		g->stats.bad_messages++;
		LOG_WARN("dropping a bad gossip message from %s: %s",
			 fmt(from, a), err_msg());
		return;
	}
	if (verb == GOSSIP_VERB_SYN)
		process_syn(g, from, &m);
	else if (verb == GOSSIP_VERB_ACK)
		process_ack(g, from, &m);
	else
		apply_states(g, &m);
	gossip_msg_free(&m);
}

/* ---- queries ------------------------------------------------------------- */

size_t gossip_endpoint_count(const struct gossip *g)
{
	return g->ep_count;
}

static void fill_info(struct gossip *g, const struct endpoint *ep,
		      struct gossip_endpoint_info *out)
{
	memset(out, 0, sizeof(*out));
	out->addr = ep->addr;
	out->is_self = ep == g->me;
	out->alive = ep->alive;
	out->status = ep->status;
	out->generation = ep->generation;
	out->heartbeat = ep->heartbeat;
	out->phi =
		out->is_self ? 0 : gossip_fd_phi(&ep->fd, env_mono_us(g->env));
	out->fd_mean_us = gossip_fd_mean_us(&ep->fd);
	out->update_us = ep->update_us;
	for (int k = 0; k < GOSSIP_STATE_COUNT; k++) {
		out->states[k] = ep->apps[k].value;
		out->versions[k] = ep->apps[k].version;
	}
}

int gossip_endpoint_at(struct gossip *g, size_t index,
		       struct gossip_endpoint_info *out)
{
	if (index >= g->ep_count)
		return err_set(ERR_NOT_FOUND, "no endpoint %zu", index);
	fill_info(g, g->eps[index], out);
	return 0;
}

int gossip_endpoint_find(struct gossip *g, const struct inet_addr *a,
			 struct gossip_endpoint_info *out)
{
	struct endpoint *ep = ep_find(g, a);
	if (!ep)
		return err_set(ERR_NOT_FOUND, "unknown endpoint");
	fill_info(g, ep, out);
	return 0;
}

bool gossip_is_alive(const struct gossip *g, const struct inet_addr *a)
{
	const struct endpoint *ep = ep_find(g, a);
	return ep && ep->alive;
}

size_t gossip_live_count(const struct gossip *g)
{
	size_t n = 0;
	for (size_t i = 0; i < g->ep_count; i++)
		if (g->eps[i] != g->me && g->eps[i]->alive)
			n++;
	return n;
}

const struct inet_addr *gossip_self(const struct gossip *g)
{
	return &g->self;
}

void gossip_get_stats(const struct gossip *g, struct gossip_stats *out)
{
	*out = g->stats;
}
