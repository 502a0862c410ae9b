/*
 * SSTable reader: open and verify the small components, find partitions
 * through summary -> index block -> entry, walk data blocks with the row
 * index, iterate entries for scans and compaction, and the directory scan
 * that removes leftovers.
 */
#define LOG_MODULE "storage"
#include "common/murmur3.h"
#include "storage/block_internal.h"
#include "storage/sstable_internal.h"

#include "common/err.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_PSTART 1
#define TAG_ATOM   2
#define TAG_PEND   3

static int read_component_v(struct sstable *s, const char *comp,
			    const char *magic, uint8_t max_version,
			    uint8_t *version, uint8_t **img,
			    const uint8_t **body, size_t *len)
{
	char *p = sst_path(s->dir, s->gen, comp, false);
	size_t n;
	if (!p)
		return -1;
	*img = NULL;
	int rc = env_read_file(s->env, p, 1u << 30, img, &n);
	if (!rc && storage_component_open_version(*img, n, magic, max_version,
						  version, body, len)) {
		free(*img);
		*img = NULL;
		rc = -1;
	}
	if (rc)
		err_prefix("%s", p);
	else
		s->disk_bytes += n;
	free(p);
	return rc;
}

static int read_component(struct sstable *s, const char *comp,
			  const char *magic, uint8_t **img,
			  const uint8_t **body, size_t *len)
{
	uint8_t v;
	return read_component_v(s, comp, magic, SST_VERSION, &v, img, body,
				len);
}

/* The version 2 tail: creation time, sizes, TTLs, tombstone histogram. */
static int stats_decode_v2(struct cursor *c, struct sst_stats *st)
{
	uint64_t v[5], bins;
	for (size_t i = 0; i < 5; i++)
		if (cursor_be64(c, &v[i]))
			return -1;
	if (cursor_uvarint(c, &bins) || bins > TOMB_HIST_BINS)
		return -1;
	st->created_at = (int64_t)v[0];
	st->uncompressed_size = v[1];
	st->marker_count = v[2];
	st->min_ttl = (int64_t)v[3];
	st->max_ttl = (int64_t)v[4];
	struct tomb_hist *h = &st->tomb_hist;
	for (size_t i = 0; i < bins; i++) {
		uint64_t pt;
		if (cursor_be64(c, &pt) || cursor_be64(c, &h->value[i]))
			return -1;
		h->point[i] = (int64_t)pt;
		if (i && h->point[i] <= h->point[i - 1])
			return -1; /* points are strictly ascending */
	}
	h->count = (size_t)bins;
	st->has_v2 = true;
	return 0;
}

int sst_stats_decode(const uint8_t *p, size_t len, uint8_t version,
		     struct sst_stats *st)
{
	struct slice layout;
	return sst_stats_decode_layout(p, len, version, st, &layout);
}

int sst_stats_decode_layout(const uint8_t *p, size_t len, uint8_t version,
			    struct sst_stats *st, struct slice *layout)
{
	memset(st, 0, sizeof(*st));
	*layout = (struct slice){NULL, 0};
	struct cursor c = cursor_make(p, len);
	uint64_t v[13];
	int rc = 0;
	for (size_t i = 0; i < 13 && !rc; i++)
		rc = cursor_be64(&c, &v[i]);
	uint8_t live;
	rc = rc || cursor_u8(&c, &live);
	for (size_t i = 0; i < SST_HIST_BUCKETS && !rc; i++)
		rc = cursor_be64(&c, &st->size_hist[i]);
	if (!rc && version >= 2)
		rc = stats_decode_v2(&c, st);
	if (!rc && version >= 3)
		rc = cursor_be32(&c, &st->level);
	if (!rc && version >= 4)
		rc = cursor_copy(&c, st->pending_repair,
				 sizeof(st->pending_repair));
	uint64_t ll;
	if (!rc && version >= 5)
		rc = cursor_uvarint(&c, &ll) || ll > cursor_left(&c) ||
		     cursor_take(&c, (size_t)ll, layout);
	if (rc || cursor_left(&c))
		return err_set(ERR_CORRUPT, "bad statistics");
	st->min_token = (int64_t)v[0];
	st->max_token = (int64_t)v[1];
	st->min_ts = (int64_t)v[2];
	st->max_ts = (int64_t)v[3];
	st->min_ldt = (int64_t)v[4];
	st->max_ldt = (int64_t)v[5];
	st->repaired_at = (int64_t)v[6];
	st->cell_count = v[7];
	st->tombstone_count = v[8];
	st->partition_count = v[9];
	st->log_end = (struct clpos){v[10], v[11]};
	st->data_size = v[12];
	st->has_live_no_ttl = live;
	/* The repair state decides what compacts with what and what repair
	 * validates again: an impossible one is damage, never trusted (the
	 * checksum covers bit rot; this, a writer that went wrong). */
	bool pending = sst_stats_pending(st);
	if (st->repaired_at < 0)
		return err_set(ERR_CORRUPT,
			       "bad statistics: repaired_at %" PRId64,
			       st->repaired_at);
	if (st->repaired_at > 0 && pending)
		return err_set(ERR_CORRUPT,
			       "bad statistics: repaired (repaired_at %" PRId64
			       ") and pending a repair session at once",
			       st->repaired_at);
	return 0;
}

double sst_droppable_ratio(const struct sst_stats *s, int64_t gc_before)
{
	uint64_t cells = s->cell_count + s->marker_count;
	if (!s->has_v2 || cells == 0)
		return 0;
	return storage_tomb_hist_sum(&s->tomb_hist, gc_before) / (double)cells;
}

static int load_stats(struct sstable *s)
{
	uint8_t *img, version;
	const uint8_t *p;
	size_t len;
	if (read_component_v(s, "Statistics.db", "CSST", SST_STATS_VERSION,
			     &version, &img, &p, &len))
		return -1;
	struct slice layout;
	int rc = sst_stats_decode_layout(p, len, version, &s->stats, &layout);
	if (!rc && layout.ptr) {
		s->layout = malloc(layout.len ? layout.len : 1);
		if (!s->layout)
			rc = err_set(ERR_NOMEM, "sstable layout");
		else
			memcpy(s->layout, layout.ptr, layout.len);
		s->layout_len = layout.len;
	}
	free(img);
	return rc ? err_prefix("sstable %s/ca-%" PRIu64 "-Statistics.db",
			       s->dir, s->gen)
		  : 0;
}

static int load_summary(struct sstable *s)
{
	const uint8_t *p;
	size_t len;
	if (read_component(s, "Summary.db", "CSSU", &s->sum_bytes, &p, &len))
		return -1;
	struct cursor c = cursor_make(p, len);
	uint64_t n;
	if (cursor_uvarint(&c, &n) || n > len / 4)
		return err_set(ERR_CORRUPT, "bad summary");
	s->sum_count = n;
	s->sum_token = calloc(n + 1, sizeof(*s->sum_token));
	s->sum_key = calloc(n + 1, sizeof(*s->sum_key));
	s->sum_off = calloc(n + 1, sizeof(*s->sum_off));
	s->sum_len = calloc(n + 1, sizeof(*s->sum_len));
	if (!s->sum_token || !s->sum_key || !s->sum_off || !s->sum_len)
		return err_set(ERR_NOMEM, "summary");
	for (uint64_t i = 0; i < n; i++) {
		uint64_t kl, tok;
		if (cursor_uvarint(&c, &kl) || kl > cursor_left(&c) ||
		    cursor_take(&c, kl, &s->sum_key[i]) ||
		    cursor_be64(&c, &tok) ||
		    cursor_uvarint(&c, &s->sum_off[i]) ||
		    cursor_uvarint(&c, &s->sum_len[i]))
			return err_set(ERR_CORRUPT, "bad summary entry");
		s->sum_token[i] = (int64_t)tok;
	}
	return cursor_left(&c) ? err_set(ERR_CORRUPT, "bad summary") : 0;
}

static int load_filter(struct sstable *s)
{
	uint8_t *img;
	const uint8_t *p;
	size_t len;
	if (read_component(s, "Filter.db", "CSBF", &img, &p, &len))
		return -1;
	struct cursor c = cursor_make(p, len);
	uint64_t bits;
	uint32_t k;
	int rc = cursor_be64(&c, &bits) || cursor_be32(&c, &k) || bits == 0 ||
		 k == 0 || k > 30 || (bits + 7) / 8 != cursor_left(&c);
	if (!rc) {
		s->bloom = malloc(cursor_left(&c));
		if (s->bloom)
			memcpy(s->bloom, c.pos, cursor_left(&c));
		s->bloom_bits = bits;
		s->bloom_k = k;
	}
	free(img);
	if (rc)
		return err_set(ERR_CORRUPT, "bad bloom filter");
	return s->bloom ? 0 : err_set(ERR_NOMEM, "bloom filter");
}

static void sstable_free(struct sstable *s)
{
	if (s->data)
		env_file_close(s->data);
	if (s->index)
		env_file_close(s->index);
	free(s->data_path);
	free(s->index_path);
	free(s->sum_token);
	free(s->sum_key);
	free(s->sum_off);
	free(s->sum_len);
	free(s->sum_bytes);
	free(s->bloom);
	free(s->layout);
	sst_sai_free(s);
	free(s->dir);
	storage_table_meta_unref(s->t);
	free(s);
}

struct sstable *sstable_open(struct env *env, const char *dir, uint64_t gen,
			     const struct storage_table_meta *t,
			     struct block_cache *cache)
{
	struct sstable *s = calloc(1, sizeof(*s));
	if (!s || !(s->dir = strdup(dir))) {
		free(s);
		err_set(ERR_NOMEM, "sstable");
		return NULL;
	}
	atomic_init(&s->refs, 1);
	atomic_init(&s->obsolete, false);
	atomic_init(&s->excluded, false);
	s->env = env;
	s->gen = gen;
	s->t = storage_table_meta_ref(t);
	s->cache = cache;
	s->data_id = storage_block_cache_file_id();
	s->index_id = storage_block_cache_file_id();
	s->data_path = sst_path(dir, gen, "Data.db", false);
	s->index_path = sst_path(dir, gen, "Index.db", false);
	if (sst_sai_open(s) || !s->data_path || !s->index_path ||
	    load_stats(s) || load_summary(s) || load_filter(s) ||
	    env_file_open(env, s->data_path, ENV_FILE_READ, &s->data) ||
	    env_file_open(env, s->index_path, ENV_FILE_READ, &s->index)) {
		sstable_free(s);
		return NULL;
	}
	int64_t d = env_file_size(s->data), i = env_file_size(s->index);
	if (d < 0 || i < 0 || (uint64_t)d != s->stats.data_size) {
		if (d >= 0)
			err_set(ERR_CORRUPT,
				"%s: %lld bytes, statistics say "
				"%llu",
				s->data_path, (long long)d,
				(unsigned long long)s->stats.data_size);
		sstable_free(s);
		return NULL;
	}
	s->disk_bytes += (uint64_t)d + (uint64_t)i;
	return s;
}

void sstable_map_files(struct sstable *s, int mode)
{
	if (mode == STORAGE_DISK_ACCESS_AUTO)
		mode = SIZE_MAX > UINT32_MAX ? STORAGE_DISK_ACCESS_MMAP
					     : STORAGE_DISK_ACCESS_STANDARD;
	if (mode != STORAGE_DISK_ACCESS_STANDARD)
		s->index_map = env_file_map(s->index, &s->index_map_len);
	if (mode == STORAGE_DISK_ACCESS_MMAP)
		s->data_map = env_file_map(s->data, &s->data_map_len);
}

void sstable_ref(struct sstable *s)
{
	atomic_fetch_add(&s->refs, 1);
}

static const char *const all_components[] = {"TOC.txt",       "Data.db",
					     "Index.db",      "Filter.db",
					     "Statistics.db", "Summary.db"};

int sstable_link_into(const struct sstable *s, const char *dir)
{
	/* an index build may add to the list meanwhile */
	pthread_mutex_t *mu = (pthread_mutex_t *)&s->sai_mu;
	pthread_mutex_lock(mu);
	for (size_t i = 0; i < s->sai_count; i++) {
		char *from = sst_path(s->dir, s->gen, s->sai[i].comp, false);
		char *to = sst_path(dir, s->gen, s->sai[i].comp, false);
		int rc = from && to ? env_link(s->env, from, to)
				    : err_set(ERR_NOMEM, "snapshot path");
		free(from);
		free(to);
		if (rc) {
			pthread_mutex_unlock(mu);
			return -1;
		}
	}
	pthread_mutex_unlock(mu);
	/* TOC last: a snapshot cut short reads as an incomplete SSTable */
	for (size_t i = 1; i <= 6; i++) {
		size_t k = i % 6;
		char *from = sst_path(s->dir, s->gen, all_components[k], false);
		char *to = sst_path(dir, s->gen, all_components[k], false);
		int rc = from && to ? env_link(s->env, from, to)
				    : err_set(ERR_NOMEM, "snapshot path");
		free(from);
		free(to);
		if (rc)
			return -1;
	}
	return 0;
}

void sstable_unref(struct sstable *s)
{
	if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	if (atomic_load(&s->obsolete)) {
		/* TOC first: without it the rest is a leftover at start. */
		for (size_t i = 0; i < 6; i++) {
			char *p = sst_path(s->dir, s->gen, all_components[i],
					   false);
			if (p)
				env_unlink(s->env, p);
			free(p);
		}
		for (size_t i = 0; i < s->sai_count; i++) {
			char *p =
				sst_path(s->dir, s->gen, s->sai[i].comp, false);
			if (p)
				env_unlink(s->env, p);
			free(p);
		}
		env_sync_dir(s->env, s->dir);
	}
	sstable_free(s);
}

void sstable_mark_obsolete(struct sstable *s)
{
	atomic_store(&s->obsolete, true);
}

bool sstable_may_contain(const struct sstable *s, struct slice key)
{
	uint64_t h[2];
	murmur3_hash128(key.ptr, key.len, 0, h);
	return sstable_may_contain_hash(s, h);
}

bool sstable_may_contain_hash(const struct sstable *s, const uint64_t h[2])
{
	for (uint32_t i = 0; i < s->bloom_k; i++) {
		uint64_t bit = (h[0] + i * h[1]) % s->bloom_bits;
		if (!(s->bloom[bit / 8] & (1u << (bit % 8))))
			return false;
	}
	return true;
}

/* ---- cached block reads -------------------------------------------------- */

/* The decoded block at `off` of the data (or index) file, from the cache
 * or read and verified (and cached when `fill`). A referenced handle, or
 * NULL. */
static int entry_frame(struct cursor *c, struct cursor *body, int64_t *token,
		       struct slice *key);

/* Where each entry of an index block starts, so point reads of a block
 * the cache serves again search it in O(log n) instead of scanning half of
 * it; NULL for a block that does not parse (left to the scan, which
 * reports it), is too big for 16-bit offsets, or out of memory. Built on a
 * block's second use, not its first: a read that missed the cache would
 * pay a whole scan for offsets that a cold block may never use. */
static uint16_t *index_block_offsets(const uint8_t *data, size_t len,
				     uint32_t *count)
{
	if (len > UINT16_MAX)
		return NULL;
	struct cursor cur = cursor_make(data, len);
	size_t n = 0;
	while (cursor_left(&cur)) {
		struct cursor body;
		int64_t tok;
		struct slice key;
		if (entry_frame(&cur, &body, &tok, &key)) {
			err_clear();
			return NULL;
		}
		n++;
	}
	uint16_t *offs = n ? malloc(n * sizeof(*offs)) : NULL;
	if (!offs)
		return NULL;
	cur = cursor_make(data, len);
	for (size_t i = 0; i < n; i++) {
		struct cursor body;
		int64_t tok;
		struct slice key;
		offs[i] = (uint16_t)(cur.pos - data);
		(void)entry_frame(&cur, &body, &tok, &key);
	}
	*count = (uint32_t)n;
	return offs;
}

/* Whether the block at `off` (`*disk_len` bytes, 0: as its header says,
 * then set) is in memory, so the mapping serves it without waiting. */
static bool map_resident(struct env_file *f, const uint8_t *map,
			 uint64_t map_len, uint64_t off, uint64_t *disk_len)
{
	if (!*disk_len) {
		if (off > map_len || map_len - off < BLOCK_HEADER ||
		    !env_file_resident(f, off, BLOCK_HEADER))
			return false;
		*disk_len = (uint64_t)be32_load(map + off + 5) + BLOCK_HEADER +
			    BLOCK_TRAILER;
	}
	return *disk_len <= BLOCK_MAX_RAW + 1024 &&
	       env_file_resident(f, off, (size_t)*disk_len);
}

static struct cached_block *block_get_hit(struct sstable *s, bool index,
					  uint64_t off, uint64_t disk_len,
					  bool fill, bool cached_only,
					  struct storage_read_stats *st,
					  size_t want, bool *hit)
{
	uint64_t id = index ? s->index_id : s->data_id;
	struct cached_block *b = storage_block_cache_get(s->cache, id, off);
	*hit = b != NULL;
	if (st)
		*(index ? &st->index_blocks : &st->data_blocks) += 1;
	if (b)
		return b;
	if (st)
		*(index ? &st->index_misses : &st->data_misses) += 1;
	/* compaction streams do not evict what reads need, nor do blocks
	 * read once */
	struct block_cache *c =
		fill && storage_block_cache_admit(s->cache, id, off) ? s->cache
								     : NULL;
	struct cached_block *nb = storage_block_cache_alloc(c);
	const uint8_t *raw;
	size_t len;
	uint64_t next;
	if (!nb)
		return NULL;
	struct env_file *f = index ? s->index : s->data;
	const char *path = index ? s->index_path : s->data_path;
	const uint8_t *map = index ? s->index_map : s->data_map;
	uint64_t map_len = index ? s->index_map_len : s->data_map_len;
	if (map && map_resident(f, map, map_len, off, &disk_len)) {
		/* In the page cache: checked and decoded where it lies, no
		 * system call, no copy (a raw block is used in place: the
		 * mapping lives as long as the SSTable, and only its readers
		 * look its blocks up). */
		if (storage_block_map_into(map, map_len, path, off, disk_len,
					   c ? 0 : want, &nb->owned, &nb->cap,
					   &raw, &len, &next)) {
			storage_block_cache_release(nb);
			return NULL;
		}
		/* the whole block's raw length: a shorter decode is partial,
		 * and must end with the partition the read wants */
		nb->partial = !c && want && len < be32_load(map + off + 1);
		if (nb->partial && raw[want - 1] != TAG_PEND) {
			nb->partial = false;
			if (storage_block_map_into(
				    map, map_len, path, off, disk_len, 0,
				    &nb->owned, &nb->cap, &raw, &len, &next)) {
				storage_block_cache_release(nb);
				return NULL;
			}
		}
	} else if (cached_only) {
		/* From the page cache, or not at all: any failure (not
		 * cached, or damaged) is left to the blocking path, which
		 * reports it and applies disk_failure_policy. */
		if (storage_block_read_into_nowait(f, path, off, disk_len,
						   &nb->owned, &nb->cap, &raw,
						   &len, &next)) {
			storage_block_cache_release(nb);
			err_set(ERR_AGAIN, "%s: block at %llu is not in memory",
				path, (unsigned long long)off);
			return NULL;
		}
	} else if (storage_block_read_into(f, path, off, disk_len, &nb->owned,
					   &nb->cap, &raw, &len, &next)) {
		storage_block_cache_release(nb);
		return NULL;
	}
	if (st)
		st->miss_bytes += len;
	return storage_block_cache_insert(c, nb, id, off, raw, len, next);
}

static struct cached_block *block_get(struct sstable *s, bool index,
				      uint64_t off, uint64_t disk_len,
				      bool fill, bool cached_only,
				      struct storage_read_stats *st,
				      size_t want)
{
	bool hit;
	return block_get_hit(s, index, off, disk_len, fill, cached_only, st,
			     want, &hit);
}

/* ---- index entries ------------------------------------------------------- */

static int take(struct cursor *c, struct slice *s);
static int entry_body_decode(struct cursor *c, struct sst_entry *e);

void sst_entry_free(struct sst_entry *e)
{
	free(e->rts);
	free(e->ri_off);
	free(e->ri_ck);
	memset(e, 0, sizeof(*e));
}

static int take(struct cursor *c, struct slice *s)
{
	uint64_t n;
	if (cursor_uvarint(c, &n) || n > cursor_left(c))
		return -1;
	return cursor_take(c, n, s);
}

/* Reads one length-prefixed index entry's frame and peeks at its key. */
/* cursor_uvarint with the one-byte case inline: a point read decodes the
 * frame and key lengths of about half an index block's entries. */
static inline int uvarint_fast(struct cursor *c, uint64_t *out)
{
	if (c->pos < c->end && *c->pos < 0x80) {
		*out = *c->pos++;
		return 0;
	}
	return cursor_uvarint(c, out);
}

static int entry_frame(struct cursor *c, struct cursor *body, int64_t *token,
		       struct slice *key)
{
	uint64_t n, kn;
	if (uvarint_fast(c, &n) || n > cursor_left(c))
		return err_set(ERR_CORRUPT, "bad index entry frame");
	*body = cursor_make(c->pos, (size_t)n);
	c->pos += n;
	struct cursor peek = *body;
	if (uvarint_fast(&peek, &kn) || kn > cursor_left(&peek) ||
	    cursor_left(&peek) - kn < 8)
		return err_set(ERR_CORRUPT, "bad index entry");
	*key = slice_make(peek.pos, (size_t)kn);
	*token = (int64_t)be64_load(peek.pos + kn);
	return 0;
}

int sst_entry_decode(struct cursor *c, struct sst_entry *e)
{
	struct cursor body;
	int64_t tok;
	struct slice key;
	if (entry_frame(c, &body, &tok, &key))
		return -1;
	if (entry_body_decode(&body, e))
		return -1;
	if (cursor_left(&body)) {
		sst_entry_free(e);
		return err_set(ERR_CORRUPT, "trailing bytes in index entry");
	}
	return 0;
}

static int entry_body_decode(struct cursor *c, struct sst_entry *e)
{
	uint64_t tok, n;
	uint32_t blen;
	uint8_t flags;
	memset(e, 0, sizeof(*e));
	e->pdel.ts = DELETION_NONE;
	if (take(c, &e->key) || e->key.len == 0 || cursor_be64(c, &tok) ||
	    cursor_uvarint(c, &e->block_off) || cursor_be32(c, &blen) ||
	    cursor_uvarint(c, &n) || n > BLOCK_MAX_RAW ||
	    cursor_u8(c, &flags) || flags > 1)
		return err_set(ERR_CORRUPT, "bad index entry");
	e->token = (int64_t)tok;
	e->block_len = blen;
	e->in_block = (uint32_t)n;
	if (flags) {
		uint64_t ts, ldt;
		if (cursor_be64(c, &ts) || cursor_be64(c, &ldt) ||
		    (int64_t)ts == DELETION_NONE)
			return err_set(ERR_CORRUPT, "bad index deletion");
		e->pdel = (struct deletion){(int64_t)ts, (int64_t)ldt};
	}
	if (cursor_uvarint(c, &n) || n > cursor_left(c) / 20)
		return err_set(ERR_CORRUPT, "bad index range count");
	if (n && !(e->rts = calloc(n, sizeof(*e->rts))))
		return err_set(ERR_NOMEM, "index entry");
	for (uint64_t i = 0; i < n; i++)
		if (storage_rtomb_decode(c, &e->rts[i])) {
			sst_entry_free(e);
			return err_set(ERR_CORRUPT, "bad index range");
		}
	e->rt_count = n;
	if (cursor_uvarint(c, &n) || n > cursor_left(c) / 2) {
		sst_entry_free(e);
		return err_set(ERR_CORRUPT, "bad row index count");
	}
	if (n && (!(e->ri_off = calloc(n, sizeof(*e->ri_off))) ||
		  !(e->ri_ck = calloc(n, sizeof(*e->ri_ck))))) {
		sst_entry_free(e);
		return err_set(ERR_NOMEM, "row index");
	}
	for (uint64_t i = 0; i < n; i++) {
		if (cursor_uvarint(c, &e->ri_off[i]) || take(c, &e->ri_ck[i]) ||
		    e->ri_ck[i].len == 0 ||
		    (i && e->ri_off[i] <= e->ri_off[i - 1]) ||
		    e->ri_off[i] <= e->block_off) {
			sst_entry_free(e);
			return err_set(ERR_CORRUPT, "bad row index");
		}
	}
	e->ri_count = n;
	return 0;
}

/* ---- data blocks --------------------------------------------------------- */

int sst_block_walk(const uint8_t *p, size_t len,
		   int (*fn)(void *arg, const struct atom *a), void *arg)
{
	struct cursor c = cursor_make(p, len);
	while (cursor_left(&c)) {
		uint8_t tag;
		struct slice key;
		struct atom a;
		if (cursor_u8(&c, &tag))
			return -1;
		if (tag == TAG_PSTART) {
			if (take(&c, &key))
				return err_set(ERR_CORRUPT, "bad partition");
		} else if (tag == TAG_ATOM) {
			if (storage_atom_decode(&c, &a))
				return err_set(ERR_CORRUPT, "bad atom");
			if (fn && fn(arg, &a))
				return -1;
		} else if (tag != TAG_PEND) {
			return err_set(ERR_CORRUPT, "bad block entry");
		}
	}
	return 0;
}

struct walk {
	struct sstable *s;
	struct read_ctx *c;
	bool all;
	bool static_only;
	struct slice key;
	/* raw bytes of the first block the partition needs (where the next
	 * partition starts in it); 0: unknown, the whole block */
	size_t want;
};

/* Walks a partition's entries from (off, in_block) until PEND or the
 * context's end. */
static int walk_partition(struct walk *w, uint64_t off, uint64_t disk_len,
			  uint32_t in_block, bool at_start)
{
	bool whole = false; /* this block again, undecoded part included */
	for (;;) {
		if (off >= w->s->stats.data_size)
			return err_set(ERR_CORRUPT,
				       "%s: partition runs past "
				       "the end",
				       w->s->data_path);
		struct cached_block *blk =
			block_get(w->s, false, off, disk_len, !w->all && !whole,
				  w->c->cached_only,
				  whole ? NULL : w->c->cmd->stats, w->want);
		w->want = 0;
		whole = false;
		if (!blk || storage_read_ctx_keep_ref(
				    w->c, blk, storage_block_cache_release))
			return -1;
		const uint8_t *raw = blk->data;
		size_t len = blk->len;
		uint64_t next = blk->next_off;
		if (in_block > len)
			return err_set(ERR_CORRUPT, "%s: bad offset in block",
				       w->s->data_path);
		struct cursor c = cursor_make(raw + in_block, len - in_block);
		while (cursor_left(&c)) {
			uint8_t tag;
			struct atom a;
			struct slice key;
			cursor_u8(&c, &tag);
			if (tag == TAG_PSTART && at_start) {
				if (take(&c, &key) || !slice_eq(key, w->key))
					return err_set(ERR_CORRUPT,
						       "%s: index "
						       "points at another "
						       "partition",
						       w->s->data_path);
				at_start = false;
			} else if (tag == TAG_ATOM && !at_start) {
				if (storage_atom_decode(&c, &a))
					return err_set(ERR_CORRUPT,
						       "%s: bad "
						       "atom in block at %llu",
						       w->s->data_path,
						       (unsigned long long)off);
				bool is_static = a.ck.ptr[0] == CK_STATIC;
				if (w->static_only && !is_static)
					return 0;
				if (!w->all &&
				    storage_read_ctx_past_end(w->c, a.ck))
					return 0;
				if ((w->all ||
				     storage_read_ctx_wants(w->c, a.ck)) &&
				    storage_read_ctx_add_atom(w->c, &a))
					return -1;
			} else if (tag == TAG_PEND && !at_start) {
				return 0;
			} else {
				return err_set(ERR_CORRUPT,
					       "%s: bad entry in "
					       "block at %llu",
					       w->s->data_path,
					       (unsigned long long)off);
			}
		}
		if (blk->partial) {
			/* decoded only so far (cannot happen: the partition
			 * ends before the next one starts): the whole block,
			 * on from here */
			in_block = (uint32_t)len;
			whole = true;
			continue;
		}
		off = next;
		disk_len = 0;
		in_block = 0;
	}
}

/* sstable_read_entry, `want` as in struct walk */
static int read_entry(struct sstable *s, struct read_ctx *c,
		      const struct sst_entry *e, bool all, size_t want)
{
	storage_read_ctx_add_pdel(c, e->pdel);
	/* Range tombstone bounds point into the index block, which an
	 * iterator may free: copy them into the context. */
	for (size_t i = 0; i < e->rt_count; i++) {
		struct rtomb r = e->rts[i];
		uint8_t *b = malloc(r.start.len + r.end.len);
		if (!b)
			return err_set(ERR_NOMEM, "range tombstone");
		memcpy(b, r.start.ptr, r.start.len);
		memcpy(b + r.start.len, r.end.ptr, r.end.len);
		r.start.ptr = b;
		r.end.ptr = b + r.start.len;
		if (storage_read_ctx_keep(c, b) ||
		    storage_read_ctx_add_rtomb(c, &r))
			return -1;
	}
	struct walk w = {.s = s, .c = c, .all = all, .key = e->key};
	/* The last continuation block starting at or before the first
	 * slice's start lets a slice skip the head of a wide partition. */
	size_t j = e->ri_count;
	if (!all) {
		struct slice start = c->bounds[0].start;
		while (j > 0 &&
		       storage_ck_cmp(s->t, e->ri_ck[j - 1], start) >= 0)
			j--;
	}
	if (all || j == 0) {
		w.want = want;
		return walk_partition(&w, e->block_off, e->block_len,
				      e->in_block, true);
	}
	if (c->cmd->with_static) {
		w.static_only = true;
		if (walk_partition(&w, e->block_off, e->block_len, e->in_block,
				   true))
			return -1;
		w.static_only = false;
	}
	return walk_partition(&w, e->ri_off[j - 1], 0, 0, false);
}

int sstable_read_entry(struct sstable *s, struct read_ctx *c,
		       const struct sst_entry *e, bool all)
{
	return read_entry(s, c, e, all, 0);
}

/* Where the entry after the one `cur` is past starts in the data block
 * at `block_off`, when it starts there: the partition before it ends
 * there, so a read needs the block only that far. 0: unknown. */
static size_t next_start_in_block(struct cursor cur, uint64_t block_off,
				  uint32_t in_block)
{
	struct cursor body;
	int64_t tok;
	struct slice key;
	uint64_t off, at, t;
	uint32_t len;
	if (!cursor_left(&cur) || entry_frame(&cur, &body, &tok, &key) ||
	    take(&body, &key) || cursor_be64(&body, &t) ||
	    cursor_uvarint(&body, &off) || cursor_be32(&body, &len) ||
	    cursor_uvarint(&body, &at)) {
		err_clear();
		return 0;
	}
	return off == block_off && at > in_block ? (size_t)at : 0;
}

/* ---- lookups and iteration ----------------------------------------------- */

/* The last summary block whose first partition is <= (token, key), or -1. */
static long summary_find(const struct sstable *s, int64_t token,
			 struct slice key)
{
	long lo = 0, hi = (long)s->sum_count - 1, best = -1;
	while (lo <= hi) {
		long mid = lo + (hi - lo) / 2;
		if (storage_partition_cmp(s->sum_token[mid], s->sum_key[mid],
					  token, key) <= 0) {
			best = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return best;
}

static int read_index_block(struct sstable *s, size_t i, uint8_t **raw,
			    size_t *len)
{
	uint64_t next;
	return storage_block_read(s->index, s->index_path, s->sum_off[i],
				  s->sum_len[i], raw, len, &next);
}

int sstable_read(struct sstable *s, struct read_ctx *c, int64_t token,
		 struct slice key)
{
	if (token < s->stats.min_token || token > s->stats.max_token)
		return 0;
	if (!c->have_hash) { /* once per read, not once per SSTable */
		murmur3_hash128(key.ptr, key.len, 0, c->key_hash);
		c->have_hash = true;
	}
	struct storage_read_stats *st = c->cmd->stats;
	if (st)
		st->bloom_checks++;
	if (!sstable_may_contain_hash(s, c->key_hash))
		return 0;
	c->sstables_touched++;
	if (st)
		st->bloom_passes++;
	long b = summary_find(s, token, key);
	if (b < 0)
		return 0;
	bool hit;
	struct cached_block *blk =
		block_get_hit(s, true, s->sum_off[b], s->sum_len[b], true,
			      c->cached_only, st, 0, &hit);
	if (!blk)
		return -1;
	struct cursor cur = cursor_make(blk->data, blk->len);
	const uint16_t *offs =
		atomic_load_explicit(&blk->entry_off, memory_order_acquire);
	if (!offs && hit) {
		uint32_t n;
		uint16_t *built = index_block_offsets(blk->data, blk->len, &n);
		if (built && !storage_block_cache_attach_offsets(s->cache, blk,
								 built, n))
			free(built);
		offs = atomic_load_explicit(&blk->entry_off,
					    memory_order_acquire);
	}
	if (offs) {
		/* Start at the first entry >= (token, key): the scan below
		 * then stops at its first step. */
		size_t lo = 0, hi = blk->entries;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			struct cursor at = cursor_make(blk->data + offs[mid],
						       blk->len - offs[mid]);
			struct cursor body;
			int64_t etok;
			struct slice ekey;
			if (entry_frame(&at, &body, &etok, &ekey))
				break; /* cannot happen: checked when built */
			if (storage_partition_cmp(etok, ekey, token, key) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == blk->entries) {
			storage_block_cache_release(blk);
			return 0;
		}
		cur.pos = blk->data + offs[lo];
	}
	int rc = 0;
	while (cursor_left(&cur)) {
		struct cursor body;
		int64_t etok;
		struct slice ekey;
		if (entry_frame(&cur, &body, &etok, &ekey)) {
			rc = err_prefix("%s: block at %llu", s->index_path,
					(unsigned long long)s->sum_off[b]);
			break;
		}
		int cmp = storage_partition_cmp(etok, ekey, token, key);
		if (cmp == 0) {
			struct sst_entry e;
			rc = entry_body_decode(&body, &e);
			if (rc)
				err_prefix("%s: block at %llu", s->index_path,
					   (unsigned long long)s->sum_off[b]);
			else
				rc = read_entry(
					s, c, &e, false,
					next_start_in_block(cur, e.block_off,
							    e.in_block));
			sst_entry_free(&e);
			if (st)
				st->sstables_found++;
		}
		if (cmp >= 0)
			break;
	}
	storage_block_cache_release(blk);
	return rc;
}

struct sst_iter {
	struct sstable *s;
	size_t block; /* next summary block to load */
	uint8_t *raw;
	struct cursor cur;
	struct sst_entry e;
	int64_t min_token;
	bool inclusive;
};

struct sst_iter *sst_iter_new(struct sstable *s)
{
	struct sst_iter *it = calloc(1, sizeof(*it));
	if (!it) {
		err_set(ERR_NOMEM, "sstable iterator");
		return NULL;
	}
	it->s = s;
	it->min_token = INT64_MIN;
	it->inclusive = true;
	return it;
}

int sst_iter_seek(struct sst_iter *it, int64_t token, bool inclusive)
{
	free(it->raw);
	it->raw = NULL;
	static const uint8_t none[1];
	it->cur = cursor_make(none, 0);
	long b = summary_find(it->s, token, slice_make(NULL, 0));
	/* an equal token may start in the block before */
	it->block = b < 0 ? 0 : (size_t)b;
	it->min_token = token;
	it->inclusive = inclusive;
	return 0;
}

int sst_iter_next(struct sst_iter *it, const struct sst_entry **out)
{
	sst_entry_free(&it->e);
	for (;;) {
		if (!cursor_left(&it->cur)) {
			free(it->raw);
			it->raw = NULL;
			if (it->block >= it->s->sum_count)
				return 0;
			size_t len;
			if (read_index_block(it->s, it->block, &it->raw, &len))
				return -1;
			it->cur = cursor_make(it->raw, len);
			it->block++;
			continue;
		}
		if (sst_entry_decode(&it->cur, &it->e))
			return err_prefix("%s", it->s->index_path);
		if (it->e.token < it->min_token ||
		    (!it->inclusive && it->e.token == it->min_token)) {
			sst_entry_free(&it->e);
			continue;
		}
		*out = &it->e;
		return 1;
	}
}

void sst_iter_delete(struct sst_iter *it)
{
	if (!it)
		return;
	sst_entry_free(&it->e);
	free(it->raw);
	free(it);
}

/* ---- directory ----------------------------------------------------------- */

struct scan {
	struct env *env;
	const char *dir;
	uint64_t *gens;
	bool *toc;
	size_t n, cap;
	char **tmp;
	size_t ntmp, tmp_cap;
	/* index components seen ("ca-<gen>-SAI_*.db"), with their gens */
	char **sai;
	uint64_t *sai_gen;
	size_t nsai, sai_cap;
};

static int scan_sai(struct scan *s, const char *name, uint64_t gen)
{
	if (s->nsai == s->sai_cap) {
		size_t cap = s->sai_cap ? s->sai_cap * 2 : 8;
		char **n = realloc(s->sai, cap * sizeof(*n));
		if (!n)
			return 1;
		s->sai = n;
		uint64_t *g = realloc(s->sai_gen, cap * sizeof(*g));
		if (!g)
			return 1;
		s->sai_gen = g;
		s->sai_cap = cap;
	}
	s->sai[s->nsai] = strdup(name);
	s->sai_gen[s->nsai++] = gen;
	return 0;
}

static int scan_entry(void *arg, const char *name)
{
	struct scan *s = arg;
	size_t nl = strlen(name);
	/* tmp-*: a flush or compaction's unfinished output; *.tmp: a
	 * Statistics.db rewrite (repair state) a crash interrupted */
	if (strncmp(name, "tmp-", 4) == 0 ||
	    (nl > 4 && strcmp(name + nl - 4, ".tmp") == 0 &&
	     strncmp(name, "ca-", 3) == 0)) {
		if (s->ntmp == s->tmp_cap) {
			size_t cap = s->tmp_cap ? s->tmp_cap * 2 : 8;
			char **t = realloc(s->tmp, cap * sizeof(*t));
			if (!t)
				return 1;
			s->tmp = t;
			s->tmp_cap = cap;
		}
		s->tmp[s->ntmp++] = strdup(name);
		return 0;
	}
	unsigned long long gen;
	char comp[64];
	if (sscanf(name, "ca-%llu-%63s", &gen, comp) != 2)
		return 0;
	size_t i;
	for (i = 0; i < s->n && s->gens[i] != gen; i++)
		;
	if (i == s->n) {
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 16;
			uint64_t *g = realloc(s->gens, cap * sizeof(*g));
			if (!g)
				return 1;
			s->gens = g;
			bool *t = realloc(s->toc, cap * sizeof(*t));
			if (!t)
				return 1;
			s->toc = t;
			s->cap = cap;
		}
		s->gens[i] = gen;
		s->toc[i] = false;
		s->n++;
	}
	if (strcmp(comp, "TOC.txt") == 0)
		s->toc[i] = true;
	if (strncmp(comp, "SAI_", 4) == 0)
		return scan_sai(s, name, gen);
	return 0;
}

static int cmp_gen(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

int sst_dir_scan(struct env *env, const char *dir, uint64_t **gens,
		 size_t *count)
{
	struct scan s = {.env = env, .dir = dir};
	int rc = env_list_dir(env, dir, scan_entry, &s);
	for (size_t i = 0; i < s.ntmp; i++) {
		if (!rc && s.tmp[i]) {
			size_t n = strlen(dir) + strlen(s.tmp[i]) + 2;
			char *p = malloc(n);
			if (p) {
				snprintf(p, n, "%s/%s", dir, s.tmp[i]);
				LOG_AT(LOG_LEVEL_INFO, "removing leftover %s",
				       p);
				env_unlink(env, p);
			}
			free(p);
		}
		free(s.tmp[i]);
	}
	free(s.tmp);
	size_t w = 0;
	for (size_t i = 0; i < s.n && !rc; i++) {
		if (s.toc[i]) {
			s.gens[w++] = s.gens[i];
			continue;
		}
		LOG_AT(LOG_LEVEL_INFO,
		       "removing incomplete sstable %s/ca-%" PRIu64, dir,
		       s.gens[i]);
		for (size_t k = 1; k < 6; k++) {
			char *p = sst_path(dir, s.gens[i], all_components[k],
					   false);
			if (p)
				env_unlink(env, p);
			free(p);
		}
		for (size_t k = 0; k < s.nsai; k++) {
			if (s.sai_gen[k] != s.gens[i] || !s.sai[k])
				continue;
			size_t n = strlen(dir) + strlen(s.sai[k]) + 2;
			char *p = malloc(n);
			if (p) {
				snprintf(p, n, "%s/%s", dir, s.sai[k]);
				env_unlink(env, p);
			}
			free(p);
		}
	}
	for (size_t k = 0; k < s.nsai; k++)
		free(s.sai[k]);
	free(s.sai);
	free(s.sai_gen);
	free(s.toc);
	if (rc) {
		free(s.gens);
		return -1;
	}
	if (w)
		qsort(s.gens, w, sizeof(*s.gens), cmp_gen);
	*gens = s.gens;
	*count = w;
	return 0;
}
