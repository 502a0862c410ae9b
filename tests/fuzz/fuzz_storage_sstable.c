/* libFuzzer: the SSTable decoders. The first byte picks one:
 *   0: a block image (checksum, decompression) then its data entries
 *   1: index entries (partition index, deletion info, row index)
 *   2: a raw data block's entries without the block envelope
 *   0xfd, 0xfe, 0xff: a Statistics.db body of version 1, 2, 3 (the
 *   tombstone histogram's bounds and order are checked)
 *   0xfc: a Statistics.db body of version 5, its column layout checked
 *   against a table's (sst_layout_check, what import trusts)
 * Must never crash, whatever the bytes. */
#include "storage/block_internal.h"
#include "storage/schema.h"
#include "storage/sstable_internal.h"
#include "storage/types.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_atom(void *arg, const struct atom *a)
{
	(void)arg;
	return a->ck.len == 0; /* decoded atoms always have a clustering */
}

/* ks.t (pk text, c int DESC, s int static, v blob), made once. */
static const struct storage_table_meta *layout_table(void)
{
	static struct storage_table_meta *t;
	if (t)
		return t;
	uint8_t id[16] = {0xf2};
	t = storage_table_meta_new("ks", "t", id);
	if (!t)
		abort();
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tb = {.kind = STORAGE_TYPE_BLOB};
	if (storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
					  &tx, false) < 0 ||
	    storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING,
					  &ti, true) < 0 ||
	    storage_table_meta_add_column(t, "s", STORAGE_COLUMN_STATIC, &ti,
					  false) < 0 ||
	    storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &tb,
					  false) < 0)
		abort();
	return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	if (data[0] == 0xfc) {
		struct sst_stats *st = malloc(sizeof(*st));
		struct slice layout;
		if (st && sst_stats_decode_layout(p, n, 5, st, &layout) == 0)
			(void)sst_layout_check(layout.ptr, layout.len,
					       layout_table());
		/* the layout alone too: most inputs fail the stats first */
		(void)sst_layout_check(p, n, layout_table());
		free(st);
	} else if (data[0] >= 0xfd) {
		struct sst_stats *st = malloc(sizeof(*st));
		if (st && sst_stats_decode(p, n, (uint8_t)(data[0] - 0xfc),
					   st) == 0) {
			if (st->tomb_hist.count > TOMB_HIST_BINS)
				abort();
			for (size_t i = 1; i < st->tomb_hist.count; i++)
				if (st->tomb_hist.point[i] <=
				    st->tomb_hist.point[i - 1])
					abort();
			(void)sst_droppable_ratio(st, INT64_MAX);
		}
		free(st);
	} else if (data[0] % 3 == 0) {
		uint8_t *raw;
		size_t len;
		if (storage_block_decode(p, n, &raw, &len) == 0) {
			sst_block_walk(raw, len, on_atom, NULL);
			free(raw);
		}
	} else if (data[0] % 3 == 1) {
		struct cursor c = cursor_make(p, n);
		struct sst_entry e;
		while (cursor_left(&c) && sst_entry_decode(&c, &e) == 0)
			sst_entry_free(&e);
	} else {
		sst_block_walk(p, n, on_atom, NULL);
	}
	return 0;
}
