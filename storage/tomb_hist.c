/* The streaming droppable-tombstone histogram (tomb_hist_internal.h). */
#include "storage/tomb_hist_internal.h"

#include <string.h>

static int64_t round_up(int64_t t)
{
	int64_t r = t % TOMB_HIST_ROUND;
	if (r == 0)
		return t;
	if (t > INT64_MAX - TOMB_HIST_ROUND)
		return t;
	return r > 0 ? t + (TOMB_HIST_ROUND - r) : t - r;
}

/* Merges the two closest neighbouring bins (the earliest pair on a tie). */
static void merge_closest(struct tomb_hist *h)
{
	size_t best = 0;
	uint64_t gap = UINT64_MAX;
	for (size_t i = 0; i + 1 < h->count; i++) {
		uint64_t d = (uint64_t)h->point[i + 1] - (uint64_t)h->point[i];
		if (d < gap) {
			gap = d;
			best = i;
		}
	}
	double v1 = (double)h->value[best], v2 = (double)h->value[best + 1];
	double p = ((double)h->point[best] * v1 +
		    (double)h->point[best + 1] * v2) /
		   (v1 + v2);
	int64_t np = (int64_t)p;
	if ((double)np < p)
		np++; /* round up: never earlier than the data */
	if (np > h->point[best + 1])
		np = h->point[best + 1];
	h->point[best] = np;
	h->value[best] += h->value[best + 1];
	memmove(&h->point[best + 1], &h->point[best + 2],
		(h->count - best - 2) * sizeof(h->point[0]));
	memmove(&h->value[best + 1], &h->value[best + 2],
		(h->count - best - 2) * sizeof(h->value[0]));
	h->count--;
}

void storage_tomb_hist_add(struct tomb_hist *h, int64_t ldt, uint64_t n)
{
	if (n == 0)
		return;
	int64_t p = round_up(ldt);
	size_t lo = 0, hi = h->count;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (h->point[mid] < p)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < h->count && h->point[lo] == p) {
		h->value[lo] += n;
		return;
	}
	if (h->count == TOMB_HIST_BINS) {
		/* make room first; the new point's place may move */
		merge_closest(h);
		storage_tomb_hist_add(h, ldt, n);
		return;
	}
	memmove(&h->point[lo + 1], &h->point[lo],
		(h->count - lo) * sizeof(h->point[0]));
	memmove(&h->value[lo + 1], &h->value[lo],
		(h->count - lo) * sizeof(h->value[0]));
	h->point[lo] = p;
	h->value[lo] = n;
	h->count++;
}

void storage_tomb_hist_merge(struct tomb_hist *h, const struct tomb_hist *src)
{
	for (size_t i = 0; i < src->count; i++)
		storage_tomb_hist_add(h, src->point[i], src->value[i]);
}

double storage_tomb_hist_sum(const struct tomb_hist *h, int64_t before)
{
	double sum = 0;
	for (size_t i = 0; i < h->count; i++) {
		if (h->point[i] <= before) {
			sum += (double)h->value[i];
			continue;
		}
		if (i == 0)
			return 0;
		/* trapezoid between bin i-1 (counted whole above) and bin i */
		double pp = (double)h->point[i - 1],
		       pv = (double)h->value[i - 1];
		double w = ((double)before - pp) / ((double)h->point[i] - pp);
		double mb = pv + ((double)h->value[i] - pv) * w;
		sum -= pv;
		sum += (pv + mb) * w / 2;
		sum += pv / 2;
		return sum;
	}
	return sum;
}

uint64_t storage_tomb_hist_total(const struct tomb_hist *h)
{
	uint64_t n = 0;
	for (size_t i = 0; i < h->count; i++)
		n += h->value[i];
	return n;
}
