/*
 * Helpers shared by the Check suites.
 *
 * test_seed() is the suite's PRNG seed: CASSINI_SEED from the environment,
 * else the given default. test_run() prints it on failure, so a failing
 * randomized run can be replayed exactly with CASSINI_SEED=<seed>.
 */
#ifndef CASSINI_TESTS_TESTUTIL_H
#define CASSINI_TESTS_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Fails unless the string `hay` contains `needle`, showing both. */
#define ck_assert_contains(hay, needle)                                        \
	ck_assert_msg(strstr(hay, needle) != NULL, "'%s' lacks '%s'", hay,     \
		      needle)

/* Call while building the suite (in the parent, before Check forks each
 * test), keep the value in a static, and use it in the tests. */
uint64_t test_seed(uint64_t fallback);

/* A fresh empty directory under $TMPDIR, removed by test_tmpdir_remove. The
 * returned string is static to the calling thread until the next call. */
const char *test_tmpdir(const char *tag);
void test_tmpdir_remove(const char *path);

/* Heap bytes the process holds allocated now (ASan's count under ASan,
 * else glibc's main arena in use: allocations of the calling thread), for
 * tests that check that a churn returns what it took. */
size_t test_heap_in_use(void);

/* Runs the suite, prints the seed when anything failed, returns the exit
 * status for main(). */
int test_run(Suite *s);

#endif
