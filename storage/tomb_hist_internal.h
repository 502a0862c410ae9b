/*
 * The droppable-tombstone histogram of an SSTable: how many tombstones
 * (and expiring cells, which become tombstones) reach their local deletion
 * time by when. A streaming histogram (Ben-Haim & Tom-Tov, as Cassandra's
 * StreamingTombstoneHistogramBuilder) of at most TOMB_HIST_BINS bins:
 * points are rounded up to TOMB_HIST_ROUND seconds, and once a new point
 * would make one bin too many, the two closest neighbouring bins merge
 * into their weighted mean. So the size is bounded whatever the SSTable
 * holds, and estimates err late (rounding up) rather than early.
 *
 * Serialised in Statistics.db version 2 (docs/sstable-format.md).
 */
#ifndef CASSINI_STORAGE_TOMB_HIST_INTERNAL_H
#define CASSINI_STORAGE_TOMB_HIST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define TOMB_HIST_BINS  100
#define TOMB_HIST_ROUND 60

struct tomb_hist {
	size_t count;                   /* bins in use */
	int64_t point[TOMB_HIST_BINS];  /* seconds, strictly ascending */
	uint64_t value[TOMB_HIST_BINS]; /* tombstones at that point */
};

/* Adds `n` tombstones reaching their deletion time at `ldt` (seconds). */
void storage_tomb_hist_add(struct tomb_hist *h, int64_t ldt, uint64_t n);
/* Adds every bin of `src` (merging histograms of compaction inputs). */
void storage_tomb_hist_merge(struct tomb_hist *h, const struct tomb_hist *src);
/* Estimated number of tombstones whose point is <= `before`. */
double storage_tomb_hist_sum(const struct tomb_hist *h, int64_t before);
/* Total count. */
uint64_t storage_tomb_hist_total(const struct tomb_hist *h);

#endif
