/*
 * The column layout an SSTable was written with, Cassandra's
 * serialization header in our terms: Statistics.db (version 5) records
 * each column slot's name, kind, clustering order and CQL type, so an
 * SSTable brought in from elsewhere (nodetool import, refresh) is read
 * only by a table whose slots mean the same (docs/sstable-format.md).
 *
 *   uvarint count, then per slot:
 *     uvarint name_len, name, u8 kind, u8 flags (1 DESC, 2 dropped),
 *     uvarint type_len, type (storage_type_format's CQL text)
 */
#include "storage/sstable_internal.h"

#include "common/buf.h"
#include "common/err.h"
#include "storage/types.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define LAYOUT_DESC    SST_LAYOUT_DESC
#define LAYOUT_DROPPED SST_LAYOUT_DROPPED

int sst_layout_encode(const struct storage_table_meta *t, struct buf *out)
{
	struct buf type;
	buf_init(&type);
	int rc = buf_put_uvarint(out, t->column_count);
	for (size_t i = 0; i < t->column_count && !rc; i++) {
		const struct storage_column *c = &t->columns[i];
		buf_clear(&type);
		uint8_t flags = (c->desc ? LAYOUT_DESC : 0) |
				(c->dropped ? LAYOUT_DROPPED : 0);
		rc = storage_type_format(c->type, &type) ||
		     buf_put_uvarint(out, strlen(c->name)) ||
		     buf_append(out, c->name, strlen(c->name)) ||
		     buf_put_u8(out, c->kind) || buf_put_u8(out, flags) ||
		     buf_put_uvarint(out, type.len) ||
		     buf_append(out, type.data, type.len);
	}
	buf_free(&type);
	return rc ? err_set(ERR_NOMEM, "sstable layout") : 0;
}

const char *storage_column_kind_name(unsigned kind)
{
	switch (kind) {
	case STORAGE_COLUMN_PARTITION_KEY:
		return "partition key";
	case STORAGE_COLUMN_CLUSTERING:
		return "clustering";
	case STORAGE_COLUMN_STATIC:
		return "static";
	case STORAGE_COLUMN_REGULAR:
		return "regular";
	default:
		return "unknown";
	}
}

static int take_text(struct cursor *c, struct slice *out)
{
	uint64_t n;
	return cursor_uvarint(c, &n) || n > cursor_left(c) ||
	       cursor_take(c, (size_t)n, out);
}

/* Whether the SSTable's slot (kind, flags, name, type text `ty`) reads
 * right as table column `col` (its type text `type`). A dropped slot's
 * cells are never read: its kind must agree, nothing else; key columns
 * may have been renamed. */
static bool slot_reads_as(uint8_t kind, uint8_t flags, struct slice name,
			  struct slice ty, const struct storage_column *col,
			  struct slice type)
{
	if (kind != col->kind)
		return false;
	if (col->dropped)
		return true;
	if (!slice_eq(ty, type))
		return false;
	if (kind == STORAGE_COLUMN_CLUSTERING &&
	    !!(flags & LAYOUT_DESC) != col->desc)
		return false;
	return kind == STORAGE_COLUMN_PARTITION_KEY ||
	       kind == STORAGE_COLUMN_CLUSTERING ||
	       slice_eq(name, slice_from_cstr(col->name));
}

int sst_layout_check(const uint8_t *layout, size_t len,
		     const struct storage_table_meta *t)
{
	struct cursor c = cursor_make(layout, len);
	uint64_t count;
	if (cursor_uvarint(&c, &count))
		return err_set(ERR_CORRUPT, "bad column layout");
	struct buf type;
	buf_init(&type);
	int rc = 0;
	for (uint64_t i = 0; i < count && !rc; i++) {
		struct slice name, ty;
		uint8_t kind, flags;
		if (take_text(&c, &name) || cursor_u8(&c, &kind) ||
		    cursor_u8(&c, &flags) || take_text(&c, &ty)) {
			rc = err_set(ERR_CORRUPT, "bad column layout");
			break;
		}
		if (i >= t->column_count) {
			/* Cassandra's UnknownColumnException */
			rc = err_set(ERR_INVALID,
				     "Unknown column %.*s during "
				     "deserialization (table %s.%s has %zu "
				     "columns, the SSTable %" PRIu64 ")",
				     (int)name.len, (const char *)name.ptr,
				     t->keyspace, t->name, t->column_count,
				     count);
			break;
		}
		const struct storage_column *col = &t->columns[i];
		buf_clear(&type);
		if (storage_type_format(col->type, &type)) {
			rc = err_set(ERR_NOMEM, "sstable layout");
			break;
		}
		if (!slot_reads_as(kind, flags, name, ty, col,
				   slice_make(type.data, type.len)))
			rc = err_set(
				ERR_INVALID,
				"Column layout mismatch with table %s.%s: "
				"column %" PRIu64 " of the SSTable is %s %.*s "
				"%.*s%s, the table's is %s %s %.*s%s",
				t->keyspace, t->name, i,
				storage_column_kind_name(kind), (int)name.len,
				(const char *)name.ptr, (int)ty.len,
				(const char *)ty.ptr,
				flags & LAYOUT_DESC ? " DESC" : "",
				storage_column_kind_name(col->kind), col->name,
				(int)type.len, (const char *)type.data,
				col->kind == STORAGE_COLUMN_CLUSTERING &&
						col->desc
					? " DESC"
					: "");
	}
	buf_free(&type);
	if (!rc && cursor_left(&c))
		rc = err_set(ERR_CORRUPT, "bad column layout");
	/* every key and clustering column of the table must be there */
	for (size_t i = 0; !rc && i < t->pk_count + t->ck_count; i++) {
		uint16_t slot =
			i < t->pk_count ? t->pk[i] : t->ck[i - t->pk_count];
		if (slot >= count)
			rc = err_set(
				ERR_INVALID,
				"Column layout mismatch with table "
				"%s.%s: the SSTable has no %s column %s",
				t->keyspace, t->name,
				storage_column_kind_name(t->columns[slot].kind),
				t->columns[slot].name);
	}
	return rc;
}

int sst_layout_walk(const uint8_t *layout, size_t len, sst_layout_fn fn,
		    void *arg)
{
	struct cursor c = cursor_make(layout, len);
	uint64_t count;
	if (cursor_uvarint(&c, &count))
		return err_set(ERR_CORRUPT, "bad column layout");
	for (uint64_t i = 0; i < count; i++) {
		struct slice name, ty;
		uint8_t kind, flags;
		if (take_text(&c, &name) || cursor_u8(&c, &kind) ||
		    cursor_u8(&c, &flags) || take_text(&c, &ty))
			return err_set(ERR_CORRUPT, "bad column layout");
		int rc = fn(arg, i, name, kind, flags, ty);
		if (rc)
			return rc;
	}
	return cursor_left(&c) ? err_set(ERR_CORRUPT, "bad column layout") : 0;
}
