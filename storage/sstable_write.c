/*
 * SSTable writer: streams partitions into Data.db blocks and Index.db
 * entries, builds the bloom filter, summary and statistics, and publishes
 * the generation durably. Format: docs/sstable-format.md.
 */
#include "common/murmur3.h"
#include "storage/block_internal.h"
#include "storage/sai_component.h"
#include "storage/sai_internal.h"
#include "storage/sstable_internal.h"

#include "common/err.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_PSTART  1
#define TAG_ATOM    2
#define TAG_PEND    3
#define INDEX_BLOCK 1024

static const char *const components[] = {"Data.db", "Index.db", "Filter.db",
					 "Statistics.db", "Summary.db"};
#define N_COMPONENTS 5

struct sst_writer {
	struct env *env;
	char *dir;
	uint64_t gen;
	const struct storage_table_meta *t;
	struct sst_writer_options o;
	struct env_file *data, *index;
	uint64_t data_off, index_off;
	struct buf raw, blk, iraw, summary, scratch;
	uint64_t summary_count;
	/* placeholders in iraw for the current data block's length */
	size_t *patch;
	size_t patch_count, patch_cap;
	bool index_first_pending; /* next entry starts a new index block */
	/* the current partition */
	bool in_part;
	bool start_in_current; /* its start is in the unflushed block */
	int64_t token;
	struct buf key, part_del;
	uint64_t start_off, start_len;
	uint32_t start_in_block;
	uint64_t part_bytes;
	uint64_t *ri_off;
	struct buf ri_ck;
	size_t *ri_ck_end;
	size_t ri_count, ri_cap;
	bool need_ri; /* a block was cut inside the partition */
	uint64_t last_block_off, last_block_len;
	/* bloom */
	uint8_t *bloom;
	uint64_t bloom_bits;
	uint32_t bloom_k;
	struct sst_stats st;
	bool failed;
	/* Storage-attached indexes: a builder per index of `t` (its order),
	 * fed (term, token + key) by begin and atom; each index's last term
	 * and the partition it came in (consecutive repeats skipped). */
	struct sai_builder *sai;
	struct buf *sai_last;
	uint64_t *sai_last_part;
	struct buf sai_term, sai_key;
	/* rows (sai_index_rows): the partition's token and key, a row's
	 * component key, and what is compared with sai_last */
	int64_t sai_token;
	struct buf sai_pk, sai_rkey, sai_seen;
	uint64_t part_no;
	char **sai_comps; /* "SAI_<index>.db" per index */
};

char *sst_path(const char *dir, uint64_t gen, const char *component, bool tmp)
{
	size_t n = strlen(dir) + strlen(component) + 48;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/%sca-%" PRIu64 "-%s", dir, tmp ? "tmp-" : "",
			 gen, component);
	else
		err_set(ERR_NOMEM, "path");
	return p;
}

static int open_tmp(struct sst_writer *w, const char *comp, struct env_file **f)
{
	char *p = sst_path(w->dir, w->gen, comp, true);
	if (!p)
		return -1;
	int rc = env_file_open(
		w->env, p, ENV_FILE_WRITE | ENV_FILE_CREATE | ENV_FILE_TRUNC,
		f);
	free(p);
	return rc;
}

static void bloom_init(struct sst_writer *w)
{
	double n = (double)(w->o.expected_partitions ? w->o.expected_partitions
						     : 1);
	double p =
		w->o.bloom_fp > 0 && w->o.bloom_fp < 1 ? w->o.bloom_fp : 0.01;
	double m = ceil(-n * log(p) / (M_LN2 * M_LN2));
	if (m < 64)
		m = 64;
	w->bloom_bits = (uint64_t)m;
	w->bloom_k = (uint32_t)fmax(1, fmin(30, round(m / n * M_LN2)));
	w->bloom = calloc((w->bloom_bits + 7) / 8, 1);
}

static int sai_writer_init(struct sst_writer *w)
{
	size_t n = w->t->index_count;
	if (!n)
		return 0;
	w->sai = calloc(n, sizeof(*w->sai));
	w->sai_last = calloc(n, sizeof(*w->sai_last));
	w->sai_last_part = calloc(n, sizeof(*w->sai_last_part));
	w->sai_comps = calloc(n, sizeof(*w->sai_comps));
	if (!w->sai || !w->sai_last || !w->sai_last_part || !w->sai_comps)
		return err_set(ERR_NOMEM, "sstable indexes");
	for (size_t i = 0; i < n; i++) {
		sai_builder_init(&w->sai[i]);
		size_t len = strlen(w->t->indexes[i].name) + 8;
		w->sai_comps[i] = malloc(len);
		if (!w->sai_comps[i])
			return err_set(ERR_NOMEM, "sstable indexes");
		snprintf(w->sai_comps[i], len, "SAI_%s.db",
			 w->t->indexes[i].name);
		/* runs beyond the bound: tmp-ca-<gen>-SAIrun_<index>-<n>,
		 * removed with the writer and, after a crash, at start */
		char run[320];
		snprintf(run, sizeof(run), "SAIrun_%s", w->t->indexes[i].name);
		char *prefix = sst_path(w->dir, w->gen, run, true);
		int rc = !prefix ? -1
				 : sai_builder_spill(&w->sai[i], w->env, prefix,
						     w->o.sai_hold
							     ? w->o.sai_hold
							     : SAI_BUILDER_HOLD,
						     SAI_BUILDER_HOLD_BYTES);
		free(prefix);
		if (rc)
			return err_set(ERR_NOMEM, "sstable indexes");
	}
	return 0;
}

static void sai_writer_free(struct sst_writer *w)
{
	for (size_t i = 0; i < w->t->index_count; i++) {
		if (w->sai)
			sai_builder_free(&w->sai[i]);
		if (w->sai_last)
			buf_free(&w->sai_last[i]);
		if (w->sai_comps)
			free(w->sai_comps[i]);
	}
	free(w->sai);
	free(w->sai_last);
	free(w->sai_last_part);
	free(w->sai_comps);
	buf_free(&w->sai_term);
	buf_free(&w->sai_key);
	buf_free(&w->sai_pk);
	buf_free(&w->sai_rkey);
	buf_free(&w->sai_seen);
}

/* The term in w->sai_term for index i, with the current partition (and
 * row `ck` when not empty: a row-level index). */
static int sai_writer_add(struct sst_writer *w, size_t i, struct slice ck)
{
	struct buf *last = &w->sai_last[i];
	struct buf *seen = &w->sai_seen;
	buf_clear(seen);
	if (ck.len) {
		uint8_t n[4] = {(uint8_t)(w->sai_term.len >> 24),
				(uint8_t)(w->sai_term.len >> 16),
				(uint8_t)(w->sai_term.len >> 8),
				(uint8_t)w->sai_term.len};
		if (buf_append(seen, n, 4) || buf_append(seen, ck.ptr, ck.len))
			return err_set(ERR_NOMEM, "sstable index");
	}
	if (buf_append(seen, w->sai_term.data, w->sai_term.len))
		return err_set(ERR_NOMEM, "sstable index");
	if (w->sai_last_part[i] == w->part_no && last->len == seen->len &&
	    (!last->len || memcmp(last->data, seen->data, last->len) == 0))
		return 0;
	const struct buf *key = &w->sai_key;
	if (ck.len) {
		if (sai_component_row_key(
			    w->sai_token,
			    (struct slice){w->sai_pk.data, w->sai_pk.len}, ck,
			    &w->sai_rkey))
			return -1;
		key = &w->sai_rkey;
	}
	buf_clear(last);
	if (buf_append(last, seen->data, seen->len))
		return err_set(ERR_NOMEM, "sstable index");
	int rc = sai_builder_add(&w->sai[i], w->sai_term.data,
				 (uint32_t)w->sai_term.len, key->data,
				 (uint32_t)key->len);
	if (rc != SAI_OK)
		return rc == SAI_IO ? err_prefix("sstable index run")
				    : err_set(ERR_NOMEM, "sstable index");
	w->sai_last_part[i] = w->part_no;
	return 0;
}

static int sai_writer_key(struct sst_writer *w, int64_t token, struct slice key)
{
	w->part_no++;
	if (!w->sai)
		return 0;
	w->sai_token = token;
	buf_clear(&w->sai_pk);
	if (sai_component_key(token, key, &w->sai_key) ||
	    buf_append(&w->sai_pk, key.ptr, key.len))
		return err_set(ERR_NOMEM, "sstable index");
	for (size_t i = 0; i < w->t->index_count; i++) {
		int r = sai_key_term(w->t, &w->t->indexes[i], key,
				     &w->sai_term);
		if (r > 0)
			r = sai_writer_add(w, i, (struct slice){NULL, 0});
		if (r < 0)
			return -1;
	}
	return 0;
}

static int sai_writer_atom(struct sst_writer *w, const struct atom *a)
{
	for (size_t i = 0; i < w->t->index_count; i++) {
		const struct storage_index *ix = &w->t->indexes[i];
		int r = sai_atom_term(w->t, ix, a, &w->sai_term);
		if (r > 0)
			r = sai_writer_add(w, i,
					   sai_index_rows(w->t, ix)
						   ? a->ck
						   : (struct slice){NULL, 0});
		if (r < 0)
			return -1;
	}
	return 0;
}

struct sst_writer *sst_writer_new(struct env *env, const char *dir,
				  uint64_t gen,
				  const struct storage_table_meta *t,
				  const struct sst_writer_options *o)
{
	struct sst_writer *w = calloc(1, sizeof(*w));
	if (!w || !(w->dir = strdup(dir))) {
		free(w);
		err_set(ERR_NOMEM, "sstable writer");
		return NULL;
	}
	w->env = env;
	w->gen = gen;
	w->t = t;
	w->o = *o;
	if (!w->o.block_size)
		w->o.block_size = 16 * 1024;
	w->index_first_pending = true;
	w->st.min_token = INT64_MAX;
	w->st.max_token = INT64_MIN;
	w->st.min_ts = INT64_MAX;
	w->st.max_ts = INT64_MIN;
	w->st.min_ldt = INT64_MAX;
	w->st.max_ldt = INT64_MIN;
	w->st.repaired_at = o->repaired_at;
	w->st.log_end = o->log_end;
	w->st.created_at = o->created_at;
	w->st.level = o->level;
	memcpy(w->st.pending_repair, o->pending_repair,
	       sizeof(w->st.pending_repair));
	w->st.has_v2 = true;
	bloom_init(w);
	if (sai_writer_init(w)) {
		sst_writer_abort(w);
		return NULL;
	}
	/* the directory of a dropped table goes once empty (table_free): a
	 * flush or compaction of it that was under way makes it again */
	if (!w->bloom || env_mkdir_p(env, dir) ||
	    open_tmp(w, "Data.db", &w->data) ||
	    open_tmp(w, "Index.db", &w->index)) {
		if (!w->bloom)
			err_set(ERR_NOMEM, "bloom filter");
		sst_writer_abort(w);
		return NULL;
	}
	return w;
}

static void bloom_add(struct sst_writer *w, struct slice key)
{
	uint64_t h[2];
	murmur3_hash128(key.ptr, key.len, 0, h);
	for (uint32_t i = 0; i < w->bloom_k; i++) {
		uint64_t bit = (h[0] + i * h[1]) % w->bloom_bits;
		w->bloom[bit / 8] |= (uint8_t)(1u << (bit % 8));
	}
}

static int flush_index_block(struct sst_writer *w)
{
	if (w->iraw.len == 0)
		return 0;
	if (storage_block_encode(&w->blk, STORAGE_COMPRESSION_NONE,
				 w->iraw.data, w->iraw.len) ||
	    env_file_append(w->index, w->blk.data, w->blk.len))
		return -1;
	/* summary entry was started when the block's first entry came */
	if (buf_put_uvarint(&w->summary, w->index_off) ||
	    buf_put_uvarint(&w->summary, w->blk.len))
		return -1;
	w->index_off += w->blk.len;
	buf_clear(&w->iraw);
	w->index_first_pending = true;
	return 0;
}

static int flush_data_block(struct sst_writer *w)
{
	if (w->raw.len == 0)
		return 0;
	if (storage_block_encode(&w->blk, w->o.compression, w->raw.data,
				 w->raw.len) ||
	    env_file_append(w->data, w->blk.data, w->blk.len))
		return -1;
	w->st.uncompressed_size += w->raw.len;
	w->last_block_off = w->data_off;
	w->last_block_len = w->blk.len;
	for (size_t i = 0; i < w->patch_count; i++)
		be32_store(w->iraw.data + w->patch[i], (uint32_t)w->blk.len);
	w->patch_count = 0;
	if (w->in_part && w->start_in_current) {
		w->start_len = w->blk.len;
		w->start_in_current = false;
	}
	w->data_off += w->blk.len;
	buf_clear(&w->raw);
	if (w->in_part)
		w->need_ri = true;
	if (w->iraw.len >= INDEX_BLOCK)
		return flush_index_block(w);
	return 0;
}

int sst_writer_begin(struct sst_writer *w, int64_t token, struct slice key,
		     struct deletion pdel, const struct rtomb *rts,
		     size_t rt_count)
{
	buf_clear(&w->key);
	buf_clear(&w->part_del);
	w->in_part = true;
	w->token = token;
	w->ri_count = 0;
	buf_clear(&w->ri_ck);
	w->need_ri = false;
	w->start_off = w->data_off;
	w->start_in_block = (uint32_t)w->raw.len;
	w->start_in_current = true;
	w->start_len = 0;
	w->part_bytes = w->raw.len;
	int rc = buf_append(&w->key, key.ptr, key.len) ||
		 buf_put_u8(&w->part_del, pdel.ts != DELETION_NONE);
	if (!rc && pdel.ts != DELETION_NONE)
		rc = buf_put_be64(&w->part_del, (uint64_t)pdel.ts) ||
		     buf_put_be64(&w->part_del, (uint64_t)pdel.ldt);
	rc = rc || buf_put_uvarint(&w->part_del, rt_count);
	for (size_t i = 0; !rc && i < rt_count; i++)
		rc = storage_rtomb_encode(&w->part_del, &rts[i]);
	rc = rc || buf_put_u8(&w->raw, TAG_PSTART) ||
	     buf_put_uvarint(&w->raw, key.len) ||
	     buf_append(&w->raw, key.ptr, key.len);
	if (rc)
		return err_set(ERR_NOMEM, "sstable partition");
	bloom_add(w, key);
	if (sai_writer_key(w, token, key))
		return -1;
	if (token < w->st.min_token)
		w->st.min_token = token;
	if (token > w->st.max_token)
		w->st.max_token = token;
	w->st.partition_count++;
	struct deletion dels[1] = {pdel};
	for (size_t i = 0; i <= rt_count; i++) {
		struct deletion d = i < rt_count ? rts[i].del : dels[0];
		if (d.ts == DELETION_NONE)
			continue;
		w->st.tombstone_count++;
		w->st.marker_count++;
		storage_tomb_hist_add(&w->st.tomb_hist, d.ldt, 1);
		if (d.ts < w->st.min_ts)
			w->st.min_ts = d.ts;
		if (d.ts > w->st.max_ts)
			w->st.max_ts = d.ts;
		if (d.ldt < w->st.min_ldt)
			w->st.min_ldt = d.ldt;
		if (d.ldt > w->st.max_ldt)
			w->st.max_ldt = d.ldt;
	}
	return 0;
}

static int add_row_index(struct sst_writer *w, struct slice ck)
{
	if (w->ri_count == w->ri_cap) {
		size_t cap = w->ri_cap ? w->ri_cap * 2 : 16;
		uint64_t *o = realloc(w->ri_off, cap * sizeof(*o));
		if (!o)
			return err_set(ERR_NOMEM, "row index");
		w->ri_off = o;
		size_t *e = realloc(w->ri_ck_end, cap * sizeof(*e));
		if (!e)
			return err_set(ERR_NOMEM, "row index");
		w->ri_ck_end = e;
		w->ri_cap = cap;
	}
	if (buf_append(&w->ri_ck, ck.ptr, ck.len))
		return err_set(ERR_NOMEM, "row index");
	w->ri_off[w->ri_count] = w->data_off;
	w->ri_ck_end[w->ri_count++] = w->ri_ck.len;
	return 0;
}

int sst_writer_atom(struct sst_writer *w, const struct atom *a)
{
	if (w->need_ri) {
		if (add_row_index(w, a->ck))
			return -1;
		w->need_ri = false;
	}
	if (buf_put_u8(&w->raw, TAG_ATOM) || storage_atom_encode(&w->raw, a))
		return err_set(ERR_NOMEM, "sstable atom");
	if (w->sai && sai_writer_atom(w, a))
		return -1;
	w->st.cell_count++;
	if (a->flags & ATOM_TOMBSTONE)
		w->st.tombstone_count++;
	if (a->ts < w->st.min_ts)
		w->st.min_ts = a->ts;
	if (a->ts > w->st.max_ts)
		w->st.max_ts = a->ts;
	if (a->flags & ATOM_EXPIRING) {
		if (!w->st.min_ttl || a->ttl < w->st.min_ttl)
			w->st.min_ttl = a->ttl;
		if (a->ttl > w->st.max_ttl)
			w->st.max_ttl = a->ttl;
	}
	if (a->flags & (ATOM_TOMBSTONE | ATOM_EXPIRING)) {
		storage_tomb_hist_add(&w->st.tomb_hist, a->ldt, 1);
		if (a->ldt < w->st.min_ldt)
			w->st.min_ldt = a->ldt;
		if (a->ldt > w->st.max_ldt)
			w->st.max_ldt = a->ldt;
	} else {
		w->st.has_live_no_ttl = true;
	}
	if (w->raw.len >= w->o.block_size)
		return flush_data_block(w);
	return 0;
}

/* Index entries are length-prefixed so a lookup skips non-matching ones
 * without decoding them; index blocks stay small (INDEX_BLOCK) so a
 * lookup scans few. */
static int index_entry_body(struct sst_writer *w, struct buf *b,
			    size_t *patch_at);

static int index_entry(struct sst_writer *w)
{
	size_t patch_at = SIZE_MAX;
	buf_clear(&w->scratch);
	if (index_entry_body(w, &w->scratch, &patch_at) ||
	    buf_put_uvarint(&w->iraw, w->scratch.len))
		return -1;
	size_t base = w->iraw.len;
	if (buf_append(&w->iraw, w->scratch.data, w->scratch.len))
		return -1;
	if (patch_at != SIZE_MAX) {
		if (w->patch_count == w->patch_cap) {
			size_t cap = w->patch_cap ? w->patch_cap * 2 : 64;
			size_t *p = realloc(w->patch, cap * sizeof(*p));
			if (!p)
				return -1;
			w->patch = p;
			w->patch_cap = cap;
		}
		w->patch[w->patch_count++] = base + patch_at;
	}
	return 0;
}

static int index_entry_body(struct sst_writer *w, struct buf *b,
			    size_t *patch_at)
{
	if (w->index_first_pending) {
		/* the summary records each index block's first key */
		if (buf_put_uvarint(&w->summary, w->key.len) ||
		    buf_append(&w->summary, w->key.data, w->key.len) ||
		    buf_put_be64(&w->summary, (uint64_t)w->token))
			return -1;
		w->summary_count++;
		w->index_first_pending = false;
	}
	if (buf_put_uvarint(b, w->key.len) ||
	    buf_append(b, w->key.data, w->key.len) ||
	    buf_put_be64(b, (uint64_t)w->token) ||
	    buf_put_uvarint(b, w->start_off))
		return -1;
	if (w->start_in_current)
		*patch_at = b->len;
	if (buf_put_be32(b, (uint32_t)w->start_len) ||
	    buf_put_uvarint(b, w->start_in_block) ||
	    buf_append(b, w->part_del.data, w->part_del.len) ||
	    buf_put_uvarint(b, w->ri_count))
		return -1;
	size_t prev = 0;
	for (size_t i = 0; i < w->ri_count; i++) {
		size_t n = w->ri_ck_end[i] - prev;
		if (buf_put_uvarint(b, w->ri_off[i]) || buf_put_uvarint(b, n) ||
		    buf_append(b, w->ri_ck.data + prev, n))
			return -1;
		prev = w->ri_ck_end[i];
	}
	return 0;
}

int sst_writer_end(struct sst_writer *w)
{
	if (buf_put_u8(&w->raw, TAG_PEND) || index_entry(w))
		return err_set(ERR_NOMEM, "sstable index");
	uint64_t size =
		w->data_off + w->raw.len - w->start_off - w->start_in_block;
	unsigned bucket = 0;
	while (bucket + 1 < SST_HIST_BUCKETS && (1ull << (bucket + 1)) <= size)
		bucket++;
	w->st.size_hist[bucket]++;
	w->in_part = false;
	w->need_ri = false;
	if (w->raw.len >= w->o.block_size)
		return flush_data_block(w);
	if (w->patch_count == 0 && w->iraw.len >= INDEX_BLOCK)
		return flush_index_block(w);
	return 0;
}

uint64_t sst_writer_bytes(const struct sst_writer *w)
{
	return w->data_off; /* only grows: whole blocks, as appended */
}

uint64_t sst_writer_data_bytes(const struct sst_writer *w)
{
	return w->data_off + w->raw.len;
}

uint64_t sst_writer_partitions(const struct sst_writer *w)
{
	return w->st.partition_count;
}

/* `layout` NULL: `t`'s. */
static int stats_encode(struct buf *b, const struct sst_stats *s,
			const uint8_t *layout, size_t layout_len,
			const struct storage_table_meta *t)
{
	int rc = buf_append(b, "CSST", 4) || buf_put_u8(b, SST_STATS_VERSION);
	const int64_t v[] = {s->min_token,  s->max_token, s->min_ts,
			     s->max_ts,     s->min_ldt,   s->max_ldt,
			     s->repaired_at};
	for (size_t i = 0; i < 7; i++)
		rc = rc || buf_put_be64(b, (uint64_t)v[i]);
	rc = rc || buf_put_be64(b, s->cell_count) ||
	     buf_put_be64(b, s->tombstone_count) ||
	     buf_put_be64(b, s->partition_count) ||
	     buf_put_be64(b, s->log_end.seg) ||
	     buf_put_be64(b, s->log_end.off) || buf_put_be64(b, s->data_size) ||
	     buf_put_u8(b, s->has_live_no_ttl);
	for (size_t i = 0; i < SST_HIST_BUCKETS; i++)
		rc = rc || buf_put_be64(b, s->size_hist[i]);
	/* version 2 */
	rc = rc || buf_put_be64(b, (uint64_t)s->created_at) ||
	     buf_put_be64(b, s->uncompressed_size) ||
	     buf_put_be64(b, s->marker_count) ||
	     buf_put_be64(b, (uint64_t)s->min_ttl) ||
	     buf_put_be64(b, (uint64_t)s->max_ttl) ||
	     buf_put_uvarint(b, s->tomb_hist.count);
	for (size_t i = 0; i < s->tomb_hist.count; i++)
		rc = rc || buf_put_be64(b, (uint64_t)s->tomb_hist.point[i]) ||
		     buf_put_be64(b, s->tomb_hist.value[i]);
	/* version 3 */
	rc = rc || buf_put_be32(b, s->level);
	/* version 4 */
	rc = rc || buf_append(b, s->pending_repair, sizeof(s->pending_repair));
	/* version 5: the column layout */
	if (layout)
		rc = rc || buf_put_uvarint(b, layout_len) ||
		     buf_append(b, layout, layout_len);
	else {
		struct buf l;
		buf_init(&l);
		rc = rc || sst_layout_encode(t, &l) ||
		     buf_put_uvarint(b, l.len) || buf_append(b, l.data, l.len);
		buf_free(&l);
	}
	return rc || storage_component_seal(b) ? err_set(ERR_NOMEM, "stats")
					       : 0;
}

int sst_stats_rewrite(const struct sstable *s, const struct sst_stats *st)
{
	struct buf b;
	buf_init(&b);
	char *p = sst_path(s->dir, s->gen, "Statistics.db", false);
	int rc = !p ? err_set(ERR_NOMEM, "stats")
		    : stats_encode(&b, st, s->layout, s->layout_len, s->t);
	rc = rc || env_write_file_atomic(s->env, p, b.data, b.len);
	free(p);
	buf_free(&b);
	return rc ? err_prefix("sstable Statistics.db") : 0;
}

static int write_component(struct sst_writer *w, const char *comp,
			   const struct buf *b)
{
	struct env_file *f;
	if (open_tmp(w, comp, &f))
		return -1;
	int rc = env_file_append(f, b->data, b->len) || env_file_sync(f);
	if (env_file_close(f))
		rc = -1;
	return rc ? err_prefix("sstable %s", comp) : 0;
}

/* Component i: the fixed ones, then the indexes'. */
static const char *component_name(const struct sst_writer *w, size_t i)
{
	return i < N_COMPONENTS ? components[i]
				: w->sai_comps[i - N_COMPONENTS];
}

static size_t component_count(const struct sst_writer *w)
{
	return N_COMPONENTS + (w->sai && w->sai_comps ? w->t->index_count : 0);
}

/* Each index's component, to its temporary file, a block at a time (the
 * builder's runs merged). */
static int write_sai(struct sst_writer *w)
{
	for (size_t i = 0; w->sai && i < w->t->index_count; i++) {
		const char *comp = w->sai_comps[i];
		char ident[64];
		int il = sai_index_ident(w->t, &w->t->indexes[i], ident,
					 sizeof(ident));
		if (il < 0)
			return err_set(ERR_NOMEM, "sstable index");
		struct env_file *f;
		if (open_tmp(w, comp, &f))
			return err_prefix("sstable %s", comp);
		int rc = sai_build_write(&w->sai[i], ident, (uint32_t)il, f,
					 NULL);
		if (rc == SAI_NOMEM)
			err_set(ERR_NOMEM, "sstable index");
		else if (rc == SAI_CORRUPT)
			err_set(ERR_CORRUPT, "a sorted run of index %s",
				w->t->indexes[i].name);
		if (rc == SAI_OK && env_file_sync(f))
			rc = SAI_IO;
		if (env_file_close(f) && rc == SAI_OK)
			rc = SAI_IO;
		sai_builder_free(&w->sai[i]);
		if (rc)
			return err_prefix("sstable %s", comp);
	}
	return 0;
}

static int rename_all(struct sst_writer *w)
{
	for (size_t i = 0; i < component_count(w); i++) {
		char *a = sst_path(w->dir, w->gen, component_name(w, i), true);
		char *b = sst_path(w->dir, w->gen, component_name(w, i), false);
		int rc = !a || !b || env_rename(w->env, a, b);
		free(a);
		free(b);
		if (rc)
			return -1;
	}
	struct buf toc;
	buf_init(&toc);
	for (size_t i = 0; i < component_count(w); i++) {
		const char *c = component_name(w, i);
		buf_append(&toc, c, strlen(c));
		buf_put_u8(&toc, '\n');
	}
	char *path = sst_path(w->dir, w->gen, "TOC.txt", false);
	int rc =
		!path || env_write_file_atomic(w->env, path, toc.data, toc.len);
	free(path);
	buf_free(&toc);
	return rc ? -1 : env_sync_dir(w->env, w->dir);
}

static int finish_files(struct sst_writer *w)
{
	if (flush_data_block(w) || flush_index_block(w))
		return -1;
	w->st.data_size = w->data_off;
	if (w->st.min_token > w->st.max_token)
		w->st.min_token = w->st.max_token = 0;
	struct buf b;
	buf_init(&b);
	int rc = buf_append(&b, "CSBF", 4) || buf_put_u8(&b, SST_VERSION) ||
		 buf_put_be64(&b, w->bloom_bits) ||
		 buf_put_be32(&b, w->bloom_k) ||
		 buf_append(&b, w->bloom, (w->bloom_bits + 7) / 8) ||
		 storage_component_seal(&b) ||
		 write_component(w, "Filter.db", &b);
	buf_clear(&b);
	rc = rc || buf_append(&b, "CSSU", 4) || buf_put_u8(&b, SST_VERSION) ||
	     buf_put_uvarint(&b, w->summary_count) ||
	     buf_append(&b, w->summary.data, w->summary.len) ||
	     storage_component_seal(&b) || write_component(w, "Summary.db", &b);
	buf_clear(&b);
	rc = rc || stats_encode(&b, &w->st, NULL, 0, w->t) ||
	     write_component(w, "Statistics.db", &b);
	buf_free(&b);
	if (rc || write_sai(w))
		return -1;
	if (env_file_sync(w->data) || env_file_sync(w->index))
		return -1;
	int c1 = env_file_close(w->data), c2 = env_file_close(w->index);
	w->data = w->index = NULL;
	if (c1 || c2)
		return -1;
	return rename_all(w);
}

static void writer_free(struct sst_writer *w)
{
	if (w->data)
		env_file_close(w->data);
	if (w->index)
		env_file_close(w->index);
	buf_free(&w->raw);
	buf_free(&w->blk);
	buf_free(&w->iraw);
	buf_free(&w->summary);
	buf_free(&w->scratch);
	buf_free(&w->key);
	buf_free(&w->part_del);
	buf_free(&w->ri_ck);
	free(w->ri_off);
	free(w->ri_ck_end);
	free(w->patch);
	free(w->bloom);
	sai_writer_free(w);
	free(w->dir);
	free(w);
}

int sst_writer_finish(struct sst_writer *w)
{
	if (finish_files(w)) {
		err_prefix("sstable %s/ca-%" PRIu64, w->dir, w->gen);
		sst_writer_abort(w);
		return -1;
	}
	writer_free(w);
	return 0;
}

void sst_writer_abort(struct sst_writer *w)
{
	if (!w)
		return;
	/* keep the caller's error: a missing temp file is not news */
	enum err_code code = err_code();
	char msg[ERR_MSG_MAX];
	snprintf(msg, sizeof(msg), "%s", err_msg());
	for (size_t i = 0; i < component_count(w); i++) {
		if (!component_name(w, i))
			continue; /* not named: an init that failed */
		char *p = sst_path(w->dir, w->gen, component_name(w, i), true);
		if (p)
			env_unlink(w->env, p);
		free(p);
	}
	writer_free(w);
	if (code != ERR_NONE)
		err_set(code, "%s", msg);
}
