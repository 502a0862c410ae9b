/*
 * SSTables: immutable sorted files, one generation = one set of
 * components in the table's directory. The format is documented in
 * docs/sstable-format.md; this header is the writer and reader API.
 *
 * Writing goes to tmp-<name> files which are fsynced, renamed (TOC.txt
 * last) and followed by an fsync of the directory; a generation without
 * TOC.txt, and any tmp- file, is a leftover removed at start.
 *
 * A reader is shared (refcounted) and immutable; reads from any thread.
 * When compaction obsoletes it, the last unref deletes its files.
 */
#ifndef CASSINI_STORAGE_SSTABLE_INTERNAL_H
#define CASSINI_STORAGE_SSTABLE_INTERNAL_H

#include "storage/cache_internal.h"
#include "storage/commitlog_internal.h"
#include "storage/read_internal.h"
#include "storage/sai_component.h"
#include "storage/tomb_hist_internal.h"

#include <pthread.h>
#include <stdatomic.h>

#define SST_HIST_BUCKETS 40

struct sst_stats {
	int64_t min_token, max_token;
	int64_t min_ts, max_ts;
	int64_t min_ldt; /* earliest expiry/deletion time; INT64_MAX if none */
	int64_t max_ldt; /* latest expiry/deletion time; INT64_MIN if none */
	uint64_t cell_count, tombstone_count, partition_count;
	uint64_t size_hist[SST_HIST_BUCKETS]; /* partitions by log2 bytes */
	int64_t repaired_at;
	struct clpos log_end; /* commitlog position the data covers */
	uint64_t data_size;
	bool has_live_no_ttl; /* any cell that never expires */
	/* Statistics.db version 2 (a version 1 file reads them as zero,
	 * has_v2 false: no tombstone estimate, so no tombstone compaction). */
	bool has_v2;
	int64_t created_at;         /* seconds, env clock, when written */
	uint64_t uncompressed_size; /* Data.db blocks before compression */
	uint64_t marker_count;      /* partition deletions + range tombstones */
	int64_t min_ttl, max_ttl;   /* of expiring cells; 0 when none */
	struct tomb_hist tomb_hist; /* tombstones by local deletion time */
	uint32_t level;             /* leveled compaction (version 3; else 0) */
	/* incremental repair session holding the SSTable (version 4; all
	 * zero: none, as every older file reads) */
	uint8_t pending_repair[16];
};

/* Whether an incremental repair session holds the SSTable. */
static inline bool sst_stats_pending(const struct sst_stats *st)
{
	for (size_t i = 0; i < sizeof(st->pending_repair); i++)
		if (st->pending_repair[i])
			return true;
	return false;
}

/* Estimated share of the SSTable's cells that are tombstones droppable
 * before `gc_before` (Cassandra's "Estimated droppable tombstones"). */
double sst_droppable_ratio(const struct sst_stats *s, int64_t gc_before);
/* Decodes a Statistics.db body of format `version` (1 to 5). */
int sst_stats_decode(const uint8_t *p, size_t len, uint8_t version,
		     struct sst_stats *st);
/* The same, and the column layout of a version 5 body (borrowed from `p`;
 * empty, ptr NULL, for older versions) into `layout`. */
int sst_stats_decode_layout(const uint8_t *p, size_t len, uint8_t version,
			    struct sst_stats *st, struct slice *layout);

/* The column layout (sstable_layout.c): what Statistics.db version 5
 * records of the table an SSTable was written for, Cassandra's
 * serialization header. Appends `t`'s; -1 on ERR_NOMEM. */
int sst_layout_encode(const struct storage_table_meta *t, struct buf *out);
/* 0 when data written with `layout` reads right as table `t` (the same
 * kind at every slot; the same type and clustering order, and for
 * regular and static columns the same name, at every slot `t` has not
 * dropped; every key and clustering column of `t` there; `t` may have
 * more columns, added later). Else -1: ERR_INVALID naming the first
 * difference, ERR_CORRUPT when the bytes do not decode. */
int sst_layout_check(const uint8_t *layout, size_t len,
		     const struct storage_table_meta *t);
/* Calls `fn` once per slot of `layout`, in slot order (name and type
 * borrowed from `layout`; flags SST_LAYOUT_DESC, SST_LAYOUT_DROPPED); a
 * non-zero return stops the walk and is returned. -1 with ERR_CORRUPT
 * when the layout does not decode. */
#define SST_LAYOUT_DESC    1
#define SST_LAYOUT_DROPPED 2
typedef int (*sst_layout_fn)(void *arg, uint64_t slot, struct slice name,
			     uint8_t kind, uint8_t flags, struct slice type);
int sst_layout_walk(const uint8_t *layout, size_t len, sst_layout_fn fn,
		    void *arg);

struct sst_writer_options {
	uint8_t compression;
	uint32_t block_size;
	double bloom_fp;
	uint64_t expected_partitions;
	int64_t repaired_at;
	struct clpos log_end;
	int64_t created_at;         /* seconds (the env clock) */
	uint32_t level;             /* leveled compaction's level; 0: flushes */
	uint8_t pending_repair[16]; /* session id; all zero: none */
	size_t sai_hold; /* index builders' pairs held (0: SAI_BUILDER_HOLD) */
};

struct sst_writer;

struct sst_writer *sst_writer_new(struct env *env, const char *dir,
				  uint64_t gen,
				  const struct storage_table_meta *t,
				  const struct sst_writer_options *o);
int sst_writer_begin(struct sst_writer *w, int64_t token, struct slice key,
		     struct deletion pdel, const struct rtomb *rts,
		     size_t rt_count);
int sst_writer_atom(struct sst_writer *w, const struct atom *a);
int sst_writer_end(struct sst_writer *w);
/* Bytes appended to Data.db so far (whole blocks; for throttling). */
uint64_t sst_writer_bytes(const struct sst_writer *w);
uint64_t sst_writer_partitions(const struct sst_writer *w);
/* Data bytes so far, the unwritten block included (where a leveled
 * compaction cuts its outputs). */
uint64_t sst_writer_data_bytes(const struct sst_writer *w);
/* Completes the set durably (fsync, rename, TOC, dir fsync). */
int sst_writer_finish(struct sst_writer *w);
/* Removes the temporary files and frees. */
void sst_writer_abort(struct sst_writer *w);

/* Where a partition lives, decoded from Index.db. */
struct sst_entry {
	int64_t token;
	struct slice key;
	uint64_t block_off, block_len; /* the block holding its start */
	uint32_t in_block;             /* offset of its start in that block */
	struct deletion pdel;
	struct rtomb *rts;
	size_t rt_count;
	/* Row index: continuation blocks and the first clustering in each. */
	uint64_t *ri_off;
	struct slice *ri_ck;
	size_t ri_count;
};

/* A storage-attached index component of an SSTable (listed in TOC.txt),
 * opened (header and directory read and checked) on its first query. */
struct sst_sai {
	char *index; /* the index's name */
	char *comp;  /* "SAI_<index>.db" */
	struct sai_file *file;
	int state;      /* 0 not opened, 1 open, -1 unusable (logged once) */
	char ident[64]; /* its identity (sai_index_ident) once loaded */
	uint64_t disk_bytes; /* the file's size (at open, at install) */
};

struct sstable {
	_Atomic int refs;
	_Atomic bool obsolete; /* delete the files with the last reference */
	/* disk_failure_policy best_effort: corrupt, so no read or compaction
	 * uses it any more (the files stay for the operator). */
	_Atomic bool excluded;
	struct env *env;
	char *dir;
	uint64_t gen;
	const struct storage_table_meta *t; /* a reference: the version it was
					     * written or opened with */
	char *data_path, *index_path;
	struct env_file *data, *index;
	/* read-only mappings of Data.db and Index.db (disk_access_mode), or
	 * NULL: blocks in the page cache are read there */
	const uint8_t *data_map, *index_map;
	uint64_t data_map_len, index_map_len;
	struct block_cache *cache;  /* borrowed; may be NULL */
	uint64_t data_id, index_id; /* block cache file ids */
	struct sst_stats stats;
	/* the column layout its Statistics.db records (version 5), or NULL
	 * (an older file: not known) */
	uint8_t *layout;
	size_t layout_len;
	uint64_t disk_bytes;
	/* summary: first key of each index block */
	size_t sum_count;
	int64_t *sum_token;
	struct slice *sum_key;
	uint64_t *sum_off, *sum_len;
	uint8_t *sum_bytes;
	/* bloom filter */
	uint8_t *bloom;
	uint64_t bloom_bits;
	uint32_t bloom_k;
	/* index components (sstable_sai.c); sai_mu guards their loading
	 * and the list (an index build adds to it) */
	struct sst_sai *sai;
	size_t sai_count;
	pthread_mutex_t sai_mu;
	/* components a rebuild replaced (readers may still hold them):
	 * closed with the SSTable */
	struct sst_sai_old *sai_retired;
};

struct sst_sai_old {
	struct sst_sai_old *next;
	struct sai_file *file;
};

/* Reads the index components TOC.txt lists (an unreadable TOC: none). */
int sst_sai_open(struct sstable *s);
void sst_sai_free(struct sstable *s);
/* Index ix's component of `s`, open (it lives while `s` does): 0, or -1
 * when the SSTable has none for it (written before the index existed, or
 * by an earlier index of the same name over something else) or it is
 * missing or corrupt (logged once per SSTable and index; the caller then
 * scans the SSTable instead). */
int sst_sai_get(struct sstable *s, const struct storage_index *ix,
		struct sai_file **out);
/* A lookup found a block of `f` (from sst_sai_get) corrupt: the component
 * is unusable from now on (logged once), as if it had failed at open. */
void sst_sai_damaged(struct sstable *s, const struct sai_file *f);
/* The bytes the SSTable's open components hold (their directories). */
size_t sst_sai_resident_bytes(struct sstable *s);

/* Installs index ix's component (built over the SSTable's data by an
 * index build, engine_sai_build.c): lays out what `b` was given (with
 * `ident`, sai_build_write) as "SAI_<index>.db" durably (its .tmp, then
 * renamed), lists it in TOC.txt (rewritten atomically) and makes it the
 * one queries load next. Any thread; one build per SSTable at a time. */
struct sai_builder;
int sst_sai_install(struct sstable *s, const struct storage_index *ix,
		    struct sai_builder *b, const void *ident,
		    uint32_t ident_len);
/* Whether TOC.txt listed, or a build installed, a component for the
 * index named `index` (not loaded: its identity is not checked). */
bool sst_sai_listed(struct sstable *s, const char *index);
/* The size on disk of the SSTable's component of `index` (0: none). */
uint64_t sst_sai_disk_bytes(struct sstable *s, const char *index);

/* Opens generation `gen` in `dir`; verifies Statistics, Summary, Filter. */
/* Hard-links the SSTable's files into `dir` under the same names, TOC
 * last (a snapshot). */
int sstable_link_into(const struct sstable *s, const char *dir);
struct sstable *sstable_open(struct env *env, const char *dir, uint64_t gen,
			     const struct storage_table_meta *t,
			     struct block_cache *cache);
/* Maps the files disk_access_mode `mode` maps (where the env can); done
 * before the SSTable is shared. */
void sstable_map_files(struct sstable *s, int mode);
void sstable_ref(struct sstable *s);
void sstable_unref(struct sstable *s);
/* Replaces the SSTable's Statistics.db with `st` (its repair state
 * changed: incremental repair), durably (temp file, rename), keeping its
 * column layout (an older file gets its meta's). The caller updates
 * s->stats. */
int sst_stats_rewrite(const struct sstable *s, const struct sst_stats *st);
/* Marks the files for deletion once the last reader lets go. */
void sstable_mark_obsolete(struct sstable *s);

bool sstable_may_contain(const struct sstable *s, struct slice key);
/* With the key's MurmurHash3_x64_128 (seed 0) already computed. */
bool sstable_may_contain_hash(const struct sstable *s, const uint64_t h[2]);
/* Adds the partition's part within the context's slices. Returns 0 (also
 * when absent) or -1 (ERR_CORRUPT on a damaged block). */
int sstable_read(struct sstable *s, struct read_ctx *c, int64_t token,
		 struct slice key);

/* Iterates index entries in partition order from a token. Entries and
 * their bytes stay valid until the next call. */
struct sst_iter;
struct sst_iter *sst_iter_new(struct sstable *s);
/* Positions at the first partition with token > after (>= if inclusive). */
int sst_iter_seek(struct sst_iter *it, int64_t token, bool inclusive);
/* 1 with *e set, 0 at the end, -1 on error. */
int sst_iter_next(struct sst_iter *it, const struct sst_entry **e);
void sst_iter_delete(struct sst_iter *it);
/* Adds every atom of the entry's partition (or those within the
 * context's slices) to the context. */
int sstable_read_entry(struct sstable *s, struct read_ctx *c,
		       const struct sst_entry *e, bool all);

/* Component paths. */
char *sst_path(const char *dir, uint64_t gen, const char *component, bool tmp);
/* Removes tmp- files and incomplete generations; lists complete ones. */
int sst_dir_scan(struct env *env, const char *dir, uint64_t **gens,
		 size_t *count);

/* Decoders exposed for the fuzzers. */
int sst_entry_decode(struct cursor *c, struct sst_entry *e);
void sst_entry_free(struct sst_entry *e);
/* Walks a raw data block: calls fn per atom; stops at errors. */
int sst_block_walk(const uint8_t *p, size_t len,
		   int (*fn)(void *arg, const struct atom *a), void *arg);

#endif
