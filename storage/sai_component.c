/*
 * SAI component layout (all integers little-endian):
 *
 *   header    "CSAI" u32 version(2), u32 ident_len, ident,
 *             u32 masked crc32c(ident)       (version 1: no ident)
 *   block*    u32 payload_len, u32 masked crc32c(payload), payload:
 *             u32 count, count x (u32 term_len, term, u32 key_len, key)
 *   directory u32 nblocks, nblocks x (u64 block_offset, u32 len, first term)
 *   footer    u64 directory_offset, u32 masked crc32c(directory), "ISAC"
 *
 * Entries are sorted by (term, key) bytewise and unique.
 */
#include "storage/sai_component.h"

#include "common/crc.h"
#include "common/env.h"

#include <stdlib.h>
#include <string.h>

#define SAI_VERSION 2u
#define SAI_FOOTER  16u

void sai_builder_init(struct sai_builder *b)
{
	memset(b, 0, sizeof(*b));
}

int sai_builder_add(struct sai_builder *b, const void *term, uint32_t term_len,
		    const void *key, uint32_t key_len)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		struct sai_entry *v = realloc(b->v, cap * sizeof(*v));
		if (!v)
			return SAI_NOMEM;
		b->v = v;
		b->cap = cap;
	}
	struct sai_entry *e = &b->v[b->n];
	e->term = malloc(term_len ? term_len : 1);
	e->key = malloc(key_len ? key_len : 1);
	if (!e->term || !e->key) {
		free(e->term);
		free(e->key);
		return SAI_NOMEM;
	}
	memcpy(e->term, term, term_len);
	memcpy(e->key, key, key_len);
	e->term_len = term_len;
	e->key_len = key_len;
	b->n++;
	return SAI_OK;
}

void sai_builder_free(struct sai_builder *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->v[i].term);
		free(b->v[i].key);
	}
	free(b->v);
	memset(b, 0, sizeof(*b));
}

static int bytes_cmp(const uint8_t *a, uint32_t al, const uint8_t *b,
		     uint32_t bl)
{
	uint32_t m = al < bl ? al : bl;
	int c = m ? memcmp(a, b, m) : 0;
	if (c)
		return c;
	return al < bl ? -1 : al > bl ? 1 : 0;
}

static int entry_cmp(const void *x, const void *y)
{
	const struct sai_entry *a = x, *b = y;
	int c = bytes_cmp(a->term, a->term_len, b->term, b->term_len);
	return c ? c : bytes_cmp(a->key, a->key_len, b->key, b->key_len);
}

struct buf {
	uint8_t *p;
	size_t n, cap;
	int err;
};

static void put(struct buf *b, const void *d, size_t n)
{
	if (b->err)
		return;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p) {
			b->err = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void put32(struct buf *b, uint32_t v)
{
	uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
			(uint8_t)(v >> 24)};
	put(b, x, 4);
}

static void put64(struct buf *b, uint64_t v)
{
	put32(b, (uint32_t)v);
	put32(b, (uint32_t)(v >> 32));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void set32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

int sai_build(struct sai_builder *b, uint8_t **out, size_t *out_len)
{
	return sai_build_ident(b, NULL, 0, out, out_len);
}

int sai_build_ident(struct sai_builder *b, const void *ident,
		    uint32_t ident_len, uint8_t **out, size_t *out_len)
{
	if (b->n)
		qsort(b->v, b->n, sizeof(*b->v), entry_cmp);
	size_t u = 0; /* drop duplicates */
	for (size_t i = 0; i < b->n; i++) {
		if (u && entry_cmp(&b->v[u - 1], &b->v[i]) == 0) {
			free(b->v[i].term);
			free(b->v[i].key);
			continue;
		}
		b->v[u++] = b->v[i];
	}
	b->n = u;
	size_t nblocks = (b->n + SAI_BLOCK_ENTRIES - 1) / SAI_BLOCK_ENTRIES;
	uint64_t *offs = calloc(nblocks ? nblocks : 1, sizeof(*offs));
	if (!offs)
		return SAI_NOMEM;
	struct buf o = {0};
	put(&o, "CSAI", 4);
	put32(&o, SAI_VERSION);
	put32(&o, ident_len);
	put(&o, ident, ident_len);
	put32(&o, crc32c_mask(crc32c(0, ident, ident_len)));
	for (size_t blk = 0; blk < nblocks; blk++) {
		size_t first = blk * SAI_BLOCK_ENTRIES;
		size_t last = first + SAI_BLOCK_ENTRIES;
		if (last > b->n)
			last = b->n;
		offs[blk] = o.n;
		size_t hdr = o.n;
		put32(&o, 0);
		put32(&o, 0);
		size_t start = o.n;
		put32(&o, (uint32_t)(last - first));
		for (size_t i = first; i < last; i++) {
			put32(&o, b->v[i].term_len);
			put(&o, b->v[i].term, b->v[i].term_len);
			put32(&o, b->v[i].key_len);
			put(&o, b->v[i].key, b->v[i].key_len);
		}
		if (o.err)
			break;
		set32(o.p + hdr, (uint32_t)(o.n - start));
		set32(o.p + hdr + 4,
		      crc32c_mask(crc32c(0, o.p + start, o.n - start)));
	}
	size_t dir = o.n;
	put32(&o, (uint32_t)nblocks);
	for (size_t blk = 0; blk < nblocks; blk++) {
		const struct sai_entry *e = &b->v[blk * SAI_BLOCK_ENTRIES];
		put64(&o, offs[blk]);
		put32(&o, e->term_len);
		put(&o, e->term, e->term_len);
	}
	free(offs);
	size_t dir_end = o.n;
	put64(&o, dir);
	if (!o.err)
		put32(&o, crc32c_mask(crc32c(0, o.p + dir, dir_end - dir)));
	put(&o, "ISAC", 4);
	if (o.err) {
		free(o.p);
		return SAI_NOMEM;
	}
	*out = o.p;
	*out_len = o.n;
	return SAI_OK;
}

struct dir {
	const uint8_t *p; /* after nblocks */
	const uint8_t *end;
	uint32_t nblocks;
};

/* The header's length (after the identity's crc), checked; 0 if bad. */
static size_t header_len(const uint8_t *buf, size_t len)
{
	if (len < 8 + SAI_FOOTER || memcmp(buf, "CSAI", 4) != 0 ||
	    memcmp(buf + len - 4, "ISAC", 4) != 0)
		return 0;
	uint32_t v = get32(buf + 4);
	if (v == 1)
		return 8;
	if (v != 2 || len < 16 + SAI_FOOTER)
		return 0;
	uint32_t il = get32(buf + 8);
	if (il > len - 16 - SAI_FOOTER)
		return 0;
	if (crc32c_mask(crc32c(0, buf + 12, il)) != get32(buf + 12 + il))
		return 0;
	return 16 + (size_t)il;
}

int sai_ident(const uint8_t *buf, size_t len, const uint8_t **ident,
	      uint32_t *ident_len)
{
	size_t h = header_len(buf, len);
	if (!h)
		return SAI_CORRUPT;
	*ident = h > 8 ? buf + 12 : buf;
	*ident_len = h > 8 ? get32(buf + 8) : 0;
	return SAI_OK;
}

static int open_dir(const uint8_t *buf, size_t len, struct dir *d)
{
	size_t h = header_len(buf, len);
	if (!h)
		return SAI_CORRUPT;
	const uint8_t *f = buf + len - SAI_FOOTER;
	uint64_t dir = get64(f);
	if (dir < h || dir + 4 > len - SAI_FOOTER)
		return SAI_CORRUPT;
	size_t dlen = len - SAI_FOOTER - dir;
	if (crc32c_mask(crc32c(0, buf + dir, dlen)) != get32(f + 8))
		return SAI_CORRUPT;
	d->nblocks = get32(buf + dir);
	d->p = buf + dir + 4;
	d->end = buf + len - SAI_FOOTER;
	return SAI_OK;
}

/* Reads the block at `off`, checking its crc; sets *payload / *plen. */
static int open_block(const uint8_t *buf, size_t len, uint64_t off,
		      const uint8_t **payload, uint32_t *plen)
{
	if (off < 8 || off + 8 > len)
		return SAI_CORRUPT;
	uint32_t n = get32(buf + off);
	if (n < 4 || n > len - off - 8)
		return SAI_CORRUPT;
	if (crc32c_mask(crc32c(0, buf + off + 8, n)) != get32(buf + off + 4))
		return SAI_CORRUPT;
	*payload = buf + off + 8;
	*plen = n;
	return SAI_OK;
}

/* The entry of block p (n bytes) at *at: its term and key, *at moved past
 * it; SAI_CORRUPT when a length runs past the block. */
static int next_entry(const uint8_t *p, uint32_t n, size_t *at,
		      const uint8_t **t, uint32_t *tl, const uint8_t **k,
		      uint32_t *kl)
{
	if (*at + 4 > n)
		return SAI_CORRUPT;
	*tl = get32(p + *at);
	*at += 4;
	if (*tl > n - *at)
		return SAI_CORRUPT;
	*t = p + *at;
	*at += *tl;
	if (*at + 4 > n)
		return SAI_CORRUPT;
	*kl = get32(p + *at);
	*at += 4;
	if (*kl > n - *at)
		return SAI_CORRUPT;
	*k = p + *at;
	*at += *kl;
	return SAI_OK;
}

/* Walks a verified block; calls fn for entries of `term` (NULL: none).
 * Sets *past when an entry beyond term was seen. */
static int scan_block(const uint8_t *p, uint32_t n, const void *term,
		      uint32_t term_len, sai_key_fn fn, void *arg, int *past)
{
	uint32_t count = get32(p);
	size_t at = 4;
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *t, *k;
		uint32_t tl, kl;
		if (next_entry(p, n, &at, &t, &tl, &k, &kl) != SAI_OK)
			return SAI_CORRUPT;
		if (!term)
			continue;
		int c = bytes_cmp(t, tl, term, term_len);
		if (c == 0)
			fn(arg, k, kl);
		else if (c > 0) {
			*past = 1;
			return SAI_OK;
		}
	}
	return at == n ? SAI_OK : SAI_CORRUPT;
}

int sai_lookup(const uint8_t *buf, size_t len, const void *term,
	       uint32_t term_len, sai_key_fn fn, void *arg)
{
	struct dir d;
	int rc = open_dir(buf, len, &d);
	if (rc)
		return rc;
	/* The blocks to read: from the last whose first term is below `term`
	 * (a run of equal terms may start in it), then each whose first term
	 * equals it. */
	uint64_t *offs = NULL;
	size_t noffs = 0;
	const uint8_t *q = d.p;
	for (uint32_t i = 0; i < d.nblocks; i++) {
		if (q + 12 > d.end) {
			free(offs);
			return SAI_CORRUPT;
		}
		uint64_t off = get64(q);
		uint32_t tl = get32(q + 8);
		q += 12;
		if (tl > (size_t)(d.end - q)) {
			free(offs);
			return SAI_CORRUPT;
		}
		int c = bytes_cmp(q, tl, term, term_len);
		q += tl;
		if (c > 0)
			break;
		if (c < 0)
			noffs = 0; /* a later block below term replaces it */
		uint64_t *v = realloc(offs, (noffs + 1) * sizeof(*v));
		if (!v) {
			free(offs);
			return SAI_NOMEM;
		}
		offs = v;
		offs[noffs++] = off;
	}
	rc = SAI_OK;
	int past = 0;
	for (size_t i = 0; i < noffs && !past && rc == SAI_OK; i++) {
		const uint8_t *p;
		uint32_t n;
		rc = open_block(buf, len, offs[i], &p, &n);
		if (rc == SAI_OK)
			rc = scan_block(p, n, term, term_len, fn, arg, &past);
	}
	free(offs);
	return rc;
}

int sai_verify(const uint8_t *buf, size_t len)
{
	struct dir d;
	int rc = open_dir(buf, len, &d);
	if (rc)
		return rc;
	const uint8_t *q = d.p;
	for (uint32_t i = 0; i < d.nblocks; i++) {
		if (q + 12 > d.end)
			return SAI_CORRUPT;
		uint64_t off = get64(q);
		uint32_t tl = get32(q + 8);
		q += 12;
		if (tl > (size_t)(d.end - q))
			return SAI_CORRUPT;
		q += tl;
		const uint8_t *p;
		uint32_t n;
		int past = 0;
		rc = open_block(buf, len, off, &p, &n);
		if (rc == SAI_OK)
			rc = scan_block(p, n, NULL, 0, NULL, NULL, &past);
		if (rc)
			return rc;
	}
	return q == d.end ? SAI_OK : SAI_CORRUPT;
}

int sai_component_save(struct env *e, const char *path, const uint8_t *buf,
		       size_t len)
{
	return env_write_file_atomic(e, path, buf, len);
}

int sai_component_load(struct env *e, const char *path, uint8_t **out,
		       size_t *out_len)
{
	uint8_t *buf;
	size_t len;
	int rc = env_read_file(e, path, (size_t)1 << 31, &buf, &len);
	if (rc)
		return rc;
	if (sai_verify(buf, len) != SAI_OK) {
		free(buf);
		return SAI_CORRUPT;
	}
	*out = buf;
	*out_len = len;
	return SAI_OK;
}

/* Whether term t is below (-1), within (0) or above (1) the bounds (NULL:
 * unbounded). */
static int in_bounds(const uint8_t *t, uint32_t tl, const struct sai_bound *lo,
		     const struct sai_bound *hi)
{
	if (lo) {
		int c = bytes_cmp(t, tl, lo->term, lo->len);
		if (c < 0 || (c == 0 && !lo->incl))
			return -1;
	}
	if (hi) {
		int c = bytes_cmp(t, tl, hi->term, hi->len);
		if (c > 0 || (c == 0 && !hi->incl))
			return 1;
	}
	return 0;
}

int sai_lookup_range(const uint8_t *buf, size_t len, const struct sai_bound *lo,
		     const struct sai_bound *hi, sai_key_fn fn, void *arg)
{
	struct dir d;
	int rc = open_dir(buf, len, &d);
	if (rc)
		return rc;
	/* from the last block whose first term is below lo (the first block
	 * without lo) to the last whose first term is not above hi */
	const uint8_t *q = d.p;
	int64_t first = -1;
	for (uint32_t i = 0; i < d.nblocks; i++) {
		if (q + 12 > d.end)
			return SAI_CORRUPT;
		uint32_t tl = get32(q + 8);
		if (tl > (size_t)(d.end - q - 12))
			return SAI_CORRUPT;
		if (first < 0 || !lo ||
		    bytes_cmp(q + 12, tl, lo->term, lo->len) < 0)
			first = i;
		q += 12 + tl;
	}
	q = d.p;
	for (uint32_t i = 0; i < d.nblocks; i++) {
		uint64_t off = get64(q);
		uint32_t tl = get32(q + 8);
		const uint8_t *ft = q + 12;
		q += 12 + tl;
		if (lo && (int64_t)i < first)
			continue;
		if (hi && bytes_cmp(ft, tl, hi->term, hi->len) > 0)
			break;
		const uint8_t *p;
		uint32_t n;
		rc = open_block(buf, len, off, &p, &n);
		if (rc)
			return rc;
		uint32_t count = get32(p);
		size_t at = 4;
		for (uint32_t e = 0; e < count; e++) {
			const uint8_t *t, *k;
			uint32_t etl, kl;
			if (next_entry(p, n, &at, &t, &etl, &k, &kl) != SAI_OK)
				return SAI_CORRUPT;
			int b = in_bounds(t, etl, lo, hi);
			if (b > 0)
				return SAI_OK;
			if (b == 0)
				fn(arg, k, kl);
		}
	}
	return SAI_OK;
}
