#include "common/arena.h"

#include "common/err.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_DEFAULT_BLOCK (64 * 1024)

struct arena_block {
	struct arena_block *prev;
	size_t size; /* payload bytes after the header */
	alignas(max_align_t) char data[];
};

void arena_create(struct arena *a, size_t block_size)
{
	memset(a, 0, sizeof(*a));
	a->block_size = block_size ? block_size : ARENA_DEFAULT_BLOCK;
}

void arena_destroy(struct arena *a)
{
	struct arena_block *b = a->head;
	while (b) {
		struct arena_block *prev = b->prev;
		free(b);
		b = prev;
	}
	size_t bs = a->block_size;
	arena_create(a, bs);
}

void arena_reset(struct arena *a)
{
	/* Keep one standard-size block for reuse; free the rest. */
	struct arena_block *keep = NULL;
	struct arena_block *b = a->head;
	while (b) {
		struct arena_block *prev = b->prev;
		if (!keep && b->size == a->block_size) {
			keep = b;
		} else {
			a->allocated -= sizeof(*b) + b->size;
			free(b);
		}
		b = prev;
	}
	a->head = keep;
	a->used = 0;
	if (keep) {
		keep->prev = NULL;
		a->pos = keep->data;
		a->end = keep->data + keep->size;
	} else {
		a->pos = a->end = NULL;
	}
}

static struct arena_block *block_new(struct arena *a, size_t payload)
{
	if (payload > SIZE_MAX - sizeof(struct arena_block)) {
		err_set(ERR_NOMEM, "arena allocation too large");
		return NULL;
	}
	struct arena_block *b = malloc(sizeof(*b) + payload);
	if (!b) {
		err_set(ERR_NOMEM, "arena: cannot allocate %zu bytes", payload);
		return NULL;
	}
	b->size = payload;
	a->allocated += sizeof(*b) + payload;
	return b;
}

void *arena_alloc_aligned(struct arena *a, size_t size, size_t align)
{
	uintptr_t p = (uintptr_t)a->pos;
	uintptr_t aligned = (p + align - 1) & ~(uintptr_t)(align - 1);
	if (a->head && aligned <= (uintptr_t)a->end &&
	    size <= (size_t)((uintptr_t)a->end - aligned)) {
		a->used += size + (aligned - p);
		a->pos = (char *)(aligned + size);
		return (void *)aligned;
	}
	if (size + align > a->block_size / 4) {
		/* Big: a dedicated block, linked behind the current one so the
		 * current block keeps serving small requests. */
		struct arena_block *b = block_new(a, size + align);
		if (!b)
			return NULL;
		if (a->head) {
			b->prev = a->head->prev;
			a->head->prev = b;
		} else {
			b->prev = NULL;
			a->head = b;
			a->pos = a->end = b->data + b->size;
		}
		a->used += size;
		uintptr_t d = ((uintptr_t)b->data + align - 1) &
			      ~(uintptr_t)(align - 1);
		return (void *)d;
	}
	struct arena_block *b = block_new(a, a->block_size);
	if (!b)
		return NULL;
	b->prev = a->head;
	a->head = b;
	a->pos = b->data;
	a->end = b->data + b->size;
	return arena_alloc_aligned(a, size, align);
}

void *arena_alloc(struct arena *a, size_t size)
{
	return arena_alloc_aligned(a, size, alignof(max_align_t));
}

void *arena_memdup(struct arena *a, const void *p, size_t len)
{
	void *d = arena_alloc_aligned(a, len ? len : 1, 1);
	if (d && len)
		memcpy(d, p, len);
	return d;
}

char *arena_strdup(struct arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	return arena_memdup(a, s, n);
}
