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
 *  3. Greedy: each new token goes to the candidate (1/4, 1/2, 3/4 of every
 *     current range) with the lowest score (model_score: squared deviations
 *     from the mean, the joining node's target scaled by its share of tokens
 *     placed so far, plus a term on max - min).
 *  4. Refinement passes lift each new token out and put it back at its best
 *     candidate; then fine-tuning slides each within its gap.
 * Ties go to the first candidate in ring order after a seeded start, so a
 * given ring and seed always give the same tokens. Cost: about
 * O(num_tokens * candidates * tokens_in_dc * rf): 40-90 ms for a 12-node DC
 * with 16 tokens each, once per bootstrap.
 */
#include "ring/ring_internal.h"

#include "common/err.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TWO64          18446744073709551616.0
#define REFINE_PASSES  6
#define FINE_PASSES    8
#define EXTREME_WEIGHT 1.0
#define FINE_STEPS     16

/* ---- random tokens and initial_token ---- */

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

/* ---- the DC model ---- */

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
	uint32_t *seen, *skip, *rseen, *skipped, *picks;
	double *load;
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
	free(m->picks);
	free(m->load);
}

static double width(int64_t a, int64_t b, size_t n)
{
	if (n == 1)
		return 1.0;
	return (double)((uint64_t)b - (uint64_t)a) / TWO64;
}

/* Loads of all nodes: NTS walk within the one DC. */
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
	size_t want = (size_t)m->rf < hosts ? (size_t)m->rf : hosts;
	for (size_t i = 0; i < m->n; i++) {
		double w = width(m->tok[i ? i - 1 : m->n - 1], m->tok[i], m->n);
		size_t got = 0, nskip = 0, used = 0;
		m->epoch++;
		for (size_t k = 0; k < m->n && got < want; k++) {
			size_t at = i + k < m->n ? i + k : i + k - m->n;
			uint32_t o = m->own[at], rk = m->rack[o];
			if (m->seen[o] == m->epoch)
				continue;
			if (m->rseen[rk] == m->epoch && used < racks) {
				if (m->skip[o] != m->epoch) {
					m->skip[o] = m->epoch;
					m->skipped[nskip++] = o;
				}
				continue;
			}
			m->seen[o] = m->epoch;
			m->load[o] += w;
			got++;
			if (m->rseen[rk] != m->epoch) {
				m->rseen[rk] = m->epoch;
				if (++used == racks) {
					for (size_t q = 0;
					     q < nskip && got < want; q++) {
						m->seen[m->skipped[q]] =
						    m->epoch;
						m->load[m->skipped[q]] += w;
						got++;
					}
					nskip = 0;
				}
			}
		}
	}
}

/* Sum of squared distances of the loads from the mean. While the joining
 * node (the last one) is still placing tokens, its own target is scaled by
 * the share of its tokens placed so far, so that early tokens go where they
 * relieve the most loaded nodes rather than where they grab the most. */
static double model_score(struct model *m)
{
	model_loads(m);
	double sum = 0, var = 0, hi = 0, lo = INFINITY;
	size_t last = m->nodes - 1;
	for (size_t i = 0; i < m->nodes; i++)
		sum += m->load[i];
	double mean = sum / (double)m->nodes;
	for (size_t i = 0; i < last; i++) {
		var += (m->load[i] - mean) * (m->load[i] - mean);
		hi = m->load[i] > hi ? m->load[i] : hi;
		lo = m->load[i] < lo ? m->load[i] : lo;
	}
	double d = m->load[last] - mean * m->share;
	if (m->share >= 1.0) {
		hi = m->load[last] > hi ? m->load[last] : hi;
		lo = m->load[last] < lo ? m->load[last] : lo;
	}
	double spread = last > 0 ? hi - lo : 0;
	return var + d * d +
	       EXTREME_WEIGHT * (double)m->nodes * spread * spread;
}

static void model_insert(struct model *m, size_t at, int64_t t, uint32_t o)
{
	memmove(m->tok + at + 1, m->tok + at, (m->n - at) * sizeof(*m->tok));
	memmove(m->own + at + 1, m->own + at, (m->n - at) * sizeof(*m->own));
	m->tok[at] = t;
	m->own[at] = o;
	m->n++;
}

static void model_erase(struct model *m, size_t at)
{
	memmove(m->tok + at, m->tok + at + 1,
	        (m->n - at - 1) * sizeof(*m->tok));
	memmove(m->own + at, m->own + at + 1,
	        (m->n - at - 1) * sizeof(*m->own));
	m->n--;
}

/* Builds the model of `dc` from the ring plus a joining node (id nodes-1)
 * on `rack`. LEAVING endpoints are left out: they are going away. */
static int model_make(struct model *m, const struct ring *r, const char *dc,
                      const char *rack, size_t extra_tokens)
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
	m->picks = malloc(ne * sizeof(uint32_t));
	m->load = malloc(ne * sizeof(double));
	if (!node_of || !rack_names || !m->rack || !m->tok || !m->own ||
	    !m->seen || !m->skip || !m->rseen || !m->skipped || !m->picks ||
	    !m->load) {
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

/* Best candidate point for one more token of node `me`; returns false when
 * no range has room. */
static bool best_candidate(struct model *m, uint32_t me, size_t start,
                           int64_t *best_t)
{
	static const double fr[] = {0.25, 0.5, 0.75};
	double best = INFINITY;
	bool found = false;
	size_t n = m->n;
	for (size_t k = 0; k < n; k++) {
		size_t i = (start + k) % n;
		int64_t a = m->tok[i ? i - 1 : n - 1], b = m->tok[i];
		uint64_t w = n == 1 ? UINT64_MAX : (uint64_t)b - (uint64_t)a;
		for (size_t f = 0; f < sizeof(fr) / sizeof(fr[0]); f++) {
			uint64_t step = (uint64_t)((double)w * fr[f]);
			if (step == 0 || step >= w)
				continue;
			int64_t t = (int64_t)((uint64_t)a + step);
			if (t == RING_TOKEN_MIN)
				continue;
			size_t at = model_lower_bound(m, t);
			model_insert(m, at, t, me);
			double s = model_score(m);
			model_erase(m, at);
			if (s < best - 1e-15) {
				best = s;
				*best_t = t;
				found = true;
			}
		}
	}
	return found;
}

/* Slides each new token within the gap between its neighbours (15 evenly
 * spaced positions) while that lowers the score. */
static void fine_tune(struct model *m, uint32_t me, const struct ring *r,
                      int64_t *out, size_t num_tokens)
{
	for (int pass = 0; pass < FINE_PASSES; pass++) {
		bool moved = false;
		for (size_t j = 0; j < num_tokens; j++) {
			double best = model_score(m);
			size_t at = model_lower_bound(m, out[j]);
			model_erase(m, at);
			size_t n = m->n;
			size_t nx = model_lower_bound(m, out[j]) % n;
			int64_t a = m->tok[nx ? nx - 1 : n - 1], b = m->tok[nx];
			uint64_t w =
			    n == 1 ? UINT64_MAX : (uint64_t)b - (uint64_t)a;
			int64_t keep = out[j];
			for (int k = 1; k < FINE_STEPS; k++) {
				uint64_t step =
				    (uint64_t)((double)w * k / FINE_STEPS);
				int64_t t = (int64_t)((uint64_t)a + step);
				if (step == 0 || step >= w || t == keep ||
				    t == RING_TOKEN_MIN ||
				    token_taken(r, out, num_tokens, t))
					continue;
				size_t pos = model_lower_bound(m, t);
				model_insert(m, pos, t, me);
				double s = model_score(m);
				model_erase(m, pos);
				if (s < best - 1e-15) {
					best = s;
					out[j] = t;
				}
			}
			if (out[j] != keep)
				moved = true;
			model_insert(m, model_lower_bound(m, out[j]), out[j],
			             me);
		}
		if (!moved)
			break;
	}
}

int ring_tokens_allocate(const struct ring *r, const char *dc, const char *rack,
                         int rf, size_t num_tokens, uint64_t seed, int64_t *out)
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
	if (model_make(&m, r, dc, rack, num_tokens))
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
	size_t placed = 0;
	for (size_t j = 0; j < num_tokens; j++) {
		int64_t t;
		m.share = (double)(j + 1) / (double)num_tokens;
		size_t start = (size_t)rng_below(&rng, m.n);
		if (!best_candidate(&m, me, start, &t) ||
		    token_taken(r, out, placed, t))
			break;
		model_insert(&m, model_lower_bound(&m, t), t, me);
		out[placed++] = t;
	}
	if (placed < num_tokens) {
		model_free(&m);
		return err_set(ERR_INVALID,
		               "allocator found room for only %zu tokens",
		               placed);
	}
	m.share = 1.0;
	for (int pass = 0; pass < REFINE_PASSES; pass++) {
		bool moved = false;
		for (size_t j = 0; j < num_tokens; j++) {
			size_t at = model_lower_bound(&m, out[j]);
			double before = model_score(&m);
			model_erase(&m, at);
			int64_t t = out[j];
			size_t start = (size_t)rng_below(&rng, m.n);
			if (best_candidate(&m, me, start, &t) &&
			    !token_taken(r, out, num_tokens, t)) {
				model_insert(&m, model_lower_bound(&m, t), t,
				             me);
				if (model_score(&m) < before - 1e-15) {
					out[j] = t;
					moved = true;
					continue;
				}
				model_erase(&m, model_lower_bound(&m, t));
			}
			model_insert(&m, model_lower_bound(&m, out[j]), out[j],
			             me);
		}
		if (!moved)
			break;
	}
	fine_tune(&m, me, r, out, num_tokens);
	model_free(&m);
	return 0;
}

int ring_tokens_choose(const struct ring *r, const char *initial_token,
                       size_t num_tokens, int alloc_rf, const char *dc,
                       const char *rack, uint64_t seed, int64_t *out)
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
		return ring_tokens_allocate(r, dc, rack, alloc_rf, num_tokens,
		                            seed, out);
	struct rng rng;
	rng_seed(&rng, seed);
	return ring_tokens_random(&rng, r, num_tokens, out);
}

/* ---- measuring ---- */

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
	if (rmap_build(&v, &s, &m))
		return -1;
	for (size_t i = 0; i < m.ntok; i++) {
		struct token_range rg = ring_range_at(r, i);
		double w = token_range_fraction(rg);
		for (uint32_t k = m.off[i]; k < m.off[i + 1]; k++)
			own[m.eps[k]] += w;
	}
	rmap_free(&m);
	return 0;
}
