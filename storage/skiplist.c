/*
 * Concurrent-read skiplist; see skiplist_internal.h.
 */
#include "storage/skiplist_internal.h"

#include "common/err.h"

#include <string.h>

static uint64_t order_of(const struct skiplist *s, const void *key)
{
	return s->order && key ? s->order(key) : 0;
}

/* Whether node n sorts before `key` (whose order is `ko`). */
static inline bool before(const struct skiplist *s,
			  const struct skiplist_node *n, const void *key,
			  uint64_t ko)
{
	if (n->order != ko)
		return n->order < ko;
	return s->cmp(s->ctx, skiplist_key(n), key) < 0;
}

static inline bool same(const struct skiplist *s, const struct skiplist_node *n,
			const void *key, uint64_t ko)
{
	return n->order == ko && s->cmp(s->ctx, skiplist_key(n), key) == 0;
}

static struct skiplist_node *node_new(struct skiplist *s, void *key, int height)
{
	size_t size = sizeof(struct skiplist_node) +
		      (size_t)height * sizeof(_Atomic(struct skiplist_node *));
	struct skiplist_node *n = arena_alloc_aligned(s->arena, size, 8);
	if (!n)
		return NULL;
	atomic_init(&n->key, key);
	n->order = order_of(s, key);
	for (int i = 0; i < height; i++)
		atomic_init(&n->next[i], NULL);
	return n;
}

int skiplist_init(struct skiplist *s, struct arena *a, skiplist_cmp_fn cmp,
		  const void *ctx)
{
	return skiplist_init_ordered(s, a, cmp, NULL, ctx);
}

int skiplist_init_ordered(struct skiplist *s, struct arena *a,
			  skiplist_cmp_fn cmp, skiplist_order_fn order,
			  const void *ctx)
{
	memset(s, 0, sizeof(*s));
	s->arena = a;
	s->cmp = cmp;
	s->order = order;
	s->ctx = ctx;
	s->rnd = 0x9e3779b97f4a7c15ULL ^ (uintptr_t)s;
	atomic_init(&s->height, 1);
	atomic_init(&s->count, 0);
	s->head = node_new(s, NULL, SKIPLIST_MAX_HEIGHT);
	return s->head ? 0 : err_set(ERR_NOMEM, "skiplist");
}

static int random_height(struct skiplist *s)
{
	int h = 1;
	while (h < SKIPLIST_MAX_HEIGHT) {
		s->rnd ^= s->rnd << 13;
		s->rnd ^= s->rnd >> 7;
		s->rnd ^= s->rnd << 17;
		if ((s->rnd & 3) != 0)
			break;
		h++;
	}
	return h;
}

static inline struct skiplist_node *next_at(struct skiplist_node *n, int l)
{
	return atomic_load_explicit(&n->next[l], memory_order_acquire);
}

/* First node >= key; fills prev[] with the last node < key per level. */
static struct skiplist_node *find_ge(const struct skiplist *s, const void *key,
				     struct skiplist_node **prev)
{
	uint64_t ko = order_of(s, key);
	struct skiplist_node *x = s->head;
	int level = atomic_load_explicit(&((struct skiplist *)s)->height,
					 memory_order_relaxed) -
		    1;
	for (;;) {
		struct skiplist_node *next = next_at(x, level);
		/* The search is a chain of cache misses: while `next` is
		 * fetched, fetch where it goes if it stops here too. */
		if (level > 0)
			__builtin_prefetch(next_at(x, level - 1));
		if (next && before(s, next, key, ko)) {
			x = next;
			continue;
		}
		if (prev)
			prev[level] = x;
		if (level == 0)
			return next;
		level--;
	}
}

struct skiplist_node *skiplist_find(const struct skiplist *s, const void *key)
{
	struct skiplist_node *n = find_ge(s, key, NULL);
	if (n && same(s, n, key, order_of(s, key)))
		return n;
	return NULL;
}

struct skiplist_node *skiplist_seek(const struct skiplist *s, const void *key)
{
	if (!key)
		return next_at(s->head, 0);
	return find_ge(s, key, NULL);
}

struct skiplist_node *skiplist_seek_before(const struct skiplist *s,
					   const void *key)
{
	uint64_t ko = order_of(s, key);
	struct skiplist_node *x = s->head;
	int level = atomic_load_explicit(&((struct skiplist *)s)->height,
					 memory_order_relaxed) -
		    1;
	for (;;) {
		struct skiplist_node *next = next_at(x, level);
		if (next && (!key || before(s, next, key, ko))) {
			x = next;
			continue;
		}
		if (level == 0)
			return x == s->head ? NULL : x;
		level--;
	}
}

struct skiplist_node *skiplist_find_prev(const struct skiplist *s,
					 const void *key,
					 struct skiplist_node **prev)
{
	struct skiplist_node *n = find_ge(s, key, prev);
	if (n && same(s, n, key, order_of(s, key)))
		return n;
	return NULL;
}

struct skiplist_node *skiplist_insert(struct skiplist *s, void *key)
{
	struct skiplist_node *prev[SKIPLIST_MAX_HEIGHT];
	find_ge(s, key, prev);
	return skiplist_insert_at(s, key, prev);
}

struct skiplist_node *skiplist_insert_at(struct skiplist *s, void *key,
					 struct skiplist_node **prev)
{
	int h = random_height(s);
	int cur = atomic_load_explicit(&s->height, memory_order_relaxed);
	if (h > cur) {
		for (int i = cur; i < h; i++)
			prev[i] = s->head;
		atomic_store_explicit(&s->height, h, memory_order_relaxed);
	}
	struct skiplist_node *n = node_new(s, key, h);
	if (!n)
		return NULL;
	for (int i = 0; i < h; i++) {
		atomic_store_explicit(&n->next[i], next_at(prev[i], i),
				      memory_order_relaxed);
		atomic_store_explicit(&prev[i]->next[i], n,
				      memory_order_release);
	}
	atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
	return n;
}
