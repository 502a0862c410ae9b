/* The CAS-register linearizability checker (tests/sim/lincheck.h) on
 * hand-built histories: it must accept the linearizable ones and reject
 * the others, or a passing simulation proves nothing. */
#include "tests/lib/testutil.h"
#include "tests/sim/lincheck.h"

#define BUDGET 1000000

static struct lin_op rd(int64_t v, uint64_t c, uint64_t r)
{
	return (struct lin_op){.kind = LIN_READ, .out = v, .call = c, .ret = r};
}

static struct lin_op wr(int64_t v, uint64_t c, uint64_t r)
{
	return (struct lin_op){.kind = LIN_WRITE, .a = v, .call = c, .ret = r};
}

static struct lin_op cas(int64_t a, int64_t b, enum lin_res res, int64_t out,
			 uint64_t c, uint64_t r)
{
	return (struct lin_op){.kind = LIN_CAS,
			       .res = res,
			       .a = a,
			       .b = b,
			       .out = out,
			       .call = c,
			       .ret = res == LIN_UNKNOWN ? LIN_INF : r};
}

#define CHECK(expect, init, ...)                                               \
	do {                                                                   \
		struct lin_op h[] = {__VA_ARGS__};                             \
		ck_assert_int_eq(lin_check(h, sizeof(h) / sizeof(h[0]), init,  \
					   BUDGET, NULL),                      \
				 expect);                                      \
	} while (0)

START_TEST(sequential_histories)
{
	CHECK(LIN_LINEARIZABLE, 0, wr(1, 0, 1), rd(1, 2, 3),
	      cas(1, 2, LIN_OK, 0, 4, 5), rd(2, 6, 7),
	      cas(1, 3, LIN_FAIL, 2, 8, 9));
	/* a read of the old value after the write returned */
	CHECK(LIN_VIOLATION, 0, wr(1, 0, 10), rd(0, 20, 30));
	/* a failed CAS that saw a value nobody wrote */
	CHECK(LIN_VIOLATION, 0, cas(0, 1, LIN_FAIL, 3, 0, 1));
	/* a failed CAS whose condition held */
	CHECK(LIN_VIOLATION, 0, cas(0, 1, LIN_FAIL, 0, 0, 1));
	CHECK(LIN_LINEARIZABLE, LIN_NULL, cas(LIN_NULL, 5, LIN_OK, 0, 0, 1),
	      rd(5, 2, 3));
}
END_TEST

START_TEST(concurrent_histories)
{
	/* reads overlapping a write may see either value, in order */
	CHECK(LIN_LINEARIZABLE, 0, wr(1, 0, 100), rd(0, 10, 20), rd(1, 30, 40));
	/* but never new then old */
	CHECK(LIN_VIOLATION, 0, wr(1, 0, 100), rd(1, 10, 20), rd(0, 30, 40));
	/* two CASes from the same value cannot both apply */
	CHECK(LIN_VIOLATION, 0, cas(0, 1, LIN_OK, 0, 0, 10),
	      cas(0, 2, LIN_OK, 0, 5, 15));
	/* ... unless one saw the other's result */
	CHECK(LIN_LINEARIZABLE, 0, cas(0, 1, LIN_OK, 0, 0, 10),
	      cas(1, 2, LIN_OK, 0, 5, 15), rd(2, 20, 30));
	/* the lost update Jepsen found: both increments acknowledged, the
	 * register shows one */
	CHECK(LIN_VIOLATION, 0, cas(0, 1, LIN_OK, 0, 0, 10),
	      cas(1, 2, LIN_OK, 0, 20, 30), rd(1, 40, 50));
}
END_TEST

START_TEST(unknown_outcomes)
{
	/* a timed-out CAS may take effect later... */
	CHECK(LIN_LINEARIZABLE, 0, cas(0, 5, LIN_UNKNOWN, 0, 0, 0),
	      rd(0, 10, 20), rd(5, 100, 110));
	/* ...or never */
	CHECK(LIN_LINEARIZABLE, 0, cas(0, 5, LIN_UNKNOWN, 0, 0, 0),
	      rd(0, 100, 110));
	/* but not before it was invoked */
	CHECK(LIN_VIOLATION, 0, rd(5, 0, 10), cas(0, 5, LIN_UNKNOWN, 0, 20, 0));
	/* nor twice, nor undo itself */
	CHECK(LIN_VIOLATION, 0, cas(0, 5, LIN_UNKNOWN, 0, 0, 0), rd(5, 10, 20),
	      rd(0, 30, 40));
	/* nor from a value it did not expect */
	CHECK(LIN_VIOLATION, 0, wr(3, 0, 1), cas(0, 5, LIN_UNKNOWN, 0, 2, 0),
	      rd(5, 10, 20));
}
END_TEST

/* A larger history built to be linearizable (a chain of increments with
 * overlapping reads) is accepted, and the same with one stale read is not. */
START_TEST(longer_histories)
{
	struct lin_op h[120];
	size_t n = 0;
	for (int i = 0; i < 60; i++) {
		uint64_t t = (uint64_t)i * 100;
		h[n++] = cas(i, i + 1, LIN_OK, 0, t, t + 150);
		h[n++] = rd(i + 1, t + 140, t + 160);
	}
	ck_assert_int_eq(lin_check(h, n, 0, BUDGET, NULL), LIN_LINEARIZABLE);
	h[n - 1] = rd(3, 5940, 5960);
	size_t longest;
	ck_assert_int_eq(lin_check(h, n, 0, BUDGET, &longest), LIN_VIOLATION);
	ck_assert_uint_gt(longest, 100);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lincheck");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, sequential_histories);
	tcase_add_test(tc, concurrent_histories);
	tcase_add_test(tc, unknown_outcomes);
	tcase_add_test(tc, longer_histories);
	suite_add_tcase(s, tc);
	return test_run(s);
}
