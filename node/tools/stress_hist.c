/* Log-linear latency histogram; see stress_hist.h. */
#include "node/tools/stress_hist.h"

#include <string.h>

void stress_hist_reset(struct stress_hist *h)
{
	memset(h, 0, sizeof(*h));
}

unsigned stress_hist_bucket(uint64_t v)
{
	if (v < 2 * STRESS_HIST_SUB)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= SUB_BITS + 1 */
	if (e >= STRESS_HIST_MAX_BITS + 1)
		return STRESS_HIST_BUCKETS - 1;
	unsigned shift = e - STRESS_HIST_SUB_BITS;
	unsigned sub = (unsigned)(v >> shift) - STRESS_HIST_SUB;
	return 2 * STRESS_HIST_SUB +
	       (e - STRESS_HIST_SUB_BITS - 1) * STRESS_HIST_SUB + sub;
}

void stress_hist_bucket_range(unsigned b, uint64_t *low, uint64_t *high)
{
	if (b < 2 * STRESS_HIST_SUB) {
		*low = *high = b;
		return;
	}
	unsigned i = b - 2 * STRESS_HIST_SUB;
	unsigned e = i / STRESS_HIST_SUB + STRESS_HIST_SUB_BITS + 1;
	unsigned sub = i % STRESS_HIST_SUB;
	unsigned shift = e - STRESS_HIST_SUB_BITS;
	*low = ((uint64_t)STRESS_HIST_SUB + sub) << shift;
	*high = *low + ((uint64_t)1 << shift) - 1;
}

void stress_hist_record(struct stress_hist *h, uint64_t v)
{
	h->buckets[stress_hist_bucket(v)]++;
	if (h->count == 0 || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->count++;
	h->sum += v;
}

void stress_hist_merge(struct stress_hist *into, const struct stress_hist *from)
{
	if (!from->count)
		return;
	if (into->count == 0 || from->min < into->min)
		into->min = from->min;
	if (from->max > into->max)
		into->max = from->max;
	into->count += from->count;
	into->sum += from->sum;
	for (unsigned i = 0; i < STRESS_HIST_BUCKETS; i++)
		into->buckets[i] += from->buckets[i];
}

uint64_t stress_hist_quantile(const struct stress_hist *h, double q)
{
	if (!h->count)
		return 0;
	if (q <= 0)
		return h->min;
	if (q >= 1)
		return h->max;
	/* The rank-th smallest value, rank in 1..count. */
	uint64_t rank = (uint64_t)(q * (double)h->count);
	if ((double)rank < q * (double)h->count)
		rank++;
	if (rank == 0)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned b = 0; b < STRESS_HIST_BUCKETS; b++) {
		seen += h->buckets[b];
		if (seen >= rank) {
			uint64_t lo, hi;
			stress_hist_bucket_range(b, &lo, &hi);
			uint64_t mid = lo + (hi - lo) / 2;
			if (mid > h->max)
				mid = h->max;
			if (mid < h->min)
				mid = h->min;
			return mid;
		}
	}
	return h->max;
}

double stress_hist_mean(const struct stress_hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0.0;
}
