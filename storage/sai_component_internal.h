/*
 * What the SAI component's writer (sai_build.c) and reader
 * (sai_component.c) share: the format's version and footer size, the
 * (term, key) order, a growing output buffer and little-endian integers.
 * The layout itself is described at the top of sai_component.c.
 */
#ifndef CASSINI_STORAGE_SAI_COMPONENT_INTERNAL_H
#define CASSINI_STORAGE_SAI_COMPONENT_INTERNAL_H

#include "storage/sai_component.h"

#include <stdlib.h>
#include <string.h>

#define SAI_VERSION 3u
#define SAI_FOOTER  16u

static inline int bytes_cmp(const uint8_t *a, uint32_t al, const uint8_t *b,
			    uint32_t bl)
{
	uint32_t m = al < bl ? al : bl;
	int c = m ? memcmp(a, b, m) : 0;
	if (c)
		return c;
	return al < bl ? -1 : al > bl ? 1 : 0;
}

static inline int entry_cmp(const void *x, const void *y)
{
	const struct sai_entry *a = x, *b = y;
	int c = bytes_cmp(a->term, a->term_len, b->term, b->term_len);
	return c ? c : bytes_cmp(a->key, a->key_len, b->key, b->key_len);
}

/* A growing byte buffer whose failure sticks (err): writers check once. */
struct sai_buf {
	uint8_t *p;
	size_t n, cap;
	int err;
};

static inline void put(struct sai_buf *b, const void *d, size_t n)
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

static inline void put32(struct sai_buf *b, uint32_t v)
{
	uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
			(uint8_t)(v >> 24)};
	put(b, x, 4);
}

static inline void put64(struct sai_buf *b, uint64_t v)
{
	put32(b, (uint32_t)v);
	put32(b, (uint32_t)(v >> 32));
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static inline void set32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

#endif
