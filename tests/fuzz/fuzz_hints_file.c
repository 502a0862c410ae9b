/* libFuzzer: a hint file image parsed as the store reads it. Must never
 * crash, and must find the same records whether the file arrives whole or
 * in chunks of any size (the first input byte picks the chunk size). */
#include "replication/hints_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct digest {
	uint64_t records;
	uint64_t sum; /* of offsets, lengths and creation times */
	uint64_t good_end;
};

static void parse(const uint8_t *file, size_t size, size_t chunk,
		  struct digest *d)
{
	struct hints_cursor c = {0};
	memset(d, 0, sizeof(*d));
	uint64_t boff = 0;
	size_t blen = 0;
	for (;;) {
		struct hints_record rec;
		size_t need = 0;
		enum hints_parse_result r =
			hints_parse_next(&c, blen ? file + boff : NULL, boff,
					 blen, size, &rec, &need, NULL, NULL);
		if (r == HINTS_PARSE_END)
			break;
		if (r == HINTS_PARSE_RECORD) {
			d->records++;
			d->sum += rec.off * 31 + rec.len * 7 +
				  (uint64_t)rec.created_us;
			continue;
		}
		/* What a reader does: read max(need, chunk) at the cursor. */
		size_t want = need > chunk ? need : chunk;
		if (want > size - c.off)
			want = size - (size_t)c.off;
		if (want < need)
			abort(); /* the parser asked past the end */
		boff = c.off;
		blen = want;
	}
	d->good_end = c.good_end;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t chunk = 1 + data[0] % 64;
	const uint8_t *file = data + 1;
	size--;
	struct digest whole, pieces;
	parse(file, size, size ? size : 1, &whole);
	parse(file, size, chunk, &pieces);
	if (memcmp(&whole, &pieces, sizeof(whole)) != 0)
		abort();
	return 0;
}
