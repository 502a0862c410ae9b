/* libFuzzer: a commitlog segment image (header, records, sync markers)
 * scanned as replay does, with every mutation record decoded. Must never
 * crash, whatever the bytes. */
#include "storage/commitlog_internal.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_record(void *arg, struct clpos pos, const uint8_t *body,
		     size_t len)
{
	(void)arg;
	(void)pos;
	struct storage_mutation *m = storage_mutation_decode(body, len);
	if (!m)
		return -1;
	storage_mutation_delete(m);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct commitlog_replay_stats st = {0};
	uint64_t bad;
	bool last = size && (data[0] & 1);
	commitlog_scan_segment(data, size, last, on_record, NULL, &st, &bad);
	return 0;
}
