/* The CAS-register linearizability checker (lincheck.h).
 *
 * Events (calls and returns, sorted by time, a call before a return at the
 * same instant) form a doubly linked list. Walking it from the head: at a
 * call, try to linearize that operation now (it replays on the current
 * value, and the pair (set of linearized ops, value) was not explored
 * before); on success unlink its call and return and restart from the
 * head. Reaching a return means its operation had to be linearized before
 * this point: undo the last choice and try the next event after it. An
 * empty list is a linearization; an empty stack at a return is none. */
#include "tests/sim/lincheck.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct ev {
	struct ev *prev, *next;
	size_t op;
	bool is_call;
	struct ev *match; /* call <-> return */
	uint64_t t;
};

struct frame {
	struct ev *call;
	int64_t state;
};

struct memo {
	uint64_t *keys; /* (words of bitset, state) per slot */
	bool *used;
	size_t slots, count, words;
};

static uint64_t memo_hash(const uint64_t *bits, size_t words, int64_t state)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)state;
	for (size_t i = 0; i < words; i++) {
		h ^= bits[i] + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
		h *= 0xff51afd7ed558ccdULL;
	}
	return h ^ (h >> 33);
}

static bool memo_grow(struct memo *m);

/* Inserts: 1, 0 when it was there, -1 out of memory. */
static int memo_add(struct memo *m, const uint64_t *bits, int64_t state)
{
	if ((m->count + 1) * 2 > m->slots && !memo_grow(m))
		return -1;
	size_t stride = m->words + 1;
	size_t i = memo_hash(bits, m->words, state) & (m->slots - 1);
	for (;; i = (i + 1) & (m->slots - 1)) {
		uint64_t *k = m->keys + i * stride;
		if (!m->used[i]) {
			memcpy(k, bits, m->words * 8);
			k[m->words] = (uint64_t)state;
			m->used[i] = true;
			m->count++;
			return 1;
		}
		if (k[m->words] == (uint64_t)state &&
		    !memcmp(k, bits, m->words * 8))
			return 0;
	}
}

static bool memo_grow(struct memo *m)
{
	size_t ns = m->slots ? m->slots * 2 : 1024, stride = m->words + 1;
	uint64_t *nk = calloc(ns * stride, 8);
	bool *nu = calloc(ns, 1);
	if (!nk || !nu) {
		free(nk);
		free(nu);
		return false;
	}
	struct memo old = *m;
	m->keys = nk;
	m->used = nu;
	m->slots = ns;
	m->count = 0;
	for (size_t i = 0; i < old.slots; i++)
		if (old.used[i])
			memo_add(m, old.keys + i * stride,
				 (int64_t)old.keys[i * stride + m->words]);
	free(old.keys);
	free(old.used);
	return true;
}

/* The register's sequential specification. */
static bool step(const struct lin_op *op, int64_t state, int64_t *next)
{
	*next = state;
	switch (op->kind) {
	case LIN_READ:
		return op->out == state;
	case LIN_WRITE:
		*next = op->a;
		return true;
	case LIN_CAS:
		if (state == op->a) {
			if (op->res == LIN_FAIL)
				return false;
			*next = op->b;
			return true;
		}
		if (op->res == LIN_OK)
			return false;
		return op->res == LIN_UNKNOWN || op->out == state;
	}
	return false;
}

static int ev_cmp(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	if (x->is_call != y->is_call)
		return x->is_call ? -1 : 1;
	return x->op < y->op ? -1 : x->op > y->op;
}

static void lift(struct ev **head, struct ev *call)
{
	struct ev *evs[2] = {call, call->match};
	for (int i = 0; i < 2; i++) {
		struct ev *e = evs[i];
		if (e->prev)
			e->prev->next = e->next;
		else
			*head = e->next;
		if (e->next)
			e->next->prev = e->prev;
	}
}

static void unlift(struct ev **head, struct ev *call)
{
	struct ev *evs[2] = {call->match, call};
	for (int i = 0; i < 2; i++) {
		struct ev *e = evs[i];
		if (e->prev)
			e->prev->next = e;
		else
			*head = e;
		if (e->next)
			e->next->prev = e;
	}
}

enum lin_verdict lin_check(const struct lin_op *ops, size_t n, int64_t init,
			   uint64_t budget, size_t *longest)
{
	if (longest)
		*longest = 0;
	if (n == 0)
		return LIN_LINEARIZABLE;
	struct ev *evs = calloc(2 * n, sizeof(*evs));
	size_t words = (n + 63) / 64;
	uint64_t *bits = calloc(words, 8);
	struct frame *stack = calloc(n, sizeof(*stack));
	struct memo memo = {.words = words};
	enum lin_verdict v = LIN_GAVE_UP;
	if (!evs || !bits || !stack)
		goto out;
	for (size_t i = 0; i < n; i++) {
		evs[2 * i] =
			(struct ev){.op = i, .is_call = true, .t = ops[i].call};
		evs[2 * i + 1] =
			(struct ev){.op = i, .is_call = false, .t = ops[i].ret};
	}
	qsort(evs, 2 * n, sizeof(*evs), ev_cmp);
	/* pair them up after sorting, then link */
	size_t *call_at = calloc(n, sizeof(*call_at));
	if (!call_at)
		goto out;
	for (size_t i = 0; i < 2 * n; i++)
		if (evs[i].is_call)
			call_at[evs[i].op] = i;
	for (size_t i = 0; i < 2 * n; i++) {
		evs[i].prev = i ? &evs[i - 1] : NULL;
		evs[i].next = i + 1 < 2 * n ? &evs[i + 1] : NULL;
		if (!evs[i].is_call) {
			evs[i].match = &evs[call_at[evs[i].op]];
			evs[call_at[evs[i].op]].match = &evs[i];
		}
	}
	free(call_at);
	struct ev *head = &evs[0], *e = head;
	int64_t state = init;
	size_t depth = 0;
	uint64_t steps = 0;
	while (head) {
		if (++steps > budget)
			goto out;
		if (e->is_call) {
			int64_t next;
			const struct lin_op *op = &ops[e->op];
			bool ok = step(op, state, &next);
			if (ok) {
				bits[e->op / 64] |= 1ULL << (e->op % 64);
				int added = memo_add(&memo, bits, next);
				if (added < 0)
					goto out;
				ok = added == 1;
				if (!ok)
					bits[e->op / 64] &=
						~(1ULL << (e->op % 64));
			}
			if (ok) {
				stack[depth++] = (struct frame){e, state};
				if (longest && depth > *longest)
					*longest = depth;
				state = next;
				lift(&head, e);
				e = head;
			} else {
				e = e->next;
			}
			continue;
		}
		/* a return: its operation was not linearized in time */
		if (depth == 0) {
			v = LIN_VIOLATION;
			goto out;
		}
		struct frame f = stack[--depth];
		state = f.state;
		bits[f.call->op / 64] &= ~(1ULL << (f.call->op % 64));
		unlift(&head, f.call);
		e = f.call->next;
	}
	v = LIN_LINEARIZABLE;
out:
	free(evs);
	free(bits);
	free(stack);
	free(memo.keys);
	free(memo.used);
	return v;
}
