/*
 * The coordinator's simulated cluster for tests: nodes with their own env,
 * a ring with every node, an in-memory replica store (partition ->
 * fragment, merged on apply) and a coordinator each; the failure
 * detector's verdict is a table the test sets (simc.down), so "down" can
 * be tested apart from "unreachable". Helpers run one write, read or
 * truncate to completion.
 */
#ifndef CASSINI_TESTS_SIM_COORD_CLUSTER_H
#define CASSINI_TESTS_SIM_COORD_CLUSTER_H

#include "replication/replication.h"
#include "tests/sim/sim.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_NODES    12
#define MAX_PARTS    4096
#define MAX_ROWS_SEL 512 /* rows a clustered store selects at once */

struct part {
	struct storage_mutation *frag;
};

struct mnode {
	struct simc *c;
	int idx;
	struct inet_addr addr;
	struct env *env;
	struct ring *ring;
	struct repl *repl;
	struct part parts[MAX_PARTS];
	size_t nparts;
	int hints;
	/* hints handed over by a leaving node (take_hint) */
	int taken;
	uint8_t taken_for[16];
	int64_t taken_created_us;
	bool killed;
	int truncates;        /* truncates the store ran */
	int64_t truncated_us; /* wall clock of the last one */
	bool fail_truncate;   /* the store's truncate fails */
	bool fail_tombstones; /* reads fail past tombstone_failure_threshold */
	bool fail_writes;     /* the store's apply fails (ERR_IO) */
	/* indexed range reads: scans the store answered with its index
	 * (the partitions whose live `v` is one of the values), and
	 * no_index: a node that knows no index restriction (it scans) */
	int index_scans;
	int row_scans; /* of them, told they may read the index's rows only
			* (repl_index_expr.rows: one contact) */
	bool no_index;
	/* index_building: the node's index is still being built (its
	 * indexed reads fail with ERR_INDEX_NOT_AVAILABLE) */
	bool index_building;
	/* old_reads: the node does not know ReadReq.keys (a node before
	 * batched protection reads): it reads cmd's key alone */
	bool old_reads;
	/* old_rows: the node does not know ReadReq.cmds (a node before
	 * row-level protection): it reads every partition with cmd */
	bool old_rows;
	/* old_index_rows: the node does not know IndexExpr.rows: it reads
	 * its candidate partitions whole */
	bool old_index_rows;
	/* rows the store read (storage_mutation_rows of every fragment it
	 * answered with) */
	uint64_t rows_read;
	/* trace events this node recorded (the trace hook) */
	int trace_events;
	uint8_t trace_session[16]; /* the last one's session */
	char trace_log[8192];      /* "thread|activity\n" each */
};

struct simc {
	struct sim *sim;
	int n;
	struct mnode nodes[MAX_NODES];
	bool down[MAX_NODES]; /* the failure detector's verdict (everyone's) */
	struct storage_table_meta *meta;
	/* simc_new_clustered: (k text, c text, v text) with a row-level
	 * index on v (the store's index lists the rows whose live v is the
	 * value, their rows alone when repl_index_expr.rows says so) */
	bool clustered;
	int v_col;
	const struct ring_strategy *strategy; /* for batchlog replay */
	size_t max_inflight;     /* repl_options' (0: the default) */
	uint64_t tombstone_warn; /* repl_options' tombstone_warn_threshold */
	char dir[256];           /* batchlogs */
};

struct outcome {
	bool done;
	struct repl_result res;
	struct storage_mutation *frag;
};

/* One range read step's answer (on_range), for sim_run_until(range_done). */
struct range_out {
	bool done;
	struct repl_result res;
	struct storage_mutation **f;
	size_t n;
	int64_t resume;
	bool finished;
};
void on_range(void *arg, const struct repl_result *res,
	      struct storage_mutation **frags, size_t n, int64_t resume,
	      bool finished);
bool range_done(void *arg);
/* A range step over the whole ring at `cl` with `cmd`, at most `max`
 * partitions; no read repair, index, merge or trace (the caller sets
 * what it needs). */
struct repl_range whole_ring_range(struct simc *c,
				   const struct ring_strategy *s, int cl,
				   const struct storage_read_cmd *cmd,
				   uint32_t max);
/* Runs step `q` from node `coord` until it answers (into *o). */
void run_range_step(struct simc *c, int coord, const struct repl_range *q,
		    struct range_out *o);
/* Frees a step's answer. */
void range_out_free(struct range_out *o);

void mnode_start(struct mnode *m);
struct simc *simc_new(uint64_t seed, int n, const char *const *dcs);
struct simc *simc_new_clustered(uint64_t seed, int n, const char *const *dcs);
/* A write of row (key, ck) of a clustered table: v = val, or with val
 * NULL the row's deletion. */
struct storage_mutation *make_row_write(struct simc *c, const char *key,
					const char *ck, const char *val,
					int64_t ts);
void simc_delete(struct simc *c);
void simc_kill(struct simc *c, int i);
void simc_restart(struct simc *c, int i);
struct storage_mutation *make_write(struct simc *c, const char *key,
				    const char *val, int64_t ts);
void on_write(void *arg, const struct repl_result *res);
void on_read(void *arg, const struct repl_result *res,
	     struct storage_mutation *frag);
bool outcome_done(void *arg);
struct outcome do_write(struct simc *c, int coord,
			const struct ring_strategy *s, int cl, const char *key,
			const char *val, int64_t ts);
void start_read(struct simc *c, int coord, const struct ring_strategy *s,
		int cl, const char *key, bool read_repair, struct outcome *o);
struct outcome do_read(struct simc *c, int coord, const struct ring_strategy *s,
		       int cl, const char *key);
void frag_value(struct simc *c, const struct storage_mutation *f, char *out,
		size_t cap, int64_t *ts);
struct outcome do_truncate(struct simc *c, int coord);
struct ring_strategy *simple(int rf);
/* Does `res` name node `i` as a failed replica with failure `code`? */
bool names_failure(const struct simc *c, const struct repl_result *res, int i,
		   uint16_t code);
struct ring_strategy *nts(int rf1, int rf2);
/* Merges `m` into node i's store as a write reaching only it would. */
void simc_apply(struct simc *c, int i, const struct storage_mutation *m);
/* The partition of m held by n, or NULL. */
struct part *find_part(struct mnode *n, const struct storage_mutation *m);

#endif
