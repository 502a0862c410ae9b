#include "common/buf.h"

#include "common/err.h"

#include <stdlib.h>

int slice_cmp(struct slice a, struct slice b)
{
	size_t n = a.len < b.len ? a.len : b.len;
	int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
	if (c != 0)
		return c;
	return a.len < b.len ? -1 : a.len > b.len;
}

bool slice_eq(struct slice a, struct slice b)
{
	return a.len == b.len &&
	       (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

void buf_init(struct buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void buf_free(struct buf *b)
{
	free(b->data);
	buf_init(b);
}

void buf_clear(struct buf *b)
{
	b->len = 0;
}

int buf_grow(struct buf *b, size_t extra)
{
	if (extra <= b->cap - b->len)
		return 0;
	if (extra > SIZE_MAX / 2 - b->len)
		return err_set(ERR_NOMEM, "buffer size overflow");
	size_t need = b->len + extra;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	uint8_t *p = realloc(b->data, cap);
	if (!p)
		return err_set(ERR_NOMEM, "cannot grow buffer to %zu bytes",
			       cap);
	b->data = p;
	b->cap = cap;
	return 0;
}

int buf_put_be16(struct buf *b, uint16_t v)
{
	uint8_t *p = buf_extend(b, 2);
	if (!p)
		return -1;
	be16_store(p, v);
	return 0;
}

int buf_put_be32(struct buf *b, uint32_t v)
{
	uint8_t *p = buf_extend(b, 4);
	if (!p)
		return -1;
	be32_store(p, v);
	return 0;
}

int buf_put_be64(struct buf *b, uint64_t v)
{
	uint8_t *p = buf_extend(b, 8);
	if (!p)
		return -1;
	be64_store(p, v);
	return 0;
}

uint8_t *buf_steal(struct buf *b, size_t *len)
{
	uint8_t *p = b->data;
	if (len)
		*len = b->len;
	buf_init(b);
	return p;
}

int cursor_u8(struct cursor *c, uint8_t *out)
{
	if (cursor_left(c) < 1)
		return -1;
	*out = *c->pos++;
	return 0;
}

int cursor_be16(struct cursor *c, uint16_t *out)
{
	if (cursor_left(c) < 2)
		return -1;
	*out = be16_load(c->pos);
	c->pos += 2;
	return 0;
}

int cursor_be32(struct cursor *c, uint32_t *out)
{
	if (cursor_left(c) < 4)
		return -1;
	*out = be32_load(c->pos);
	c->pos += 4;
	return 0;
}

int cursor_be64(struct cursor *c, uint64_t *out)
{
	if (cursor_left(c) < 8)
		return -1;
	*out = be64_load(c->pos);
	c->pos += 8;
	return 0;
}

int cursor_take(struct cursor *c, size_t n, struct slice *out)
{
	if (cursor_left(c) < n)
		return -1;
	*out = slice_make(c->pos, n);
	c->pos += n;
	return 0;
}

int cursor_copy(struct cursor *c, void *dst, size_t n)
{
	if (cursor_left(c) < n)
		return -1;
	if (n)
		memcpy(dst, c->pos, n);
	c->pos += n;
	return 0;
}

int cursor_skip(struct cursor *c, size_t n)
{
	if (cursor_left(c) < n)
		return -1;
	c->pos += n;
	return 0;
}

int cursor_uvarint(struct cursor *c, uint64_t *out)
{
	uint64_t v = 0;
	const uint8_t *p = c->pos;
	for (unsigned shift = 0; shift < 70; shift += 7) {
		if (p >= c->end)
			return -1;
		uint8_t byte = *p++;
		if (shift == 63 && byte > 1)
			return -1; /* overflows 64 bits */
		v |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80)) {
			c->pos = p;
			*out = v;
			return 0;
		}
	}
	return -1;
}
