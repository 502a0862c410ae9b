/* libFuzzer: mutations of a table of the data model's types as a replica
 * receives them (writes, hints, repair streams, read repair): a non-frozen
 * UDT (one cell per field, paths the be16 field position), a frozen UDT,
 * a tuple clustering column, a duration, a vector, nested frozen
 * collections inside non-frozen ones. The input is a mutation (its CRC
 * fixed up, so the fuzzer reaches the body), decoded against that table:
 *   - storage_mutation_validate accepts or refuses it without crashing;
 *   - storage_mutation_drop_invalid (commitlog replay) leaves a mutation
 *     that validates, or refuses the whole of it;
 *   - a valid one merges (alone and with its merge) into a valid
 *     mutation, digests, and resolves into rows (a full read, and a
 *     reversed slice from a tuple clustering bound). */
#include "common/crc.h"
#include "storage/storage.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S(k) storage_type_simple(STORAGE_TYPE_##k)

static struct storage_table_meta *table(const uint8_t id[16])
{
	struct storage_table_meta *t =
		storage_table_meta_new("ks", "typed", id);
	if (!t)
		return NULL;
	struct storage_type *set_int = storage_type_new_collection(
		STORAGE_TYPE_SET, true, S(INT), NULL);
	struct storage_type *map_it = storage_type_new_collection(
		STORAGE_TYPE_MAP, true, S(INT), S(TEXT));
	const struct storage_type *pair[2] = {S(INT), S(TEXT)};
	struct storage_type *tup = storage_type_new_tuple(pair, 2);
	const char *names[3] = {"street", "zip", "tags"};
	const struct storage_type *fields[3] = {S(TEXT), S(INT), set_int};
	struct storage_type *udt =
		storage_type_new_udt("ks", "addr", names, fields, 3, false);
	struct storage_type *fudt =
		storage_type_new_udt("ks", "addr", names, fields, 3, true);
	struct storage_type *vec = storage_type_new_vector(S(FLOAT), 3);
	struct storage_type *l = storage_type_new_collection(
		STORAGE_TYPE_LIST, false, set_int, NULL);
	struct storage_type *m = storage_type_new_collection(
		STORAGE_TYPE_MAP, false, S(TEXT), tup);
	struct storage_type *s = storage_type_new_collection(
		STORAGE_TYPE_SET, false, map_it, NULL);
	struct storage_type *ft = storage_type_new_collection(
		STORAGE_TYPE_LIST, true, map_it, NULL);
	int rc = !set_int || !map_it || !tup || !udt || !fudt || !vec || !l ||
		 !m || !s || !ft;
	const struct {
		const char *name;
		enum storage_column_kind kind;
		const struct storage_type *type;
	} cols[] = {
		{"pk", STORAGE_COLUMN_PARTITION_KEY, S(BLOB)},
		{"c", STORAGE_COLUMN_CLUSTERING, tup},
		{"st", STORAGE_COLUMN_STATIC, fudt},
		{"a", STORAGE_COLUMN_REGULAR, udt},
		{"f", STORAGE_COLUMN_REGULAR, fudt},
		{"d", STORAGE_COLUMN_REGULAR, S(DURATION)},
		{"v", STORAGE_COLUMN_REGULAR, vec},
		{"l", STORAGE_COLUMN_REGULAR, l},
		{"m", STORAGE_COLUMN_REGULAR, m},
		{"s", STORAGE_COLUMN_REGULAR, s},
		{"ft", STORAGE_COLUMN_REGULAR, ft},
	};
	for (size_t i = 0; !rc && i < sizeof(cols) / sizeof(cols[0]); i++)
		rc = storage_table_meta_add_column(t, cols[i].name,
						   cols[i].kind, cols[i].type,
						   false) < 0;
	storage_type_unref(set_int);
	storage_type_unref(map_it);
	storage_type_unref(tup);
	storage_type_unref(udt);
	storage_type_unref(fudt);
	storage_type_unref(vec);
	storage_type_unref(l);
	storage_type_unref(m);
	storage_type_unref(s);
	storage_type_unref(ft);
	if (rc) {
		storage_table_meta_delete(t);
		return NULL;
	}
	return t;
}

static void resolve(const struct storage_table_meta *t,
		    const struct storage_mutation *m)
{
	/* the tuple (1, 'a') */
	uint8_t b[13] = {0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1, 'a'};
	struct slice v = {b, sizeof(b)};
	struct storage_slice sl = {.start = &v, .start_count = 1};
	struct storage_read_cmd cmds[2] = {
		{.with_static = true},
		{.slices = &sl, .slice_count = 1, .reverse = true, .limit = 2}};
	for (int i = 0; i < 2; i++) {
		struct storage_result *r;
		if (storage_fragment_resolve(t, m, &cmds[i], 1700000000, &r) ==
		    0)
			storage_result_delete(r);
	}
}

static void merged(const struct storage_table_meta *t,
		   struct storage_mutation *m)
{
	struct storage_mutation *one = storage_fragment_merge(t, &m, 1);
	if (!one)
		return;
	if (storage_mutation_validate(t, one) != 0)
		abort(); /* merging valid values made an invalid one */
	struct storage_mutation *in[2] = {m, one};
	struct storage_mutation *two = storage_fragment_merge(t, in, 2);
	uint8_t d[16];
	storage_mutation_digest(one, d);
	resolve(t, m);
	resolve(t, one);
	storage_mutation_delete(two);
	storage_mutation_delete(one);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	uint8_t *copy = malloc(size);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	uint32_t crc = crc32c_mask(crc32c(0, copy, size - 4));
	copy[size - 4] = (uint8_t)(crc >> 24);
	copy[size - 3] = (uint8_t)(crc >> 16);
	copy[size - 2] = (uint8_t)(crc >> 8);
	copy[size - 1] = (uint8_t)crc;
	struct storage_mutation *m = storage_mutation_decode(copy, size);
	struct storage_mutation *m2 = storage_mutation_decode(copy, size);
	free(copy);
	struct storage_table_meta *t =
		m ? table(storage_mutation_table_id(m)) : NULL;
	if (t && storage_mutation_validate(t, m) == 0)
		merged(t, m);
	size_t dropped = 0;
	if (t && m2 && storage_mutation_drop_invalid(t, m2, &dropped) == 0) {
		if (storage_mutation_validate(t, m2) != 0)
			abort(); /* what replay keeps must be valid */
		merged(t, m2);
	}
	storage_table_meta_delete(t);
	storage_mutation_delete(m2);
	storage_mutation_delete(m);
	return 0;
}
