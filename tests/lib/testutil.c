#include "tests/lib/testutil.h"

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t used_seed;
static int seed_used;

uint64_t test_seed(uint64_t fallback)
{
	const char *env = getenv("CASSINI_SEED");
	used_seed = env && *env ? strtoull(env, NULL, 0) : fallback;
	seed_used = 1;
	return used_seed;
}

const char *test_tmpdir(const char *tag)
{
	static _Thread_local char path[PATH_MAX];
	const char *base = getenv("TMPDIR");
	snprintf(path, sizeof(path), "%s/cassini-%s-XXXXXX",
		 base && *base ? base : "/tmp", tag);
	if (!mkdtemp(path)) {
		perror("mkdtemp");
		abort();
	}
	return path;
}

static int rm_entry(const char *p, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

void test_tmpdir_remove(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int test_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (failed && seed_used)
		fprintf(stderr, "seed: CASSINI_SEED=%llu\n",
			(unsigned long long)used_seed);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
