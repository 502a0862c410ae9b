/*
 * A latency histogram in fixed memory, HDR-style log-linear buckets.
 *
 * Values (nanoseconds) below 2 * STRESS_HIST_SUB are counted exactly; above,
 * each power of two is split into STRESS_HIST_SUB equal buckets, so a
 * recorded value is known within 1/STRESS_HIST_SUB (1.6 %) of itself.
 * Values above 2^STRESS_HIST_MAX_BITS ns (18 minutes) land in the last
 * bucket; the exact maximum is kept aside. Percentiles report the middle of
 * the bucket, capped by the maximum. No allocation, no error paths.
 */
#ifndef CASSINI_NODE_STRESS_HIST_H
#define CASSINI_NODE_STRESS_HIST_H

#include <stdint.h>

#define STRESS_HIST_SUB_BITS 6
#define STRESS_HIST_SUB      (1u << STRESS_HIST_SUB_BITS)
#define STRESS_HIST_MAX_BITS 40
#define STRESS_HIST_BUCKETS                                                    \
	(2 * STRESS_HIST_SUB +                                                 \
	 (STRESS_HIST_MAX_BITS - STRESS_HIST_SUB_BITS) * STRESS_HIST_SUB)

struct stress_hist {
	uint64_t count;
	uint64_t sum;
	uint64_t min;
	uint64_t max;
	uint64_t buckets[STRESS_HIST_BUCKETS];
};

void stress_hist_reset(struct stress_hist *h);
void stress_hist_record(struct stress_hist *h, uint64_t value);
/* Adds every count of `from` to `into`. */
void stress_hist_merge(struct stress_hist *into,
		       const struct stress_hist *from);
/* The value at quantile q in [0, 1] (0 for an empty histogram). */
uint64_t stress_hist_quantile(const struct stress_hist *h, double q);
double stress_hist_mean(const struct stress_hist *h);

/* Bucket index of a value, and the [low, high] values of a bucket (for
 * tests). */
unsigned stress_hist_bucket(uint64_t value);
void stress_hist_bucket_range(unsigned bucket, uint64_t *low, uint64_t *high);

#endif
