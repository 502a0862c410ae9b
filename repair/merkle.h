/*
 * A Merkle tree over a token range (start, end] (start exclusive, end
 * inclusive; start >= end wraps around the ring, start == end is the whole
 * ring), for repair's validation.
 *
 * The range is split evenly by token into 2^depth leaves. A leaf is the
 * XOR of the 16-byte row digests whose partition token falls in it
 * (storage_fragment_rows), so the order rows are added in does not
 * matter; an inner node is MurmurHash3_x64_128 of its two children, so
 * two trees compare by descending only where hashes differ. Depth comes
 * from the estimated partition count (about one partition per leaf),
 * capped at MERKLE_MAX_DEPTH and by a byte budget.
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
/* Computes the inner hashes from the leaves. */
void merkle_finish(struct merkle_tree *t);
/* The root hash (after merkle_finish). */
const uint8_t *merkle_root(const struct merkle_tree *t);

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

/* The wire form: version, range, depth, leaves (inner hashes are
 * recomputed on decode). Appends to `out`. */
int merkle_encode(const struct merkle_tree *t, struct buf *out);
/* Decodes untrusted bytes: ERR_CORRUPT on anything malformed. The result
 * is finished. */
struct merkle_tree *merkle_decode(const uint8_t *p, size_t len);

#endif
