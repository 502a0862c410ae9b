/* Offline SSTable inspection (sstable_tool.h). */
#include "storage/sstable_tool.h"

#include "common/err.h"
#include "common/murmur3.h"
#include "storage/block_internal.h"
#include "storage/sai_component.h"
#include "storage/sstable_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_PSTART 1
#define TAG_ATOM   2
#define TAG_PEND   3

/* dir and generation from ".../ca-<gen>[-Component]". */
static int parse_path(const char *path, char *dir, size_t cap, uint64_t *gen)
{
	const char *base = strrchr(path, '/');
	size_t dlen = base ? (size_t)(base - path) : 1;
	base = base ? base + 1 : path;
	if (strncmp(base, "ca-", 3) != 0 || base[3] < '0' || base[3] > '9')
		return err_set(ERR_INVALID,
			       "%s: not an SSTable component (ca-N-Data.db, "
			       "ca-N-Statistics.db, ...)",
			       path);
	char *end;
	unsigned long long g = strtoull(base + 3, &end, 10);
	if (*end && *end != '-')
		return err_set(ERR_INVALID, "%s: not an SSTable component",
			       path);
	if (dlen == 0)
		dlen = 1; /* "/ca-1-..." */
	if (dlen >= cap)
		return err_set(ERR_INVALID, "%s: path too long", path);
	if (base == path)
		snprintf(dir, cap, ".");
	else
		snprintf(dir, cap, "%.*s", (int)dlen, path);
	*gen = g;
	return 0;
}

static void problem(struct storage_sstable_meta *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void problem(struct storage_sstable_meta *m, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	size_t n = strlen(m->problems);
	if (n == 0)
		err_set(ERR_CORRUPT, "%s", msg);
	snprintf(m->problems + n, sizeof(m->problems) - n, "%s%s",
		 n ? "; " : "", msg);
}

/* Reads and checks a component; *img is the caller's to free. */
static int read_comp(struct env *env, const struct storage_sstable_meta *m,
		     const char *comp, const char *magic, uint8_t max_version,
		     uint8_t *version, uint8_t **img, const uint8_t **body,
		     size_t *len)
{
	char *p = sst_path(m->dir, m->gen, comp, false);
	size_t n;
	*img = NULL;
	if (!p)
		return -1;
	int rc = env_read_file(env, p, 1u << 30, img, &n);
	if (!rc && storage_component_open_version(*img, n, magic, max_version,
						  version, body, len)) {
		free(*img);
		*img = NULL;
		rc = -1;
	}
	if (rc)
		err_prefix("%s", p);
	free(p);
	return rc;
}

static void read_stats(struct env *env, struct storage_sstable_meta *m)
{
	uint8_t *img, v;
	const uint8_t *p;
	size_t len;
	if (read_comp(env, m, "Statistics.db", "CSST", SST_STATS_VERSION, &v,
		      &img, &p, &len)) {
		problem(m, "%s", err_msg());
		return;
	}
	struct sst_stats *st = malloc(sizeof(*st));
	if (!st || sst_stats_decode(p, len, v, st)) {
		problem(m, "%s/ca-%" PRIu64 "-Statistics.db: %s", m->dir,
			m->gen, st ? err_msg() : "out of memory");
		free(st);
		free(img);
		return;
	}
	free(img);
	m->stats_ok = true;
	m->stats_version = v;
	m->min_token = st->min_token;
	m->max_token = st->max_token;
	m->min_ts = st->min_ts;
	m->max_ts = st->max_ts;
	m->min_ldt = st->min_ldt;
	m->max_ldt = st->max_ldt;
	m->repaired_at = st->repaired_at;
	m->cells = st->cell_count;
	m->tombstones = st->tombstone_count;
	m->partitions = st->partition_count;
	m->commitlog_segment = st->log_end.seg;
	m->commitlog_offset = st->log_end.off;
	m->data_size = st->data_size;
	m->has_live_no_ttl = st->has_live_no_ttl;
	memcpy(m->size_hist, st->size_hist, sizeof(m->size_hist));
	m->created_at = st->created_at;
	m->uncompressed_size = st->uncompressed_size;
	m->markers = st->marker_count;
	m->min_ttl = st->min_ttl;
	m->max_ttl = st->max_ttl;
	m->level = st->level;
	memcpy(m->pending_repair, st->pending_repair,
	       sizeof(m->pending_repair));
	for (size_t i = 0; i < sizeof(m->pending_repair); i++)
		m->pending = m->pending || m->pending_repair[i];
	m->tomb_bins = st->tomb_hist.count;
	memcpy(m->tomb_point, st->tomb_hist.point,
	       m->tomb_bins * sizeof(m->tomb_point[0]));
	memcpy(m->tomb_count, st->tomb_hist.value,
	       m->tomb_bins * sizeof(m->tomb_count[0]));
	free(st);
}

struct columns {
	struct storage_sstable_column *v;
	size_t n;
};

static int add_column(void *arg, uint64_t slot, struct slice name, uint8_t kind,
		      uint8_t flags, struct slice type)
{
	(void)slot;
	struct columns *cs = arg;
	struct storage_sstable_column *v =
		realloc(cs->v, (cs->n + 1) * sizeof(*v));
	if (!v)
		return err_set(ERR_NOMEM, "sstable layout");
	cs->v = v;
	struct storage_sstable_column *c = &v[cs->n];
	c->name = strndup((const char *)name.ptr, name.len);
	c->type = strndup((const char *)type.ptr, type.len);
	c->kind = kind;
	c->desc = flags & SST_LAYOUT_DESC;
	c->dropped = flags & SST_LAYOUT_DROPPED;
	cs->n++;
	if (!c->name || !c->type)
		return err_set(ERR_NOMEM, "sstable layout");
	return 0;
}

int storage_sstable_columns_read(struct env *env, const char *path,
				 struct storage_sstable_column **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	struct storage_sstable_meta *m = calloc(1, sizeof(*m));
	if (!m)
		return err_set(ERR_NOMEM, "sstable layout");
	if (parse_path(path, m->dir, sizeof(m->dir), &m->gen)) {
		free(m);
		return -1;
	}
	uint8_t *img = NULL, v;
	const uint8_t *p;
	size_t len;
	struct sst_stats *st = malloc(sizeof(*st));
	struct slice layout = {0};
	int rc = st ? read_comp(env, m, "Statistics.db", "CSST",
				SST_STATS_VERSION, &v, &img, &p, &len)
		    : err_set(ERR_NOMEM, "sstable layout");
	if (!rc && sst_stats_decode_layout(p, len, v, st, &layout))
		rc = err_prefix("%s/ca-%" PRIu64 "-Statistics.db", m->dir,
				m->gen);
	struct columns cs = {0};
	if (!rc && layout.ptr &&
	    sst_layout_walk(layout.ptr, layout.len, add_column, &cs)) {
		rc = err_code() == ERR_NOMEM
			     ? -1
			     : err_prefix("%s/ca-%" PRIu64 "-Statistics.db",
					  m->dir, m->gen);
		storage_sstable_columns_free(cs.v, cs.n);
		cs.v = NULL;
		cs.n = 0;
	}
	free(img);
	free(st);
	free(m);
	*out = cs.v;
	*n = cs.n;
	return rc;
}

void storage_sstable_columns_free(struct storage_sstable_column *c, size_t n)
{
	for (size_t i = 0; c && i < n; i++) {
		free(c[i].name);
		free(c[i].type);
	}
	free(c);
}

static void read_filter(struct env *env, struct storage_sstable_meta *m)
{
	uint8_t *img, v;
	const uint8_t *p;
	size_t len;
	if (read_comp(env, m, "Filter.db", "CSBF", SST_VERSION, &v, &img, &p,
		      &len)) {
		problem(m, "%s", err_msg());
		return;
	}
	struct cursor c = cursor_make(p, len);
	uint64_t bits;
	uint32_t k;
	if (cursor_be64(&c, &bits) || cursor_be32(&c, &k) || bits == 0 ||
	    k == 0 || k > 30 || (bits + 7) / 8 != cursor_left(&c))
		problem(m, "%s/ca-%" PRIu64 "-Filter.db: bad bloom filter",
			m->dir, m->gen);
	else {
		m->filter_ok = true;
		m->bloom_bits = bits;
		m->bloom_k = k;
	}
	free(img);
}

static void read_summary(struct env *env, struct storage_sstable_meta *m)
{
	uint8_t *img, v;
	const uint8_t *p;
	size_t len;
	uint64_t n;
	if (read_comp(env, m, "Summary.db", "CSSU", SST_VERSION, &v, &img, &p,
		      &len)) {
		problem(m, "%s", err_msg());
		return;
	}
	struct cursor c = cursor_make(p, len);
	if (cursor_uvarint(&c, &n) || n > len)
		problem(m, "%s/ca-%" PRIu64 "-Summary.db: bad summary", m->dir,
			m->gen);
	else {
		m->summary_ok = true;
		m->index_blocks = n;
	}
	free(img);
}

static int64_t file_size(struct env *env, const struct storage_sstable_meta *m,
			 const char *comp)
{
	char *p = sst_path(m->dir, m->gen, comp, false);
	struct env_file *f;
	int64_t n = -1;
	if (p && env_file_open(env, p, ENV_FILE_READ, &f) == 0) {
		n = env_file_size(f);
		env_file_close(f);
	}
	free(p);
	return n;
}

int storage_sstable_meta_read(struct env *env, const char *path,
			      struct storage_sstable_meta *out)
{
	memset(out, 0, sizeof(*out));
	out->data_bytes = out->index_bytes = -1;
	if (parse_path(path, out->dir, sizeof(out->dir), &out->gen))
		return -1;
	read_stats(env, out);
	read_filter(env, out);
	read_summary(env, out);
	out->data_bytes = file_size(env, out, "Data.db");
	out->index_bytes = file_size(env, out, "Index.db");
	if (out->data_bytes < 0)
		problem(out, "%s/ca-%" PRIu64 "-Data.db: missing", out->dir,
			out->gen);
	else if (out->stats_ok && (uint64_t)out->data_bytes != out->data_size)
		problem(out,
			"%s/ca-%" PRIu64 "-Data.db: %lld bytes, statistics "
			"say %llu",
			out->dir, out->gen, (long long)out->data_bytes,
			(unsigned long long)out->data_size);
	if (out->index_bytes < 0)
		problem(out, "%s/ca-%" PRIu64 "-Index.db: missing", out->dir,
			out->gen);
	return out->problems[0] ? -1 : 0;
}

double storage_sstable_droppable(const struct storage_sstable_meta *m,
				 int64_t gc_before)
{
	struct sst_stats *st = calloc(1, sizeof(*st));
	if (!st)
		return 0;
	st->has_v2 = m->stats_version >= 2;
	st->cell_count = m->cells;
	st->marker_count = m->markers;
	st->tomb_hist.count = m->tomb_bins;
	memcpy(st->tomb_hist.point, m->tomb_point,
	       m->tomb_bins * sizeof(m->tomb_point[0]));
	memcpy(st->tomb_hist.value, m->tomb_count,
	       m->tomb_bins * sizeof(m->tomb_count[0]));
	double r = sst_droppable_ratio(st, gc_before);
	free(st);
	return r;
}

double storage_sstable_bloom_fp(const struct storage_sstable_meta *m)
{
	if (!m->filter_ok || !m->bloom_bits)
		return 0;
	double n = (double)(m->partitions ? m->partitions : 1);
	return pow(1 - exp(-(double)m->bloom_k * n / (double)m->bloom_bits),
		   (double)m->bloom_k);
}

/* ---- dump ---------------------------------------------------------------- */

struct dump {
	struct sstable *s;
	const struct storage_sstable_dump_fns *fns;
	uint8_t *raw;
};

static int emit_atom(struct dump *d, const struct atom *a)
{
	struct storage_sstable_atom x = {
		.ck = a->ck.ptr,
		.ck_len = a->ck.len,
		.slot = a->slot,
		.kind = a->kind,
		.tombstone = (a->flags & ATOM_TOMBSTONE) != 0,
		.expiring = (a->flags & ATOM_EXPIRING) != 0,
		.path = a->path.ptr,
		.path_len = a->path.len,
		.ts = a->ts,
		.ttl = a->ttl,
		.ldt = a->ldt,
		.value = a->value.ptr,
		.value_len = a->value.len,
	};
	return d->fns->atom ? d->fns->atom(d->fns->arg, &x) : 0;
}

/* The partition's atoms, from its first block on until its end tag. */
static int dump_partition(struct dump *d, const struct sst_entry *e)
{
	uint64_t off = e->block_off, disk_len = e->block_len, next;
	size_t skip = e->in_block;
	bool started = false;
	for (;;) {
		size_t len;
		free(d->raw);
		d->raw = NULL;
		if (off >= d->s->stats.data_size)
			return err_set(ERR_CORRUPT,
				       "%s: partition runs past the end",
				       d->s->data_path);
		if (storage_block_read(d->s->data, d->s->data_path, off,
				       disk_len, &d->raw, &len, &next))
			return -1;
		if (skip > len)
			return err_set(ERR_CORRUPT, "%s: bad index offset",
				       d->s->data_path);
		struct cursor c = cursor_make(d->raw + skip, len - skip);
		while (cursor_left(&c)) {
			uint8_t tag;
			uint64_t kl;
			struct slice key;
			struct atom a;
			if (cursor_u8(&c, &tag))
				return -1;
			if (tag == TAG_PEND)
				return d->fns->partition_end
					       ? d->fns->partition_end(
							 d->fns->arg)
					       : 0;
			if (tag == TAG_PSTART && !started) {
				if (cursor_uvarint(&c, &kl) ||
				    kl > cursor_left(&c) ||
				    cursor_take(&c, kl, &key) ||
				    key.len != e->key.len ||
				    memcmp(key.ptr, e->key.ptr, key.len) != 0)
					return err_set(
						ERR_CORRUPT,
						"%s at %" PRIu64
						": partition key differs "
						"from the index",
						d->s->data_path, off);
				started = true;
			} else if (tag == TAG_ATOM && started) {
				if (storage_atom_decode(&c, &a))
					return err_set(ERR_CORRUPT,
						       "%s at %" PRIu64
						       ": bad atom",
						       d->s->data_path, off);
				int rc = emit_atom(d, &a);
				if (rc)
					return rc;
			} else {
				return err_set(ERR_CORRUPT,
					       "%s at %" PRIu64
					       ": bad block entry",
					       d->s->data_path, off);
			}
		}
		off = next;
		disk_len = 0;
		skip = 0;
	}
}

int storage_sstable_dump(struct env *env, const char *path, const uint8_t *key,
			 size_t key_len,
			 const struct storage_sstable_dump_fns *fns)
{
	char dir[1024];
	uint64_t gen;
	if (parse_path(path, dir, sizeof(dir), &gen))
		return -1;
	uint8_t id[16] = {0};
	struct storage_table_meta *t = storage_table_meta_new("", "", id);
	if (!t)
		return -1;
	struct dump d = {.fns = fns};
	d.s = sstable_open(env, dir, gen, t, NULL);
	storage_table_meta_delete(t);
	if (!d.s)
		return -1;
	struct sst_iter *it = sst_iter_new(d.s);
	int rc = it ? 0 : -1;
	int64_t want = key ? murmur3_token(key, key_len) : 0;
	if (!rc && key)
		rc = sst_iter_seek(it, want, true);
	while (!rc) {
		const struct sst_entry *e;
		int r = sst_iter_next(it, &e);
		if (r <= 0) {
			rc = r;
			break;
		}
		if (key && e->token > want)
			break;
		if (key && (e->key.len != key_len ||
			    memcmp(e->key.ptr, key, key_len) != 0))
			continue;
		struct storage_sstable_partition p = {
			.key = e->key.ptr,
			.key_len = e->key.len,
			.token = e->token,
			.deleted = e->pdel.ts != DELETION_NONE,
			.del_ts = e->pdel.ts,
			.del_ldt = e->pdel.ldt,
			.range_tombstones = e->rt_count,
			.row_index_entries = e->ri_count,
		};
		rc = fns->partition ? fns->partition(fns->arg, &p) : 0;
		if (!rc)
			rc = dump_partition(&d, e);
	}
	free(d.raw);
	sst_iter_delete(it);
	sstable_unref(d.s);
	return rc;
}

/* ---- verify -------------------------------------------------------------- */

/* Every block of `comp` in file order: the blocks tile the file exactly. */
static void verify_blocks(struct env *env, struct storage_sstable_meta *m,
			  const char *comp)
{
	char *p = sst_path(m->dir, m->gen, comp, false);
	struct env_file *f;
	if (!p)
		return;
	if (env_file_open(env, p, ENV_FILE_READ, &f)) {
		problem(m, "%s: %s", p, err_msg());
		free(p);
		return;
	}
	uint64_t size = (uint64_t)env_file_size(f), off = 0, next;
	uint8_t *mem = NULL;
	size_t cap = 0;
	while (off < size) {
		const uint8_t *raw;
		size_t len;
		if (storage_block_read_into(f, p, off, 0, &mem, &cap, &raw,
					    &len, &next)) {
			problem(m, "%s", err_msg());
			break;
		}
		if (next > size) {
			problem(m, "%s: truncated block at offset %" PRIu64, p,
				off);
			break;
		}
		off = next;
	}
	free(mem);
	env_file_close(f);
	free(p);
}

/* Every index component TOC.txt lists ("SAI_<index>.db"), each block and
 * its directory checked (sai_file_verify); a damaged one is named as
 * Cassandra's verifier names a corrupt file ("Corrupted: <path>"). */
static void verify_indexes(struct env *env, struct storage_sstable_meta *m)
{
	char *toc = sst_path(m->dir, m->gen, "TOC.txt", false);
	uint8_t *img = NULL;
	size_t len = 0;
	if (!toc || env_read_file(env, toc, 64 * 1024, &img, &len)) {
		free(toc);
		return; /* missing: reported by the caller */
	}
	free(toc);
	for (const char *p = (const char *)img, *end = p + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char comp[256];
		bool sai = n > 7 && n < sizeof(comp) && !memcmp(p, "SAI_", 4) &&
			   !memcmp(p + n - 3, ".db", 3);
		if (sai)
			snprintf(comp, sizeof(comp), "%.*s", (int)n, p);
		p += n + 1;
		char *cp = sai ? sst_path(m->dir, m->gen, comp, false) : NULL;
		if (!cp)
			continue;
		struct sai_file *f = NULL;
		int rc = sai_file_open(env, cp, NULL, &f);
		if (rc == SAI_OK)
			rc = sai_file_verify(f);
		sai_file_close(f);
		if (rc == SAI_CORRUPT)
			problem(m, "Corrupted: %s (index component)", cp);
		else if (rc == SAI_IO)
			problem(m, "%s: missing or unreadable index component",
				cp);
		free(cp);
	}
	free(img);
}

static int count_partition(void *arg, const struct storage_sstable_partition *x)
{
	(void)x;
	(*(uint64_t *)arg)++;
	return 0;
}

int storage_sstable_verify(struct env *env, const char *path,
			   uint64_t *partitions, char *problems, size_t cap)
{
	struct storage_sstable_meta *m = malloc(sizeof(*m));
	*partitions = 0;
	if (cap)
		problems[0] = '\0';
	if (!m)
		return err_set(ERR_NOMEM, "verify");
	if (storage_sstable_meta_read(env, path, m) && !m->dir[0]) {
		snprintf(problems, cap, "%s", err_msg());
		free(m);
		return -1;
	}
	char *toc = sst_path(m->dir, m->gen, "TOC.txt", false);
	struct env_file *f;
	if (toc && env_file_open(env, toc, ENV_FILE_READ, &f) == 0)
		env_file_close(f);
	else if (toc)
		problem(m, "%s: missing (an incomplete SSTable)", toc);
	free(toc);
	if (m->data_bytes >= 0)
		verify_blocks(env, m, "Data.db");
	if (m->index_bytes >= 0)
		verify_blocks(env, m, "Index.db");
	if (!m->problems[0]) {
		/* every partition through the index, as a read finds it */
		struct storage_sstable_dump_fns fns = {
			.partition = count_partition,
			.arg = partitions,
		};
		if (storage_sstable_dump(env, path, NULL, 0, &fns))
			problem(m, "%s", err_msg());
		else if (m->stats_ok && *partitions != m->partitions)
			problem(m,
				"%s/ca-%" PRIu64 "-Index.db: %" PRIu64
				" partitions, statistics say %" PRIu64,
				m->dir, m->gen, *partitions, m->partitions);
	}
	verify_indexes(env, m);
	int rc = m->problems[0] ? -1 : 0;
	if (rc) {
		snprintf(problems, cap, "%s", m->problems);
		err_set(ERR_CORRUPT, "%s", m->problems);
	}
	free(m);
	return rc;
}
