/* libFuzzer: the value decoders of composite types (nested collections,
 * tuples, UDTs, durations, vectors) must accept or refuse any bytes
 * without crashing; what validates must normalize, stay valid, normalize
 * to itself again, and compare equal to itself. The first input byte picks
 * the type, the rest is split in two values that must compare
 * antisymmetrically. */
#include "common/buf.h"
#include "storage/types.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S(k) storage_type_simple(STORAGE_TYPE_##k)

static const struct storage_type *types[8];

static void build(void)
{
	struct storage_type *set_int = storage_type_new_collection(
		STORAGE_TYPE_SET, true, S(INT), NULL);
	struct storage_type *list_int = storage_type_new_collection(
		STORAGE_TYPE_LIST, true, S(INT), NULL);
	types[0] = storage_type_new_collection(STORAGE_TYPE_LIST, true, set_int,
					       NULL);
	types[1] = storage_type_new_collection(STORAGE_TYPE_MAP, true, list_int,
					       set_int);
	const struct storage_type *comps[3] = {S(INT), S(TEXT), set_int};
	types[2] = storage_type_new_tuple(comps, 3);
	types[3] = S(DURATION);
	types[4] = storage_type_new_vector(S(FLOAT), 3);
	types[5] = storage_type_new_vector(set_int, 2);
	const char *names[3] = {"a", "b", "c"};
	types[6] = storage_type_new_udt("ks", "u", names, comps, 3, true);
	types[7] = storage_type_new_collection(STORAGE_TYPE_SET, true, types[2],
					       NULL);
	storage_type_unref(set_int);
	storage_type_unref(list_int);
	for (size_t i = 0; i < 8; i++)
		if (!types[i])
			abort();
}

static void check_one(const struct storage_type *t, const uint8_t *v,
		      size_t len)
{
	if (storage_value_validate(t, v, len) != 0)
		return;
	if (storage_type_cmp(t, v, len, v, len) != 0)
		abort();
	struct buf n1, n2;
	buf_init(&n1);
	buf_init(&n2);
	if (storage_value_normalize(t, v, len, &n1) != 0)
		abort();
	const uint8_t *p1 = n1.data ? n1.data : (const uint8_t *)"";
	if (storage_value_validate(t, p1, n1.len) != 0 ||
	    storage_value_normalize(t, p1, n1.len, &n2) != 0 ||
	    n1.len != n2.len || (n1.len && memcmp(n1.data, n2.data, n1.len)))
		abort();
	if (t->kind == STORAGE_TYPE_DURATION) {
		struct storage_duration d, d2;
		struct buf e;
		buf_init(&e);
		if (storage_duration_decode(v, len, &d) != 0 ||
		    storage_duration_encode(&d, &e) != 0 ||
		    storage_duration_decode(e.data, e.len, &d2) != 0 ||
		    d.months != d2.months || d.days != d2.days ||
		    d.nanos != d2.nanos)
			abort();
		buf_free(&e);
	}
	buf_free(&n1);
	buf_free(&n2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!types[0])
		build();
	if (size < 1)
		return 0;
	const struct storage_type *t = types[data[0] % 8];
	const uint8_t *v = data + 1;
	size_t len = size - 1;
	check_one(t, v, len);
	size_t half = len / 2;
	check_one(t, v, half);
	check_one(t, v + half, len - half);
	int a = storage_type_cmp(t, v, half, v + half, len - half);
	int b = storage_type_cmp(t, v + half, len - half, v, half);
	if ((a > 0) != (b < 0) || (a == 0) != (b == 0))
		abort();
	return 0;
}
