/*
 * The log-linear histogram layout the latency histograms share (the
 * coordinator's, proxyhistograms; the tables', tablehistograms): values
 * below 8 get a bucket each, then 4 buckets per power of two (about 19%
 * wide), LOGHIST_BUCKETS in all, the last holding everything above
 * ~2.1e6. Header-only so a hot path pays one clz and a few shifts.
 */
#ifndef CASSINI_COMMON_LOGHIST_H
#define CASSINI_COMMON_LOGHIST_H

#include <stdint.h>

#define LOGHIST_BUCKETS 80

/* The bucket holding v. */
static inline unsigned loghist_bucket(uint64_t v)
{
	if (v < 8)
		return (unsigned)v;
	unsigned o = 63u - (unsigned)__builtin_clzll(v);
	unsigned b = 8 + (o - 3) * 4 + (unsigned)((v >> (o - 2)) & 3);
	return b < LOGHIST_BUCKETS ? b : LOGHIST_BUCKETS - 1;
}

/* The upper bound of bucket b (its values are <= it). */
static inline uint64_t loghist_upper(unsigned b)
{
	if (b >= LOGHIST_BUCKETS)
		b = LOGHIST_BUCKETS - 1;
	if (b < 8)
		return b;
	unsigned o = (b - 8) / 4 + 3, sub = (b - 8) % 4;
	return ((uint64_t)(4 + sub + 1) << (o - 2)) - 1;
}

#endif
