/*
 * storage_bench: db_bench's flags and result lines, over the storage
 * engine (commitlog on, as db_bench with its WAL on).
 *
 *   storage_bench --benchmarks=fillrandom,overwrite,readrandom \
 *       --num=1000000 --value_size=100 --key_size=16 --sync=false \
 *       --compression_type=lz4 [--db=DIR] [--commitlog_sync=group \
 *       --writers=50 --group_window_ms=2] [--seed=N] [--block_size=4096]
 *       [--cache_size=8388608] [--write_buffer_size=67108864]
 *       [--reads=N] [--use_existing_db=1] [--disable_auto_compactions=1]
 *       [--read_stats=1] [--disk_access_mode=mmap|mmap_index_only|standard]
 *       [--mmap_read=true|false]
 *
 * Besides db_bench's fillrandom, overwrite and readrandom: fillseq
 * (keys 0..num-1 in order, so every key exists; partitions are still in
 * token order, random), compact (compaction rounds until none applies),
 * compactmajor (everything into one SSTable) and sleepN (N seconds, the
 * background compactions meanwhile). --use_existing_db reopens the
 * database the last run left instead of starting empty (load once, read
 * many). --read_stats prints per-read averages of what the point reads
 * met: SSTables checked by their bloom filter, passed, holding the key,
 * read; index and data blocks used and missed by the block cache.
 *
 * Each benchmark prints "name : X micros/op Y ops/sec; Z MB/s" as db_bench
 * does. --sync=true acknowledges every write after fdatasync (batch mode).
 * --writers=N runs N threads each waiting for its own acknowledgements
 * (with --commitlog_sync=group: acknowledged durable writes per second).
 * After the fills it flushes and prints the RSS growth over the empty
 * engine. A write refused because the memtables are full (the flushes
 * fell behind: a busy machine) waits for room and is written again; the
 * result line counts them. Not a test: never run by CTest.
 */
#include "common/env_real.h"
#include "common/err.h"
#include "common/rand.h"
#include "conf/conf.h"
#include "storage/storage.h"

#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

struct opts {
	char benchmarks[256];
	long num, value_size, key_size, writers, window_ms, block_size;
	long cache_size, write_buffer_size, reads;
	bool sync, use_existing, no_auto_compaction, read_stats;
	int compression;
	int sync_mode;
	int access; /* enum storage_disk_access */
	char db[512];
	uint64_t seed;
};

static struct storage_table_meta *table;
static struct storage *db;
static _Atomic int64_t ts_counter = 1;
static _Atomic long refused; /* writes retried after waiting for room */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

static void make_key(const struct opts *o, uint64_t k, uint8_t *out)
{
	/* db_bench's layout: the number big-endian first, then padding */
	memset(out, '0', (size_t)o->key_size);
	for (int i = 0; i < 8 && i < o->key_size; i++)
		out[i] = (uint8_t)(k >> (56 - 8 * i));
}

static _Atomic uint64_t seq_next; /* fillseq's next key */

static int put(const struct opts *o, struct rng *r, uint8_t *key, uint8_t *val,
	       bool wait, bool seq)
{
	make_key(o,
		 seq ? atomic_fetch_add(&seq_next, 1)
		     : rng_below(r, (uint64_t)o->num),
		 key);
	for (long i = 0; i < o->value_size; i += 8) {
		uint64_t x = rng_next(r);
		memcpy(val + i, &x,
		       (size_t)(o->value_size - i < 8 ? o->value_size - i : 8));
	}
	struct storage_mutation *m =
		storage_mutation_new(table, key, (size_t)o->key_size);
	int64_t ts = atomic_fetch_add(&ts_counter, 1);
	int rc = !m || storage_mutation_put(m, 1, NULL, 0, val,
					    (size_t)o->value_size, ts, 0, 0);
	/* A write the engine refuses while the memtables are full (a busy
	 * machine: the flushes fall behind) applied nothing: wait for room
	 * and write it again, as a client would, rather than fail the run. */
	while (!rc && (wait ? storage_apply_sync(db, m)
			    : storage_apply(db, m, NULL, NULL)) != 0) {
		if (err_code() != ERR_OVERLOADED ||
		    storage_wait_for_room(db, 0) != 0)
			rc = -1;
		else
			atomic_fetch_add(&refused, 1);
	}
	storage_mutation_delete(m);
	return rc;
}

struct writer {
	const struct opts *o;
	long ops;
	uint64_t seed;
	bool seq;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct rng r;
	rng_seed(&r, w->seed);
	uint8_t key[1024], *val = malloc((size_t)w->o->value_size + 8);
	for (long i = 0; i < w->ops; i++)
		if (put(w->o, &r, key, val, true, w->seq)) {
			fprintf(stderr, "write failed: %s\n", err_msg());
			exit(1);
		}
	free(val);
	return NULL;
}

static void malloc_probe(void)
{
	if (getenv("BENCH_MALLOC")) {
		struct mallinfo2 mi = mallinfo2();
		fprintf(stderr,
			"malloc: arena %zu KiB, mmap %zu KiB, in use %zu KiB, "
			"free %zu KiB\n",
			mi.arena / 1024, mi.hblkhd / 1024, mi.uordblks / 1024,
			mi.fordblks / 1024);
		malloc_stats();
	}
}

static void print_rss(long rss0)
{
	struct storage_stats st;
	storage_stats(db, NULL, &st);
	printf("rss: empty engine %ld MiB, after load and flush %ld MiB "
	       "(+%ld MiB); memtables %" PRIu64 " KiB, %" PRIu64
	       " sstables, %" PRIu64 " flushes, %" PRIu64 " compactions\n",
	       rss0 / 1024, rss_kib() / 1024, (rss_kib() - rss0) / 1024,
	       st.memtable_bytes / 1024, st.sstable_count, st.flushes,
	       st.compactions);
	malloc_probe();
}

static void report(const char *name, long ops, double secs, double bytes,
		   const char *extra)
{
	printf("%-12s : %11.3f micros/op %ld ops/sec %.3f seconds %ld "
	       "operations;%7.1f MB/s%s\n",
	       name, secs * 1e6 / (double)ops, (long)((double)ops / secs), secs,
	       ops, bytes / secs / 1048576.0, extra);
	fflush(stdout);
}

static void fill(const struct opts *o, const char *name, uint64_t seed,
		 bool seq)
{
	atomic_store(&seq_next, 0);
	struct storage_stats st0;
	storage_stats(db, NULL, &st0);
	double t0 = now_s();
	long writers = o->writers > 0 ? o->writers : 1;
	if (o->writers > 1 || o->sync) {
		pthread_t th[256];
		struct writer w[256];
		if (writers > 256)
			writers = 256;
		for (long i = 0; i < writers; i++) {
			w[i] = (struct writer){o, o->num / writers,
					       seed + (uint64_t)i, seq};
			pthread_create(&th[i], NULL, writer_main, &w[i]);
		}
		for (long i = 0; i < writers; i++)
			pthread_join(th[i], NULL);
	} else {
		struct rng r;
		rng_seed(&r, seed);
		uint8_t key[1024], *val = malloc((size_t)o->value_size + 8);
		for (long i = 0; i < o->num; i++)
			if (put(o, &r, key, val, false, seq)) {
				fprintf(stderr, "write failed: %s\n",
					err_msg());
				exit(1);
			}
		free(val);
	}
	double secs = now_s() - t0;
	long ops = o->num / writers * writers;
	struct storage_stats st1;
	storage_stats(db, NULL, &st1);
	char extra[256] = "";
	uint64_t syncs = st1.commitlog_syncs - st0.commitlog_syncs;
	uint64_t gathers = st1.commitlog_gathers - st0.commitlog_gathers;
	if (syncs)
		snprintf(extra, sizeof(extra),
			 " %" PRIu64 " fdatasyncs (%.0f us), %.1f writes/sync, "
			 "%" PRIu64 " gathers (%.0f us)",
			 syncs,
			 (double)(st1.commitlog_sync_us -
				  st0.commitlog_sync_us) /
				 (double)syncs,
			 (double)(st1.commitlog_sync_writes -
				  st0.commitlog_sync_writes) /
				 (double)syncs,
			 gathers,
			 gathers ? (double)(st1.commitlog_gather_us -
					    st0.commitlog_gather_us) /
					   (double)gathers
				 : 0.0);
	long waited = atomic_exchange(&refused, 0);
	if (waited) {
		size_t n = strlen(extra);
		snprintf(extra + n, sizeof(extra) - n,
			 " %ld writes waited for memtable room", waited);
	}
	report(name, ops, secs,
	       (double)ops * (double)(o->key_size + o->value_size), extra);
}

/* CPU seconds of the process so far: user, system. */
static void cpu_s(double *user, double *sys)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	*user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
	*sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void readrandom(const struct opts *o, uint64_t seed)
{
	struct rng r;
	rng_seed(&r, seed);
	uint8_t key[1024];
	long found = 0, reads = o->reads > 0 ? o->reads : o->num;
	double bytes = 0;
	struct storage_read_stats st;
	memset(&st, 0, sizeof(st));
	struct storage_stats s0;
	storage_stats(db, NULL, &s0);
	double u0, k0, u1, k1;
	cpu_s(&u0, &k0);
	double t0 = now_s();
	for (long i = 0; i < reads; i++) {
		make_key(o, rng_below(&r, (uint64_t)o->num), key);
		struct storage_read_cmd cmd = {.key = key,
					       .key_len = (size_t)o->key_size,
					       .stats = o->read_stats ? &st
								      : NULL};
		struct storage_result *res;
		if (storage_read(db, table->id, &cmd, &res)) {
			fprintf(stderr, "read failed: %s\n", err_msg());
			exit(1);
		}
		if (res->row_count) {
			found++;
			bytes += (double)(o->key_size + o->value_size);
		}
		storage_result_delete(res);
	}
	double secs = now_s() - t0;
	cpu_s(&u1, &k1);
	char extra[128];
	snprintf(
		extra, sizeof(extra),
		" (%ld of %ld found); cpu %.3f micros/op (user %.3f, sys %.3f)",
		found, reads, (u1 - u0 + k1 - k0) * 1e6 / (double)reads,
		(u1 - u0) * 1e6 / (double)reads,
		(k1 - k0) * 1e6 / (double)reads);
	report("readrandom", reads, secs, bytes, extra);
	printf("readrandom   : %" PRIu64 " sstables\n", s0.sstable_count);
	if (o->read_stats) {
		double n = (double)reads;
		printf("per read     : %.2f bloom checks, %.2f passed, %.2f "
		       "held the key (%.4f false positives), %.2f sstables "
		       "read; index blocks %.2f (%.2f missed), data blocks "
		       "%.2f (%.2f missed), %.0f bytes decoded\n",
		       (double)st.bloom_checks / n, (double)st.bloom_passes / n,
		       (double)st.sstables_found / n,
		       (double)(st.bloom_passes - st.sstables_found) / n,
		       (double)st.sstables / n, (double)st.index_blocks / n,
		       (double)st.index_misses / n, (double)st.data_blocks / n,
		       (double)st.data_misses / n, (double)st.miss_bytes / n);
	}
	fflush(stdout);
}

static bool flag(const char *arg, const char *name, const char **val)
{
	size_t n = strlen(name);
	if (strncmp(arg, name, n) != 0 || arg[n] != '=')
		return false;
	*val = arg + n + 1;
	return true;
}

static void parse(int argc, char **argv, struct opts *o)
{
	snprintf(o->benchmarks, sizeof(o->benchmarks),
		 "fillrandom,overwrite,readrandom");
	o->num = 1000000;
	o->value_size = 100;
	o->key_size = 16;
	o->compression = STORAGE_COMPRESSION_LZ4;
	o->sync_mode = -1;
	o->window_ms = 2;
	o->block_size = 4096;            /* db_bench's default --block_size */
	o->cache_size = 8 << 20;         /* db_bench's default --cache_size */
	o->write_buffer_size = 64 << 20; /* db_bench's default */
	o->seed = 301;
	snprintf(o->db, sizeof(o->db), "/tmp/storage_bench");
	for (int i = 1; i < argc; i++) {
		const char *v;
		if (flag(argv[i], "--benchmarks", &v))
			snprintf(o->benchmarks, sizeof(o->benchmarks), "%s", v);
		else if (flag(argv[i], "--num", &v))
			o->num = atol(v);
		else if (flag(argv[i], "--value_size", &v))
			o->value_size = atol(v);
		else if (flag(argv[i], "--key_size", &v))
			o->key_size = atol(v);
		else if (flag(argv[i], "--sync", &v))
			o->sync = strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
		else if (flag(argv[i], "--writers", &v) ||
			 flag(argv[i], "--threads", &v))
			o->writers = atol(v);
		else if (flag(argv[i], "--write_buffer_size", &v))
			o->write_buffer_size = atol(v);
		else if (flag(argv[i], "--cache_size", &v))
			o->cache_size = atol(v);
		else if (flag(argv[i], "--block_size", &v))
			o->block_size = atol(v);
		else if (flag(argv[i], "--group_window_ms", &v))
			o->window_ms = atol(v);
		else if (flag(argv[i], "--reads", &v))
			o->reads = atol(v);
		else if (flag(argv[i], "--use_existing_db", &v))
			o->use_existing = atol(v) != 0;
		else if (flag(argv[i], "--disable_auto_compactions", &v))
			o->no_auto_compaction =
				strcmp(v, "true") == 0 || atol(v) != 0;
		else if (flag(argv[i], "--disk_access_mode", &v))
			o->access =
				strcmp(v, "standard") == 0
					? STORAGE_DISK_ACCESS_STANDARD
				: strcmp(v, "mmap_index_only") == 0
					? STORAGE_DISK_ACCESS_MMAP_INDEX_ONLY
					: STORAGE_DISK_ACCESS_MMAP;
		else if (flag(argv[i], "--mmap_read", &v))
			o->access = strcmp(v, "true") == 0 || atol(v) != 0
					    ? STORAGE_DISK_ACCESS_MMAP
					    : STORAGE_DISK_ACCESS_STANDARD;
		else if (flag(argv[i], "--read_stats", &v))
			o->read_stats = atol(v) != 0;
		else if (flag(argv[i], "--seed", &v))
			o->seed = strtoull(v, NULL, 10);
		else if (flag(argv[i], "--db", &v))
			snprintf(o->db, sizeof(o->db), "%s", v);
		else if (flag(argv[i], "--commitlog_sync", &v))
			o->sync_mode = strcmp(v, "group") == 0
					       ? CONF_COMMITLOG_SYNC_GROUP
				       : strcmp(v, "batch") == 0
					       ? CONF_COMMITLOG_SYNC_BATCH
					       : CONF_COMMITLOG_SYNC_PERIODIC;
		else if (flag(argv[i], "--compression_type", &v))
			o->compression = strcmp(v, "none") == 0
						 ? STORAGE_COMPRESSION_NONE
					 : strcmp(v, "zlib") == 0
						 ? STORAGE_COMPRESSION_DEFLATE
						 : STORAGE_COMPRESSION_LZ4;
		else if (strncmp(argv[i], "--", 2) == 0)
			fprintf(stderr, "storage_bench: ignoring %s\n",
				argv[i]);
	}
	if (o->key_size < 8 || o->key_size > 1000 || o->value_size < 0 ||
	    o->num <= 0) {
		fprintf(stderr, "storage_bench: bad sizes\n");
		exit(2);
	}
	if (o->sync_mode < 0)
		o->sync_mode = o->sync ? CONF_COMMITLOG_SYNC_BATCH
				       : CONF_COMMITLOG_SYNC_PERIODIC;
}

int main(int argc, char **argv)
{
	struct opts o;
	memset(&o, 0, sizeof(o));
	parse(argc, argv, &o);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", o.db);
	if (!o.use_existing && system(cmd) != 0)
		return 1;
	struct env *env = env_real_new(NULL);
	char data[600], log[600];
	snprintf(data, sizeof(data), "%s/data", o.db);
	snprintf(log, sizeof(log), "%s/commitlog", o.db);
	struct storage_options so;
	storage_options_default(&so);
	so.env = env;
	so.data_dir = data;
	so.commitlog_dir = log;
	so.commitlog_sync = o.sync_mode;
	so.commitlog_sync_group_window_ms = (uint64_t)o.window_ms;
	so.block_cache_size = o.cache_size > 0 ? (size_t)o.cache_size : 0;
	so.auto_compaction = !o.no_auto_compaction;
	so.disk_access_mode = o.access;
	/* db_bench's write_buffer_size is the memtable size that triggers a
	 * flush: memtable_heap_space * memtable_cleanup_threshold here */
	so.memtable_heap_space = (uint64_t)((double)o.write_buffer_size /
					    so.memtable_cleanup_threshold);
	uint8_t id[16] = {0xbe, 0x7c};
	table = storage_table_meta_new("bench", "kv", id);
	struct storage_type tb = {.kind = STORAGE_TYPE_BLOB};
	storage_table_meta_add_column(table, "k", STORAGE_COLUMN_PARTITION_KEY,
				      &tb, false);
	storage_table_meta_add_column(table, "v", STORAGE_COLUMN_REGULAR, &tb,
				      false);
	table->options.compression = (uint8_t)o.compression;
	table->options.chunk_length = (uint32_t)o.block_size;
	db = storage_new(&so);
	if (!db || storage_table_add(db, table, true) || storage_start(db)) {
		fprintf(stderr, "storage_bench: %s\n", err_msg());
		return 1;
	}
	long rss0 = rss_kib();
	printf("Keys:       %ld bytes each\nValues:     %ld bytes each\n"
	       "Entries:    %ld\nSync:       %s (commitlog_sync %d, writers "
	       "%ld)\n",
	       o.key_size, o.value_size, o.num, o.sync ? "true" : "false",
	       o.sync_mode, o.writers ? o.writers : 1);
	char *save = NULL;
	bool filled = false;
	unsigned nreads = 0;
	for (char *b = strtok_r(o.benchmarks, ",", &save); b;
	     b = strtok_r(NULL, ",", &save)) {
		if (strcmp(b, "fillrandom") == 0 ||
		    strcmp(b, "overwrite") == 0 || strcmp(b, "fillseq") == 0) {
			fill(&o, b, o.seed + (b[0] == 'o' ? 1000 : 0),
			     strcmp(b, "fillseq") == 0);
			filled = true;
		} else if (strcmp(b, "compact") == 0 ||
			   strcmp(b, "compactmajor") == 0) {
			if (filled) {
				storage_flush(db, NULL);
				print_rss(rss0);
				filled = false;
			}
			double t0 = now_s();
			if (storage_compact(db, table->id, b[7] == 'm')) {
				fprintf(stderr, "compact: %s\n", err_msg());
				return 1;
			}
			struct storage_stats st;
			storage_stats(db, NULL, &st);
			printf("%-12s : %.3f seconds, %" PRIu64 " sstables\n",
			       b, now_s() - t0, st.sstable_count);
		} else if (strncmp(b, "sleep", 5) == 0) {
			struct timespec ts = {atol(b + 5), 0};
			nanosleep(&ts, NULL);
		} else if (strcmp(b, "readrandom") == 0) {
			if (filled) {
				storage_flush(db, NULL);
				print_rss(rss0);
				filled = false;
			}
			/* each readrandom of the run reads other keys */
			readrandom(&o, o.seed + 2000 + 7 * (uint64_t)nreads++);
		} else {
			fprintf(stderr, "storage_bench: unknown benchmark %s\n",
				b);
		}
	}
	if (filled) {
		storage_flush(db, NULL);
		print_rss(rss0);
	}
	storage_delete(db);
	storage_table_meta_delete(table);
	env_real_delete(env);
	return 0;
}
