/*
 * The values of a mutation against its table's column types: what the
 * engine applies is valid whoever built it (this node's CQL layer, a
 * peer's internode write, a hint, a repair stream), so nothing invalid
 * reaches a memtable, an SSTable or a client.
 *
 * Checked: each partition key component, each clustering value (rows and
 * range tombstone bounds), each cell's value (a simple or frozen column's
 * by its type, a non-frozen collection's element by the element type),
 * and each collection path (a set's element or a map's key by the element
 * type; a list's position, a version-1 timeuuid). Tombstones carry no
 * value; their clustering and path are checked like a cell's.
 */
#include "storage/counter_internal.h"
#include "storage/mutation_internal.h"
#include "storage/storage.h"

#include "common/err.h"

#include <string.h>

/* The partition key: the column's value, or the compound form (each
 * component as be16 length, bytes, 0x00). */
static int key_check(const struct storage_table_meta *t, struct slice key)
{
	if (t->pk_count == 1)
		return storage_value_validate(t->columns[t->pk[0]].type,
					      key.ptr, key.len)
			       ? err_prefix("partition key %s",
					    t->columns[t->pk[0]].name)
			       : 0;
	struct cursor c = cursor_make(key.ptr, key.len);
	for (size_t i = 0; i < t->pk_count; i++) {
		const struct storage_column *col = &t->columns[t->pk[i]];
		uint16_t n;
		uint8_t end;
		struct slice v;
		if (cursor_be16(&c, &n) || cursor_take(&c, n, &v) ||
		    cursor_u8(&c, &end) || end != 0)
			return err_set(ERR_INVALID,
				       "malformed compound partition key");
		if (storage_value_validate(col->type, v.ptr, v.len))
			return err_prefix("partition key %s", col->name);
	}
	if (cursor_left(&c))
		return err_set(ERR_INVALID, "malformed compound partition key");
	return 0;
}

struct slice storage_pk_component(const struct storage_table_meta *t,
				  struct slice key, size_t i)
{
	if (t->pk_count == 1)
		return i == 0 ? key : slice_make(NULL, 0);
	struct cursor c = cursor_make(key.ptr, key.len);
	for (size_t k = 0; k < t->pk_count; k++) {
		uint16_t n;
		struct slice s;
		uint8_t end;
		if (cursor_be16(&c, &n) || cursor_take(&c, n, &s) ||
		    cursor_u8(&c, &end) || end != 0)
			break;
		if (k == i)
			return s;
	}
	return slice_make(NULL, 0);
}

/* An encoded clustering or bound: each value by its column's type. */
static int ck_check(const struct storage_table_meta *t, struct slice ck)
{
	int kind;
	struct slice vals[33];
	int n = storage_ck_decode(ck, &kind, vals, 33);
	if (n < 0 || (size_t)n > t->ck_count)
		return err_set(ERR_INVALID, "malformed clustering");
	for (int i = 0; i < n; i++) {
		const struct storage_column *col = &t->columns[t->ck[i]];
		if (storage_value_validate(col->type, vals[i].ptr, vals[i].len))
			return err_prefix("clustering column %s", col->name);
	}
	return 0;
}

static int atom_check(const struct storage_table_meta *t, const struct atom *a)
{
	if (ck_check(t, a->ck))
		return -1;
	if (a->slot == ATOM_SLOT_ROW || a->slot > t->column_count)
		return 0; /* row markers and deletions hold no value */
	const struct storage_column *col = &t->columns[a->slot - 1];
	const struct storage_type *ty = col->type;
	bool multicell = storage_type_is_multicell(ty);
	if (a->kind == ATOM_KIND_DELETION)
		return 0; /* a whole-collection deletion */
	if (ty->kind == STORAGE_TYPE_COUNTER)
		return storage_counter_atom_check(col, a);
	if (multicell && a->path.len) {
		if (storage_value_validate(storage_type_path_type(ty),
					   a->path.ptr, a->path.len))
			return err_prefix("element of %s", col->name);
	}
	if (a->flags & ATOM_TOMBSTONE)
		return 0;
	const struct storage_type *vt = ty;
	if (multicell) {
		if (ty->kind == STORAGE_TYPE_SET)
			return 0; /* the element is the path */
		vt = storage_type_cell_value_type(ty, a->path.ptr, a->path.len);
		if (!vt)
			return err_set(ERR_INVALID,
				       "element of %s: no such field",
				       col->name);
	}
	if (storage_value_validate(vt, a->value.ptr, a->value.len))
		return err_prefix("column %s", col->name);
	return 0;
}

static int rtomb_check(const struct storage_table_meta *t,
		       const struct rtomb *r)
{
	return ck_check(t, r->start) || ck_check(t, r->end) ? -1 : 0;
}

int storage_mutation_validate(const struct storage_table_meta *t,
			      const struct storage_mutation *m)
{
	int rc = key_check(t, m->key);
	for (size_t i = 0; rc == 0 && i < m->atom_count; i++)
		rc = atom_check(t, &m->atoms[i]);
	for (size_t i = 0; rc == 0 && i < m->rt_count; i++)
		rc = rtomb_check(t, &m->rts[i]);
	return rc ? err_prefix("invalid value in a mutation of %s.%s",
			       t->keyspace, t->name)
		  : 0;
}

int storage_mutation_drop_invalid(const struct storage_table_meta *t,
				  struct storage_mutation *m, size_t *dropped)
{
	*dropped = 0;
	if (key_check(t, m->key))
		return err_prefix("invalid value in a mutation of %s.%s",
				  t->keyspace, t->name);
	size_t kept = 0;
	for (size_t i = 0; i < m->atom_count; i++) {
		if (atom_check(t, &m->atoms[i]) == 0)
			m->atoms[kept++] = m->atoms[i];
		else
			++*dropped;
	}
	m->atom_count = kept;
	kept = 0;
	for (size_t i = 0; i < m->rt_count; i++) {
		if (rtomb_check(t, &m->rts[i]) == 0)
			m->rts[kept++] = m->rts[i];
		else
			++*dropped;
	}
	m->rt_count = kept;
	return 0;
}
