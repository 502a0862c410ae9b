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
 * where the next one (or the directory) starts.
 *
 * Building: the builder holds the pairs added since its last spill; with
 * sai_builder_spill, once it holds `hold` of them (or hold_bytes of their
 * bytes) it sorts them and writes them to a run file (`<prefix>-<n>`,
 * unsynced: a temporary file, removed by sai_builder_free, and at start
 * by the SSTable directory scan when the prefix is a tmp- name). Every
 * SAI_RUN_FANIN runs of one level are merged into one of the next, so a
 * build of n pairs keeps at most about (SAI_RUN_FANIN - 1) x log16(n /
 * hold) runs. The component is laid out by one merge of the runs and
 * the held pairs (each run read SAI_RUN_BUF at a time), a block at a
 * time: to a file, only the directory (a block's first entry per
 * SAI_BLOCK_ENTRIES) grows with the component. The bytes are the same
 * whether or not it spilled.
 *
 * Reading (struct sai_file): the header and the directory are read once
 * and checked; each block a lookup needs is read with a pread (or taken
 * from the block cache, which only holds verified blocks) and its crc32c
 * checked. The directory's first (term, key) of every block lets a lookup
 * seek to a (term, key) position by binary search: a paged step reads
 * the block holding its resume position and those it goes on into.
 */
#include "storage/sai_component.h"

#include "common/crc.h"
#include "common/env.h"
#include "storage/cache_internal.h"

#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAI_VERSION 3u
#define SAI_FOOTER  16u

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

/* ---- building ---------------------------------------------------------- */

/* A sorted run on disk: entries (u32 term_len, term, u32 key_len, key),
 * `len` bytes whose crc32c is `crc` (kept here, checked when read). */
struct sai_run {
	uint32_t id;
	uint32_t level; /* 0: spilled; n + 1: a merge of SAI_RUN_FANIN of n */
	uint64_t len;
	uint32_t crc;
};

#define SAI_RUN_FANIN 16
#define SAI_RUN_BUF   (64u * 1024)

void sai_builder_init(struct sai_builder *b)
{
	memset(b, 0, sizeof(*b));
}

int sai_builder_spill(struct sai_builder *b, struct env *e, const char *prefix,
		      size_t hold, size_t hold_bytes)
{
	char *p = strdup(prefix);
	if (!p)
		return SAI_NOMEM;
	free(b->prefix);
	b->prefix = p;
	b->env = e;
	b->hold = hold ? hold : 1;
	b->hold_bytes = hold_bytes;
	return SAI_OK;
}

static void run_path(const struct sai_builder *b, uint32_t id, char *out,
		     size_t cap)
{
	snprintf(out, cap, "%s-%u", b->prefix, id);
}

static void free_entries(struct sai_builder *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->v[i].term);
		free(b->v[i].key);
	}
	b->n = 0;
	b->bytes = 0;
}

void sai_builder_free(struct sai_builder *b)
{
	free_entries(b);
	for (size_t i = 0; i < b->nruns; i++) {
		char path[4096];
		run_path(b, b->runs[i].id, path, sizeof(path));
		env_unlink(b->env, path);
	}
	free(b->runs);
	free(b->v);
	free(b->prefix);
	memset(b, 0, sizeof(*b));
}

/* Sorts the held entries and drops repeats. */
static void sort_held(struct sai_builder *b)
{
	if (b->n)
		qsort(b->v, b->n, sizeof(*b->v), entry_cmp);
	size_t u = 0;
	for (size_t i = 0; i < b->n; i++) {
		if (u && entry_cmp(&b->v[u - 1], &b->v[i]) == 0) {
			b->bytes -= b->v[i].term_len + b->v[i].key_len;
			free(b->v[i].term);
			free(b->v[i].key);
			continue;
		}
		b->v[u++] = b->v[i];
	}
	b->n = u;
}

/* Where merged entries go: a run being written, or a component. */
struct sink {
	struct buf o; /* pending bytes (a component in memory: all of it) */
	struct env_file *f;
	uint64_t off; /* bytes already appended to f */
	uint32_t crc; /* a run's, of every byte */
	bool run;
	/* a component: the directory, the open block */
	struct buf dir;
	uint32_t nblocks, blk_count;
	size_t blk_hdr;
	int rc; /* SAI_OK or the first error */
};

static void sink_flush(struct sink *k)
{
	if (k->o.err && k->rc == SAI_OK)
		k->rc = SAI_NOMEM;
	if (!k->f || k->rc != SAI_OK || !k->o.n)
		return;
	if (k->run)
		k->crc = crc32c(k->crc, k->o.p, k->o.n);
	if (env_file_append(k->f, k->o.p, k->o.n))
		k->rc = SAI_IO;
	k->off += k->o.n;
	k->o.n = 0;
}

static void block_end(struct sink *k)
{
	if (!k->blk_count || k->o.err)
		return;
	size_t start = k->blk_hdr + 8;
	set32(k->o.p + start, k->blk_count);
	set32(k->o.p + k->blk_hdr, (uint32_t)(k->o.n - start));
	set32(k->o.p + k->blk_hdr + 4,
	      crc32c_mask(crc32c(0, k->o.p + start, k->o.n - start)));
	k->blk_count = 0;
	if (k->o.n >= SAI_RUN_BUF)
		sink_flush(k);
}

static void sink_add(struct sink *k, const uint8_t *term, uint32_t tl,
		     const uint8_t *key, uint32_t kl)
{
	if (!k->run && !k->blk_count) {
		/* a block starts: its offset and first entry */
		put64(&k->dir, k->off + k->o.n);
		put32(&k->dir, tl);
		put(&k->dir, term, tl);
		put32(&k->dir, kl);
		put(&k->dir, key, kl);
		k->nblocks++;
		k->blk_hdr = k->o.n;
		put32(&k->o, 0);
		put32(&k->o, 0);
		put32(&k->o, 0); /* the count */
	}
	put32(&k->o, tl);
	put(&k->o, term, tl);
	put32(&k->o, kl);
	put(&k->o, key, kl);
	if (k->run) {
		if (k->o.n >= SAI_RUN_BUF)
			sink_flush(k);
	} else if (++k->blk_count == SAI_BLOCK_ENTRIES) {
		block_end(k);
	}
	if (k->o.err && k->rc == SAI_OK)
		k->rc = SAI_NOMEM;
}

static void sink_header(struct sink *k, const void *ident, uint32_t ident_len)
{
	put(&k->o, "CSAI", 4);
	put32(&k->o, SAI_VERSION);
	put32(&k->o, ident_len);
	put(&k->o, ident, ident_len);
	put32(&k->o, crc32c_mask(crc32c(0, ident, ident_len)));
}

/* The last block, the directory and the footer. */
static void sink_finish(struct sink *k)
{
	block_end(k);
	uint64_t dir = k->off + k->o.n;
	uint8_t nb[4];
	set32(nb, k->nblocks);
	put(&k->o, nb, 4);
	put(&k->o, k->dir.p, k->dir.n);
	uint32_t crc = crc32c(crc32c(0, nb, 4), k->dir.p, k->dir.n);
	put64(&k->o, dir);
	put32(&k->o, crc32c_mask(crc));
	put(&k->o, "ISAC", 4);
	sink_flush(k);
}

/* A run read back a buffer at a time. */
struct run_reader {
	struct env_file *f;
	uint64_t off, end; /* file bytes read, and the run's */
	uint8_t *p;
	size_t cap, pos, len;
	uint32_t crc, want;
	bool has;
	const uint8_t *term, *key;
	uint32_t tl, kl;
};

/* At least `need` bytes from pos in the buffer (unless the run ends). */
static int rr_fill(struct run_reader *r, size_t need)
{
	if (r->len - r->pos >= need)
		return SAI_OK;
	size_t rem = r->len - r->pos;
	memmove(r->p, r->p + r->pos, rem);
	r->pos = 0;
	r->len = rem;
	if (need > r->cap) {
		uint8_t *q = realloc(r->p, need);
		if (!q)
			return SAI_NOMEM;
		r->p = q;
		r->cap = need;
	}
	while (r->len < need && r->off < r->end) {
		size_t want = r->cap - r->len;
		if (want > r->end - r->off)
			want = (size_t)(r->end - r->off);
		ssize_t n = env_file_pread(r->f, r->p + r->len, want, r->off);
		if (n < 0)
			return SAI_IO;
		if (n == 0)
			return SAI_CORRUPT;
		r->len += (size_t)n;
		r->off += (uint64_t)n;
	}
	return r->len >= need ? SAI_OK : SAI_CORRUPT;
}

static int rr_next(struct run_reader *r)
{
	r->has = false;
	if (r->pos == r->len && r->off == r->end)
		return r->crc == r->want ? SAI_OK : SAI_CORRUPT;
	int rc = rr_fill(r, 4);
	if (rc)
		return rc;
	/* lengths within what is left of the run (no huge buffer for a
	 * damaged one) */
	uint64_t left = r->end - r->off + (r->len - r->pos);
	uint32_t tl = get32(r->p + r->pos);
	if (8 + (uint64_t)tl > left)
		return SAI_CORRUPT;
	if ((rc = rr_fill(r, 8 + (size_t)tl)))
		return rc;
	uint32_t kl = get32(r->p + r->pos + 4 + tl);
	size_t n = 8 + (size_t)tl + kl;
	if (n > left)
		return SAI_CORRUPT;
	if ((rc = rr_fill(r, n)))
		return rc;
	r->crc = crc32c(r->crc, r->p + r->pos, n);
	r->tl = tl;
	r->kl = kl;
	r->term = r->p + r->pos + 4;
	r->key = r->p + r->pos + 8 + tl;
	r->pos += n;
	r->has = true;
	return SAI_OK;
}

static int rr_open(struct sai_builder *b, const struct sai_run *run,
		   struct run_reader *r)
{
	memset(r, 0, sizeof(*r));
	char path[4096];
	run_path(b, run->id, path, sizeof(path));
	r->end = run->len;
	r->want = run->crc;
	r->cap = SAI_RUN_BUF;
	if (!(r->p = malloc(r->cap)))
		return SAI_NOMEM;
	if (env_file_open(b->env, path, ENV_FILE_READ, &r->f))
		return SAI_IO;
	return rr_next(r);
}

static void rr_close(struct run_reader *r)
{
	if (r->f)
		env_file_close(r->f);
	free(r->p);
}

/* Merges runs [first, first + nr) and the held entries (sorted; when
 * `held`) into k, each (term, key) once. */
static int merge(struct sai_builder *b, size_t first, size_t nr, bool held,
		 struct sink *k)
{
	struct run_reader *rs = nr ? calloc(nr, sizeof(*rs)) : NULL;
	if (nr && !rs)
		return SAI_NOMEM;
	int rc = SAI_OK;
	for (size_t i = 0; i < nr && rc == SAI_OK; i++)
		rc = rr_open(b, &b->runs[first + i], &rs[i]);
	size_t hi = 0; /* the next held entry */
	struct buf last = {0};
	bool have_last = false;
	while (rc == SAI_OK && k->rc == SAI_OK) {
		/* the least current entry: source nr is the held ones */
		size_t best = SIZE_MAX;
		const uint8_t *bt = NULL, *bk = NULL;
		uint32_t btl = 0, bkl = 0;
		for (size_t i = 0; i <= nr; i++) {
			const uint8_t *t, *key;
			uint32_t tl, kl;
			if (i < nr) {
				if (!rs[i].has)
					continue;
				t = rs[i].term;
				tl = rs[i].tl;
				key = rs[i].key;
				kl = rs[i].kl;
			} else {
				if (!held || hi == b->n)
					continue;
				t = b->v[hi].term;
				tl = b->v[hi].term_len;
				key = b->v[hi].key;
				kl = b->v[hi].key_len;
			}
			int c = best == SIZE_MAX ? -1
						 : bytes_cmp(t, tl, bt, btl);
			if (!c)
				c = bytes_cmp(key, kl, bk, bkl);
			if (c < 0) {
				best = i;
				bt = t;
				btl = tl;
				bk = key;
				bkl = kl;
			}
		}
		if (best == SIZE_MAX)
			break;
		/* a (term, key) of several sources: once (last holds
		 * u32 term_len, term, key) */
		bool dup = false;
		if (have_last) {
			uint32_t ltl = get32(last.p);
			dup = bytes_cmp(last.p + 4, ltl, bt, btl) == 0 &&
			      bytes_cmp(last.p + 4 + ltl,
					(uint32_t)(last.n - 4 - ltl), bk,
					bkl) == 0;
		}
		if (!dup) {
			sink_add(k, bt, btl, bk, bkl);
			last.n = 0;
			put32(&last, btl);
			put(&last, bt, btl);
			put(&last, bk, bkl);
			if (last.err)
				rc = SAI_NOMEM;
			have_last = true;
		}
		if (best == nr)
			hi++;
		else
			rc = rr_next(&rs[best]);
	}
	for (size_t i = 0; i < nr; i++)
		rr_close(&rs[i]);
	free(rs);
	free(last.p);
	if (rc == SAI_OK)
		rc = k->rc;
	return rc;
}

static int run_add(struct sai_builder *b, uint32_t level, uint32_t *id,
		   struct sink *k)
{
	memset(k, 0, sizeof(*k));
	if (b->nruns == b->runs_cap) {
		size_t cap = b->runs_cap ? b->runs_cap * 2 : 8;
		struct sai_run *r = realloc(b->runs, cap * sizeof(*r));
		if (!r)
			return SAI_NOMEM;
		b->runs = r;
		b->runs_cap = cap;
	}
	char path[4096];
	*id = b->next_run++;
	run_path(b, *id, path, sizeof(path));
	k->run = true;
	if (env_file_open(b->env, path,
			  ENV_FILE_WRITE | ENV_FILE_CREATE | ENV_FILE_TRUNC,
			  &k->f))
		return SAI_IO;
	/* listed now, so that it is removed whatever happens next */
	b->runs[b->nruns++] = (struct sai_run){*id, level, 0, 0};
	return SAI_OK;
}

static int run_done(struct sai_builder *b, struct sink *k, int rc)
{
	if (rc == SAI_OK)
		sink_flush(k);
	if (rc == SAI_OK)
		rc = k->rc;
	if (env_file_close(k->f) && rc == SAI_OK)
		rc = SAI_IO;
	free(k->o.p);
	struct sai_run *r = &b->runs[b->nruns - 1];
	r->len = k->off;
	r->crc = k->crc;
	return rc;
}

/* Removes runs [first, first + n) (merged into the one after them). */
static void runs_drop(struct sai_builder *b, size_t first, size_t n)
{
	for (size_t i = first; i < first + n; i++) {
		char path[4096];
		run_path(b, b->runs[i].id, path, sizeof(path));
		env_unlink(b->env, path);
	}
	memmove(b->runs + first, b->runs + first + n,
		(b->nruns - first - n) * sizeof(*b->runs));
	b->nruns -= n;
}

/* The held entries to a new run; SAI_RUN_FANIN runs of one level merged
 * into one of the next. */
static int spill(struct sai_builder *b)
{
	sort_held(b);
	struct sink k = {0};
	uint32_t id;
	int rc = run_add(b, 0, &id, &k);
	for (size_t i = 0; rc == SAI_OK && i < b->n; i++)
		sink_add(&k, b->v[i].term, b->v[i].term_len, b->v[i].key,
			 b->v[i].key_len);
	if (k.f)
		rc = run_done(b, &k, rc);
	b->spilled += b->n;
	free_entries(b);
	while (rc == SAI_OK && b->nruns >= SAI_RUN_FANIN &&
	       b->runs[b->nruns - SAI_RUN_FANIN].level ==
		       b->runs[b->nruns - 1].level) {
		size_t first = b->nruns - SAI_RUN_FANIN;
		rc = run_add(b, b->runs[first].level + 1, &id, &k);
		if (rc == SAI_OK)
			rc = merge(b, first, SAI_RUN_FANIN, false, &k);
		if (k.f)
			rc = run_done(b, &k, rc);
		if (rc == SAI_OK)
			runs_drop(b, first, SAI_RUN_FANIN);
	}
	return rc;
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
	b->bytes += (size_t)term_len + key_len;
	if (b->n > b->peak)
		b->peak = b->n;
	if (b->env &&
	    (b->n >= b->hold || (b->hold_bytes && b->bytes >= b->hold_bytes)))
		return spill(b);
	return SAI_OK;
}

static int build(struct sai_builder *b, const void *ident, uint32_t ident_len,
		 struct sink *k)
{
	sort_held(b);
	sink_header(k, ident, ident_len);
	int rc = merge(b, 0, b->nruns, true, k);
	if (rc == SAI_OK) {
		sink_finish(k);
		rc = k->rc;
	}
	free(k->dir.p);
	k->dir.p = NULL;
	if (b->nruns)
		runs_drop(b, 0, b->nruns);
	return rc;
}

int sai_build(struct sai_builder *b, uint8_t **out, size_t *out_len)
{
	return sai_build_ident(b, NULL, 0, out, out_len);
}

int sai_build_ident(struct sai_builder *b, const void *ident,
		    uint32_t ident_len, uint8_t **out, size_t *out_len)
{
	struct sink k = {0};
	int rc = build(b, ident, ident_len, &k);
	if (rc != SAI_OK) {
		free(k.o.p);
		return rc;
	}
	*out = k.o.p;
	*out_len = k.o.n;
	return SAI_OK;
}

int sai_build_write(struct sai_builder *b, const void *ident,
		    uint32_t ident_len, struct env_file *f, uint64_t *out_len)
{
	struct sink k = {.f = f};
	int rc = build(b, ident, ident_len, &k);
	free(k.o.p);
	if (rc == SAI_OK && out_len)
		*out_len = k.off;
	return rc;
}

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
static int retarget(struct target *g, struct buf *tb, const uint8_t *t,
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
	struct buf tb = {0};
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
	struct buf prev = {0};
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
