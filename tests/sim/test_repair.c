/*
 * Repair sessions in the deterministic simulator: three replicas with
 * in-memory stores (partition -> canonical fragment, merged on apply).
 *
 * Replicas in sync stream nothing. Divergence of every kind — a replica
 * missing rows, one holding stale versions, row and partition deletions
 * only one replica saw — converges: afterwards every store holds the same
 * fragments (digests), exactly the divergent rows stream to exactly the
 * replicas that lack them, and a second repair finds nothing. Preview
 * reports the same and changes nothing. A subrange (wrapping) repair
 * touches only its range. A participant killed mid-session fails the
 * session with a message naming it; a second concurrent session is
 * refused.
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
#include "tests/sim/mem_store.h"
#include "tests/sim/sim.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NNODES 3

static uint64_t g_seed;

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
	bool incremental;    /* start() asks for an incremental session */
	bool partial;        /* ... over a subset of the replicas */
	bool down[NNODES];   /* the failure detector's verdict */
	int64_t gen[NNODES]; /* gossip generations (0 until a restart) */
	uint64_t local_timeout_ms; /* 0: the default */
};

/* ---- in-memory store ----------------------------------------------------- */

static int mem_apply(void *s, const struct storage_mutation *m,
		     storage_done_fn done, void *arg)
{
	struct mnode *n = s;
	mem_store_apply(&n->store, m);
	done(arg, 0, ERR_NONE);
	return 0;
}

static void mem_scan(void *s, const uint8_t table_id[16], int64_t start,
		     int64_t end, repair_scan_each_fn each,
		     storage_done_fn done, void *arg)
{
	struct mnode *n = s;
	(void)table_id;
	ck_assert_int_lt(start, end);
	if (mem_store_scan(&n->store, start, end, each, arg) != 0) {
		done(arg, -1, err_code());
		return;
	}
	done(arg, 0, ERR_NONE);
}

static const struct storage_table_meta *mem_meta(void *s,
						 const uint8_t table_id[16])
{
	struct mnode *n = s;
	return memcmp(table_id, n->c->meta->id, 16)
		       ? NULL
		       : storage_table_meta_ref(n->c->meta);
}

/* Moves the partitions of `src` whose token `pick` accepts into `dst`;
 * returns how many. */
static uint64_t move_parts(struct mem_store *src, struct mem_store *dst,
			   const struct storage_token_range *r, size_t n)
{
	uint64_t moved = 0;
	size_t keep = 0;
	for (size_t i = 0; i < src->nparts; i++) {
		int64_t t = storage_mutation_token(src->parts[i]);
		bool in = !r;
		for (size_t k = 0; r && k < n; k++)
			in = in || (t > r[k].left && t <= r[k].right);
		if (!in) {
			src->parts[keep++] = src->parts[i];
			continue;
		}
		mem_store_apply(dst, src->parts[i]);
		storage_mutation_delete(src->parts[i]);
		moved++;
	}
	src->nparts = keep;
	return moved;
}

static void mem_prepare(void *s, const uint8_t table_id[16],
			const struct storage_token_range *r, size_t n,
			const uint8_t session[16], uint64_t *marked,
			storage_done_fn done, void *arg)
{
	struct mnode *m = s;
	(void)table_id;
	m->pend.meta = m->rep.meta = m->store.meta;
	memcpy(m->pend_uuid, session, 16);
	*marked = move_parts(&m->store, &m->pend, r, n);
	done(arg, 0, ERR_NONE);
}

static void mem_finish(void *s, const uint8_t table_id[16],
		       const uint8_t session[16], int64_t repaired_at,
		       uint64_t *count, storage_done_fn done, void *arg)
{
	struct mnode *m = s;
	(void)table_id;
	*count = 0;
	if (m->finish_failures > 0) {
		m->finish_failures--;
		err_set(ERR_IO, "injected: repair state");
		done(arg, -1, ERR_IO);
		return;
	}
	if (!memcmp(m->pend_uuid, session, 16))
		*count = move_parts(&m->pend, repaired_at ? &m->rep : &m->store,
				    NULL, 0);
	done(arg, 0, ERR_NONE);
}

static void mem_scan_pending(void *s, const uint8_t table_id[16],
			     const uint8_t session[16], int64_t start,
			     int64_t end, repair_scan_each_fn each,
			     storage_done_fn done, void *arg)
{
	struct mnode *n = s;
	(void)table_id;
	ck_assert_int_lt(start, end);
	ck_assert(!memcmp(n->pend_uuid, session, 16));
	if (mem_store_scan(&n->pend, start, end, each, arg) != 0) {
		done(arg, -1, err_code());
		return;
	}
	done(arg, 0, ERR_NONE);
}

static void mem_apply_pending(void *s, const uint8_t table_id[16],
			      const uint8_t session[16],
			      struct storage_mutation **m, size_t n,
			      storage_done_fn done, void *arg)
{
	struct mnode *x = s;
	(void)table_id;
	ck_assert(!memcmp(x->pend_uuid, session, 16));
	for (size_t i = 0; i < n; i++) {
		mem_store_apply(&x->pend, m[i]);
		storage_mutation_delete(m[i]);
	}
	free(m);
	done(arg, 0, ERR_NONE);
}

static const struct repair_store_ops mem_ops = {
	.apply = mem_apply,
	.scan = mem_scan,
	.meta = mem_meta,
	.prepare = mem_prepare,
	.finish = mem_finish,
	.scan_pending = mem_scan_pending,
	.apply_pending = mem_apply_pending,
};

/* ---- the cluster --------------------------------------------------------- */

static void deliver(void *arg, const struct inet_addr *from, uint32_t verb,
		    const uint8_t *msg, size_t len)
{
	struct mnode *n = arg;
	repair_receive(n->repair, from, verb, msg, len);
}

static bool hook_alive(void *arg, const struct inet_addr *ep)
{
	struct mnode *n = arg;
	for (int i = 0; i < NNODES; i++)
		if (inet_addr_eq(&n->c->nodes[i].addr, ep))
			return !n->c->down[i];
	return false;
}

static int64_t hook_incarnation(void *arg, const struct inet_addr *ep)
{
	struct mnode *n = arg;
	for (int i = 0; i < NNODES; i++)
		if (inet_addr_eq(&n->c->nodes[i].addr, ep))
			return n->c->gen[i];
	return 0;
}

static void hook_locals_changed(void *arg)
{
	struct mnode *n = arg;
	buf_clear(&n->saved);
	ck_assert_int_eq(repair_locals_encode(n->repair, &n->saved), 0);
	n->saves++;
}

/* (Re)starts node i's repair service, as a restart of the node would,
 * with the participant sessions it last persisted. */
static void start_repair(struct cluster *c, int i)
{
	struct mnode *m = &c->nodes[i];
	struct repair_options o;
	repair_options_default(&o);
	o.self = m->addr;
	o.validate_timeout_ms = 5000;
	o.request_timeout_ms = 5000;
	o.message_bytes = 4096; /* several APPLY messages */
	o.is_alive = hook_alive;
	o.incarnation = hook_incarnation;
	o.alive_arg = m;
	o.locals_changed = hook_locals_changed;
	o.locals_arg = m;
	o.local_timeout_ms = c->local_timeout_ms;
	o.local_check_ms = 1000;
	m->repair = NULL;
	struct repair *r = repair_new(m->env, &o, &mem_ops, m);
	ck_assert_ptr_nonnull(r);
	if (m->saved.len) {
		struct buf b = m->saved; /* load may persist again */
		buf_init(&m->saved);
		m->repair = r;
		ck_assert_int_eq(repair_locals_load(r, b.data, b.len), 0);
		buf_free(&b);
	}
	m->repair = r;
}

/* ks.t (mem_store_table_new) on every node */
static struct cluster *cluster_new(void)
{
	struct cluster *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	c->sim = sim_new(g_seed, 1700000000000000LL);
	uint8_t id[16] = {0x4e, 0x9a};
	c->meta = mem_store_table_new(id);
	for (int i = 0; i < NNODES; i++) {
		struct mnode *m = &c->nodes[i];
		m->c = c;
		m->store.meta = c->meta;
		m->addr =
			(struct inet_addr){.family = INET_V4,
					   .ip = {127, 0, 9, (uint8_t)(i + 1)},
					   .port = 7000};
		m->env = sim_env_new(c->sim, &m->addr);
		env_set_receiver(m->env, deliver, m);
		start_repair(c, i);
	}
	return c;
}

static void cluster_delete(struct cluster *c)
{
	for (int i = 0; i < NNODES; i++) {
		repair_delete(c->nodes[i].repair);
		mem_store_clear(&c->nodes[i].store);
		mem_store_clear(&c->nodes[i].pend);
		mem_store_clear(&c->nodes[i].rep);
		buf_free(&c->nodes[i].saved);
	}
	sim_delete(c->sim);
	storage_table_meta_delete(c->meta);
	free(c);
}

/* ---- writes -------------------------------------------------------------- */

#define ON_ALL 7

static void key_of(int k, char *buf, size_t cap)
{
	snprintf(buf, cap, "key%05d", k);
}

static struct storage_mutation *mut(struct cluster *c, int k)
{
	char key[32];
	key_of(k, key, sizeof(key));
	struct storage_mutation *m =
		storage_mutation_new(c->meta, (uint8_t *)key, strlen(key));
	ck_assert_ptr_nonnull(m);
	return m;
}

static void set_ck(struct storage_mutation *m, int ck)
{
	uint8_t b[4];
	be32_store(b, (uint32_t)ck);
	struct slice s = slice_make(b, 4);
	ck_assert_int_eq(storage_mutation_set_row(m, &s, 1), 0);
}

static void noop_done(void *arg, int status, enum err_code code)
{
	(void)arg;
	ck_assert_int_eq(status, 0);
	(void)code;
}

/* Applies m on the nodes of `mask`; returns its encoded size. */
static size_t apply_on(struct cluster *c, int mask, struct storage_mutation *m)
{
	struct buf e;
	buf_init(&e);
	ck_assert_int_eq(storage_mutation_encode(m, &e), 0);
	size_t len = e.len;
	buf_free(&e);
	for (int i = 0; i < NNODES; i++)
		if (mask & (1 << i))
			ck_assert_int_eq(
				mem_apply(&c->nodes[i], m, noop_done, NULL), 0);
	storage_mutation_delete(m);
	return len;
}

/* Row (k, ck) = a ~100-byte value at ts on the nodes of `mask`. */
static size_t put_row(struct cluster *c, int mask, int k, int ck, int64_t ts)
{
	struct storage_mutation *m = mut(c, k);
	set_ck(m, ck);
	char v[100];
	memset(v, 'a' + (int)(ts % 26), sizeof(v));
	ck_assert_int_eq(storage_mutation_put_marker(m, ts, 0, 1700000000), 0);
	ck_assert_int_eq(storage_mutation_put(m, 2, NULL, 0, (uint8_t *)v,
					      sizeof(v), ts, 0, 1700000000),
			 0);
	return apply_on(c, mask, m);
}

static size_t delete_row(struct cluster *c, int mask, int k, int ck, int64_t ts)
{
	struct storage_mutation *m = mut(c, k);
	set_ck(m, ck);
	ck_assert_int_eq(storage_mutation_delete_row(m, ts, 1700000000), 0);
	return apply_on(c, mask, m);
}

static size_t delete_partition(struct cluster *c, int mask, int k, int64_t ts)
{
	struct storage_mutation *m = mut(c, k);
	ck_assert_int_eq(storage_mutation_delete_partition(m, ts, 1700000000),
			 0);
	return apply_on(c, mask, m);
}

#define NKEYS 300
#define NROWS 4

static void load(struct cluster *c)
{
	for (int k = 0; k < NKEYS; k++)
		for (int ck = 0; ck < NROWS; ck++)
			put_row(c, ON_ALL, k, ck, 1000);
}

/* ---- checks -------------------------------------------------------------- */

static bool part_equal(struct cluster *c, int k)
{
	char key[32];
	key_of(k, key, sizeof(key));
	struct slice ks = slice_make(key, strlen(key));
	uint8_t d0[16] = {0};
	for (int i = 0; i < NNODES; i++) {
		struct storage_mutation **p =
			mem_store_find(&c->nodes[i].store, ks);
		uint8_t d[16] = {0};
		if (p)
			storage_mutation_digest(*p, d);
		if (i == 0)
			memcpy(d0, d, 16);
		else if (memcmp(d, d0, 16))
			return false;
	}
	return true;
}

static int unequal_parts(struct cluster *c)
{
	int n = 0;
	for (int k = 0; k < NKEYS; k++)
		n += !part_equal(c, k);
	return n;
}

static uint64_t data_bytes(struct mnode *n)
{
	uint64_t b = 0;
	for (size_t i = 0; i < n->store.nparts; i++) {
		struct buf e;
		buf_init(&e);
		ck_assert_int_eq(storage_mutation_encode(n->store.parts[i], &e),
				 0);
		b += e.len;
		buf_free(&e);
	}
	return b;
}

/* ---- running a session --------------------------------------------------- */

static void on_progress(void *arg, const char *line)
{
	struct cluster *c = arg;
	c->progress_lines++;
	(void)line;
}

static void on_done(void *arg, const struct repair_summary *s)
{
	struct cluster *c = arg;
	ck_assert(!c->done);
	c->done = true;
	c->sum = *s;
	ck_assert_uint_eq(s->npeers, NNODES);
	memcpy(c->peers, s->peers, NNODES * sizeof(*c->peers));
	c->sum.peers = c->peers;
}

static bool is_done(void *arg)
{
	return ((struct cluster *)arg)->done;
}

static int start(struct cluster *c, int64_t st, int64_t et, bool preview)
{
	struct inet_addr reps[NNODES];
	for (int i = 0; i < NNODES; i++)
		reps[i] = c->nodes[i].addr;
	struct repair_table t = {.name = "ks.t"};
	memcpy(t.id, c->meta->id, 16);
	struct repair_range r = {
		.start = st, .end = et, .replicas = reps, .nreplicas = NNODES};
	struct repair_request q = {.tables = &t,
				   .ntables = 1,
				   .ranges = &r,
				   .nranges = 1,
				   .preview = preview,
				   .incremental = c->incremental,
				   .partial = c->partial};
	c->done = false;
	return repair_start(c->nodes[0].repair, &q, on_progress, on_done, c,
			    &c->session);
}

static void run(struct cluster *c, int64_t st, int64_t et, bool preview)
{
	ck_assert_int_eq(start(c, st, et, preview), 0);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
}

/* Rows streamed to node i. */
static uint64_t streamed(struct cluster *c, int i)
{
	for (size_t k = 0; k < c->sum.npeers; k++)
		if (inet_addr_eq(&c->peers[k].addr, &c->nodes[i].addr))
			return c->peers[k].rows_streamed;
	ck_abort_msg("no stats for node %d", i);
	return 0;
}

static uint64_t streamed_bytes(struct cluster *c)
{
	uint64_t b = 0;
	for (size_t k = 0; k < c->sum.npeers; k++)
		b += c->peers[k].bytes_streamed;
	return b;
}

/* The divergence of the header comment, on distinct partitions:
 *   keys 10..19  row ck 1 written to nodes 0, 1 only: node 2 lacks 10 rows
 *   keys 30..34  row ck 2 rewritten newer on nodes 0, 2: node 1 stale, 5
 *   keys 50..53  row ck 3 deleted on node 0 only: nodes 1, 2 lack 4 each
 *   key 70       partition deleted on node 1 only: nodes 0, 2 lack 1 each
 * Returns the divergent bytes: each divergent mutation's encoded size
 * times the replicas lacking it. */
static uint64_t diverge(struct cluster *c)
{
	uint64_t b = 0;
	for (int k = 10; k < 20; k++)
		b += put_row(c, 1 | 2, k, NROWS + 1, 2000);
	for (int k = 30; k < 35; k++)
		b += put_row(c, 1 | 4, k, 2, 2000);
	for (int k = 50; k < 54; k++)
		b += 2 * delete_row(c, 1, k, 3, 2000);
	b += 2 * delete_partition(c, 2, 70, 2000);
	return b;
}

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
		"stream throttle sim: %llu bytes at %llu B/s in %.1f s (virtual), "
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

struct other {
	bool done, ok;
	char error[256];
	uint64_t fetched[NNODES]; /* rows read from node i */
};

static void other_done(void *arg, const struct repair_summary *s)
{
	struct other *o = arg;
	o->done = true;
	o->ok = s->ok;
	for (size_t k = 0; k < s->npeers; k++)
		for (int i = 0; i < NNODES; i++)
			if (s->peers[k].addr.ip[3] == i + 1)
				o->fetched[i] = s->peers[k].rows_fetched;
	snprintf(o->error, sizeof(o->error), "%s", s->error);
}

static bool other_is_done(void *arg)
{
	return ((struct other *)arg)->done;
}

/* Node `from` starts a session over (st, et] among all three. */
static void start_other(struct cluster *c, int from, int64_t st, int64_t et,
			struct other *o)
{
	struct inet_addr reps[NNODES];
	for (int i = 0; i < NNODES; i++)
		reps[i] = c->nodes[i].addr;
	struct repair_table t = {.name = "ks.t"};
	memcpy(t.id, c->meta->id, 16);
	struct repair_range r = {
		.start = st, .end = et, .replicas = reps, .nreplicas = NNODES};
	struct repair_request q = {
		.tables = &t, .ntables = 1, .ranges = &r, .nranges = 1};
	memset(o, 0, sizeof(*o));
	ck_assert_int_eq(repair_start(c->nodes[from].repair, &q, NULL,
				      other_done, o, NULL),
			 0);
}

START_TEST(overlapping_sessions_of_two_coordinators_are_refused)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	/* node 0 repairs the ring; node 1, a moment later, a part of it */
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	sim_run_for(c->sim, 1000);
	struct other o;
	start_other(c, 1, INT64_MIN / 2, 0, &o);
	ck_assert(sim_run_until(c->sim, other_is_done, &o, 60ull * 1000000));
	ck_assert(!o.ok);
	char want[80];
	snprintf(want, sizeof(want),
		 "overlapping repair session %llu of 127.0.9.1",
		 (unsigned long long)c->session);
	ck_assert_msg(strstr(o.error, want), "%s", o.error);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_int_eq(unequal_parts(c), 0);
	/* once node 0's session is over (its RELEASE messages arrived),
	 * node 1's runs; so do two at once on disjoint ranges */
	sim_run_for(c->sim, 10000);
	start_other(c, 1, INT64_MIN / 2, 0, &o);
	ck_assert(sim_run_until(c->sim, other_is_done, &o, 60ull * 1000000));
	ck_assert_msg(o.ok, "%s", o.error);
	ck_assert_int_eq(start(c, 0, INT64_MAX / 2, false), 0);
	start_other(c, 1, INT64_MIN / 2, -1, &o);
	ck_assert(sim_run_until(c->sim, other_is_done, &o, 60ull * 1000000));
	ck_assert_msg(o.ok, "%s", o.error);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	cluster_delete(c);
}
END_TEST

/* Session ids follow the wall clock, so a restarted coordinator never
 * reuses one of its previous incarnation's (a replica keys claims and
 * release notes by coordinator and session). */
START_TEST(a_restarted_coordinator_never_reuses_a_session_id)
{
	struct cluster *c = cluster_new();
	load(c);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	uint64_t first = c->session;
	ck_assert_uint_ge(first, 1700000000000ull); /* the sim's epoch, ms */
	run(c, INT64_MIN, INT64_MIN, false);
	uint64_t second = c->session;
	ck_assert_uint_gt(second, first);
	repair_delete(c->nodes[0].repair);
	start_repair(c, 0);
	sim_run_for(c->sim, 1000);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_gt(c->session, second);
	cluster_delete(c);
}
END_TEST

START_TEST(cancel_fails_the_session_and_frees_its_ranges)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	ck_assert_int_eq(repair_cancel(c->nodes[0].repair, "x"), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	struct repair_status st;
	ck_assert_int_eq(repair_get_status(c->nodes[0].repair, &st), 0);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	sim_run_for(c->sim, 1000);
	ck_assert_int_eq(repair_get_status(c->nodes[0].repair, &st), 1);
	ck_assert_uint_eq(st.session, c->session);
	ck_assert_uint_eq(st.tasks, 1);
	ck_assert_uint_eq(st.task, 0);
	ck_assert_str_eq(st.table, "ks.t");
	ck_assert_uint_eq(st.npeers, NNODES);
	ck_assert_int_eq(repair_cancel(c->nodes[0].repair, "operator"), 0);
	ck_assert(c->done);
	ck_assert(!c->sum.ok);
	ck_assert_str_eq(c->sum.error, "cancelled: operator");
	ck_assert(!repair_running(c->nodes[0].repair));
	/* the claims went with it: another coordinator may repair now */
	sim_run_for(c->sim, 100000);
	struct other o;
	start_other(c, 1, INT64_MIN, INT64_MIN, &o);
	ck_assert(sim_run_until(c->sim, other_is_done, &o, 60ull * 1000000));
	ck_assert_msg(o.ok, "%s", o.error);
	ck_assert_int_eq(unequal_parts(c), 0);
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

START_TEST(killed_participant_fails_the_session)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	sim_env_kill(c->sim, c->nodes[2].env);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "timed out") &&
			      strstr(c->sum.error, "127.0.9.3"),
		      "%s", c->sum.error);
	/* nothing half done: node 0 and 1 still differ */
	ck_assert_int_eq(unequal_parts(c), 20);
	ck_assert(!repair_running(c->nodes[0].repair));
	cluster_delete(c);
}
END_TEST

START_TEST(participant_convicted_mid_session_fails_it_at_once)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	sim_run_for(c->sim, 2000);
	ck_assert(!c->done);
	sim_env_kill(c->sim, c->nodes[2].env);
	c->down[2] = true;
	uint64_t t0 = sim_now_us(c->sim);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	/* at the next check, well before the 5 s timeouts */
	ck_assert_uint_le(sim_now_us(c->sim) - t0, 1100000);
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "127.0.9.3") &&
			      strstr(c->sum.error, "went down"),
		      "%s", c->sum.error);
	cluster_delete(c);
}
END_TEST

/* Found by the node-loss-during-repair drill: node2 killed one second into
 * a repair and restarted before anyone convicted it; the coordinator
 * waited for the VALIDATE answer the old process took with it until the
 * validate timeout (10 minutes), and every repair on that node was
 * refused meanwhile. A new gossip generation fails the session at the next
 * check, as Cassandra's RepairSession does on a participant's restart. */
START_TEST(participant_restarted_mid_session_fails_it_at_once)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	for (int i = 0; i < NNODES; i++)
		c->gen[i] = 100;
	/* node 2 dies just as the session asks it for its tree (the old
	 * process takes the VALIDATE with it) and comes back 200 ms later
	 * with a new generation: the failure detector never sees it down */
	struct mnode *m = &c->nodes[2];
	sim_env_kill(c->sim, m->env);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	sim_run_for(c->sim, 200000);
	ck_assert(!c->done);
	repair_delete(m->repair);
	m->env = sim_env_new(c->sim, &m->addr);
	env_set_receiver(m->env, deliver, m);
	start_repair(c, 2);
	c->gen[2] = 101;
	uint64_t t0 = sim_now_us(c->sim);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	/* at the next check, well before the 5 s timeouts */
	ck_assert_uint_le(sim_now_us(c->sim) - t0, 1100000);
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "127.0.9.3") &&
			      strstr(c->sum.error, "restarted"),
		      "%s", c->sum.error);
	/* and a rerun with the restarted node repairs everything */
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_int_eq(unequal_parts(c), 0);
	cluster_delete(c);
}
END_TEST

START_TEST(participant_killed_mid_session_fails_it)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	/* a second session while one runs is refused */
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), -1);
	ck_assert_int_eq(err_code(), ERR_EXISTS);
	/* let the trees come back, then kill node 1 */
	sim_run_for(c->sim, 2000);
	sim_env_kill(c->sim, c->nodes[1].env);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "127.0.9.2"), "%s", c->sum.error);
	/* a rerun with node 1 dead fails the same way, cleanly */
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert(!c->sum.ok);
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

/* ---- incremental repair -------------------------------------------------- */

/* Whether every node's repaired data holds the same partitions. */
static bool repaired_equal(struct cluster *c)
{
	for (int i = 1; i < NNODES; i++) {
		struct mem_store *a = &c->nodes[0].rep, *b = &c->nodes[i].rep;
		if (a->nparts != b->nparts)
			return false;
		for (size_t k = 0; k < a->nparts; k++) {
			uint8_t d0[16], d1[16];
			storage_mutation_digest(a->parts[k], d0);
			storage_mutation_digest(b->parts[k], d1);
			if (memcmp(d0, d1, 16))
				return false;
		}
	}
	return true;
}

struct local_seen {
	int n;
	enum repair_local_state last;
	uint8_t uuid[16];
};

static void local_each(void *arg, const struct repair_local_info *l)
{
	struct local_seen *s = arg;
	s->n++;
	s->last = l->state;
	memcpy(s->uuid, l->uuid, 16);
}

static struct local_seen local_of(struct cluster *c, int i)
{
	struct local_seen s = {0};
	repair_local_list(c->nodes[i].repair, local_each, &s);
	return s;
}

START_TEST(incremental_repair_marks_repaired_and_a_second_finds_nothing)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	load(c);
	diverge(c);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert(c->sum.incremental);
	ck_assert_uint_eq(c->sum.marked, 3 * NKEYS);
	ck_assert_uint_eq(c->sum.repaired, 3 * NKEYS);
	ck_assert_uint_ge(c->sum.partitions, 3 * NKEYS - 3);
	ck_assert_int_gt(c->sum.repaired_at, 0);
	/* the divergent rows streamed as pending data, now repaired: every
	 * node holds everything repaired, nothing unrepaired or pending */
	ck_assert_uint_eq(streamed(c, 2), 10 + 4 + 1);
	for (int i = 0; i < NNODES; i++) {
		ck_assert_uint_eq(c->nodes[i].store.nparts, 0);
		ck_assert_uint_eq(c->nodes[i].pend.nparts, 0);
		ck_assert_uint_eq(c->nodes[i].rep.nparts, NKEYS);
		struct local_seen l = local_of(c, i);
		ck_assert_int_eq(l.n, 1);
		ck_assert_int_eq(l.last, REPAIR_LOCAL_FINALIZED);
		ck_assert(!memcmp(l.uuid, c->sum.uuid, 16));
	}
	ck_assert(repaired_equal(c));
	/* a finalized session cannot be failed any more */
	ck_assert_int_eq(repair_local_fail(c->nodes[1].repair, c->sum.uuid),
			 -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);

	/* a second one: nothing unrepaired, so nothing validated or sent */
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->sum.marked, 0);
	ck_assert_uint_eq(c->sum.partitions, 0);
	ck_assert_uint_eq(c->sum.mismatched_ranges, 0);
	ck_assert_uint_eq(c->sum.rows_hashed, 0);
	for (int i = 0; i < NNODES; i++)
		ck_assert_uint_eq(streamed(c, i), 0);

	/* new writes node 2 missed: only they are validated and stream */
	for (int k = 0; k < 5; k++)
		put_row(c, 1 | 2, k, NROWS + 2, 3000);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->sum.marked, 2 * 5);
	ck_assert_uint_eq(streamed(c, 2), 5);
	ck_assert_uint_eq(streamed(c, 0) + streamed(c, 1), 0);
	for (int i = 0; i < NNODES; i++) {
		ck_assert_uint_eq(c->nodes[i].store.nparts, 0);
		ck_assert_uint_eq(c->nodes[i].pend.nparts, 0);
	}
	ck_assert(repaired_equal(c));
	cluster_delete(c);
}
END_TEST

START_TEST(incremental_subrange_marks_only_its_range)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	load(c);
	run(c, -100, INT64_MAX / 2, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	for (int i = 0; i < NNODES; i++) {
		struct mnode *m = &c->nodes[i];
		ck_assert_uint_gt(m->rep.nparts, 0);
		ck_assert_uint_gt(m->store.nparts, 0);
		ck_assert_uint_eq(m->rep.nparts + m->store.nparts, NKEYS);
		for (size_t k = 0; k < m->rep.nparts; k++) {
			int64_t t = storage_mutation_token(m->rep.parts[k]);
			ck_assert(t > -100 && t <= INT64_MAX / 2);
		}
	}
	cluster_delete(c);
}
END_TEST

START_TEST(failed_incremental_session_leaves_nothing_repaired)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	load(c);
	diverge(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	sim_run_for(c->sim, 2000);
	ck_assert(!c->done);
	sim_env_kill(c->sim, c->nodes[2].env);
	c->down[2] = true;
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "127.0.9.3"), "%s", c->sum.error);
	sim_run_for(c->sim, 100000); /* the FAILs arrive */
	for (int i = 0; i < 2; i++) {
		struct mnode *m = &c->nodes[i];
		ck_assert_uint_eq(m->rep.nparts, 0);
		ck_assert_uint_eq(m->pend.nparts, 0);
		ck_assert_uint_eq(m->store.nparts, NKEYS);
		struct local_seen l = local_of(c, i);
		ck_assert_int_eq(l.last, REPAIR_LOCAL_FAILED);
	}
	cluster_delete(c);
}
END_TEST

START_TEST(a_participant_cancels_a_stuck_incremental_session)
{
	/* the coordinator dies after PREPARE: the participants keep their
	 * data pending until repair_admin cancel fails the session */
	struct cluster *c = cluster_new();
	c->incremental = true;
	load(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	for (int t = 0;
	     t < 1000 && local_of(c, 1).last != REPAIR_LOCAL_REPAIRING; t++)
		sim_run_for(c->sim, 100);
	sim_env_kill(c->sim, c->nodes[0].env);
	sim_run_for(c->sim, 100000);
	struct local_seen l = local_of(c, 1);
	ck_assert(l.last == REPAIR_LOCAL_PREPARED ||
		  l.last == REPAIR_LOCAL_REPAIRING);
	ck_assert_uint_eq(c->nodes[1].pend.nparts, NKEYS);
	ck_assert_int_eq(repair_local_fail(c->nodes[1].repair, l.uuid), 0);
	ck_assert_int_eq(local_of(c, 1).last, REPAIR_LOCAL_FAILED);
	ck_assert_uint_eq(c->nodes[1].pend.nparts, 0);
	ck_assert_uint_eq(c->nodes[1].store.nparts, NKEYS);
	uint8_t none[16] = {1};
	ck_assert_int_eq(repair_local_fail(c->nodes[1].repair, none), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	cluster_delete(c);
}
END_TEST

/* Restarts node i (a new process: the same data, its persisted sessions). */
static void restart_node(struct cluster *c, int i)
{
	struct mnode *m = &c->nodes[i];
	repair_delete(m->repair);
	sim_env_kill(c->sim, m->env);
	m->env = sim_env_new(c->sim, &m->addr);
	env_set_receiver(m->env, deliver, m);
	c->gen[i]++;
	start_repair(c, i);
}

/* The coordinator dies after PREPARE; the participant restarts: its
 * session and pending data survive the restart (persisted), and the
 * timeout then fails it: its data is unrepaired, never left pending. */
START_TEST(a_session_whose_coordinator_vanished_survives_a_restart_and_times_out)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	c->local_timeout_ms = 30000;
	for (int i = 0; i < NNODES; i++) {
		c->gen[i] = 100;
		restart_node(c, i); /* the timeout set */
	}
	load(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	for (int t = 0;
	     t < 1000 && local_of(c, 1).last != REPAIR_LOCAL_REPAIRING; t++)
		sim_run_for(c->sim, 100);
	sim_env_kill(c->sim, c->nodes[0].env);
	c->down[0] = true;
	sim_run_for(c->sim, 1000000);
	ck_assert_uint_eq(c->nodes[1].pend.nparts, NKEYS);
	ck_assert_int_gt(c->nodes[1].saves, 0);
	restart_node(c, 1);
	struct local_seen l = local_of(c, 1);
	ck_assert_int_eq(l.n, 1);
	ck_assert(l.last == REPAIR_LOCAL_PREPARED ||
		  l.last == REPAIR_LOCAL_REPAIRING);
	ck_assert_uint_eq(c->nodes[1].pend.nparts, NKEYS);
	/* before the timeout it waits: the coordinator may come back */
	sim_run_for(c->sim, 10ull * 1000000);
	ck_assert_uint_eq(c->nodes[1].pend.nparts, NKEYS);
	sim_run_for(c->sim, 30ull * 1000000);
	ck_assert_int_eq(local_of(c, 1).last, REPAIR_LOCAL_FAILED);
	ck_assert_uint_eq(c->nodes[1].pend.nparts, 0);
	ck_assert_uint_eq(c->nodes[1].store.nparts, NKEYS);
	ck_assert_uint_eq(c->nodes[1].rep.nparts, 0);
	/* and the failure is persisted: another restart keeps it failed */
	restart_node(c, 1);
	ck_assert_int_eq(local_of(c, 1).last, REPAIR_LOCAL_FAILED);
	cluster_delete(c);
}
END_TEST

/* A coordinator that restarts (a new gossip generation) forgot its
 * session: its participants fail it at the next check. */
START_TEST(a_restarted_coordinator_fails_its_participants_sessions)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	for (int i = 0; i < NNODES; i++)
		c->gen[i] = 100;
	load(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	for (int t = 0;
	     t < 1000 && local_of(c, 1).last != REPAIR_LOCAL_REPAIRING; t++)
		sim_run_for(c->sim, 100);
	sim_env_kill(c->sim, c->nodes[0].env);
	c->gen[0]++;
	sim_run_for(c->sim, 2000000);
	for (int i = 1; i < NNODES; i++) {
		ck_assert_int_eq(local_of(c, i).last, REPAIR_LOCAL_FAILED);
		ck_assert_uint_eq(c->nodes[i].pend.nparts, 0);
		ck_assert_uint_eq(c->nodes[i].store.nparts, NKEYS);
	}
	cluster_delete(c);
}
END_TEST

/* A participant whose COMMIT fails on its table (EIO) still finalizes
 * the session (it promised), and retries the table at the next checks
 * until its data is repaired; through a restart too. */
START_TEST(a_commit_that_failed_is_retried_until_settled)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	load(c);
	c->nodes[1].finish_failures = 2;
	run(c, INT64_MIN, INT64_MIN, false);
	/* the coordinator reports it; the others are repaired */
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "finalize commit failed on "
					   "127.0.9.2"),
		      "%s", c->sum.error);
	struct mnode *m = &c->nodes[1];
	ck_assert_int_eq(local_of(c, 1).last, REPAIR_LOCAL_FINALIZED);
	ck_assert_uint_eq(m->pend.nparts, NKEYS);
	ck_assert_uint_eq(c->nodes[0].rep.nparts, NKEYS);
	ck_assert_uint_eq(c->nodes[2].rep.nparts, NKEYS);
	/* a restart keeps it unsettled: the load retries (and fails) */
	restart_node(c, 1);
	ck_assert_int_eq(m->finish_failures, 0);
	ck_assert_uint_eq(m->pend.nparts, NKEYS);
	sim_run_for(c->sim, 1100000); /* the next check's retry */
	ck_assert_uint_eq(m->pend.nparts, 0);
	ck_assert_uint_eq(m->rep.nparts, NKEYS);
	ck_assert_int_eq(local_of(c, 1).last, REPAIR_LOCAL_FINALIZED);
	/* settled: nothing more is retried */
	int saves = m->saves;
	sim_run_for(c->sim, 3000000);
	ck_assert_int_eq(m->saves, saves);
	cluster_delete(c);
}
END_TEST

/* A finalized session, persisted, stays finalized through a restart;
 * a corrupt image is refused whole. */
START_TEST(finalized_sessions_survive_a_restart)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	load(c);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	restart_node(c, 2);
	struct local_seen l = local_of(c, 2);
	ck_assert_int_eq(l.n, 1);
	ck_assert_int_eq(l.last, REPAIR_LOCAL_FINALIZED);
	ck_assert(!memcmp(l.uuid, c->sum.uuid, 16));
	ck_assert_uint_eq(c->nodes[2].rep.nparts, NKEYS);
	struct buf *b = &c->nodes[2].saved;
	for (size_t cut = 0; cut < b->len; cut++)
		ck_assert_int_eq(repair_locals_load(c->nodes[2].repair,
						    b->data, cut),
				 -1);
	ck_assert_int_eq(local_of(c, 2).n, 1);
	cluster_delete(c);
}
END_TEST

/* -dc/-hosts: the session syncs the pending data but marks nothing
 * repaired (Cassandra's repairedAt only for global repairs) */
START_TEST(partial_incremental_repair_marks_nothing_repaired)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	c->partial = true;
	load(c);
	diverge(c);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert(c->sum.partial);
	ck_assert_uint_eq(streamed(c, 2), 10 + 4 + 1);
	for (int i = 0; i < NNODES; i++) {
		ck_assert_uint_eq(c->nodes[i].rep.nparts, 0);
		ck_assert_uint_eq(c->nodes[i].pend.nparts, 0);
		ck_assert_uint_eq(c->nodes[i].store.nparts, NKEYS);
	}
	ck_assert_int_eq(unequal_parts(c), 0);
	cluster_delete(c);
}
END_TEST

START_TEST(incremental_preview_is_refused)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, true), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	cluster_delete(c);
}
END_TEST

/* repair_state_list: the states of the sessions this node coordinated
 * (system_views.repairs), each step's time in order, and the counts the
 * metrics endpoint reads; an unlisted session (a movement's) is neither. */
struct states_seen {
	int n;
	struct repair_state_info last;
	char error[256];
	size_t nparticipants;
};

static void each_state(void *arg, const struct repair_state_info *s)
{
	struct states_seen *w = arg;
	w->n++;
	w->last = *s;
	w->nparticipants = s->nparticipants;
	snprintf(w->error, sizeof(w->error), "%s", s->error ? s->error : "");
}

static void check_steps(const struct repair_state_info *s)
{
	for (int k = 0; k < REPAIR_STEP_COUNT; k++) {
		ck_assert_int_gt(s->steps_ms[k], 0);
		if (k)
			ck_assert_int_ge(s->steps_ms[k], s->steps_ms[k - 1]);
	}
	ck_assert_int_le(s->init_ms, s->steps_ms[0]);
	ck_assert_int_ge(s->updated_ms, s->steps_ms[REPAIR_STEP_COUNT - 1]);
}

static struct states_seen states_of(struct repair *r)
{
	struct states_seen w = {0};
	repair_state_list(r, each_state, &w);
	return w;
}

START_TEST(session_states_and_counts)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	struct repair *r = c->nodes[0].repair;
	ck_assert_int_eq(states_of(r).n, 0);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	struct states_seen w = states_of(r);
	ck_assert_int_eq(w.n, 1);
	ck_assert_uint_eq(w.last.session, c->session);
	ck_assert_uint_eq(w.last.command, 1);
	ck_assert_int_eq(w.last.result, REPAIR_RESULT_SUCCESS);
	ck_assert(!w.last.incremental && !w.last.preview);
	ck_assert_uint_eq(w.last.tasks_done, 1);
	ck_assert_uint_eq(w.last.ntables, 1);
	ck_assert_str_eq(w.last.tables[0], "ks.t");
	ck_assert_uint_eq(w.last.nranges, 1);
	ck_assert_uint_eq(w.last.ranges[0].nreplicas, NNODES);
	ck_assert_uint_eq(w.nparticipants, NNODES);
	check_steps(&w.last);
	/* a full repair prepares nothing: its prepare steps are its start */
	ck_assert_int_eq(w.last.steps_ms[REPAIR_STEP_PREPARE_COMPLETE],
			 w.last.steps_ms[REPAIR_STEP_START]);
	struct repair_counts n;
	repair_get_counts(r, &n);
	ck_assert_uint_eq(n.succeeded[0], 1);
	ck_assert_uint_eq(n.failed[0], 0);
	ck_assert_uint_eq(n.bytes_streamed, streamed_bytes(c));
	ck_assert_uint_gt(n.bytes_streamed, 0);
	ck_assert(!n.running);

	/* incremental: PREPARE before the tasks */
	c->incremental = true;
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	w = states_of(r);
	ck_assert_int_eq(w.n, 2);
	ck_assert(w.last.incremental);
	ck_assert_uint_eq(w.last.command, 2);
	check_steps(&w.last);
	repair_get_counts(r, &n);
	ck_assert_uint_eq(n.succeeded[1], 1);

	/* a cancelled one fails, with its error; it counted as running */
	c->incremental = false;
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	repair_get_counts(r, &n);
	ck_assert(n.running);
	w = states_of(r);
	ck_assert_int_eq(w.last.result, REPAIR_RESULT_NONE);
	ck_assert_int_gt(w.last.steps_ms[REPAIR_STEP_REPAIR_START], 0);
	ck_assert_int_eq(w.last.steps_ms[REPAIR_STEP_REPAIR_COMPLETE], 0);
	ck_assert_int_eq(repair_cancel(r, "by the test"), 0);
	ck_assert(c->done && !c->sum.ok);
	w = states_of(r);
	ck_assert_int_eq(w.n, 3);
	ck_assert_int_eq(w.last.result, REPAIR_RESULT_FAILURE);
	ck_assert_msg(strstr(w.error, "by the test"), "%s", w.error);
	repair_get_counts(r, &n);
	ck_assert_uint_eq(n.failed[0], 1);
	ck_assert(!n.running);

	/* an unlisted session (a movement's streaming) is not a repair */
	struct inet_addr reps[NNODES];
	for (int i = 0; i < NNODES; i++)
		reps[i] = c->nodes[i].addr;
	struct repair_table t = {.name = "ks.t"};
	memcpy(t.id, c->meta->id, 16);
	struct repair_range rr = {.start = INT64_MIN,
				  .end = INT64_MIN,
				  .replicas = reps,
				  .nreplicas = NNODES};
	struct repair_request q = {.tables = &t,
				   .ntables = 1,
				   .ranges = &rr,
				   .nranges = 1,
				   .unlisted = true};
	c->done = false;
	ck_assert_int_eq(
		repair_start(r, &q, on_progress, on_done, c, &c->session), 0);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert_int_eq(states_of(r).n, 3);
	repair_get_counts(r, &n);
	ck_assert_uint_eq(n.succeeded[0] + n.failed[0], 2);
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
	tcase_add_test(tc,
		       overlapping_sessions_of_two_coordinators_are_refused);
	tcase_add_test(tc, cancel_fails_the_session_and_frees_its_ranges);
	tcase_add_test(tc, a_restarted_coordinator_never_reuses_a_session_id);
	tcase_add_test(tc, subrange_repair_touches_only_its_range);
	tcase_add_test(tc, killed_participant_fails_the_session);
	tcase_add_test(tc, participant_killed_mid_session_fails_it);
	tcase_add_test(tc, participant_convicted_mid_session_fails_it_at_once);
	tcase_add_test(tc, participant_restarted_mid_session_fails_it_at_once);
	tcase_add_test(tc, exchange_finds_exactly_the_differing_leaves);
	tcase_add_test(tc, tree_traffic_is_bounded_by_differing_leaves);
	tcase_add_test(
		tc,
		versions_are_fetched_from_the_coordinator_when_it_holds_them);
	tcase_add_test(tc, kept_trees_are_freed_on_release_and_failure);
	tcase_add_test(tc, kept_trees_of_a_dead_coordinator_expire);
	tcase_add_test(tc, sessions_move_a_whole_range_to_an_empty_replica);
	tcase_add_test(
		tc,
		incremental_repair_marks_repaired_and_a_second_finds_nothing);
	tcase_add_test(tc, incremental_subrange_marks_only_its_range);
	tcase_add_test(tc, failed_incremental_session_leaves_nothing_repaired);
	tcase_add_test(tc, a_participant_cancels_a_stuck_incremental_session);
	tcase_add_test(tc, incremental_preview_is_refused);
	tcase_add_test(
		tc,
		a_session_whose_coordinator_vanished_survives_a_restart_and_times_out);
	tcase_add_test(tc,
		       a_restarted_coordinator_fails_its_participants_sessions);
	tcase_add_test(tc, finalized_sessions_survive_a_restart);
	tcase_add_test(tc, a_commit_that_failed_is_retried_until_settled);
	tcase_add_test(tc, partial_incremental_repair_marks_nothing_repaired);
	tcase_add_test(tc, session_states_and_counts);
	suite_add_tcase(s, tc);
	return test_run(s);
}
