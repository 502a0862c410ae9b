/*
 * Writing SAI components (the layout: sai_component.c).
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
 */
#include "storage/sai_component_internal.h"

#include "common/crc.h"
#include "common/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	struct sai_buf o; /* pending bytes (a component in memory: all of it) */
	struct env_file *f;
	uint64_t off; /* bytes already appended to f */
	uint32_t crc; /* a run's, of every byte */
	bool run;
	/* a component: the directory, the open block */
	struct sai_buf dir;
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
	struct sai_buf last = {0};
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
