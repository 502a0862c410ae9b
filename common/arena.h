/*
 * Arena allocator: many small allocations, freed all at once.
 *
 * Memory comes from blocks (block_size, 64 KiB by default); a request larger
 * than a quarter block gets a block of its own so little is wasted. A
 * growing arena (arena_create_growing) starts with small blocks and doubles
 * them up to its largest, so one that stays nearly empty (the memtable of
 * a table nobody writes) costs a small block, not a large one.
 * arena_reset() keeps the first block for reuse; arena_destroy() frees all.
 * Not thread-safe: one owner at a time.
 */
#ifndef CASSINI_COMMON_ARENA_H
#define CASSINI_COMMON_ARENA_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct arena_block;

struct arena {
	struct arena_block *head;      /* current block, linked to older ones */
	char *pos;                     /* next free byte in head */
	char *end;                     /* end of head */
	size_t block_size;             /* of the next block */
	size_t first_block, max_block; /* growing arenas: from, up to */
	size_t allocated; /* bytes obtained from malloc, headers included */
	size_t used;      /* bytes handed out, alignment padding included */
};

/* block_size 0 means the default. Allocates nothing yet. */
void arena_create(struct arena *a, size_t block_size);
/* Blocks of `first` bytes, each new one twice the last, up to `max`. */
void arena_create_growing(struct arena *a, size_t first, size_t max);
void arena_destroy(struct arena *a);
/* Frees every block but the first and rewinds. */
void arena_reset(struct arena *a);

/* `size` bytes aligned to `align` (a power of two), or NULL (ERR_NOMEM).
 * Inline: requests are many and small; arena_alloc_slow takes a new
 * block. */
void *arena_alloc_slow(struct arena *a, size_t size, size_t align);
static inline void *arena_alloc_aligned(struct arena *a, size_t size,
					size_t align)
{
	uintptr_t p = (uintptr_t)a->pos;
	uintptr_t aligned = (p + align - 1) & ~(uintptr_t)(align - 1);
	if (a->head && aligned <= (uintptr_t)a->end &&
	    size <= (size_t)((uintptr_t)a->end - aligned)) {
		a->used += size + (aligned - p);
		a->pos = (char *)(aligned + size);
		return (void *)aligned;
	}
	return arena_alloc_slow(a, size, align);
}

/* Aligned to max_align_t. */
static inline void *arena_alloc(struct arena *a, size_t size)
{
	return arena_alloc_aligned(a, size, alignof(max_align_t));
}

/* Copies `len` bytes into the arena. */
static inline void *arena_memdup(struct arena *a, const void *p, size_t len)
{
	void *d = arena_alloc_aligned(a, len ? len : 1, 1);
	if (d && len)
		memcpy(d, p, len);
	return d;
}

char *arena_strdup(struct arena *a, const char *s);

/* Bytes of memory the arena holds from the system. */
static inline size_t arena_memory_usage(const struct arena *a)
{
	return a->allocated;
}

#endif
