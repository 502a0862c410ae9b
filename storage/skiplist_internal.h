/*
 * A skiplist for one writer and any number of concurrent readers
 * (leveldb's memtable structure). Nodes live in an arena and are never
 * removed. The writer must be serialised by the caller; readers need no
 * lock: links are published with release stores and read with acquire
 * loads. A node's key pointer may be replaced by the writer with one that
 * compares equal (a newer version of the same entry); readers see the old
 * or the new one.
 *
 * An optional `order` function maps a key to 64 bits that sort like the
 * keys do (a prefix: a < b whenever order(a) < order(b)). Each node keeps
 * its key's order, so a search compares most nodes without touching
 * their keys: half the cache misses of a memtable lookup.
 */
#ifndef CASSINI_STORAGE_SKIPLIST_INTERNAL_H
#define CASSINI_STORAGE_SKIPLIST_INTERNAL_H

#include "common/arena.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define SKIPLIST_MAX_HEIGHT 12

typedef int (*skiplist_cmp_fn)(const void *ctx, const void *a, const void *b);
typedef uint64_t (*skiplist_order_fn)(const void *key);

struct skiplist_node {
	_Atomic(void *) key;
	uint64_t order; /* order(key), fixed before the node is published */
	_Atomic(struct skiplist_node *) next[]; /* height entries */
};

struct skiplist {
	struct arena *arena;
	skiplist_cmp_fn cmp;
	skiplist_order_fn order; /* NULL: every key's order is 0 */
	const void *ctx;
	struct skiplist_node *head;
	_Atomic int height;
	uint64_t rnd;
	_Atomic size_t count;
};

int skiplist_init(struct skiplist *s, struct arena *a, skiplist_cmp_fn cmp,
		  const void *ctx);
/* skiplist_init with an order function (see above). */
int skiplist_init_ordered(struct skiplist *s, struct arena *a,
			  skiplist_cmp_fn cmp, skiplist_order_fn order,
			  const void *ctx);
/* The node whose key equals `key`, or NULL. */
struct skiplist_node *skiplist_find(const struct skiplist *s, const void *key);
/* The first node >= key (NULL key: the first node), or NULL. */
struct skiplist_node *skiplist_seek(const struct skiplist *s, const void *key);
/* The last node < key (NULL key: the last node), or NULL. */
struct skiplist_node *skiplist_seek_before(const struct skiplist *s,
					   const void *key);
/* Inserts `key`, which must not be present. Returns the node or NULL. */
struct skiplist_node *skiplist_insert(struct skiplist *s, void *key);
/* One search for find-or-insert: the node equal to `key`, or NULL with
 * `prev` (SKIPLIST_MAX_HEIGHT entries) filled for skiplist_insert_at,
 * which must follow before any other insert. */
struct skiplist_node *skiplist_find_prev(const struct skiplist *s,
					 const void *key,
					 struct skiplist_node **prev);
struct skiplist_node *skiplist_insert_at(struct skiplist *s, void *key,
					 struct skiplist_node **prev);

static inline struct skiplist_node *skiplist_next(const struct skiplist_node *n)
{
	return atomic_load_explicit(&((struct skiplist_node *)n)->next[0],
				    memory_order_acquire);
}
static inline void *skiplist_key(const struct skiplist_node *n)
{
	return atomic_load_explicit(&((struct skiplist_node *)n)->key,
				    memory_order_acquire);
}
static inline void skiplist_set_key(struct skiplist_node *n, void *key)
{
	atomic_store_explicit(&n->key, key, memory_order_release);
}

#endif
