#include "tests/sim/sim.h"

#include "common/env_real.h"
#include "common/err.h"
#include "common/log.h"
#include "common/rand.h"

#include <stdlib.h>
#include <string.h>

#define SIM_MONO_START_US 1000000u

/* One scheduled thing: a timer firing or a message arriving. */
struct sim_event {
	uint64_t at;
	uint64_t seq;    /* insertion order: breaks ties deterministically */
	size_t heap_idx; /* SIZE_MAX when not queued */
	void (*fire)(struct sim *s, struct sim_event *ev);
};

struct sim_node {
	struct env env; /* must be first */
	struct sim *sim;
	struct inet_addr addr;
	bool dead;
	uint64_t paused_until; /* events for it wait until then */
	struct sim_node *next;
};

struct env_timer {
	struct sim_event ev; /* must be first */
	struct sim_node *node;
	env_timer_fn fn;
	void *arg;
	struct env_timer *next_all; /* every timer of the world, for cleanup */
	struct env_timer *prev_all;
};

struct sim_msg {
	struct sim_event ev; /* must be first */
	struct inet_addr from;
	struct inet_addr to;
	uint32_t verb;
	size_t len;
	uint8_t data[];
};

struct sim_rule {
	bool any_from, any_to;
	struct inet_addr from, to;
	bool cut;
	double drop;
	struct sim_rule *next;
};

struct sim {
	uint64_t now_us; /* monotonic */
	int64_t wall_offset_us;
	uint64_t next_seq;
	struct rng rng;
	struct sim_event **heap;
	size_t heap_len, heap_cap;
	struct sim_node *nodes;
	struct env_timer *timers;
	struct sim_rule *rules;
	uint64_t lat_min_us, lat_max_us;
	uint64_t sent, dropped;
	struct env *disk; /* file operations go here */
	char log_tag[64];
};

/* ---- event heap ---------------------------------------------------------- */

static bool ev_before(const struct sim_event *a, const struct sim_event *b)
{
	return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void heap_swap(struct sim *s, size_t i, size_t j)
{
	struct sim_event *t = s->heap[i];
	s->heap[i] = s->heap[j];
	s->heap[j] = t;
	s->heap[i]->heap_idx = i;
	s->heap[j]->heap_idx = j;
}

static void heap_up(struct sim *s, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!ev_before(s->heap[i], s->heap[p]))
			break;
		heap_swap(s, i, p);
		i = p;
	}
}

static void heap_down(struct sim *s, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < s->heap_len && ev_before(s->heap[l], s->heap[m]))
			m = l;
		if (r < s->heap_len && ev_before(s->heap[r], s->heap[m]))
			m = r;
		if (m == i)
			return;
		heap_swap(s, i, m);
		i = m;
	}
}

static void heap_push(struct sim *s, struct sim_event *ev)
{
	if (s->heap_len == s->heap_cap) {
		size_t cap = s->heap_cap ? s->heap_cap * 2 : 256;
		struct sim_event **h = realloc(s->heap, cap * sizeof(*h));
		if (!h)
			abort(); /* tests: out of memory is fatal */
		s->heap = h;
		s->heap_cap = cap;
	}
	ev->seq = s->next_seq++;
	ev->heap_idx = s->heap_len;
	s->heap[s->heap_len++] = ev;
	heap_up(s, ev->heap_idx);
}

static void heap_remove(struct sim *s, struct sim_event *ev)
{
	size_t i = ev->heap_idx;
	if (i == SIZE_MAX)
		return;
	s->heap_len--;
	if (i != s->heap_len) {
		s->heap[i] = s->heap[s->heap_len];
		s->heap[i]->heap_idx = i;
		heap_down(s, i);
		heap_up(s, i);
	}
	ev->heap_idx = SIZE_MAX;
}

static struct sim_event *heap_pop(struct sim *s)
{
	if (s->heap_len == 0)
		return NULL;
	struct sim_event *ev = s->heap[0];
	heap_remove(s, ev);
	return ev;
}

/* ---- env ops ------------------------------------------------------------- */

static struct sim_node *node_of(struct env *e)
{
	return (struct sim_node *)e;
}

static uint64_t sim_mono(struct env *e)
{
	return node_of(e)->sim->now_us;
}

static int64_t sim_wall(struct env *e)
{
	struct sim *s = node_of(e)->sim;
	return s->wall_offset_us + (int64_t)s->now_us;
}

static uint64_t sim_rand(struct env *e)
{
	return rng_next(&node_of(e)->sim->rng);
}

static void timer_fire(struct sim *s, struct sim_event *ev)
{
	struct env_timer *t = (struct env_timer *)ev;
	if (t->node->paused_until > s->now_us) {
		/* A frozen process: the timer fires late, when it thaws. */
		t->ev.at = t->node->paused_until;
		heap_push(s, &t->ev);
		return;
	}
	if (!t->node->dead)
		t->fn(t->arg);
}

static struct env_timer *sim_timer_new(struct env *e, env_timer_fn fn,
				       void *arg)
{
	struct sim_node *n = node_of(e);
	struct env_timer *t = calloc(1, sizeof(*t));
	if (!t) {
		err_set(ERR_NOMEM, "cannot allocate a timer");
		return NULL;
	}
	t->ev.heap_idx = SIZE_MAX;
	t->ev.fire = timer_fire;
	t->node = n;
	t->fn = fn;
	t->arg = arg;
	t->next_all = n->sim->timers;
	if (t->next_all)
		t->next_all->prev_all = t;
	n->sim->timers = t;
	return t;
}

static void sim_timer_arm(struct env *e, struct env_timer *t, uint64_t delay_us)
{
	struct sim *s = node_of(e)->sim;
	heap_remove(s, &t->ev);
	t->ev.at = s->now_us + delay_us;
	heap_push(s, &t->ev);
}

static void sim_timer_cancel(struct env *e, struct env_timer *t)
{
	heap_remove(node_of(e)->sim, &t->ev);
}

static void sim_timer_free(struct env *e, struct env_timer *t)
{
	if (!t)
		return;
	struct sim *s = node_of(e)->sim;
	heap_remove(s, &t->ev);
	if (t->prev_all)
		t->prev_all->next_all = t->next_all;
	else
		s->timers = t->next_all;
	if (t->next_all)
		t->next_all->prev_all = t->prev_all;
	free(t);
}

static struct sim_node *node_at(struct sim *s, const struct inet_addr *a)
{
	for (struct sim_node *n = s->nodes; n; n = n->next)
		if (inet_addr_eq(&n->addr, a))
			return n;
	return NULL;
}

static void msg_fire(struct sim *s, struct sim_event *ev)
{
	struct sim_msg *m = (struct sim_msg *)ev;
	struct sim_node *dst = node_at(s, &m->to);
	if (dst && !dst->dead && dst->paused_until > s->now_us) {
		/* Held in the kernel's buffers until the process thaws. */
		m->ev.at = dst->paused_until;
		heap_push(s, &m->ev);
		return;
	}
	if (dst && !dst->dead)
		env_deliver(&dst->env, &m->from, m->verb, m->data, m->len);
	else
		s->dropped++;
	free(m);
}

static bool rule_matches(const struct sim_rule *r, const struct inet_addr *from,
			 const struct inet_addr *to)
{
	return (r->any_from || inet_addr_eq(&r->from, from)) &&
	       (r->any_to || inet_addr_eq(&r->to, to));
}

static int sim_send(struct env *e, const struct inet_addr *to, uint32_t verb,
		    const void *msg, size_t len)
{
	struct sim_node *n = node_of(e);
	struct sim *s = n->sim;
	if (n->dead)
		return err_set(ERR_CLOSED, "node is dead");
	s->sent++;
	for (struct sim_rule *r = s->rules; r; r = r->next) {
		if (!rule_matches(r, &n->addr, to))
			continue;
		if (r->cut || (r->drop > 0 && rng_double(&s->rng) < r->drop)) {
			s->dropped++;
			return 0; /* silent, like a lost packet */
		}
	}
	struct sim_msg *m = malloc(sizeof(*m) + len);
	if (!m)
		return err_set(ERR_NOMEM, "cannot allocate a message");
	m->ev.heap_idx = SIZE_MAX;
	m->ev.fire = msg_fire;
	m->from = n->addr;
	m->to = *to;
	m->verb = verb;
	m->len = len;
	if (len)
		memcpy(m->data, msg, len);
	uint64_t span = s->lat_max_us - s->lat_min_us;
	m->ev.at = s->now_us + s->lat_min_us + rng_below(&s->rng, span + 1);
	heap_push(s, &m->ev);
	return 0;
}

/* Files: forwarded to the world's disk env. */
static int sim_file_open(struct env *e, const char *path, int flags,
			 struct env_file **out)
{
	return env_file_open(node_of(e)->sim->disk, path, flags, out);
}
static int sim_rename(struct env *e, const char *a, const char *b)
{
	return env_rename(node_of(e)->sim->disk, a, b);
}
static int sim_unlink(struct env *e, const char *p)
{
	return env_unlink(node_of(e)->sim->disk, p);
}
static int sim_link(struct env *e, const char *a, const char *b)
{
	return env_link(node_of(e)->sim->disk, a, b);
}
static int sim_mkdir(struct env *e, const char *p)
{
	return env_mkdir(node_of(e)->sim->disk, p);
}
static int sim_rmdir(struct env *e, const char *p)
{
	return env_rmdir(node_of(e)->sim->disk, p);
}
static int sim_sync_dir(struct env *e, const char *p)
{
	return env_sync_dir(node_of(e)->sim->disk, p);
}
static int sim_list_dir(struct env *e, const char *p, env_dir_fn fn, void *a)
{
	return env_list_dir(node_of(e)->sim->disk, p, fn, a);
}
static int sim_exists(struct env *e, const char *p)
{
	return env_exists(node_of(e)->sim->disk, p);
}

static const struct env_ops sim_ops = {
	.mono_us = sim_mono,
	.wall_us = sim_wall,
	.random = sim_rand,
	.timer_new = sim_timer_new,
	.timer_arm = sim_timer_arm,
	.timer_cancel = sim_timer_cancel,
	.timer_free = sim_timer_free,
	.send = sim_send,
	.file_open = sim_file_open,
	.rename = sim_rename,
	.unlink = sim_unlink,
	.link = sim_link,
	.mkdir = sim_mkdir,
	.rmdir = sim_rmdir,
	.sync_dir = sim_sync_dir,
	.list_dir = sim_list_dir,
	.exists = sim_exists,
};

/* ---- world --------------------------------------------------------------- */

static int64_t sim_log_clock(void *arg)
{
	struct sim *s = arg;
	return s->wall_offset_us + (int64_t)s->now_us;
}

struct sim *sim_new(uint64_t seed, int64_t start_wall_us)
{
	struct sim *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->now_us = SIM_MONO_START_US;
	s->wall_offset_us = start_wall_us - (int64_t)SIM_MONO_START_US;
	rng_seed(&s->rng, seed);
	s->lat_min_us = 100;
	s->lat_max_us = 500;
	s->disk = env_real_new(NULL);
	if (!s->disk) {
		free(s);
		return NULL;
	}
	log_set_clock(sim_log_clock, s);
	return s;
}

void sim_delete(struct sim *s)
{
	if (!s)
		return;
	struct sim_event *ev;
	while ((ev = heap_pop(s)) != NULL) {
		if (ev->fire == msg_fire)
			free(ev);
	}
	while (s->timers)
		sim_timer_free(&s->timers->node->env, s->timers);
	while (s->nodes) {
		struct sim_node *n = s->nodes;
		s->nodes = n->next;
		free(n);
	}
	sim_net_heal(s);
	env_real_delete(s->disk);
	free(s->heap);
	log_set_clock(NULL, NULL);
	free(s);
}

struct inet_addr sim_node_addr(int i)
{
	return (struct inet_addr){.family = INET_V4,
				  .ip = {127, 0, 9, (uint8_t)(i + 1)},
				  .port = 7000};
}

struct env *sim_env_new(struct sim *s, const struct inet_addr *addr)
{
	struct sim_node *n = calloc(1, sizeof(*n));
	if (!n) {
		err_set(ERR_NOMEM, "cannot allocate a node");
		return NULL;
	}
	n->env.ops = &sim_ops;
	n->sim = s;
	n->addr = *addr;
	n->next = s->nodes;
	s->nodes = n;
	return &n->env;
}

void sim_env_kill(struct sim *s, struct env *e)
{
	struct sim_node *n = node_of(e);
	n->dead = true;
	for (struct env_timer *t = s->timers; t; t = t->next_all)
		if (t->node == n)
			heap_remove(s, &t->ev);
}

void sim_env_pause(struct sim *s, struct env *e, uint64_t us)
{
	node_of(e)->paused_until = s->now_us + us;
}

void sim_net_partition(struct sim *s, const struct inet_addr *a, size_t na,
		       const struct inet_addr *b, size_t nb, bool cut)
{
	for (size_t i = 0; i < na; i++)
		for (size_t j = 0; j < nb; j++) {
			sim_net_cut(s, &a[i], &b[j], cut);
			sim_net_cut(s, &b[j], &a[i], cut);
		}
}

uint64_t sim_now_us(const struct sim *s)
{
	return s->now_us;
}

uint64_t sim_random(struct sim *s)
{
	return rng_next(&s->rng);
}

bool sim_step(struct sim *s)
{
	struct sim_event *ev = heap_pop(s);
	if (!ev)
		return false;
	if (ev->at > s->now_us)
		s->now_us = ev->at;
	ev->fire(s, ev);
	return true;
}

void sim_run_for(struct sim *s, uint64_t us)
{
	uint64_t end = s->now_us + us;
	while (s->heap_len > 0 && s->heap[0]->at <= end)
		sim_step(s);
	s->now_us = end;
}

bool sim_run_until(struct sim *s, bool (*pred)(void *arg), void *arg,
		   uint64_t max_us)
{
	uint64_t end = s->now_us + max_us;
	if (pred(arg))
		return true;
	while (s->heap_len > 0 && s->heap[0]->at <= end) {
		sim_step(s);
		if (pred(arg))
			return true;
	}
	s->now_us = end;
	return pred(arg);
}

void sim_net_set_latency(struct sim *s, uint64_t min_us, uint64_t max_us)
{
	s->lat_min_us = min_us;
	s->lat_max_us = max_us < min_us ? min_us : max_us;
}

static struct sim_rule *rule_for(struct sim *s, const struct inet_addr *from,
				 const struct inet_addr *to)
{
	for (struct sim_rule *r = s->rules; r; r = r->next) {
		if (r->any_from == !from && r->any_to == !to &&
		    (!from || inet_addr_eq(&r->from, from)) &&
		    (!to || inet_addr_eq(&r->to, to)))
			return r;
	}
	struct sim_rule *r = calloc(1, sizeof(*r));
	if (!r)
		abort();
	r->any_from = !from;
	r->any_to = !to;
	if (from)
		r->from = *from;
	if (to)
		r->to = *to;
	r->next = s->rules;
	s->rules = r;
	return r;
}

void sim_net_set_drop(struct sim *s, const struct inet_addr *from,
		      const struct inet_addr *to, double p)
{
	rule_for(s, from, to)->drop = p;
}

void sim_net_cut(struct sim *s, const struct inet_addr *from,
		 const struct inet_addr *to, bool cut)
{
	rule_for(s, from, to)->cut = cut;
}

void sim_net_heal(struct sim *s)
{
	while (s->rules) {
		struct sim_rule *r = s->rules;
		s->rules = r->next;
		free(r);
	}
}

uint64_t sim_net_sent(const struct sim *s)
{
	return s->sent;
}

uint64_t sim_net_dropped(const struct sim *s)
{
	return s->dropped;
}
