/* libFuzzer: the mutation decoder must reject or accept any bytes without
 * crashing, and what it accepts must survive encode -> decode -> encode
 * unchanged (the input itself may use non-canonical varints). */
#include "common/crc.h"
#include "storage/storage.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size)
{
	struct storage_mutation *m = storage_mutation_decode(data, size);
	if (!m)
		return;
	struct buf b, b2;
	buf_init(&b);
	buf_init(&b2);
	if (storage_mutation_encode(m, &b) == 0) {
		struct storage_mutation *m2 =
			storage_mutation_decode(b.data, b.len);
		if (!m2 || storage_mutation_encode(m2, &b2) ||
		    b2.len != b.len || memcmp(b.data, b2.data, b.len) != 0)
			abort();
		storage_mutation_delete(m2);
	}
	buf_free(&b);
	buf_free(&b2);
	storage_mutation_delete(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check(data, size);
	/* The CRC stops almost every random input; also decode the input
	 * with its last four bytes replaced by a valid CRC, so the fuzzer
	 * reaches the body decoder. */
	if (size >= 4) {
		uint8_t *copy = malloc(size);
		if (!copy)
			return 0;
		memcpy(copy, data, size);
		uint32_t crc = crc32c_mask(crc32c(0, copy, size - 4));
		copy[size - 4] = (uint8_t)(crc >> 24);
		copy[size - 3] = (uint8_t)(crc >> 16);
		copy[size - 2] = (uint8_t)(crc >> 8);
		copy[size - 1] = (uint8_t)crc;
		check(copy, size);
		free(copy);
	}
	return 0;
}
