/*
 * Repair sessions in the deterministic simulator (repair_cluster.h): what
 * they stream and how they find it.
 *
 * Replicas in sync stream nothing. Divergence of every kind — a replica
 * missing rows, one holding stale versions, row and partition deletions
 * only one replica saw — converges: afterwards every store holds the same
 * fragments (digests), exactly the divergent rows stream to exactly the
 * replicas that lack them, and a second repair finds nothing. Preview
 * reports the same and changes nothing. A subrange (wrapping) repair
 * touches only its range.
 *
 * The tree exchange finds exactly the leaves holding divergent
 * partitions, with node values bounded by the differing leaves times the
 * depth (not the whole tree), and participants free the trees they keep
 * for a task on RELEASE (success, failure, cancel) and on expiry (a dead
 * coordinator).
 */
#include "repair/merkle.h"
#include "repair/repair.h"

#include "common/err.h"
#include "tests/lib/testutil.h"
#include "tests/sim/repair_cluster.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(in_sync_replicas_stream_nothing)
{
	struct cluster *c = cluster_new();
	load(c);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->sum.ranges, 1);
	ck_assert_uint_eq(c->sum.mismatched_ranges, 0);
	ck_assert_uint_eq(c->sum.rows_hashed, 0);
	for (int i = 0; i < NNODES; i++)
		ck_assert_uint_eq(streamed(c, i), 0);
	ck_assert_uint_eq(streamed_bytes(c), 0);
	/* the top six levels of two remote trees (node 0's stays local),
	 * not whole trees */
	ck_assert_uint_eq(c->sum.hash_bytes, 2 * 64 * 8);
	ck_assert_uint_lt(c->sum.tree_bytes, 2 * (64 * 8 + 128));
	ck_assert_uint_eq(c->sum.leaves_mismatched, 0);
	ck_assert_int_eq(c->progress_lines, 1);
	/* and the replicas keep no tree once the task is over */
	sim_run_for(c->sim, 10000);
	for (int i = 0; i < NNODES; i++)
		ck_assert_uint_eq(repair_kept_trees(c->nodes[i].repair, NULL),
				  0);
	cluster_delete(c);
}
END_TEST

START_TEST(divergent_replicas_converge_streaming_only_divergent_rows)
{
	struct cluster *c = cluster_new();
	load(c);
	uint64_t divergent = diverge(c);
	ck_assert_int_eq(unequal_parts(c), 10 + 5 + 4 + 1);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_int_eq(unequal_parts(c), 0);
	ck_assert_uint_ge(c->sum.mismatched_ranges, 1);
	ck_assert_uint_le(c->sum.mismatched_ranges, 20);
	/* node 0: the partition deletion; node 1: 5 newer rows and 4 row
	 * tombstones; node 2: 10 rows, 4 row tombstones, the deletion */
	ck_assert_uint_eq(streamed(c, 0), 1);
	ck_assert_uint_eq(streamed(c, 1), 9);
	ck_assert_uint_eq(streamed(c, 2), 15);
	/* the partition deleted on node 1 lost its rows (shadowed) */
	char key[32];
	key_of(70, key, sizeof(key));
	struct storage_mutation **p = mem_store_find(
		&c->nodes[0].store, slice_make(key, strlen(key)));
	struct storage_mutation *probe = mut(c, 70);
	ck_assert_int_eq(
		storage_mutation_delete_partition(probe, 2000, 1700000000), 0);
	uint8_t d1[16], d2[16];
	storage_mutation_digest(*p, d1);
	struct storage_mutation *canon =
		storage_fragment_merge(c->meta, &probe, 1);
	storage_mutation_digest(canon, d2);
	ck_assert_mem_eq(d1, d2, 16);
	storage_mutation_delete(canon);
	storage_mutation_delete(probe);
	/* bytes: the divergent rows' (each its partition's own fragment,
	 * against the single-row mutations written), within 2x */
	uint64_t bytes = streamed_bytes(c), all = data_bytes(&c->nodes[0]);
	fprintf(stderr,
		"repair sim: %llu rows streamed, %llu bytes for %llu "
		"divergent (%.2fx), data %llu bytes, trees and hashes %llu "
		"bytes\n",
		(unsigned long long)(streamed(c, 0) + streamed(c, 1) +
				     streamed(c, 2)),
		(unsigned long long)bytes, (unsigned long long)divergent,
		(double)bytes / (double)divergent, (unsigned long long)all,
		(unsigned long long)c->sum.tree_bytes);
	ck_assert_uint_le(bytes, 2 * divergent);
	ck_assert_uint_lt(bytes * 20, all);
	/* and now in sync */
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->sum.mismatched_ranges, 0);
	ck_assert_uint_eq(streamed_bytes(c), 0);
	cluster_delete(c);
}
END_TEST

/* stream_throughput_outbound on the coordinator: its APPLY messages wait
 * for their bytes, so (virtual time) the session lasts at least the bytes
 * sent before its last message at that rate; unthrottled nothing waits.
 * The rows arrive all the same. */
START_TEST(stream_throttle_paces_apply_messages)
{
	struct cluster *c = cluster_new();
	load(c);
	repair_set_stream_throughput(c->nodes[0].repair, 0);
	for (int k = 0; k < 100; k++) /* node 2 lacks ~100 rows */
		put_row(c, 1 | 2, k, NROWS + 1, 2000);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_int_eq(unequal_parts(c), 0);
	struct repair_stream_stats free_run;
	repair_stream_stats(c->nodes[0].repair, &free_run);
	ck_assert_uint_gt(free_run.bytes, 0);
	ck_assert_uint_eq(free_run.waits, 0);
	ck_assert_uint_eq(free_run.waited_us, 0);

	const uint64_t rate = 1000; /* bytes per second */
	repair_set_stream_throughput(c->nodes[0].repair, rate);
	ck_assert_uint_eq(repair_stream_throughput(c->nodes[0].repair), rate);
	for (int k = 100; k < 200; k++)
		put_row(c, 1 | 2, k, NROWS + 1, 2000);
	uint64_t t0 = sim_now_us(c->sim);
	run(c, INT64_MIN, INT64_MIN, false);
	uint64_t took = sim_now_us(c->sim) - t0;
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_int_eq(unequal_parts(c), 0);
	struct repair_stream_stats st;
	repair_stream_stats(c->nodes[0].repair, &st);
	uint64_t bytes = st.bytes - free_run.bytes;
	ck_assert_uint_gt(bytes, 3 * 4096);
	ck_assert_uint_gt(st.waits, 1);
	/* every message but the last paid for before the next went */
	ck_assert_uint_ge(took, (bytes - 4096) * 1000000 / rate);
	ck_assert_uint_ge(st.waited_us, 1000000);
	fprintf(stderr,
		"stream throttle sim: %llu bytes at %llu B/s in %.1f s "
		"(virtual), "
		"%llu waits, %.1f s waited\n",
		(unsigned long long)bytes, (unsigned long long)rate,
		(double)took / 1e6, (unsigned long long)st.waits,
		(double)st.waited_us / 1e6);
	cluster_delete(c);
}
END_TEST

START_TEST(tombstones_past_gc_grace_are_not_repaired)
{
	struct cluster *c = cluster_new();
	load(c);
	/* key 5 was deleted 20 days ago (past the 10 days of gc_grace):
	 * nodes 1 and 2 compacted the deletion away with what it shadowed,
	 * node 0 still holds it; key 6 has a fresh row deletion on node 1 */
	char key[32];
	key_of(5, key, sizeof(key));
	for (int i = 1; i < NNODES; i++) {
		struct storage_mutation **p = mem_store_find(
			&c->nodes[i].store, slice_make(key, strlen(key)));
		storage_mutation_delete(*p);
		*p = storage_mutation_new(c->meta, (uint8_t *)key, strlen(key));
	}
	struct storage_mutation *m = mut(c, 5);
	ck_assert_int_eq(storage_mutation_delete_partition(
				 m, 2000, 1700000000 - 20 * 86400),
			 0);
	apply_on(c, 1, m);
	delete_row(c, 2, 6, 1, 3000);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->sum.rows_mismatched, 1);
	ck_assert_uint_eq(streamed(c, 0), 1);
	ck_assert_uint_eq(streamed(c, 1), 0);
	ck_assert_uint_eq(streamed(c, 2), 1);
	ck_assert(part_equal(c, 6));
	ck_assert(!part_equal(c, 5)); /* left for compaction to purge */
	cluster_delete(c);
}
END_TEST

START_TEST(preview_reports_and_changes_nothing)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	run(c, INT64_MIN, INT64_MIN, true);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(streamed(c, 0), 1);
	ck_assert_uint_eq(streamed(c, 1), 9);
	ck_assert_uint_eq(streamed(c, 2), 15);
	ck_assert_int_eq(unequal_parts(c), 20);
	cluster_delete(c);
}
END_TEST

static int64_t token_of(struct cluster *c, int k)
{
	struct storage_mutation *m = mut(c, k);
	int64_t t = storage_mutation_token(m);
	storage_mutation_delete(m);
	return t;
}

START_TEST(subrange_repair_touches_only_its_range)
{
	struct cluster *c = cluster_new();
	load(c);
	/* node 2 misses a row in every partition */
	for (int k = 0; k < NKEYS; k++)
		put_row(c, 1 | 2, k, NROWS + 2, 3000);
	/* a wrapping range: (2^62, -2^62] */
	int64_t st = INT64_MAX / 2, et = INT64_MIN / 2;
	int inside = 0;
	for (int k = 0; k < NKEYS; k++) {
		int64_t t = token_of(c, k);
		inside += t > st || t <= et;
	}
	ck_assert_int_gt(inside, 10);
	ck_assert_int_lt(inside, NKEYS - 10);
	run(c, st, et, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(streamed(c, 2), (uint64_t)inside);
	for (int k = 0; k < NKEYS; k++) {
		int64_t t = token_of(c, k);
		bool in = t > st || t <= et;
		ck_assert_msg(part_equal(c, k) == in, "key %d token %lld", k,
			      (long long)t);
	}
	cluster_delete(c);
}
END_TEST

/* The depth replicas keep a tree of `partitions` at: about two leaves
 * per partition (repair_replica.c). */
static int kept_depth(uint64_t partitions)
{
	return merkle_depth_for(partitions, 0) + 1;
}

static int u32_cmp(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return (a > b) - (a < b);
}

/* The distinct leaves at `depth` of the ring holding keys[0..n), sorted;
 * returns their count, and in *runs the coalesced runs. */
static size_t leaves_of(struct cluster *c, const int *keys, size_t n, int depth,
			uint32_t *out, size_t *runs)
{
	struct merkle_range ring = {INT64_MIN, INT64_MIN};
	for (size_t i = 0; i < n; i++)
		out[i] = (uint32_t)merkle_node_of(ring, depth,
						  token_of(c, keys[i]));
	qsort(out, n, sizeof(*out), u32_cmp);
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (!m || out[m - 1] != out[i])
			out[m++] = out[i];
	*runs = 0;
	for (size_t i = 0; i < m; i++)
		*runs += !i || out[i] != out[i - 1] + 1;
	return m;
}

START_TEST(exchange_finds_exactly_the_differing_leaves)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	int keys[20], n = 0;
	for (int k = 10; k < 20; k++)
		keys[n++] = k;
	for (int k = 30; k < 35; k++)
		keys[n++] = k;
	for (int k = 50; k < 54; k++)
		keys[n++] = k;
	keys[n++] = 70;
	uint32_t leaves[20];
	size_t runs;
	int depth = kept_depth(NKEYS);
	size_t nl = leaves_of(c, keys, (size_t)n, depth, leaves, &runs);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->sum.leaves_mismatched, nl);
	ck_assert_uint_eq(c->sum.mismatched_ranges, runs);
	/* node values: the top levels of the two remote trees, then at most
	 * one value per differing node per level from each, below them */
	uint64_t bound = 8 * 2 * (64 + nl * (uint64_t)(depth - 6));
	ck_assert_uint_le(c->sum.hash_bytes, bound);
	/* whole trees folded to one partition per leaf would be 16 KB */
	ck_assert_uint_lt(bound, 2 * 512 * 16);
	ck_assert_int_eq(unequal_parts(c), 0);
	cluster_delete(c);
}
END_TEST

/* n single-row partitions of ~100 bytes on every node, keys from 1000 */
static void load_many(struct cluster *c, int n)
{
	for (int k = 1000; k < 1000 + n; k++) {
		struct storage_mutation *m = mut(c, k);
		set_ck(m, 0);
		char v[100];
		memset(v, 'v', sizeof(v));
		ck_assert_int_eq(storage_mutation_put(m, 2, NULL, 0,
						      (uint8_t *)v, sizeof(v),
						      1000, 0, 1700000000),
				 0);
		apply_on(c, ON_ALL, m);
	}
}

START_TEST(tree_traffic_is_bounded_by_differing_leaves)
{
	/* 2,000 partitions, 20 (1%) rewritten on nodes 0 and 1 only */
	enum { N = 2000, D = 20 };
	struct cluster *c = cluster_new();
	load_many(c, N);
	int keys[D];
	for (int i = 0; i < D; i++) {
		keys[i] = 1000 + i * (N / D);
		put_row(c, 1 | 2, keys[i], 0, 2000);
	}
	uint32_t leaves[D];
	size_t runs;
	int depth = kept_depth(N);
	size_t nl = leaves_of(c, keys, D, depth, leaves, &runs);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->sum.leaves_mismatched, nl);
	ck_assert_uint_eq(streamed(c, 2), D);
	ck_assert_uint_eq(streamed(c, 0) + streamed(c, 1), 0);
	/* nodes 0 and 1 agree everywhere: below the top levels only node 2
	 * is asked (node 0 stands for node 1), one value per differing node
	 * per level */
	uint64_t bound = 8 * (2 * 64 + nl * (uint64_t)(depth - 6));
	uint64_t all = 3 * data_bytes(&c->nodes[0]);
	fprintf(stderr,
		"repair sim: %d partitions, %d divergent, depth %d: %llu "
		"bytes of node values (bound %llu), %llu of tree and row "
		"digest messages = %.2f%% of %llu bytes of data\n",
		N, D, depth, (unsigned long long)c->sum.hash_bytes,
		(unsigned long long)bound,
		(unsigned long long)c->sum.tree_bytes,
		100.0 * (double)c->sum.tree_bytes / (double)all,
		(unsigned long long)all);
	ck_assert_uint_le(c->sum.hash_bytes, bound);
	ck_assert_uint_lt(c->sum.tree_bytes * 100, all);
	/* only rows of the differing leaves were hashed, node 0's locally:
	 * node 2's rows there */
	ck_assert_uint_lt(c->sum.rows_hashed, 2 * 2 * D);
	ck_assert_int_eq(unequal_parts(c), 0);
	cluster_delete(c);
}
END_TEST

START_TEST(versions_are_fetched_from_the_coordinator_when_it_holds_them)
{
	/* node 1 coordinates; nodes 0 and 1 hold 10 newer rows node 2
	 * lacks: they are read from node 1 itself, not from node 0 (listed
	 * first) */
	struct cluster *c = cluster_new();
	load(c);
	for (int k = 10; k < 20; k++)
		put_row(c, 1 | 2, k, NROWS + 1, 2000);
	struct other o;
	start_other(c, 1, INT64_MIN, INT64_MIN, &o);
	ck_assert(sim_run_until(c->sim, other_is_done, &o, 60ull * 1000000));
	ck_assert_msg(o.ok, "%s", o.error);
	ck_assert_int_eq(unequal_parts(c), 0);
	ck_assert_uint_eq(o.fetched[0], 0);
	ck_assert_uint_eq(o.fetched[1], 10);
	cluster_delete(c);
}
END_TEST

static size_t kept(struct cluster *c, int i)
{
	return repair_kept_trees(c->nodes[i].repair, NULL);
}

static bool trees_kept(void *arg)
{
	struct cluster *c = arg;
	return kept(c, 1) == 1 && kept(c, 2) == 1;
}

START_TEST(kept_trees_are_freed_on_release_and_failure)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	/* while the task runs, each participant keeps its tree ... */
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	ck_assert(sim_run_until(c->sim, trees_kept, c, 60ull * 1000000));
	size_t bytes;
	ck_assert_uint_eq(repair_kept_trees(c->nodes[1].repair, &bytes), 1);
	ck_assert_uint_eq(bytes, ((size_t)2 << kept_depth(NKEYS)) * 16);
	/* ... until its RELEASE */
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	sim_run_for(c->sim, 10000);
	for (int i = 0; i < NNODES; i++) {
		ck_assert_uint_eq(repair_kept_trees(c->nodes[i].repair, &bytes),
				  0);
		ck_assert_uint_eq(bytes, 0);
	}
	/* a cancelled session releases them */
	for (int k = 100; k < 110; k++)
		put_row(c, 1 | 2, k, 0, 3000);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	ck_assert(sim_run_until(c->sim, trees_kept, c, 60ull * 1000000));
	ck_assert_int_eq(repair_cancel(c->nodes[0].repair, "test"), 0);
	sim_run_for(c->sim, 10000);
	ck_assert_uint_eq(kept(c, 1) + kept(c, 2), 0);
	/* so does one failing on a participant's death (the others') */
	for (int k = 100; k < 110; k++)
		put_row(c, 1 | 2, k, 0, 4000);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	ck_assert(sim_run_until(c->sim, trees_kept, c, 60ull * 1000000));
	sim_env_kill(c->sim, c->nodes[2].env);
	c->down[2] = true;
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert(!c->sum.ok);
	sim_run_for(c->sim, 10000);
	ck_assert_uint_eq(kept(c, 0) + kept(c, 1), 0);
	cluster_delete(c);
}
END_TEST

START_TEST(kept_trees_of_a_dead_coordinator_expire)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	ck_assert(sim_run_until(c->sim, trees_kept, c, 60ull * 1000000));
	sim_env_kill(c->sim, c->nodes[0].env);
	/* the claims' time to live: validate + request timeouts (5 s each
	 * here); nothing else touches the participants meanwhile */
	sim_run_for(c->sim, 9000000);
	ck_assert_uint_eq(kept(c, 1), 1);
	ck_assert_uint_eq(kept(c, 2), 1);
	sim_run_for(c->sim, 1100000);
	size_t bytes;
	ck_assert_uint_eq(repair_kept_trees(c->nodes[1].repair, &bytes), 0);
	ck_assert_uint_eq(bytes, 0);
	ck_assert_uint_eq(kept(c, 2), 0);
	cluster_delete(c);
}
END_TEST

/* Node i's partition k, as a digest (zeros when it has none). */
static void digest_of(struct cluster *c, int i, int k, uint8_t d[16])
{
	char key[32];
	key_of(k, key, sizeof(key));
	struct storage_mutation **p = mem_store_find(
		&c->nodes[i].store, slice_make(key, strlen(key)));
	memset(d, 0, 16);
	if (p)
		storage_mutation_digest(*p, d);
}

static void moved_done(void *arg, const struct repair_summary *s)
{
	struct cluster *c = arg;
	c->done = true;
	c->sum = *s;
	c->sum.peers = NULL;
}

/* A session among `reps` (2 nodes) coordinated by node `by`. */
static void run_among(struct cluster *c, int by, int a, int b)
{
	struct inet_addr reps[2] = {c->nodes[a].addr, c->nodes[b].addr};
	struct repair_table t = {.name = "ks.t"};
	memcpy(t.id, c->meta->id, 16);
	struct repair_range r = {.start = INT64_MIN,
				 .end = INT64_MIN,
				 .replicas = reps,
				 .nreplicas = 2};
	struct repair_request q = {
		.tables = &t, .ntables = 1, .ranges = &r, .nranges = 1};
	c->done = false;
	ck_assert_int_eq(repair_start(c->nodes[by].repair, &q, NULL, moved_done,
				      c, NULL),
			 0);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
}

/* What bootstrap and removenode do (node/movement.c): an empty new replica
 * gets every row, tombstones included, from a session it coordinates
 * (bootstrap) or one a node outside the replicas coordinates (removenode:
 * that node's own data is left alone). */
START_TEST(sessions_move_a_whole_range_to_an_empty_replica)
{
	struct cluster *c = cluster_new();
	for (int k = 0; k < NKEYS; k++)
		for (int ck = 0; ck < NROWS; ck++)
			put_row(c, 2, k, ck, 1000 + k);
	for (int k = 0; k < NKEYS; k += 10)
		delete_row(c, 2, k, 1, 5000);
	for (int k = 5; k < NKEYS; k += 50)
		delete_partition(c, 2, k, 6000);
	put_row(c, 1, 7, 9, 99); /* node 0 holds one row of its own */
	uint8_t mine[16], d1[16], d2[16];
	digest_of(c, 0, 7, mine);
	/* removenode: node 0 coordinates, node 2 (empty) fetches from 1 */
	run_among(c, 0, 1, 2);
	for (int k = 0; k < NKEYS; k++) {
		digest_of(c, 1, k, d1);
		digest_of(c, 2, k, d2);
		ck_assert_msg(memcmp(d1, d2, 16) == 0, "key %d differs", k);
	}
	digest_of(c, 0, 7, d1);
	ck_assert_int_eq(memcmp(d1, mine, 16), 0);
	ck_assert_uint_eq(c->nodes[0].store.nparts, 1);
	/* bootstrap: node 0 coordinates and fetches everything from 2 */
	run_among(c, 0, 0, 2);
	for (int k = 0; k < NKEYS; k++) {
		digest_of(c, 2, k, d2);
		digest_of(c, 0, k, d1);
		ck_assert_msg(memcmp(d1, d2, 16) == 0, "key %d differs", k);
	}
	cluster_delete(c);
}
END_TEST

int main(void)
{
	g_seed = test_seed(0x4e9a);
	Suite *s = suite_create("repair_sim");
	TCase *tc = tcase_create("sessions");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, in_sync_replicas_stream_nothing);
	tcase_add_test(
		tc, divergent_replicas_converge_streaming_only_divergent_rows);
	tcase_add_test(tc, preview_reports_and_changes_nothing);
	tcase_add_test(tc, stream_throttle_paces_apply_messages);
	tcase_add_test(tc, tombstones_past_gc_grace_are_not_repaired);
	tcase_add_test(tc, subrange_repair_touches_only_its_range);
	tcase_add_test(tc, exchange_finds_exactly_the_differing_leaves);
	tcase_add_test(tc, tree_traffic_is_bounded_by_differing_leaves);
	tcase_add_test(
		tc,
		versions_are_fetched_from_the_coordinator_when_it_holds_them);
	tcase_add_test(tc, kept_trees_are_freed_on_release_and_failure);
	tcase_add_test(tc, kept_trees_of_a_dead_coordinator_expire);
	tcase_add_test(tc, sessions_move_a_whole_range_to_an_empty_replica);
	suite_add_tcase(s, tc);
	return test_run(s);
}
