/*
 * Tokens and token ranges on the Murmur3 ring, and the range arithmetic
 * repair and streaming need.
 *
 * A token is an int64_t. The ring is a circle of 2^64 points: after
 * INT64_MAX comes INT64_MIN. INT64_MIN (RING_TOKEN_MIN) is the partitioner's
 * minimum; no key hashes to it (murmur3.h).
 *
 * A range (left, right] holds the points after `left` up to and including
 * `right`, walking clockwise; it wraps past INT64_MAX when left >= right.
 * left == right is the whole ring, as in Cassandra. So:
 *   (MIN, r]   the non-wrapping start of the ring,
 *   (l, MIN]   everything after l, up to the end (MIN itself included),
 *   (x, x]     the full ring; normalized as (MIN, MIN].
 * Normalized lists (token_ranges_normalize) are sorted, non-overlapping,
 * non-adjacent and non-wrapping: each is (l, r] with l < r, or (l, MIN], or
 * the single range (MIN, MIN] for the full ring. Set operations return
 * normalized lists.
 */
#ifndef CASSINI_RING_TOKEN_H
#define CASSINI_RING_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RING_TOKEN_MIN INT64_MIN
#define RING_TOKEN_MAX INT64_MAX

struct token_range {
	int64_t left;  /* exclusive */
	int64_t right; /* inclusive */
};

/* A growable list of ranges. Zero-initialised is a valid empty list; free
 * with token_range_list_free. */
struct token_range_list {
	struct token_range *v;
	size_t n;
	size_t cap;
};

void token_range_list_free(struct token_range_list *l);
void token_range_list_clear(struct token_range_list *l);
/* Returns 0 or -1 (ERR_NOMEM, list unchanged). */
int token_range_list_push(struct token_range_list *l, struct token_range r);

static inline struct token_range token_range_make(int64_t left, int64_t right)
{
	return (struct token_range){left, right};
}

/* Whether `t` lies in (left, right]. */
bool token_range_contains(struct token_range r, int64_t t);
/* Whether the range wraps past INT64_MAX (left >= right, right != MIN). The
 * full ring (x, x] with x != MIN counts as wrapping; (MIN, MIN] does not. */
bool token_range_is_wrapping(struct token_range r);
bool token_range_is_full(struct token_range r);
/* Number of points in the range; the full ring has 2^64 points, reported as
 * 0 with *full set (full may be NULL when the caller cannot care). */
uint64_t token_range_width(struct token_range r, bool *full);
/* Width as a fraction of the ring, in (0, 1]. */
double token_range_fraction(struct token_range r);

/* Splits `r` into `n` contiguous subranges of equal width (the first ones
 * one point wider when n does not divide the width), appended in ring order
 * to `out`. Fewer than n when the range has fewer than n points. n >= 1.
 * Returns 0 or -1 (ERR_INVALID for n == 0, ERR_NOMEM). */
int token_range_split(struct token_range r, size_t n,
		      struct token_range_list *out);

/* Splits `r` so that each piece holds about `per_split` of the range's
 * `estimated_partitions` (assumed uniform over the range, as Murmur3 makes
 * them): ceil(estimated / per_split) equal pieces, at least 1 and at most
 * `max_splits`. Returns 0 or -1 (ERR_INVALID when per_split or max_splits is
 * 0, ERR_NOMEM). */
int token_range_split_by_partitions(struct token_range r,
				    uint64_t estimated_partitions,
				    uint64_t per_split, size_t max_splits,
				    struct token_range_list *out);

/* Replaces `l` with its normalized form (see above). 0 or -1 (ERR_NOMEM, l
 * unchanged). */
int token_ranges_normalize(struct token_range_list *l);

/* out = a ∩ b, normalized (out is cleared first; it must not alias a or b).
 * a and b need not be normalized. 0 or -1 (ERR_NOMEM). */
int token_ranges_intersect(const struct token_range_list *a,
			   const struct token_range_list *b,
			   struct token_range_list *out);
/* out = a \ b, normalized; same rules as token_ranges_intersect. */
int token_ranges_subtract(const struct token_range_list *a,
			  const struct token_range_list *b,
			  struct token_range_list *out);
/* Total number of points of a normalized list, as a fraction of the ring. */
double token_ranges_fraction(const struct token_range_list *l);

/* Parses a decimal token ("-9223372036854775808" .. "9223372036854775807",
 * optional leading '-', no spaces). 0 or -1 (ERR_INVALID). */
int token_parse(const char *text, size_t len, int64_t *out);

#endif
