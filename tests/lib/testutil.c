#include "tests/lib/testutil.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#endif
#ifdef TEST_ASAN
#include <sanitizer/allocator_interface.h>
#else
#include <malloc.h>
#endif

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

size_t test_heap_in_use(void)
{
#ifdef TEST_ASAN
	return __sanitizer_get_current_allocated_bytes();
#else
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
#endif
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
