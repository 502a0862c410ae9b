/*
 * Composite values (collections, tuples, UDTs, vectors) and durations:
 * validation, Cassandra's comparators, canonical forms, vints.
 * (Formats and orders in types.h.)
 */
#include "storage/types.h"

#include "common/buf.h"
#include "common/err.h"

#include <stdlib.h>
#include <string.h>

/* ---- vints ------------------------------------------------------------- */

size_t storage_uvint_read(const uint8_t *p, size_t len, uint64_t *out)
{
	if (len == 0)
		return 0;
	uint8_t first = p[0];
	size_t extra = 0;
	while (extra < 8 && (first & (0x80 >> extra)))
		extra++;
	if (len < extra + 1)
		return 0;
	uint64_t v = extra == 8 ? 0 : (uint64_t)(first & (0xff >> extra));
	for (size_t i = 0; i < extra; i++)
		v = v << 8 | p[1 + i];
	*out = v;
	return extra + 1;
}

size_t storage_vint_read(const uint8_t *p, size_t len, int64_t *out)
{
	uint64_t u;
	size_t n = storage_uvint_read(p, len, &u);
	if (n)
		*out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
	return n;
}

int storage_uvint_put(struct buf *out, uint64_t v)
{
	/* e extra bytes carry 7 + 7e bits (the first byte keeps 7 - e) */
	size_t extra = 0;
	while (extra < 8 && v >> (7 + 7 * extra))
		extra++;
	uint8_t b[9];
	for (size_t i = 0; i < extra; i++)
		b[extra - i] = (uint8_t)(v >> (8 * i));
	b[0] = extra == 8 ? 0xff
			  : (uint8_t)((v >> (8 * extra)) |
				      (uint8_t)(0xff00 >> extra));
	return buf_append(out, b, extra + 1);
}

int storage_vint_put(struct buf *out, int64_t v)
{
	return storage_uvint_put(out, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

int storage_duration_decode(const uint8_t *v, size_t len,
			    struct storage_duration *out)
{
	if (storage_type_validate(STORAGE_TYPE_DURATION, v, len) != 0)
		return -1;
	int64_t p[3];
	size_t off = 0;
	for (int i = 0; i < 3; i++)
		off += storage_vint_read(v + off, len - off, &p[i]);
	out->months = (int32_t)p[0];
	out->days = (int32_t)p[1];
	out->nanos = p[2];
	return 0;
}

int storage_duration_encode(const struct storage_duration *d, struct buf *out)
{
	size_t mark = out->len;
	if (storage_vint_put(out, d->months) ||
	    storage_vint_put(out, d->days) || storage_vint_put(out, d->nanos)) {
		out->len = mark;
		return -1;
	}
	return 0;
}

/* ---- framing ----------------------------------------------------------- */

/* One element of a serialized collection or tuple: [int length][bytes]. */
struct cursor4 {
	const uint8_t *p, *end;
};

static int32_t be32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
			 (uint32_t)p[2] << 8 | p[3]);
}

/* 1 with the next element in *e, 0 with a null one (negative length),
 * -1 when the bytes run out. */
static int next4(struct cursor4 *c, const uint8_t **e, size_t *len)
{
	if (c->end - c->p < 4)
		return -1;
	int32_t n = be32(c->p);
	c->p += 4;
	if (n < 0)
		return 0;
	if ((size_t)(c->end - c->p) < (size_t)n)
		return -1;
	*e = c->p;
	*len = (size_t)n;
	c->p += n;
	return 1;
}

static const char *coll_name(uint16_t kind)
{
	return kind == STORAGE_TYPE_LIST  ? "list"
	       : kind == STORAGE_TYPE_SET ? "set"
					  : "map";
}

/* The count of a serialized collection: -1 when shorter than a count,
 * -2 when the count is negative. Sets no error (comparators use it). */
static int64_t coll_count(const uint8_t *v, size_t len, struct cursor4 *c)
{
	if (len < 4)
		return -1;
	int32_t n = be32(v);
	if (n < 0)
		return -2;
	c->p = v + 4;
	c->end = v + len;
	return n;
}

static int64_t coll_open(uint16_t kind, const uint8_t *v, size_t len,
			 struct cursor4 *c)
{
	int64_t n = coll_count(v, len, c);
	if (n == -1)
		return err_set(ERR_INVALID, "Not enough bytes to read a %s",
			       coll_name(kind));
	if (n < 0)
		return err_set(ERR_INVALID,
			       "The data cannot be deserialized as a %s",
			       coll_name(kind));
	return n;
}

/* A vector element: packed when fixed, else [uvint length][bytes]. */
static int vec_next(const struct storage_type *t, size_t fixed,
		    const uint8_t **p, const uint8_t *end, const uint8_t **e,
		    size_t *len)
{
	(void)t;
	size_t left = (size_t)(end - *p);
	if (fixed) {
		if (left < fixed)
			return -1;
		*e = *p;
		*len = fixed;
		*p += fixed;
		return 0;
	}
	uint64_t n;
	size_t h = storage_uvint_read(*p, left, &n);
	if (h == 0 || n > left - h)
		return -1;
	*e = *p + h;
	*len = (size_t)n;
	*p += h + n;
	return 0;
}

/* ---- validation -------------------------------------------------------- */

int storage_elements_validate(const struct storage_type *t, const uint8_t *v,
			      size_t len, bool allow_null)
{
	struct cursor4 c;
	int64_t n = coll_open(t->kind, v, len, &c);
	if (n < 0)
		return -1;
	bool map = t->kind == STORAGE_TYPE_MAP;
	for (int64_t i = 0; i < n; i++) {
		for (int part = 0; part < (map ? 2 : 1); part++) {
			const uint8_t *e = NULL;
			size_t elen = 0;
			int rc = next4(&c, &e, &elen);
			if (rc < 0)
				return err_set(ERR_INVALID,
					       "Not enough bytes to read a %s",
					       coll_name(t->kind));
			if (rc == 0 && !allow_null)
				return err_set(ERR_INVALID,
					       "null is not supported inside "
					       "collections");
			if (rc == 1 &&
			    storage_value_validate(t->sub[part], e, elen) != 0)
				return -1;
		}
	}
	if (c.p != c.end)
		return err_set(ERR_INVALID,
			       "Unexpected extraneous bytes after %s value",
			       coll_name(t->kind));
	return 0;
}

/* Cassandra's TupleSerializer/UserTypeSerializer: fewer components than
 * declared are allowed (fields added later), more are not. */
static int tuple_validate(const struct storage_type *t, const uint8_t *v,
			  size_t len)
{
	bool udt = t->kind == STORAGE_TYPE_UDT;
	struct cursor4 c = {v, v + len};
	for (size_t i = 0; i < t->count && c.p != c.end; i++) {
		if (c.end - c.p < 4)
			return udt ? err_set(ERR_INVALID,
					     "Not enough bytes to read size of "
					     "%zuth field %s",
					     i, t->field_names[i])
				   : err_set(ERR_INVALID,
					     "Not enough bytes to read size of "
					     "%zuth component",
					     i);
		const uint8_t *e = NULL;
		size_t elen = 0;
		int rc = next4(&c, &e, &elen);
		if (rc == 0)
			continue;
		if (rc < 0)
			return udt ? err_set(ERR_INVALID,
					     "Not enough bytes to read %zuth "
					     "field %s",
					     i, t->field_names[i])
				   : err_set(ERR_INVALID,
					     "Not enough bytes to read %zuth "
					     "component",
					     i);
		if (storage_value_validate(t->sub[i], e, elen) != 0)
			return -1;
	}
	if (c.p != c.end)
		return err_set(ERR_INVALID,
			       udt ? "Invalid remaining data after end of UDT "
				     "value"
				   : "Invalid remaining data after end of "
				     "tuple value");
	return 0;
}

static int vector_validate(const struct storage_type *t, const uint8_t *v,
			   size_t len)
{
	if (len == 0)
		return 0;
	size_t fixed = storage_type_fixed_length(t->sub[0]);
	const uint8_t *p = v, *end = v + len;
	for (uint32_t i = 0; i < t->dimension; i++) {
		const uint8_t *e;
		size_t elen;
		if (vec_next(t, fixed, &p, end, &e, &elen) != 0)
			return err_set(ERR_INVALID,
				       "Not enough bytes to read a vector");
		if (storage_value_validate(t->sub[0], e, elen) != 0)
			return -1;
	}
	if (p != end)
		return err_set(
			ERR_INVALID,
			"Unexpected extraneous bytes after vector value");
	return 0;
}

int storage_value_validate(const struct storage_type *t, const uint8_t *v,
			   size_t len)
{
	switch (t->kind) {
	case STORAGE_TYPE_LIST:
	case STORAGE_TYPE_SET:
	case STORAGE_TYPE_MAP:
		return storage_elements_validate(t, v, len, false);
	case STORAGE_TYPE_TUPLE:
	case STORAGE_TYPE_UDT:
		return tuple_validate(t, v, len);
	case STORAGE_TYPE_VECTOR:
		return vector_validate(t, v, len);
	default:
		return storage_type_validate(t->kind, v, len);
	}
}

/* ---- comparators ------------------------------------------------------- */

static int bytes_cmp(const uint8_t *a, size_t alen, const uint8_t *b,
		     size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int c = n ? memcmp(a, b, n) : 0;
	if (c)
		return c < 0 ? -1 : 1;
	return alen < blen ? -1 : alen > blen;
}

/* Cassandra's ListType/SetType/MapType compare for frozen values: an
 * empty value first, then element by element with the element (map: key,
 * then value) comparator, then the shorter first. Malformed values (which
 * validation keeps out) compare as bytes, after the well-formed ones. */
static int collection_cmp(const struct storage_type *t, const uint8_t *a,
			  size_t alen, const uint8_t *b, size_t blen)
{
	struct cursor4 ca, cb;
	int64_t na = coll_count(a, alen, &ca);
	int64_t nb = coll_count(b, blen, &cb);
	if (na < 0 || nb < 0) {
		if ((na < 0) != (nb < 0))
			return na < 0 ? 1 : -1;
		return bytes_cmp(a, alen, b, blen);
	}
	bool map = t->kind == STORAGE_TYPE_MAP;
	for (int64_t i = 0; i < na && i < nb; i++) {
		for (int part = 0; part < (map ? 2 : 1); part++) {
			const uint8_t *ea = NULL, *eb = NULL;
			size_t la = 0, lb = 0;
			if (next4(&ca, &ea, &la) != 1 ||
			    next4(&cb, &eb, &lb) != 1)
				return bytes_cmp(a, alen, b, blen);
			int c = storage_type_cmp(t->sub[part], ea, la, eb, lb);
			if (c)
				return c;
		}
	}
	return na < nb ? -1 : na > nb;
}

/* Whether a non-empty component follows (nulls and empty ones do not
 * count). */
static bool trailing_value(struct cursor4 *c)
{
	while (c->end - c->p >= 4) {
		int32_t n = be32(c->p);
		if (n > 0)
			return true;
		c->p += 4;
	}
	return false;
}

/* Cassandra's TupleType.compareCustom: component by component, a null
 * before a value; then a side with a non-empty trailing component is
 * greater (trailing nulls and missing components compare equal). */
static int tuple_cmp(const struct storage_type *t, const uint8_t *a,
		     size_t alen, const uint8_t *b, size_t blen)
{
	struct cursor4 ca = {a, a + alen}, cb = {b, b + blen};
	for (size_t i = 0; i < t->count && ca.p != ca.end && cb.p != cb.end;
	     i++) {
		const uint8_t *ea = NULL, *eb = NULL;
		size_t la = 0, lb = 0;
		int ra = next4(&ca, &ea, &la), rb = next4(&cb, &eb, &lb);
		if (ra < 0 || rb < 0)
			return bytes_cmp(a, alen, b, blen);
		if (ra == 0 || rb == 0) {
			if (ra == rb)
				continue;
			return ra == 0 ? -1 : 1;
		}
		int c = storage_type_cmp(t->sub[i], ea, la, eb, lb);
		if (c)
			return c;
	}
	bool ta = trailing_value(&ca), tb = trailing_value(&cb);
	if (ta && tb) /* only malformed values have both */
		return bytes_cmp(a, alen, b, blen);
	return ta ? 1 : tb ? -1 : 0;
}

static int vector_cmp(const struct storage_type *t, const uint8_t *a,
		      size_t alen, const uint8_t *b, size_t blen)
{
	size_t fixed = storage_type_fixed_length(t->sub[0]);
	const uint8_t *pa = a, *pb = b;
	for (uint32_t i = 0; i < t->dimension; i++) {
		const uint8_t *ea, *eb;
		size_t la, lb;
		if (vec_next(t, fixed, &pa, a + alen, &ea, &la) != 0 ||
		    vec_next(t, fixed, &pb, b + blen, &eb, &lb) != 0)
			return bytes_cmp(a, alen, b, blen);
		int c = storage_type_cmp(t->sub[0], ea, la, eb, lb);
		if (c)
			return c;
	}
	return 0;
}

int storage_type_cmp(const struct storage_type *t, const uint8_t *a,
		     size_t alen, const uint8_t *b, size_t blen)
{
	switch (t->kind) {
	case STORAGE_TYPE_LIST:
	case STORAGE_TYPE_SET:
	case STORAGE_TYPE_MAP:
	case STORAGE_TYPE_TUPLE:
	case STORAGE_TYPE_UDT:
	case STORAGE_TYPE_VECTOR:
		break;
	default:
		return storage_value_cmp(t->kind, a, alen, b, blen);
	}
	if (alen == 0 || blen == 0)
		return (alen != 0) - (blen != 0);
	if (t->kind == STORAGE_TYPE_TUPLE || t->kind == STORAGE_TYPE_UDT)
		return tuple_cmp(t, a, alen, b, blen);
	if (t->kind == STORAGE_TYPE_VECTOR)
		return vector_cmp(t, a, alen, b, blen);
	return collection_cmp(t, a, alen, b, blen);
}

/* ---- canonical forms --------------------------------------------------- */

static bool needs_norm(const struct storage_type *t)
{
	if (t->kind == STORAGE_TYPE_SET || t->kind == STORAGE_TYPE_MAP)
		return true;
	for (size_t i = 0; i < t->count; i++)
		if (needs_norm(t->sub[i]))
			return true;
	return false;
}

static int put4(struct buf *out, const struct buf *src, size_t off, size_t len)
{
	return buf_put_be32(out, (uint32_t)len) ||
	       buf_append(out, src->data ? src->data + off : NULL, len);
}

struct norm_elem {
	size_t key_off, key_len, val_off, val_len;
	size_t order;
};

struct norm_ctx {
	const struct storage_type *key;
	const uint8_t *base;
};

static int norm_cmp(const void *x, const void *y, void *arg)
{
	const struct norm_elem *a = x, *b = y;
	const struct norm_ctx *c = arg;
	int r = storage_type_cmp(c->key, c->base + a->key_off, a->key_len,
				 c->base + b->key_off, b->key_len);
	if (r)
		return r;
	return a->order < b->order ? -1 : a->order > b->order;
}

static int normalize(const struct storage_type *t, const uint8_t *v, size_t len,
		     struct buf *out);

/* Normalizes each element of a collection into `tmp`, then (sets, maps)
 * sorts them and drops repeats. */
static int collection_normalize(const struct storage_type *t, const uint8_t *v,
				size_t len, struct buf *out)
{
	struct cursor4 c;
	int64_t n = coll_open(t->kind, v, len, &c);
	if (n < 0)
		return -1;
	if ((size_t)n > len / 4)
		return err_set(ERR_INVALID, "Not enough bytes to read a %s",
			       coll_name(t->kind));
	bool map = t->kind == STORAGE_TYPE_MAP;
	struct norm_elem *e = malloc(((size_t)n + 1) * sizeof(*e));
	struct buf tmp;
	buf_init(&tmp);
	if (!e)
		return err_set(ERR_NOMEM, "out of memory");
	int rc = 0;
	for (int64_t i = 0; rc == 0 && i < n; i++) {
		e[i].order = (size_t)i;
		e[i].val_off = e[i].val_len = 0;
		for (int part = 0; rc == 0 && part < (map ? 2 : 1); part++) {
			const uint8_t *p = NULL;
			size_t plen = 0;
			if (next4(&c, &p, &plen) != 1) {
				rc = err_set(ERR_INVALID,
					     "Not enough bytes to read a %s",
					     coll_name(t->kind));
				break;
			}
			size_t off = tmp.len;
			rc = normalize(t->sub[part], p, plen, &tmp);
			if (part) {
				e[i].val_off = off;
				e[i].val_len = tmp.len - off;
			} else {
				e[i].key_off = off;
				e[i].key_len = tmp.len - off;
			}
		}
	}
	size_t kept = (size_t)n;
	const uint8_t *base = tmp.data ? tmp.data : (const uint8_t *)"";
	if (rc == 0 && t->kind != STORAGE_TYPE_LIST) {
		struct norm_ctx ctx = {t->sub[0], base};
		qsort_r(e, (size_t)n, sizeof(*e), norm_cmp, &ctx);
		/* Equal elements: a set keeps the first, a map the first key
		 * with the last value (Java's LinkedHashSet/TreeSet and
		 * TreeMap.put, as Sets.Value and Maps.Value.fromSerialized
		 * build them). */
		kept = 0;
		for (size_t i = 0; i < (size_t)n; i++) {
			if (kept && storage_type_cmp(t->sub[0],
						     base + e[kept - 1].key_off,
						     e[kept - 1].key_len,
						     base + e[i].key_off,
						     e[i].key_len) == 0) {
				e[kept - 1].val_off = e[i].val_off;
				e[kept - 1].val_len = e[i].val_len;
				continue;
			}
			e[kept++] = e[i];
		}
	}
	size_t mark = out->len;
	if (rc == 0)
		rc = buf_put_be32(out, (uint32_t)kept);
	for (size_t i = 0; rc == 0 && i < kept; i++) {
		rc = put4(out, &tmp, e[i].key_off, e[i].key_len);
		if (rc == 0 && map)
			rc = put4(out, &tmp, e[i].val_off, e[i].val_len);
	}
	if (rc)
		out->len = mark;
	free(e);
	buf_free(&tmp);
	return rc ? -1 : 0;
}

static int tuple_normalize(const struct storage_type *t, const uint8_t *v,
			   size_t len, struct buf *out)
{
	struct cursor4 c = {v, v + len};
	for (size_t i = 0; i < t->count && c.p != c.end; i++) {
		const uint8_t *e = NULL;
		size_t elen = 0;
		int rc = next4(&c, &e, &elen);
		if (rc < 0)
			return err_set(ERR_INVALID,
				       "Not enough bytes to read %zuth "
				       "component",
				       i);
		if (rc == 0) {
			if (buf_put_be32(out, UINT32_MAX))
				return -1;
			continue;
		}
		size_t at = out->len;
		if (buf_put_be32(out, 0) || normalize(t->sub[i], e, elen, out))
			return -1;
		uint32_t n = (uint32_t)(out->len - at - 4);
		out->data[at] = (uint8_t)(n >> 24);
		out->data[at + 1] = (uint8_t)(n >> 16);
		out->data[at + 2] = (uint8_t)(n >> 8);
		out->data[at + 3] = (uint8_t)n;
	}
	if (c.p != c.end)
		return err_set(ERR_INVALID,
			       "Invalid remaining data after end of tuple "
			       "value");
	return 0;
}

static int vector_normalize(const struct storage_type *t, const uint8_t *v,
			    size_t len, struct buf *out)
{
	size_t fixed = storage_type_fixed_length(t->sub[0]);
	if (fixed || len == 0)
		return buf_append(out, v, len);
	const uint8_t *p = v, *end = v + len;
	struct buf el;
	buf_init(&el);
	int rc = 0;
	for (uint32_t i = 0; rc == 0 && i < t->dimension; i++) {
		const uint8_t *e;
		size_t elen;
		buf_clear(&el);
		if (vec_next(t, 0, &p, end, &e, &elen) != 0)
			rc = err_set(ERR_INVALID,
				     "Not enough bytes to read a vector");
		else
			rc = normalize(t->sub[0], e, elen, &el) ||
			     storage_uvint_put(out, el.len) ||
			     buf_append(out, el.data ? el.data : e, el.len);
	}
	buf_free(&el);
	return rc ? -1 : 0;
}

static int normalize(const struct storage_type *t, const uint8_t *v, size_t len,
		     struct buf *out)
{
	if (!needs_norm(t) ||
	    (len == 0 && !storage_type_is_collection(t->kind)))
		return buf_append(out, v, len);
	switch (t->kind) {
	case STORAGE_TYPE_LIST:
	case STORAGE_TYPE_SET:
	case STORAGE_TYPE_MAP:
		return collection_normalize(t, v, len, out);
	case STORAGE_TYPE_TUPLE:
	case STORAGE_TYPE_UDT:
		return tuple_normalize(t, v, len, out);
	case STORAGE_TYPE_VECTOR:
		return vector_normalize(t, v, len, out);
	default:
		return buf_append(out, v, len);
	}
}

int storage_value_normalize(const struct storage_type *t, const uint8_t *v,
			    size_t len, struct buf *out)
{
	size_t mark = out->len;
	if (normalize(t, v, len, out) != 0) {
		out->len = mark;
		return -1;
	}
	return 0;
}
