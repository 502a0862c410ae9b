/*
 * sai_component_bench: what an open SAI component holds in memory and what
 * a paged lookup reads per step (docs/indexes.md, "Paged lookups").
 *
 *   sai_component_bench [--num=1000000] [--terms=1] [--limit=100]
 *                       [--hold=0] [--dir=/tmp]
 *
 * Builds a component of `num` entries over `terms` 4-byte terms with keys
 * as the engine writes them (8-byte token, a one-int partition key),
 * saves it, opens it (no block cache) and walks one term a page of
 * `limit` keys at a time, each step resuming from the key after the last
 * one given. Prints the component's size, the bytes the open component
 * holds, and the entries decoded and blocks read per step.
 *
 * --hold=0 builds as the builder did before it was bounded: every pair
 * held, the component laid out in memory, then saved. --hold=N holds at
 * most N pairs (sorted runs spilled to files in --dir and merged) and
 * lays the component out to its file a block at a time, as the SSTable
 * writer does (SAI_BUILDER_HOLD = 65536). Either way it prints the
 * process's peak RSS once the component is written (before it is read).
 */
#include "common/env_real.h"
#include "storage/sai_component.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

struct page {
	long limit, seen;
	bool more;
	uint8_t next[64]; /* the first key not given: the next step's start */
	uint32_t next_len;
};

static bool visit(void *arg, bool first, const uint8_t *key, uint32_t len)
{
	struct page *p = arg;
	(void)first;
	if (p->seen == p->limit) {
		p->more = true;
		if (len <= sizeof(p->next)) {
			memcpy(p->next, key, len);
			p->next_len = len;
		}
		return false;
	}
	p->seen++;
	return true;
}

static long arg_long(const char *a, const char *name, long def)
{
	size_t n = strlen(name);
	return strncmp(a, name, n) == 0 && a[n] == '=' ? atol(a + n + 1) : def;
}

int main(int argc, char **argv)
{
	long num = 1000000, terms = 1, limit = 100, hold = 0;
	const char *dir = "/tmp";
	for (int i = 1; i < argc; i++) {
		num = arg_long(argv[i], "--num", num);
		terms = arg_long(argv[i], "--terms", terms);
		limit = arg_long(argv[i], "--limit", limit);
		hold = arg_long(argv[i], "--hold", hold);
		if (strncmp(argv[i], "--dir=", 6) == 0)
			dir = argv[i] + 6;
	}
	if (num < 1 || terms < 1 || terms > 65536 || limit < 1 || hold < 0) {
		fprintf(stderr, "bad arguments\n");
		return 2;
	}
	struct env *env = env_real_new(NULL);
	char path[4096], prefix[4096], tmp[4200];
	snprintf(path, sizeof(path), "%s/sai-bench-SAI_i.db", dir);
	snprintf(prefix, sizeof(prefix), "%s/tmp-sai-bench-run", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	struct sai_builder b;
	sai_builder_init(&b);
	if (!env || (hold && sai_builder_spill(&b, env, prefix, (size_t)hold,
					       SAI_BUILDER_HOLD_BYTES)))
		return 1;
	for (long i = 0; i < num; i++) {
		long t = i % terms;
		uint8_t term[4] = {0, 0, (uint8_t)(t >> 8), (uint8_t)t};
		uint8_t k[15];
		uint64_t tok = (uint64_t)i * 0x9E3779B97F4A7C15ull;
		for (int j = 0; j < 8; j++)
			k[j] = (uint8_t)(tok >> (56 - 8 * j));
		uint8_t pk[7] = {0,
				 4,
				 (uint8_t)(i >> 24),
				 (uint8_t)(i >> 16),
				 (uint8_t)(i >> 8),
				 (uint8_t)i,
				 0};
		memcpy(k + 8, pk, sizeof(pk));
		if (sai_builder_add(&b, term, 4, k, sizeof(k)) != SAI_OK)
			return 1;
	}
	uint8_t *buf = NULL;
	size_t len = 0;
	size_t peak = b.peak;
	uint64_t spilled = b.spilled;
	if (!hold) {
		if (sai_build_ident(&b, "c3 t0 f0", 8, &buf, &len) != SAI_OK ||
		    sai_component_save(env, path, buf, len) != SAI_OK)
			return 1;
	} else {
		struct env_file *out;
		uint64_t n = 0;
		if (env_file_open(env, tmp,
				  ENV_FILE_WRITE | ENV_FILE_CREATE |
					  ENV_FILE_TRUNC,
				  &out) ||
		    sai_build_write(&b, "c3 t0 f0", 8, out, &n) != SAI_OK ||
		    env_file_sync(out) || env_file_close(out) ||
		    env_rename(env, tmp, path))
			return 1;
		len = (size_t)n;
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	sai_builder_free(&b);
	printf("build (hold %ld): pairs held at most %zu, %llu spilled; peak "
	       "RSS %.1f MiB\n",
	       hold, peak, (unsigned long long)spilled,
	       (double)ru.ru_maxrss / 1024.0);
	struct sai_file *f;
	if (sai_file_open(env, path, NULL, &f) != SAI_OK) {
		fprintf(stderr, "cannot write or open %s\n", path);
		return 1;
	}
	struct sai_file_stats st;
	sai_file_stats(f, &st);
	printf("component: %ld entries, %ld terms, %zu bytes, %u blocks\n", num,
	       terms, len, st.blocks);
	printf("held open: %zu bytes (header and directory)\n",
	       sai_file_resident_bytes(f));
	uint8_t term[4] = {0, 0, 0, 0};
	struct sai_bound tb = {term, 4, true};
	struct page p = {.limit = limit};
	uint64_t max_visited = 0, total = 0, steps = 0, max_reads = 0;
	for (;;) {
		struct sai_file_stats a, c;
		uint64_t visited = 0;
		uint8_t from[64];
		uint32_t from_len = p.next_len;
		memcpy(from, p.next, from_len);
		p.seen = 0;
		p.more = false;
		sai_file_stats(f, &a);
		if (sai_file_lookup(f, &tb, &tb, steps ? from : NULL, from_len,
				    visit, &p, &visited) != SAI_OK)
			return 1;
		sai_file_stats(f, &c);
		if (c.block_reads - a.block_reads > max_reads)
			max_reads = c.block_reads - a.block_reads;
		if (visited > max_visited)
			max_visited = visited;
		total += visited;
		steps++;
		if (!p.more)
			break;
	}
	printf("paged walk of one term (%ld keys), limit %ld: %llu steps; "
	       "entries decoded per step: max %llu, mean %.1f; blocks read "
	       "per step: max %llu\n",
	       (num + terms - 1) / terms, limit, (unsigned long long)steps,
	       (unsigned long long)max_visited, (double)total / (double)steps,
	       (unsigned long long)max_reads);
	sai_file_close(f);
	env_unlink(env, path);
	env_real_delete(env);
	free(buf);
	return 0;
}
