/*
 * Replica maps: for every ring token, the endpoints its range replicates to.
 *
 * SimpleStrategy walks the ring clockwise from the range's token and takes
 * distinct endpoints until RF.
 *
 * NetworkTopologyStrategy follows Cassandra's rack-aware walk, in the form
 * the DataStax drivers implement it (per DC, over the DC's own tokens):
 *   - a DC takes min(RF, endpoints in the DC) replicas; DCs absent from the
 *     options, with RF 0, or without endpoints take none;
 *   - walking clockwise, an endpoint on a rack not yet used is accepted;
 *     one on a used rack is set aside (once, in ring order) while some rack
 *     of the DC is still unused;
 *   - when the last unused rack is reached, the set-aside endpoints fill the
 *     remaining slots in ring order; from then on any new endpoint is taken.
 * The result lists each replica once, in the order the whole-ring walk
 * accepts it (Cassandra's LinkedHashSet): the first is the primary replica.
 * Within one DC that order equals the driver's list.
 *
 * Pending endpoints (Cassandra's PendingRangeCalculator, without moves):
 *   - LEAVING: for every range that has a leaving replica, the replicas the
 *     range would have once all leaving endpoints are gone, minus the current
 *     ones;
 *   - BOOT: each bootstrapping endpoint, for the ranges it would replicate if
 *     it joined the ring with all leaving endpoints gone.
 * They are kept on the union of all boundaries involved, so a lookup is a
 * binary search too.
 */
#include "ring/ring_internal.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

struct ring_placement {
	const struct ring *ring;
	bool owns_ref;
	bool local_only;
	uint32_t local; /* LocalStrategy: the local endpoint */
	struct rmap nat;
	struct rmap pend; /* boundaries may differ from the ring's tokens */
};

void ring_rmap_free(struct rmap *m)
{
	free(m->tok);
	free(m->off);
	free(m->eps);
	memset(m, 0, sizeof(*m));
}

static int rmap_alloc(struct rmap *m, const int64_t *tok, size_t n,
		      size_t max_per)
{
	memset(m, 0, sizeof(*m));
	m->ntok = n;
	m->tok = malloc((n ? n : 1) * sizeof(*m->tok));
	m->off = malloc((n + 1) * sizeof(*m->off));
	size_t cells = n * max_per;
	m->eps = malloc((cells ? cells : 1) * sizeof(*m->eps));
	if (!m->tok || !m->off || !m->eps) {
		ring_rmap_free(m);
		return err_set(ERR_NOMEM, "replica map");
	}
	if (n)
		memcpy(m->tok, tok, n * sizeof(*tok));
	m->off[0] = 0;
	return 0;
}

/* Per-walk scratch: epoch stamps make "seen" sets O(1) to reset. */
struct scratch {
	uint32_t epoch;
	uint32_t *ep_seen; /* accepted in the current DC walk */
	uint32_t *ep_skip; /* set aside in the current DC walk */
	uint32_t *rack_seen;
	uint32_t *skipped; /* set-aside endpoints, ring order */
	struct pick {
		uint32_t ep, dist;
	} * picks;
};

static void scratch_free(struct scratch *s)
{
	free(s->ep_seen);
	free(s->ep_skip);
	free(s->rack_seen);
	free(s->skipped);
	free(s->picks);
}

static int scratch_init(struct scratch *s, const struct ring *r, size_t npick)
{
	memset(s, 0, sizeof(*s));
	size_t ne = r->nep ? r->nep : 1, nr = r->nrack ? r->nrack : 1;
	s->ep_seen = calloc(ne, sizeof(uint32_t));
	s->ep_skip = calloc(ne, sizeof(uint32_t));
	s->rack_seen = calloc(nr, sizeof(uint32_t));
	s->skipped = malloc(ne * sizeof(uint32_t));
	s->picks = malloc((npick ? npick : 1) * sizeof(*s->picks));
	if (!s->ep_seen || !s->ep_skip || !s->rack_seen || !s->skipped ||
	    !s->picks) {
		scratch_free(s);
		return err_set(ERR_NOMEM, "replica map");
	}
	return 0;
}

static int build_simple(const struct ring_view *v, int rf, struct rmap *m)
{
	const struct ring *r = v->ring;
	size_t per = (size_t)rf < r->nep ? (size_t)rf : r->nep;
	struct scratch s;
	if (rmap_alloc(m, v->tok, v->ntok, per) || scratch_init(&s, r, 1)) {
		ring_rmap_free(m);
		return -1;
	}
	uint32_t k = 0;
	for (size_t i = 0; i < v->ntok; i++) {
		s.epoch++;
		size_t got = 0;
		for (size_t j = 0; j < v->ntok && got < (size_t)rf; j++) {
			uint32_t ep = v->owner[(i + j) % v->ntok];
			if (s.ep_seen[ep] == s.epoch)
				continue;
			s.ep_seen[ep] = s.epoch;
			m->eps[k++] = ep;
			got++;
		}
		m->off[i + 1] = k;
	}
	scratch_free(&s);
	return 0;
}

/* Per-DC facts of a view for the NTS walk. */
struct dcinfo {
	int rf;       /* from the strategy; 0 = no replicas */
	size_t hosts; /* endpoints holding tokens in the view */
	size_t racks; /* distinct racks among them */
	size_t npos;
	uint32_t *pos; /* view positions of the DC's tokens, ascending */
	size_t cursor; /* first pos >= current token */
};

static void dcinfo_free(struct dcinfo *d, size_t n)
{
	if (!d)
		return;
	for (size_t i = 0; i < n; i++)
		free(d[i].pos);
	free(d);
}

static struct dcinfo *dcinfo_make(const struct ring_view *v,
				  const struct ring_strategy *st,
				  size_t *max_per)
{
	const struct ring *r = v->ring;
	struct dcinfo *d = calloc(r->ndc ? r->ndc : 1, sizeof(*d));
	uint8_t *ep_mark = calloc(r->nep ? r->nep : 1, 1);
	uint8_t *rack_mark = calloc(r->nrack ? r->nrack : 1, 1);
	if (!d || !ep_mark || !rack_mark)
		goto nomem;
	for (size_t i = 0; i < v->ntok; i++) {
		const struct ring_ep *e = &r->eps[v->owner[i]];
		d[e->dc].npos++;
		if (!ep_mark[v->owner[i]]) {
			ep_mark[v->owner[i]] = 1;
			d[e->dc].hosts++;
		}
		if (!rack_mark[e->rack]) {
			rack_mark[e->rack] = 1;
			d[e->dc].racks++;
		}
	}
	*max_per = 0;
	for (size_t i = 0; i < r->ndc; i++) {
		d[i].rf = ring_strategy_rf(st, r->dc_names[i]);
		d[i].pos =
			malloc((d[i].npos ? d[i].npos : 1) * sizeof(uint32_t));
		if (!d[i].pos)
			goto nomem;
		*max_per += (size_t)d[i].rf < d[i].hosts ? (size_t)d[i].rf
							 : d[i].hosts;
		d[i].npos = 0;
	}
	for (size_t i = 0; i < v->ntok; i++) {
		struct dcinfo *x = &d[r->eps[v->owner[i]].dc];
		x->pos[x->npos++] = (uint32_t)i;
	}
	free(ep_mark);
	free(rack_mark);
	return d;
nomem:
	err_set(ERR_NOMEM, "replica map");
	free(ep_mark);
	free(rack_mark);
	dcinfo_free(d, r->ndc);
	return NULL;
}

/* Walks one DC from view position i; appends picks with their clockwise
 * distance from i. Returns the number of picks. */
static size_t walk_dc(const struct ring_view *v, struct dcinfo *d, size_t i,
		      struct scratch *s, struct pick *out)
{
	const struct ring *r = v->ring;
	while (d->cursor < d->npos && d->pos[d->cursor] < i)
		d->cursor++;
	size_t want = (size_t)d->rf < d->hosts ? (size_t)d->rf : d->hosts;
	size_t got = 0, nskip = 0, racks_used = 0;
	s->epoch++;
	for (size_t k = 0; k < d->npos && got < want; k++) {
		size_t at = d->cursor + k;
		if (at >= d->npos)
			at -= d->npos;
		uint32_t p = d->pos[at];
		uint32_t ep = v->owner[p];
		uint32_t rack = r->eps[ep].rack;
		uint32_t dist = (uint32_t)(p >= i ? p - i : p + v->ntok - i);
		if (s->ep_seen[ep] == s->epoch)
			continue;
		if (s->rack_seen[rack] == s->epoch && racks_used < d->racks) {
			if (s->ep_skip[ep] != s->epoch) {
				s->ep_skip[ep] = s->epoch;
				s->skipped[nskip++] = ep;
			}
			continue;
		}
		s->ep_seen[ep] = s->epoch;
		out[got++] = (struct pick){ep, dist};
		if (s->rack_seen[rack] != s->epoch) {
			s->rack_seen[rack] = s->epoch;
			if (++racks_used == d->racks) {
				for (size_t q = 0; q < nskip && got < want;
				     q++) {
					s->ep_seen[s->skipped[q]] = s->epoch;
					out[got++] = (struct pick){
						s->skipped[q], dist};
				}
				nskip = 0;
			}
		}
	}
	return got;
}

static int build_nts(const struct ring_view *v, const struct ring_strategy *st,
		     struct rmap *m)
{
	const struct ring *r = v->ring;
	size_t per;
	struct scratch s;
	struct dcinfo *d = dcinfo_make(v, st, &per);
	if (!d)
		return -1;
	if (rmap_alloc(m, v->tok, v->ntok, per)) {
		dcinfo_free(d, r->ndc);
		return -1;
	}
	if (scratch_init(&s, r, per)) {
		ring_rmap_free(m);
		dcinfo_free(d, r->ndc);
		return -1;
	}
	uint32_t k = 0;
	for (size_t i = 0; i < v->ntok; i++) {
		size_t n = 0;
		for (size_t dc = 0; dc < r->ndc; dc++) {
			if (d[dc].rf <= 0 || d[dc].hosts == 0)
				continue;
			size_t got = walk_dc(v, &d[dc], i, &s, s.picks + n);
			/* Merge into walk order; each DC's picks ascend. */
			for (size_t a = n; a < n + got; a++) {
				struct pick p = s.picks[a];
				size_t b = a;
				while (b > 0 && s.picks[b - 1].dist > p.dist) {
					s.picks[b] = s.picks[b - 1];
					b--;
				}
				s.picks[b] = p;
			}
			n += got;
		}
		for (size_t a = 0; a < n; a++)
			m->eps[k++] = s.picks[a].ep;
		m->off[i + 1] = k;
	}
	scratch_free(&s);
	dcinfo_free(d, r->ndc);
	return 0;
}

int ring_rmap_build(const struct ring_view *v, const struct ring_strategy *s,
		    struct rmap *out)
{
	switch (s->cls) {
	case RING_STRATEGY_SIMPLE:
		return build_simple(v, s->rf, out);
	case RING_STRATEGY_NETWORK_TOPOLOGY:
		return build_nts(v, s, out);
	case RING_STRATEGY_LOCAL:
		break;
	}
	return rmap_alloc(out, NULL, 0, 0);
}

/* Replicas for point t in a map (empty map: none). */
static const uint32_t *rmap_lookup(const struct rmap *m, int64_t t, size_t *n)
{
	if (m->ntok == 0) {
		*n = 0;
		return m->eps;
	}
	size_t i = ring_tokens_lower_bound(m->tok, m->ntok, t);
	*n = m->off[i + 1] - m->off[i];
	return m->eps + m->off[i];
}

static bool has(const uint32_t *v, size_t n, uint32_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* ---- pending ------------------------------------------------------------- */

static int i64_cmp_ring(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Tokens of endpoints passing `keep`, plus `extra`'s tokens, as a view. */
static int view_make(const struct ring *r, int extra, struct ring_view *v,
		     int64_t **tok, uint32_t **own)
{
	size_t n = r->ntok + (extra >= 0 ? r->eps[extra].pub.num_tokens : 0);
	*tok = malloc((n ? n : 1) * sizeof(int64_t));
	*own = malloc((n ? n : 1) * sizeof(uint32_t));
	if (!*tok || !*own) {
		free(*tok);
		free(*own);
		return err_set(ERR_NOMEM, "pending ranges");
	}
	size_t k = 0, j = 0;
	const int64_t *xt = extra >= 0 ? r->eps[extra].pub.tokens : NULL;
	size_t xn = extra >= 0 ? r->eps[extra].pub.num_tokens : 0;
	for (size_t i = 0; i <= r->ntok; i++) {
		while (j < xn && (i == r->ntok || xt[j] < r->tok[i])) {
			(*tok)[k] = xt[j++];
			(*own)[k++] = (uint32_t)extra;
		}
		if (i == r->ntok)
			break;
		if (r->eps[r->owner[i]].pub.status == RING_STATUS_LEAVING)
			continue;
		(*tok)[k] = r->tok[i];
		(*own)[k++] = r->owner[i];
	}
	*v = (struct ring_view){k, *tok, *own, r};
	return 0;
}

static int build_pending(const struct ring *r, const struct ring_strategy *s,
			 const struct rmap *cur, struct rmap *out)
{
	size_t nboot = 0, nb = r->ntok;
	bool leaving = false;
	for (size_t i = 0; i < r->nep; i++) {
		if (r->eps[i].pub.status == RING_STATUS_BOOT) {
			nboot++;
			nb += r->eps[i].pub.num_tokens;
		} else if (r->eps[i].pub.status == RING_STATUS_LEAVING) {
			leaving = true;
		}
	}
	/* One map per boot endpoint (index 1..) and the all-left one (0). */
	struct rmap *maps = calloc(nboot + 1, sizeof(*maps));
	uint32_t *boot = calloc(nboot ? nboot : 1, sizeof(*boot));
	int64_t *bounds = malloc((nb ? nb : 1) * sizeof(*bounds));
	uint32_t *set = malloc((r->nep ? r->nep : 1) * sizeof(*set));
	int rc = -1;
	if (!maps || !boot || !bounds || !set) {
		err_set(ERR_NOMEM, "pending ranges");
		goto done;
	}
	size_t b = 0;
	for (size_t i = 0; i < r->nep; i++)
		if (r->eps[i].pub.status == RING_STATUS_BOOT)
			boot[b++] = (uint32_t)i;
	for (size_t i = 0; i <= nboot; i++) {
		struct ring_view v;
		int64_t *t;
		uint32_t *o;
		if (view_make(r, i ? (int)boot[i - 1] : -1, &v, &t, &o))
			goto done;
		int brc = ring_rmap_build(&v, s, &maps[i]);
		free(t);
		free(o);
		if (brc)
			goto done;
	}
	memcpy(bounds, r->tok, r->ntok * sizeof(*bounds));
	nb = r->ntok;
	for (size_t i = 0; i < nboot; i++) {
		const struct ring_endpoint *e = &r->eps[boot[i]].pub;
		memcpy(bounds + nb, e->tokens, e->num_tokens * sizeof(*bounds));
		nb += e->num_tokens;
	}
	qsort(bounds, nb, sizeof(*bounds), i64_cmp_ring);
	size_t w = 0;
	for (size_t i = 0; i < nb; i++)
		if (w == 0 || bounds[i] != bounds[w - 1])
			bounds[w++] = bounds[i];
	nb = w;
	if (rmap_alloc(out, bounds, nb, 0))
		goto done;
	uint32_t k = 0;
	size_t cap = 1;
	for (size_t i = 0; i < nb; i++) {
		size_t nset = 0, nc, nl;
		const uint32_t *c = rmap_lookup(cur, bounds[i], &nc);
		if (leaving) {
			bool affected = false;
			for (size_t q = 0; q < nc && !affected; q++)
				affected = r->eps[c[q]].pub.status ==
					   RING_STATUS_LEAVING;
			const uint32_t *l =
				rmap_lookup(&maps[0], bounds[i], &nl);
			for (size_t q = 0; affected && q < nl; q++)
				if (!has(c, nc, l[q]))
					set[nset++] = l[q];
		}
		for (size_t bi = 0; bi < nboot; bi++) {
			const uint32_t *l =
				rmap_lookup(&maps[bi + 1], bounds[i], &nl);
			if (has(l, nl, boot[bi]) && !has(set, nset, boot[bi]))
				set[nset++] = boot[bi];
		}
		if (k + nset > cap) {
			size_t ncap = (k + nset) * 2;
			uint32_t *e = realloc(out->eps, ncap * sizeof(*e));
			if (!e) {
				ring_rmap_free(out);
				err_set(ERR_NOMEM, "pending ranges");
				goto done;
			}
			out->eps = e;
			cap = ncap;
		}
		memcpy(out->eps + k, set, nset * sizeof(*set));
		k += (uint32_t)nset;
		out->off[i + 1] = k;
	}
	rc = 0;
done:
	for (size_t i = 0; maps && i <= nboot; i++)
		ring_rmap_free(&maps[i]);
	free(maps);
	free(boot);
	free(bounds);
	free(set);
	return rc;
}

/* ---- placement objects --------------------------------------------------- */

static struct ring_placement *placement_build(const struct ring *r,
					      const struct ring_strategy *s)
{
	struct ring_placement *p = calloc(1, sizeof(*p));
	if (!p) {
		err_set(ERR_NOMEM, "placement");
		return NULL;
	}
	p->ring = r;
	if (s->cls == RING_STRATEGY_LOCAL) {
		p->local_only = true;
		p->local = r->local >= 0 ? (uint32_t)r->local : UINT32_MAX;
		if (rmap_alloc(&p->nat, NULL, 0, 0) ||
		    rmap_alloc(&p->pend, NULL, 0, 0))
			goto fail;
		return p;
	}
	struct ring_view v = {r->ntok, r->tok, r->owner, r};
	if (ring_rmap_build(&v, s, &p->nat))
		goto fail;
	if (r->transitions ? build_pending(r, s, &p->nat, &p->pend)
			   : rmap_alloc(&p->pend, NULL, 0, 0))
		goto fail;
	return p;
fail:
	ring_rmap_free(&p->nat);
	ring_rmap_free(&p->pend);
	free(p);
	return NULL;
}

struct ring_placement *ring_placement_new(const struct ring *r,
					  const struct ring_strategy *s)
{
	struct ring_placement *p = placement_build(r, s);
	if (p) {
		ring_ref((struct ring *)r);
		p->owns_ref = true;
	}
	return p;
}

void ring_placement_delete(struct ring_placement *p)
{
	if (!p)
		return;
	ring_rmap_free(&p->nat);
	ring_rmap_free(&p->pend);
	if (p->owns_ref)
		ring_unref((struct ring *)p->ring);
	free(p);
}

void ring_placement_lookup(const struct ring_placement *p, int64_t token,
			   struct ring_replicas *out)
{
	if (p->local_only) {
		out->natural = &p->local;
		out->n_natural = p->local == UINT32_MAX ? 0 : 1;
		out->pending = NULL;
		out->n_pending = 0;
		return;
	}
	out->natural = rmap_lookup(&p->nat, token, &out->n_natural);
	out->pending = rmap_lookup(&p->pend, token, &out->n_pending);
}

int ring_placement_ranges(const struct ring_placement *p, size_t ep,
			  bool primary_only, bool pending,
			  struct token_range_list *out)
{
	struct token_range_list l = {0};
	const struct rmap *m = pending ? &p->pend : &p->nat;
	if (p->local_only) {
		if (p->local == ep &&
		    token_range_list_push(&l, token_range_make(RING_TOKEN_MIN,
							       RING_TOKEN_MIN)))
			goto fail;
		m = &p->pend; /* empty */
	}
	for (size_t i = 0; i < m->ntok; i++) {
		const uint32_t *v = m->eps + m->off[i];
		size_t n = m->off[i + 1] - m->off[i];
		bool in = primary_only && !pending ? (n > 0 && v[0] == ep)
						   : has(v, n, (uint32_t)ep);
		if (!in)
			continue;
		size_t prev = i == 0 ? m->ntok - 1 : i - 1;
		if (token_range_list_push(
			    &l, token_range_make(m->tok[prev], m->tok[i])))
			goto fail;
	}
	if (token_ranges_normalize(&l))
		goto fail;
	for (size_t i = 0; i < l.n; i++)
		if (token_range_list_push(out, l.v[i]))
			goto fail;
	token_range_list_free(&l);
	return 0;
fail:
	token_range_list_free(&l);
	return -1;
}

static bool same_list(const uint32_t *a, size_t na, const uint32_t *b,
		      size_t nb)
{
	return na == nb && memcmp(a, b, na * sizeof(*a)) == 0;
}

int ring_placement_pieces(const struct ring_placement *p, bool moving,
			  ring_piece_fn each, void *arg)
{
	/* the pending map's bounds hold the ring's when anything moves */
	const struct rmap *m = p->pend.ntok ? &p->pend : &p->nat;
	if (p->local_only || (moving && !p->pend.ntok))
		return 0;
	struct ring_replicas cur = {0}, at;
	bool open = false; /* a piece from `left` is being extended */
	int64_t left = 0;
	for (size_t i = 0; i < m->ntok; i++) {
		int64_t prev = m->tok[i == 0 ? m->ntok - 1 : i - 1];
		at.pending = rmap_lookup(&p->pend, m->tok[i], &at.n_pending);
		at.natural = rmap_lookup(&p->nat, m->tok[i], &at.n_natural);
		if (open && !(same_list(at.natural, at.n_natural, cur.natural,
					cur.n_natural) &&
			      same_list(at.pending, at.n_pending, cur.pending,
					cur.n_pending))) {
			int rc = each(arg, token_range_make(left, prev), &cur);
			if (rc)
				return rc;
			open = false;
		}
		if ((at.n_pending || !moving) && !open) {
			open = true;
			left = prev;
			cur = at;
		}
	}
	return open ? each(arg, token_range_make(left, m->tok[m->ntok - 1]),
			   &cur)
		    : 0;
}

const struct ring_placement *ring_placement_get(const struct ring *r,
						const struct ring_strategy *s)
{
	struct ring *rw = (struct ring *)r; /* the cache is the only state */
	const char *key = ring_strategy_describe(s);
	for (struct placement_cache *c = atomic_load(&rw->cache); c;
	     c = c->next)
		if (strcmp(c->key, key) == 0)
			return c->p;
	pthread_mutex_lock(&rw->cache_lock);
	struct placement_cache *c;
	for (c = atomic_load(&rw->cache); c; c = c->next)
		if (strcmp(c->key, key) == 0)
			break;
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c || !(c->key = strdup(key)) ||
		    !(c->p = placement_build(r, s))) {
			if (c)
				free(c->key);
			free(c);
			c = NULL;
			err_set(ERR_NOMEM, "placement cache");
		} else {
			c->next = atomic_load(&rw->cache);
			atomic_store(&rw->cache, c);
		}
	}
	pthread_mutex_unlock(&rw->cache_lock);
	return c ? c->p : NULL;
}

int ring_replicas_for_token(const struct ring *r, const struct ring_strategy *s,
			    int64_t token, struct ring_replicas *out)
{
	const struct ring_placement *p = ring_placement_get(r, s);
	if (!p)
		return -1;
	ring_placement_lookup(p, token, out);
	return 0;
}
