/*
 * Byte slices, growable buffers and bounds-checked big-endian codecs.
 *
 * Writing: a `struct buf` grows as needed; every append either succeeds
 * whole or fails with ERR_NOMEM and leaves the buffer as it was.
 *
 * Reading untrusted bytes: a `struct cursor` walks [pos, end). Every read
 * checks what remains first and fails (returning -1, consuming nothing)
 * rather than reading past the end. Cursor reads do not touch the error slot
 * on the hot path; callers that fail report the framing error themselves.
 */
#ifndef CASSINI_COMMON_BUF_H
#define CASSINI_COMMON_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A borrowed view of bytes; never owns them. */
struct slice {
	const uint8_t *ptr;
	size_t len;
};

static inline struct slice slice_make(const void *ptr, size_t len)
{
	return (struct slice){(const uint8_t *)ptr, len};
}

static inline struct slice slice_from_cstr(const char *s)
{
	return slice_make(s, strlen(s));
}

/* memcmp order, shorter first on a common prefix. */
int slice_cmp(struct slice a, struct slice b);
bool slice_eq(struct slice a, struct slice b);

/* Owned, growable bytes. Zero-initialised is a valid empty buffer. */
struct buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

void buf_init(struct buf *b);
void buf_free(struct buf *b);
void buf_clear(struct buf *b);
/* Ensures room for `extra` more bytes. Returns 0 or -1 (ERR_NOMEM).
 * The appends below are inline; only growing calls out (buf_grow). */
int buf_grow(struct buf *b, size_t extra);
static inline int buf_reserve(struct buf *b, size_t extra)
{
	return extra <= b->cap - b->len ? 0 : buf_grow(b, extra);
}
/* Appends `n` uninitialised bytes and returns a pointer to them, or NULL. */
static inline uint8_t *buf_extend(struct buf *b, size_t n)
{
	/* Even for n == 0 the result must be a real pointer, not NULL + 0. */
	if (buf_reserve(b, n ? n : 1) != 0)
		return NULL;
	uint8_t *p = b->data + b->len;
	b->len += n;
	return p;
}
static inline int buf_append(struct buf *b, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	uint8_t *dst = buf_extend(b, n);
	if (!dst)
		return -1;
	memcpy(dst, p, n);
	return 0;
}
static inline int buf_put_u8(struct buf *b, uint8_t v)
{
	if (buf_reserve(b, 1) != 0)
		return -1;
	b->data[b->len++] = v;
	return 0;
}
int buf_put_be16(struct buf *b, uint16_t v);
int buf_put_be32(struct buf *b, uint32_t v);
int buf_put_be64(struct buf *b, uint64_t v);
/* Unsigned LEB128 (1..10 bytes). */
static inline int buf_put_uvarint(struct buf *b, uint64_t v)
{
	if (buf_reserve(b, 10) != 0)
		return -1;
	uint8_t *p = b->data + b->len;
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	b->len = (size_t)(p - b->data);
	return 0;
}
/* Takes ownership of the bytes: the caller frees them, the buffer is reset. */
uint8_t *buf_steal(struct buf *b, size_t *len);
static inline struct slice buf_slice(const struct buf *b)
{
	return slice_make(b->data, b->len);
}

/* Unchecked loads and stores; the caller has checked the length. */
static inline uint16_t be16_load(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}
static inline uint32_t be32_load(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t be64_load(const uint8_t *p)
{
	return (uint64_t)be32_load(p) << 32 | be32_load(p + 4);
}
static inline void be16_store(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void be32_store(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
static inline void be64_store(uint8_t *p, uint64_t v)
{
	be32_store(p, (uint32_t)(v >> 32));
	be32_store(p + 4, (uint32_t)v);
}

/* A read position over untrusted bytes. */
struct cursor {
	const uint8_t *pos;
	const uint8_t *end;
};

/* An empty buffer may be NULL (e.g. an empty `struct buf`). */
static inline struct cursor cursor_make(const void *p, size_t len)
{
	const uint8_t *b = p;
	return (struct cursor){b, b ? b + len : b};
}
static inline size_t cursor_left(const struct cursor *c)
{
	return (size_t)(c->end - c->pos);
}

int cursor_u8(struct cursor *c, uint8_t *out);
int cursor_be16(struct cursor *c, uint16_t *out);
int cursor_be32(struct cursor *c, uint32_t *out);
int cursor_be64(struct cursor *c, uint64_t *out);
/* Borrows `n` bytes (they stay in the underlying buffer). */
int cursor_take(struct cursor *c, size_t n, struct slice *out);
int cursor_copy(struct cursor *c, void *dst, size_t n);
int cursor_skip(struct cursor *c, size_t n);
/* Unsigned LEB128; rejects encodings longer than 10 bytes or overflowing. */
int cursor_uvarint(struct cursor *c, uint64_t *out);

#endif
