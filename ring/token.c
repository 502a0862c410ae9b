/*
 * Range arithmetic on the token circle (see token.h).
 *
 * Set operations work on a linear view of the circle: point t sits at
 * v(t) = (t - (MIN + 1)) mod 2^64, so MIN + 1 is at 0 and MIN itself at
 * 2^64 - 1. In that view every range becomes one or two inclusive intervals
 * [a, b], and turning an interval back into a range gives exactly Cassandra's
 * normalized forms: [0, b] is (MIN, b], [a, 2^64-1] is (l, MIN], the whole
 * line is (MIN, MIN].
 */
#include "ring/token.h"

#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SIGN 0x8000000000000000ULL

static inline uint64_t tok_v(int64_t t)
{
	return ((uint64_t)t ^ SIGN) - 1;
}

static inline int64_t v_tok(uint64_t v)
{
	return (int64_t)((v + 1) ^ SIGN);
}

void token_range_list_free(struct token_range_list *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

void token_range_list_clear(struct token_range_list *l)
{
	l->n = 0;
}

int token_range_list_push(struct token_range_list *l, struct token_range r)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		struct token_range *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "token range list");
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = r;
	return 0;
}

bool token_range_is_full(struct token_range r)
{
	return r.left == r.right;
}

bool token_range_contains(struct token_range r, int64_t t)
{
	if (r.left == r.right)
		return true;
	uint64_t d = (uint64_t)r.right - (uint64_t)r.left;
	uint64_t o = (uint64_t)t - (uint64_t)r.left;
	return o >= 1 && o <= d;
}

bool token_range_is_wrapping(struct token_range r)
{
	return r.left >= r.right && r.right != RING_TOKEN_MIN;
}

uint64_t token_range_width(struct token_range r, bool *full)
{
	uint64_t d = (uint64_t)r.right - (uint64_t)r.left;
	if (full)
		*full = d == 0;
	return d;
}

double token_range_fraction(struct token_range r)
{
	bool full;
	uint64_t d = token_range_width(r, &full);
	return full ? 1.0 : (double)d / 18446744073709551616.0;
}

int token_range_split(struct token_range r, size_t n,
		      struct token_range_list *out)
{
	if (n == 0)
		return err_set(ERR_INVALID,
			       "cannot split a range into 0 parts");
	bool full;
	uint64_t d = token_range_width(r, &full);
	unsigned __int128 w = full ? ((unsigned __int128)1 << 64) : d;
	if ((unsigned __int128)n > w)
		n = (size_t)w;
	uint64_t q = (uint64_t)(w / n);
	uint64_t rem = (uint64_t)(w % n);
	size_t before = out->n;
	uint64_t at = (uint64_t)r.left;
	for (size_t i = 0; i < n; i++) {
		uint64_t next = at + q + (i < rem ? 1 : 0);
		if (i == n - 1)
			next = (uint64_t)r.right;
		if (token_range_list_push(
			    out,
			    token_range_make((int64_t)at, (int64_t)next))) {
			out->n = before;
			return -1;
		}
		at = next;
	}
	return 0;
}

int token_range_split_by_partitions(struct token_range r,
				    uint64_t estimated_partitions,
				    uint64_t per_split, size_t max_splits,
				    struct token_range_list *out)
{
	if (per_split == 0 || max_splits == 0)
		return err_set(ERR_INVALID,
			       "per_split and max_splits must be positive");
	uint64_t n = estimated_partitions / per_split +
		     (estimated_partitions % per_split ? 1 : 0);
	if (n < 1)
		n = 1;
	if (n > max_splits)
		n = max_splits;
	return token_range_split(r, (size_t)n, out);
}

/* ---- linear intervals ---------------------------------------------------- */

struct ival {
	uint64_t a, b; /* inclusive */
};

struct ivals {
	struct ival *v;
	size_t n, cap;
};

static int ivals_push(struct ivals *s, uint64_t a, uint64_t b)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		struct ival *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "token intervals");
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = (struct ival){a, b};
	return 0;
}

static int ival_cmp(const void *x, const void *y)
{
	const struct ival *p = x, *q = y;
	if (p->a != q->a)
		return p->a < q->a ? -1 : 1;
	return p->b < q->b ? -1 : p->b > q->b;
}

/* Sorted, merged intervals of a list of ranges. */
static int ivals_from(const struct token_range_list *l, struct ivals *s)
{
	for (size_t i = 0; i < l->n; i++) {
		struct token_range r = l->v[i];
		if (r.left == r.right) {
			if (ivals_push(s, 0, UINT64_MAX))
				return -1;
			continue;
		}
		uint64_t a = tok_v(r.left) + 1, b = tok_v(r.right);
		if (a <= b) {
			if (ivals_push(s, a, b))
				return -1;
		} else if (ivals_push(s, a, UINT64_MAX) ||
			   ivals_push(s, 0, b)) {
			return -1;
		}
	}
	if (s->n > 1)
		qsort(s->v, s->n, sizeof(*s->v), ival_cmp);
	size_t w = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (w > 0 && (s->v[w - 1].b == UINT64_MAX ||
			      s->v[i].a <= s->v[w - 1].b + 1)) {
			if (s->v[i].b > s->v[w - 1].b)
				s->v[w - 1].b = s->v[i].b;
		} else {
			s->v[w++] = s->v[i];
		}
	}
	s->n = w;
	return 0;
}

static int ivals_to(const struct ivals *s, struct token_range_list *out)
{
	token_range_list_clear(out);
	for (size_t i = 0; i < s->n; i++)
		if (token_range_list_push(out,
					  token_range_make(v_tok(s->v[i].a - 1),
							   v_tok(s->v[i].b))))
			return -1;
	return 0;
}

int token_ranges_normalize(struct token_range_list *l)
{
	struct ivals s = {0};
	struct token_range_list tmp = {0};
	int rc = -1;
	if (ivals_from(l, &s) == 0 && ivals_to(&s, &tmp) == 0) {
		token_range_list_free(l);
		*l = tmp;
		tmp = (struct token_range_list){0};
		rc = 0;
	}
	token_range_list_free(&tmp);
	free(s.v);
	return rc;
}

int token_ranges_intersect(const struct token_range_list *a,
			   const struct token_range_list *b,
			   struct token_range_list *out)
{
	struct ivals x = {0}, y = {0}, z = {0};
	int rc = -1;
	if (ivals_from(a, &x) || ivals_from(b, &y))
		goto done;
	size_t i = 0, j = 0;
	while (i < x.n && j < y.n) {
		uint64_t lo = x.v[i].a > y.v[j].a ? x.v[i].a : y.v[j].a;
		uint64_t hi = x.v[i].b < y.v[j].b ? x.v[i].b : y.v[j].b;
		if (lo <= hi && ivals_push(&z, lo, hi))
			goto done;
		if (x.v[i].b < y.v[j].b)
			i++;
		else
			j++;
	}
	rc = ivals_to(&z, out);
done:
	free(x.v);
	free(y.v);
	free(z.v);
	return rc;
}

int token_ranges_subtract(const struct token_range_list *a,
			  const struct token_range_list *b,
			  struct token_range_list *out)
{
	struct ivals x = {0}, y = {0}, z = {0};
	int rc = -1;
	if (ivals_from(a, &x) || ivals_from(b, &y))
		goto done;
	size_t j = 0;
	for (size_t i = 0; i < x.n; i++) {
		uint64_t lo = x.v[i].a, hi = x.v[i].b;
		bool open = true; /* [lo, hi] still has points */
		while (j < y.n && y.v[j].b < lo)
			j++;
		for (size_t k = j; open && k < y.n && y.v[k].a <= hi; k++) {
			if (y.v[k].a > lo && ivals_push(&z, lo, y.v[k].a - 1))
				goto done;
			if (y.v[k].b >= hi)
				open = false;
			else
				lo = y.v[k].b + 1;
		}
		if (open && ivals_push(&z, lo, hi))
			goto done;
	}
	rc = ivals_to(&z, out);
done:
	free(x.v);
	free(y.v);
	free(z.v);
	return rc;
}

double token_ranges_fraction(const struct token_range_list *l)
{
	double f = 0;
	for (size_t i = 0; i < l->n; i++)
		f += token_range_fraction(l->v[i]);
	return f;
}

int token_parse(const char *text, size_t len, int64_t *out)
{
	size_t i = 0;
	bool neg = false;
	uint64_t v = 0;
	if (len > 0 && text[0] == '-') {
		neg = true;
		i = 1;
	}
	if (i == len)
		return err_set(ERR_INVALID, "empty token");
	for (; i < len; i++) {
		char c = text[i];
		if (c < '0' || c > '9')
			return err_set(ERR_INVALID,
				       "token '%.*s' is not a number",
				       (int)(len > 64 ? 64 : len), text);
		unsigned d = (unsigned)(c - '0');
		if (v > (UINT64_MAX - d) / 10)
			goto range;
		v = v * 10 + d;
	}
	if (neg ? v > SIGN : v > SIGN - 1)
		goto range;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
range:
	return err_set(ERR_INVALID, "token '%.*s' is out of range",
		       (int)(len > 64 ? 64 : len), text);
}
