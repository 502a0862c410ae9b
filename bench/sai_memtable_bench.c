/*
 * sai_memtable_bench: what a paged lookup of one term walks per step in a
 * memtable's index (docs/indexes.md, "Paged lookups"), and the indexed
 * writes' rate.
 *
 *   sai_memtable_bench [--num=1000000] [--terms=1] [--limit=100]
 *                      [--dir=/tmp]
 *
 * Writes `num` partitions (k int, v int, an index on v) whose v takes
 * `terms` values, into one memtable (nothing is flushed), then walks the
 * term v = 0 a page of `limit` partitions at a time, each step resuming
 * after the last partition given. Prints the writes' rate and the index
 * entries walked per step (storage_index_keys.visited).
 */
#include "common/env_real.h"
#include "common/err.h"
#include "storage/storage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long arg_long(const char *a, const char *name, long def)
{
	size_t n = strlen(name);
	return strncmp(a, name, n) == 0 && a[n] == '=' ? atol(a + n + 1) : def;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

int main(int argc, char **argv)
{
	long num = 1000000, terms = 1, limit = 100;
	const char *dir = "/tmp";
	for (int i = 1; i < argc; i++) {
		num = arg_long(argv[i], "--num", num);
		terms = arg_long(argv[i], "--terms", terms);
		limit = arg_long(argv[i], "--limit", limit);
		if (strncmp(argv[i], "--dir=", 6) == 0)
			dir = argv[i] + 6;
	}
	if (num < 1 || terms < 1 || limit < 1) {
		fprintf(stderr, "bad arguments\n");
		return 2;
	}
	char base[4096], data[4200], log[4200];
	snprintf(base, sizeof(base), "%s/sai-mt-bench-XXXXXX", dir);
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(data, sizeof(data), "%s/data", base);
	snprintf(log, sizeof(log), "%s/commitlog", base);
	struct env *env = env_real_new(NULL);
	struct storage_options o;
	storage_options_default(&o);
	o.env = env;
	o.data_dir = data;
	o.commitlog_dir = log;
	o.auto_compaction = false;
	o.memtable_heap_space = 8ull << 30;
	uint8_t id[16] = {0x5b, 1};
	struct storage_table_meta *t = storage_table_meta_new("ks", "t", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	storage_table_meta_add_column(t, "k", STORAGE_COLUMN_PARTITION_KEY, &ti,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &ti,
				      false);
	storage_table_meta_add_index(t, "iv", 1, STORAGE_INDEX_VALUE, false);
	struct storage *db = storage_new(&o);
	if (!db || storage_table_add(db, t, true) || storage_start(db)) {
		fprintf(stderr, "open: %s\n", err_msg());
		return 1;
	}
	double t0 = now_s();
	for (long i = 0; i < num; i++) {
		uint8_t k[4], v[4];
		be32(k, (uint32_t)i);
		be32(v, (uint32_t)(i % terms));
		struct storage_mutation *m = storage_mutation_new(t, k, 4);
		if (!m || storage_mutation_put_marker(m, 1000 + i, 0, 1) ||
		    storage_mutation_put(m, 1, NULL, 0, v, 4, 1000 + i, 0, 1) ||
		    storage_apply_sync(db, m)) {
			fprintf(stderr, "write: %s\n", err_msg());
			return 1;
		}
		storage_mutation_delete(m);
	}
	double t1 = now_s();
	printf("writes: %ld partitions, %ld terms, %.0f writes/s\n", num, terms,
	       (double)num / (t1 - t0));
	uint8_t v0[4] = {0, 0, 0, 0};
	struct slice v = {v0, 4};
	struct storage_index_page pg = {.limit = (size_t)limit};
	uint8_t after[64];
	uint64_t steps = 0, total = 0, max_visited = 0, got = 0;
	double t2 = now_s();
	for (;;) {
		struct storage_index_keys ks;
		if (storage_index_candidates(db, id, "iv", &v, 1, 0, 0, &pg,
					     &ks)) {
			fprintf(stderr, "candidates: %s\n", err_msg());
			return 1;
		}
		steps++;
		got += ks.count;
		total += ks.visited;
		if (ks.visited > max_visited)
			max_visited = ks.visited;
		bool more = ks.more && ks.resume_key.len <= sizeof(after);
		if (more) {
			memcpy(after, ks.resume_key.ptr, ks.resume_key.len);
			pg.after = true;
			pg.after_token = ks.resume_token;
			pg.after_key = (struct slice){after, ks.resume_key.len};
		}
		storage_index_keys_free(&ks);
		if (!more)
			break;
	}
	double t3 = now_s();
	printf("paged walk of one term (%llu partitions), limit %ld: %llu "
	       "steps; entries walked per step: max %llu, mean %.1f; %.3f s "
	       "(%.1f us per step)\n",
	       (unsigned long long)got, limit, (unsigned long long)steps,
	       (unsigned long long)max_visited, (double)total / (double)steps,
	       t3 - t2, (t3 - t2) * 1e6 / (double)steps);
	storage_delete(db);
	storage_table_meta_delete(t);
	env_real_delete(env);
	char cmd[4300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : 1;
}
