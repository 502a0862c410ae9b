/* libFuzzer: counter shards as they travel between nodes (a coordinator's
 * deltas to the counter leader, the leader's shards to the replicas, read
 * repair and repair fragments). The input is a be16 length L, then L bytes
 * of a delta mutation, then a replica's current fragment (each with its CRC
 * fixed up, so the fuzzer reaches the body), decoded against a counter
 * table: validating them, the leader's read command, its resolve step, and
 * merging and resolving the result with the fragment must not crash, and a
 * resolved mutation never holds a delta shard. */
#include "common/arena.h"
#include "common/crc.h"
#include "storage/storage.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct storage_table_meta *table(const uint8_t id[16])
{
	struct storage_table_meta *t = storage_table_meta_new("ks", "c", id);
	if (!t)
		return NULL;
	const struct storage_type *blob =
		storage_type_simple(STORAGE_TYPE_BLOB);
	const struct storage_type *i = storage_type_simple(STORAGE_TYPE_INT);
	const struct storage_type *c =
		storage_type_simple(STORAGE_TYPE_COUNTER);
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      blob, false);
	storage_table_meta_add_column(t, "ck", STORAGE_COLUMN_CLUSTERING, i,
				      false);
	storage_table_meta_add_column(t, "s", STORAGE_COLUMN_STATIC, c, false);
	storage_table_meta_add_column(t, "n", STORAGE_COLUMN_REGULAR, c, false);
	storage_table_meta_add_column(t, "m", STORAGE_COLUMN_REGULAR, c, false);
	return t;
}

static struct storage_mutation *decode(const uint8_t *data, size_t size)
{
	if (size < 4)
		return NULL;
	uint8_t *copy = malloc(size);
	if (!copy)
		return NULL;
	memcpy(copy, data, size);
	uint32_t crc = crc32c_mask(crc32c(0, copy, size - 4));
	copy[size - 4] = (uint8_t)(crc >> 24);
	copy[size - 3] = (uint8_t)(crc >> 16);
	copy[size - 2] = (uint8_t)(crc >> 8);
	copy[size - 1] = (uint8_t)crc;
	struct storage_mutation *m = storage_mutation_decode(copy, size);
	free(copy);
	return m;
}

static void resolve(const struct storage_table_meta *t,
		    const struct storage_mutation *m)
{
	struct storage_read_cmd cmd = {.with_static = true};
	struct storage_result *r;
	if (storage_fragment_resolve(t, m, &cmd, 1700000000, &r) == 0)
		storage_result_delete(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t l = (size_t)data[0] << 8 | data[1];
	if (l > size - 2)
		l = size - 2;
	struct storage_mutation *d = decode(data + 2, l);
	struct storage_mutation *cur = decode(data + 2 + l, size - 2 - l);
	struct storage_table_meta *t =
		d ? table(storage_mutation_table_id(d)) : NULL;
	if (!t) {
		storage_mutation_delete(d);
		storage_mutation_delete(cur);
		return 0;
	}
	(void)storage_mutation_validate(t, d);
	(void)storage_mutation_has_counter_deltas(d);
	struct arena a;
	arena_create(&a, 0);
	struct storage_read_cmd cmd;
	if (storage_counter_read_cmd(t, d, &a, &cmd) == 0) {
		struct buf b;
		buf_init(&b);
		(void)storage_read_cmd_encode(&cmd, &b);
		buf_free(&b);
	}
	arena_destroy(&a);
	static const uint8_t host[16] = {7, 7, 7};
	struct storage_mutation *next =
		storage_counter_resolve(t, d, cur, host, 1700000000000000LL);
	if (next) {
		if (storage_mutation_has_counter_deltas(next))
			abort();
		(void)storage_mutation_validate(t, next);
		resolve(t, next);
		if (cur) {
			struct storage_mutation *in[2] = {next, cur};
			struct storage_mutation *m =
				storage_fragment_merge(t, in, 2);
			if (m) {
				resolve(t, m);
				storage_mutation_delete(m);
			}
		}
		storage_mutation_delete(next);
	}
	storage_table_meta_delete(t);
	storage_mutation_delete(d);
	storage_mutation_delete(cur);
	return 0;
}
