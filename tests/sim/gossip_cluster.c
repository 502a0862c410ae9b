#include "tests/sim/gossip_cluster.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define START_WALL_US 1760000000000000LL

static void on_change(void *arg, const struct inet_addr *ep,
		      enum gossip_app_state key, const char *value)
{
	struct gc_node *n = arg;
	struct gc *c = n->c;
	if (!c->watch_value || n->watch_seen_us || key != c->watch_key ||
	    !inet_addr_eq(ep, &c->nodes[c->watch_node].addr) ||
	    strcmp(value, c->watch_value) != 0)
		return;
	n->watch_seen_us = sim_now_us(c->sim);
	c->watch_remaining--;
}

static void on_alive(void *arg, const struct inet_addr *ep)
{
	(void)ep;
	((struct gc_node *)arg)->ups++;
}

static void on_dead(void *arg, const struct inet_addr *ep)
{
	(void)ep;
	((struct gc_node *)arg)->downs++;
}

struct gc *gc_new(uint64_t seed, const size_t *layout, size_t dcs, size_t racks)
{
	struct gc *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	c->sim = sim_new(seed, START_WALL_US);
	c->interval_us = 1000000;
	c->cluster_name = "Sim Cluster";
	for (size_t d = 0; d < dcs; d++)
		c->n += layout[d];
	c->nodes = calloc(c->n, sizeof(*c->nodes));
	ck_assert_ptr_nonnull(c->nodes);
	size_t i = 0;
	for (size_t d = 0; d < dcs; d++) {
		for (size_t k = 0; k < layout[d]; k++, i++) {
			struct gc_node *n = &c->nodes[i];
			n->c = c;
			memset(&n->addr, 0, sizeof(n->addr));
			n->addr.family = INET_V4;
			n->addr.ip[0] = 127;
			n->addr.ip[1] = (uint8_t)((i + 1) >> 16);
			n->addr.ip[2] = (uint8_t)((i + 1) >> 8);
			n->addr.ip[3] = (uint8_t)(i + 1);
			n->addr.port = 7000;
			snprintf(n->dc, sizeof(n->dc), "dc%zu", d + 1);
			snprintf(n->rack, sizeof(n->rack), "rack%zu",
				 k % racks + 1);
			n->generation = START_WALL_US / 1000000;
		}
	}
	return c;
}

void gc_delete(struct gc *c)
{
	for (size_t i = 0; i < c->n; i++)
		gossip_delete(c->nodes[i].g);
	sim_delete(c->sim);
	free(c->nodes);
	free(c);
}

static void deliver(void *arg, const struct inet_addr *from, uint32_t verb,
		    const uint8_t *msg, size_t len)
{
	gossip_process(arg, from, verb, msg, len);
}

void gc_start_node(struct gc *c, size_t i)
{
	struct gc_node *n = &c->nodes[i];
	struct inet_addr seeds[64];
	size_t ns = 0;
	const char *prev_dc = "";
	for (size_t k = 0; k < c->n && ns < 64; k++) {
		if (strcmp(c->nodes[k].dc, prev_dc) != 0)
			seeds[ns++] = c->nodes[k].addr;
		prev_dc = c->nodes[k].dc;
	}
	struct gossip_config cfg = {
		.cluster_name = c->cluster_name,
		.partitioner = "org.apache.cassandra.dht.Murmur3Partitioner",
		.self = n->addr,
		.seeds = seeds,
		.seed_count = ns,
		.generation = n->generation,
		.interval_us = c->interval_us,
		.phi_convict_threshold = c->phi,
		.fd_window = c->fd_window,
	};
	n->env = sim_env_new(c->sim, &n->addr);
	ck_assert_ptr_nonnull(n->env);
	n->g = gossip_new(n->env, &cfg);
	ck_assert_ptr_nonnull(n->g);
	struct gossip_listener l = {.on_change = on_change,
				    .on_alive = on_alive,
				    .on_dead = on_dead};
	ck_assert_int_eq(gossip_subscribe(n->g, &l, n), 0);
	env_set_receiver(n->env, deliver, n->g);
	char host_id[40], tokens[64];
	snprintf(host_id, sizeof(host_id), "00000000-0000-4000-8000-%012zx",
		 i + 1);
	snprintf(tokens, sizeof(tokens), "%lld",
		 (long long)(i * 1000003) - 4000000000LL);
	gossip_set_local_state(n->g, GOSSIP_STATE_HOST_ID, host_id);
	if (!c->small_states) {
		gossip_set_local_state(n->g, GOSSIP_STATE_DC, n->dc);
		gossip_set_local_state(n->g, GOSSIP_STATE_RACK, n->rack);
		gossip_set_local_state(n->g, GOSSIP_STATE_TOKENS, tokens);
		gossip_set_local_state(n->g, GOSSIP_STATE_RELEASE_VERSION,
				       "0.1.0");
	}
	char status[80];
	snprintf(status, sizeof(status), "NORMAL,%s", tokens);
	gossip_set_local_state(n->g, GOSSIP_STATE_STATUS_WITH_PORT, status);
	if (c->before_start)
		c->before_start(c, i, c->before_start_arg);
	ck_assert_int_eq(gossip_start(n->g), 0);
	n->up = true;
}

void gc_start(struct gc *c)
{
	for (size_t i = 0; i < c->n; i++)
		gc_start_node(c, i);
}

void gc_kill(struct gc *c, size_t i)
{
	struct gc_node *n = &c->nodes[i];
	sim_env_kill(c->sim, n->env);
	n->up = false;
}

void gc_restart(struct gc *c, size_t i)
{
	struct gc_node *n = &c->nodes[i];
	ck_assert(!n->up);
	gossip_delete(n->g);
	n->g = NULL;
	/* Persisted generation + 1, or the clock if that is later. */
	int64_t now_s = (START_WALL_US + (int64_t)sim_now_us(c->sim)) / 1000000;
	n->generation = now_s > n->generation ? now_s : n->generation + 1;
	gc_start_node(c, i);
}

bool gc_sees_up(struct gc *c, size_t observer, size_t target)
{
	return gossip_is_alive(c->nodes[observer].g, &c->nodes[target].addr);
}

bool gc_converged(void *arg)
{
	struct gc *c = arg;
	for (size_t i = 0; i < c->n; i++) {
		if (!c->nodes[i].up)
			continue;
		for (size_t j = 0; j < c->n; j++) {
			if (i == j)
				continue;
			if (gc_sees_up(c, i, j) != c->nodes[j].up)
				return false;
		}
	}
	return true;
}

bool gc_run_until_converged(struct gc *c, uint64_t max_us)
{
	return sim_run_until(c->sim, gc_converged, c, max_us);
}

void gc_watch(struct gc *c, size_t i, enum gossip_app_state key,
	      const char *value)
{
	c->watch_key = key;
	c->watch_value = value;
	c->watch_node = i;
	c->watch_start_us = sim_now_us(c->sim);
	c->watch_remaining = 0;
	for (size_t k = 0; k < c->n; k++) {
		c->nodes[k].watch_seen_us = 0;
		if (c->nodes[k].up)
			c->watch_remaining++;
	}
	/* The owner hears its own change through on_change too. */
	ck_assert_int_eq(gossip_set_local_state(c->nodes[i].g, key, value), 0);
}

bool gc_watch_done(void *arg)
{
	struct gc *c = arg;
	return c->watch_remaining == 0;
}

uint64_t gc_total_convictions(struct gc *c)
{
	uint64_t t = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct gossip_stats st;
		gossip_get_stats(c->nodes[i].g, &st);
		t += st.convictions;
	}
	return t;
}
