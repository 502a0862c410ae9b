/* libFuzzer: the SSTable decoders. The first byte picks one:
 *   0: a block image (checksum, decompression) then its data entries
 *   1: index entries (partition index, deletion info, row index)
 *   2: a raw data block's entries without the block envelope
 *   0xfd, 0xfe, 0xff: a Statistics.db body of version 1, 2, 3 (the
 *   tombstone histogram's bounds and order are checked)
 * Must never crash, whatever the bytes. */
#include "storage/block_internal.h"
#include "storage/sstable_internal.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_atom(void *arg, const struct atom *a)
{
	(void)arg;
	return a->ck.len == 0; /* decoded atoms always have a clustering */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	if (data[0] >= 0xfd) {
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
