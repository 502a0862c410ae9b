/*
 * Keyspace and table descriptors.
 */
#include "storage/schema.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

void storage_table_options_default(struct storage_table_options *o)
{
	memset(o, 0, sizeof(*o));
	o->compression = STORAGE_COMPRESSION_LZ4;
	o->chunk_length = 16 * 1024;
	o->bloom_filter_fp_chance = 0.01;
	o->gc_grace_seconds = 864000;
	o->compaction = STORAGE_COMPACTION_SIZE_TIERED;
	o->min_threshold = 4;
	o->max_threshold = 32;
	o->compaction_window_seconds = 86400;
	o->tombstone_threshold = 0.2;
	o->tombstone_compaction_interval = 86400;
	o->unchecked_tombstone_compaction = false;
	o->sstable_size_bytes = 160ull << 20;
	o->fanout_size = 10;
}

static char *dup_str(const char *s)
{
	char *d = strdup(s ? s : "");
	if (!d)
		err_set(ERR_NOMEM, "strdup");
	return d;
}

struct storage_table_meta *storage_table_meta_new(const char *keyspace,
						  const char *name,
						  const uint8_t id[16])
{
	struct storage_table_meta *t = calloc(1, sizeof(*t));
	if (!t) {
		err_set(ERR_NOMEM, "table meta");
		return NULL;
	}
	memcpy(t->id, id, 16);
	atomic_init(&t->refs, 1);
	t->keyspace = dup_str(keyspace);
	t->name = dup_str(name);
	storage_table_options_default(&t->options);
	if (!t->keyspace || !t->name) {
		storage_table_meta_delete(t);
		return NULL;
	}
	return t;
}

void storage_table_meta_delete(struct storage_table_meta *t)
{
	if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	for (size_t i = 0; i < t->column_count; i++) {
		free(t->columns[i].name);
		storage_type_unref(t->columns[i].type);
	}
	free(t->columns);
	storage_table_meta_clear_indexes(t);
	free(t->keyspace);
	free(t->name);
	free(t);
}

const struct storage_table_meta *
storage_table_meta_ref(const struct storage_table_meta *t)
{
	/* refs is the one field that changes once a meta is shared */
	if (t)
		atomic_fetch_add(&((struct storage_table_meta *)t)->refs, 1);
	return t;
}

void storage_table_meta_unref(const struct storage_table_meta *t)
{
	storage_table_meta_delete((struct storage_table_meta *)t);
}

int storage_table_meta_add_column(struct storage_table_meta *t,
				  const char *name,
				  enum storage_column_kind kind,
				  const struct storage_type *type, bool desc)
{
	if (!type || !storage_type_kind_name(type->kind))
		return err_set(ERR_INVALID, "column %s: unknown type", name);
	if (t->column_count >= 0xfff0)
		return err_set(ERR_INVALID, "too many columns");
	if (kind == STORAGE_COLUMN_PARTITION_KEY && t->pk_count >= 16)
		return err_set(ERR_INVALID, "too many partition key columns");
	if (kind == STORAGE_COLUMN_CLUSTERING && t->ck_count >= 32)
		return err_set(ERR_INVALID, "too many clustering columns");
	if ((kind == STORAGE_COLUMN_PARTITION_KEY ||
	     kind == STORAGE_COLUMN_CLUSTERING) &&
	    storage_type_is_multicell(type))
		return err_set(ERR_INVALID,
			       "column %s: key collections "
			       "must be frozen",
			       name);
	if ((kind == STORAGE_COLUMN_PARTITION_KEY ||
	     kind == STORAGE_COLUMN_CLUSTERING) &&
	    type->kind == STORAGE_TYPE_COUNTER)
		return err_set(ERR_INVALID, "column %s: a counter in the key",
			       name);
	struct storage_column *cols =
		realloc(t->columns, (t->column_count + 1) * sizeof(*cols));
	if (!cols)
		return err_set(ERR_NOMEM, "columns");
	t->columns = cols;
	char *n = dup_str(name);
	if (!n)
		return -1;
	const struct storage_type *held = storage_type_hold(type);
	if (!held) {
		free(n);
		return -1;
	}
	uint16_t num = (uint16_t)t->column_count;
	struct storage_column *c = &cols[num];
	memset(c, 0, sizeof(*c));
	c->name = n;
	c->kind = (uint8_t)kind;
	c->type = held;
	c->desc = desc;
	c->dropped_at = INT64_MIN;
	if (kind == STORAGE_COLUMN_PARTITION_KEY) {
		c->position = (uint16_t)t->pk_count;
		t->pk[t->pk_count++] = num;
	} else if (kind == STORAGE_COLUMN_CLUSTERING) {
		c->position = (uint16_t)t->ck_count;
		t->ck[t->ck_count++] = num;
	}
	t->column_count++;
	return num;
}

struct storage_table_meta *
storage_table_meta_clone(const struct storage_table_meta *t)
{
	struct storage_table_meta *c =
		storage_table_meta_new(t->keyspace, t->name, t->id);
	if (!c)
		return NULL;
	for (size_t i = 0; i < t->column_count; i++) {
		const struct storage_column *col = &t->columns[i];
		if (storage_table_meta_add_column(c, col->name, col->kind,
						  col->type, col->desc) < 0) {
			storage_table_meta_delete(c);
			return NULL;
		}
		c->columns[i].dropped = col->dropped;
		c->columns[i].dropped_at = col->dropped_at;
	}
	c->options = t->options;
	for (size_t i = 0; i < t->index_count; i++) {
		const struct storage_index *ix = &t->indexes[i];
		if (storage_table_meta_add_index(c, ix->name, ix->column,
						 ix->target,
						 ix->analyzer) != 0) {
			storage_table_meta_delete(c);
			return NULL;
		}
	}
	return c;
}

int storage_table_meta_add_index(struct storage_table_meta *t, const char *name,
				 size_t column,
				 enum storage_index_target target,
				 unsigned analyzer)
{
	if (column >= t->column_count || target > STORAGE_INDEX_FULL || !name ||
	    !*name || strlen(name) > 255 || strchr(name, '/'))
		return err_set(ERR_INVALID, "index %s: bad column or name",
			       name ? name : "");
	if (storage_table_meta_index(t, name))
		return err_set(ERR_INVALID, "index %s exists", name);
	struct storage_index *v =
		realloc(t->indexes, (t->index_count + 1) * sizeof(*v));
	if (!v)
		return err_set(ERR_NOMEM, "indexes");
	t->indexes = v;
	char *n = dup_str(name);
	if (!n)
		return -1;
	v[t->index_count++] = (struct storage_index){
		.name = n,
		.column = (uint16_t)column,
		.target = (uint8_t)target,
		.analyzer = (uint8_t)analyzer,
	};
	return 0;
}

void storage_table_meta_clear_indexes(struct storage_table_meta *t)
{
	for (size_t i = 0; i < t->index_count; i++)
		free(t->indexes[i].name);
	free(t->indexes);
	t->indexes = NULL;
	t->index_count = 0;
}

const struct storage_index *
storage_table_meta_index(const struct storage_table_meta *t, const char *name)
{
	for (size_t i = 0; t && name && i < t->index_count; i++)
		if (strcmp(t->indexes[i].name, name) == 0)
			return &t->indexes[i];
	return NULL;
}

/* Whether values of `a` are read correctly as `b`: the same type, except
 * that a user type may have gained fields at its end and renamed its
 * fields (ALTER TYPE), at any depth. */
static bool type_successor(const struct storage_type *a,
			   const struct storage_type *b, int depth)
{
	if (a->kind != STORAGE_TYPE_UDT || b->kind != STORAGE_TYPE_UDT ||
	    depth > STORAGE_TYPE_MAX_DEPTH) {
		if (a->kind != b->kind || a->count != b->count ||
		    a->frozen != b->frozen || a->dimension != b->dimension)
			return false;
		for (size_t i = 0; i < a->count; i++)
			if (!type_successor(a->sub[i], b->sub[i], depth + 1))
				return false;
		return true;
	}
	if (a->frozen != b->frozen || b->count < a->count ||
	    strcmp(a->keyspace, b->keyspace) != 0 ||
	    strcmp(a->name, b->name) != 0)
		return false;
	for (size_t i = 0; i < a->count; i++)
		if (!type_successor(a->sub[i], b->sub[i], depth + 1))
			return false;
	return true;
}

int storage_table_meta_check_successor(const struct storage_table_meta *prev,
				       const struct storage_table_meta *next)
{
	if (memcmp(prev->id, next->id, 16) != 0 ||
	    strcmp(prev->keyspace, next->keyspace) != 0 ||
	    strcmp(prev->name, next->name) != 0)
		return err_set(ERR_INVALID, "table %s.%s: not the same table",
			       prev->keyspace, prev->name);
	if (next->column_count < prev->column_count ||
	    next->pk_count != prev->pk_count ||
	    next->ck_count != prev->ck_count)
		return err_set(ERR_INVALID,
			       "table %s.%s: columns removed or key changed",
			       prev->keyspace, prev->name);
	for (size_t i = 0; i < prev->column_count; i++) {
		const struct storage_column *a = &prev->columns[i];
		const struct storage_column *b = &next->columns[i];
		if (a->kind != b->kind || a->desc != b->desc ||
		    a->position != b->position ||
		    !type_successor(a->type, b->type, 0) ||
		    (a->dropped && !b->dropped))
			return err_set(ERR_INVALID,
				       "table %s.%s: column %zu (%s) changed",
				       prev->keyspace, prev->name, i, a->name);
	}
	for (size_t i = prev->column_count; i < next->column_count; i++) {
		uint8_t k = next->columns[i].kind;
		if (k != STORAGE_COLUMN_REGULAR && k != STORAGE_COLUMN_STATIC)
			return err_set(ERR_INVALID,
				       "table %s.%s: key column added",
				       prev->keyspace, prev->name);
	}
	return 0;
}

struct storage_keyspace_meta *storage_keyspace_meta_new(const char *name,
							bool durable_writes)
{
	struct storage_keyspace_meta *k = calloc(1, sizeof(*k));
	if (!k || !(k->name = dup_str(name))) {
		free(k);
		err_set(ERR_NOMEM, "keyspace meta");
		return NULL;
	}
	k->durable_writes = durable_writes;
	return k;
}

void storage_keyspace_meta_delete(struct storage_keyspace_meta *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->replication_count; i++) {
		free(k->replication_keys[i]);
		free(k->replication_values[i]);
	}
	free(k->replication_keys);
	free(k->replication_values);
	free(k->replication_class);
	free(k->name);
	free(k);
}

int storage_keyspace_meta_set_replication(struct storage_keyspace_meta *k,
					  const char *key, const char *value)
{
	if (strcmp(key, "class") == 0) {
		char *v = dup_str(value);
		if (!v)
			return -1;
		free(k->replication_class);
		k->replication_class = v;
		return 0;
	}
	size_t n = k->replication_count;
	char **keys = realloc(k->replication_keys, (n + 1) * sizeof(*keys));
	if (!keys)
		return err_set(ERR_NOMEM, "replication");
	k->replication_keys = keys;
	char **vals = realloc(k->replication_values, (n + 1) * sizeof(*vals));
	if (!vals)
		return err_set(ERR_NOMEM, "replication");
	k->replication_values = vals;
	char *kk = dup_str(key), *vv = dup_str(value);
	if (!kk || !vv) {
		free(kk);
		free(vv);
		return -1;
	}
	keys[n] = kk;
	vals[n] = vv;
	k->replication_count = n + 1;
	return 0;
}

int storage_column_read_as(const struct storage_table_meta *t, size_t column,
			   int64_t ts)
{
	while (t && column < t->column_count) {
		const struct storage_column *c = &t->columns[column];
		if (ts <= c->dropped_at)
			return -1;
		if (!c->dropped)
			return (int)column;
		/* the slot re-added under this name after the drop, if any */
		size_t next = column + 1;
		while (next < t->column_count &&
		       strcmp(t->columns[next].name, c->name) != 0)
			next++;
		column = next;
	}
	return -1;
}
