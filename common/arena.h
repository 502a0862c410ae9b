/*
 * Arena allocator: many small allocations, freed all at once.
 *
 * Memory comes from blocks (block_size, 64 KiB by default); a request larger
 * than a quarter block gets a block of its own so little is wasted.
 * arena_reset() keeps the first block for reuse; arena_destroy() frees all.
 * Not thread-safe: one owner at a time.
 */
#ifndef CASSINI_COMMON_ARENA_H
#define CASSINI_COMMON_ARENA_H

#include <stddef.h>

struct arena_block;

struct arena {
	struct arena_block *head; /* current block, linked to older ones */
	char *pos;                /* next free byte in head */
	char *end;                /* end of head */
	size_t block_size;
	size_t allocated; /* bytes obtained from malloc, headers included */
	size_t used;      /* bytes handed out, alignment padding included */
};

/* block_size 0 means the default. Allocates nothing yet. */
void arena_create(struct arena *a, size_t block_size);
void arena_destroy(struct arena *a);
/* Frees every block but the first and rewinds. */
void arena_reset(struct arena *a);

/* Returns `size` bytes aligned to max_align_t, or NULL (ERR_NOMEM). */
void *arena_alloc(struct arena *a, size_t size);
/* `align` must be a power of two. */
void *arena_alloc_aligned(struct arena *a, size_t size, size_t align);
/* Copies `len` bytes into the arena. */
void *arena_memdup(struct arena *a, const void *p, size_t len);
char *arena_strdup(struct arena *a, const char *s);

/* Bytes of memory the arena holds from the system. */
static inline size_t arena_memory_usage(const struct arena *a)
{
	return a->allocated;
}

#endif
