/*
 * cassini-tool sstablemetadata and sstabledump (tool_sstable.h): offline,
 * read SSTable files directly (storage/sstable_tool.h), talk to no node.
 * A damaged or missing component is reported (stderr, exit status 1)
 * and the next file is still read; nothing is ever written.
 */
#include "node/tools/tool_sstable.h"

#include "common/env_real.h"
#include "common/err.h"
#include "common/uuid.h"
#include "storage/schema.h"
#include "storage/sstable_tool.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void when(char *out, size_t cap, int64_t sec)
{
	time_t t = (time_t)sec;
	struct tm tm;
	if (!gmtime_r(&t, &tm) ||
	    !strftime(out, cap, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(out, cap, "?");
}

static void print_hist(const struct storage_sstable_meta *m)
{
	uint64_t total = 0;
	for (size_t i = 0; i < m->tomb_bins; i++)
		total += m->tomb_count[i];
	printf("Estimated tombstone drop times:\n");
	if (m->stats_version < 2)
		printf("   (not recorded: Statistics.db version 1)\n");
	else if (!m->tomb_bins)
		printf("   (none)\n");
	else
		printf("   %-36s | %s\n", "Drop Time", "Count  (%)");
	for (size_t i = 0; i < m->tomb_bins; i++) {
		char w[48];
		when(w, sizeof(w), m->tomb_point[i]);
		printf("   %-10" PRId64 " (%s) | %" PRIu64 " (%.0f)\n",
		       m->tomb_point[i], w, m->tomb_count[i],
		       100.0 * (double)m->tomb_count[i] / (double)total);
	}
}

static void print_sizes(const struct storage_sstable_meta *m)
{
	uint64_t total = 0;
	for (size_t i = 0; i < STORAGE_SSTABLE_SIZE_BUCKETS; i++)
		total += m->size_hist[i];
	printf("Partition Size:\n   %-14s | %s\n", "Size (bytes)",
	       "Count  (%)");
	for (size_t i = 0; i < STORAGE_SSTABLE_SIZE_BUCKETS; i++)
		if (m->size_hist[i])
			printf("   %-14llu | %" PRIu64 " (%.0f)\n", 1ull << i,
			       m->size_hist[i],
			       100.0 * (double)m->size_hist[i] / (double)total);
}

static void print_time(const char *label, int64_t us)
{
	char w[48];
	when(w, sizeof(w), us / 1000000);
	printf("%s: %" PRId64 " (%s)\n", label, us, w);
}

static void print_ldt(const char *label, int64_t sec, bool none)
{
	char w[48];
	if (none) {
		printf("%s: no tombstones\n", label);
		return;
	}
	when(w, sizeof(w), sec);
	printf("%s: %" PRId64 " (%s)\n", label, sec, w);
}

static void print_meta(const struct storage_sstable_meta *m, int64_t now,
		       int64_t gc_grace)
{
	printf("SSTable: %s/ca-%" PRIu64 "\n", m->dir, m->gen);
	printf("Partitioner: org.apache.cassandra.dht.Murmur3Partitioner\n");
	if (m->filter_ok)
		printf("Bloom Filter FP chance: %f (%" PRIu64 " bits, %u "
		       "hashes)\n",
		       storage_sstable_bloom_fp(m), m->bloom_bits, m->bloom_k);
	if (!m->stats_ok)
		return;
	printf("Statistics.db version: %u\n", m->stats_version);
	bool empty = m->min_ts > m->max_ts;
	if (!empty) {
		print_time("Minimum timestamp", m->min_ts);
		print_time("Maximum timestamp", m->max_ts);
	}
	print_ldt("SSTable min local deletion time", m->min_ldt,
		  m->min_ldt == INT64_MAX);
	print_ldt("SSTable max local deletion time", m->max_ldt,
		  m->max_ldt == INT64_MIN);
	if (m->stats_version >= 2 && m->uncompressed_size)
		printf("Compression ratio: %f\n",
		       (double)m->data_size / (double)m->uncompressed_size);
	else
		printf("Compression ratio: -1.0\n");
	printf("TTL min: %" PRId64 "\nTTL max: %" PRId64 "\n", m->min_ttl,
	       m->max_ttl);
	printf("First token: %" PRId64 "\nLast token: %" PRId64 "\n",
	       m->min_token, m->max_token);
	printf("Estimated droppable tombstones: %s%f\n",
	       m->stats_version < 2 ? "(not recorded) " : "",
	       storage_sstable_droppable(m, now - gc_grace));
	printf("SSTable Level: %u\n", m->level);
	printf("Repaired at: %" PRId64 "\n", m->repaired_at);
	char sid[UUID_TEXT_LEN + 1] = "--";
	if (m->pending)
		uuid_format(m->pending_repair, sid);
	printf("Pending repair: %s\n", sid);
	printf("Replay positions covered: {CommitLogPosition(segmentId=%" PRIu64
	       ", position=%" PRIu64 ")}\n",
	       m->commitlog_segment, m->commitlog_offset);
	if (m->stats_version >= 2 && m->created_at) {
		char w[48];
		when(w, sizeof(w), m->created_at);
		printf("Created at: %" PRId64 " (%s)\n", m->created_at, w);
	}
	printf("totalColumnsSet: %" PRIu64 "\n", m->cells);
	printf("Tombstones: %" PRIu64 " (partition deletions and range "
	       "tombstones: %" PRIu64 ")\n",
	       m->tombstones, m->markers);
	printf("Non-expiring live data: %s\n",
	       m->has_live_no_ttl ? "true" : "false");
	print_hist(m);
	print_sizes(m);
	printf("Estimated cardinality: %" PRIu64 "\n", m->partitions);
	if (m->summary_ok)
		printf("Index blocks: %" PRIu64 "\n", m->index_blocks);
	printf("Data.db bytes: %lld\nIndex.db bytes: %lld\n",
	       (long long)m->data_bytes, (long long)m->index_bytes);
	if (m->stats_version >= 2)
		printf("Uncompressed data bytes: %" PRIu64 "\n",
		       m->uncompressed_size);
}

/* The types of the columns of `kind` (not dropped), ", "-separated;
 * with names ("name:type") for static and regular columns. */
static void print_kind(const struct storage_sstable_column *c, size_t n,
		       uint8_t kind, bool names)
{
	bool first = true;
	for (size_t i = 0; i < n; i++) {
		if (c[i].kind != kind || c[i].dropped)
			continue;
		printf("%s%s%s%s%s", first ? "" : ", ", names ? c[i].name : "",
		       names ? ":" : "", c[i].type,
		       c[i].desc && kind == STORAGE_COLUMN_CLUSTERING ? " DESC"
								      : "");
		first = false;
	}
}

/* The column layout of Statistics.db version 5, as Cassandra's
 * sstablemetadata prints its serialization header (types in CQL), then
 * each slot. 0, or -1 when the layout does not read. */
static int print_layout(struct env *env, const char *path,
			const struct storage_sstable_meta *m)
{
	struct storage_sstable_column *c;
	size_t n;
	if (storage_sstable_columns_read(env, path, &c, &n))
		return -1;
	if (!n) {
		printf("Column layout: not recorded (Statistics.db version "
		       "%u)\n",
		       m->stats_version);
		return 0;
	}
	size_t keys = 0;
	for (size_t i = 0; i < n; i++)
		keys += c[i].kind == STORAGE_COLUMN_PARTITION_KEY;
	printf("KeyType: %s", keys > 1 ? "CompositeType(" : "");
	print_kind(c, n, STORAGE_COLUMN_PARTITION_KEY, false);
	printf("%s\nClusteringTypes: [", keys > 1 ? ")" : "");
	print_kind(c, n, STORAGE_COLUMN_CLUSTERING, false);
	printf("]\nStaticColumns: {");
	print_kind(c, n, STORAGE_COLUMN_STATIC, true);
	printf("}\nRegularColumns: {");
	print_kind(c, n, STORAGE_COLUMN_REGULAR, true);
	printf("}\nColumn slots:\n   %-4s | %-13s | %s\n", "Slot", "Kind",
	       "Column");
	for (size_t i = 0; i < n; i++)
		printf("   %-4zu | %-13s | %s %s%s%s\n", i,
		       storage_column_kind_name(c[i].kind), c[i].name,
		       c[i].type,
		       c[i].desc && c[i].kind == STORAGE_COLUMN_CLUSTERING
			       ? " DESC"
			       : "",
		       c[i].dropped ? " (dropped)" : "");
	storage_sstable_columns_free(c, n);
	return 0;
}

static void meta_usage(FILE *f)
{
	fprintf(f, "usage: cassini-tool sstablemetadata [-g GC_GRACE_SECONDS] "
		   "FILE...\n"
		   "FILE: any component of an SSTable (ca-N-Data.db, ...).\n"
		   "-g: gc_grace_seconds for \"Estimated droppable "
		   "tombstones\" (default 0).\n");
}

int tool_sstablemetadata(int argc, char **argv)
{
	int64_t gc_grace = 0;
	int i = 0;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--help") == 0) {
			meta_usage(stdout);
			return 0;
		}
		if ((strcmp(argv[i], "-g") == 0 ||
		     strcmp(argv[i], "--gc_grace_seconds") == 0) &&
		    i + 1 < argc) {
			char *end;
			gc_grace = strtoll(argv[++i], &end, 10);
			if (*end || gc_grace < 0) {
				fprintf(stderr,
					"sstablemetadata: bad "
					"gc_grace_seconds '%s'\n",
					argv[i]);
				return 1;
			}
			continue;
		}
		meta_usage(stderr);
		return 1;
	}
	if (i == argc) {
		meta_usage(stderr);
		return 1;
	}
	struct env *env = env_real_new(NULL);
	struct storage_sstable_meta *m = malloc(sizeof(*m));
	if (!env || !m) {
		fprintf(stderr, "sstablemetadata: out of memory\n");
		free(m);
		env_real_delete(env);
		return 1;
	}
	int status = 0;
	int64_t now = (int64_t)time(NULL);
	for (; i < argc; i++) {
		int rc = storage_sstable_meta_read(env, argv[i], m);
		if (rc && !m->stats_ok && !m->filter_ok && !m->summary_ok) {
			fprintf(stderr, "sstablemetadata: %s: %s\n", argv[i],
				m->problems[0] ? m->problems : err_msg());
			status = 1;
			continue;
		}
		print_meta(m, now, gc_grace);
		if (m->stats_ok && print_layout(env, argv[i], m)) {
			printf("Problems: %s\n", err_msg());
			fprintf(stderr, "sstablemetadata: %s: %s\n", argv[i],
				err_msg());
			status = 1;
		}
		if (rc) {
			printf("Problems: %s\n", m->problems);
			fprintf(stderr, "sstablemetadata: %s: %s\n", argv[i],
				m->problems);
			status = 1;
		}
		if (i + 1 < argc)
			printf("\n");
	}
	free(m);
	env_real_delete(env);
	return status;
}

/* ---- sstabledump --------------------------------------------------------- */

struct dumper {
	bool first_part, first_atom;
	bool keys_only;
	bool open; /* a partition begun, not ended (damage cut it short) */
	uint64_t partitions;
};

static void hex(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[i]);
}

/* A key that is printable text is shown as text too. */
static bool printable(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isprint(p[i]) || p[i] == '"' || p[i] == '\\')
			return false;
	return n > 0;
}

static int on_partition(void *arg, const struct storage_sstable_partition *p)
{
	struct dumper *d = arg;
	printf("%s\n  {\n    \"partition\" : {\n      \"key\" : \"",
	       d->first_part ? "" : ",");
	hex(p->key, p->key_len);
	printf("\",\n");
	if (printable(p->key, p->key_len))
		printf("      \"key_text\" : \"%.*s\",\n", (int)p->key_len,
		       (const char *)p->key);
	printf("      \"token\" : %" PRId64, p->token);
	if (p->deleted)
		printf(",\n      \"deletion_info\" : { \"marked_deleted\" : "
		       "%" PRId64 ", \"local_delete_time\" : %" PRId64 " }",
		       p->del_ts, p->del_ldt);
	if (p->range_tombstones)
		printf(",\n      \"range_tombstones\" : %zu",
		       p->range_tombstones);
	printf("\n    }%s", d->keys_only ? "" : ",\n    \"atoms\" : [");
	d->first_part = false;
	d->first_atom = true;
	d->open = true;
	d->partitions++;
	return 0;
}

static int on_atom(void *arg, const struct storage_sstable_atom *a)
{
	struct dumper *d = arg;
	if (d->keys_only)
		return 0;
	printf("%s\n      { \"clustering\" : \"", d->first_atom ? "" : ",");
	d->first_atom = false;
	hex(a->ck, a->ck_len);
	printf("\", ");
	if (a->slot == 0)
		printf("\"type\" : \"%s\"",
		       a->kind == 0 ? "row_deletion" : "row_liveness");
	else
		printf("\"column\" : %u, \"type\" : \"%s\"", a->slot - 1,
		       a->kind == 0 ? "collection_deletion" : "cell");
	if (a->path_len) {
		printf(", \"path\" : \"");
		hex(a->path, a->path_len);
		printf("\"");
	}
	printf(", \"tstamp\" : %" PRId64, a->ts);
	if (a->tombstone)
		printf(", \"deletion_info\" : { \"local_delete_time\" : "
		       "%" PRId64 " }",
		       a->ldt);
	else if (a->expiring)
		printf(", \"ttl\" : %d, \"expires_at\" : %" PRId64, a->ttl,
		       a->ldt);
	if (a->kind != 0 && !a->tombstone && a->value_len) {
		printf(", \"value\" : \"");
		hex(a->value, a->value_len);
		printf("\"");
	}
	printf(" }");
	return 0;
}

static int on_partition_end(void *arg)
{
	struct dumper *d = arg;
	printf("%s\n  }", d->keys_only ? "" : "\n    ]");
	d->open = false;
	return 0;
}

static void dump_usage(FILE *f)
{
	fprintf(f, "usage: cassini-tool sstabledump [-d] [-k KEY] FILE\n"
		   "Prints the partitions of an SSTable as JSON (atoms as "
		   "stored: no schema is read,\nso clusterings, paths and "
		   "values are hex and columns are numbers).\n"
		   "-k KEY: only that partition (its serialized key: text "
		   "as is, or 0x and hex).\n"
		   "-d: partition keys only.\n");
}

static int parse_key(const char *s, uint8_t **out, size_t *len)
{
	size_t n = strlen(s);
	if (n < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) {
		*out = (uint8_t *)strdup(s);
		*len = n;
		return *out ? 0 : -1;
	}
	if ((n - 2) % 2)
		return -1;
	*len = (n - 2) / 2;
	*out = malloc(*len + 1);
	for (size_t i = 0; *out && i < *len; i++) {
		unsigned v;
		if (sscanf(s + 2 + 2 * i, "%2x", &v) != 1 ||
		    !isxdigit((unsigned char)s[2 + 2 * i]) ||
		    !isxdigit((unsigned char)s[3 + 2 * i])) {
			free(*out);
			return -1;
		}
		(*out)[i] = (uint8_t)v;
	}
	return *out ? 0 : -1;
}

int tool_sstabledump(int argc, char **argv)
{
	struct dumper d = {.first_part = true};
	uint8_t *key = NULL;
	size_t key_len = 0;
	int i = 0;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--help") == 0) {
			dump_usage(stdout);
			return 0;
		}
		if (strcmp(argv[i], "-d") == 0) {
			d.keys_only = true;
			continue;
		}
		if (strcmp(argv[i], "-k") == 0 && i + 1 < argc && !key) {
			if (parse_key(argv[++i], &key, &key_len) == 0)
				continue;
			fprintf(stderr, "sstabledump: bad key '%s'\n", argv[i]);
			return 1;
		}
		free(key);
		dump_usage(stderr);
		return 1;
	}
	if (i + 1 != argc) {
		free(key);
		dump_usage(stderr);
		return 1;
	}
	struct env *env = env_real_new(NULL);
	if (!env) {
		free(key);
		fprintf(stderr, "sstabledump: out of memory\n");
		return 1;
	}
	struct storage_sstable_dump_fns fns = {
		.partition = on_partition,
		.atom = on_atom,
		.partition_end = on_partition_end,
		.arg = &d,
	};
	printf("[");
	int rc = storage_sstable_dump(env, argv[i], key, key_len, &fns);
	if (d.open) /* keep the JSON whole; stderr says what went wrong */
		on_partition_end(&d);
	printf("%s]\n", d.partitions ? "\n" : "");
	fflush(stdout);
	if (rc)
		fprintf(stderr, "sstabledump: %s: %s\n", argv[i], err_msg());
	free(key);
	env_real_delete(env);
	return rc ? 1 : 0;
}

/* ---- sstableverify ------------------------------------------------------- */

static void verify_usage(FILE *f)
{
	fprintf(f, "usage: cassini-tool sstableverify FILE...\n"
		   "Checks every checksum of each SSTable (Statistics.db, "
		   "Filter.db, Summary.db,\nevery block of Data.db and "
		   "Index.db) and reads every partition through the index.\n"
		   "FILE: any component of an SSTable (ca-N-Data.db, ...). "
		   "Exit status 1 when any fails.\n");
}

int tool_sstableverify(int argc, char **argv)
{
	if (argc == 0 || argv[0][0] == '-') {
		bool help = argc && strcmp(argv[0], "--help") == 0;
		verify_usage(help ? stdout : stderr);
		return help ? 0 : 1;
	}
	struct env *env = env_real_new(NULL);
	char *problems = malloc(4096);
	if (!env || !problems) {
		fprintf(stderr, "sstableverify: out of memory\n");
		free(problems);
		env_real_delete(env);
		return 1;
	}
	int status = 0;
	for (int i = 0; i < argc; i++) {
		uint64_t n;
		printf("Verifying %s\n", argv[i]);
		fflush(stdout);
		if (storage_sstable_verify(env, argv[i], &n, problems, 4096)) {
			printf("Error verifying %s: %s\n", argv[i], problems);
			fflush(stdout);
			fprintf(stderr, "sstableverify: %s: %s\n", argv[i],
				problems);
			status = 1;
			continue;
		}
		printf("Verify of %s succeeded. All %" PRIu64
		       " partitions read successfully\n",
		       argv[i], n);
	}
	free(problems);
	env_real_delete(env);
	return status;
}

/* ---- sstableexpiredblockers ---------------------------------------------- */

struct expiry {
	const char *path;
	int64_t min_ts, max_ts, max_ldt; /* max_ldt as Cassandra shows it */
	bool ok;
};

static void expiry_trace(const struct expiry *e, const size_t *idx, size_t n)
{
	/* Cassandra's formatForExpiryTracing */
	printf("[");
	for (size_t i = 0; i < n; i++) {
		const struct expiry *x = &e[idx[i]];
		printf("%s (minTS = %" PRId64 ", maxTS = %" PRId64
		       ", maxLDT = %" PRId64 ")], ",
		       x->path, x->min_ts, x->max_ts, x->max_ldt);
		if (i + 1 < n)
			printf("[");
	}
}

static void blockers_usage(FILE *f)
{
	fprintf(f, "usage: cassini-tool sstableexpiredblockers "
		   "[-g GC_GRACE_SECONDS] FILE...\n"
		   "FILE...: the SSTables of one table (any component of "
		   "each: ca-N-Data.db, ...).\n"
		   "Lists the SSTables holding data older than the newest "
		   "timestamp of a fully\nexpired SSTable, which keep it from "
		   "being dropped.\n"
		   "-g: the table's gc_grace_seconds (default 864000).\n");
}

int tool_sstableexpiredblockers(int argc, char **argv)
{
	int64_t gc_grace = 864000;
	int i = 0;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--help") == 0) {
			blockers_usage(stdout);
			return 0;
		}
		if ((strcmp(argv[i], "-g") == 0 ||
		     strcmp(argv[i], "--gc_grace_seconds") == 0) &&
		    i + 1 < argc) {
			char *end;
			gc_grace = strtoll(argv[++i], &end, 10);
			if (*end || gc_grace < 0) {
				fprintf(stderr,
					"sstableexpiredblockers: bad "
					"gc_grace_seconds '%s'\n",
					argv[i]);
				return 1;
			}
			continue;
		}
		blockers_usage(stderr);
		return 1;
	}
	if (i == argc) {
		blockers_usage(stderr);
		return 1;
	}
	size_t n = (size_t)(argc - i);
	struct env *env = env_real_new(NULL);
	struct storage_sstable_meta *m = malloc(sizeof(*m));
	struct expiry *e = calloc(n, sizeof(*e));
	size_t *idx = calloc(n, sizeof(*idx));
	if (!env || !m || !e || !idx) {
		fprintf(stderr, "sstableexpiredblockers: out of memory\n");
		free(m);
		free(e);
		free(idx);
		env_real_delete(env);
		return 1;
	}
	size_t opened = 0;
	for (size_t k = 0; k < n; k++) {
		struct expiry *x = &e[k];
		x->path = argv[i + (int)k];
		storage_sstable_meta_read(env, x->path, m);
		if (!m->stats_ok) {
			/* Cassandra's words for an SSTable it cannot open */
			printf("Couldn't open sstable: %s (%s)\n", x->path,
			       m->problems[0] ? m->problems : err_msg());
			continue;
		}
		x->ok = true;
		opened++;
		x->min_ts = m->min_ts;
		x->max_ts = m->max_ts;
		/* Live data that never expires (or no deletion time at all)
		 * reads as Integer.MAX_VALUE, as in Cassandra. */
		x->max_ldt = m->has_live_no_ttl || m->max_ldt == INT64_MIN
				     ? INT32_MAX
				     : m->max_ldt;
	}
	if (!opened) {
		printf("No sstables given\n");
		free(m);
		free(e);
		free(idx);
		env_real_delete(env);
		return 1;
	}
	int64_t gc_before = (int64_t)time(NULL) - gc_grace;
	/* Cassandra's checkForExpiredSSTableBlockers: a fully expired
	 * SSTable (maxLDT before gc_before) is blocked by any other that is
	 * not expired itself and holds data at or before its newest
	 * timestamp. */
	for (size_t b = 0; b < n; b++) {
		if (!e[b].ok)
			continue;
		size_t cnt = 0;
		for (size_t x = 0; x < n; x++)
			if (x != b && e[x].ok && e[x].max_ldt < gc_before &&
			    e[b].min_ts <= e[x].max_ts &&
			    e[b].max_ldt > gc_before)
				idx[cnt++] = x;
		if (!cnt)
			continue;
		size_t self = b;
		expiry_trace(e, &self, 1);
		printf(" blocks %zu expired sstables from getting dropped: ",
		       cnt);
		expiry_trace(e, idx, cnt);
		printf("\n\n");
	}
	free(m);
	free(e);
	free(idx);
	env_real_delete(env);
	return 0;
}
