/*
 * Mutations: the builder and the one serialized form.
 *
 * Encoding, version 1 (integers big-endian; uvarint = unsigned LEB128):
 *
 *   u8       magic 0xC4
 *   u8       version (1)
 *   16 bytes table id
 *   uvarint  key length, key bytes
 *   u8       flags: bit 0 = partition deletion follows
 *   [be64 ts, be64 ldt]           partition deletion
 *   uvarint  range tombstone count, each as storage_rtomb_encode (atom.c)
 *   uvarint  atom count, each as storage_atom_encode (atom.c)
 *   be32     masked crc32c of every byte above
 *
 * The decoder checks every length against what remains, caps counts by the
 * bytes left, verifies the CRC before trusting anything, and copies what it
 * keeps, so the input may be freed afterwards.
 */
#include "storage/mutation_internal.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/murmur3.h"
#include "common/zalloc.h"
#include "storage/storage.h"

#include <stdlib.h>
#include <string.h>

#define MUTATION_MAGIC   0xC4
#define MUTATION_VERSION 1

static struct storage_mutation *mutation_alloc(void)
{
	struct storage_mutation *m = zcalloc(1, sizeof(*m));
	if (!m) {
		err_set(ERR_NOMEM, "mutation");
		return NULL;
	}
	arena_create(&m->arena, 4096);
	m->pdel.ts = DELETION_NONE;
	return m;
}

struct storage_mutation *
storage_mutation_new(const struct storage_table_meta *t, const uint8_t *key,
		     size_t len)
{
	return storage_mutation_new_token(t, key, len, murmur3_token(key, len));
}

struct storage_mutation *
storage_mutation_new_token(const struct storage_table_meta *t,
			   const uint8_t *key, size_t len, int64_t token)
{
	if (len == 0 || len > 0xffff) {
		err_set(ERR_INVALID, "partition key of %zu bytes", len);
		return NULL;
	}
	struct storage_mutation *m = mutation_alloc();
	if (!m)
		return NULL;
	memcpy(m->table_id, t->id, 16);
	m->meta = t;
	void *k = arena_memdup(&m->arena, key, len);
	if (!k) {
		storage_mutation_delete(m);
		return NULL;
	}
	m->key = slice_make(k, len);
	m->token = token;
	static const uint8_t row_ck[1] = {CK_ROW};
	m->row = slice_make(row_ck, 1);
	return m;
}

void storage_mutation_delete(struct storage_mutation *m)
{
	if (!m)
		return;
	arena_destroy(&m->arena);
	free(m->rts);
	free(m->atoms);
	free(m);
}

int64_t storage_mutation_token(const struct storage_mutation *m)
{
	return m->token;
}

const uint8_t *storage_mutation_table_id(const struct storage_mutation *m)
{
	return m->table_id;
}

struct slice storage_mutation_key(const struct storage_mutation *m)
{
	return m->key;
}

size_t storage_mutation_data_size(const struct storage_mutation *m)
{
	size_t n = m->key.len + 32;
	for (size_t i = 0; i < m->atom_count; i++)
		n += storage_atom_encoded_size_hint(&m->atoms[i]);
	for (size_t i = 0; i < m->rt_count; i++)
		n += m->rts[i].start.len + m->rts[i].end.len + 24;
	return n;
}

size_t storage_mutation_size(const struct storage_mutation *m)
{
	return storage_mutation_data_size(m);
}

static struct slice encode_ck(struct storage_mutation *m, int kind,
			      const struct slice *vals, size_t n)
{
	struct buf b;
	buf_init(&b);
	struct slice out = {NULL, 0};
	if (storage_ck_encode(&b, kind, vals, n) == 0) {
		void *p = arena_memdup(&m->arena, b.data, b.len);
		if (p)
			out = slice_make(p, b.len);
	}
	buf_free(&b);
	return out;
}

int storage_mutation_push_rtomb(struct storage_mutation *m,
				const struct rtomb *r)
{
	if (m->rt_count == m->rt_cap) {
		size_t cap = m->rt_cap ? m->rt_cap * 2 : 2;
		struct rtomb *n = realloc(m->rts, cap * sizeof(*n));
		if (!n)
			return err_set(ERR_NOMEM, "range tombstones");
		m->rts = n;
		m->rt_cap = cap;
	}
	if (storage_rtomb_copy(&m->arena, r, &m->rts[m->rt_count]))
		return err_set(ERR_NOMEM, "range tombstone");
	m->rt_count++;
	return 0;
}

int storage_mutation_set_row(struct storage_mutation *m,
			     const struct slice *clustering, size_t n)
{
	if (m->meta && n != m->meta->ck_count)
		return err_set(ERR_INVALID,
			       "row needs %zu clustering values, "
			       "got %zu",
			       m->meta->ck_count, n);
	struct slice ck = encode_ck(m, CK_ROW, clustering, n);
	if (!ck.ptr)
		return err_set(ERR_NOMEM, "clustering");
	m->row = ck;
	return 0;
}

int storage_mutation_set_static_row(struct storage_mutation *m)
{
	static const uint8_t st[1] = {CK_STATIC};
	m->row = slice_make(st, 1);
	return 0;
}

int storage_mutation_push_atom(struct storage_mutation *m, const struct atom *a)
{
	if (m->atom_count == m->atom_cap) {
		size_t cap = m->atom_cap ? m->atom_cap * 2 : 4;
		struct atom *n = realloc(m->atoms, cap * sizeof(*n));
		if (!n)
			return err_set(ERR_NOMEM, "atoms");
		m->atoms = n;
		m->atom_cap = cap;
	}
	struct atom copy;
	if (storage_atom_copy(&m->arena, a, &copy))
		return err_set(ERR_NOMEM, "atom");
	m->atoms[m->atom_count++] = copy;
	return 0;
}

static int check_column(const struct storage_mutation *m, int column,
			bool element)
{
	if (!m->meta)
		return 0;
	if (column < 0 || (size_t)column >= m->meta->column_count)
		return err_set(ERR_INVALID, "no column %d", column);
	const struct storage_column *c = &m->meta->columns[column];
	if (c->kind == STORAGE_COLUMN_PARTITION_KEY ||
	    c->kind == STORAGE_COLUMN_CLUSTERING)
		return err_set(ERR_INVALID, "column %s is part of the key",
			       c->name);
	bool is_static = m->row.len && m->row.ptr[0] == CK_STATIC;
	if ((c->kind == STORAGE_COLUMN_STATIC) != is_static)
		return err_set(ERR_INVALID, "column %s %s static", c->name,
			       is_static ? "is not" : "is");
	bool coll = storage_type_is_multicell(c->type) ||
		    c->type->kind == STORAGE_TYPE_COUNTER;
	if (element && !coll)
		return err_set(ERR_INVALID, "column %s has no elements",
			       c->name);
	return 0;
}

static void fill_live(struct atom *a, int64_t ts, int32_t ttl, int64_t now_sec)
{
	a->ts = ts;
	if (ttl > 0) {
		a->flags = ATOM_EXPIRING;
		a->ttl = ttl;
		a->ldt = now_sec + ttl;
	}
}

int storage_mutation_put(struct storage_mutation *m, int column,
			 const uint8_t *path, size_t path_len,
			 const uint8_t *value, size_t len, int64_t ts,
			 int32_t ttl, int64_t now_sec)
{
	if (check_column(m, column, path != NULL))
		return -1;
	if (ttl < 0)
		return err_set(ERR_INVALID, "negative ttl");
	struct atom a = {.ck = m->row,
			 .slot = (uint16_t)(column + 1),
			 .kind = ATOM_KIND_LIVE,
			 .path = slice_make(path, path ? path_len : 0),
			 .value = slice_make(value, len)};
	fill_live(&a, ts, ttl, now_sec);
	return storage_mutation_push_atom(m, &a);
}

int storage_mutation_put_marker(struct storage_mutation *m, int64_t ts,
				int32_t ttl, int64_t now_sec)
{
	struct atom a = {
		.ck = m->row, .slot = ATOM_SLOT_ROW, .kind = ATOM_KIND_LIVE};
	fill_live(&a, ts, ttl, now_sec);
	return storage_mutation_push_atom(m, &a);
}

int storage_mutation_delete_cell(struct storage_mutation *m, int column,
				 const uint8_t *path, size_t path_len,
				 int64_t ts, int64_t now_sec)
{
	if (check_column(m, column, path != NULL))
		return -1;
	struct atom a = {.ck = m->row,
			 .slot = (uint16_t)(column + 1),
			 .kind = ATOM_KIND_LIVE,
			 .flags = ATOM_TOMBSTONE,
			 .path = slice_make(path, path ? path_len : 0),
			 .ts = ts,
			 .ldt = now_sec};
	return storage_mutation_push_atom(m, &a);
}

int storage_mutation_delete_collection(struct storage_mutation *m, int column,
				       int64_t ts, int64_t now_sec)
{
	if (check_column(m, column, true))
		return -1;
	struct atom a = {.ck = m->row,
			 .slot = (uint16_t)(column + 1),
			 .kind = ATOM_KIND_DELETION,
			 .flags = ATOM_TOMBSTONE,
			 .ts = ts,
			 .ldt = now_sec};
	return storage_mutation_push_atom(m, &a);
}

int storage_mutation_delete_row(struct storage_mutation *m, int64_t ts,
				int64_t now_sec)
{
	struct atom a = {.ck = m->row,
			 .slot = ATOM_SLOT_ROW,
			 .kind = ATOM_KIND_DELETION,
			 .flags = ATOM_TOMBSTONE,
			 .ts = ts,
			 .ldt = now_sec};
	return storage_mutation_push_atom(m, &a);
}

int storage_mutation_delete_partition(struct storage_mutation *m, int64_t ts,
				      int64_t now_sec)
{
	m->pdel = storage_deletion_max(m->pdel, (struct deletion){ts, now_sec});
	return 0;
}

int storage_mutation_delete_range(struct storage_mutation *m,
				  const struct slice *start, size_t nstart,
				  bool start_incl, const struct slice *end,
				  size_t nend, bool end_incl, int64_t ts,
				  int64_t now_sec)
{
	if (m->meta && (nstart > m->meta->ck_count || nend > m->meta->ck_count))
		return err_set(ERR_INVALID, "range bound longer than the "
					    "clustering key");
	if (m->rt_count == m->rt_cap) {
		size_t cap = m->rt_cap ? m->rt_cap * 2 : 2;
		struct rtomb *n = realloc(m->rts, cap * sizeof(*n));
		if (!n)
			return err_set(ERR_NOMEM, "range tombstones");
		m->rts = n;
		m->rt_cap = cap;
	}
	struct rtomb r = {.start = encode_ck(m, CK_ROW, start, nstart),
			  .end = encode_ck(m, CK_ROW, end, nend),
			  .start_incl = start_incl || nstart == 0,
			  .end_incl = end_incl || nend == 0,
			  .del = {ts, now_sec}};
	if (!r.start.ptr || !r.end.ptr)
		return err_set(ERR_NOMEM, "range tombstone");
	m->rts[m->rt_count++] = r;
	return 0;
}

int storage_mutation_encode(const struct storage_mutation *m, struct buf *out)
{
	size_t start = out->len;
	int rc = buf_put_u8(out, MUTATION_MAGIC) ||
		 buf_put_u8(out, MUTATION_VERSION) ||
		 buf_append(out, m->table_id, 16) ||
		 buf_put_uvarint(out, m->key.len) ||
		 buf_append(out, m->key.ptr, m->key.len) ||
		 buf_put_u8(out, m->pdel.ts != DELETION_NONE);
	if (!rc && m->pdel.ts != DELETION_NONE)
		rc = buf_put_be64(out, (uint64_t)m->pdel.ts) ||
		     buf_put_be64(out, (uint64_t)m->pdel.ldt);
	rc = rc || buf_put_uvarint(out, m->rt_count);
	for (size_t i = 0; !rc && i < m->rt_count; i++)
		rc = storage_rtomb_encode(out, &m->rts[i]);
	rc = rc || buf_put_uvarint(out, m->atom_count);
	for (size_t i = 0; !rc && i < m->atom_count; i++)
		rc = storage_atom_encode(out, &m->atoms[i]);
	if (!rc) {
		uint32_t crc = crc32c(0, out->data + start, out->len - start);
		rc = buf_put_be32(out, crc32c_mask(crc));
	}
	if (rc) {
		out->len = start;
		return err_set(ERR_NOMEM, "mutation encode");
	}
	return 0;
}

static int decode_body(struct storage_mutation *m, struct cursor *c)
{
	uint8_t magic, version, flags;
	struct slice key;
	uint64_t n;
	if (cursor_u8(c, &magic) || magic != MUTATION_MAGIC)
		return err_set(ERR_CORRUPT, "mutation: bad magic");
	if (cursor_u8(c, &version) || version != MUTATION_VERSION)
		return err_set(ERR_CORRUPT, "mutation: unknown version %u",
			       version);
	if (cursor_copy(c, m->table_id, 16) || cursor_uvarint(c, &n) ||
	    n == 0 || n > 0xffff || n > cursor_left(c) ||
	    cursor_take(c, n, &key) || cursor_u8(c, &flags) || flags > 1)
		return err_set(ERR_CORRUPT, "mutation: bad header");
	void *k = arena_memdup(&m->arena, key.ptr, key.len);
	if (!k)
		return err_set(ERR_NOMEM, "mutation key");
	m->key = slice_make(k, key.len);
	m->token = murmur3_token(key.ptr, key.len);
	if (flags & 1) {
		uint64_t ts, ldt;
		if (cursor_be64(c, &ts) || cursor_be64(c, &ldt) ||
		    (int64_t)ts == DELETION_NONE)
			return err_set(ERR_CORRUPT, "mutation: bad deletion");
		m->pdel = (struct deletion){(int64_t)ts, (int64_t)ldt};
	}
	if (cursor_uvarint(c, &n) || n > cursor_left(c) / 20)
		return err_set(ERR_CORRUPT, "mutation: bad range count");
	for (uint64_t i = 0; i < n; i++) {
		struct rtomb r;
		if (storage_rtomb_decode(c, &r))
			return err_set(ERR_CORRUPT, "mutation: bad range");
		if (storage_mutation_push_rtomb(m, &r))
			return -1;
	}
	if (cursor_uvarint(c, &n) || n > cursor_left(c) / 14)
		return err_set(ERR_CORRUPT, "mutation: bad atom count");
	for (uint64_t i = 0; i < n; i++) {
		struct atom a;
		if (storage_atom_decode(c, &a))
			return err_set(ERR_CORRUPT, "mutation: bad atom %llu",
				       (unsigned long long)i);
		if (storage_mutation_push_atom(m, &a))
			return -1;
	}
	if (cursor_left(c) != 0)
		return err_set(ERR_CORRUPT, "mutation: trailing bytes");
	return 0;
}

struct storage_mutation *storage_mutation_decode(const uint8_t *p, size_t len)
{
	if (len < 4 + 2 + 16 + 2) {
		err_set(ERR_CORRUPT, "mutation: %zu bytes is too short", len);
		return NULL;
	}
	uint32_t stored = crc32c_unmask(be32_load(p + len - 4));
	if (crc32c(0, p, len - 4) != stored) {
		err_set(ERR_CORRUPT, "mutation: checksum mismatch");
		return NULL;
	}
	struct storage_mutation *m = mutation_alloc();
	if (!m)
		return NULL;
	static const uint8_t row_ck[1] = {CK_ROW};
	m->row = slice_make(row_ck, 1);
	struct cursor c = cursor_make(p, len - 4);
	if (decode_body(m, &c)) {
		storage_mutation_delete(m);
		return NULL;
	}
	return m;
}
