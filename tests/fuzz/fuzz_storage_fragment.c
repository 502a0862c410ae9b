/* libFuzzer: the bytes a coordinator and a replica exchange for replicated
 * reads. The first input byte picks the target:
 *   odd   the rest is a read command (storage_read_cmd_decode): it is
 *         refused or accepted without crashing, and what is accepted
 *         re-encodes to bytes that decode to the same encoding;
 *   even  the rest is a mutation (its CRC fixed up, so the fuzzer reaches
 *         the body) taken as a replica's fragment: merging it, alone and
 *         with its merge, and resolving both into rows must not crash. */
#include "common/arena.h"
#include "common/crc.h"
#include "storage/storage.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_cmd(const uint8_t *data, size_t size)
{
	struct arena a;
	arena_create(&a, 0);
	struct storage_read_cmd cmd;
	if (storage_read_cmd_decode(data, size, &a, &cmd) == 0) {
		struct buf b, b2;
		buf_init(&b);
		buf_init(&b2);
		struct storage_read_cmd again;
		if (storage_read_cmd_encode(&cmd, &b) ||
		    storage_read_cmd_decode(b.data, b.len, &a, &again) ||
		    storage_read_cmd_encode(&again, &b2) || b.len != b2.len ||
		    memcmp(b.data, b2.data, b.len) != 0)
			abort();
		buf_free(&b);
		buf_free(&b2);
	}
	arena_destroy(&a);
}

static struct storage_table_meta *table(const uint8_t id[16])
{
	struct storage_table_meta *t = storage_table_meta_new("ks", "f", id);
	if (!t)
		return NULL;
	struct storage_type blob = {.kind = STORAGE_TYPE_BLOB};
	struct storage_type i = {.kind = STORAGE_TYPE_INT};
	struct storage_type set = STORAGE_TYPE_COLLECTION(
		STORAGE_TYPE_SET, false, storage_type_simple(STORAGE_TYPE_INT));
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &blob, false);
	storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING, &i,
				      true);
	storage_table_meta_add_column(t, "s", STORAGE_COLUMN_STATIC, &i, false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &i,
				      false);
	storage_table_meta_add_column(t, "tags", STORAGE_COLUMN_REGULAR, &set,
				      false);
	return t;
}

static void resolve(const struct storage_table_meta *t,
		    const struct storage_mutation *m)
{
	uint8_t b[4] = {0, 0, 0, 1};
	struct slice v = {b, 4};
	struct storage_slice sl = {.start = &v, .start_count = 1};
	struct storage_read_cmd cmds[2] = {
		{.with_static = true},
		{.slices = &sl, .slice_count = 1, .reverse = true, .limit = 1}};
	for (int i = 0; i < 2; i++) {
		struct storage_result *r;
		if (storage_fragment_resolve(t, m, &cmds[i], 1700000000, &r) ==
		    0)
			storage_result_delete(r);
	}
}

static void fragment(const uint8_t *data, size_t size)
{
	if (size < 4)
		return;
	uint8_t *copy = malloc(size);
	if (!copy)
		return;
	memcpy(copy, data, size);
	uint32_t crc = crc32c_mask(crc32c(0, copy, size - 4));
	copy[size - 4] = (uint8_t)(crc >> 24);
	copy[size - 3] = (uint8_t)(crc >> 16);
	copy[size - 2] = (uint8_t)(crc >> 8);
	copy[size - 1] = (uint8_t)crc;
	struct storage_mutation *m = storage_mutation_decode(copy, size);
	free(copy);
	if (!m)
		return;
	struct storage_table_meta *t = table(storage_mutation_table_id(m));
	struct storage_mutation *merged =
		t ? storage_fragment_merge(t, &m, 1) : NULL;
	if (merged) {
		struct storage_mutation *in[2] = {m, merged};
		struct storage_mutation *again =
			storage_fragment_merge(t, in, 2);
		uint8_t d[16];
		storage_mutation_digest(merged, d);
		resolve(t, m);
		resolve(t, merged);
		storage_mutation_delete(again);
		storage_mutation_delete(merged);
	}
	storage_table_meta_delete(t);
	storage_mutation_delete(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		read_cmd(data + 1, size - 1);
	else
		fragment(data + 1, size - 1);
	return 0;
}
