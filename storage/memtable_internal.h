/*
 * Memtable: one table's recent writes, sorted by partition (token, key) and
 * within a partition by atom order, in two levels of skiplists.
 *
 * One writer at a time (the engine's write lock) and lock-free readers, so
 * reads and flushes never wait on writes. Everything lives in one arena;
 * memtable_bytes() is the exact number of bytes obtained from malloc, and
 * memtable_data_bytes() what the writes hold of them, which is what
 * memtable_heap_space limits. A newer version of an atom
 * replaces the node's pointer; the old version stays in the arena until
 * the memtable is freed.
 *
 * Point lookups go through a hash index of the partitions (open
 * addressing on the token, itself a hash): a skiplist search of a large
 * memtable is a cache miss per node visited. The index is insert-only; it
 * grows by building a twice larger copy and publishing it, and the old
 * copies stay in the arena, so a reader holding one is never left with
 * freed memory (at most it misses a partition inserted after it looked,
 * as a read that came earlier would). The copy is built a few slots per
 * insert (zeroed, then filled from the published index), so no insert
 * pays for the whole copy: at 262,144 slots that was a 7.5 ms stall of
 * the writer. The published index is at most 5/8 full meanwhile.
 */
#ifndef CASSINI_STORAGE_MEMTABLE_INTERNAL_H
#define CASSINI_STORAGE_MEMTABLE_INTERNAL_H

#include "storage/mutation_internal.h"
#include "storage/skiplist_internal.h"

#include <stdatomic.h>

/* A partition's deletion info; replaced as a whole on change. */
struct mt_pmeta {
	struct deletion pdel;
	struct rtomb *rts;
	size_t rt_count;
};

struct mt_partition {
	int64_t token;
	struct slice key;
	_Atomic(struct mt_pmeta *) meta;
	struct skiplist atoms; /* of struct atom * */
};

struct mt_index {
	size_t cap; /* a power of two */
	_Atomic(struct mt_partition *) slots[];
};

/* A memtable index's term (in the arena, ordered by term): the
 * partitions whose writes brought it, in write order, in chunks that
 * double up to MT_SAI_CHUNK_MAX entries (SAI's memtable index keeps a
 * set of keys per term the same way). Readers take `count` (acquire) and
 * walk that many entries from `head`; the one writer fills an entry and
 * links a chunk before it publishes the count. A partition (a row, for
 * an index whose entries carry rows: sai_index_rows) is appended again
 * only when it is not the term's last (readers sort and dedupe).
 *
 * A term that reaches MT_SAI_SORT_AT entries gets `sorted`: a skiplist
 * (in the arena) of its entries ordered by (token, partition key, row
 * clustering bytewise), each once. The writer fills it from the chunks
 * before it publishes it (release); from then on the term's entries go
 * only there and the chunks and count stay as they are. A reader that
 * finds `sorted` (acquire) seeks it to where its page resumes (or its
 * token range starts) and stops after its limit of partitions, so a
 * paged step over a term of a million partitions walks about a page's
 * entries, not the term's; one that does not walks the (at most
 * MT_SAI_SORT_AT) chunk entries. */
#define MT_SAI_CHUNK_MAX 256
#define MT_SAI_SORT_AT   32
struct mt_sai_ref {
	struct mt_partition *part;
	struct slice ck; /* the row's encoded clustering (in the arena), or
			  * empty: the partition */
};
struct mt_sai_chunk {
	struct mt_sai_chunk *next;
	uint32_t cap;
	struct mt_sai_ref parts[];
};
struct mt_sai_term {
	struct slice term;
	struct mt_sai_chunk *head;
	_Atomic size_t count;
	_Atomic(struct skiplist *) sorted; /* of struct mt_sai_ref *, or NULL */
	/* writer-owned */
	struct mt_sai_chunk *tail;
	uint32_t tail_used;
	const struct mt_partition *last;
	struct slice last_ck;
};

struct memtable {
	struct arena arena;
	const struct storage_table_meta *meta; /* a reference */
	struct skiplist parts;                 /* of struct mt_partition * */
	_Atomic(struct mt_index *) index;      /* the same partitions, hashed */
	size_t indexed;                        /* writer-owned count */
	/* Writer-owned: the twice larger index being built, and how far:
	 * slots zeroed, then (copying) slots of `index` copied into it. */
	struct mt_index *growing;
	size_t grow_pos;
	bool grow_copying;
	_Atomic int refs;
	/* Statistics for the SSTable it becomes (writer-owned). */
	int64_t min_ts, max_ts;
	uint64_t atom_count;
	uint64_t tombstone_count;
	/* Set by the engine: the first and past-the-last commitlog positions
	 * of the writes it holds. */
	uint64_t log_first_seg, log_first_off;
	uint64_t log_end_seg, log_end_off;
	bool has_log_pos;
	/* One skiplist of struct mt_sai_term * per index of `meta` (same
	 * order), updated by memtable_apply: every term a write brings and
	 * its partition, never removed (deletions and overwrites leave stale
	 * entries; queries re-check the data). NULL without indexes. */
	struct skiplist *sai;
	struct buf sai_term; /* writer's scratch */
};

struct memtable *memtable_new(const struct storage_table_meta *t);
void memtable_ref(struct memtable *m);
void memtable_unref(struct memtable *m);

/* Caller holds the write lock. */
int memtable_apply(struct memtable *mt, const struct storage_mutation *m);
size_t memtable_bytes(const struct memtable *mt);
/* The bytes the writes hold (the arena's used bytes): memtable_bytes less
 * the unused rest of its blocks, at most a block (256 KiB) less. An empty
 * memtable holds next to nothing, while its first block is allocated. */
size_t memtable_data_bytes(const struct memtable *mt);
bool memtable_is_empty(const struct memtable *mt);

struct mt_partition *memtable_find(const struct memtable *mt, int64_t token,
				   struct slice key);
/* The first partition with token > after (or >= when inclusive). */
struct skiplist_node *memtable_seek_token(const struct memtable *mt,
					  int64_t token, bool inclusive);
static inline struct mt_partition *
mt_node_partition(const struct skiplist_node *n)
{
	return (struct mt_partition *)skiplist_key(n);
}
static inline struct mt_pmeta *mt_partition_meta(struct mt_partition *p)
{
	return atomic_load_explicit(&p->meta, memory_order_acquire);
}

/* The memtable's index for `name`, or NULL (none by that name: the
 * memtable was made with a version of the table without it). */
const struct skiplist *memtable_sai(const struct memtable *mt,
				    const char *name);
int memtable_sai_cmp(const void *ctx, const void *a, const void *b);
/* The order of a term's `sorted` skiplist (struct mt_sai_ref *): token,
 * partition key, then the row's clustering bytewise (a probe whose ck is
 * MT_SAI_CK_LAST sorts after every row of its partition). */
int memtable_sai_ref_cmp(const void *ctx, const void *a, const void *b);
uint64_t memtable_sai_ref_order(const void *a);
#define MT_SAI_CK_LAST ((struct slice){NULL, SIZE_MAX})

/* Partition order: token, then key bytes. */
int storage_partition_cmp(int64_t ta, struct slice ka, int64_t tb,
			  struct slice kb);

#endif
