/* ring/: Murmur3, range arithmetic, ring snapshots, strategies, placement
 * properties, pending ranges and snitch (token allocation: test_ring_alloc.c).
 * Placement is also checked bit for bit against the DataStax driver by
 * ring_oracle_test.py. */
#include "common/buf.h"
#include "common/err.h"
#include "common/murmur3.h"
#include "common/rand.h"
#include "ring/ring.h"
#include "ring/token.h"
#include "tests/lib/testutil.h"
#include "tests/unit/ring_testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed;

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = strlen(h) / 2;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		sscanf(h + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
	return n;
}

/* ---- Murmur3 ------------------------------------------------------------- */

START_TEST(murmur3_matches_driver_vectors)
{
	/* From oracle_placement.py --vectors (the driver's cmurmur3). The
	 * last three depend on Java's sign-extended tail bytes. */
	static const struct {
		const char *hex;
		int64_t token;
	} v[] = {
		{"", 0},
		{"00", 5048724184180415669LL},
		{"61", -8839064797231613815LL},
		{"68656c6c6f", -3758069500696749310LL},
		{"000102030405060708090a0b0c0d0e", 5125964547706398185LL},
		{"000102030405060708090a0b0c0d0e0f", 4920504430128807728LL},
		{"000102030405060708090a0b0c0d0e0f10", 6662781046685680142LL},
		{"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d"
		 "1e1f20",
		 9025539228862924306LL},
		{"00000001", -4069959284402364209LL},
		{"000000000000002a", 8623491988607824794LL},
		{"ff", -4442228696663692417LL},
		{"80818283848586878889", -7623170703309721106LL},
		{"f0e1d2c3b4a5968778695a4b3c2d1e0fffee", 2419168628011270746LL},
	};
	uint8_t k[64];
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t n = unhex(v[i].hex, k);
		ck_assert_msg(murmur3_token(k, n) == v[i].token, "key %s",
			      v[i].hex);
		uint64_t h[2];
		murmur3_hash128(k, n, 0, h);
		ck_assert(murmur3_token_of_hash(h) == v[i].token);
	}
	/* The reserved minimum maps to the maximum either way. */
	uint64_t min[2] = {(uint64_t)INT64_MIN, 0};
	ck_assert(murmur3_token_of_hash(min) == INT64_MAX);
}
END_TEST

START_TEST(murmur3_compound_key_layout)
{
	struct slice parts[2] = {slice_make("ab", 2), slice_make("", 0)};
	struct buf b = {0};
	ck_assert_int_eq(murmur3_compound_key(&b, parts, 2), 0);
	static const uint8_t want[] = {0, 2, 'a', 'b', 0, 0, 0, 0};
	ck_assert_uint_eq(b.len, sizeof(want));
	ck_assert_mem_eq(b.data, want, sizeof(want));
	int64_t t;
	ck_assert_int_eq(murmur3_compound_token(parts, 2, &t), 0);
	ck_assert(t == murmur3_token(b.data, b.len));
	buf_free(&b);
	/* a component over 65535 bytes is refused */
	static uint8_t big[70000];
	parts[0] = slice_make(big, sizeof(big));
	ck_assert_int_eq(murmur3_compound_token(parts, 1, &t), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
}
END_TEST

START_TEST(murmur3_streaming_equals_flat)
{
	/* compound_token streams through partial blocks: random splits must
	 * agree with hashing the built routing key */
	struct rng r;
	rng_seed(&r, seed);
	for (int it = 0; it < 2000; it++) {
		uint8_t data[200];
		struct slice parts[5];
		size_t np = 1 + rng_below(&r, 5), at = 0;
		for (size_t i = 0; i < np; i++) {
			size_t n = rng_below(&r, 40);
			for (size_t j = 0; j < n; j++)
				data[at + j] = (uint8_t)rng_next(&r);
			parts[i] = slice_make(data + at, n);
			at += n;
		}
		struct buf b = {0};
		int64_t t;
		ck_assert_int_eq(murmur3_compound_key(&b, parts, np), 0);
		ck_assert_int_eq(murmur3_compound_token(parts, np, &t), 0);
		ck_assert(t == murmur3_token(b.data, b.len));
		buf_free(&b);
	}
}
END_TEST

/* ---- ranges -------------------------------------------------------------- */

static struct token_range R(int64_t l, int64_t r) {
	return token_range_make(l, r);
}

START_TEST(range_contains_and_wrap)
{
	ck_assert(token_range_contains(R(0, 10), 10));
	ck_assert(!token_range_contains(R(0, 10), 0));
	ck_assert(token_range_contains(R(10, 0), INT64_MAX));
	ck_assert(token_range_contains(R(10, 0), INT64_MIN));
	ck_assert(token_range_contains(R(10, 0), -5));
	ck_assert(!token_range_contains(R(10, 0), 5));
	ck_assert(token_range_contains(R(7, 7), 7));
	ck_assert(token_range_contains(R(7, 7), -100));
	ck_assert(token_range_contains(R(5, INT64_MIN), INT64_MIN));
	ck_assert(!token_range_contains(R(INT64_MIN, 5), INT64_MIN));
	ck_assert(token_range_is_wrapping(R(10, 0)));
	ck_assert(token_range_is_wrapping(R(3, 3)));
	ck_assert(!token_range_is_wrapping(R(INT64_MIN, INT64_MIN)));
	ck_assert(!token_range_is_wrapping(R(5, INT64_MIN)));
	bool full;
	ck_assert_uint_eq(token_range_width(R(-5, 5), &full), 10);
	ck_assert(!full);
	token_range_width(R(1, 1), &full);
	ck_assert(full);
	ck_assert(token_range_fraction(R(1, 1)) == 1.0);
	ck_assert(token_range_fraction(R(INT64_MIN, 0)) == 0.5);
}
END_TEST

START_TEST(range_split_equal)
{
	struct token_range_list l = {0};
	ck_assert_int_eq(token_range_split(R(0, 10), 3, &l), 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert(l.v[0].left == 0 && l.v[0].right == 4);
	ck_assert(l.v[1].left == 4 && l.v[1].right == 7);
	ck_assert(l.v[2].left == 7 && l.v[2].right == 10);
	token_range_list_clear(&l);
	/* the full ring in 4 quarters */
	ck_assert_int_eq(token_range_split(R(INT64_MIN, INT64_MIN), 4, &l), 0);
	ck_assert_uint_eq(l.n, 4);
	ck_assert(l.v[1].left == -(INT64_C(1) << 62));
	ck_assert(l.v[2].left == 0);
	ck_assert(l.v[3].right == INT64_MIN);
	token_range_list_clear(&l);
	/* a wrapping range splits across INT64_MAX */
	ck_assert_int_eq(
		token_range_split(R(INT64_MAX - 1, INT64_MIN + 1), 2, &l), 0);
	ck_assert(l.v[0].right == INT64_MIN);
	token_range_list_clear(&l);
	/* fewer points than parts */
	ck_assert_int_eq(token_range_split(R(0, 2), 5, &l), 0);
	ck_assert_uint_eq(l.n, 2);
	token_range_list_clear(&l);
	ck_assert_int_eq(token_range_split(R(0, 2), 0, &l), -1);
	/* by partitions: 1000 partitions, 300 each -> 4 pieces */
	ck_assert_int_eq(token_range_split_by_partitions(R(0, 1000000), 1000,
							 300, 64, &l),
			 0);
	ck_assert_uint_eq(l.n, 4);
	token_range_list_clear(&l);
	ck_assert_int_eq(
		token_range_split_by_partitions(R(0, 1000000), 0, 300, 64, &l),
		0);
	ck_assert_uint_eq(l.n, 1);
	token_range_list_clear(&l);
	ck_assert_int_eq(token_range_split_by_partitions(R(0, 1000000), 1 << 20,
							 1, 16, &l),
			 0);
	ck_assert_uint_eq(l.n, 16);
	token_range_list_free(&l);
}
END_TEST

START_TEST(range_normalize_forms)
{
	struct token_range_list l = {0};
	token_range_list_push(&l, R(100, -100)); /* wraps */
	ck_assert_int_eq(token_ranges_normalize(&l), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert(l.v[0].left == INT64_MIN && l.v[0].right == -100);
	ck_assert(l.v[1].left == 100 && l.v[1].right == INT64_MIN);
	token_range_list_push(&l, R(-100, 100)); /* fills the hole */
	ck_assert_int_eq(token_ranges_normalize(&l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert(l.v[0].left == INT64_MIN && l.v[0].right == INT64_MIN);
	token_range_list_clear(&l);
	token_range_list_push(&l, R(0, 10));
	token_range_list_push(&l, R(10, 20)); /* adjacent: merged */
	token_range_list_push(&l, R(30, 40));
	token_range_list_push(&l, R(35, 50)); /* overlapping */
	ck_assert_int_eq(token_ranges_normalize(&l), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert(l.v[0].left == 0 && l.v[0].right == 20);
	ck_assert(l.v[1].left == 30 && l.v[1].right == 50);
	token_range_list_free(&l);
}
END_TEST

/* Random ranges on a few interesting tokens, checked point by point. */
static int64_t interesting(struct rng *r)
{
	static const int64_t v[] = {
		INT64_MIN, INT64_MIN + 1, -1000,         -1,       0, 1,
		999,       1000,          INT64_MAX - 1, INT64_MAX};
	return v[rng_below(r, sizeof(v) / sizeof(v[0]))];
}

static bool list_contains(const struct token_range_list *l, int64_t t)
{
	for (size_t i = 0; i < l->n; i++)
		if (token_range_contains(l->v[i], t))
			return true;
	return false;
}

START_TEST(range_set_algebra_pointwise)
{
	struct rng r;
	rng_seed(&r, seed);
	for (int it = 0; it < 3000; it++) {
		struct token_range_list a = {0}, b = {0}, i = {0}, d = {0},
					n = {0};
		size_t na = rng_below(&r, 4), nb = rng_below(&r, 4);
		for (size_t k = 0; k < na; k++)
			token_range_list_push(
				&a, R(interesting(&r), interesting(&r)));
		for (size_t k = 0; k < nb; k++)
			token_range_list_push(
				&b, R(interesting(&r), interesting(&r)));
		ck_assert_int_eq(token_ranges_intersect(&a, &b, &i), 0);
		ck_assert_int_eq(token_ranges_subtract(&a, &b, &d), 0);
		for (size_t k = 0; k < a.n; k++)
			token_range_list_push(&n, a.v[k]);
		ck_assert_int_eq(token_ranges_normalize(&n), 0);
		/* normalized: sorted, disjoint, non-wrapping */
		for (size_t k = 0; k < n.n; k++) {
			ck_assert(!token_range_is_wrapping(n.v[k]));
			if (k)
				ck_assert(n.v[k].left > n.v[k - 1].right);
		}
		for (int p = 0; p < 40; p++) {
			int64_t t = (int64_t)((uint64_t)interesting(&r) +
					      rng_below(&r, 3) - 1);
			if (p == 0)
				t = INT64_MIN;
			bool in_a = list_contains(&a, t),
			     in_b = list_contains(&b, t);
			ck_assert(list_contains(&i, t) == (in_a && in_b));
			ck_assert(list_contains(&d, t) == (in_a && !in_b));
			ck_assert(list_contains(&n, t) == in_a);
		}
		token_range_list_free(&a);
		token_range_list_free(&b);
		token_range_list_free(&i);
		token_range_list_free(&d);
		token_range_list_free(&n);
	}
}
END_TEST

START_TEST(token_parse_limits)
{
	int64_t t;
	ck_assert_int_eq(token_parse("-9223372036854775808", 20, &t), 0);
	ck_assert(t == INT64_MIN);
	ck_assert_int_eq(token_parse("9223372036854775807", 19, &t), 0);
	ck_assert(t == INT64_MAX);
	ck_assert_int_eq(token_parse("9223372036854775808", 19, &t), -1);
	ck_assert_int_eq(token_parse("-9223372036854775809", 20, &t), -1);
	ck_assert_int_eq(token_parse("-", 1, &t), -1);
	ck_assert_int_eq(token_parse("12a", 3, &t), -1);
	ck_assert_int_eq(token_parse("", 0, &t), -1);
}
END_TEST

/* ---- rings --------------------------------------------------------------- */

struct topo {
	size_t n;
	char dc[64][16], rack[64][16];
	int64_t tok[64][16];
	size_t ntok[64];
	enum ring_status st[64];
};

static struct ring *topo_build(const struct topo *t)
{
	struct ring_builder *b = ring_builder_new();
	for (size_t i = 0; i < t->n; i++) {
		struct ring_endpoint e = {0};
		e.addr = addr_of(i);
		e.host_id[0] = (uint8_t)i;
		e.dc = t->dc[i];
		e.rack = t->rack[i];
		e.status = t->st[i];
		e.tokens = t->tok[i];
		e.num_tokens = t->ntok[i];
		ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
	}
	struct inet_addr self = addr_of(0);
	ring_builder_set_local(b, &self);
	struct ring *r = ring_builder_build(b);
	ck_assert_ptr_nonnull(r);
	ring_builder_delete(b);
	return r;
}

static void topo_random(struct rng *r, struct topo *t, size_t ndc, size_t racks,
			size_t per_dc, size_t ntok)
{
	memset(t, 0, sizeof(*t));
	for (size_t d = 0; d < ndc; d++)
		for (size_t i = 0; i < per_dc; i++) {
			size_t k = t->n++;
			snprintf(t->dc[k], 16, "dc%zu", d + 1);
			snprintf(t->rack[k], 16, "r%zu",
				 1 + rng_below(r, racks));
			t->ntok[k] = ntok;
			ring_tokens_random(r, NULL, ntok, t->tok[k]);
		}
}

static struct ring_strategy *nts(const char *spec)
{
	/* "dc1=3,dc2=2" */
	const char *k[8] = {"class"}, *v[8] = {"NetworkTopologyStrategy"};
	static char buf[8][32];
	size_t n = 1;
	char tmp[128];
	snprintf(tmp, sizeof(tmp), "%s", spec);
	for (char *p = strtok(tmp, ","); p; p = strtok(NULL, ",")) {
		snprintf(buf[n], 32, "%s", p);
		char *eq = strchr(buf[n], '=');
		*eq = 0;
		k[n] = buf[n];
		v[n] = eq + 1;
		n++;
	}
	struct ring_strategy *s = ring_strategy_new(k, v, n, false);
	ck_assert_msg(s != NULL, "%s", err_msg());
	return s;
}

START_TEST(ring_refuses_conflicts)
{
	struct ring_builder *b = ring_builder_new();
	int64_t t1[] = {5, 10}, t2[] = {10, 20}, t3[] = {7, 7};
	struct ring_endpoint e = {.dc = "dc1", .rack = "r1", .num_tokens = 2};
	e.addr = addr_of(1);
	e.tokens = t1;
	ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
	e.addr = addr_of(2);
	e.tokens = t3;
	ck_assert_int_eq(ring_builder_set_endpoint(b, &e), -1); /* repeated */
	ck_assert_contains(err_msg(), "lists token 7 twice");
	e.tokens = t2;
	ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
	ck_assert_ptr_null(ring_builder_build(b));
	ck_assert_contains(err_msg(), "token 10 is claimed by both");
	e.rack = "";
	ck_assert_int_eq(ring_builder_set_endpoint(b, &e), -1);
	e.rack = "r1";
	/* replacing an endpoint by address resolves it */
	t2[0] = 11;
	ck_assert_int_eq(ring_builder_set_endpoint(b, &e), 0);
	struct ring *r = ring_builder_build(b);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(ring_endpoint_count(r), 2);
	ck_assert_uint_eq(ring_token_count(r), 4);
	ck_assert_int_eq(ring_owner(r, 6), 0);
	ck_assert_int_eq(ring_owner(r, 11), 1);
	ck_assert_int_eq(ring_owner(r, 21), 0); /* wraps to 5 */
	ck_assert_int_eq(ring_owner(r, INT64_MIN), 0);
	struct inet_addr a2 = addr_of(2);
	ck_assert_int_eq(ring_endpoint_find(r, &a2), 1);
	ck_assert_int_eq(ring_builder_remove_endpoint(b, &a2), 0);
	ck_assert_int_eq(ring_builder_remove_endpoint(b, &a2), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	/* the old ring is untouched by builder changes */
	ck_assert_uint_eq(ring_endpoint_count(r), 2);
	struct ring_builder *b2 = ring_builder_from_ring(r);
	struct ring *r2 = ring_builder_build(b2);
	ck_assert_uint_eq(ring_token_count(r2), 4);
	ring_unref(r2);
	ring_builder_delete(b2);
	ring_unref(r);
	ring_builder_delete(b);
}
END_TEST

START_TEST(ring_every_token_owned_once)
{
	struct rng rg;
	rng_seed(&rg, seed);
	for (int it = 0; it < 30; it++) {
		struct topo t;
		topo_random(&rg, &t, 1 + rng_below(&rg, 3),
			    1 + rng_below(&rg, 4), 1 + rng_below(&rg, 10),
			    1 + rng_below(&rg, 16));
		struct ring *r = topo_build(&t);
		struct token_range_list all = {0}, one = {0};
		double sum = 0;
		for (size_t e = 0; e < ring_endpoint_count(r); e++) {
			token_range_list_clear(&one);
			ck_assert_int_eq(ring_primary_ranges(r, e, &one), 0);
			ck_assert_uint_eq(one.n,
					  ring_endpoint_get(r, e)->num_tokens);
			for (size_t k = 0; k < one.n; k++) {
				sum += token_range_fraction(one.v[k]);
				token_range_list_push(&all, one.v[k]);
				/* the owner of a range's end is the endpoint */
				ck_assert_int_eq(ring_owner(r, one.v[k].right),
						 (int)e);
			}
		}
		ck_assert_double_eq_tol(sum, 1.0, 1e-9);
		ck_assert_int_eq(token_ranges_normalize(&all), 0);
		ck_assert_uint_eq(all.n, 1);
		ck_assert(token_range_is_full(all.v[0]));
		token_range_list_free(&all);
		token_range_list_free(&one);
		ring_unref(r);
	}
}
END_TEST

/* ---- strategies ---------------------------------------------------------- */

static const char *strategy_error(const char *k1, const char *v1,
				  const char *k2, const char *v2)
{
	const char *k[2] = {k1, k2}, *v[2] = {v1, v2};
	struct ring_strategy *s = ring_strategy_new(k, v, k2 ? 2 : 1, false);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(err_code(), ERR_CONFIG);
	return err_msg();
}

START_TEST(strategy_errors_use_cassandra_wording)
{
	ck_assert_str_eq(strategy_error("class", "FooStrategy", NULL, NULL),
			 "Unable to find replication strategy class "
			 "'org.apache.cassandra.locator.FooStrategy'");
	ck_assert_str_eq(strategy_error("class", "com.x.Bar", NULL, NULL),
			 "Unable to find replication strategy class "
			 "'com.x.Bar'");
	ck_assert_str_eq(strategy_error("class", "NetworkTopologyStrategy",
					"replication_factor", "3"),
			 "replication_factor is an option for SimpleStrategy, "
			 "not NetworkTopologyStrategy");
	ck_assert_str_eq(strategy_error("class", "NetworkTopologyStrategy",
					"dc1", "three"),
			 "Replication factor must be numeric; found three");
	ck_assert_str_eq(strategy_error("class", "SimpleStrategy",
					"replication_factor", "-1"),
			 "Replication factor must be non-negative; found -1");
	ck_assert_str_eq(strategy_error("class", "SimpleStrategy",
					"replication_factor", ""),
			 "Replication factor must be numeric; found ");
	ck_assert_str_eq(strategy_error("class", "SimpleStrategy", NULL, NULL),
			 "SimpleStrategy requires a replication_factor "
			 "strategy option.");
	ck_assert_str_eq(strategy_error("class", "SimpleStrategy", "dc1", "3"),
			 "Unrecognized strategy option {dc1} passed to "
			 "SimpleStrategy");
	ck_assert_str_eq(strategy_error("dc1", "3", NULL, NULL),
			 "Missing mandatory replication strategy class");
	ck_assert_str_eq(strategy_error("class", "LocalStrategy", NULL, NULL),
			 "Unable to use given strategy class: LocalStrategy is "
			 "reserved for internal use.");
	ck_assert_str_eq(strategy_error("class", "SimpleStrategy",
					"replication_factor", "99999999999"),
			 "Replication factor must be numeric; found "
			 "99999999999");
}
END_TEST

START_TEST(strategy_parses_names_and_describes)
{
	const char *k[] = {"class", "dc2", "dc1"};
	const char *v[] = {
		"org.apache.cassandra.locator.NetworkTopologyStrategy", "2",
		"+3"};
	struct ring_strategy *s = ring_strategy_new(k, v, 3, false);
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(ring_strategy_class(s),
			 RING_STRATEGY_NETWORK_TOPOLOGY);
	ck_assert_int_eq(ring_strategy_rf(s, "dc1"), 3);
	ck_assert_int_eq(ring_strategy_rf(s, "dc9"), 0);
	ck_assert_str_eq(ring_strategy_describe(s),
			 "NetworkTopologyStrategy{dc1:3,dc2:2}");
	ring_strategy_delete(s);
	const char *k2[] = {"class", "replication_factor"};
	const char *v2[] = {"SimpleStrategy", "2"};
	s = ring_strategy_new(k2, v2, 2, false);
	ck_assert_str_eq(ring_strategy_describe(s), "SimpleStrategy{2}");
	ck_assert_int_eq(ring_strategy_rf(s, NULL), 2);
	ring_strategy_delete(s);
	const char *k3[] = {"class"};
	const char *v3[] = {"LocalStrategy"};
	s = ring_strategy_new(k3, v3, 1, true);
	ck_assert_int_eq(ring_strategy_class(s), RING_STRATEGY_LOCAL);
	ring_strategy_delete(s);
}
END_TEST

/* ---- placement properties ------------------------------------------------ */

static size_t count_in_dc(const struct ring *r, const char *dc)
{
	size_t n = 0;
	for (size_t i = 0; i < ring_endpoint_count(r); i++)
		n += strcmp(ring_endpoint_get(r, i)->dc, dc) == 0;
	return n;
}

static size_t racks_in_dc(const struct ring *r, const char *dc)
{
	const char *seen[64];
	size_t n = 0;
	for (size_t i = 0; i < ring_endpoint_count(r); i++) {
		const struct ring_endpoint *e = ring_endpoint_get(r, i);
		if (strcmp(e->dc, dc) != 0)
			continue;
		bool dup = false;
		for (size_t j = 0; j < n; j++)
			dup |= strcmp(seen[j], e->rack) == 0;
		if (!dup)
			seen[n++] = e->rack;
	}
	return n;
}

static void check_placement(const struct ring *r, const struct ring_strategy *s,
			    int64_t t)
{
	struct ring_replicas rep;
	ck_assert_int_eq(ring_replicas_for_token(r, s, t, &rep), 0);
	/* distinct */
	for (size_t i = 0; i < rep.n_natural; i++)
		for (size_t j = 0; j < i; j++)
			ck_assert(rep.natural[i] != rep.natural[j]);
	/* primary replica: the owner, when its DC replicates */
	int own = ring_owner(r, t);
	if (ring_strategy_rf(s, ring_endpoint_get(r, (size_t)own)->dc) > 0)
		ck_assert_uint_eq(rep.natural[0], (uint32_t)own);
	for (size_t d = 0; d < ring_dc_count(r); d++) {
		const char *dc = ring_dc_name(r, d);
		size_t rf = (size_t)ring_strategy_rf(s, dc);
		size_t nodes = count_in_dc(r, dc), racks = racks_in_dc(r, dc);
		size_t got = 0;
		const char *rk[64];
		size_t nrk = 0;
		for (size_t i = 0; i < rep.n_natural; i++) {
			const struct ring_endpoint *e =
				ring_endpoint_get(r, rep.natural[i]);
			if (strcmp(e->dc, dc) != 0)
				continue;
			got++;
			bool dup = false;
			for (size_t j = 0; j < nrk; j++)
				dup |= strcmp(rk[j], e->rack) == 0;
			if (!dup)
				rk[nrk++] = e->rack;
		}
		size_t want = rf < nodes ? rf : nodes;
		ck_assert_uint_eq(got, want);
		/* racks spread whenever there are enough */
		size_t want_racks = want < racks ? want : racks;
		ck_assert_uint_eq(nrk, want_racks);
	}
}

START_TEST(placement_properties_random_rings)
{
	struct rng rg;
	rng_seed(&rg, seed);
	for (int it = 0; it < 60; it++) {
		struct topo t;
		size_t ndc = 1 + rng_below(&rg, 3);
		topo_random(&rg, &t, ndc, 1 + rng_below(&rg, 5),
			    1 + rng_below(&rg, 12), 1 + rng_below(&rg, 8));
		struct ring *r = topo_build(&t);
		char spec[128];
		snprintf(spec, sizeof(spec), "dc1=%d,dc2=%d,dc3=%d,nodc=2",
			 (int)(1 + rng_below(&rg, 5)), (int)rng_below(&rg, 6),
			 (int)(1 + rng_below(&rg, 5)));
		struct ring_strategy *s = nts(spec);
		for (size_t i = 0; i < ring_token_count(r); i++) {
			int64_t tk = ring_token_at(r, i);
			check_placement(r, s, tk);
			if (tk != INT64_MIN)
				check_placement(r, s, tk - 1);
		}
		check_placement(r, s, INT64_MIN);
		ring_strategy_delete(s);
		ring_unref(r);
	}
}
END_TEST

START_TEST(placement_edge_cases)
{
	struct topo t;
	memset(&t, 0, sizeof(t));
	/* dc1: 2 nodes on one rack; dc2: 3 nodes on 3 racks */
	for (size_t i = 0; i < 5; i++) {
		snprintf(t.dc[i], 16, i < 2 ? "dc1" : "dc2");
		snprintf(t.rack[i], 16, i < 2 ? "r1" : "r%zu", i);
		t.ntok[i] = 1;
		t.tok[i][0] = (int64_t)i * 1000;
		t.n++;
	}
	struct ring *r = topo_build(&t);
	struct ring_strategy *s = nts("dc1=5,dc2=2,dc9=3");
	struct ring_replicas rep;
	ck_assert_int_eq(ring_replicas_for_token(r, s, 1, &rep), 0);
	/* RF above the DC's size: all of dc1; dc9 has no nodes: none. Walk
	 * from 1000: 10.0.0.1(dc1) 10.0.0.2(dc2) 10.0.0.3(dc2) 10.0.0.0(dc1) */
	ck_assert_uint_eq(rep.n_natural, 4);
	ck_assert_uint_eq(rep.natural[0], 1);
	ck_assert_uint_eq(rep.natural[1], 2);
	ck_assert_uint_eq(rep.natural[2], 3);
	ck_assert_uint_eq(rep.natural[3], 0);
	ck_assert_uint_eq(rep.n_pending, 0);
	ring_strategy_delete(s);
	/* SimpleStrategy ignores DCs; RF above the ring's size gives all */
	const char *k[] = {"class", "replication_factor"};
	const char *v[] = {"SimpleStrategy", "9"};
	s = ring_strategy_new(k, v, 2, false);
	ck_assert_int_eq(ring_replicas_for_token(r, s, 4500, &rep), 0);
	ck_assert_uint_eq(rep.n_natural, 5);
	ck_assert_uint_eq(rep.natural[0], 0); /* wraps to token 0 */
	ring_strategy_delete(s);
	/* LocalStrategy: only this node */
	const char *k2[] = {"class"};
	const char *v2[] = {"LocalStrategy"};
	s = ring_strategy_new(k2, v2, 1, true);
	ck_assert_int_eq(ring_replicas_for_token(r, s, 4500, &rep), 0);
	ck_assert_uint_eq(rep.n_natural, 1);
	ck_assert_int_eq((int)rep.natural[0], ring_local_endpoint(r));
	ring_strategy_delete(s);
	ring_unref(r);
	/* an empty ring has no replicas */
	struct ring_builder *b = ring_builder_new();
	r = ring_builder_build(b);
	s = nts("dc1=3");
	ck_assert_int_eq(ring_replicas_for_token(r, s, 4500, &rep), 0);
	ck_assert_uint_eq(rep.n_natural, 0);
	ck_assert_int_eq(ring_owner(r, 1), -1);
	ring_strategy_delete(s);
	ring_unref(r);
	ring_builder_delete(b);
}
END_TEST

START_TEST(placement_ranges_cover_rf_times)
{
	struct rng rg;
	rng_seed(&rg, seed);
	struct topo t;
	topo_random(&rg, &t, 2, 3, 6, 8);
	struct ring *r = topo_build(&t);
	struct ring_strategy *s = nts("dc1=3,dc2=2");
	const struct ring_placement *p = ring_placement_get(r, s);
	ck_assert_ptr_eq(p, ring_placement_get(r, s)); /* cached */
	double sum = 0, prim = 0;
	struct token_range_list l = {0};
	for (size_t e = 0; e < ring_endpoint_count(r); e++) {
		token_range_list_clear(&l);
		ck_assert_int_eq(ring_placement_ranges(p, e, false, false, &l),
				 0);
		sum += token_ranges_fraction(&l);
		token_range_list_clear(&l);
		ck_assert_int_eq(ring_placement_ranges(p, e, true, false, &l),
				 0);
		prim += token_ranges_fraction(&l);
	}
	ck_assert_double_eq_tol(sum, 5.0, 1e-9);
	ck_assert_double_eq_tol(prim, 1.0, 1e-9);
	/* the ownership helper agrees with the replica map for one DC */
	double own[64], own_sum = 0;
	ck_assert_int_eq(ring_dc_ownership(r, "dc1", 3, own), 0);
	for (size_t e = 0; e < ring_endpoint_count(r); e++)
		own_sum += own[e];
	ck_assert_double_eq_tol(own_sum, 3.0, 1e-9);
	token_range_list_free(&l);
	ring_strategy_delete(s);
	ring_unref(r);
}
END_TEST

/* ---- pending ------------------------------------------------------------- */

static bool has_ep(const uint32_t *v, size_t n, uint32_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

START_TEST(pending_for_boot_and_leaving)
{
	struct rng rg;
	rng_seed(&rg, seed);
	for (int it = 0; it < 20; it++) {
		struct topo t;
		topo_random(&rg, &t, 2, 3, 6, 4);
		size_t boot = rng_below(&rg, t.n), leave = rng_below(&rg, t.n);
		if (boot == leave)
			leave = (leave + 1) % t.n;
		struct ring_strategy *s = nts("dc1=3,dc2=2");
		/* the ring after the moves complete */
		struct topo after = t;
		after.ntok[leave] = 0;
		struct ring *ra = topo_build(&after);
		/* the ring before: boot has not joined, leave still owns */
		t.st[boot] = RING_STATUS_BOOT;
		t.st[leave] = RING_STATUS_LEAVING;
		struct ring *r = topo_build(&t);
		struct topo before = t;
		before.ntok[boot] = 0;
		before.st[boot] = before.st[leave] = RING_STATUS_NORMAL;
		struct ring *rb = topo_build(&before);
		for (int q = 0; q < 200; q++) {
			int64_t tk = (int64_t)rng_next(&rg);
			struct ring_replicas now, fut, old;
			ck_assert_int_eq(
				ring_replicas_for_token(r, s, tk, &now), 0);
			ck_assert_int_eq(
				ring_replicas_for_token(ra, s, tk, &fut), 0);
			ck_assert_int_eq(
				ring_replicas_for_token(rb, s, tk, &old), 0);
			/* natural replicas ignore BOOT */
			ck_assert_uint_eq(now.n_natural, old.n_natural);
			for (size_t i = 0; i < now.n_natural; i++)
				ck_assert_uint_eq(now.natural[i],
						  old.natural[i]);
			/* boot is pending exactly where it will replicate */
			ck_assert(has_ep(now.pending, now.n_pending,
					 (uint32_t)boot) ==
				  has_ep(fut.natural, fut.n_natural,
					 (uint32_t)boot));
			/* every future replica is reached by writes now when
			 * the leaving node is a current replica */
			if (has_ep(now.natural, now.n_natural, (uint32_t)leave))
				for (size_t i = 0; i < fut.n_natural; i++)
					ck_assert(has_ep(now.natural,
							 now.n_natural,
							 fut.natural[i]) ||
						  has_ep(now.pending,
							 now.n_pending,
							 fut.natural[i]));
			/* pending never repeats a natural replica */
			for (size_t i = 0; i < now.n_pending; i++)
				ck_assert(!has_ep(now.natural, now.n_natural,
						  now.pending[i]));
		}
		ring_unref(r);
		ring_unref(ra);
		ring_unref(rb);
		ring_strategy_delete(s);
	}
}
END_TEST

/* Readers on several threads share one ring and its lazily built maps. */
struct reader_arg {
	const struct ring *r;
	const struct ring_strategy *s;
	uint64_t sum;
};

static void *reader(void *p)
{
	struct reader_arg *a = p;
	struct ring_replicas rep;
	for (int64_t t = 0; t < 2000; t++) {
		if (ring_replicas_for_token(a->r, a->s, t * 7919 * 104729,
					    &rep))
			return NULL;
		a->sum += rep.n_natural ? rep.natural[0] + rep.n_natural : 0;
	}
	return p;
}

START_TEST(placement_cache_shared_by_threads)
{
	struct rng rg;
	rng_seed(&rg, seed);
	struct topo t;
	topo_random(&rg, &t, 3, 3, 8, 8);
	struct ring *r = topo_build(&t);
	struct ring_strategy *s1 = nts("dc1=3,dc2=2"), *s2 = nts("dc3=1");
	pthread_t th[4];
	struct reader_arg a[4];
	for (int i = 0; i < 4; i++) {
		a[i] = (struct reader_arg){r, i % 2 ? s1 : s2, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, reader, &a[i]),
				 0);
	}
	for (int i = 0; i < 4; i++) {
		void *res;
		pthread_join(th[i], &res);
		ck_assert_ptr_eq(res, &a[i]);
	}
	ck_assert(a[0].sum == a[2].sum && a[1].sum == a[3].sum);
	ck_assert_ptr_eq(ring_placement_get(r, s1), ring_placement_get(r, s1));
	ring_strategy_delete(s1);
	ring_strategy_delete(s2);
	ring_unref(r);
}
END_TEST

START_TEST(pending_ranges_of_boot_node)
{
	/* dc1: tokens 0,100,200 on A,B,C; D boots at 50 (RF 1): D is pending
	 * for (0, 50] only. */
	struct topo t;
	memset(&t, 0, sizeof(t));
	for (size_t i = 0; i < 4; i++) {
		snprintf(t.dc[i], 16, "dc1");
		snprintf(t.rack[i], 16, "r1");
		t.ntok[i] = 1;
		t.tok[i][0] = i < 3 ? (int64_t)i * 100 : 50;
		t.n++;
	}
	t.st[3] = RING_STATUS_BOOT;
	struct ring *r = topo_build(&t);
	struct ring_strategy *s = nts("dc1=1");
	const struct ring_placement *p = ring_placement_get(r, s);
	struct token_range_list l = {0};
	ck_assert_int_eq(ring_placement_ranges(p, 3, false, true, &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert(l.v[0].left == 0 && l.v[0].right == 50);
	token_range_list_clear(&l);
	ck_assert_int_eq(ring_placement_ranges(p, 3, false, false, &l), 0);
	ck_assert_uint_eq(l.n, 0);
	struct ring_replicas rep;
	ring_placement_lookup(p, 51, &rep);
	ck_assert_uint_eq(rep.n_natural, 1);
	ck_assert_uint_eq(rep.natural[0], 1);
	ck_assert_uint_eq(rep.n_pending, 0);
	ring_placement_lookup(p, 50, &rep);
	ck_assert_uint_eq(rep.n_pending, 1);
	ck_assert_uint_eq(rep.pending[0], 3);
	token_range_list_free(&l);
	ring_strategy_delete(s);
	ring_unref(r);
}
END_TEST

struct pieces {
	struct token_range_list fetch; /* where `boot` is pending */
	struct token_range_list hand;  /* where `leave` is natural */
	const struct ring_placement *p, *after;
	struct rng *rg;
	uint32_t boot, leave;
	size_t count;
};

static bool same_eps(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
	return na == nb && memcmp(a, b, na * sizeof(*a)) == 0;
}

static int check_piece(void *arg, struct token_range range,
		       const struct ring_replicas *rep)
{
	struct pieces *pc = arg;
	pc->count++;
	ck_assert_uint_gt(rep->n_pending, 0);
	/* the piece's replicas are those of every token in it */
	for (int q = 0; q < 8; q++) {
		int64_t t = q == 0 ? range.right
				   : (int64_t)((uint64_t)range.left + 1 +
					       rng_below(pc->rg, 1000));
		if (!token_range_contains(range, t))
			continue;
		struct ring_replicas at, fut;
		ring_placement_lookup(pc->p, t, &at);
		ck_assert(same_eps(at.natural, at.n_natural, rep->natural,
				   rep->n_natural));
		ck_assert(same_eps(at.pending, at.n_pending, rep->pending,
				   rep->n_pending));
		/* what the leaving endpoint hands over goes to the replicas
		 * the range has once it is gone */
		ring_placement_lookup(pc->after, t, &fut);
		if (has_ep(rep->natural, rep->n_natural, pc->leave))
			for (size_t i = 0; i < fut.n_natural; i++)
				ck_assert(has_ep(rep->natural, rep->n_natural,
						 fut.natural[i]) ||
					  has_ep(rep->pending, rep->n_pending,
						 fut.natural[i]));
	}
	if (has_ep(rep->pending, rep->n_pending, pc->boot))
		ck_assert_int_eq(token_range_list_push(&pc->fetch, range), 0);
	if (has_ep(rep->natural, rep->n_natural, pc->leave))
		ck_assert_int_eq(token_range_list_push(&pc->hand, range), 0);
	return 0;
}

/* a and b cover the same tokens, and a's ranges do not overlap */
static void same_cover(struct token_range_list *a,
		       const struct token_range_list *b)
{
	double sum = 0;
	for (size_t i = 0; i < a->n; i++)
		sum += token_range_fraction(a->v[i]);
	ck_assert_double_eq_tol(sum, token_ranges_fraction(b), 1e-9);
	struct token_range_list x = {0}, y = {0};
	ck_assert_int_eq(token_ranges_normalize(a), 0);
	ck_assert_int_eq(token_ranges_subtract(a, b, &x), 0);
	ck_assert_int_eq(token_ranges_subtract(b, a, &y), 0);
	ck_assert_uint_eq(x.n + y.n, 0);
	token_range_list_free(&x);
	token_range_list_free(&y);
}

static struct ring_strategy *simple(int rf)
{
	char v[16];
	snprintf(v, sizeof(v), "%d", rf);
	const char *k[] = {"class", "replication_factor"},
		   *vals[] = {"SimpleStrategy", v};
	struct ring_strategy *s = ring_strategy_new(k, vals, 2, false);
	ck_assert_msg(s != NULL, "%s", err_msg());
	return s;
}

struct whole {
	const struct ring_placement *p;
	struct rng *rg;
	struct token_range_list l;
	size_t count;
};

static int whole_piece(void *arg, struct token_range range,
		       const struct ring_replicas *rep)
{
	struct whole *w = arg;
	w->count++;
	ck_assert_uint_eq(rep->n_pending, 0);
	struct ring_replicas at;
	ring_placement_lookup(w->p, range.right, &at);
	ck_assert(same_eps(at.natural, at.n_natural, rep->natural,
			   rep->n_natural));
	ck_assert_int_eq(token_range_list_push(&w->l, range), 0);
	return 0;
}

START_TEST(moves_are_what_joiners_fetch_and_leavers_hand_over)
{
	struct rng rg;
	rng_seed(&rg, seed);
	for (int it = 0; it < 40; it++) {
		struct topo t;
		topo_random(&rg, &t, 2, 3, 6, 4);
		size_t boot = rng_below(&rg, t.n), leave = rng_below(&rg, t.n);
		if (boot == leave)
			leave = (leave + 1) % t.n;
		struct topo after = t;
		after.ntok[leave] = 0;
		t.st[boot] = RING_STATUS_BOOT;
		t.st[leave] = RING_STATUS_LEAVING;
		struct ring *r = topo_build(&t), *ra = topo_build(&after);
		struct ring_strategy *s =
			it % 2 ? nts("dc1=3,dc2=2") : simple(2);
		const struct ring_placement *p = ring_placement_get(r, s);
		struct pieces pc = {.p = p,
				    .after = ring_placement_get(ra, s),
				    .rg = &rg,
				    .boot = (uint32_t)boot,
				    .leave = (uint32_t)leave};
		ck_assert_int_eq(
			ring_placement_pieces(p, true, check_piece, &pc), 0);
		ck_assert_uint_gt(pc.count, 0);
		/* the joiner fetches exactly the ranges it is pending for */
		struct token_range_list want = {0};
		ck_assert_int_eq(
			ring_placement_ranges(p, boot, false, true, &want), 0);
		same_cover(&pc.fetch, &want);
		token_range_list_clear(&want);
		/* the leaver hands over every range it replicates that has
		 * a new replica */
		ck_assert_int_eq(
			ring_placement_ranges(p, leave, false, false, &want),
			0);
		ck_assert_double_le(token_ranges_fraction(&pc.hand) - 1e-9,
				    token_ranges_fraction(&want));
		ck_assert_double_gt(token_ranges_fraction(&pc.hand), 0);
		token_range_list_free(&pc.fetch);
		token_range_list_free(&pc.hand);
		token_range_list_free(&want);
		ring_strategy_delete(s);
		ring_unref(r);
		ring_unref(ra);
	}
	/* no one moving: nothing moves */
	struct topo t;
	topo_random(&rg, &t, 1, 2, 5, 4);
	struct ring *r = topo_build(&t);
	struct ring_strategy *s = simple(2);
	struct pieces none = {.p = ring_placement_get(r, s), .rg = &rg};
	ck_assert_int_eq(
		ring_placement_pieces(none.p, true, check_piece, &none), 0);
	ck_assert_uint_eq(none.count, 0);
	/* every piece of a settled ring: the whole ring, once, each with
	 * the replicas of its tokens */
	struct whole w = {.p = none.p, .rg = &rg};
	ck_assert_int_eq(ring_placement_pieces(none.p, false, whole_piece, &w),
			 0);
	ck_assert_uint_gt(w.count, 1);
	double sum = 0;
	for (size_t i = 0; i < w.l.n; i++)
		sum += token_range_fraction(w.l.v[i]);
	ck_assert_double_eq_tol(sum, 1.0, 1e-9);
	ck_assert_int_eq(token_ranges_normalize(&w.l), 0);
	ck_assert_double_eq_tol(token_ranges_fraction(&w.l), 1.0, 1e-9);
	token_range_list_free(&w.l);
	ring_strategy_delete(s);
	ring_unref(r);
}
END_TEST

/* ---- snitch -------------------------------------------------------------- */

START_TEST(snitch_orders_by_proximity)
{
	struct topo t;
	memset(&t, 0, sizeof(t));
	const char *dcs[] = {"dc2", "dc1", "dc1", "dc1", "dc2"};
	const char *racks[] = {"r1", "r2", "r1", "r1", "r1"};
	for (size_t i = 0; i < 5; i++) {
		snprintf(t.dc[i], 16, "%s", dcs[i]);
		snprintf(t.rack[i], 16, "%s", racks[i]);
		t.ntok[i] = 1;
		t.tok[i][0] = (int64_t)i;
		t.n++;
	}
	struct ring *r = topo_build(&t);
	uint32_t eps[] = {0, 1, 2, 3, 4};
	ring_snitch_sort(r, 3, eps, 5);
	/* self, same rack, same dc other rack, other dc (stable) */
	uint32_t want[] = {3, 2, 1, 0, 4};
	for (size_t i = 0; i < 5; i++)
		ck_assert_uint_eq(eps[i], want[i]);
	ck_assert_int_eq(ring_snitch_proximity(r, 3, 3), 0);
	ck_assert_int_eq(ring_snitch_proximity(r, 3, 2), 1);
	ck_assert_int_eq(ring_snitch_proximity(r, 3, 1), 2);
	ck_assert_int_eq(ring_snitch_proximity(r, 3, 0), 3);
	ring_unref(r);
}
END_TEST

int main(void)
{
	seed = test_seed(20261130);
	Suite *s = suite_create("ring");
	TCase *tc = tcase_create("murmur3");
	tcase_add_test(tc, murmur3_matches_driver_vectors);
	tcase_add_test(tc, murmur3_compound_key_layout);
	tcase_add_test(tc, murmur3_streaming_equals_flat);
	suite_add_tcase(s, tc);
	tc = tcase_create("ranges");
	tcase_add_test(tc, range_contains_and_wrap);
	tcase_add_test(tc, range_split_equal);
	tcase_add_test(tc, range_normalize_forms);
	tcase_add_test(tc, range_set_algebra_pointwise);
	tcase_add_test(tc, token_parse_limits);
	suite_add_tcase(s, tc);
	tc = tcase_create("ring");
	tcase_add_test(tc, ring_refuses_conflicts);
	tcase_add_test(tc, ring_every_token_owned_once);
	suite_add_tcase(s, tc);
	tc = tcase_create("strategy");
	tcase_add_test(tc, strategy_errors_use_cassandra_wording);
	tcase_add_test(tc, strategy_parses_names_and_describes);
	suite_add_tcase(s, tc);
	tc = tcase_create("placement");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, placement_properties_random_rings);
	tcase_add_test(tc, placement_edge_cases);
	tcase_add_test(tc, placement_ranges_cover_rf_times);
	tcase_add_test(tc, pending_for_boot_and_leaving);
	tcase_add_test(tc, pending_ranges_of_boot_node);
	tcase_add_test(tc, moves_are_what_joiners_fetch_and_leavers_hand_over);
	tcase_add_test(tc, placement_cache_shared_by_threads);
	tcase_add_test(tc, snitch_orders_by_proximity);
	suite_add_tcase(s, tc);
	return test_run(s);
}
