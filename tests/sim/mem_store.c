/* In-memory partition store for repair simulations (mem_store.h). */
#include "tests/sim/mem_store.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static int part_cmp(const void *x, const void *y)
{
	const struct storage_mutation *a = *(struct storage_mutation *const *)x;
	const struct storage_mutation *b = *(struct storage_mutation *const *)y;
	int64_t ta = storage_mutation_token(a), tb = storage_mutation_token(b);
	if (ta != tb)
		return ta < tb ? -1 : 1;
	return slice_cmp(storage_mutation_key(a), storage_mutation_key(b));
}

struct storage_mutation **mem_store_find(struct mem_store *s, struct slice key)
{
	for (size_t i = 0; i < s->nparts; i++)
		if (slice_eq(storage_mutation_key(s->parts[i]), key))
			return &s->parts[i];
	return NULL;
}

void mem_store_apply(struct mem_store *s, const struct storage_mutation *m)
{
	struct storage_mutation **p =
		mem_store_find(s, storage_mutation_key(m));
	struct storage_mutation *in[2] = {p ? *p : NULL,
					  (struct storage_mutation *)m};
	struct storage_mutation *merged =
		storage_fragment_merge(s->meta, p ? in : in + 1, p ? 2 : 1);
	ck_assert_ptr_nonnull(merged);
	if (p) {
		storage_mutation_delete(*p);
		*p = merged;
		return;
	}
	ck_assert_uint_lt(s->nparts, MEM_STORE_MAX);
	s->parts[s->nparts++] = merged;
	qsort(s->parts, s->nparts, sizeof(*s->parts), part_cmp);
}

int mem_store_scan(const struct mem_store *s, int64_t start, int64_t end,
		   repair_scan_each_fn each, void *arg)
{
	for (size_t i = 0; i < s->nparts; i++) {
		int64_t t = storage_mutation_token(s->parts[i]);
		if (t <= start || t > end ||
		    storage_mutation_is_empty(s->parts[i]))
			continue;
		if (each(arg, s->parts[i]))
			return -1;
	}
	return 0;
}

void mem_store_clear(struct mem_store *s)
{
	for (size_t i = 0; i < s->nparts; i++)
		storage_mutation_delete(s->parts[i]);
	s->nparts = 0;
}

bool mem_store_same(const struct mem_store *a, const struct mem_store *b)
{
	if (a->nparts != b->nparts)
		return false;
	for (size_t k = 0; k < a->nparts; k++) {
		uint8_t da[16], db[16];
		storage_mutation_digest(a->parts[k], da);
		storage_mutation_digest(b->parts[k], db);
		if (memcmp(da, db, 16))
			return false;
	}
	return true;
}

struct storage_table_meta *mem_store_table_new(const uint8_t id[16])
{
	struct storage_table_meta *t = storage_table_meta_new("ks", "t", id);
	ck_assert_ptr_nonnull(t);
	struct storage_type text = {.kind = STORAGE_TYPE_TEXT};
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &text, false);
	storage_table_meta_add_column(t, "ck", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &text,
				      false);
	return t;
}
