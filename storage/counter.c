/*
 * Counter cells as shards (storage.h, counters): building delta and shard
 * atoms, the leader's read-modify-write step, and the checks a counter
 * atom must pass before it is stored.
 */
#include "storage/counter_internal.h"
#include "storage/mutation_internal.h"
#include "storage/storage.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

static const uint8_t zero_id[STORAGE_COUNTER_ID_LEN];

static int counter_column(const struct storage_mutation *m, int column)
{
	if (!m->meta || column < 0 || (size_t)column >= m->meta->column_count)
		return err_set(ERR_INVALID, "no column %d", column);
	if (m->meta->columns[column].type->kind != STORAGE_TYPE_COUNTER)
		return err_set(ERR_INVALID, "column %s is not a counter",
			       m->meta->columns[column].name);
	return 0;
}

static int put_shard(struct storage_mutation *m, int column,
		     const uint8_t id[16], int64_t clock, int64_t count)
{
	if (counter_column(m, column))
		return -1;
	uint8_t v[8];
	be64_store(v, (uint64_t)count);
	return storage_mutation_put(m, column, id, STORAGE_COUNTER_ID_LEN, v,
				    sizeof(v), clock, 0, 0);
}

int storage_mutation_put_counter_delta(struct storage_mutation *m, int column,
				       int64_t delta)
{
	return put_shard(m, column, zero_id, 0, delta);
}

int storage_mutation_put_counter_shard(struct storage_mutation *m, int column,
				       const uint8_t id[16], int64_t clock,
				       int64_t count)
{
	if (!memcmp(id, zero_id, sizeof(zero_id)))
		return err_set(ERR_INVALID, "counter shard of host id zero");
	return put_shard(m, column, id, clock, count);
}

static bool is_delta(const struct atom *a)
{
	return a->slot != ATOM_SLOT_ROW && a->kind == ATOM_KIND_LIVE &&
	       !(a->flags & ATOM_TOMBSTONE) &&
	       a->path.len == STORAGE_COUNTER_ID_LEN &&
	       !memcmp(a->path.ptr, zero_id, sizeof(zero_id));
}

bool storage_mutation_has_counter_deltas(const struct storage_mutation *m)
{
	for (size_t i = 0; i < m->atom_count; i++)
		if (is_delta(&m->atoms[i]))
			return true;
	return false;
}

int storage_counter_atom_check(const struct storage_column *col,
			       const struct atom *a)
{
	if (a->path.len != STORAGE_COUNTER_ID_LEN)
		return err_set(ERR_INVALID,
			       "column %s: a counter shard needs a 16-byte "
			       "host id (%zu)",
			       col->name, a->path.len);
	if (a->flags & ATOM_TOMBSTONE)
		return 0;
	if (!memcmp(a->path.ptr, zero_id, sizeof(zero_id)))
		return err_set(ERR_INVALID,
			       "column %s: a counter delta is never stored",
			       col->name);
	if (a->flags & ATOM_EXPIRING)
		return err_set(ERR_INVALID,
			       "column %s: a counter shard "
			       "cannot expire",
			       col->name);
	if (a->value.len != 8)
		return err_set(ERR_INVALID,
			       "column %s: Expected 8 byte counter shard "
			       "(%zu)",
			       col->name, a->value.len);
	return 0;
}

/* The live shard of `id` for the cell of `d` (same clustering and slot) in
 * `cur`, or NULL. */
static const struct atom *find_shard(const struct storage_mutation *cur,
				     const struct atom *d, const uint8_t id[16])
{
	if (!cur)
		return NULL;
	for (size_t i = 0; i < cur->atom_count; i++) {
		const struct atom *a = &cur->atoms[i];
		if (a->slot != d->slot || a->kind != ATOM_KIND_LIVE ||
		    (a->flags & ATOM_TOMBSTONE) || a->value.len != 8 ||
		    a->path.len != STORAGE_COUNTER_ID_LEN ||
		    memcmp(a->path.ptr, id, STORAGE_COUNTER_ID_LEN) ||
		    !slice_eq(a->ck, d->ck))
			continue;
		return a;
	}
	return NULL;
}

struct storage_mutation *
storage_counter_resolve(const struct storage_table_meta *t,
			const struct storage_mutation *deltas,
			const struct storage_mutation *current,
			const uint8_t host_id[16], int64_t now_us)
{
	if (!memcmp(host_id, zero_id, sizeof(zero_id))) {
		err_set(ERR_INVALID, "counter leader without a host id");
		return NULL;
	}
	struct storage_mutation *out = storage_mutation_new_token(
		t, deltas->key.ptr, deltas->key.len, deltas->token);
	if (!out)
		return NULL;
	out->pdel = deltas->pdel;
	for (size_t i = 0; i < deltas->rt_count; i++)
		if (storage_mutation_push_rtomb(out, &deltas->rts[i]))
			goto fail;
	for (size_t i = 0; i < deltas->atom_count; i++) {
		const struct atom *d = &deltas->atoms[i];
		if (!is_delta(d)) {
			if (storage_mutation_push_atom(out, d))
				goto fail;
			continue;
		}
		if (d->value.len != 8) {
			err_set(ERR_INVALID, "malformed counter delta");
			goto fail;
		}
		int64_t clock = 0, count = 0;
		const struct atom *old = find_shard(current, d, host_id);
		if (old) {
			clock = old->ts;
			count = (int64_t)be64_load(old->value.ptr);
		}
		int64_t delta = (int64_t)be64_load(d->value.ptr);
		clock = clock < INT64_MAX - 1 && clock + 1 > now_us ? clock + 1
								    : now_us;
		uint8_t v[8];
		be64_store(v, (uint64_t)(int64_t)((uint64_t)count +
						  (uint64_t)delta));
		struct atom n = *d;
		n.path = slice_make(host_id, STORAGE_COUNTER_ID_LEN);
		n.value = slice_make(v, sizeof(v));
		n.ts = clock;
		if (storage_mutation_push_atom(out, &n))
			goto fail;
	}
	return out;
fail:
	storage_mutation_delete(out);
	return NULL;
}

static int ck_slot_cmp(const void *a, const void *b)
{
	const struct slice *x = a, *y = b;
	return slice_cmp(*x, *y);
}

int storage_counter_read_cmd(const struct storage_table_meta *t,
			     const struct storage_mutation *m, struct arena *a,
			     struct storage_read_cmd *cmd)
{
	memset(cmd, 0, sizeof(*cmd));
	uint8_t *key = arena_alloc(a, m->key.len ? m->key.len : 1);
	if (!key)
		return err_set(ERR_NOMEM, "counter read");
	memcpy(key, m->key.ptr, m->key.len);
	cmd->key = key;
	cmd->key_len = m->key.len;
	cmd->with_static = true;
	if (!t->ck_count || m->pdel.ts != DELETION_NONE || m->rt_count)
		return 0;
	/* the distinct clusterings of regular rows, in the table's order */
	struct slice *cks =
		calloc(m->atom_count ? m->atom_count : 1, sizeof(*cks));
	if (!cks)
		return err_set(ERR_NOMEM, "counter read");
	size_t n = 0;
	for (size_t i = 0; i < m->atom_count; i++)
		if (m->atoms[i].ck.len && m->atoms[i].ck.ptr[0] == CK_ROW)
			cks[n++] = m->atoms[i].ck;
	if (!n) {
		free(cks); /* the static row only: read it all */
		return 0;
	}
	qsort(cks, n, sizeof(*cks), ck_slot_cmp);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (!u || !slice_eq(cks[u - 1], cks[i]))
			cks[u++] = cks[i];
	/* sort by the table's order so the slices ascend */
	for (size_t i = 1; i < u; i++)
		for (size_t j = i;
		     j > 0 && storage_ck_cmp(t, cks[j - 1], cks[j]) > 0; j--) {
			struct slice tmp = cks[j];
			cks[j] = cks[j - 1];
			cks[j - 1] = tmp;
		}
	struct storage_slice *sl = arena_alloc(a, u * sizeof(*sl));
	if (!sl)
		goto nomem;
	for (size_t i = 0; i < u; i++) {
		int kind;
		struct slice vals[32];
		int k = storage_ck_decode(cks[i], &kind, vals, 32);
		if (k < 0) {
			free(cks);
			return err_set(ERR_CORRUPT, "malformed clustering");
		}
		struct slice *cv =
			arena_alloc(a, (size_t)(k ? k : 1) * sizeof(*cv));
		if (!cv)
			goto nomem;
		for (int j = 0; j < k; j++) {
			uint8_t *p =
				arena_alloc(a, vals[j].len ? vals[j].len : 1);
			if (!p)
				goto nomem;
			memcpy(p, vals[j].ptr, vals[j].len);
			cv[j] = slice_make(p, vals[j].len);
		}
		sl[i] = (struct storage_slice){.start = cv,
					       .start_count = (size_t)k,
					       .start_incl = true,
					       .end = cv,
					       .end_count = (size_t)k,
					       .end_incl = true};
	}
	free(cks);
	cmd->slices = sl;
	cmd->slice_count = u;
	return 0;
nomem:
	free(cks);
	return err_set(ERR_NOMEM, "counter read");
}
