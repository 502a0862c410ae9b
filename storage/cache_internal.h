/*
 * Block cache: decoded SSTable blocks shared by all readers, bounded by
 * bytes, least recently used evicted first. Blocks enter only after their
 * checksum was verified, so a hit needs no read, no checksum and no copy.
 *
 * Handles are reference counted: a block stays valid while a reader holds
 * it, even if evicted meanwhile. Thread-safe (one mutex; lookups are short).
 */
#ifndef CASSINI_STORAGE_CACHE_INTERNAL_H
#define CASSINI_STORAGE_CACHE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct block_cache;

struct cached_block {
	const uint8_t *data;
	size_t len;
	uint64_t next_off; /* where the following block starts */
	/* Where each of the `entries` entries of an index block starts:
	 * NULL until storage_block_cache_attach_offsets publishes it (then
	 * counted in the cache's bytes, freed with the block). Read it with an
	 * acquire load; `entries` is set before. */
	uint16_t *_Atomic entry_off;
	uint32_t entries;
	/* `data` holds only the first `len` bytes of the block (a read that
	 * needed no more; never cached) */
	bool partial;
	/* private */
	uint8_t *owned; /* malloc'ed, `cap` bytes; `data` points into it */
	size_t cap;
	uint64_t file, off;
	_Atomic int refs;
	struct cached_block *prev, *next, *hnext;
	struct block_cache *cache;
	int resident;
};

/* capacity 0 disables caching (get always misses, put hands back an
 * uncached handle). */
struct block_cache *storage_block_cache_new(size_t capacity);
void storage_block_cache_delete(struct block_cache *c);
/* A unique id for a file whose blocks get cached. */
uint64_t storage_block_cache_file_id(void);
/* Whether a block a read missed should enter the cache: on its second
 * miss within about four cache capacities of misses (a doorkeeper, as
 * TinyLFU's). When the data is many times the cache most blocks are read
 * once; caching each would cost a cold buffer and an eviction per miss
 * and push out the blocks that are read again. Any thread. */
bool storage_block_cache_admit(struct block_cache *c, uint64_t file,
			       uint64_t off);
/* A referenced handle, or NULL. */
struct cached_block *storage_block_cache_get(struct block_cache *c,
					     uint64_t file, uint64_t off);
/* Takes ownership of `data` (malloc'ed) and returns a referenced handle
 * (to an existing entry if another thread inserted the block first). NULL
 * only on ERR_NOMEM (then `data` is freed). */
struct cached_block *storage_block_cache_put(struct block_cache *c,
					     uint64_t file, uint64_t off,
					     uint8_t *data, size_t len,
					     uint64_t next_off);
void storage_block_cache_release(void *block);
/* The miss path without an allocation per block: an unfilled handle
 * (referenced once; a recycled evicted block when one is spare, its buffer
 * `owned`/`cap` kept for the caller to fill), then inserted with `data`
 * pointing into `owned`, as storage_block_cache_put does. Either call may be
 * given c == NULL (an uncached handle); storage_block_cache_release() drops a
 * handle never inserted. */
struct cached_block *storage_block_cache_alloc(struct block_cache *c);
struct cached_block *storage_block_cache_insert(struct block_cache *c,
						struct cached_block *b,
						uint64_t file, uint64_t off,
						const uint8_t *data, size_t len,
						uint64_t next_off);
size_t storage_block_cache_bytes(struct block_cache *c);
struct block_cache_stats {
	size_t capacity, bytes, entries;
	uint64_t hits, requests; /* lookups (get) since start */
};
/* The cache's figures now (zeros for NULL). */
void storage_block_cache_stats(struct block_cache *c,
			       struct block_cache_stats *out);
/* Gives a resident block its entry offsets (ownership of `offs` passes);
 * false (nothing taken) if it has some already or is no longer cached. */
bool storage_block_cache_attach_offsets(struct block_cache *c,
					struct cached_block *b, uint16_t *offs,
					uint32_t n);

#endif
