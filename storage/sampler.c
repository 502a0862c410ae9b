/*
 * nodetool toppartitions' and profileload's samplers: per table, the
 * partitions read and written most often during a sampling window (READS,
 * WRITES), by Space-Saving (Metwally,
 * Agrawal, El Abbadi: "Efficient computation of frequent and top-k
 * elements in data streams"): `capacity` counters; a key not counted
 * takes over the smallest counter, whose count it inherits as its error.
 * Every key counted more than n/capacity times is kept, and each count
 * overestimates by at most its error (nodetool's "+/-"). The other kinds
 * keep the `capacity` operations with the largest figure (Cassandra's
 * MaxSampler): a figure of 0 is not kept, a larger one takes over the
 * smallest kept.
 *
 * Off the hot path when not sampling: reads and writes make one relaxed
 * load of the table's flag word; while sampling they take each sampler's
 * mutex (reads run on several threads).
 */
#include "storage/engine_internal.h"

#include "common/err.h"
#include "storage/mutation_internal.h"

#include <stdlib.h>
#include <string.h>

struct topk_entry {
	uint8_t *key;
	size_t len;
	uint64_t hash;
	uint64_t count, error;
};

struct storage_sampler {
	pthread_mutex_t mu;
	bool active;          /* under mu; t->sampling mirrors it */
	bool max;             /* largest figures, not Space-Saving */
	struct topk_entry *e; /* capacity of them, n used */
	size_t n, capacity;
	uint32_t *slots; /* open addressing: index + 1, 0 empty */
	size_t nslots;   /* a power of two, >= 2 * capacity */
};

static uint64_t key_hash(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static size_t slot_of(const struct storage_sampler *s, const uint8_t *key,
		      size_t len, uint64_t h)
{
	size_t i = (size_t)h & (s->nslots - 1);
	for (;; i = (i + 1) & (s->nslots - 1)) {
		uint32_t x = s->slots[i];
		if (!x)
			return i;
		const struct topk_entry *e = &s->e[x - 1];
		if (e->hash == h && e->len == len && !memcmp(e->key, key, len))
			return i;
	}
}

/* Removes entry `idx`'s slot (backward-shift deletion). */
static void slot_remove(struct storage_sampler *s, size_t idx)
{
	const struct topk_entry *e = &s->e[idx];
	size_t i = slot_of(s, e->key, e->len, e->hash);
	s->slots[i] = 0;
	size_t mask = s->nslots - 1;
	for (size_t j = (i + 1) & mask; s->slots[j]; j = (j + 1) & mask) {
		size_t home = (size_t)s->e[s->slots[j] - 1].hash & mask;
		/* j's entry may move to i if its home is not in (i, j] */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			s->slots[i] = s->slots[j];
			s->slots[j] = 0;
			i = j;
		}
	}
}

static void insert(struct storage_sampler *s, const uint8_t *key, size_t len)
{
	uint64_t h = key_hash(key, len);
	size_t i = slot_of(s, key, len, h);
	if (s->slots[i]) {
		s->e[s->slots[i] - 1].count++;
		return;
	}
	size_t idx;
	uint64_t base = 0;
	if (s->n < s->capacity) {
		idx = s->n;
	} else {
		/* the smallest counter is taken over */
		idx = 0;
		for (size_t k = 1; k < s->n; k++)
			if (s->e[k].count < s->e[idx].count)
				idx = k;
		base = s->e[idx].count;
		slot_remove(s, idx);
		i = slot_of(s, key, len, h);
	}
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy)
		return; /* a sample lost, never the operation */
	memcpy(copy, key, len);
	if (idx == s->n)
		s->n++;
	else
		free(s->e[idx].key);
	s->e[idx] = (struct topk_entry){.key = copy,
					.len = len,
					.hash = h,
					.count = base + 1,
					.error = base};
	s->slots[i] = (uint32_t)idx + 1;
}

/* The largest figures: `value` kept if there is room or it beats the
 * smallest kept (which it replaces). */
static void insert_max(struct storage_sampler *s, const uint8_t *key,
		       size_t len, uint64_t value)
{
	if (!value)
		return;
	size_t idx = s->n;
	if (s->n == s->capacity) {
		idx = 0;
		for (size_t k = 1; k < s->n; k++)
			if (s->e[k].count < s->e[idx].count)
				idx = k;
		if (s->e[idx].count >= value)
			return;
	}
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy)
		return; /* a sample lost, never the operation */
	memcpy(copy, key, len);
	if (idx == s->n)
		s->n++;
	else
		free(s->e[idx].key);
	s->e[idx] = (struct topk_entry){
		.key = copy, .len = len, .count = value, .error = 0};
}

static void sample(struct table *t, unsigned on, int kind, const uint8_t *key,
		   size_t len, uint64_t value)
{
	if (!(on & (1u << kind)))
		return;
	struct storage_sampler *s = t->samplers[kind];
	pthread_mutex_lock(&s->mu);
	if (s->active && s->max)
		insert_max(s, key, len, value);
	else if (s->active)
		insert(s, key, len);
	pthread_mutex_unlock(&s->mu);
}

void storage_engine_sample_read(struct table *t, const uint8_t *key, size_t len,
				uint64_t rows, uint64_t tombstones,
				uint64_t sstables)
{
	unsigned on = atomic_load_explicit(&t->sampling, memory_order_relaxed);
	sample(t, on, STORAGE_SAMPLE_READS, key, len, 1);
	sample(t, on, STORAGE_SAMPLE_READ_ROW_COUNT, key, len, rows);
	sample(t, on, STORAGE_SAMPLE_READ_TOMBSTONE_COUNT, key, len,
	       tombstones);
	sample(t, on, STORAGE_SAMPLE_READ_SSTABLE_COUNT, key, len, sstables);
}

void storage_engine_sample_write(struct table *t,
				 const struct storage_mutation *m)
{
	unsigned on = atomic_load_explicit(&t->sampling, memory_order_relaxed);
	sample(t, on, STORAGE_SAMPLE_WRITES, m->key.ptr, m->key.len, 1);
	if (on & (1u << STORAGE_SAMPLE_WRITE_SIZE))
		sample(t, on, STORAGE_SAMPLE_WRITE_SIZE, m->key.ptr, m->key.len,
		       storage_mutation_size(m));
}

static void clear(struct storage_sampler *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->e[i].key);
	free(s->e);
	free(s->slots);
	s->e = NULL;
	s->slots = NULL;
	s->n = s->capacity = s->nslots = 0;
}

void storage_engine_samplers_free(struct table *t)
{
	for (int k = 0; k < STORAGE_SAMPLERS; k++) {
		struct storage_sampler *s = t->samplers[k];
		if (!s)
			continue;
		clear(s);
		pthread_mutex_destroy(&s->mu);
		free(s);
	}
}

int storage_sample_begin(struct storage *db, const uint8_t table_id[16],
			 unsigned kinds, size_t capacity)
{
	if (capacity < 1 || capacity > STORAGE_SAMPLE_MAX_CAPACITY)
		return err_set(ERR_INVALID, "sampler capacity out of range");
	struct table *t = storage_engine_table_get(db, table_id);
	if (!t)
		return -1;
	int rc = 0;
	/* the samplers are made once, under the engine's lock, and live
	 * as long as the table */
	pthread_mutex_lock(&db->mu);
	for (int k = 0; !rc && k < STORAGE_SAMPLERS; k++) {
		if (!(kinds & (1u << k)) || t->samplers[k])
			continue;
		struct storage_sampler *s = calloc(1, sizeof(*s));
		if (!s) {
			rc = err_set(ERR_NOMEM, "sampler");
			break;
		}
		pthread_mutex_init(&s->mu, NULL);
		t->samplers[k] = s;
	}
	for (int k = 0; !rc && k < STORAGE_SAMPLERS; k++)
		if ((kinds & (1u << k)) &&
		    (atomic_load(&t->sampling) & (1u << k)))
			rc = err_set(ERR_INVALID, "already sampling");
	pthread_mutex_unlock(&db->mu);
	unsigned started = 0;
	for (int k = 0; !rc && k < STORAGE_SAMPLERS; k++) {
		if (!(kinds & (1u << k)))
			continue;
		struct storage_sampler *s = t->samplers[k];
		size_t nslots = 4;
		while (nslots < 2 * capacity)
			nslots <<= 1;
		pthread_mutex_lock(&s->mu);
		clear(s);
		s->e = calloc(capacity, sizeof(*s->e));
		s->slots = calloc(nslots, sizeof(*s->slots));
		if (!s->e || !s->slots) {
			clear(s);
			rc = err_set(ERR_NOMEM, "sampler of %zu", capacity);
		} else {
			s->capacity = capacity;
			s->nslots = nslots;
			s->active = true;
			s->max = k != STORAGE_SAMPLE_READS &&
				 k != STORAGE_SAMPLE_WRITES;
			atomic_fetch_or_explicit(&t->sampling, 1u << k,
						 memory_order_relaxed);
			started |= 1u << k;
		}
		pthread_mutex_unlock(&s->mu);
	}
	for (int k = 0; rc && k < STORAGE_SAMPLERS; k++)
		if (started & (1u << k)) { /* none half-started */
			uint64_t n, card;
			storage_sample_finish(db, table_id, k, 0, NULL, &n,
					      &card);
		}
	storage_engine_table_unref(t);
	return rc;
}

static int by_count(const void *a, const void *b)
{
	const struct storage_sample *x = a, *y = b;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return 0;
}

int storage_sample_finish(struct storage *db, const uint8_t table_id[16],
			  int kind, size_t k, struct storage_sample **out,
			  uint64_t *n, uint64_t *cardinality)
{
	if (out)
		*out = NULL;
	*n = *cardinality = 0;
	struct table *t = storage_engine_table_get(db, table_id);
	if (!t)
		return -1;
	struct storage_sampler *s = t->samplers[kind];
	int rc = 0;
	if (s) {
		pthread_mutex_lock(&s->mu);
		atomic_fetch_and_explicit(&t->sampling, ~(1u << kind),
					  memory_order_relaxed);
		s->active = false;
		*cardinality = s->n;
		struct storage_sample *r =
			out && s->n ? calloc(s->n, sizeof(*r)) : NULL;
		if (out && s->n && !r)
			rc = err_set(ERR_NOMEM, "samples");
		for (size_t i = 0; r && i < s->n; i++) {
			/* the keys move to the answer */
			r[i] = (struct storage_sample){.key = s->e[i].key,
						       .key_len = s->e[i].len,
						       .count = s->e[i].count,
						       .error = s->e[i].error};
			s->e[i].key = NULL;
		}
		size_t got = r ? s->n : 0;
		clear(s);
		pthread_mutex_unlock(&s->mu);
		if (r) {
			qsort(r, got, sizeof(*r), by_count);
			for (size_t i = k; i < got; i++)
				free(r[i].key);
			*n = got < k ? got : k;
			*out = r;
		}
	}
	storage_engine_table_unref(t);
	return rc;
}

void storage_samples_free(struct storage_sample *s, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		free(s[i].key);
	free(s);
}
