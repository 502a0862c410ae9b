/*
 * The repair suites' simulated cluster (test_repair.c, test_repair_failures.c,
 * test_repair_incremental.c): three replicas with in-memory stores
 * (partition -> canonical fragment, merged on apply; for incremental
 * repair also the data pending for a session and the repaired data), a
 * repair service each, the failure detector's verdict and gossip
 * generations as tables the test sets, and helpers that write rows, make
 * the replicas diverge, run a session to completion and compare stores.
 */
#ifndef CASSINI_TESTS_SIM_REPAIR_CLUSTER_H
#define CASSINI_TESTS_SIM_REPAIR_CLUSTER_H

#include "repair/repair.h"
#include "tests/sim/mem_store.h"
#include "tests/sim/sim.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NNODES 3

/* The simulation seed: each suite's main sets it (test_seed). */
extern uint64_t g_seed;

struct mnode {
	struct cluster *c;
	struct inet_addr addr;
	struct env *env;
	struct repair *repair;
	struct mem_store store; /* its data (unrepaired) */
	/* incremental repair: the data pending for `pend_uuid`, and the
	 * repaired data (partitions move between them whole) */
	struct mem_store pend, rep;
	uint8_t pend_uuid[16];
	/* its participant sessions as last persisted (locals_changed) */
	struct buf saved;
	int saves;
	int finish_failures; /* the next finish calls that fail (EIO) */
};

struct cluster {
	struct sim *sim;
	struct mnode nodes[NNODES];
	struct storage_table_meta *meta;
	uint64_t session; /* the id of the last session node 0 started */
	/* the last finished session, as node 0 saw it */
	bool done;
	struct repair_summary sum;
	struct repair_peer_stats peers[NNODES];
	int progress_lines;
	bool incremental;          /* start() asks for an incremental session */
	bool partial;              /* ... over a subset of the replicas */
	bool down[NNODES];         /* the failure detector's verdict */
	int64_t gen[NNODES];       /* gossip generations (0 until a restart) */
	uint64_t local_timeout_ms; /* 0: the default */
};

#define ON_ALL 7

#define NKEYS 300
#define NROWS 4

struct other {
	bool done, ok;
	char error[256];
	uint64_t fetched[NNODES]; /* rows read from node i */
};

void deliver(void *arg, const struct inet_addr *from, uint32_t verb,
	     const uint8_t *msg, size_t len);
/* (Re)starts node i's repair service, as a restart of the node would,
 * with the participant sessions it last persisted. */
void start_repair(struct cluster *c, int i);
/* ks.t (mem_store_table_new) on every node */
struct cluster *cluster_new(void);
void cluster_delete(struct cluster *c);
void key_of(int k, char *buf, size_t cap);
struct storage_mutation *mut(struct cluster *c, int k);
void set_ck(struct storage_mutation *m, int ck);
/* Applies m on the nodes of `mask`; returns its encoded size. */
size_t apply_on(struct cluster *c, int mask, struct storage_mutation *m);
/* Row (k, ck) = a ~100-byte value at ts on the nodes of `mask`. */
size_t put_row(struct cluster *c, int mask, int k, int ck, int64_t ts);
size_t delete_row(struct cluster *c, int mask, int k, int ck, int64_t ts);
size_t delete_partition(struct cluster *c, int mask, int k, int64_t ts);
void load(struct cluster *c);
bool part_equal(struct cluster *c, int k);
int unequal_parts(struct cluster *c);
uint64_t data_bytes(struct mnode *n);
/* repair_start's callbacks for node 0's sessions: they count progress
 * lines and keep the summary in c->done, c->sum, c->peers. */
void on_progress(void *arg, const char *line);
void on_done(void *arg, const struct repair_summary *s);
bool is_done(void *arg);
int start(struct cluster *c, int64_t st, int64_t et, bool preview);
void run(struct cluster *c, int64_t st, int64_t et, bool preview);
/* Rows streamed to node i. */
uint64_t streamed(struct cluster *c, int i);
uint64_t streamed_bytes(struct cluster *c);
/* The divergence the suites repair, on distinct partitions:
 *   keys 10..19  row ck 1 written to nodes 0, 1 only: node 2 lacks 10 rows
 *   keys 30..34  row ck 2 rewritten newer on nodes 0, 2: node 1 stale, 5
 *   keys 50..53  row ck 3 deleted on node 0 only: nodes 1, 2 lack 4 each
 *   key 70       partition deleted on node 1 only: nodes 0, 2 lack 1 each
 * Returns the divergent bytes: each divergent mutation's encoded size
 * times the replicas lacking it. */
uint64_t diverge(struct cluster *c);
bool other_is_done(void *arg);
/* Node `from` starts a session over (st, et] among all three. */
void start_other(struct cluster *c, int from, int64_t st, int64_t et,
		 struct other *o);
/* Restarts node i (a new process: the same data, its persisted sessions). */
void restart_node(struct cluster *c, int i);

#endif
