/*
 * LRU block cache; see cache_internal.h.
 */
#include "storage/cache_internal.h"

#include "common/err.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_BUCKETS 65536
/* evicted blocks kept, with their buffers, for the next misses */
#define CACHE_SPARES 16

struct block_cache {
	pthread_mutex_t mu;
	size_t capacity, bytes;
	struct cached_block *head, *tail; /* most recent first */
	struct cached_block **buckets;
	struct cached_block *spares; /* by hnext; nobody else holds them */
	size_t nspares;
	uint64_t hits, requests; /* lookups since start, under mu */
	/* storage_block_cache_admit's record of recent misses: a direct
	 * mapped table of block fingerprints (races only lose a record) */
	_Atomic uint64_t *ghost;
	size_t ghost_mask;
};

static _Atomic uint64_t next_file_id = 1;

uint64_t storage_block_cache_file_id(void)
{
	return atomic_fetch_add(&next_file_id, 1);
}

struct block_cache *storage_block_cache_new(size_t capacity)
{
	struct block_cache *c = calloc(1, sizeof(*c));
	if (!c || !(c->buckets = calloc(CACHE_BUCKETS, sizeof(*c->buckets)))) {
		free(c);
		err_set(ERR_NOMEM, "block cache");
		return NULL;
	}
	c->capacity = capacity;
	/* about one record per 4 KiB of capacity: a cache's worth of
	 * misses of 16 KiB blocks, four times over */
	size_t n = 1024;
	while (n < capacity / 4096 && n < ((size_t)1 << 24))
		n *= 2;
	if (capacity && !(c->ghost = calloc(n, sizeof(*c->ghost)))) {
		free(c->buckets);
		free(c);
		err_set(ERR_NOMEM, "block cache");
		return NULL;
	}
	c->ghost_mask = n - 1;
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

bool storage_block_cache_admit(struct block_cache *c, uint64_t file,
			       uint64_t off)
{
	if (!c || !c->capacity)
		return false;
	uint64_t h = (file * 0x9e3779b97f4a7c15ULL) ^
		     ((off + 1) * 0xc2b2ae3d27d4eb4fULL);
	h ^= h >> 31;
	h |= 1; /* 0 is an empty record */
	_Atomic uint64_t *slot = &c->ghost[(h >> 17) & c->ghost_mask];
	if (atomic_load_explicit(slot, memory_order_relaxed) == h) {
		atomic_store_explicit(slot, 0, memory_order_relaxed);
		return true;
	}
	atomic_store_explicit(slot, h, memory_order_relaxed);
	return false;
}

static size_t bucket_of(uint64_t file, uint64_t off)
{
	uint64_t h =
		(file * 0x9e3779b97f4a7c15ULL) ^ (off * 0xc2b2ae3d27d4eb4fULL);
	return (size_t)((h ^ (h >> 29)) % CACHE_BUCKETS);
}

static void block_free(struct cached_block *b)
{
	free(b->owned);
	free(atomic_load_explicit(&b->entry_off, memory_order_relaxed));
	free(b);
}

/* What a resident block counts for against the capacity (under the lock:
 * offsets are attached under it). */
static size_t block_bytes(const struct cached_block *b)
{
	return b->len +
	       (atomic_load_explicit(&b->entry_off, memory_order_relaxed)
			? b->entries * sizeof(uint16_t)
			: 0);
}

bool storage_block_cache_attach_offsets(struct block_cache *c,
					struct cached_block *b, uint16_t *offs,
					uint32_t n)
{
	if (!c || !c->capacity)
		return false;
	bool ok = false;
	pthread_mutex_lock(&c->mu);
	if (b->resident &&
	    !atomic_load_explicit(&b->entry_off, memory_order_relaxed)) {
		b->entries = n;
		atomic_store_explicit(&b->entry_off, offs,
				      memory_order_release);
		c->bytes += n * sizeof(*offs);
		ok = true;
	}
	pthread_mutex_unlock(&c->mu);
	return ok;
}

struct cached_block *storage_block_cache_alloc(struct block_cache *c)
{
	struct cached_block *b = NULL;
	if (c && c->capacity) {
		pthread_mutex_lock(&c->mu);
		if ((b = c->spares)) {
			c->spares = b->hnext;
			c->nspares--;
		}
		pthread_mutex_unlock(&c->mu);
	}
	if (b) {
		uint8_t *owned = b->owned;
		size_t cap = b->cap;
		free(atomic_load_explicit(&b->entry_off, memory_order_relaxed));
		memset(b, 0, sizeof(*b));
		b->owned = owned;
		b->cap = cap;
	} else if (!(b = calloc(1, sizeof(*b)))) {
		err_set(ERR_NOMEM, "block cache");
		return NULL;
	}
	atomic_init(&b->refs, 1);
	return b;
}

void storage_block_cache_release(void *block)
{
	struct cached_block *b = block;
	if (b && atomic_fetch_sub(&b->refs, 1) == 1)
		block_free(b);
}

/* Under the lock: unlinks `b` from the list and its bucket. */
static void unlink_block(struct block_cache *c, struct cached_block *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		c->head = b->next;
	if (b->next)
		b->next->prev = b->prev;
	else
		c->tail = b->prev;
	struct cached_block **pp = &c->buckets[bucket_of(b->file, b->off)];
	while (*pp != b)
		pp = &(*pp)->hnext;
	*pp = b->hnext;
	c->bytes -= block_bytes(b);
	b->resident = 0;
}

static void push_front(struct block_cache *c, struct cached_block *b)
{
	b->prev = NULL;
	b->next = c->head;
	if (c->head)
		c->head->prev = b;
	c->head = b;
	if (!c->tail)
		c->tail = b;
}

struct cached_block *storage_block_cache_get(struct block_cache *c,
					     uint64_t file, uint64_t off)
{
	if (!c || !c->capacity)
		return NULL;
	pthread_mutex_lock(&c->mu);
	struct cached_block *b = c->buckets[bucket_of(file, off)];
	while (b && (b->file != file || b->off != off))
		b = b->hnext;
	c->requests++;
	if (b) {
		c->hits++;
		atomic_fetch_add(&b->refs, 1);
		if (c->head != b) { /* move to front */
			b->prev->next = b->next;
			if (b->next)
				b->next->prev = b->prev;
			else
				c->tail = b->prev;
			push_front(c, b);
		}
	}
	pthread_mutex_unlock(&c->mu);
	return b;
}

struct cached_block *storage_block_cache_insert(struct block_cache *c,
						struct cached_block *b,
						uint64_t file, uint64_t off,
						const uint8_t *data, size_t len,
						uint64_t next_off)
{
	b->data = data;
	b->len = len;
	b->next_off = next_off;
	b->file = file;
	b->off = off;
	if (!c || !c->capacity || len > c->capacity / 4)
		return b;
	struct cached_block *evicted = NULL;
	pthread_mutex_lock(&c->mu);
	size_t k = bucket_of(file, off);
	struct cached_block *x = c->buckets[k];
	while (x && (x->file != file || x->off != off))
		x = x->hnext;
	if (x) { /* raced: use the resident copy */
		atomic_fetch_add(&x->refs, 1);
		pthread_mutex_unlock(&c->mu);
		block_free(b);
		return x;
	}
	atomic_fetch_add(&b->refs, 1); /* the cache's */
	b->hnext = c->buckets[k];
	c->buckets[k] = b;
	push_front(c, b);
	b->resident = 1;
	c->bytes += block_bytes(b);
	while (c->bytes > c->capacity && c->tail && c->tail != b) {
		struct cached_block *t = c->tail;
		unlink_block(c, t);
		/* unlinked, nobody can take a new reference: if the cache's
		 * was the last, the block is ours to keep or free */
		if (atomic_fetch_sub(&t->refs, 1) != 1)
			continue;
		if (c->nspares < CACHE_SPARES) {
			t->hnext = c->spares;
			c->spares = t;
			c->nspares++;
		} else {
			t->hnext = evicted;
			evicted = t;
		}
	}
	pthread_mutex_unlock(&c->mu);
	while (evicted) {
		struct cached_block *n = evicted->hnext;
		block_free(evicted);
		evicted = n;
	}
	return b;
}

struct cached_block *storage_block_cache_put(struct block_cache *c,
					     uint64_t file, uint64_t off,
					     uint8_t *data, size_t len,
					     uint64_t next_off)
{
	struct cached_block *b = storage_block_cache_alloc(c);
	if (!b) {
		free(data);
		return NULL;
	}
	free(b->owned);
	b->owned = data;
	b->cap = len;
	return storage_block_cache_insert(c, b, file, off, data, len, next_off);
}

size_t storage_block_cache_bytes(struct block_cache *c)
{
	if (!c)
		return 0;
	pthread_mutex_lock(&c->mu);
	size_t n = c->bytes;
	pthread_mutex_unlock(&c->mu);
	return n;
}

void storage_block_cache_stats(struct block_cache *c,
			       struct block_cache_stats *out)
{
	*out = (struct block_cache_stats){0};
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	out->capacity = c->capacity;
	out->bytes = c->bytes;
	out->hits = c->hits;
	out->requests = c->requests;
	for (struct cached_block *b = c->head; b; b = b->next)
		out->entries++;
	pthread_mutex_unlock(&c->mu);
}

void storage_block_cache_delete(struct block_cache *c)
{
	if (!c)
		return;
	while (c->head) {
		struct cached_block *b = c->head;
		unlink_block(c, b);
		storage_block_cache_release(b);
	}
	while (c->spares) {
		struct cached_block *b = c->spares;
		c->spares = b->hnext;
		block_free(b);
	}
	free(c->buckets);
	free(c->ghost);
	pthread_mutex_destroy(&c->mu);
	free(c);
}
