/*
 * Token allocation: random tokens, initial_token parsing, and the
 * replication-aware allocator (allocate_tokens_for_local_replication_factor).
 *
 * The allocator follows the idea of Cassandra's ReplicationAwareTokenAllocator
 * (CASSANDRA-7032) with its own, simpler search. It models only the joining
 * node's DC: that DC's tokens, owners and racks, with NTS placement at RF `rf`
 * in the DC (the same rack-aware walk as placement.c). A node's load is its
 * replicated ownership: the total width of the ranges it replicates.
 * Existing tokens never move.
 *
 *  1. The DC's first node takes num_tokens evenly spaced tokens from a seeded
 *     random offset.
 *  2. While the DC has fewer than `rf` nodes every node replicates everything,
 *     so load is measured at RF = (nodes already in the DC) instead; this
 *     interleaves the first nodes evenly and prepares the ring for later ones.
 *  3. Score (score_of): squared deviations of the loads from the mean (the
 *     joining node's target scaled by its share of tokens placed so far),
 *     plus a small term on (max - min)^2, plus `width_weight` times the sum
 *     of squared range widths. The last term keeps new tokens away from the
 *     edges of their gaps: without it the search balances today's DC with
 *     slivers that leave the next joins (above all the second node of a
 *     rack, which must then replicate nearly every range) no good choice.
 *  4. Exact line search per gap (best_candidate): inside a gap every
 *     replica set stays fixed, so all loads are linear in the position of
 *     the new token; one walk gives the line, which is scanned finely.
 *  5. Greedy placement of the tokens one by one, then passes that lift each
 *     new token out and put it back at its best point until none moves.
 *  6. With more racks than RF, look-ahead (lookahead_penalty): a later
 *     join can only lower a node of another rack by entering ranges that
 *     lack the joiner's rack before that node, its last replica. Passes
 *     move each new token to the quarter point of any gap that lowers
 *     score + 4 x the squared shortfalls of those "knockable" widths
 *     against what each node must shed when a node joins one of the
 *     smallest racks (or a new rack), for the joins that can be balanced.
 *     When the caller knows the next joiner's rack (nodes started
 *     together queue up, ring_tokens_allocate_planned), only that join.
 *  7. Steps 4-6 run for three width weights (0.5, 1, 2); the result with
 *     the lowest max/min - 1 of the loads plus the worst relative
 *     look-ahead shortfall wins.
 *  8. In a tight DC (more racks than RF and a rack that must replicate
 *     every range to be even: 2+2+1+1, 3+2+2+2, 2+1+1+1+1) the search
 *     above stops short of covering every range with that rack. There the
 *     winner is annealed (anneal): seeded random moves of single tokens,
 *     kept when they do not raise max/min - 1 of the loads (over each
 *     rack's fair share) plus the look-ahead shortfall plus the growth of
 *     the squared widths by more than a falling threshold. Only tight
 *     joins: elsewhere the same polish balances today's DC at the next
 *     join's expense.
 *  9. The first node of each rack in a DC of up to rf + 1 racks (every rack
 *     has one node) fixes which of two racks a walk meets first, and a
 *     later 2+2+1+1 layout cannot be even unless every pair takes turns
 *     evenly (rack_turns). Such a join is annealed too, on the larger of
 *     its spread and its rack turns.
 * Ties go to the first candidate in ring order after a seeded start, so a
 * given ring and seed always give the same tokens. Candidate tokens are
 * scored incrementally: only the ranges whose rack walk passes the
 * candidate are walked again (loads_with, eval_with). Cost: 0.1-0.7 s of
 * CPU for a 12-node DC with 16 tokens each, once per bootstrap (the three
 * annealings of a tight join add about 0.75 s). With more tokens the
 * passes and annealing steps shrink in proportion (model_effort).
 */
#include "ring/ring_internal.h"

#include "common/err.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TWO64          18446744073709551616.0
#define REFINE_PASSES  16
#define EXTREME_WEIGHT 0.1
#define ATTEMPTS       3
/* Weights of the sum of squared range widths, one per attempt. */
static const double WIDTH_WEIGHTS[ATTEMPTS] = {0.5, 1.0, 2.0};
#define COARSE_STEPS     32
#define LOOKAHEAD_WEIGHT 4.0
#define LOOKAHEAD_PASSES 20
#define SKIP_FLOOR       0.10
#define FINE_STEPS       16
/* Step 8: iterations, starting acceptance threshold (it falls as the cube
 * of the iterations left), the span of a near move (a share of the ring),
 * the weight of the variance, and a constant mixed into the seed. */
#define ANNEAL_ITERS     30000
#define ANNEAL_THRESHOLD 0.005
#define ANNEAL_NEAR      0.01
#define ANNEAL_VAR       0.5
#define ANNEAL_SEED      0x5a5a
/* A first-round join's annealing lowers the larger of its spread and its
 * rack turns, plus this weight times their sum. */
#define TURNS_SUM 0.1
/* ring_tokens_jitter moves a token by at most this much (2^19 of 2^64). */
#define JITTER (1 << 19)

/* ---- random tokens and initial_token ------------------------------------- */

static bool token_taken(const struct ring *r, const int64_t *out, size_t n,
			int64_t t)
{
	for (size_t i = 0; i < n; i++)
		if (out[i] == t)
			return true;
	if (!r)
		return false;
	for (size_t i = 0; i < r->nep; i++) {
		const struct ring_endpoint *e = &r->eps[i].pub;
		size_t lo = 0, hi = e->num_tokens;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (e->tokens[mid] == t)
				return true;
			if (e->tokens[mid] < t)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	return false;
}

int ring_tokens_random(struct rng *rng, const struct ring *r, size_t n,
		       int64_t *out)
{
	for (size_t i = 0; i < n; i++) {
		int64_t t;
		do
			t = (int64_t)rng_next(rng);
		while (t == RING_TOKEN_MIN || token_taken(r, out, i, t));
		out[i] = t;
	}
	return 0;
}

int ring_tokens_parse_initial(const char *text, int64_t *out, size_t cap,
			      size_t *n)
{
	const char *p = text;
	size_t k = 0;
	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		const char *s = p;
		while (*p && *p != ',')
			p++;
		const char *e = p;
		while (e > s && isspace((unsigned char)e[-1]))
			e--;
		int64_t t;
		size_t len = (size_t)(e - s);
		if (len == 0)
			return err_set(ERR_CONFIG,
				       "initial_token: empty token in '%.64s'",
				       text);
		if (token_parse(s, len, &t))
			return err_set(
				ERR_CONFIG,
				"initial_token: invalid token '%.*s' for "
				"Murmur3Partitioner: expected a long "
				"value",
				(int)(len > 64 ? 64 : len), s);
		for (size_t i = 0; i < k; i++)
			if (out[i] == t)
				return err_set(ERR_CONFIG,
					       "initial_token: token %lld is "
					       "listed twice",
					       (long long)t);
		if (k == cap)
			return err_set(ERR_CONFIG,
				       "initial_token: more than %zu tokens",
				       cap);
		out[k++] = t;
		if (!*p)
			break;
		p++;
	}
	*n = k;
	return 0;
}

/* ---- the DC model -------------------------------------------------------- */

struct model {
	size_t n, cap;
	int64_t *tok;  /* ascending */
	uint32_t *own; /* node ids 0..nodes-1 */
	size_t nodes;
	uint32_t *rack; /* per node, small ids */
	size_t nracks;
	int rf;
	double share; /* of the joining node's tokens placed, in (0, 1] */
	/* scratch */
	uint32_t epoch;
	uint32_t *seen, *skip, *rseen, *skipped;
	double *load, *l1, *l2, *tmp;
	/* The walk of every range (model_base): its replicas (stride want,
	 * UINT32_MAX past the last), how many tokens it looked at, its width.
	 */
	uint32_t *rep, *len;
	double *wid;
	bool base_ok;  /* rep/len/wid describe the model as it is */
	size_t maxlen; /* the longest len[] */
	/* Look-ahead (see lookahead_penalty): knock[x * nodes + i] is the
	 * width of the ranges without rack x whose last replica is node i;
	 * x == nracks stands for a rack not in the DC yet. */
	double *knock, *knock_try, *load_try, *target;
	uint32_t *wrep;      /* one walk's replicas */
	size_t *kr;          /* nodes per rack, the joining node included */
	bool *next_rack;     /* racks a next node is looked ahead for */
	double lookahead;    /* weight of the penalty; 0: off */
	double sqw;          /* sum of squared range widths, from model_loads */
	size_t racks, want;  /* racks in the DC, replicas per range */
	double width_weight; /* of sqw in the score */
	double *fair;        /* per rack: fair load per node now (fair_setup) */
	double sqw0;         /* sqw when the annealing started */
	bool next_stuck; /* a rack a next node may join is above the floor */
	bool turns_on;   /* a first-round join: rack_turns counts */
	/* The rack of the next join when known, else UINT32_MAX. */
	uint32_t planned;
	/* Search effort (model_effort) */
	int refine_passes, lookahead_passes;
	long anneal_iters;
	size_t attempts;
};

static void model_free(struct model *m)
{
	free(m->tok);
	free(m->own);
	free(m->rack);
	free(m->seen);
	free(m->skip);
	free(m->rseen);
	free(m->skipped);
	free(m->rep);
	free(m->knock);
	free(m->knock_try);
	free(m->load_try);
	free(m->target);
	free(m->fair);
	free(m->wrep);
	free(m->kr);
	free(m->next_rack);
	free(m->len);
	free(m->wid);
	free(m->load);
	free(m->l1);
	free(m->l2);
	free(m->tmp);
}

static double width(int64_t a, int64_t b, size_t n)
{
	if (n == 1)
		return 1.0;
	return (double)((uint64_t)b - (uint64_t)a) / TWO64;
}

/* Adds w to dst[] of every replica of the range ending at tok[i]: the NTS
 * walk within the one DC (as placement.c), with m->racks and m->want from
 * model_loads. When `reps` is set, the replicas go there too, and *len gets
 * how many tokens the walk looked at (tok[i] .. tok[i + *len - 1]). */
static void walk_range_rec(struct model *m, size_t i, double w, double *dst,
			   uint32_t *reps, uint32_t *len)
{
	size_t got = 0, nskip = 0, used = 0, k;
	m->epoch++;
	for (k = 0; k < m->n && got < m->want; k++) {
		size_t at = i + k < m->n ? i + k : i + k - m->n;
		uint32_t o = m->own[at], rk = m->rack[o];
		if (m->seen[o] == m->epoch)
			continue;
		if (m->rseen[rk] == m->epoch && used < m->racks) {
			if (m->skip[o] != m->epoch) {
				m->skip[o] = m->epoch;
				m->skipped[nskip++] = o;
			}
			continue;
		}
		m->seen[o] = m->epoch;
		dst[o] += w;
		if (reps)
			reps[got] = o;
		got++;
		if (m->rseen[rk] == m->epoch)
			continue;
		m->rseen[rk] = m->epoch;
		if (++used < m->racks)
			continue;
		for (size_t q = 0; q < nskip && got < m->want; q++) {
			m->seen[m->skipped[q]] = m->epoch;
			dst[m->skipped[q]] += w;
			if (reps)
				reps[got] = m->skipped[q];
			got++;
		}
		nskip = 0;
	}
	if (reps) {
		*len = (uint32_t)k;
		for (; got < m->want; got++)
			reps[got] = UINT32_MAX;
	}
}

static void walk_range(struct model *m, size_t i, double w, double *dst)
{
	walk_range_rec(m, i, w, dst, NULL, NULL);
}

/* Loads of all nodes, and m->sqw. */
static void model_loads(struct model *m)
{
	size_t hosts = 0, racks = 0;
	m->epoch++;
	for (size_t i = 0; i < m->nodes; i++)
		m->load[i] = 0;
	for (size_t i = 0; i < m->n; i++) {
		uint32_t o = m->own[i];
		if (m->seen[o] != m->epoch) {
			m->seen[o] = m->epoch;
			hosts++;
		}
		if (m->rseen[m->rack[o]] != m->epoch) {
			m->rseen[m->rack[o]] = m->epoch;
			racks++;
		}
	}
	m->racks = racks;
	m->want = (size_t)m->rf < hosts ? (size_t)m->rf : hosts;
	m->sqw = 0;
	m->maxlen = 0;
	for (size_t i = 0; i < m->n; i++) {
		double w = width(m->tok[i ? i - 1 : m->n - 1], m->tok[i], m->n);
		m->sqw += w * w;
		m->wid[i] = w;
		walk_range_rec(m, i, w, m->load, m->rep + i * m->want,
			       m->len + i);
		m->maxlen = m->len[i] > m->maxlen ? m->len[i] : m->maxlen;
	}
	m->base_ok = true;
}

/* Sum of squared distances of the loads from the mean. While the joining
 * node (the last one) is still placing tokens, its own target is scaled by
 * the share of its tokens placed so far, so that early tokens go where they
 * relieve the most loaded nodes rather than where they grab the most. */
static double score_of(const struct model *m, const double *load, double sqw)
{
	double sum = 0, var = 0, hi = 0, lo = INFINITY;
	size_t last = m->nodes - 1;
	for (size_t i = 0; i < m->nodes; i++)
		sum += load[i];
	double mean = sum / (double)m->nodes;
	for (size_t i = 0; i < last; i++) {
		var += (load[i] - mean) * (load[i] - mean);
		hi = load[i] > hi ? load[i] : hi;
		lo = load[i] < lo ? load[i] : lo;
	}
	double d = load[last] - mean * m->share;
	if (m->share >= 1.0) {
		hi = load[last] > hi ? load[last] : hi;
		lo = load[last] < lo ? load[last] : lo;
	}
	double spread = last > 0 ? hi - lo : 0;
	return var + d * d + m->width_weight * sqw +
	       EXTREME_WEIGHT * (double)m->nodes * spread * spread;
}

static double model_score(struct model *m)
{
	model_loads(m);
	return score_of(m, m->load, m->sqw);
}

static void model_insert(struct model *m, size_t at, int64_t t, uint32_t o)
{
	memmove(m->tok + at + 1, m->tok + at, (m->n - at) * sizeof(*m->tok));
	memmove(m->own + at + 1, m->own + at, (m->n - at) * sizeof(*m->own));
	m->tok[at] = t;
	m->own[at] = o;
	m->n++;
	m->base_ok = false;
}

static void model_erase(struct model *m, size_t at)
{
	memmove(m->tok + at, m->tok + at + 1,
		(m->n - at - 1) * sizeof(*m->tok));
	memmove(m->own + at, m->own + at + 1,
		(m->n - at - 1) * sizeof(*m->own));
	m->n--;
	m->base_ok = false;
}

/* Builds the model of `dc` from the ring plus a joining node (id nodes-1)
 * on `rack`. LEAVING endpoints are left out: they are going away. */
static int model_make(struct model *m, const struct ring *r, const char *dc,
		      const char *rack, const char *next_rack,
		      size_t extra_tokens)
{
	memset(m, 0, sizeof(*m));
	size_t ne = r->nep + 1;
	uint32_t *node_of = malloc(ne * sizeof(uint32_t));
	const char **rack_names = malloc(ne * sizeof(char *));
	m->rack = malloc(ne * sizeof(uint32_t));
	m->cap = r->ntok + extra_tokens + 1;
	for (size_t i = 0; i < r->nep; i++)
		m->cap += r->eps[i].pub.num_tokens;
	m->tok = malloc(m->cap * sizeof(*m->tok));
	m->own = malloc(m->cap * sizeof(*m->own));
	m->seen = calloc(ne, sizeof(uint32_t));
	m->skip = calloc(ne, sizeof(uint32_t));
	m->rseen = calloc(ne, sizeof(uint32_t));
	m->skipped = malloc(ne * sizeof(uint32_t));
	m->len = malloc(m->cap * sizeof(uint32_t));
	m->wid = malloc(m->cap * sizeof(double));
	m->rep = malloc(m->cap * ne * sizeof(uint32_t));
	m->knock = malloc((ne + 1) * ne * sizeof(double));
	m->knock_try = malloc((ne + 1) * ne * sizeof(double));
	m->load_try = malloc(ne * sizeof(double));
	m->wrep = malloc(ne * sizeof(uint32_t));
	m->kr = calloc(ne + 1, sizeof(*m->kr));
	m->next_rack = calloc(ne + 1, sizeof(bool));
	m->load = malloc(ne * sizeof(double));
	m->l1 = malloc(ne * sizeof(double));
	m->l2 = malloc(ne * sizeof(double));
	m->tmp = malloc(ne * sizeof(double));
	if (!node_of || !rack_names || !m->rack || !m->tok || !m->own ||
	    !m->seen || !m->skip || !m->rseen || !m->skipped || !m->len ||
	    !m->wid || !m->rep || !m->load || !m->l1 || !m->l2 || !m->tmp ||
	    !m->knock || !m->knock_try || !m->load_try || !m->wrep || !m->kr ||
	    !m->next_rack) {
		free(node_of);
		free(rack_names);
		model_free(m);
		return err_set(ERR_NOMEM, "token allocator");
	}
	for (size_t i = 0; i < r->nep; i++) {
		const struct ring_endpoint *e = &r->eps[i].pub;
		node_of[i] = UINT32_MAX;
		if (strcmp(e->dc, dc) != 0 ||
		    e->status == RING_STATUS_LEAVING || e->num_tokens == 0)
			continue;
		node_of[i] = (uint32_t)m->nodes;
		const char *rk = e->rack;
		size_t ri = 0;
		while (ri < m->nracks && strcmp(rack_names[ri], rk) != 0)
			ri++;
		if (ri == m->nracks)
			rack_names[m->nracks++] = rk;
		m->rack[m->nodes++] = (uint32_t)ri;
	}
	size_t ri = 0;
	while (ri < m->nracks && strcmp(rack_names[ri], rack) != 0)
		ri++;
	if (ri == m->nracks)
		rack_names[m->nracks++] = rack;
	m->rack[m->nodes++] = (uint32_t)ri;
	m->planned = UINT32_MAX;
	if (next_rack) {
		ri = 0;
		while (ri < m->nracks && strcmp(rack_names[ri], next_rack) != 0)
			ri++;
		m->planned = (uint32_t)ri; /* nracks: a new rack */
	}
	/* All DC tokens, BOOT ones included (they are about to own). */
	for (size_t i = 0; i < r->nep; i++) {
		if (node_of[i] == UINT32_MAX)
			continue;
		const struct ring_endpoint *e = &r->eps[i].pub;
		for (size_t j = 0; j < e->num_tokens; j++) {
			m->tok[m->n] = e->tokens[j];
			m->own[m->n++] = node_of[i];
		}
	}
	free(node_of);
	free(rack_names);
	/* sort tokens with owners (insertion into a sorted copy) */
	for (size_t i = 1; i < m->n; i++) {
		int64_t t = m->tok[i];
		uint32_t o = m->own[i];
		size_t j = i;
		while (j > 0 && m->tok[j - 1] > t) {
			m->tok[j] = m->tok[j - 1];
			m->own[j] = m->own[j - 1];
			j--;
		}
		m->tok[j] = t;
		m->own[j] = o;
	}
	return 0;
}

static size_t model_lower_bound(const struct model *m, int64_t t)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->tok[mid] < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Does `me` hold a token of the model? */
static bool model_holds(const struct model *m, uint32_t me)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->own[i] == me)
			return true;
	return false;
}

/* Loads of the model with one more token `t` of `me`, copied to `dst`,
 * and in `slope` how they change per unit (of the ring) that t moves up:
 * the range ending at t grows and the next one shrinks. `held`:
 * model_holds(m, me).
 *
 * Incremental: from the walks model_base recorded, only the ranges whose
 * walk passes t change replicas; t's own range and the one it splits change
 * width. A whole new walk is needed only when t is the first token of its
 * rack or node (the rack count or the replica count can change). */
static void loads_with(struct model *m, uint32_t me, bool held, int64_t t,
		       double *dst, double *slope)
{
	size_t n = m->n, at = model_lower_bound(m, t), want = m->want;
	size_t racks = m->racks;
	if (!m->base_ok || !held) {
		model_insert(m, at, t, me);
		model_loads(m);
		memcpy(dst, m->load, m->nodes * sizeof(*dst));
		memset(slope, 0, m->nodes * sizeof(*slope));
		walk_range(m, at, 1.0, slope);
		walk_range(m, at + 1 < m->n ? at + 1 : 0, -1.0, slope);
		model_erase(m, at);
		model_loads(m);
		return;
	}
	memcpy(dst, m->load, m->nodes * sizeof(*dst));
	memset(slope, 0, m->nodes * sizeof(*slope));
	size_t split = at < n ? at : 0; /* the old range t falls in */
	int64_t prev = m->tok[split ? split - 1 : n - 1];
	double u = width(prev, t, 2);
	model_insert(m, at, t, me);
	m->racks = racks;
	/* walks that pass t: the ranges before it, nearest first */
	for (size_t d = 1; d < n && d < m->maxlen; d++) {
		size_t j = split >= d ? split - d : split + n - d;
		if (m->len[j] <= d)
			continue;
		const uint32_t *rp = m->rep + j * want;
		for (size_t q = 0; q < want && rp[q] != UINT32_MAX; q++)
			dst[rp[q]] -= m->wid[j];
		size_t nj = j < at ? j : j + 1;
		walk_range(m, nj, m->wid[j], dst);
	}
	const uint32_t *rs = m->rep + split * want;
	for (size_t q = 0; q < want && rs[q] != UINT32_MAX; q++) {
		dst[rs[q]] -= u;
		slope[rs[q]] -= 1.0;
	}
	walk_range(m, at, u, dst);
	walk_range(m, at, 1.0, slope);
	model_erase(m, at);
	m->base_ok = true;
}

/* Lowest score over the positions x/w of gap (a, a + w), x in [lo, hi],
 * `steps` evenly spaced samples; the loads there are l1 + f (l2 - l1). */
static double gap_scan(struct model *m, double lo, double hi, int steps,
		       double x1, double x2, double wd, double *x_best)
{
	double best = INFINITY;
	for (int s = 0; s <= steps; s++) {
		double x = lo + (hi - lo) * s / steps;
		double f = (x - x1) / (x2 - x1);
		for (size_t q = 0; q < m->nodes; q++)
			m->tmp[q] = m->l1[q] + f * (m->l2[q] - m->l1[q]);
		double u = x / TWO64, v = (wd - x) / TWO64;
		double sc = score_of(m, m->tmp, m->sqw + u * u + v * v);
		if (sc < best) {
			best = sc;
			*x_best = x;
		}
	}
	return best;
}

/* Best point for one more token of node `me` (not a token of the ring or of
 * out[0..nout)); false when no range has room. Inside a gap (a, b] a new
 * token at p changes only the widths of (a, p] and (p, b]: every replica set
 * stays the same, so every load is linear in p. One walk of the model with
 * the token at s1 gives the loads there and their slope (loads_with), and
 * the line is then scanned coarsely and finely. */
static bool best_candidate(struct model *m, uint32_t me, size_t start,
			   const struct ring *r, const int64_t *out,
			   size_t nout, int64_t *best_t, double *best_s)
{
	double best = INFINITY;
	bool found = false;
	size_t n = m->n;
	model_loads(m);
	double base = m->sqw;
	bool held = model_holds(m, me);
	for (size_t k = 0; k < n; k++) {
		size_t i = (start + k) % n;
		int64_t a = m->tok[i ? i - 1 : n - 1], b = m->tok[i];
		uint64_t w = n == 1 ? UINT64_MAX : (uint64_t)b - (uint64_t)a;
		if (w < 8)
			continue;
		uint64_t s1 = w / 4, s2 = w - w / 4;
		loads_with(m, me, held, (int64_t)((uint64_t)a + s1), m->l1,
			   m->l2);
		for (size_t q = 0; q < m->nodes; q++)
			m->l2[q] =
				m->l1[q] + (double)(s2 - s1) / TWO64 * m->l2[q];
		double wd = (double)w, x = wd / 2;
		double wn = wd / TWO64;
		m->sqw = base - wn * wn;
		double cell = wd / (COARSE_STEPS + 1);
		double sc = gap_scan(m, cell, wd - cell, COARSE_STEPS - 1,
				     (double)s1, (double)s2, wd, &x);
		double lo = x - cell > 1 ? x - cell : 1;
		double hi = x + cell < wd - 1 ? x + cell : wd - 1;
		double xf = x;
		double scf = gap_scan(m, lo, hi, FINE_STEPS, (double)s1,
				      (double)s2, wd, &xf);
		if (scf < sc) {
			sc = scf;
			x = xf;
		}
		if (sc >= best - 1e-15)
			continue;
		uint64_t step = (uint64_t)x;
		step = step < 1 ? 1 : step >= w ? w - 1 : step;
		int64_t t = (int64_t)((uint64_t)a + step);
		if (t == RING_TOKEN_MIN || token_taken(r, out, nout, t))
			continue;
		best = sc;
		*best_t = t;
		found = true;
	}
	*best_s = best;
	return found;
}

/* ---- look-ahead ---------------------------------------------------------- */

/* With more racks than RF, a node's load depends on where the other racks'
 * tokens sit, and a later join can only take load from a node of another
 * rack x by entering an x-less range before its last replica (which then
 * drops out). So the next join can lower node i at most by knock[x][i],
 * the width of the x-less ranges whose last replica is i. If i is above
 * its share after that join by more than that, no token choice of the next
 * node balances the DC: greedy joins that ignore this are what leave
 * 15-25% with 4 racks. The penalty sums the squared shortfalls over the
 * racks a next node is likely to join (the smallest ones, or a new rack). */

static void knock_add(const struct model *m, const uint32_t *reps, double w,
		      double *knock)
{
	size_t want = m->want;
	uint32_t last = reps[want - 1];
	if (last == UINT32_MAX)
		return;
	for (size_t x = 0; x <= m->nracks; x++) {
		if (!m->next_rack[x])
			continue;
		bool has = false;
		for (size_t q = 0; q < want && !has; q++)
			has = m->rack[reps[q]] == x;
		if (!has)
			knock[x * m->nodes + last] += w;
	}
}

/* knock[] of the model as it is. REQUIRES: model_loads. */
static void knocks_base(struct model *m)
{
	memset(m->knock, 0, (m->nracks + 1) * m->nodes * sizeof(*m->knock));
	for (size_t i = 0; i < m->n; i++)
		knock_add(m, m->rep + i * m->want, m->wid[i], m->knock);
}

/* Fair load per node of each rack (capped_level), in tg[rack], with one
 * more node on rack x (x > nracks: none). */
double ring_capped_level(const size_t *k, size_t R, int rf)
{
	size_t nodes = 0;
	for (size_t r = 0; r < R; r++)
		nodes += k[r];
	/* Capping a rack raises the others' level, which may cap more: to a
	 * fixed point (a capped rack stays capped). */
	double level = (double)rf / (double)nodes;
	for (size_t capped = 0;;) {
		size_t ncap = 0, capn = 0;
		for (size_t r = 0; r < R; r++)
			if (rack_share(k[r], level) != level) {
				ncap++;
				capn += k[r];
			}
		if (ncap == capped || capn == nodes)
			return level;
		capped = ncap;
		level = (double)(rf - (int)ncap) / (double)(nodes - capn);
	}
}

static void fair_shares(struct model *m, size_t x, double *tg)
{
	size_t R = m->nracks + 1;
	if (x < R)
		m->kr[x]++;
	double level = ring_capped_level(m->kr, R, m->rf);
	for (size_t k = 0; k < R; k++)
		tg[k] = rack_share(m->kr[k], level);
	if (x < R)
		m->kr[x]--;
}

/* Lowest max/min - 1 of the fair shares tg[] over the racks with nodes,
 * with one more node on rack x (x > nracks: none). */
static double shares_floor(const struct model *m, size_t x, const double *tg)
{
	double hi = 0, lo = INFINITY;
	for (size_t k = 0; k <= m->nracks; k++) {
		if (m->kr[k] + (k == x) == 0)
			continue;
		hi = tg[k] > hi ? tg[k] : hi;
		lo = tg[k] < lo ? tg[k] : lo;
	}
	return hi / lo - 1;
}

/* target[x * (nracks + 1) + rack]: fair_shares once a node joins rack x. */
static void lookahead_targets(struct model *m)
{
	size_t R = m->nracks + 1;
	for (size_t x = 0; x < R; x++)
		fair_shares(m, x, m->target + x * R);
}

static double lookahead_penalty(const struct model *m, const double *load,
				const double *knock, double *worst)
{
	size_t R = m->nracks + 1;
	double pen = 0;
	*worst = 0;
	for (size_t x = 0; x < R; x++) {
		if (!m->next_rack[x])
			continue;
		const double *tg = m->target + x * R;
		for (size_t i = 0; i < m->nodes; i++) {
			if (m->rack[i] == x)
				continue;
			double t = tg[m->rack[i]];
			double sh = load[i] - t - knock[x * m->nodes + i];
			if (sh <= 0)
				continue;
			pen += sh * sh;
			*worst = sh / t > *worst ? sh / t : *worst;
		}
	}
	return pen;
}

/* Counts the nodes per rack and sets m->fair, the fair load per node of
 * each rack as the DC will be with the joining node. The rack cap holds
 * only with at least rf racks (below that NTS fills a range from the racks
 * it has already used). 0 or -1 (ERR_NOMEM). */
static int fair_setup(struct model *m)
{
	size_t R = m->nracks + 1;
	m->fair = malloc(R * sizeof(*m->fair));
	if (!m->fair)
		return err_set(ERR_NOMEM, "token allocator");
	for (size_t i = 0; i < m->nodes; i++)
		m->kr[m->rack[i]]++;
	if (m->nracks >= (size_t)m->rf) {
		fair_shares(m, R, m->fair);
	} else {
		for (size_t k = 0; k < R; k++)
			m->fair[k] = m->rf / (double)m->nodes;
	}
	return 0;
}

/* Sets up the look-ahead for a DC with more racks than RF (else leaves it
 * off). REQUIRES: fair_setup. 0 or -1 (ERR_NOMEM). */
static int lookahead_setup(struct model *m, int rf)
{
	m->lookahead = 0;
	if (m->rf != rf || m->nracks <= (size_t)rf)
		return 0;
	size_t R = m->nracks + 1;
	m->target = malloc(R * R * sizeof(*m->target));
	if (!m->target)
		return err_set(ERR_NOMEM, "token allocator");
	size_t least = SIZE_MAX;
	for (size_t k = 0; k < m->nracks; k++)
		least = m->kr[k] < least ? m->kr[k] : least;
	for (size_t k = 0; k <= m->nracks; k++)
		m->next_rack[k] = m->planned == UINT32_MAX
					  ? k == m->nracks || m->kr[k] == least
					  : k == m->planned;
	lookahead_targets(m);
	/* A next join that cannot be balanced anyway (a rack capped below
	 * the others' share by more than 10%) is not prepared for. */
	for (size_t x = 0; x < R; x++)
		if (m->next_rack[x] &&
		    shares_floor(m, x, m->target + x * R) > SKIP_FLOOR) {
			m->next_rack[x] = false;
			m->next_stuck = true;
		}
	m->lookahead = LOOKAHEAD_WEIGHT;
	return 0;
}

/* Loads and knock[] of the model with one more token `t` of `me`, in
 * load_try and knock_try. REQUIRES: model_loads and knocks_base on the
 * model as it is, and a token of `me` in it. */
static void eval_with(struct model *m, uint32_t me, int64_t t)
{
	size_t n = m->n, at = model_lower_bound(m, t), want = m->want;
	size_t nodes = m->nodes;
	uint32_t len;
	memcpy(m->load_try, m->load, nodes * sizeof(*m->load));
	memcpy(m->knock_try, m->knock,
	       (m->nracks + 1) * nodes * sizeof(*m->knock));
	size_t split = at < n ? at : 0;
	double u = width(m->tok[split ? split - 1 : n - 1], t, 2);
	model_insert(m, at, t, me);
	for (size_t d = 1; d < n && d < m->maxlen; d++) {
		size_t j = split >= d ? split - d : split + n - d;
		if (m->len[j] <= d)
			continue;
		const uint32_t *rp = m->rep + j * want;
		for (size_t q = 0; q < want && rp[q] != UINT32_MAX; q++)
			m->load_try[rp[q]] -= m->wid[j];
		knock_add(m, rp, -m->wid[j], m->knock_try);
		walk_range_rec(m, j < at ? j : j + 1, m->wid[j], m->load_try,
			       m->wrep, &len);
		knock_add(m, m->wrep, m->wid[j], m->knock_try);
	}
	const uint32_t *rs = m->rep + split * want;
	for (size_t q = 0; q < want && rs[q] != UINT32_MAX; q++)
		m->load_try[rs[q]] -= u;
	knock_add(m, rs, -u, m->knock_try);
	walk_range_rec(m, at, u, m->load_try, m->wrep, &len);
	knock_add(m, m->wrep, u, m->knock_try);
	model_erase(m, at);
	m->base_ok = true;
}

/* Score plus look-ahead penalty of the model with `t` added. */
static double lookahead_score(struct model *m, uint32_t me, int64_t t)
{
	size_t n = m->n, at = model_lower_bound(m, t);
	size_t split = at < n ? at : 0;
	int64_t a = m->tok[split ? split - 1 : n - 1], b = m->tok[split];
	double w = width(a, b, n), u = width(a, t, 2), v = width(t, b, 2);
	eval_with(m, me, t);
	double worst;
	return score_of(m, m->load_try, m->sqw - w * w + u * u + v * v) +
	       m->lookahead *
		       lookahead_penalty(m, m->load_try, m->knock_try, &worst);
}

/* Passes that move each new token to the point (a quarter, half or three
 * quarters into some gap) that lowers score + look-ahead penalty most. */
static void lookahead_refine(struct model *m, uint32_t me, const struct ring *r,
			     int64_t *out, size_t nt)
{
	for (int pass = 0; pass < m->lookahead_passes; pass++) {
		bool moved = false;
		for (size_t j = 0; j < nt; j++) {
			model_erase(m, model_lower_bound(m, out[j]));
			model_loads(m);
			knocks_base(m);
			double best = lookahead_score(m, me, out[j]);
			size_t n = m->n;
			for (size_t i = 0; i < n; i++) {
				int64_t a = m->tok[i ? i - 1 : n - 1];
				uint64_t w = (uint64_t)m->tok[i] - (uint64_t)a;
				if (w < 8)
					continue;
				for (uint64_t f = 1; f <= 3; f++) {
					int64_t t = (int64_t)((uint64_t)a +
							      w / 4 * f);
					if (t == RING_TOKEN_MIN)
						continue;
					double sc = lookahead_score(m, me, t);
					if (sc < best - 1e-12 &&
					    !token_taken(r, out, nt, t)) {
						best = sc;
						out[j] = t;
						moved = true;
					}
				}
			}
			model_insert(m, model_lower_bound(m, out[j]), out[j],
				     me);
		}
		if (!moved)
			break;
	}
}

/* max/min - 1 of the loads with the joining node's tokens in place, and in
 * *ahead the worst look-ahead shortfall (0 when off). */
static double measure(struct model *m, double *ahead)
{
	model_loads(m);
	*ahead = 0;
	if (m->lookahead > 0) {
		knocks_base(m);
		lookahead_penalty(m, m->load, m->knock, ahead);
	}
	double hi = 0, lo = INFINITY;
	for (size_t i = 0; i < m->nodes; i++) {
		hi = m->load[i] > hi ? m->load[i] : hi;
		lo = m->load[i] < lo ? m->load[i] : lo;
	}
	return lo > 0 ? hi / lo - 1 : INFINITY;
}

/* measure() with the joining node's tokens t[0..nt) in place: max/min - 1
 * of the loads plus the worst look-ahead shortfall. The model is left as
 * it was. */
static double measure_with(struct model *m, uint32_t me, const int64_t *t,
			   size_t nt)
{
	for (size_t j = 0; j < nt; j++)
		model_insert(m, model_lower_bound(m, t[j]), t[j], me);
	double ahead, spread = measure(m, &ahead);
	for (size_t j = 0; j < nt; j++)
		model_erase(m, model_lower_bound(m, t[j]));
	return spread + ahead;
}

/* One allocation of the joining node's tokens with the model's current
 * weights: greedy placement, then passes that lift each new token out and
 * put it back at its best point. The model is left as it was; *spread gets
 * max/min - 1 of the loads with the tokens in place. */
static int alloc_attempt(struct model *m, uint32_t me, struct rng *rng,
			 const struct ring *r, int64_t *out, size_t nt,
			 double *spread, double *ahead)
{
	size_t placed = 0;
	for (size_t j = 0; j < nt; j++) {
		int64_t t;
		double sc;
		m->share = (double)(j + 1) / (double)nt;
		size_t start = (size_t)rng_below(rng, m->n);
		if (!best_candidate(m, me, start, r, out, placed, &t, &sc))
			break;
		model_insert(m, model_lower_bound(m, t), t, me);
		out[placed++] = t;
	}
	if (placed < nt) {
		for (size_t j = 0; j < placed; j++)
			model_erase(m, model_lower_bound(m, out[j]));
		return err_set(ERR_INVALID,
			       "allocator found room for only %zu tokens",
			       placed);
	}
	m->share = 1.0;
	for (int pass = 0; pass < m->refine_passes; pass++) {
		bool moved = false;
		for (size_t j = 0; j < nt; j++) {
			double before = model_score(m), sc;
			model_erase(m, model_lower_bound(m, out[j]));
			int64_t t;
			size_t start = (size_t)rng_below(rng, m->n);
			if (best_candidate(m, me, start, r, out, nt, &t, &sc) &&
			    sc < before - 1e-12) {
				out[j] = t;
				moved = true;
			}
			model_insert(m, model_lower_bound(m, out[j]), out[j],
				     me);
		}
		if (!moved)
			break;
	}
	if (m->lookahead > 0 && nt > 1)
		lookahead_refine(m, me, r, out, nt);
	*spread = measure(m, ahead);
	for (size_t j = 0; j < nt; j++)
		model_erase(m, model_lower_bound(m, out[j]));
	return 0;
}

/* Rack turns (docs/ring.md, "Rack turns"). Later, when a DC of rf + 1
 * racks holds 2+2+1+1 nodes (RF 3), the two racks of two must replicate
 * (nearly) every range to be even, so the two lone racks z and w split
 * the third replica by which of them a range's walk meets first: one node
 * owns mu(z first) and the other 1 - mu, and max/min - 1 >= 2 mu - 1 for
 * the larger, whatever the fifth and sixth nodes do. The first node of
 * each rack fixes mu against the racks already there, and any two racks
 * may end up the lone ones. Returns the largest |2 mu - 1| over the other
 * racks w, mu the width of the points whose walk meets a token of `me`
 * before one of w (each rack has one node here). */
static double rack_turns(const struct model *m, uint32_t me)
{
	uint32_t rme = m->rack[me];
	double worst = 0;
	for (uint32_t w = 0; w < m->nracks; w++) {
		if (w == rme)
			continue;
		/* start after the last token of the pair, to wrap round */
		size_t last = m->n;
		while (last > 0 && m->own[last - 1] != me &&
		       m->rack[m->own[last - 1]] != w)
			last--;
		if (last == 0)
			continue;
		int64_t prev = m->tok[last - 1];
		double mu = 0;
		for (size_t i = 0; i < m->n; i++) {
			uint32_t o = m->own[i];
			if (o != me && m->rack[o] != w)
				continue;
			if (o == me)
				mu += width(prev, m->tok[i], 2);
			prev = m->tok[i];
		}
		double d = fabs(2 * mu - 1);
		worst = d > worst ? d : worst;
	}
	return worst;
}

/* What the annealing lowers: max/min - 1 of the loads, each divided by
 * the fair share of its node's rack, plus a little of their relative
 * variance (so that moves off the extremes still count), plus the worst
 * relative look-ahead shortfall, plus the relative growth of the sum of
 * squared range widths (the slivers step 3 keeps out). REQUIRES:
 * model_loads. */
static double anneal_objective(struct model *m)
{
	double hi = 0, lo = INFINITY, sum = 0, var = 0, *q = m->tmp;
	for (size_t i = 0; i < m->nodes; i++) {
		q[i] = m->load[i] / m->fair[m->rack[i]];
		hi = q[i] > hi ? q[i] : hi;
		lo = q[i] < lo ? q[i] : lo;
		sum += q[i];
	}
	if (lo <= 0)
		return INFINITY;
	double mean = sum / (double)m->nodes, ahead = 0;
	for (size_t i = 0; i < m->nodes; i++)
		var += (q[i] / mean - 1) * (q[i] / mean - 1);
	if (m->lookahead > 0) {
		knocks_base(m);
		lookahead_penalty(m, m->load, m->knock, &ahead);
	}
	double grow = m->sqw / m->sqw0 - 1;
	double spread = hi / lo - 1;
	if (m->turns_on) {
		double turns = rack_turns(m, m->nodes - 1);
		spread = (spread > turns ? spread : turns) +
			 TURNS_SUM * (spread + turns);
	}
	return spread + ANNEAL_VAR * var / (double)m->nodes + ahead +
	       (grow > 0 ? grow : 0);
}

/* A new token for the annealing: anywhere in a random gap, or near `old`
 * (within 0.5% of the ring). */
static int64_t anneal_move(const struct model *m, struct rng *g, int64_t old)
{
	if (rng_below(g, 2)) {
		size_t i = (size_t)rng_below(g, m->n);
		int64_t a = m->tok[i ? i - 1 : m->n - 1];
		uint64_t w = (uint64_t)m->tok[i] - (uint64_t)a;
		return (int64_t)((uint64_t)a +
				 (uint64_t)(rng_double(g) * (double)w));
	}
	double d = (rng_double(g) - 0.5) * ANNEAL_NEAR * TWO64;
	return (int64_t)((uint64_t)old + (uint64_t)(int64_t)d);
}

/* Step 8 (tight DCs): threshold-accepting annealing of the joining node's
 * tokens out[0..nt), starting from them, on anneal_objective; out gets the
 * best tokens seen. The model is left as it was. 0 or -1 (ERR_NOMEM). */
static int anneal(struct model *m, uint32_t me, const struct ring *r,
		  int64_t *out, size_t nt, uint64_t seed)
{
	int64_t *best_out = malloc(nt * sizeof(*best_out));
	if (!best_out)
		return err_set(ERR_NOMEM, "token allocator");
	struct rng g;
	rng_seed(&g, seed ^ ANNEAL_SEED);
	for (size_t j = 0; j < nt; j++)
		model_insert(m, model_lower_bound(m, out[j]), out[j], me);
	model_loads(m);
	m->sqw0 = m->sqw;
	double cur = anneal_objective(m), best = cur;
	memcpy(best_out, out, nt * sizeof(*best_out));
	for (long it = 0; it < m->anneal_iters; it++) {
		double f = 1 - (double)it / (double)m->anneal_iters;
		size_t j = (size_t)rng_below(&g, nt);
		int64_t old = out[j];
		model_erase(m, model_lower_bound(m, old));
		int64_t t = anneal_move(m, &g, old);
		size_t at = model_lower_bound(m, t);
		if (t == RING_TOKEN_MIN || (at < m->n && m->tok[at] == t) ||
		    token_taken(r, out, nt, t))
			t = old;
		out[j] = t;
		model_insert(m, model_lower_bound(m, t), t, me);
		model_loads(m);
		double sc = anneal_objective(m);
		if (sc <= cur + ANNEAL_THRESHOLD * f * f * f) {
			cur = sc;
			if (sc < best) {
				best = sc;
				memcpy(best_out, out, nt * sizeof(*best_out));
			}
		} else {
			model_erase(m, model_lower_bound(m, t));
			out[j] = old;
			model_insert(m, model_lower_bound(m, old), old, me);
		}
	}
	for (size_t j = 0; j < nt; j++)
		model_erase(m, model_lower_bound(m, out[j]));
	memcpy(out, best_out, nt * sizeof(*out));
	free(best_out);
	return 0;
}

/* Step 8: anneals each attempt's tokens (tries, nt per attempt) and puts
 * the best by measure() in out; in tight DCs the search is the limit, and
 * three starts do better than the one that looked best before. 0 or -1. */
static int anneal_best(struct model *m, uint32_t me, const struct ring *r,
		       int64_t *tries, size_t nt, uint64_t seed, int64_t *out)
{
	double best = INFINITY;
	for (size_t k = 0; k < m->attempts; k++) {
		int64_t *t = tries + k * nt;
		if (anneal(m, me, r, t, nt, seed + k))
			return -1;
		double spread = measure_with(m, me, t, nt);
		if (spread < best) {
			best = spread;
			memcpy(out, t, nt * sizeof(*out));
		}
	}
	return 0;
}

/* A DC with more racks than RF in which some rack must replicate every
 * range to be even (k rf == nodes: 2+2+1+1, 3+2+2+2, 2+1+1+1+1), and whose
 * next join can be prepared for (no rack a next node may join is stuck
 * above the 10% floor). */
static bool model_tight(const struct model *m)
{
	if (m->nracks <= (size_t)m->rf || m->next_stuck ||
	    shares_floor(m, m->nracks + 1, m->fair) > SKIP_FLOOR)
		return false;
	for (size_t k = 0; k < m->nracks; k++)
		if (m->kr[k] * (size_t)m->rf == m->nodes)
			return true;
	return false;
}

/* The first round of a DC that may grow round robin into rf + 1 racks:
 * the joining node opens a rack, every rack has one node, and there are 2
 * to rf + 1 racks. Such a join fixes its rack's turns (rack_turns). */
static bool model_first_round(const struct model *m, int rf)
{
	if (m->nracks < 2 || m->nracks > (size_t)rf + 1)
		return false;
	for (size_t k = 0; k < m->nracks; k++)
		if (m->kr[k] != 1)
			return false;
	return true;
}

/* Search effort: what suits 16 tokens, scaled down with more. Every pass
 * re-places each token against the whole ring, O(tokens^2), while a token
 * matters less the more there are: 256 tokens took 25-60 s a join with
 * the full effort and reach the same balance with a pass or two. */
static void model_effort(struct model *m, size_t num_tokens)
{
	double scale = num_tokens > 16 ? 16.0 / (double)num_tokens : 1.0;
	m->refine_passes = 1 + (int)(REFINE_PASSES * scale - 1e-9);
	m->lookahead_passes = 1 + (int)(LOOKAHEAD_PASSES * scale - 1e-9);
	m->anneal_iters = 1 + (long)(ANNEAL_ITERS * scale - 1e-9);
	m->attempts = scale >= 0.5 ? ATTEMPTS : 1;
}

int ring_tokens_allocate(const struct ring *r, const char *dc, const char *rack,
			 int rf, size_t num_tokens, uint64_t seed, int64_t *out)
{
	return ring_tokens_allocate_planned(r, dc, rack, NULL, rf, num_tokens,
					    seed, out);
}

int ring_tokens_allocate_planned(const struct ring *r, const char *dc,
				 const char *rack, const char *next_rack,
				 int rf, size_t num_tokens, uint64_t seed,
				 int64_t *out)
{
	if (!dc || !*dc || !rack || !*rack)
		return err_set(ERR_INVALID, "allocator needs a dc and a rack");
	if (rf < 1 || num_tokens < 1 || num_tokens > RING_TOKENS_MAX)
		return err_set(ERR_INVALID,
			       "allocator needs rf >= 1 and 1..%d tokens",
			       RING_TOKENS_MAX);
	struct rng rng;
	rng_seed(&rng, seed);
	struct model m;
	if (model_make(&m, r, dc, rack, next_rack, num_tokens))
		return -1;
	uint32_t me = (uint32_t)(m.nodes - 1);
	if (m.n == 0) {
		/* First node of the DC: evenly spaced, seeded offset; steer
		 * clear of tokens other DCs hold. */
		for (;;) {
			uint64_t off = rng_next(&rng),
				 step = UINT64_MAX / num_tokens + 1;
			bool ok = true;
			for (size_t i = 0; i < num_tokens && ok; i++) {
				out[i] = (int64_t)(off + step * i);
				ok = out[i] != RING_TOKEN_MIN &&
				     !token_taken(r, out, i, out[i]);
			}
			if (ok)
				break;
		}
		model_free(&m);
		return 0;
	}
	size_t existing = m.nodes - 1;
	m.rf = rf < (int)existing ? rf : (int)existing;
	model_effort(&m, num_tokens);
	if (fair_setup(&m) || lookahead_setup(&m, rf)) {
		model_free(&m);
		return -1;
	}
	/* every attempt's tokens, num_tokens each */
	int64_t *tries = malloc(ATTEMPTS * num_tokens * sizeof(*tries));
	if (!tries) {
		model_free(&m);
		return err_set(ERR_NOMEM, "token allocator");
	}
	int rc = 0;
	/* The lowest spread now plus look-ahead shortfall wins. */
	double best = INFINITY;
	for (size_t k = 0; k < m.attempts && !rc; k++) {
		int64_t *t = tries + k * num_tokens;
		m.width_weight = WIDTH_WEIGHTS[k];
		rng_seed(&rng, seed + k);
		double spread = INFINITY, ahead = 0;
		rc = alloc_attempt(&m, me, &rng, r, t, num_tokens, &spread,
				   &ahead);
		if (!rc && spread + ahead < best - 1e-12) {
			best = spread + ahead;
			memcpy(out, t, num_tokens * sizeof(*out));
		}
	}
	m.turns_on = model_first_round(&m, rf);
	if (!rc && model_tight(&m))
		rc = anneal_best(&m, me, r, tries, num_tokens, seed, out);
	else if (!rc && m.turns_on)
		rc = anneal(&m, me, r, out, num_tokens, seed);
	free(tries);
	model_free(&m);
	return rc;
}

int ring_tokens_choose(const struct ring *r, const char *initial_token,
		       size_t num_tokens, int alloc_rf, const char *dc,
		       const char *rack, const char *next_rack, uint64_t seed,
		       int64_t *out)
{
	if (num_tokens < 1 || num_tokens > RING_TOKENS_MAX)
		return err_set(ERR_CONFIG, "num_tokens must be 1..%d",
			       RING_TOKENS_MAX);
	if (initial_token && *initial_token) {
		size_t n;
		if (ring_tokens_parse_initial(initial_token, out, num_tokens,
					      &n))
			return -1;
		if (n != num_tokens)
			return err_set(ERR_CONFIG,
				       "The number of initial tokens (by "
				       "initial_token) specified (%zu) is "
				       "different from num_tokens value (%zu)",
				       n, num_tokens);
		for (size_t i = 0; r && i < n; i++)
			if (token_taken(r, NULL, 0, out[i]))
				return err_set(
					ERR_CONFIG,
					"Bootstrapping to existing token "
					"%lld is not allowed (decommission/"
					"removenode the old node first).",
					(long long)out[i]);
		return 0;
	}
	if (alloc_rf > 0)
		return ring_tokens_allocate_planned(r, dc, rack, next_rack,
						    alloc_rf, num_tokens, seed,
						    out);
	struct rng rng;
	rng_seed(&rng, seed);
	return ring_tokens_random(&rng, r, num_tokens, out);
}

/* ---- jitter ------------------------------------------------------------- */

/* Narrows [*lo, *hi] around t to exclude the sorted tokens a[0..n); false
 * when t is one of them. */
static bool gap_around(const int64_t *a, size_t n, int64_t t, int64_t *lo,
		       int64_t *hi)
{
	/* the first a[] >= t, n when none */
	size_t l = n && a[n - 1] >= t ? ring_tokens_lower_bound(a, n, t) : n;
	if (l < n && a[l] == t)
		return false;
	if (l > 0 && a[l - 1] + 1 > *lo)
		*lo = a[l - 1] + 1;
	if (l < n && a[l] - 1 < *hi)
		*hi = a[l] - 1;
	return true;
}

void ring_tokens_jitter(const struct ring *r, struct rng *rng, int64_t *t,
			size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int64_t lo = RING_TOKEN_MIN + 1, hi = INT64_MAX;
		bool free_gap = true;
		for (size_t e = 0; r && e < r->nep && free_gap; e++)
			free_gap = gap_around(r->eps[e].pub.tokens,
					      r->eps[e].pub.num_tokens, t[i],
					      &lo, &hi);
		for (size_t k = 0; k < n && free_gap; k++) {
			if (k == i)
				continue;
			free_gap = t[k] != t[i];
			if (t[k] < t[i] && t[k] + 1 > lo)
				lo = t[k] + 1;
			if (t[k] > t[i] && t[k] - 1 < hi)
				hi = t[k] - 1;
		}
		if (!free_gap || t[i] < lo || t[i] > hi)
			continue;
		int64_t d = (int64_t)rng_below(rng, 2 * JITTER + 1) - JITTER;
		if (d > 0)
			t[i] = hi - t[i] < d ? hi : t[i] + d;
		else if (d < 0)
			t[i] = t[i] - lo < -d ? lo : t[i] + d;
	}
}

/* ---- measuring ----------------------------------------------------------- */

int ring_dc_ownership(const struct ring *r, const char *dc, int rf, double *own)
{
	char *dcs[1] = {(char *)dc};
	int rfs[1] = {rf};
	struct ring_strategy s = {.cls = RING_STRATEGY_NETWORK_TOPOLOGY,
				  .ndc = 1,
				  .dcs = dcs,
				  .dc_rf = rfs};
	struct ring_view v = {r->ntok, r->tok, r->owner, r};
	struct rmap m;
	for (size_t i = 0; i < r->nep; i++)
		own[i] = 0;
	if (ring_rmap_build(&v, &s, &m))
		return -1;
	for (size_t i = 0; i < m.ntok; i++) {
		struct token_range rg = ring_range_at(r, i);
		double w = token_range_fraction(rg);
		for (uint32_t k = m.off[i]; k < m.off[i + 1]; k++)
			own[m.eps[k]] += w;
	}
	ring_rmap_free(&m);
	return 0;
}

int ring_dc_spread(const struct ring *r, const char *dc, int rf, double *spread)
{
	double *own = malloc((r->nep ? r->nep : 1) * sizeof(*own));
	if (!own)
		return err_set(ERR_NOMEM, "ownership");
	if (ring_dc_ownership(r, dc, rf, own)) {
		free(own);
		return -1;
	}
	double hi = 0, lo = INFINITY;
	for (size_t i = 0; i < r->nep; i++) {
		const struct ring_endpoint *e = &r->eps[i].pub;
		if (strcmp(e->dc, dc) != 0 || e->status == RING_STATUS_BOOT ||
		    !e->num_tokens)
			continue;
		hi = own[i] > hi ? own[i] : hi;
		lo = own[i] < lo ? own[i] : lo;
	}
	free(own);
	*spread = hi == 0 ? 0 : lo > 0 ? hi / lo - 1 : INFINITY;
	return 0;
}
