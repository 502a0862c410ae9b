/*
 * A Merkle tree over a token range (start, end] (start exclusive, end
 * inclusive; start >= end wraps around the ring, start == end is the whole
 * ring), for repair's validation.
 *
 * The range is split evenly by token into 2^depth leaves. A leaf is the
 * XOR of the 16-byte row digests whose partition token falls in it
 * (storage_fragment_rows), so the order rows are added in does not
 * matter; an inner node is the XOR of its two children, that is the XOR
 * of every row digest in its token range. A node's value so depends only
 * on its range, not on the tree's depth: node (level, index) of two trees
 * of the same range compares whatever their depths, and a node's right
 * child is its value XOR its left child (repair's exchange sends only
 * left children). Row digests hash the partition key and the row id, so
 * distinct rows never cancel out but with the digests' collision
 * probability. Two trees compare by descending only where nodes differ.
 * Depth comes from the estimated partition count (about one partition
 * per leaf), capped at MERKLE_MAX_DEPTH and by a byte budget.
 *
 * Pure: no threads, no I/O. Two trees compare only with the same range
 * and depth.
 */
#ifndef CASSINI_REPAIR_MERKLE_H
#define CASSINI_REPAIR_MERKLE_H

#include "common/buf.h"

#include <stdbool.h>

#include <stddef.h>
#include <stdint.h>

#define MERKLE_MAX_DEPTH 20

struct merkle_tree;

/* A token range (start, end]. */
struct merkle_range {
	int64_t start, end;
};

/* The depth for about `partitions` partitions: ceil(log2(partitions)),
 * at most MERKLE_MAX_DEPTH and at most what keeps the tree's nodes
 * (2^(depth+1) - 1 of 16 bytes) within `max_bytes` (0: no budget). */
int merkle_depth_for(uint64_t partitions, size_t max_bytes);

/* A tree of empty leaves; the depth is lowered until no leaf is empty
 * (a range of fewer than 2^depth tokens). NULL with ERR_INVALID for a depth
 * outside 0..MERKLE_MAX_DEPTH, ERR_NOMEM. */
struct merkle_tree *merkle_new(struct merkle_range r, int depth);
void merkle_delete(struct merkle_tree *t);

struct merkle_range merkle_range(const struct merkle_tree *t);
int merkle_depth(const struct merkle_tree *t);
size_t merkle_leaf_count(const struct merkle_tree *t);

/* Whether `token` is in the tree's range. */
bool merkle_contains(const struct merkle_range r, int64_t token);

/* The leaf holding `token` (which must be in the range), and the token
 * range leaf `i` covers. */
size_t merkle_leaf_of(const struct merkle_tree *t, int64_t token);
struct merkle_range merkle_leaf_range(const struct merkle_tree *t, size_t i);

/* XORs a row digest into its token's leaf; ERR_INVALID for a token out
 * of range. Invalidates inner hashes until merkle_finish. */
int merkle_add(struct merkle_tree *t, int64_t token, const uint8_t hash[16]);
/* Computes the inner nodes from the leaves. */
void merkle_finish(struct merkle_tree *t);
/* The root (after merkle_finish). */
const uint8_t *merkle_root(const struct merkle_tree *t);
/* Node `index` (0 .. 2^level - 1) of `level` (0 .. depth; the leaves are
 * at depth), after merkle_finish: 16 bytes, borrowed from the tree. */
const uint8_t *merkle_node(const struct merkle_tree *t, int level,
			   size_t index);
/* The first 8 bytes of a node as a number: the value repair's exchange
 * sends (XOR commutes with truncation, so children still derive). */
uint64_t merkle_node64(const struct merkle_tree *t, int level, size_t index);

/* Pure shape functions of a range cut in 2^level nodes: the node holding
 * `token` (which must be in `r`) and the token range node `index`
 * covers, the same in every tree of `r` at least `level` deep. REQUIRES:
 * 2^level <= the range's width (merkle_new's depth for `r` >= level). */
size_t merkle_node_of(struct merkle_range r, int level, int64_t token);
/* Whether `r` holds at least 2^level tokens (no node of `level` empty). */
bool merkle_level_fits(struct merkle_range r, int level);
struct merkle_range merkle_node_range(struct merkle_range r, int level,
				      size_t index);

/* A new finished tree of the same range at `depth` (<= t's), each leaf
 * the XOR of the leaves of `t` it covers: exactly the tree the same rows
 * would have built at that depth. A replica builds at the deepest depth
 * the budget allows and folds to what its partition count asks for; trees
 * of different depths compare once folded to the shallower. NULL with
 * ERR_INVALID for a deeper depth, ERR_NOMEM. */
struct merkle_tree *merkle_fold(const struct merkle_tree *t, int depth);

/* The token ranges of the leaves where `a` and `b` (both finished)
 * differ, adjacent ones coalesced, in leaf order, into *out (malloc'd,
 * caller frees; NULL when *n is 0). ERR_INVALID when the trees differ in
 * range or depth. */
int merkle_diff(const struct merkle_tree *a, const struct merkle_tree *b,
		struct merkle_range **out, size_t *n);

/* A whole tree's serial form: version, range, depth, leaves (inner
 * nodes are recomputed on decode). Appends to `out`. Repair's exchange
 * does not send whole trees (repair.h); this is for tests and tools. */
int merkle_encode(const struct merkle_tree *t, struct buf *out);
/* Decodes untrusted bytes: ERR_CORRUPT on anything malformed. The result
 * is finished. */
struct merkle_tree *merkle_decode(const uint8_t *p, size_t len);

#endif
