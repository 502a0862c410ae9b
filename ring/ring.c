/*
 * The ring object: builder, immutable snapshot, endpoint and token queries.
 *
 * The builder keeps plain copies of what gossip reported; build() sorts
 * endpoints by address, interns dc and rack names, and lays out the sorted
 * token array of NORMAL and LEAVING endpoints. A token claimed by two
 * endpoints is refused rather than guessed at: gossip resolves such
 * conflicts (by generation) before it builds.
 */
#include "ring/ring_internal.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

struct ring_builder {
	size_t n, cap;
	struct ring_endpoint *eps; /* dc, rack, tokens owned */
	bool has_local;
	struct inet_addr local;
};

static void ep_free(struct ring_endpoint *e)
{
	free((char *)e->dc);
	free((char *)e->rack);
	free((int64_t *)e->tokens);
}

static int i64_cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Deep copy with tokens sorted. */
static int ep_copy(struct ring_endpoint *dst, const struct ring_endpoint *src)
{
	memset(dst, 0, sizeof(*dst));
	size_t n = src->num_tokens;
	char *dc = strdup(src->dc), *rack = strdup(src->rack);
	int64_t *t = malloc((n ? n : 1) * sizeof(*t));
	if (!dc || !rack || !t) {
		free(dc);
		free(rack);
		free(t);
		return err_set(ERR_NOMEM, "ring endpoint");
	}
	if (n)
		memcpy(t, src->tokens, n * sizeof(*t));
	qsort(t, n, sizeof(*t), i64_cmp);
	*dst = *src;
	dst->dc = dc;
	dst->rack = rack;
	dst->tokens = t;
	return 0;
}

struct ring_builder *ring_builder_new(void)
{
	struct ring_builder *b = calloc(1, sizeof(*b));
	if (!b)
		err_set(ERR_NOMEM, "ring builder");
	return b;
}

void ring_builder_delete(struct ring_builder *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++)
		ep_free(&b->eps[i]);
	free(b->eps);
	free(b);
}

static int builder_find(const struct ring_builder *b, const struct inet_addr *a)
{
	for (size_t i = 0; i < b->n; i++)
		if (inet_addr_eq(&b->eps[i].addr, a))
			return (int)i;
	return -1;
}

static int validate_name(const char *what, const char *s)
{
	if (!s || !*s)
		return err_set(ERR_INVALID, "endpoint %s is empty", what);
	if (strlen(s) > RING_NAME_MAX)
		return err_set(ERR_INVALID, "endpoint %s is longer than %d",
			       what, RING_NAME_MAX);
	return 0;
}

int ring_builder_set_endpoint(struct ring_builder *b,
			      const struct ring_endpoint *ep)
{
	char a[INET_ADDR_STRLEN];
	if (validate_name("dc", ep->dc) || validate_name("rack", ep->rack))
		return -1;
	if (ep->status != RING_STATUS_NORMAL &&
	    ep->status != RING_STATUS_BOOT && ep->status != RING_STATUS_LEAVING)
		return err_set(ERR_INVALID, "bad endpoint status %d",
			       (int)ep->status);
	if (ep->num_tokens > RING_TOKENS_MAX)
		return err_set(ERR_INVALID, "endpoint has %zu tokens (max %d)",
			       ep->num_tokens, RING_TOKENS_MAX);
	if (ep->num_tokens && !ep->tokens)
		return err_set(ERR_INVALID, "endpoint tokens missing");
	struct ring_endpoint copy;
	if (ep_copy(&copy, ep))
		return -1;
	for (size_t i = 1; i < copy.num_tokens; i++)
		if (copy.tokens[i] == copy.tokens[i - 1]) {
			long long dup = (long long)copy.tokens[i];
			ep_free(&copy);
			return err_set(
				ERR_INVALID,
				"endpoint %s lists token %lld twice",
				inet_addr_format_host(&ep->addr, a, sizeof(a)),
				dup);
		}
	int at = builder_find(b, &ep->addr);
	if (at >= 0) {
		ep_free(&b->eps[at]);
		b->eps[at] = copy;
		return 0;
	}
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 16;
		struct ring_endpoint *v = realloc(b->eps, cap * sizeof(*v));
		if (!v) {
			ep_free(&copy);
			return err_set(ERR_NOMEM, "ring builder");
		}
		b->eps = v;
		b->cap = cap;
	}
	b->eps[b->n++] = copy;
	return 0;
}

int ring_builder_remove_endpoint(struct ring_builder *b,
				 const struct inet_addr *addr)
{
	char a[INET_ADDR_STRLEN];
	int at = builder_find(b, addr);
	if (at < 0)
		return err_set(ERR_NOT_FOUND, "endpoint %s is not in the ring",
			       inet_addr_format_host(addr, a, sizeof(a)));
	ep_free(&b->eps[at]);
	b->eps[at] = b->eps[--b->n];
	return 0;
}

void ring_builder_set_local(struct ring_builder *b,
			    const struct inet_addr *addr)
{
	b->has_local = true;
	b->local = *addr;
}

struct ring_builder *ring_builder_from_ring(const struct ring *r)
{
	struct ring_builder *b = ring_builder_new();
	if (!b)
		return NULL;
	for (size_t i = 0; i < r->nep; i++)
		if (ring_builder_set_endpoint(b, &r->eps[i].pub)) {
			ring_builder_delete(b);
			return NULL;
		}
	b->has_local = r->has_local;
	b->local = r->local_addr;
	return b;
}

/* ---- build --------------------------------------------------------------- */

static void ring_free(struct ring *r)
{
	if (!r)
		return;
	struct placement_cache *c = atomic_load(&r->cache);
	while (c) {
		struct placement_cache *next = c->next;
		ring_placement_delete(c->p);
		free(c->key);
		free(c);
		c = next;
	}
	for (size_t i = 0; i < r->nep; i++)
		ep_free(&r->eps[i].pub);
	free(r->eps);
	for (size_t i = 0; i < r->ndc; i++)
		free(r->dc_names[i]);
	free(r->dc_names);
	free(r->tok);
	free(r->owner);
	pthread_mutex_destroy(&r->cache_lock);
	free(r);
}

static int ep_addr_cmp(const void *a, const void *b)
{
	const struct ring_ep *x = a, *y = b;
	return inet_addr_cmp(&x->pub.addr, &y->pub.addr);
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct tok_owner {
	int64_t t;
	uint32_t ep;
};

static int tok_owner_cmp(const void *a, const void *b)
{
	const struct tok_owner *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->ep < y->ep ? -1 : x->ep > y->ep;
}

/* Interns dc names (sorted) and numbers racks per (dc, rack). */
static int intern_locations(struct ring *r)
{
	r->dc_names = calloc(r->nep ? r->nep : 1, sizeof(char *));
	if (!r->dc_names)
		return err_set(ERR_NOMEM, "ring dcs");
	for (size_t i = 0; i < r->nep; i++) {
		bool seen = false;
		for (size_t d = 0; d < r->ndc && !seen; d++)
			seen = strcmp(r->dc_names[d], r->eps[i].pub.dc) == 0;
		if (seen)
			continue;
		if (!(r->dc_names[r->ndc] = strdup(r->eps[i].pub.dc)))
			return err_set(ERR_NOMEM, "ring dcs");
		r->ndc++;
	}
	qsort(r->dc_names, r->ndc, sizeof(char *), str_cmp);
	for (size_t i = 0; i < r->nep; i++) {
		struct ring_ep *e = &r->eps[i];
		char **hit = bsearch(&e->pub.dc, r->dc_names, r->ndc,
				     sizeof(char *), str_cmp);
		e->dc = (uint32_t)(hit - r->dc_names);
		e->rack = UINT32_MAX;
		for (size_t j = 0; j < i; j++)
			if (r->eps[j].dc == e->dc &&
			    strcmp(r->eps[j].pub.rack, e->pub.rack) == 0) {
				e->rack = r->eps[j].rack;
				break;
			}
		if (e->rack == UINT32_MAX)
			e->rack = (uint32_t)r->nrack++;
	}
	return 0;
}

/* Sorted tokens of NORMAL/LEAVING endpoints; refuses any token held twice,
 * counting BOOT tokens too. */
static int lay_out_tokens(struct ring *r)
{
	size_t all = 0;
	for (size_t i = 0; i < r->nep; i++)
		all += r->eps[i].pub.num_tokens;
	struct tok_owner *v = malloc((all ? all : 1) * sizeof(*v));
	if (!v)
		return err_set(ERR_NOMEM, "ring tokens");
	size_t k = 0;
	for (size_t i = 0; i < r->nep; i++)
		for (size_t j = 0; j < r->eps[i].pub.num_tokens; j++)
			v[k++] = (struct tok_owner){r->eps[i].pub.tokens[j],
						    (uint32_t)i};
	qsort(v, all, sizeof(*v), tok_owner_cmp);
	for (size_t i = 1; i < all; i++)
		if (v[i].t == v[i - 1].t) {
			char a[INET_ADDR_STRLEN], b[INET_ADDR_STRLEN];
			err_set(ERR_INVALID,
				"token %lld is claimed by both %s and %s",
				(long long)v[i].t,
				inet_addr_format_host(
					&r->eps[v[i - 1].ep].pub.addr, a,
					sizeof(a)),
				inet_addr_format_host(&r->eps[v[i].ep].pub.addr,
						      b, sizeof(b)));
			free(v);
			return -1;
		}
	r->tok = malloc((all ? all : 1) * sizeof(*r->tok));
	r->owner = malloc((all ? all : 1) * sizeof(*r->owner));
	if (!r->tok || !r->owner) {
		free(v);
		return err_set(ERR_NOMEM, "ring tokens");
	}
	for (size_t i = 0; i < all; i++) {
		if (r->eps[v[i].ep].pub.status == RING_STATUS_BOOT)
			continue;
		r->tok[r->ntok] = v[i].t;
		r->owner[r->ntok++] = v[i].ep;
	}
	free(v);
	return 0;
}

struct ring *ring_builder_build(const struct ring_builder *b)
{
	struct ring *r = calloc(1, sizeof(*r));
	if (!r) {
		err_set(ERR_NOMEM, "ring");
		return NULL;
	}
	atomic_init(&r->refs, 1);
	atomic_init(&r->cache, NULL);
	pthread_mutex_init(&r->cache_lock, NULL);
	r->local = -1;
	r->has_local = b->has_local;
	r->local_addr = b->local;
	r->eps = calloc(b->n ? b->n : 1, sizeof(*r->eps));
	if (!r->eps) {
		err_set(ERR_NOMEM, "ring");
		goto fail;
	}
	for (size_t i = 0; i < b->n; i++) {
		if (ep_copy(&r->eps[i].pub, &b->eps[i]))
			goto fail;
		r->nep++;
	}
	qsort(r->eps, r->nep, sizeof(*r->eps), ep_addr_cmp);
	for (size_t i = 0; i < r->nep; i++)
		if (r->eps[i].pub.status != RING_STATUS_NORMAL)
			r->transitions = true;
	if (intern_locations(r) || lay_out_tokens(r))
		goto fail;
	if (r->has_local)
		r->local = ring_endpoint_find(r, &r->local_addr);
	return r;
fail:
	ring_free(r);
	return NULL;
}

struct ring *ring_ref(struct ring *r)
{
	atomic_fetch_add(&r->refs, 1);
	return r;
}

void ring_unref(struct ring *r)
{
	if (r && atomic_fetch_sub(&r->refs, 1) == 1)
		ring_free(r);
}

/* ---- queries ------------------------------------------------------------- */

size_t ring_endpoint_count(const struct ring *r)
{
	return r->nep;
}

const struct ring_endpoint *ring_endpoint_get(const struct ring *r, size_t i)
{
	return i < r->nep ? &r->eps[i].pub : NULL;
}

int ring_endpoint_find(const struct ring *r, const struct inet_addr *addr)
{
	size_t lo = 0, hi = r->nep;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = inet_addr_cmp(&r->eps[mid].pub.addr, addr);
		if (c == 0)
			return (int)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

int ring_endpoint_find_host_id(const struct ring *r, const uint8_t host_id[16])
{
	for (size_t i = 0; i < r->nep; i++)
		if (memcmp(r->eps[i].pub.host_id, host_id, 16) == 0)
			return (int)i;
	return -1;
}

int ring_local_endpoint(const struct ring *r)
{
	return r->local;
}

size_t ring_dc_count(const struct ring *r)
{
	return r->ndc;
}

const char *ring_dc_name(const struct ring *r, size_t i)
{
	return i < r->ndc ? r->dc_names[i] : NULL;
}

size_t ring_token_count(const struct ring *r)
{
	return r->ntok;
}

int64_t ring_token_at(const struct ring *r, size_t i)
{
	return r->tok[i];
}

size_t ring_token_owner_at(const struct ring *r, size_t i)
{
	return r->owner[i];
}

struct token_range ring_range_at(const struct ring *r, size_t i)
{
	size_t prev = i == 0 ? r->ntok - 1 : i - 1;
	return token_range_make(r->tok[prev], r->tok[i]);
}

size_t ring_tokens_lower_bound(const int64_t *tok, size_t n, int64_t t)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (tok[mid] < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == n ? 0 : lo;
}

size_t ring_token_index(const struct ring *r, int64_t t)
{
	return ring_tokens_lower_bound(r->tok, r->ntok, t);
}

int ring_owner(const struct ring *r, int64_t t)
{
	if (r->ntok == 0)
		return -1;
	return (int)r->owner[ring_token_index(r, t)];
}

int ring_primary_ranges(const struct ring *r, size_t ep,
			struct token_range_list *out)
{
	size_t before = out->n;
	for (size_t i = 0; i < r->ntok; i++)
		if (r->owner[i] == ep &&
		    token_range_list_push(out, ring_range_at(r, i))) {
			out->n = before;
			return -1;
		}
	return 0;
}
