/*
 * Merkle trees (merkle.h). Nodes are stored heap-style: node 1 is the
 * root, node k has children 2k and 2k+1, the leaves are nodes
 * 2^depth .. 2^(depth+1) - 1.
 *
 * Token arithmetic is on offsets: a token's offset is (token - start - 1)
 * modulo 2^64, in [0, W) where W = end - start (2^64 for the whole ring).
 * Leaf of offset o = floor(o * 2^depth / W); leaf i covers offsets
 * [b(i), b(i+1)) with b(i) = ceil(i * W / 2^depth), that is tokens
 * (start + b(i), start + b(i+1)].
 *
 * Inner nodes are XORs of their children (merkle.h says why).
 *
 * Wire form (version 1):
 *   u8 version | be64 start | be64 end | u8 depth | 16 * 2^depth leaves
 */
#include "repair/merkle.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

#define MERKLE_WIRE_VERSION 1

struct merkle_tree {
	struct merkle_range r;
	int depth;
	unsigned __int128 width; /* W: 1..2^64 */
	uint8_t (*nodes)[16];    /* 2^(depth+1) entries; [0] unused */
};

static unsigned __int128 range_width(struct merkle_range r)
{
	uint64_t d = (uint64_t)r.end - (uint64_t)r.start;
	return d ? d : (unsigned __int128)1 << 64;
}

int merkle_depth_for(uint64_t partitions, size_t max_bytes)
{
	int d = 0;
	while (d < MERKLE_MAX_DEPTH && ((uint64_t)1 << d) < partitions)
		d++;
	while (d > 0 && max_bytes &&
	       ((((size_t)1 << (d + 1)) - 1) * 16) > max_bytes)
		d--;
	return d;
}

struct merkle_tree *merkle_new(struct merkle_range r, int depth)
{
	if (depth < 0 || depth > MERKLE_MAX_DEPTH) {
		err_set(ERR_INVALID, "merkle depth %d out of range", depth);
		return NULL;
	}
	/* no empty leaf: a leaf's range (x, x) would read as the ring */
	while (depth > 0 && ((unsigned __int128)1 << depth) > range_width(r))
		depth--;
	struct merkle_tree *t = calloc(1, sizeof(*t));
	if (t)
		t->nodes = calloc((size_t)2 << depth, 16);
	if (!t || !t->nodes) {
		free(t);
		err_set(ERR_NOMEM, "merkle tree");
		return NULL;
	}
	t->r = r;
	t->depth = depth;
	t->width = range_width(r);
	merkle_finish(t);
	return t;
}

void merkle_delete(struct merkle_tree *t)
{
	if (!t)
		return;
	free(t->nodes);
	free(t);
}

struct merkle_range merkle_range(const struct merkle_tree *t)
{
	return t->r;
}

int merkle_depth(const struct merkle_tree *t)
{
	return t->depth;
}

size_t merkle_leaf_count(const struct merkle_tree *t)
{
	return (size_t)1 << t->depth;
}

static uint64_t offset_of(struct merkle_range r, int64_t token)
{
	return (uint64_t)token - (uint64_t)r.start - 1;
}

bool merkle_contains(const struct merkle_range r, int64_t token)
{
	return (unsigned __int128)offset_of(r, token) < range_width(r);
}

bool merkle_level_fits(struct merkle_range r, int level)
{
	return level >= 0 && level < 64 &&
	       ((unsigned __int128)1 << level) <= range_width(r);
}

size_t merkle_node_of(struct merkle_range r, int level, int64_t token)
{
	unsigned __int128 o = offset_of(r, token);
	return (size_t)((o << level) / range_width(r));
}

size_t merkle_leaf_of(const struct merkle_tree *t, int64_t token)
{
	return merkle_node_of(t->r, t->depth, token);
}

static uint64_t boundary(unsigned __int128 width, int level, size_t i)
{
	unsigned __int128 n = (unsigned __int128)i * width;
	unsigned __int128 l = (unsigned __int128)1 << level;
	return (uint64_t)((n + l - 1) >> level);
}

struct merkle_range merkle_node_range(struct merkle_range r, int level,
				      size_t index)
{
	uint64_t s = (uint64_t)r.start;
	unsigned __int128 w = range_width(r);
	struct merkle_range lr = {(int64_t)(s + boundary(w, level, index)),
				  (int64_t)(s + boundary(w, level, index + 1))};
	return lr;
}

struct merkle_range merkle_leaf_range(const struct merkle_tree *t, size_t i)
{
	return merkle_node_range(t->r, t->depth, i);
}

int merkle_add(struct merkle_tree *t, int64_t token, const uint8_t hash[16])
{
	if (!merkle_contains(t->r, token))
		return err_set(ERR_INVALID, "token %lld outside the tree",
			       (long long)token);
	uint8_t *leaf =
		t->nodes[((size_t)1 << t->depth) + merkle_leaf_of(t, token)];
	for (int k = 0; k < 16; k++)
		leaf[k] ^= hash[k];
	return 0;
}

void merkle_finish(struct merkle_tree *t)
{
	for (size_t k = ((size_t)1 << t->depth) - 1; k >= 1; k--)
		for (int b = 0; b < 16; b++)
			t->nodes[k][b] =
				t->nodes[2 * k][b] ^ t->nodes[2 * k + 1][b];
}

const uint8_t *merkle_root(const struct merkle_tree *t)
{
	return t->nodes[1];
}

const uint8_t *merkle_node(const struct merkle_tree *t, int level, size_t index)
{
	return t->nodes[((size_t)1 << level) + index];
}

uint64_t merkle_node64(const struct merkle_tree *t, int level, size_t index)
{
	return be64_load(merkle_node(t, level, index));
}

struct merkle_tree *merkle_fold(const struct merkle_tree *t, int depth)
{
	if (depth < 0 || depth > t->depth) {
		err_set(ERR_INVALID, "cannot fold a tree of depth %d to %d",
			t->depth, depth);
		return NULL;
	}
	struct merkle_tree *f = merkle_new(t->r, depth);
	if (!f)
		return NULL;
	size_t from = (size_t)1 << t->depth, to = (size_t)1 << depth;
	int shift = t->depth - depth;
	for (size_t i = 0; i < from; i++) {
		uint8_t *dst = f->nodes[to + (i >> shift)];
		for (int k = 0; k < 16; k++)
			dst[k] ^= t->nodes[from + i][k];
	}
	merkle_finish(f);
	return f;
}

struct diff_out {
	struct merkle_range *v;
	size_t n, cap;
};

static int diff_push(struct diff_out *d, struct merkle_range lr)
{
	if (d->n && d->v[d->n - 1].end == lr.start) {
		d->v[d->n - 1].end = lr.end;
		return 0;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 8;
		struct merkle_range *v = realloc(d->v, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "merkle diff");
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n++] = lr;
	return 0;
}

/* Descends into node k where it differs; leaves in order. */
static int diff_node(const struct merkle_tree *a, const struct merkle_tree *b,
		     size_t k, struct diff_out *d)
{
	if (memcmp(a->nodes[k], b->nodes[k], 16) == 0)
		return 0;
	size_t leaves = (size_t)1 << a->depth;
	if (k >= leaves)
		return diff_push(d, merkle_leaf_range(a, k - leaves));
	if (diff_node(a, b, 2 * k, d))
		return -1;
	return diff_node(a, b, 2 * k + 1, d);
}

int merkle_diff(const struct merkle_tree *a, const struct merkle_tree *b,
		struct merkle_range **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (a->r.start != b->r.start || a->r.end != b->r.end ||
	    a->depth != b->depth)
		return err_set(ERR_INVALID, "trees of different shapes");
	struct diff_out d = {0};
	if (diff_node(a, b, 1, &d)) {
		free(d.v);
		return -1;
	}
	*out = d.v;
	*n = d.n;
	return 0;
}

int merkle_encode(const struct merkle_tree *t, struct buf *out)
{
	size_t leaves = (size_t)1 << t->depth;
	if (buf_put_u8(out, MERKLE_WIRE_VERSION) ||
	    buf_put_be64(out, (uint64_t)t->r.start) ||
	    buf_put_be64(out, (uint64_t)t->r.end) ||
	    buf_put_u8(out, (uint8_t)t->depth) ||
	    buf_append(out, t->nodes[leaves], leaves * 16))
		return err_set(ERR_NOMEM, "merkle encode");
	return 0;
}

struct merkle_tree *merkle_decode(const uint8_t *p, size_t len)
{
	struct cursor c = cursor_make(p, len);
	uint8_t version, depth;
	uint64_t start, end;
	if (cursor_u8(&c, &version) || version != MERKLE_WIRE_VERSION ||
	    cursor_be64(&c, &start) || cursor_be64(&c, &end) ||
	    cursor_u8(&c, &depth) || depth > MERKLE_MAX_DEPTH ||
	    cursor_left(&c) != ((size_t)16 << depth)) {
		err_set(ERR_CORRUPT, "malformed merkle tree");
		return NULL;
	}
	struct merkle_range r = {(int64_t)start, (int64_t)end};
	struct merkle_tree *t = merkle_new(r, depth);
	if (!t)
		return NULL;
	/* merkle_new makes a narrow range's tree shallower (no empty
	 * leaf): a peer's tree deeper than its range allows is not one we
	 * make, and its leaves would not fit */
	if (t->depth != depth) {
		merkle_delete(t);
		err_set(ERR_CORRUPT,
			"malformed merkle tree (depth %u for a "
			"range of %llu tokens)",
			(unsigned)depth, (unsigned long long)(end - start));
		return NULL;
	}
	size_t leaves = (size_t)1 << depth;
	if (cursor_copy(&c, t->nodes[leaves], leaves * 16)) {
		merkle_delete(t);
		err_set(ERR_CORRUPT, "malformed merkle tree");
		return NULL;
	}
	merkle_finish(t);
	return t;
}
