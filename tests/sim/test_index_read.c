/*
 * Indexed range reads in the simulator (docs/indexes.md, "Indexed range
 * reads"): replicas answer with their index's candidates only, and
 * replica filtering protection reads every partition one contact returned
 * and another did not from that other before the merge, so a replica
 * whose newer value no longer matches (or that deleted the partition)
 * wins over a stale replica's index match.
 *
 * The store's index (coord_cluster.c, mem_index_scan) lists the
 * partitions whose live `v` is the value as that replica holds them: a
 * replica that missed an overwrite lists the partition under its old
 * value, as a real index with a missed write does.
 */
#include "tests/sim/coord_cluster.h"

#include "common/err.h"
#include "tests/lib/testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_seed;

/* What a walk found: per key, the value the merged fragment resolves to
 * ("" for a deleted partition). */
#define MAXK 64
struct found {
	int n;
	char keys[MAXK][16];
	char vals[MAXK][16];
	int steps;
};

static const char *found_val(const struct found *f, const char *key)
{
	for (int i = 0; i < f->n; i++)
		if (strcmp(f->keys[i], key) == 0)
			return f->vals[i];
	return NULL;
}

/* The rows the coordinator would send: partitions whose merged value
 * is `want` (its re-check of the restriction). */
static int matching(const struct found *f, const char *want)
{
	int m = 0;
	for (int i = 0; i < f->n; i++)
		m += strcmp(f->vals[i], want) == 0;
	return m;
}

/* The restriction v = `value` (`val` holds its value). */
static struct repl_index_expr v_is(struct slice *val, const char *value)
{
	*val = slice_make((const uint8_t *)value, strlen(value));
	return (struct repl_index_expr){
		.name = "t_v_idx", .vals = val, .n_vals = 1};
}

/* An indexed (ix; NULL: none), merged step over the whole ring. */
static struct repl_range indexed(struct simc *c, const struct ring_strategy *s,
				 int cl, const struct storage_read_cmd *cmd,
				 uint32_t max, bool read_repair,
				 const struct repl_index_expr *ix)
{
	struct repl_range q = whole_ring_range(c, s, cl, cmd, max);
	q.read_repair = read_repair;
	q.index = ix;
	q.merge = true;
	return q;
}

/* A walk of the whole ring from `coord` at `cl` with the restriction
 * v = `value` (NULL: none), `max` partitions a step, merged pieces. */
static void walk(struct simc *c, int coord, const struct ring_strategy *s,
		 int cl, const char *value, uint32_t max, struct found *out)
{
	memset(out, 0, sizeof(*out));
	struct slice val;
	struct repl_index_expr ix = v_is(&val, value ? value : "");
	int64_t start = INT64_MIN, last = INT64_MIN;
	for (;; out->steps++) {
		struct range_out o;
		struct storage_read_cmd cmd = {.with_static = true};
		struct repl_range q =
			indexed(c, s, cl, &cmd, max, true, value ? &ix : NULL);
		q.start = start;
		run_range_step(c, coord, &q, &o);
		ck_assert_int_eq(o.res.outcome, REPL_OK);
		for (size_t i = 0; i < o.n; i++) {
			int64_t t = storage_mutation_token(o.f[i]);
			ck_assert(t >= last);
			last = t;
			ck_assert_int_lt(out->n, MAXK);
			struct slice k = storage_mutation_key(o.f[i]);
			snprintf(out->keys[out->n], 16, "%.*s", (int)k.len,
				 (const char *)k.ptr);
			int64_t ts;
			frag_value(c, o.f[i], out->vals[out->n], 16, &ts);
			out->n++;
			storage_mutation_delete(o.f[i]);
		}
		free(o.f);
		ck_assert_int_lt(out->steps, 1000);
		if (o.finished)
			break;
		ck_assert(o.resume > start);
		start = o.resume;
	}
	out->steps++;
}

static uint64_t protection_reads(struct simc *c)
{
	uint64_t n = 0;
	for (int i = 0; i < c->n; i++) {
		struct repl_stats st;
		repl_get_stats(c->nodes[i].repl, &st);
		n += st.protection_reads;
	}
	return n;
}

static uint64_t protection_messages(struct simc *c)
{
	uint64_t n = 0;
	for (int i = 0; i < c->n; i++) {
		struct repl_stats st;
		repl_get_stats(c->nodes[i].repl, &st);
		n += st.protection_messages;
	}
	return n;
}

/* One indexed step v = `value` over the whole ring from `coord`. */
static void step(struct simc *c, int coord, const struct ring_strategy *s,
		 int cl, const char *value, bool read_repair,
		 struct range_out *o)
{
	struct slice val;
	struct repl_index_expr ix = v_is(&val, value);
	struct storage_read_cmd cmd = {.with_static = true};
	struct repl_range q = indexed(c, s, cl, &cmd, 4000, read_repair, &ix);
	run_range_step(c, coord, &q, o);
}

/* The partitions of a step's answer whose merged value is `want`; frees
 * the answer. */
static int step_matching(struct simc *c, struct range_out *o, const char *want)
{
	int m = 0;
	for (size_t i = 0; i < o->n; i++) {
		char v[16];
		int64_t ts;
		frag_value(c, o->f[i], v, sizeof(v), &ts);
		m += strcmp(v, want) == 0;
	}
	range_out_free(o);
	return m;
}

static struct storage_mutation *make_delete(struct simc *c, const char *key,
					    int64_t ts)
{
	struct storage_mutation *m = storage_mutation_new(
		c->meta, (const uint8_t *)key, strlen(key));
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(storage_mutation_delete_partition(m, ts, ts / 1000000),
			 0);
	return m;
}

/* The value node i holds for key ("" when deleted, NULL when absent). */
static const char *held(struct simc *c, int i, const char *key, char *buf)
{
	struct storage_mutation *probe = make_write(c, key, "x", 1);
	struct part *p = find_part(&c->nodes[i], probe);
	storage_mutation_delete(probe);
	if (!p)
		return NULL;
	int64_t ts;
	frag_value(c, p->frag, buf, 16, &ts);
	return buf;
}

enum { N = 20, STALE = 5 };

/* k0..k19 = 'red' everywhere; then nodes 1 and 2 (not 0) get k0..k4 =
 * 'blue' and a deletion of k5: node 0's index still lists k0..k5 under
 * 'red'. */
static struct simc *stale_cluster(uint64_t seed, struct ring_strategy **s)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(seed, 3, dcs);
	*s = simple(3);
	for (int i = 0; i < N; i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", i);
		struct outcome o =
			do_write(c, 0, *s, REPL_CL_ALL, key, "red", 10);
		ck_assert_int_eq(o.res.outcome, REPL_OK);
	}
	for (int i = 0; i <= STALE; i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", i);
		struct storage_mutation *m =
			i < STALE ? make_write(c, key, "blue", 20)
				  : make_delete(c, key, 20);
		simc_apply(c, 1, m);
		simc_apply(c, 2, m);
		storage_mutation_delete(m);
	}
	return c;
}

static void check_no_resurrection(const struct found *f)
{
	for (int i = 0; i <= STALE; i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", i);
		const char *v = found_val(f, key);
		/* returned or not, never as its stale 'red' */
		ck_assert_msg(!v || strcmp(v, "red") != 0,
			      "%s resurrected as red", key);
	}
	ck_assert_int_eq(matching(f, "red"), N - STALE - 1);
}

/* The stale replica is the coordinator itself (it returns k0..k5 from
 * its own index) and the contacts that did not return them are read. */
START_TEST(stale_index_match_on_the_coordinator_loses)
{
	struct ring_strategy *s;
	struct simc *c = stale_cluster(g_seed, &s);
	int cls[2] = {REPL_CL_QUORUM, REPL_CL_ALL};
	for (int k = 0; k < 2; k++) {
		struct found f;
		uint64_t before = protection_reads(c);
		walk(c, 0, s, cls[k], "red", 1000, &f);
		check_no_resurrection(&f);
		if (k == 0) /* read repair: node 0 holds the new versions */
			ck_assert_uint_ge(protection_reads(c) - before,
					  STALE + 1);
		char buf[16];
		ck_assert_str_eq(held(c, 0, "k0", buf), "blue");
		ck_assert_str_eq(held(c, 0, "k5", buf), "");
	}
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* The stale replica is a remote contact: the coordinator's own store is
 * read for what it did not return. */
START_TEST(stale_index_match_on_a_remote_replica_loses)
{
	struct ring_strategy *s;
	struct simc *c = stale_cluster(g_seed + 1, &s);
	for (int coord = 1; coord <= 2; coord++) {
		struct found f;
		walk(c, coord, s, REPL_CL_ALL, "red", 1000, &f);
		check_no_resurrection(&f);
	}
	/* the new value is found by its own index, everywhere now */
	struct found f;
	walk(c, 0, s, REPL_CL_ALL, "blue", 1000, &f);
	ck_assert_int_eq(matching(&f, "blue"), STALE);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* Small steps (max 2 partitions): a cut contact bounds what is protected
 * and merged, and the walk resumes past it; still no resurrection. */
START_TEST(protection_with_cut_steps)
{
	struct ring_strategy *s;
	struct simc *c = stale_cluster(g_seed + 2, &s);
	struct found f;
	walk(c, 0, s, REPL_CL_QUORUM, "red", 2, &f);
	check_no_resurrection(&f);
	ck_assert_int_gt(f.steps, 3);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* Replicas that agree: each answers with its candidates only, nothing is
 * read twice, and one step covers the ring (RF 3 on 3 nodes: one piece). */
START_TEST(agreeing_replicas_read_candidates_only)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(g_seed + 3, 3, dcs);
	struct ring_strategy *s = simple(3);
	for (int i = 0; i < 40; i++) {
		char key[16];
		snprintf(key, sizeof(key), "p%d", i);
		struct outcome o = do_write(c, i % 3, s, REPL_CL_ALL, key,
					    i % 4 ? "other" : "hit", 10 + i);
		ck_assert_int_eq(o.res.outcome, REPL_OK);
	}
	struct found f;
	walk(c, 0, s, REPL_CL_QUORUM, "hit", 1000, &f);
	ck_assert_int_eq(f.n, 10); /* only the candidates came back */
	ck_assert_int_eq(matching(&f, "hit"), 10);
	ck_assert_int_eq(f.steps, 1);
	ck_assert_uint_eq(protection_reads(c), 0);
	int scans = 0;
	for (int i = 0; i < 3; i++)
		scans += c->nodes[i].index_scans;
	ck_assert_int_eq(scans, 2); /* QUORUM: two contacts, one step */
	/* without a restriction the same walk reads every partition */
	walk(c, 0, s, REPL_CL_QUORUM, NULL, 1000, &f);
	ck_assert_int_eq(f.n, 40);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* Every index scan may read an index's rows alone (docs/indexes.md, "Row
 * positions"): at ONE, QUORUM and ALL (replica filtering protection
 * compares the answers row by row, test_index_rows_sim); with RF 1 (most
 * ranges' one replica remote: the flag crosses the wire in
 * IndexExpr.rows) too. */
START_TEST(every_index_scan_may_read_rows_alone)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(g_seed + 11, 3, dcs);
	struct ring_strategy *s = simple(3);
	for (int i = 0; i < 20; i++) {
		char key[16];
		snprintf(key, sizeof(key), "p%d", i);
		struct outcome o = do_write(c, i % 3, s, REPL_CL_ALL, key,
					    i % 4 ? "other" : "hit", 10 + i);
		ck_assert_int_eq(o.res.outcome, REPL_OK);
	}
	int cls[3] = {REPL_CL_QUORUM, REPL_CL_ALL, REPL_CL_ONE};
	for (int k = 0; k < 3; k++) {
		for (int coord = 0; coord < 3; coord++) {
			for (int i = 0; i < 3; i++)
				c->nodes[i].index_scans =
					c->nodes[i].row_scans = 0;
			struct found f;
			walk(c, coord, s, cls[k], "hit", 1000, &f);
			ck_assert_int_eq(matching(&f, "hit"), 5);
			int scans = 0, rows = 0;
			for (int i = 0; i < 3; i++) {
				scans += c->nodes[i].index_scans;
				rows += c->nodes[i].row_scans;
			}
			ck_assert_int_gt(scans, 0);
			ck_assert_int_eq(rows, scans);
		}
	}
	ring_strategy_delete(s);
	s = simple(1);
	for (int i = 0; i < 20; i++) {
		char key[16];
		snprintf(key, sizeof(key), "r%d", i);
		struct outcome o = do_write(c, i % 3, s, REPL_CL_ONE, key,
					    i % 4 ? "other" : "hot", 10 + i);
		ck_assert_int_eq(o.res.outcome, REPL_OK);
	}
	for (int coord = 0; coord < 3; coord++) {
		for (int i = 0; i < 3; i++)
			c->nodes[i].index_scans = c->nodes[i].row_scans = 0;
		struct found f;
		walk(c, coord, s, REPL_CL_QUORUM, "hot", 1000, &f);
		ck_assert_int_eq(matching(&f, "hot"), 5);
		int scans = 0, rows = 0, remote = 0;
		for (int i = 0; i < 3; i++) {
			scans += c->nodes[i].index_scans;
			rows += c->nodes[i].row_scans;
			remote += i != coord ? c->nodes[i].index_scans : 0;
		}
		ck_assert_int_gt(remote, 0);
		ck_assert_int_eq(rows, scans);
	}
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A replica that does not know the restriction (an older node) answers
 * with its whole range: the others are read for those partitions, and
 * the merged answer is still right once re-checked. */
START_TEST(a_replica_without_index_reads_is_still_right)
{
	struct ring_strategy *s;
	struct simc *c = stale_cluster(g_seed + 4, &s);
	c->nodes[1].no_index = true;
	struct found f;
	walk(c, 0, s, REPL_CL_ALL, "red", 1000, &f);
	check_no_resurrection(&f);
	ck_assert_int_eq(f.n, N); /* node 1 sent every partition */
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A replica whose index is still being built refuses the indexed read:
 * the coordinator answers ReadFailure with Cassandra's message naming it,
 * never the other replicas' rows alone; an unindexed walk still reads. */
START_TEST(a_replica_building_its_index_fails_the_read)
{
	struct ring_strategy *s;
	struct simc *c = stale_cluster(g_seed + 6, &s);
	c->nodes[1].index_building = true;
	int cls[2] = {REPL_CL_ALL, REPL_CL_QUORUM};
	for (int k = 0; k < 2; k++) {
		for (int coord = 0; coord < 3; coord++) {
			struct slice val;
			struct repl_index_expr ix = v_is(&val, "red");
			struct range_out o;
			struct storage_read_cmd cmd = {.with_static = true};
			struct repl_range q =
				indexed(c, s, cls[k], &cmd, 1000, true, &ix);
			run_range_step(c, coord, &q, &o);
			if (o.res.outcome == REPL_OK) {
				/* QUORUM from a coordinator that did not
				 * contact node 1 */
				ck_assert_int_eq(cls[k], REPL_CL_QUORUM);
				range_out_free(&o);
				continue;
			}
			ck_assert_int_eq(o.res.outcome, REPL_READ_FAILURE);
			char want[128];
			char addr[INET_ADDR_STRLEN];
			inet_addr_format(&c->nodes[1].addr, addr, sizeof(addr));
			snprintf(want, sizeof(want),
				 "failures: INDEX_NOT_AVAILABLE from /%s",
				 addr);
			ck_assert_msg(strstr(o.res.msg,
					     "Operation failed - "
					     "received ") == o.res.msg &&
					      strstr(o.res.msg, want),
				      "message: %s", o.res.msg);
			ck_assert_int_eq(o.n, 0);
			/* the reason map's entry: RequestFailureReason's
			 * INDEX_NOT_AVAILABLE from that replica */
			ck_assert_uint_eq(o.res.n_failed, 1);
			ck_assert(names_failure(
				c, &o.res, 1,
				REPL_FAILURE_INDEX_NOT_AVAILABLE));
		}
	}
	struct found f;
	walk(c, 0, s, REPL_CL_ALL, NULL, 1000, &f); /* no index: reads */
	ck_assert_int_eq(f.n, N);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* Pieces: with RF 1 on 4 nodes adjacent vnode ranges of one owner merge,
 * so a merged walk takes fewer steps than vnode ranges, and sees every
 * partition once in token order. */
START_TEST(merged_pieces_cover_the_ring)
{
	const char *dcs[4] = {"dc1", "dc1", "dc1", "dc1"};
	struct simc *c = simc_new(g_seed + 5, 4, dcs);
	struct ring_strategy *s = simple(1);
	for (int i = 0; i < 50; i++) {
		char key[16];
		snprintf(key, sizeof(key), "m%d", i);
		struct outcome o =
			do_write(c, 0, s, REPL_CL_ONE, key, "hit", 10);
		ck_assert_int_eq(o.res.outcome, REPL_OK);
	}
	struct found f;
	walk(c, 1, s, REPL_CL_ONE, "hit", 1000, &f);
	ck_assert_int_eq(f.n, 50);
	ck_assert_int_le(f.steps, 4 * 8 + 1);
	int64_t pieces = 0, at = INT64_MIN;
	while (at < INT64_MAX) {
		int64_t e = repl_range_piece_end(c->nodes[1].repl, s, at,
						 INT64_MAX, true);
		ck_assert(e > at);
		ck_assert(repl_range_piece_end(c->nodes[1].repl, s, at,
					       INT64_MAX, false) <= e);
		at = e;
		pieces++;
	}
	ck_assert_int_eq(f.steps, pieces);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A traced indexed step whose coordinator is the stale replica: the
 * protection reads are single-partition reads to the contacts that did
 * not return the partitions, all six of a contact in one READ_REQ /
 * READ_RSP (each with its "Sending" line and a "Requesting 6
 * partitions" line), never as range answers. */
START_TEST(traced_protection_reads_are_reads)
{
	struct ring_strategy *s;
	struct simc *c = stale_cluster(g_seed + 7, &s);
	uint8_t sid[16] = {0x7a, 0xce, 30};
	struct slice val;
	struct repl_index_expr ix = v_is(&val, "red");
	for (int i = 0; i < 3; i++)
		c->nodes[i].trace_log[0] = 0;
	uint64_t before = protection_reads(c);
	uint64_t msgs = protection_messages(c);
	struct range_out o;
	struct storage_read_cmd cmd = {.with_static = true};
	struct repl_range q = indexed(c, s, REPL_CL_ALL, &cmd, 1000, true, &ix);
	q.trace_session = sid;
	run_range_step(c, 0, &q, &o);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	range_out_free(&o);
	/* k0..k5 read from nodes 1 and 2 each, in one message to each */
	ck_assert_uint_eq(protection_reads(c) - before, 2 * (STALE + 1));
	ck_assert_uint_eq(protection_messages(c) - msgs, 2);
	const char *log = c->nodes[0].trace_log;
	int sends = 0, answers = 0, ranges = 0;
	for (const char *p = log; (p = strstr(p, "|Sending READ_REQ message "
						 "to /"));
	     p++)
		sends++;
	for (const char *p = log;
	     (p = strstr(p, "Messaging-EventLoop-1|READ_RSP message "
			    "received from /"));
	     p++)
		answers++;
	for (const char *p = log; (p = strstr(p, "|RANGE_RSP message ")); p++)
		ranges++;
	ck_assert_msg(sends == 2, "%d sends: %s", sends, log);
	ck_assert_msg(answers == 2, "%d answers: %s", answers, log);
	int asks = 0;
	for (const char *p = log; (p = strstr(p, "|Requesting 6 partitions "
						 "from /"));
	     p++)
		asks++;
	ck_assert_msg(asks == 2, "%d requests: %s", asks, log);
	/* the first round's answers: one range answer per remote contact */
	ck_assert_msg(ranges == 2, "%d range answers: %s", ranges, log);
	ck_assert_ptr_nonnull(strstr(log, "Replica filtering protection: "));
	/* each remote replica served them as reads of one partition */
	for (int i = 1; i < 3; i++)
		ck_assert_msg(strstr(c->nodes[i].trace_log, "READ_REQ"), "%s",
			      c->nodes[i].trace_log);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* 140 of 150 partitions stale on node 0: each remote contact gets them
 * in messages of at most REPL_PROTECT_BATCH (64 + 64 + 12), and none
 * comes back with its stale value. */
START_TEST(protection_reads_go_in_bounded_batches)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(g_seed + 8, 3, dcs);
	struct ring_strategy *s = simple(3);
	enum { P = 150, MOVED = 140 };
	for (int i = 0; i < P; i++) {
		char key[16];
		snprintf(key, sizeof(key), "b%d", i);
		struct outcome o =
			do_write(c, 0, s, REPL_CL_ALL, key, "red", 10);
		ck_assert_int_eq(o.res.outcome, REPL_OK);
		if (i >= MOVED)
			continue;
		struct storage_mutation *m = make_write(c, key, "blue", 20);
		simc_apply(c, 1, m);
		simc_apply(c, 2, m);
		storage_mutation_delete(m);
	}
	uint64_t reads = protection_reads(c), msgs = protection_messages(c);
	struct range_out o;
	step(c, 0, s, REPL_CL_ALL, "red", false, &o);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ck_assert_int_eq(step_matching(c, &o, "red"), P - MOVED);
	ck_assert_uint_eq(protection_reads(c) - reads, 2 * MOVED);
	ck_assert_uint_eq(
		protection_messages(c) - msgs,
		2 * ((MOVED + REPL_PROTECT_BATCH - 1) / REPL_PROTECT_BATCH));
	/* through a stale-free coordinator the stale contact (node 0) is
	 * asked for the 10 it has in one message, and its own store is read
	 * without any for the rest */
	msgs = protection_messages(c);
	step(c, 1, s, REPL_CL_ALL, "blue", false, &o);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ck_assert_int_eq(step_matching(c, &o, "blue"), MOVED);
	ck_assert_uint_eq(protection_messages(c) - msgs,
			  (MOVED + REPL_PROTECT_BATCH - 1) /
				  REPL_PROTECT_BATCH);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* Replicas that do not know ReadReq.keys (older nodes) answer a batch
 * for its first partition alone: the coordinator asks for the rest one a
 * message, and the answer is still right. */
START_TEST(older_replicas_get_the_rest_one_a_message)
{
	struct ring_strategy *s;
	struct simc *c = stale_cluster(g_seed + 9, &s);
	c->nodes[1].old_reads = c->nodes[2].old_reads = true;
	uint64_t msgs = protection_messages(c);
	struct range_out o;
	step(c, 0, s, REPL_CL_ALL, "red", false, &o);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ck_assert_int_eq(step_matching(c, &o, "red"), N - STALE - 1);
	/* a batch of 6 to each, then 5 single reads to each */
	ck_assert_uint_eq(protection_messages(c) - msgs, 2 + 2 * STALE);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* replica_filtering_protection's thresholds, as Cassandra counts: at ALL
 * from node 0, 20 partitions of one row from 3 contacts are 60 rows held
 * (the 6 nodes 1 and 2 lack count for them too). Past the warn threshold
 * the step answers with it (the node warns); past the fail threshold it
 * fails as Overloaded before any protection read; at either it does not. */
START_TEST(cached_rows_thresholds_warn_and_fail)
{
	struct ring_strategy *s;
	struct simc *c = stale_cluster(g_seed + 10, &s);
	struct repl *r0 = c->nodes[0].repl;
	struct range_out o;
	repl_set_protection_thresholds(r0, 60, 60);
	step(c, 0, s, REPL_CL_ALL, "red", false, &o);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ck_assert_uint_eq(o.res.rfp_threshold, 0);
	ck_assert_int_eq(step_matching(c, &o, "red"), N - STALE - 1);

	repl_set_protection_thresholds(r0, 59, 60);
	step(c, 0, s, REPL_CL_ALL, "red", false, &o);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ck_assert_uint_eq(o.res.rfp_threshold, 59);
	ck_assert_int_eq(step_matching(c, &o, "red"), N - STALE - 1);

	uint64_t reads = protection_reads(c);
	repl_set_protection_thresholds(r0, 10, 59);
	step(c, 0, s, REPL_CL_ALL, "red", false, &o);
	ck_assert_int_eq(o.res.outcome, REPL_OVERLOADED);
	ck_assert_uint_eq(o.res.rfp_threshold, 59);
	ck_assert_msg(strstr(o.res.msg,
			     "Replica filtering protection has "
			     "cached over 59 rows during query") == o.res.msg,
		      "%s", o.res.msg);
	ck_assert_ptr_nonnull(
		strstr(o.res.msg, "(See 'cached_replica_rows_fail_threshold' "
				  "in cassandra.yaml.)"));
	ck_assert_uint_eq(o.n, 0);
	ck_assert_uint_eq(protection_reads(c), reads);
	range_out_free(&o);

	/* at ONE nothing is protected, nothing counted */
	repl_set_protection_thresholds(r0, 1, 1);
	step(c, 0, s, REPL_CL_ONE, "red", false, &o);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ck_assert_uint_eq(o.res.rfp_threshold, 0);
	step_matching(c, &o, "red");
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("index_read_sim");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, stale_index_match_on_the_coordinator_loses);
	tcase_add_test(tc, stale_index_match_on_a_remote_replica_loses);
	tcase_add_test(tc, protection_with_cut_steps);
	tcase_add_test(tc, agreeing_replicas_read_candidates_only);
	tcase_add_test(tc, every_index_scan_may_read_rows_alone);
	tcase_add_test(tc, a_replica_without_index_reads_is_still_right);
	tcase_add_test(tc, merged_pieces_cover_the_ring);
	tcase_add_test(tc, a_replica_building_its_index_fails_the_read);
	tcase_add_test(tc, traced_protection_reads_are_reads);
	tcase_add_test(tc, protection_reads_go_in_bounded_batches);
	tcase_add_test(tc, older_replicas_get_the_rest_one_a_message);
	tcase_add_test(tc, cached_rows_thresholds_warn_and_fail);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	g_seed = test_seed(20261203);
	return test_run(suite());
}
