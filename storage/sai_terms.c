/*
 * Storage-attached index terms (see sai_internal.h).
 */
#include "storage/sai_internal.h"

#include "common/err.h"
#include "storage/storage.h"

#include <stdio.h>
#include <string.h>

static bool is_text(const struct storage_type *ty)
{
	return ty->kind == STORAGE_TYPE_TEXT || ty->kind == STORAGE_TYPE_ASCII;
}

const struct storage_type *
sai_index_value_type(const struct storage_table_meta *t,
		     const struct storage_index *ix)
{
	if (ix->column >= t->column_count)
		return NULL;
	const struct storage_type *ty = t->columns[ix->column].type;
	bool coll = ty->kind == STORAGE_TYPE_LIST ||
		    ty->kind == STORAGE_TYPE_SET ||
		    ty->kind == STORAGE_TYPE_MAP;
	switch (ix->target) {
	case STORAGE_INDEX_VALUE:
	case STORAGE_INDEX_FULL:
		return coll && !ty->frozen ? NULL : ty;
	case STORAGE_INDEX_KEYS:
		return ty->kind == STORAGE_TYPE_MAP && !ty->frozen ? ty->sub[0]
								   : NULL;
	case STORAGE_INDEX_VALUES:
		if (!coll || ty->frozen)
			return NULL;
		return ty->kind == STORAGE_TYPE_MAP ? ty->sub[1] : ty->sub[0];
	case STORAGE_INDEX_ENTRIES:
		return ty->kind == STORAGE_TYPE_MAP && !ty->frozen ? ty->sub[1]
								   : NULL;
	}
	return NULL;
}

/* Whether a value of `ty` nested in a frozen one has canonical bytes. */
static bool nested_exact(const struct storage_type *ty, int depth)
{
	if (ty->kind == STORAGE_TYPE_DECIMAL ||
	    ty->kind == STORAGE_TYPE_VARINT || depth > STORAGE_TYPE_MAX_DEPTH)
		return false;
	for (size_t i = 0; i < ty->count; i++)
		if (!nested_exact(ty->sub[i], depth + 1))
			return false;
	return true;
}

static bool type_exact(const struct storage_type *ty)
{
	if (ty->kind == STORAGE_TYPE_DECIMAL)
		return false;
	for (size_t i = 0; i < ty->count; i++)
		if (!nested_exact(ty->sub[i], 1))
			return false;
	return true;
}

bool sai_index_exact(const struct storage_table_meta *t,
		     const struct storage_index *ix)
{
	const struct storage_type *vt = sai_index_value_type(t, ix);
	if (!vt || !type_exact(vt))
		return false;
	if (ix->target == STORAGE_INDEX_ENTRIES &&
	    !type_exact(t->columns[ix->column].type->sub[0]))
		return false;
	return true;
}

static size_t int_width(uint16_t kind)
{
	switch (kind) {
	case STORAGE_TYPE_TINYINT:
		return 1;
	case STORAGE_TYPE_SMALLINT:
		return 2;
	case STORAGE_TYPE_INT:
		return 4;
	case STORAGE_TYPE_BIGINT:
	case STORAGE_TYPE_COUNTER:
	case STORAGE_TYPE_TIMESTAMP:
	case STORAGE_TYPE_TIME:
		return 8;
	default:
		return 0;
	}
}

/* Two's complement, minimal: 4 bytes of sign and length, then the
 * bytes. Longer positives sort after, longer negatives before. */
static int varint_term(struct slice v, struct buf *out)
{
	const uint8_t *p = v.ptr;
	size_t n = v.len;
	bool neg = p[0] & 0x80;
	while (n > 1 && ((p[0] == 0x00 && !(p[1] & 0x80)) ||
			 (p[0] == 0xff && (p[1] & 0x80)))) {
		p++;
		n--;
	}
	if (n > 0x7fffffffu)
		return err_set(ERR_INVALID, "varint too long");
	uint32_t h =
		neg ? 0x7fffffffu - (uint32_t)n : 0x80000000u + (uint32_t)n;
	uint8_t hb[4] = {(uint8_t)(h >> 24), (uint8_t)(h >> 16),
			 (uint8_t)(h >> 8), (uint8_t)h};
	return buf_append(out, hb, 4) || buf_append(out, p, n) ? -1 : 0;
}

static uint64_t load_be(const uint8_t *p, size_t n)
{
	uint64_t x = 0;
	for (size_t i = 0; i < n; i++)
		x = x << 8 | p[i];
	return x;
}

static int put_be(struct buf *out, uint64_t x, size_t n)
{
	uint8_t b[8];
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(x >> (8 * (n - 1 - i)));
	return buf_append(out, b, n);
}

/* Float.compare's order: negatives all bits flipped, others the sign;
 * every NaN the one canonical NaN (they compare equal). */
static int float_term(struct slice v, struct buf *out)
{
	uint64_t bits = load_be(v.ptr, v.len);
	uint64_t sign = v.len == 4 ? 1ull << 31 : 1ull << 63;
	uint64_t mask = sign | (sign - 1);
	uint64_t exp = v.len == 4 ? 0x7f800000ull : 0x7ff0000000000000ull;
	uint64_t frac = v.len == 4 ? 0x007fffffull : 0x000fffffffffffffull;
	if ((bits & exp) == exp && (bits & frac))
		bits = v.len == 4 ? 0x7fc00000ull : 0x7ff8000000000000ull;
	bits = (bits & sign) ? ~bits & mask : bits | sign;
	return put_be(out, bits, v.len);
}

static uint64_t uuid_time(const uint8_t *p)
{
	uint64_t msb = load_be(p, 8);
	return (msb << 48) | ((msb << 16) & 0xFFFF00000000ULL) | (msb >> 32);
}

static int uuid_term(uint16_t kind, struct slice v, struct buf *out)
{
	const uint8_t *p = v.ptr;
	uint8_t ver = p[6] >> 4;
	if (kind == STORAGE_TYPE_TIMEUUID) {
		if (put_be(out, uuid_time(p), 8))
			return -1;
		for (size_t i = 8; i < 16; i++)
			if (buf_put_u8(out, p[i] ^ 0x80))
				return -1;
		return 0;
	}
	if (buf_put_u8(out, ver))
		return -1;
	if (ver != 1)
		return buf_append(out, p, 16);
	return put_be(out, uuid_time(p), 8) || buf_append(out, p + 8, 8) ? -1
									 : 0;
}

int sai_term_encode(const struct storage_type *ty, unsigned analyzer,
		    struct slice v, struct buf *out)
{
	if (v.len == 0)
		return 0; /* empty sorts first, as in Cassandra */
	size_t w = int_width(ty->kind);
	if (w && v.len == w) {
		if (buf_put_u8(out, v.ptr[0] ^ 0x80))
			return -1;
		return buf_append(out, v.ptr + 1, w - 1);
	}
	switch (ty->kind) {
	case STORAGE_TYPE_VARINT:
		return varint_term(v, out);
	case STORAGE_TYPE_FLOAT:
	case STORAGE_TYPE_DOUBLE:
		if (v.len == (ty->kind == STORAGE_TYPE_FLOAT ? 4u : 8u))
			return float_term(v, out);
		break;
	case STORAGE_TYPE_UUID:
	case STORAGE_TYPE_TIMEUUID:
		if (v.len == 16)
			return uuid_term(ty->kind, v, out);
		break;
	default:
		break;
	}
	if (analyzer && is_text(ty))
		return storage_sai_analyze(analyzer, v.ptr, v.len, out);
	return buf_append(out, v.ptr, v.len);
}

int sai_index_term(const struct storage_table_meta *t,
		   const struct storage_index *ix, const struct slice *vals,
		   size_t n, struct buf *out)
{
	buf_clear(out);
	const struct storage_type *vt = sai_index_value_type(t, ix);
	if (!vt)
		return err_set(ERR_INVALID, "index %s: no terms", ix->name);
	if (ix->target != STORAGE_INDEX_ENTRIES)
		return n == 1 ? sai_term_encode(vt, ix->analyzer, vals[0], out)
			      : err_set(ERR_INVALID, "one value wanted");
	struct slice kv[2];
	if (n == 1) { /* (key, value) as a tuple<key, value> value */
		const uint8_t *b = vals[0].ptr;
		size_t len = vals[0].len, pos = 0;
		for (int i = 0; i < 2; i++) {
			if (len - pos < 4)
				return err_set(ERR_INVALID,
					       "entries: bad pair");
			uint32_t l = be32_load(b + pos);
			pos += 4;
			if (l > len - pos)
				return err_set(ERR_INVALID,
					       "entries: bad pair");
			kv[i] = (struct slice){b + pos, l};
			pos += l;
		}
		if (pos != len)
			return err_set(ERR_INVALID, "entries: bad pair");
		vals = kv;
		n = 2;
	}
	if (n != 2)
		return err_set(ERR_INVALID, "entries: key and value wanted");
	const struct storage_type *kt = t->columns[ix->column].type->sub[0];
	if (buf_put_be32(out, 0) ||
	    sai_term_encode(kt, ix->analyzer, vals[0], out))
		return -1;
	uint32_t kl = (uint32_t)(out->len - 4);
	out->data[0] = (uint8_t)(kl >> 24);
	out->data[1] = (uint8_t)(kl >> 16);
	out->data[2] = (uint8_t)(kl >> 8);
	out->data[3] = (uint8_t)kl;
	return sai_term_encode(vt, ix->analyzer, vals[1], out);
}

int sai_key_term(const struct storage_table_meta *t,
		 const struct storage_index *ix, struct slice key,
		 struct buf *out)
{
	if (ix->column >= t->column_count ||
	    t->columns[ix->column].kind != STORAGE_COLUMN_PARTITION_KEY)
		return 0;
	struct slice c =
		storage_pk_component(t, key, t->columns[ix->column].position);
	if (!c.ptr)
		return 0;
	buf_clear(out);
	return sai_term_encode(t->columns[ix->column].type, ix->analyzer, c,
			       out)
		       ? -1
		       : 1;
}

int sai_atom_term(const struct storage_table_meta *t,
		  const struct storage_index *ix, const struct atom *a,
		  struct buf *out)
{
	if (ix->column >= t->column_count)
		return 0;
	const struct storage_column *col = &t->columns[ix->column];
	if (col->kind == STORAGE_COLUMN_PARTITION_KEY)
		return 0;
	if (col->kind == STORAGE_COLUMN_CLUSTERING) {
		if (a->ck.len == 0 || a->ck.ptr[0] != CK_ROW)
			return 0;
		struct slice vals[33];
		int kind;
		int n = storage_ck_decode(a->ck, &kind, vals, 33);
		if (n <= (int)col->position)
			return 0;
		buf_clear(out);
		return sai_term_encode(col->type, ix->analyzer,
				       vals[col->position], out)
			       ? -1
			       : 1;
	}
	if (a->slot != ix->column + 1 || a->kind != ATOM_KIND_LIVE ||
	    (a->flags & ATOM_TOMBSTONE))
		return 0;
	const struct storage_type *vt = sai_index_value_type(t, ix);
	if (!vt)
		return 0;
	struct slice v = a->value;
	switch (ix->target) {
	case STORAGE_INDEX_KEYS:
		v = a->path;
		break;
	case STORAGE_INDEX_VALUES:
		if (col->type->kind == STORAGE_TYPE_SET)
			v = a->path;
		break;
	case STORAGE_INDEX_ENTRIES: {
		struct slice kv[2] = {a->path, a->value};
		return sai_index_term(t, ix, kv, 2, out) ? -1 : 1;
	}
	default:
		break;
	}
	buf_clear(out);
	return sai_term_encode(vt, ix->analyzer, v, out) ? -1 : 1;
}

bool sai_index_rows(const struct storage_table_meta *t,
		    const struct storage_index *ix)
{
	return t->ck_count > 0 && ix->column < t->column_count &&
	       t->columns[ix->column].kind == STORAGE_COLUMN_REGULAR;
}

int sai_component_key(int64_t token, struct slice key, struct buf *out)
{
	buf_clear(out);
	return put_be(out, (uint64_t)token ^ (1ull << 63), 8) ||
			       buf_append(out, key.ptr, key.len)
		       ? -1
		       : 0;
}

int sai_component_row_key(int64_t token, struct slice key, struct slice ck,
			  struct buf *out)
{
	buf_clear(out);
	if (key.len > 0xffff)
		return err_set(ERR_INVALID, "partition key too long");
	return put_be(out, (uint64_t)token ^ (1ull << 63), 8) ||
			       put_be(out, key.len, 2) ||
			       buf_append(out, key.ptr, key.len) ||
			       buf_append(out, ck.ptr, ck.len)
		       ? err_set(ERR_NOMEM, "index key")
		       : 0;
}

int sai_component_key_split(const uint8_t *p, size_t len, int64_t *token,
			    struct slice *key)
{
	if (len < 8)
		return -1;
	*token = (int64_t)(load_be(p, 8) ^ (1ull << 63));
	key->ptr = p + 8;
	key->len = len - 8;
	return 0;
}

int sai_component_row_key_split(const uint8_t *p, size_t len, int64_t *token,
				struct slice *key, struct slice *ck)
{
	if (len < 10)
		return -1;
	*token = (int64_t)(load_be(p, 8) ^ (1ull << 63));
	size_t kl = (size_t)load_be(p + 8, 2);
	if (kl > len - 10)
		return -1;
	*key = (struct slice){p + 10, kl};
	*ck = (struct slice){p + 10 + kl, len - 10 - kl};
	return ck->len ? 0 : -1;
}

int sai_index_ident(const struct storage_table_meta *t,
		    const struct storage_index *ix, char *out, size_t cap)
{
	/* "f0": no analysis; "a<bits>" (STORAGE_SAI_*): analysed; the "f1" of
	 * components written before the analyzer (ASCII case folding only)
	 * is another identity, so they are built again; " r1": keys carry
	 * the row (sai_index_rows), so components of partition keys only
	 * (written before rows were indexed) are built again */
	const char *rows = t && sai_index_rows(t, ix) ? " r1" : "";
	int n = ix->analyzer ? snprintf(out, cap, "c%u t%u a%u%s", ix->column,
					ix->target, ix->analyzer, rows)
			     : snprintf(out, cap, "c%u t%u f0%s", ix->column,
					ix->target, rows);
	return n < 0 || (size_t)n >= cap ? -1 : n;
}
