/*
 * writetime(), ttl() and maxwritetime() of a non-frozen collection or user
 * type, as Cassandra 5.0 answers them (ColumnTimestamps): writetime and
 * ttl give a list with one element per cell, in the collection's order
 * (list<bigint>, list<int>; a cell without a TTL is a null element), or
 * one per field of the user type (null for a field without a cell),
 * maxwritetime the greatest write time (bigint); a value with no cell is
 * null.
 */
#include "client/exec/select_internal.h"

#include "common/err.h"

static const struct storage_type leaf_bigint = {.kind = STORAGE_TYPE_BIGINT,
						.origin = STORAGE_TYPE_STATIC};
static const struct storage_type leaf_int = {.kind = STORAGE_TYPE_INT,
					     .origin = STORAGE_TYPE_STATIC};
static const struct storage_type *const bigint_sub[] = {&leaf_bigint};
static const struct storage_type *const int_sub[] = {&leaf_int};
static const struct storage_type list_bigint = {.kind = STORAGE_TYPE_LIST,
						.origin = STORAGE_TYPE_STATIC,
						.count = 1,
						.sub = bigint_sub};
static const struct storage_type list_int = {.kind = STORAGE_TYPE_LIST,
					     .origin = STORAGE_TYPE_STATIC,
					     .count = 1,
					     .sub = int_sub};

const struct storage_type *cql_select_times_type(bool ttl)
{
	return ttl ? &list_int : &list_bigint;
}

/* One cell's write time (bigint) or TTL left (int; null without a TTL);
 * null without a cell. */
static int cell_time(struct buf *out, bool writetime,
		     const struct storage_cell_view *c, int64_t now_sec)
{
	uint8_t b[8];
	if (!c || (!writetime && c->ttl <= 0))
		return cql_write_bytes(out, NULL, -1);
	if (writetime) {
		be64_store(b, (uint64_t)c->ts);
		return cql_write_bytes(out, b, 8);
	}
	int64_t left = c->expiry - now_sec;
	be32_store(b, (uint32_t)(left > 0 ? left : 0));
	return cql_write_bytes(out, b, 4);
}

int cql_select_write_cell_time(struct buf *out, bool writetime,
			       const struct storage_cell_view *c,
			       int64_t now_sec)
{
	return cell_time(out, writetime, c, now_sec);
}

int cql_select_write_cell_times(const struct cql_select_plan *p,
				struct buf *out, const struct out_col *o,
				const struct storage_row_view *src,
				int64_t now_sec)
{
	size_t n = 0;
	int64_t max = INT64_MIN;
	for (size_t i = 0; src && i < src->cell_count; i++)
		if (src->cells[i].column == o->column) {
			n++;
			if (src->cells[i].ts > max)
				max = src->cells[i].ts;
		}
	if (n == 0)
		return cql_write_bytes(out, NULL, -1);
	uint8_t b[8];
	if (o->kind == OUT_MAXWRITETIME) {
		be64_store(b, (uint64_t)max);
		return cql_write_bytes(out, b, 8);
	}
	/* a non-frozen user type: one element per field of the type, null
	 * for a field without a cell (Selection.InputRow's addNoTimestamp) */
	const struct storage_type *t = p->m->columns[o->column].type;
	bool udt = t && t->kind == STORAGE_TYPE_UDT;
	size_t mark = out->len;
	if (buf_put_be32(out, 0) ||
	    buf_put_be32(out, (uint32_t)(udt ? t->count : n)))
		return err_set(ERR_NOMEM, "out of memory encoding rows");
	for (size_t i = 0, f = 0; udt ? f < t->count : i < src->cell_count;
	     udt ? f++ : i++) {
		const struct storage_cell_view *c = NULL;
		if (udt) {
			for (size_t k = 0; !c && k < src->cell_count; k++)
				if (src->cells[k].column == o->column &&
				    src->cells[k].path.len == 2 &&
				    be16_load(src->cells[k].path.ptr) == f)
					c = &src->cells[k];
		} else if (src->cells[i].column == o->column) {
			c = &src->cells[i];
		} else {
			continue;
		}
		if (cell_time(out, o->kind == OUT_WRITETIMES, c, now_sec) != 0)
			return err_set(ERR_NOMEM,
				       "out of memory encoding rows");
	}
	be32_store(out->data + mark, (uint32_t)(out->len - mark - 4));
	return 0;
}
