/*
 * SAI component layout (all integers little-endian):
 *
 *   header    "CSAI" u32 version(2), u32 ident_len, ident,
 *             u32 masked crc32c(ident)       (version 1: no ident)
 *   block*    u32 payload_len, u32 masked crc32c(payload), payload:
 *             u32 count, count x (u32 term_len, term, u32 key_len, key)
 *   directory u32 nblocks, nblocks x (u64 block_offset, u32 term_len,
 *             first term, u32 key_len, first key)
 *             (versions 1, 2: no first key)
 *   footer    u64 directory_offset, u32 masked crc32c(directory), "ISAC"
 *
 * Entries are sorted by (term, key) bytewise and unique. A block ends
 * where the next one (or the directory) starts. Writing, and the
 * bounded builder that spills sorted runs: sai_build.c.
 *
 * Reading (struct sai_file): the header and the directory are read once
 * and checked; each block a lookup needs is read with a pread (or taken
 * from the block cache, which only holds verified blocks) and its crc32c
 * checked. The directory's first (term, key) of every block lets a lookup
 * seek to a (term, key) position by binary search: a paged step reads
 * the block holding its resume position and those it goes on into.
 */
#include "storage/sai_component_internal.h"

#include "common/crc.h"
#include "common/env.h"
#include "storage/cache_internal.h"

#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading ------------------------------------------------------------ */

struct sai_dirent {
	uint64_t off, end; /* the block's bytes on disk */
	const uint8_t *term, *key;
	uint32_t tl, kl;
};

struct sai_file {
	/* the bytes (sai_lookup, sai_verify) or a file */
	const uint8_t *mem;
	struct env_file *f;
	struct block_cache *cache;
	uint64_t cache_id;
	uint64_t size;
	uint32_t version;
	uint8_t *ident; /* malloc'ed */
	uint32_t ident_len;
	uint8_t *dir; /* the directory's bytes, malloc'ed (file) */
	size_t dir_len;
	struct sai_dirent *d;
	uint32_t nblocks;
	_Atomic uint64_t block_gets, block_reads, entries;
};

/* Reads n bytes at off (file) or points at them (bytes). */
static int src_read(struct sai_file *sf, uint64_t off, size_t n, uint8_t *tmp,
		    const uint8_t **out)
{
	if (off > sf->size || n > sf->size - off)
		return SAI_CORRUPT;
	if (sf->mem) {
		*out = sf->mem + off;
		return SAI_OK;
	}
	ssize_t r = env_file_pread(sf->f, tmp, n, off);
	if (r < 0)
		return SAI_IO;
	if ((size_t)r != n)
		return SAI_CORRUPT;
	*out = tmp;
	return SAI_OK;
}

/* The header, footer and directory, checked. */
static int sf_open(struct sai_file *sf)
{
	uint8_t tmp[16];
	const uint8_t *p;
	if (sf->size < 8 + SAI_FOOTER)
		return SAI_CORRUPT;
	int rc = src_read(sf, 0, 8, tmp, &p);
	if (rc)
		return rc;
	if (memcmp(p, "CSAI", 4) != 0)
		return SAI_CORRUPT;
	sf->version = get32(p + 4);
	if (sf->version < 1 || sf->version > SAI_VERSION)
		return SAI_CORRUPT;
	size_t h = 8;
	if (sf->version >= 2) {
		if (sf->size < 16 + SAI_FOOTER)
			return SAI_CORRUPT;
		rc = src_read(sf, 8, 4, tmp, &p);
		if (rc)
			return rc;
		uint32_t il = get32(p);
		if (il > sf->size - 16 - SAI_FOOTER)
			return SAI_CORRUPT;
		sf->ident = malloc(il + 4u);
		if (!sf->ident)
			return SAI_NOMEM;
		rc = src_read(sf, 12, il + 4u, sf->ident, &p);
		if (rc)
			return rc;
		if (p != sf->ident)
			memcpy(sf->ident, p, il + 4u);
		if (crc32c_mask(crc32c(0, sf->ident, il)) !=
		    get32(sf->ident + il))
			return SAI_CORRUPT;
		sf->ident_len = il;
		h = 16 + (size_t)il;
	}
	rc = src_read(sf, sf->size - SAI_FOOTER, SAI_FOOTER, tmp, &p);
	if (rc)
		return rc;
	if (memcmp(p + 12, "ISAC", 4) != 0)
		return SAI_CORRUPT;
	uint64_t dir = get64(p);
	uint32_t dcrc = get32(p + 8);
	if (dir < h || dir + 4 > sf->size - SAI_FOOTER)
		return SAI_CORRUPT;
	size_t dlen = (size_t)(sf->size - SAI_FOOTER - dir);
	const uint8_t *dp;
	if (sf->mem) {
		dp = sf->mem + dir;
	} else {
		sf->dir = malloc(dlen);
		if (!sf->dir)
			return SAI_NOMEM;
		sf->dir_len = dlen;
		rc = src_read(sf, dir, dlen, sf->dir, &dp);
		if (rc)
			return rc;
	}
	if (crc32c_mask(crc32c(0, dp, dlen)) != dcrc)
		return SAI_CORRUPT;
	uint32_t nb = get32(dp);
	if (nb > dlen / 12)
		return SAI_CORRUPT;
	sf->d = calloc(nb ? nb : 1, sizeof(*sf->d));
	if (!sf->d)
		return SAI_NOMEM;
	const uint8_t *q = dp + 4, *end = dp + dlen;
	uint64_t prev = h;
	for (uint32_t i = 0; i < nb; i++) {
		struct sai_dirent *e = &sf->d[i];
		if (end - q < 12)
			return SAI_CORRUPT;
		e->off = get64(q);
		e->tl = get32(q + 8);
		q += 12;
		if (e->tl > (size_t)(end - q))
			return SAI_CORRUPT;
		e->term = q;
		q += e->tl;
		if (sf->version >= 3) {
			if (end - q < 4)
				return SAI_CORRUPT;
			e->kl = get32(q);
			q += 4;
			if (e->kl > (size_t)(end - q))
				return SAI_CORRUPT;
			e->key = q;
			q += e->kl;
		}
		if (e->off < prev || e->off + 12 > dir)
			return SAI_CORRUPT;
		if (i)
			sf->d[i - 1].end = e->off;
		prev = e->off + 12;
	}
	if (nb)
		sf->d[nb - 1].end = dir;
	if (q != end)
		return SAI_CORRUPT;
	sf->nblocks = nb;
	return SAI_OK;
}

static void sf_close(struct sai_file *sf)
{
	free(sf->ident);
	free(sf->dir);
	free(sf->d);
	if (sf->f)
		env_file_close(sf->f);
}

int sai_file_open(struct env *e, const char *path, struct block_cache *cache,
		  struct sai_file **out)
{
	struct sai_file *sf = calloc(1, sizeof(*sf));
	if (!sf)
		return SAI_NOMEM;
	int rc = env_file_open(e, path, ENV_FILE_READ, &sf->f);
	if (rc) {
		free(sf);
		return SAI_IO;
	}
	int64_t size = env_file_size(sf->f);
	sf->size = size > 0 ? (uint64_t)size : 0;
	sf->cache = cache;
	sf->cache_id = storage_block_cache_file_id();
	rc = size < 0 ? SAI_IO : sf_open(sf);
	if (rc) {
		sf_close(sf);
		free(sf);
		return rc;
	}
	*out = sf;
	return SAI_OK;
}

void sai_file_close(struct sai_file *sf)
{
	if (!sf)
		return;
	sf_close(sf);
	free(sf);
}

void sai_file_ident(const struct sai_file *sf, const uint8_t **ident,
		    uint32_t *ident_len)
{
	*ident = sf->ident ? sf->ident : (const uint8_t *)"";
	*ident_len = sf->ident_len;
}

size_t sai_file_resident_bytes(const struct sai_file *sf)
{
	size_t n = sizeof(*sf) + sf->nblocks * sizeof(*sf->d);
	if (sf->ident)
		n += sf->ident_len + 4u;
	if (sf->dir)
		n += sf->dir_len;
	return n;
}

void sai_file_stats(const struct sai_file *sf, struct sai_file_stats *out)
{
	out->blocks = sf->nblocks;
	out->block_gets = atomic_load(&sf->block_gets);
	out->block_reads = atomic_load(&sf->block_reads);
	out->entries = atomic_load(&sf->entries);
}

/* A block's verified payload, and what holds it. */
struct blk {
	struct cached_block *cb;
	uint8_t *own;
	const uint8_t *p;
	uint32_t n;
};

static void blk_release(struct blk *b)
{
	if (b->cb)
		storage_block_cache_release(b->cb);
	free(b->own);
	memset(b, 0, sizeof(*b));
}

/* Block i, read and checked (or from the cache: `fill` lets it enter). */
static int blk_get(struct sai_file *sf, uint32_t i, bool fill, struct blk *b)
{
	memset(b, 0, sizeof(*b));
	const struct sai_dirent *e = &sf->d[i];
	atomic_fetch_add_explicit(&sf->block_gets, 1, memory_order_relaxed);
	if (sf->cache && fill) {
		b->cb = storage_block_cache_get(sf->cache, sf->cache_id,
						e->off);
		if (b->cb) {
			b->p = b->cb->data;
			b->n = (uint32_t)b->cb->len;
			return SAI_OK;
		}
	}
	uint64_t size = e->end - e->off;
	if (size < 12 || size > UINT32_MAX)
		return SAI_CORRUPT;
	atomic_fetch_add_explicit(&sf->block_reads, 1, memory_order_relaxed);
	const uint8_t *raw;
	if (!sf->mem) {
		b->own = malloc((size_t)size);
		if (!b->own)
			return SAI_NOMEM;
	}
	int rc = src_read(sf, e->off, (size_t)size, b->own, &raw);
	if (rc) {
		blk_release(b);
		return rc;
	}
	uint32_t n = get32(raw);
	if (n != size - 8 ||
	    crc32c_mask(crc32c(0, raw + 8, n)) != get32(raw + 4)) {
		blk_release(b);
		return SAI_CORRUPT;
	}
	b->p = raw + 8;
	b->n = n;
	if (sf->mem || !sf->cache || !fill ||
	    !storage_block_cache_admit(sf->cache, sf->cache_id, e->off))
		return SAI_OK;
	memmove(b->own, b->own + 8, n);
	struct cached_block *cb = storage_block_cache_put(
		sf->cache, sf->cache_id, e->off, b->own, n, e->end);
	b->own = NULL;
	if (!cb)
		return SAI_NOMEM;
	b->cb = cb;
	b->p = cb->data;
	b->n = (uint32_t)cb->len;
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

/* Where a lookup goes next: the first entry at or after (term, key), or
 * (after_term) the first whose term is above `term`. */
struct target {
	const uint8_t *term, *key;
	uint32_t tl, kl;
	bool after_term;
};

/* Whether entry (t, k) is before the target. */
static bool before(const struct target *g, const uint8_t *t, uint32_t tl,
		   const uint8_t *k, uint32_t kl)
{
	int c = bytes_cmp(t, tl, g->term, g->tl);
	if (c || g->after_term)
		return c < 0 || (c == 0 && g->after_term);
	return bytes_cmp(k, kl, g->key, g->kl) < 0;
}

/* The block where the target's entry is, if anywhere: the last whose
 * first entry is not after it (binary search over the directory). Without
 * first keys (versions 1, 2) the last whose first term is below it (a
 * run of equal terms may start there). */
static uint32_t seek_block(const struct sai_file *sf, const struct target *g)
{
	uint32_t lo = 0, hi = sf->nblocks; /* blocks [0, lo) qualify */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct sai_dirent *e = &sf->d[mid];
		int c = bytes_cmp(e->term, e->tl, g->term, g->tl);
		bool le;
		if (c)
			le = c < 0;
		else if (g->after_term)
			le = true;
		else if (sf->version >= 3)
			le = bytes_cmp(e->key, e->kl, g->key, g->kl) <= 0;
		else
			le = false;
		if (le)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : 0;
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

/* Sets the target to (t, from): t copied into *tb. */
static int retarget(struct target *g, struct sai_buf *tb, const uint8_t *t,
		    uint32_t tl, const void *from, uint32_t from_len)
{
	tb->n = 0;
	put(tb, t, tl);
	if (tb->err)
		return SAI_NOMEM;
	g->term = tb->p;
	g->tl = tl;
	g->key = from;
	g->kl = from ? from_len : 0;
	g->after_term = false;
	return SAI_OK;
}

int sai_file_lookup(struct sai_file *sf, const struct sai_bound *lo,
		    const struct sai_bound *hi, const void *from,
		    uint32_t from_len, sai_visit_fn fn, void *arg,
		    uint64_t *visited_out)
{
	if (!sf->nblocks)
		return SAI_OK;
	struct target g = {.term = lo ? lo->term : NULL,
			   .tl = lo ? lo->len : 0,
			   .key = from,
			   .kl = from ? from_len : 0,
			   .after_term = lo && !lo->incl};
	bool have_term = lo && lo->incl; /* g.term is the run's term */
	bool fresh = true;               /* no key given of it yet */
	struct sai_buf tb = {0};
	uint32_t i = seek_block(sf, &g);
	int rc = SAI_OK;
	uint64_t visited = 0;
	bool stop = false;
	while (i < sf->nblocks && rc == SAI_OK && !stop) {
		struct blk b;
		rc = blk_get(sf, i, true, &b);
		if (rc)
			break;
		uint32_t count = b.n >= 4 ? get32(b.p) : 0;
		if (b.n < 4)
			rc = SAI_CORRUPT;
		size_t at = 4;
		uint32_t next = i + 1;
		bool left = false; /* the block was left before its end */
		for (uint32_t x = 0; x < count && rc == SAI_OK; x++) {
			const uint8_t *t, *k;
			uint32_t tl, kl;
			if (next_entry(b.p, b.n, &at, &t, &tl, &k, &kl)) {
				rc = SAI_CORRUPT;
				break;
			}
			visited++;
			if (before(&g, t, tl, k, kl))
				continue;
			int ib = in_bounds(t, tl, lo, hi);
			if (ib > 0) {
				stop = true;
				break;
			}
			if (ib < 0)
				continue;
			if (!have_term || g.after_term ||
			    bytes_cmp(t, tl, g.term, g.tl) != 0) {
				/* a new term's run: its keys from `from` */
				rc = retarget(&g, &tb, t, tl, from, from_len);
				have_term = true;
				fresh = true;
				if (rc)
					break;
				if (before(&g, t, tl, k, kl)) {
					uint32_t j = seek_block(sf, &g);
					if (j > i) {
						next = j;
						left = true;
						break;
					}
					continue;
				}
			}
			bool first = fresh;
			fresh = false;
			if (!fn(arg, first, k, kl)) {
				/* the rest of this term's run is not wanted,
				 * nor any term when this one is the last */
				if (hi &&
				    bytes_cmp(t, tl, hi->term, hi->len) >= 0) {
					stop = true;
					break;
				}
				g.after_term = true;
				uint32_t j = seek_block(sf, &g);
				if (j > i) {
					next = j;
					left = true;
					break;
				}
			}
		}
		if (rc == SAI_OK && !stop && !left && at != b.n)
			rc = SAI_CORRUPT;
		blk_release(&b);
		i = next;
	}
	free(tb.p);
	atomic_fetch_add_explicit(&sf->entries, visited, memory_order_relaxed);
	if (visited_out)
		*visited_out += visited;
	return rc;
}

/* Every block read and checked, in order, and the directory's first
 * entries against the blocks'. */
static int sf_verify(struct sai_file *sf)
{
	struct sai_buf prev = {0};
	int rc = SAI_OK;
	bool any = false;
	for (uint32_t i = 0; i < sf->nblocks && rc == SAI_OK; i++) {
		struct blk b;
		rc = blk_get(sf, i, false, &b);
		if (rc)
			break;
		const struct sai_dirent *e = &sf->d[i];
		uint32_t count = b.n >= 4 ? get32(b.p) : 0;
		if (b.n < 4 || count == 0)
			rc = SAI_CORRUPT;
		size_t at = 4;
		for (uint32_t x = 0; x < count && rc == SAI_OK; x++) {
			const uint8_t *t, *k;
			uint32_t tl, kl;
			if (next_entry(b.p, b.n, &at, &t, &tl, &k, &kl)) {
				rc = SAI_CORRUPT;
				break;
			}
			if (x == 0 && (bytes_cmp(t, tl, e->term, e->tl) != 0 ||
				       (sf->version >= 3 &&
					bytes_cmp(k, kl, e->key, e->kl) != 0)))
				rc = SAI_CORRUPT;
			/* sorted and unique: the previous (term, key) below */
			if (any) {
				uint32_t ptl = get32(prev.p);
				const uint8_t *pt = prev.p + 4;
				int c = bytes_cmp(pt, ptl, t, tl);
				if (c > 0 ||
				    (c == 0 &&
				     bytes_cmp(pt + ptl,
					       (uint32_t)(prev.n - 4 - ptl), k,
					       kl) >= 0))
					rc = SAI_CORRUPT;
			}
			prev.n = 0;
			put32(&prev, tl);
			put(&prev, t, tl);
			put(&prev, k, kl);
			if (prev.err)
				rc = SAI_NOMEM;
			any = true;
		}
		if (rc == SAI_OK && at != b.n)
			rc = SAI_CORRUPT;
		blk_release(&b);
	}
	free(prev.p);
	return rc;
}

int sai_file_verify(struct sai_file *sf)
{
	return sf_verify(sf);
}

/* ---- in memory ----------------------------------------------------------- */

static int mem_open(const uint8_t *buf, size_t len, struct sai_file *sf)
{
	memset(sf, 0, sizeof(*sf));
	sf->mem = buf;
	sf->size = len;
	int rc = sf_open(sf);
	if (rc)
		sf_close(sf);
	return rc;
}

struct key_fn {
	sai_key_fn fn;
	void *arg;
};

static bool visit_all(void *arg, bool first, const uint8_t *key,
		      uint32_t key_len)
{
	struct key_fn *k = arg;
	(void)first;
	k->fn(k->arg, key, key_len);
	return true;
}

int sai_lookup_range(const uint8_t *buf, size_t len, const struct sai_bound *lo,
		     const struct sai_bound *hi, sai_key_fn fn, void *arg)
{
	struct sai_file sf;
	int rc = mem_open(buf, len, &sf);
	if (rc)
		return rc;
	struct key_fn k = {fn, arg};
	rc = sai_file_lookup(&sf, lo, hi, NULL, 0, visit_all, &k, NULL);
	sf_close(&sf);
	return rc;
}

int sai_lookup(const uint8_t *buf, size_t len, const void *term,
	       uint32_t term_len, sai_key_fn fn, void *arg)
{
	struct sai_bound b = {term, term_len, true};
	return sai_lookup_range(buf, len, &b, &b, fn, arg);
}

int sai_verify(const uint8_t *buf, size_t len)
{
	struct sai_file sf;
	int rc = mem_open(buf, len, &sf);
	if (rc)
		return rc;
	rc = sf_verify(&sf);
	sf_close(&sf);
	return rc;
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
