/*
 * writetime(), ttl() and maxwritetime() of a non-frozen collection, as
 * Cassandra 5.0 answers them (ColumnTimestamps): writetime and ttl give a
 * list with one element per cell, in the collection's order (list<bigint>,
 * list<int>; a cell without a TTL is a null element), maxwritetime the
 * greatest write time (bigint); a collection with no cell is null.
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

int cql_select_write_cell_times(const struct cql_select_plan *p,
				struct buf *out, const struct out_col *o,
				const struct storage_row_view *src,
				int64_t now_sec)
{
	(void)p;
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
	size_t mark = out->len;
	if (buf_put_be32(out, 0) || buf_put_be32(out, (uint32_t)n))
		return err_set(ERR_NOMEM, "out of memory encoding rows");
	for (size_t i = 0; i < src->cell_count; i++) {
		const struct storage_cell_view *c = &src->cells[i];
		if (c->column != o->column)
			continue;
		int rc;
		if (o->kind == OUT_WRITETIMES) {
			be64_store(b, (uint64_t)c->ts);
			rc = cql_write_bytes(out, b, 8);
		} else if (c->ttl <= 0) {
			rc = cql_write_bytes(out, NULL, -1);
		} else {
			int64_t left = c->expiry - now_sec;
			be32_store(b, (uint32_t)(left > 0 ? left : 0));
			rc = cql_write_bytes(out, b, 4);
		}
		if (rc)
			return err_set(ERR_NOMEM,
				       "out of memory encoding rows");
	}
	be32_store(out->data + mark, (uint32_t)(out->len - mark - 4));
	return 0;
}
