/* ring/: token allocation: initial_token, random tokens, Cassandra's
 * bootstrap choice, the replication-aware allocator's balance (growing DCs
 * on 1, 4 and 5 racks, seeds fixed: the results are deterministic), planned
 * growth (generatetokens) and the jitter a node applies to its tokens. */
#include "common/err.h"
#include "common/rand.h"
#include "ring/ring.h"
#include "tests/lib/testutil.h"
#include "tests/unit/ring_testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed;

START_TEST(initial_token_parsing)
{
	int64_t t[4];
	size_t n;
	ck_assert_int_eq(ring_tokens_parse_initial(" -5, 7 ,9", t, 4, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert(t[0] == -5 && t[1] == 7 && t[2] == 9);
	ck_assert_int_eq(ring_tokens_parse_initial("1,x", t, 4, &n), -1);
	ck_assert_int_eq(err_code(), ERR_CONFIG);
	ck_assert_contains(err_msg(), "'x'");
	ck_assert_int_eq(ring_tokens_parse_initial("1,1", t, 4, &n), -1);
	ck_assert_int_eq(ring_tokens_parse_initial("1,,2", t, 4, &n), -1);
	ck_assert_int_eq(ring_tokens_parse_initial("", t, 4, &n), -1);
	ck_assert_int_eq(ring_tokens_parse_initial("1,2,3,4,5", t, 4, &n), -1);
}
END_TEST

START_TEST(tokens_choose_follows_cassandra)
{
	struct ring_builder *b = ring_builder_new();
	int64_t t0[] = {42};
	struct ring_endpoint e = {
		.dc = "dc1", .rack = "r1", .tokens = t0, .num_tokens = 1};
	e.addr = addr_of(1);
	ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
	struct ring *r = ring_builder_build(b);
	int64_t out[4];
	ck_assert_int_eq(
		ring_tokens_choose(r, "1,2,3", 3, 3, "dc1", "r1", NULL, 1, out),
		0);
	ck_assert(out[0] == 1 && out[2] == 3);
	ck_assert_int_eq(
		ring_tokens_choose(r, "1,2", 3, 3, "dc1", "r1", NULL, 1, out),
		-1);
	ck_assert_contains(err_msg(), "different from num_tokens value (3)");
	ck_assert_int_eq(
		ring_tokens_choose(r, "42", 1, 0, "dc1", "r1", NULL, 1, out),
		-1);
	ck_assert_contains(err_msg(), "existing token 42");
	/* allocator and random are both seeded */
	int64_t again[4];
	ck_assert_int_eq(
		ring_tokens_choose(r, NULL, 4, 3, "dc1", "r1", NULL, 7, out),
		0);
	ck_assert_int_eq(
		ring_tokens_choose(r, "", 4, 3, "dc1", "r1", NULL, 7, again),
		0);
	ck_assert_mem_eq(out, again, sizeof(out));
	ck_assert_int_eq(
		ring_tokens_choose(r, NULL, 4, 0, "dc1", "r1", NULL, 7, out),
		0);
	ck_assert_int_eq(
		ring_tokens_choose(r, NULL, 4, 0, "dc1", "r1", NULL, 7, again),
		0);
	ck_assert_mem_eq(out, again, sizeof(out));
	ck_assert_int_eq(
		ring_tokens_choose(r, NULL, 0, 0, "dc1", "r1", NULL, 7, out),
		-1);
	ring_unref(r);
	ring_builder_delete(b);
}
END_TEST

START_TEST(random_tokens_are_distinct_and_seeded)
{
	struct rng a, b;
	rng_seed(&a, 9);
	rng_seed(&b, 9);
	int64_t x[64], y[64];
	ck_assert_int_eq(ring_tokens_random(&a, NULL, 64, x), 0);
	ck_assert_int_eq(ring_tokens_random(&b, NULL, 64, y), 0);
	ck_assert_mem_eq(x, y, sizeof(x));
	for (size_t i = 0; i < 64; i++) {
		ck_assert(x[i] != INT64_MIN);
		for (size_t j = 0; j < i; j++)
			ck_assert(x[i] != x[j]);
	}
}
END_TEST

/* Grows a DC with the allocator, ntok tokens a node, racks r1..r<racks>
 * filled round robin (one rack when racks is 0 or 1); returns the worst
 * max/min - 1 of replicated ownership (RF 3) for from..max nodes, and the
 * last ring in *last if set (the caller unrefs it). */
/* Grows dc1 to `max` nodes on `racks` racks round robin, each join with
 * the allocator (told the next joiner's rack when `planned`); returns the
 * worst spread from `from` nodes on. */
static double grow_dc_racks_ring(size_t max, size_t racks, size_t from,
				 const char *other_dc_rack, uint64_t sd,
				 size_t ntok, bool planned, struct ring **last)
{
	struct ring_builder *b = ring_builder_new();
	int64_t toks[RING_TOKENS_MAX];
	double worst = 0;
	if (other_dc_rack) {
		/* a second DC with random tokens must not disturb dc1 */
		struct rng rg;
		rng_seed(&rg, sd);
		for (size_t i = 0; i < 3; i++) {
			ring_tokens_random(&rg, NULL, 16, toks);
			struct ring_endpoint e = {.dc = "dc2",
						  .rack = other_dc_rack,
						  .tokens = toks,
						  .num_tokens = 16};
			e.addr = addr_of(100 + i);
			ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
		}
	}
	for (size_t n = 1; n <= max; n++) {
		char rack[16];
		snprintf(rack, sizeof(rack), "r%zu",
			 racks > 1 ? (n - 1) % racks + 1 : 1);
		char next[16];
		snprintf(next, sizeof(next), "r%zu",
			 racks > 1 ? n % racks + 1 : 1);
		struct ring *r = ring_builder_build(b);
		ck_assert_int_eq(ring_tokens_allocate_planned(
					 r, "dc1", rack,
					 planned && n < max ? next : NULL, 3,
					 ntok, sd + n, toks),
				 0);
		if (n == max) { /* deterministic (once: ASan makes it slow) */
			int64_t again[RING_TOKENS_MAX];
			ck_assert_int_eq(ring_tokens_allocate(r, "dc1", rack, 3,
							      ntok, sd + n,
							      again),
					 0);
			ck_assert_mem_eq(toks, again, ntok * sizeof(*toks));
		}
		ring_unref(r);
		struct ring_endpoint e = {.dc = "dc1",
					  .rack = rack,
					  .tokens = toks,
					  .num_tokens = ntok};
		e.addr = addr_of(n);
		ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
		r = ring_builder_build(b);
		ck_assert_ptr_nonnull(r); /* no token collisions */
		double sp;
		ck_assert_int_eq(ring_dc_spread(r, "dc1", 3, &sp), 0);
		if (n >= from && sp > worst)
			worst = sp;
		if (n == max && last)
			*last = r;
		else
			ring_unref(r);
	}
	ring_builder_delete(b);
	return worst;
}

static double grow_dc_racks(size_t max, size_t racks, size_t from,
			    const char *other_dc_rack, uint64_t sd)
{
	return grow_dc_racks_ring(max, racks, from, other_dc_rack, sd, 16,
				  false, NULL);
}

static double grow_dc(size_t max, const char *other_dc_rack, uint64_t sd)
{
	return grow_dc_racks(max, 1, 3, other_dc_rack, sd);
}

START_TEST(allocator_balances_growing_dc)
{
	double w = grow_dc(7, NULL, seed);
	ck_assert_msg(w <= 0.10, "spread %.3f", w);
	w = grow_dc(5, "r9", seed + 1);
	ck_assert_msg(w <= 0.10, "spread %.3f with a second DC", w);
}
END_TEST

/* num_tokens 256 (Cassandra 3's default): the search does fewer passes
 * with more tokens (it took up to a minute a join before) and the DC is
 * still even. */
START_TEST(allocator_balances_many_tokens)
{
	double w = grow_dc_racks_ring(4, 1, 3, NULL, seed, 256, false, NULL);
	ck_assert_msg(w <= 0.02, "spread %.3f with 256 tokens", w);
}
END_TEST

/* 5 racks, RF 3: from the 6th node on the racks are unequal (2+1+1+1+1);
 * a rack of 2 must then replicate nearly every range. Seed fixed: the
 * result is deterministic, this checks the tokens, not a timing. With
 * this seed the allocator without look-ahead left 14.3% at 6 nodes. */
START_TEST(allocator_balances_more_racks_than_rf)
{
	double w = grow_dc_racks(7, 5, 3, NULL, 6000);
	ck_assert_msg(w <= 0.10, "spread %.3f with 5 racks", w);
}
END_TEST

/* 4 racks, RF 3, round robin: at 7 and 8 nodes (2+2+2+1, 2+2+2+2). With
 * these seeds the allocator without its look-ahead leaves 12.8% and 12.3%
 * at 7 nodes: the joins before had left some nodes too few ranges they
 * could be pushed out of. Seeds fixed (deterministic). */
START_TEST(allocator_balances_four_racks)
{
	double w = grow_dc_racks(8, 4, 7, NULL, 1000);
	ck_assert_msg(w <= 0.10, "spread %.3f with 4 racks", w);
	w = grow_dc_racks(8, 4, 7, NULL, 10000);
	ck_assert_msg(w <= 0.10, "spread %.3f with 4 racks", w);
}
END_TEST

/* 4 racks, RF 3, round robin, 9 nodes (3+2+2+2): rack 1 must replicate
 * every range, which the greedy search with its width term misses; the
 * annealing of tight DCs (alloc.c step 8) reaches it. Before it the
 * allocator left 12.6% with this seed (the bench's seed 4). Seed fixed
 * (deterministic). */
START_TEST(allocator_balances_four_racks_nine_nodes)
{
	double w = grow_dc_racks(9, 4, 9, NULL, 4000);
	ck_assert_msg(w <= 0.10, "spread %.3f with 4 racks", w);
}
END_TEST

/* Width of the points whose clockwise walk meets a token of rack `a`
 * before one of rack `b` (dc1). */
static double rack_first(const struct ring *r, const char *a, const char *b)
{
	size_t n = ring_token_count(r);
	double mu = 0;
	for (size_t i = 0; i < n; i++) {
		/* the points of range i meet token i first, then i + 1 ... */
		for (size_t k = 0; k < n; k++) {
			const struct ring_endpoint *e = ring_endpoint_get(
				r, ring_token_owner_at(r, (i + k) % n));
			if (strcmp(e->dc, "dc1") != 0)
				continue;
			if (strcmp(e->rack, a) == 0)
				mu += token_range_fraction(ring_range_at(r, i));
			if (strcmp(e->rack, a) == 0 || strcmp(e->rack, b) == 0)
				break;
		}
	}
	return mu;
}

/* 4 racks, RF 3, round robin, 6 nodes (2+2+1+1): the racks of two must
 * replicate (nearly) every range, so the lone racks split the third
 * replica by which of them a walk meets first, and max/min - 1 >= 2 mu - 1
 * for the larger share mu, whatever the fifth and sixth nodes do
 * (docs/ring.md). Any two racks may end up alone, so the first round must
 * leave every pair taking turns evenly. Without that (before rack_turns)
 * pairs split up to 0.585 / 0.415, and this seed (the bench's seed 20)
 * ended at 20.7% at 6 nodes. Seed fixed (deterministic). */
START_TEST(allocator_racks_take_turns_evenly)
{
	double w = grow_dc_racks(6, 4, 6, NULL, 20000);
	ck_assert_msg(w <= 0.10, "spread %.3f at 6 nodes on 4 racks", w);
	static const char *racks[4] = {"r1", "r2", "r3", "r4"};
	for (uint64_t sd = 5000; sd <= 6000; sd += 1000) {
		struct ring *r = NULL;
		grow_dc_racks_ring(4, 4, 4, NULL, sd, 16, false, &r);
		for (int a = 0; a < 4; a++)
			for (int b = a + 1; b < 4; b++) {
				double mu = rack_first(r, racks[a], racks[b]);
				ck_assert_msg(mu > 0.475 && mu < 0.525,
					      "seed %d: %s before %s on %.3f",
					      (int)sd, racks[a], racks[b], mu);
			}
		ring_unref(r);
	}
}
END_TEST

/* Told the rack of the next joiner (nodes started together), the
 * allocator prepares for that join only: 4 racks round robin within 10% at
 * 6 nodes with the bench's seed 15, where an allocator that must prepare
 * for any rack leaves 11.2%. Seed fixed. */
START_TEST(allocator_prepares_for_the_next_joiners_rack)
{
	double w = grow_dc_racks_ring(6, 4, 6, NULL, 15000, 16, true, NULL);
	ck_assert_msg(w <= 0.10, "spread %.3f at 6 nodes", w);
}
END_TEST

/* racks == RF: each rack holds one replica of every range, so with racks
 * of 2, 1 and 1 nodes the lone nodes own the whole ring and the pair half
 * each, whatever the tokens (docs/ring.md). */
START_TEST(allocator_racks_equal_rf_unequal_is_bounded)
{
	double w = grow_dc_racks(4, 3, 4, NULL, 1000);
	ck_assert_msg(w >= 0.99, "spread %.3f below the floor of 1.0", w);
}
END_TEST

/* The floors docs/ring.md derives ("What balance is possible"). */
START_TEST(balance_floor_of_rack_layouts)
{
	static const struct {
		size_t k[5], nr;
		double floor;
		bool eq;
	} cases[] = {
		{{5}, 1, 0, false},                /* one rack */
		{{1, 1, 1}, 3, 0, false},          /* racks == RF, equal */
		{{2, 1, 1}, 3, 1.0, true},         /* racks == RF, 2 / 1 */
		{{3, 2, 2}, 3, 0.5, true},         /* 3 / 2 */
		{{2, 1, 1, 1}, 4, 1.0 / 3, false}, /* rack of 2 capped */
		{{2, 2, 1, 1}, 4, 0, false},       /* tight, but feasible */
		{{3, 1, 1, 1}, 4, 1.0, false},     /* 1/3 against 2/3 */
		{{2, 1, 1, 1, 1}, 5, 0, false},
		{{1, 1}, 2, 0, false}, /* fewer racks than RF */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool eq;
		double f = ring_balance_floor(cases[i].k, cases[i].nr, 3, &eq);
		ck_assert_msg(fabs(f - cases[i].floor) < 1e-9 &&
				      eq == cases[i].eq,
			      "case %zu: floor %.4f eq %d", i, f, eq);
	}
}
END_TEST

struct joins {
	unsigned calls, last_try;
	size_t last_nodes;
};

static void count_joins(void *arg, unsigned try_, size_t nodes)
{
	struct joins *j = arg;
	j->calls++;
	j->last_try = try_;
	j->last_nodes = nodes;
}

/* A planned DC (generatetokens): 6 nodes on 4 racks round robin, every
 * size whose floor allows it within 10% (5 nodes, 2+1+1+1, cannot be), the
 * spreads reported are those of the tokens returned. */
START_TEST(plan_balances_every_size_it_can)
{
	enum { N = 6, T = 16 };
	const char *racks[N];
	static const char *names[] = {"r1", "r2", "r3", "r4"};
	for (size_t i = 0; i < N; i++)
		racks[i] = names[i % 4];
	int64_t toks[N * T];
	double spread[N];
	struct joins seen = {0};
	struct ring_plan_progress pr = {.each = count_joins, .arg = &seen};
	ck_assert_int_eq(
		ring_tokens_plan(racks, N, 3, T, 7, 2, &pr, toks, spread), 0);
	ck_assert_uint_eq(seen.calls, 2 * N); /* each join of both tries */
	ck_assert_uint_eq(seen.last_try, 2);
	ck_assert_uint_eq(seen.last_nodes, N);
	for (size_t i = 0; i < N; i++)
		ck_assert_msg(i == 4 ? spread[i] > 0.33 : spread[i] <= 0.10,
			      "%zu nodes: spread %.3f", i + 1, spread[i]);
	struct ring_builder *b = ring_builder_new();
	for (size_t i = 0; i < N; i++) {
		struct ring_endpoint e = {.dc = "dc1",
					  .rack = racks[i],
					  .tokens = toks + i * T,
					  .num_tokens = T};
		e.addr = addr_of(i + 1);
		ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
	}
	struct ring *r = ring_builder_build(b);
	ck_assert_ptr_nonnull(r);
	double own[N], hi = 0, lo = 10;
	ck_assert_int_eq(ring_dc_ownership(r, "dc1", 3, own), 0);
	for (size_t i = 0; i < N; i++) {
		hi = own[i] > hi ? own[i] : hi;
		lo = own[i] < lo ? own[i] : lo;
	}
	ck_assert_double_eq_tol(hi / lo - 1, spread[N - 1], 1e-9);
	ring_unref(r);
	ring_builder_delete(b);
	ck_assert_int_eq(
		ring_tokens_plan(racks, 0, 3, T, 7, 2, NULL, toks, spread), -1);
	ck_assert_int_eq(
		ring_tokens_plan(racks, N, 3, T, 7, 0, NULL, toks, spread), -1);
}
END_TEST

/* The jitter a node adds to its chosen tokens keeps each one in its gap:
 * never on or past another token of the ring or of its own. */
START_TEST(jitter_stays_in_the_gap)
{
	int64_t a[] = {100, 200, 300, INT64_MAX}, bt[] = {-5};
	struct ring_builder *b = ring_builder_new();
	struct ring_endpoint e = {
		.dc = "dc1", .rack = "r1", .tokens = a, .num_tokens = 4};
	e.addr = addr_of(1);
	ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
	e.tokens = bt;
	e.num_tokens = 1;
	e.status = RING_STATUS_BOOT; /* its tokens count too */
	e.addr = addr_of(2);
	ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
	struct ring *r = ring_builder_build(b);
	int moved = 0;
	for (uint64_t sd = 1; sd <= 200; sd++) {
		int64_t t[] = {101,           199, 250,           251,
			       INT64_MAX - 1, -6,  1000000000000, 300};
		struct rng g;
		rng_seed(&g, sd);
		ring_tokens_jitter(r, &g, t, 8);
		ck_assert(t[0] >= 101 && t[0] < t[1] && t[1] <= 199);
		ck_assert(t[2] >= 201 && t[2] < t[3] && t[3] <= 299);
		ck_assert(t[2] != t[3]);
		ck_assert(t[4] > 300 && t[4] < INT64_MAX);
		ck_assert(t[5] < -5 && t[5] > INT64_MIN);
		ck_assert(t[6] > 300 && t[6] < INT64_MAX);
		ck_assert_int_eq(t[7], 300); /* taken: left alone */
		moved += t[6] != 1000000000000;
	}
	ck_assert_int_gt(moved, 190);
	ring_unref(r);
	ring_builder_delete(b);
}
END_TEST

static double dc1_spread(const struct ring_builder *b)
{
	struct ring *r = ring_builder_build(b);
	double sp;
	ck_assert_int_eq(ring_dc_spread(r, "dc1", 3, &sp), 0);
	ring_unref(r);
	return sp;
}

/* The allocator puts tokens right next to others on purpose; the jitter
 * must not undo that. A DC grown on 4 racks as nodes started together
 * grow it (each join told the next joiner's rack, its tokens jittered
 * against the ring it chose from) has the spread its choices had, join
 * by join (an unbounded 2^19 jitter turned 0.6% into 17-27% at 6 nodes). */
START_TEST(jitter_keeps_the_balance)
{
	enum { N = 6, T = 16 };
	static const char *racks[N + 1] = {"r1", "r2", "r3", "r4",
					   "r1", "r2", "r3"};
	struct ring_builder *b = ring_builder_new();
	struct rng g;
	rng_seed(&g, 11);
	for (size_t i = 0; i < N; i++) {
		int64_t t[T], kept[T];
		struct ring *r = ring_builder_build(b);
		ck_assert_int_eq(ring_tokens_allocate_planned(
					 r, "dc1", racks[i], racks[i + 1], 3, T,
					 3000 + i, t),
				 0);
		struct ring_endpoint e = {.dc = "dc1",
					  .rack = racks[i],
					  .tokens = t,
					  .num_tokens = T};
		e.addr = addr_of(i + 1);
		ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
		double chosen = dc1_spread(b);
		memcpy(kept, t, sizeof(t));
		ring_tokens_jitter(r, &g, t, T);
		ring_unref(r);
		ck_assert(memcmp(kept, t, sizeof(t)) != 0);
		ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
		ck_assert_double_eq_tol(dc1_spread(b), chosen, 1e-6);
	}
	ck_assert_double_le(dc1_spread(b), 0.10);
	ring_builder_delete(b);
}
END_TEST

/* ring_dc_spread: one DC's owners only (another DC and a BOOT node of
 * the DC are left out), max/min - 1 of their replicated ownership. */
START_TEST(dc_spread_measures_one_dc)
{
	int64_t a[] = {0}, b2[] = {INT64_C(1) << 62}, c[] = {1}, d[] = {5};
	struct {
		const char *dc;
		int64_t *tok;
		enum ring_status st;
	} eps[] = {{"dc1", a, RING_STATUS_NORMAL},
		   {"dc1", b2, RING_STATUS_NORMAL},
		   {"dc2", c, RING_STATUS_NORMAL},
		   {"dc1", d, RING_STATUS_BOOT}};
	struct ring_builder *b = ring_builder_new();
	for (size_t i = 0; i < 4; i++) {
		struct ring_endpoint e = {.dc = eps[i].dc,
					  .rack = "r1",
					  .tokens = eps[i].tok,
					  .num_tokens = 1,
					  .status = eps[i].st};
		e.addr = addr_of(i + 1);
		ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
	}
	struct ring *r = ring_builder_build(b);
	double sp;
	/* RF 1: the node at 2^62 owns a quarter, the one at 0 the rest */
	ck_assert_int_eq(ring_dc_spread(r, "dc1", 1, &sp), 0);
	ck_assert_double_eq_tol(sp, 2.0, 1e-9);
	ck_assert_int_eq(ring_dc_spread(r, "dc1", 2, &sp), 0);
	ck_assert_double_eq_tol(sp, 0.0, 1e-9);
	ck_assert_int_eq(ring_dc_spread(r, "dc9", 1, &sp), 0);
	ck_assert_double_eq_tol(sp, 0.0, 1e-9);
	ring_unref(r);
	ring_builder_delete(b);
}
END_TEST

START_TEST(allocator_rejects_bad_input)
{
	struct ring_builder *b = ring_builder_new();
	struct ring *r = ring_builder_build(b);
	int64_t toks[4];
	ck_assert_int_eq(ring_tokens_allocate(r, "", "r1", 3, 4, 1, toks), -1);
	ck_assert_int_eq(ring_tokens_allocate(r, "dc1", "r1", 0, 4, 1, toks),
			 -1);
	ck_assert_int_eq(ring_tokens_allocate(r, "dc1", "r1", 3, 0, 1, toks),
			 -1);
	ring_unref(r);
	ring_builder_delete(b);
}
END_TEST

int main(void)
{
	seed = test_seed(20261130);
	Suite *s = suite_create("ring_alloc");
	TCase *tc;
	tc = tcase_create("alloc");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, initial_token_parsing);
	tcase_add_test(tc, random_tokens_are_distinct_and_seeded);
	tcase_add_test(tc, tokens_choose_follows_cassandra);
	tcase_add_test(tc, allocator_balances_growing_dc);
	tcase_add_test(tc, allocator_balances_many_tokens);
	tcase_add_test(tc, allocator_balances_more_racks_than_rf);
	tcase_add_test(tc, allocator_balances_four_racks);
	tcase_add_test(tc, allocator_balances_four_racks_nine_nodes);
	tcase_add_test(tc, allocator_racks_take_turns_evenly);
	tcase_add_test(tc, allocator_prepares_for_the_next_joiners_rack);
	tcase_add_test(tc, allocator_racks_equal_rf_unequal_is_bounded);
	tcase_add_test(tc, allocator_rejects_bad_input);
	tcase_add_test(tc, balance_floor_of_rack_layouts);
	tcase_add_test(tc, plan_balances_every_size_it_can);
	tcase_add_test(tc, jitter_stays_in_the_gap);
	tcase_add_test(tc, jitter_keeps_the_balance);
	tcase_add_test(tc, dc_spread_measures_one_dc);
	suite_add_tcase(s, tc);
	return test_run(s);
}
