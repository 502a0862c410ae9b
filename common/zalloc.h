/*
 * Zeroed allocation through malloc's per-thread cache.
 *
 * glibc's calloc always takes the arena path (it never uses the per-thread
 * tcache that malloc and free use), which made the dozen small zeroed
 * structs of every request the largest part of a point read's malloc cost.
 * For small objects made and freed per request use zcalloc; calloc stays
 * right for big or long-lived ones.
 */
#ifndef CASSINI_COMMON_ZALLOC_H
#define CASSINI_COMMON_ZALLOC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* calloc's contract: NULL on overflow or out of memory. */
static inline void *zcalloc(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	void *p = malloc(n * size);
	/* Hides where p came from: compilers otherwise fuse malloc and
	 * memset back into calloc. */
	__asm__("" : "+r"(p));
	if (p)
		memset(p, 0, n * size);
	return p;
}

#endif
