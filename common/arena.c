#include "common/arena.h"

#include "common/err.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_DEFAULT_BLOCK (64 * 1024)

struct arena_block {
	struct arena_block *prev;
	size_t size; /* payload bytes after the header */
	alignas(max_align_t) char data[];
};

/* Blocks that arenas on this thread gave back, taken before malloc. A
 * request's arenas then cost no trip through malloc's large chunks: with
 * glibc every malloc of 1 KiB or more and every free of 64 KiB or more
 * first consolidates the fast bins, which a loop serving a turn's requests
 * with a few arenas each paid several times per request. Allocator state,
 * like malloc's own per-thread caches: blocks of 1..64 KiB in one list per
 * power of two, at most SPARE_BYTES per thread, freed when it exits. */
#define SPARE_MIN_LOG 10 /* 1 KiB */
#define SPARE_CLASSES 7  /* 1 KiB .. 64 KiB */
#define SPARE_BYTES   (1024 * 1024)

struct spare_list {
	struct arena_block *head[SPARE_CLASSES];
	size_t bytes;
	bool keyed; /* spare_key holds this thread's lists */
};

static _Thread_local struct spare_list spare;
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static bool spare_key_ok; /* set once by spare_key_create */

static void spare_free(void *arg)
{
	struct spare_list *l = arg;
	for (int k = 0; k < SPARE_CLASSES; k++)
		while (l->head[k]) {
			struct arena_block *b = l->head[k];
			l->head[k] = b->prev;
			free(b);
		}
	l->bytes = 0;
}

static void spare_key_create(void)
{
	spare_key_ok = pthread_key_create(&spare_key, spare_free) == 0;
}

/* floor(log2(n)) for n > 0 */
static int log2_floor(size_t n)
{
	int k = 0;
	while (n >>= 1)
		k++;
	return k;
}

/* Keeps a block for reuse, or frees it. */
static void block_release(struct arena_block *b)
{
	if (b->size < ((size_t)1 << SPARE_MIN_LOG) ||
	    b->size > ARENA_DEFAULT_BLOCK ||
	    spare.bytes + b->size > SPARE_BYTES) {
		free(b);
		return;
	}
	if (!spare.keyed) {
		/* First block on this thread: have it freed at thread exit. */
		pthread_once(&spare_once, spare_key_create);
		if (!spare_key_ok || pthread_setspecific(spare_key, &spare)) {
			free(b);
			return;
		}
		spare.keyed = true;
	}
	int k = log2_floor(b->size) - SPARE_MIN_LOG;
	b->prev = spare.head[k];
	spare.head[k] = b;
	spare.bytes += b->size;
}

/* A spare block of at least `payload` bytes (under four times that), or
 * NULL: class k holds sizes in [2^k, 2^(k+1)) KiB, so the class of the
 * next power of two at or above `payload` serves it. Smaller payloads are
 * left to malloc's per-thread cache. */
static struct arena_block *spare_take(size_t payload)
{
	if (payload < ((size_t)1 << SPARE_MIN_LOG) ||
	    payload > ARENA_DEFAULT_BLOCK)
		return NULL;
	int k = log2_floor(payload);
	if (((size_t)1 << k) < payload)
		k++;
	k -= SPARE_MIN_LOG;
	struct arena_block *b = k < SPARE_CLASSES ? spare.head[k] : NULL;
	if (b) {
		spare.head[k] = b->prev;
		spare.bytes -= b->size;
	}
	return b;
}

void arena_create(struct arena *a, size_t block_size)
{
	memset(a, 0, sizeof(*a));
	a->block_size = block_size ? block_size : ARENA_DEFAULT_BLOCK;
	a->first_block = a->max_block = a->block_size;
}

void arena_create_growing(struct arena *a, size_t first, size_t max)
{
	arena_create(a, first);
	if (max > a->block_size)
		a->max_block = max;
}

void arena_destroy(struct arena *a)
{
	struct arena_block *b = a->head;
	while (b) {
		struct arena_block *prev = b->prev;
		block_release(b);
		b = prev;
	}
	size_t first = a->first_block, max = a->max_block;
	arena_create_growing(a, first, max);
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
			block_release(b);
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
	struct arena_block *b = spare_take(payload);
	if (!b) {
		b = malloc(sizeof(*b) + payload);
		if (!b) {
			err_set(ERR_NOMEM, "arena: cannot allocate %zu bytes",
				payload);
			return NULL;
		}
		b->size = payload;
	}
	a->allocated += sizeof(*b) + b->size;
	return b;
}

/* What the inline fast path in arena.h cannot serve from the current
 * block. */
void *arena_alloc_slow(struct arena *a, size_t size, size_t align)
{
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
	if (a->block_size < a->max_block)
		a->block_size = a->block_size * 2 < a->max_block
					? a->block_size * 2
					: a->max_block;
	return arena_alloc_aligned(a, size, align);
}

char *arena_strdup(struct arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	return arena_memdup(a, s, n);
}
