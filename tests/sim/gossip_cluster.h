/*
 * A simulated gossip cluster for tests: N nodes on 127.0.0.1.., each a
 * gossip over its own sim env, with helpers that read like the scenario
 * ("kill node 3", "partition dc3", "does every live node see node 3 DOWN").
 */
#ifndef CASSINI_TESTS_SIM_GOSSIP_CLUSTER_H
#define CASSINI_TESTS_SIM_GOSSIP_CLUSTER_H

#include "gossip/gossip.h"
#include "tests/sim/sim.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gc;

struct gc_node {
	struct gc *c;
	struct inet_addr addr;
	struct env *env;
	struct gossip *g;
	int64_t generation;
	bool up; /* process running */
	char dc[32], rack[32];
	/* When the state under watch (gc_watch) arrived here; 0 = not yet. */
	uint64_t watch_seen_us;
	uint64_t downs, ups; /* on_dead / on_alive heard */
};

struct gc {
	struct sim *sim;
	size_t n;
	struct gc_node *nodes;
	uint64_t interval_us;
	double phi;
	uint32_t fd_window;
	bool small_states; /* only STATUS and HOST_ID: for the big cluster */
	const char *cluster_name;
	/* gc_watch: which state value we wait for. */
	enum gossip_app_state watch_key;
	const char *watch_value;
	size_t watch_node;
	uint64_t watch_start_us;
	size_t watch_remaining; /* running nodes that have not seen it */
	/* Called for node i after its gossip is made, before it starts
	 * (e.g. to load saved peers); NULL: nothing. */
	void (*before_start)(struct gc *c, size_t i, void *arg);
	void *before_start_arg;
};

/* `layout`: nodes per DC; seeds are the first node of each DC; racks
 * round-robin over `racks`. Nothing starts until gc_start. */
struct gc *gc_new(uint64_t seed, const size_t *layout, size_t dcs,
		  size_t racks);
void gc_delete(struct gc *c);

void gc_start_node(struct gc *c, size_t i);
void gc_start(struct gc *c);
void gc_kill(struct gc *c, size_t i);
/* Restarts a killed node with a higher generation (a new process). */
void gc_restart(struct gc *c, size_t i);

/* Does `observer` see `target` UP? */
bool gc_sees_up(struct gc *c, size_t observer, size_t target);
/* Every running node sees every running node UP (and the dead ones
 * DOWN). */
bool gc_converged(void *arg);
bool gc_run_until_converged(struct gc *c, uint64_t max_us);

/* Sets a state on node i and starts timing its spread. */
void gc_watch(struct gc *c, size_t i, enum gossip_app_state key,
	      const char *value);
bool gc_watch_done(void *arg);

uint64_t gc_total_convictions(struct gc *c);

#endif
