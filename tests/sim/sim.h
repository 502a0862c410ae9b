/*
 * The deterministic simulator: many nodes in one process, one thread.
 *
 * A `struct sim` is a world with one clock, one event queue and one PRNG.
 * Each simulated node gets its own `struct env` from sim_env_new(); its
 * timers and messages become events in the world's queue. Running the sim
 * pops the earliest event, jumps the clock to its deadline, and fires it, so
 * hours of simulated time pass in milliseconds and one seed replays one run
 * exactly (ties break by insertion order, never by pointer values).
 *
 * The network delivers env_send() messages after a latency drawn from
 * [min, max]; links can drop a fraction of messages or be cut one way, which
 * is how partitions (including asymmetric ones) are made. Files go to the
 * real file system for now; the fault-injecting disk grows with Storage.
 */
#ifndef CASSINI_TESTS_SIM_H
#define CASSINI_TESTS_SIM_H

#include "common/env.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sim;

/* The clock starts at `start_wall_us` on the wall clock and at 1s on the
 * monotonic clock. */
struct sim *sim_new(uint64_t seed, int64_t start_wall_us);
/* Frees the world, every env it made, and pending events. */
void sim_delete(struct sim *s);

/* Node i's address in the cluster fixtures: 127.0.9.(i + 1):7000. */
struct inet_addr sim_node_addr(int i);
/* A node's env, reachable at `addr`. Owned by the sim. A killed node's
 * address may get a new env (a restarted process): messages go to the
 * newest env of an address. */
struct env *sim_env_new(struct sim *s, const struct inet_addr *addr);
/* Detaches a node: its timers stop and messages to it are dropped, as if
 * the process died. The env stays valid (calls on it do nothing). */
void sim_env_kill(struct sim *s, struct env *e);

/* Freezes a node for `us` (SIGSTOP): its timers and the messages sent to
 * it wait, then fire in order when it thaws. */
void sim_env_pause(struct sim *s, struct env *e, uint64_t us);

uint64_t sim_now_us(const struct sim *s);
uint64_t sim_random(struct sim *s);

/* Fires the next event. Returns false when nothing is scheduled. */
bool sim_step(struct sim *s);
/* Fires events due within `us` and leaves the clock exactly at now + us. */
void sim_run_for(struct sim *s, uint64_t us);
/* Runs until pred(arg) is true (checked after each event) or `max_us` of
 * simulated time pass. Returns whether pred became true. */
bool sim_run_until(struct sim *s, bool (*pred)(void *arg), void *arg,
		   uint64_t max_us);

/* Network: one-way delay range for every link (default 100..500 us). */
void sim_net_set_latency(struct sim *s, uint64_t min_us, uint64_t max_us);
/* Drop probability for messages from `from` to `to` (NULL = any). */
void sim_net_set_drop(struct sim *s, const struct inet_addr *from,
		      const struct inet_addr *to, double p);
/* Cut (or heal) the one-way link from -> to. NULL matches any node. */
void sim_net_cut(struct sim *s, const struct inet_addr *from,
		 const struct inet_addr *to, bool cut);
/* Cuts (or heals) both directions between every node of `a` and every
 * node of `b`: a partition. */
void sim_net_partition(struct sim *s, const struct inet_addr *a, size_t na,
		       const struct inet_addr *b, size_t nb, bool cut);
/* Heals every cut and drop rule. */
void sim_net_heal(struct sim *s);

/* Counters, for assertions. */
uint64_t sim_net_sent(const struct sim *s);
uint64_t sim_net_dropped(const struct sim *s);

#endif
