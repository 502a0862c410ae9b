/* storage/sai_terms.c: index terms compare bytewise as their values do
 * under the column type's comparator (random values of every numeric,
 * date, time and uuid type, edge values included), text folding, and the
 * terms atoms and keys give each target. */
#include "common/err.h"
#include "storage/sai_internal.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed;
static uint64_t rng;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int sign(int x)
{
	return (x > 0) - (x < 0);
}

static int bytes_cmp(const struct buf *a, const struct buf *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int c = n ? memcmp(a->data, b->data, n) : 0;
	if (c)
		return sign(c);
	return (a->len > b->len) - (a->len < b->len);
}

/* A random value of `kind` into v (len bytes). */
static size_t random_value(uint16_t kind, uint8_t *v)
{
	size_t w = 0;
	switch (kind) {
	case STORAGE_TYPE_TINYINT:
		w = 1;
		break;
	case STORAGE_TYPE_SMALLINT:
		w = 2;
		break;
	case STORAGE_TYPE_INT:
	case STORAGE_TYPE_DATE:
	case STORAGE_TYPE_FLOAT:
		w = 4;
		break;
	case STORAGE_TYPE_BIGINT:
	case STORAGE_TYPE_TIMESTAMP:
	case STORAGE_TYPE_DOUBLE:
		w = 8;
		break;
	case STORAGE_TYPE_TIME: {
		uint64_t x = next() % 86400000000000ull;
		for (int i = 0; i < 8; i++)
			v[i] = (uint8_t)(x >> (56 - 8 * i));
		return 8;
	}
	case STORAGE_TYPE_UUID:
	case STORAGE_TYPE_TIMEUUID:
		w = 16;
		break;
	case STORAGE_TYPE_VARINT:
		w = 1 + next() % 9;
		break;
	}
	for (size_t i = 0; i < w; i++)
		v[i] = (uint8_t)next();
	/* small alphabets so equal values and near ties come up */
	if (next() % 3 == 0)
		for (size_t i = 0; i + 1 < w; i++)
			v[i] = (next() & 1) ? 0xff : 0x00;
	if (kind == STORAGE_TYPE_TIMEUUID)
		v[6] = (uint8_t)(0x10 | (v[6] & 0x0f));
	if (kind == STORAGE_TYPE_UUID && next() % 2)
		v[6] = (uint8_t)(0x10 | (v[6] & 0x0f));
	if (kind == STORAGE_TYPE_FLOAT && next() % 8 == 0) {
		static const uint32_t special[] = {0x80000000u, 0x00000000u,
						   0x7f800000u, 0xff800000u,
						   0x7fc00000u, 0x7fc00001u};
		uint32_t x = special[next() % 6];
		for (int i = 0; i < 4; i++)
			v[i] = (uint8_t)(x >> (24 - 8 * i));
	}
	return w;
}

START_TEST(terms_sort_as_their_type)
{
	static const uint16_t kinds[] = {
		STORAGE_TYPE_TINYINT,   STORAGE_TYPE_SMALLINT,
		STORAGE_TYPE_INT,       STORAGE_TYPE_BIGINT,
		STORAGE_TYPE_TIMESTAMP, STORAGE_TYPE_TIME,
		STORAGE_TYPE_DATE,      STORAGE_TYPE_FLOAT,
		STORAGE_TYPE_DOUBLE,    STORAGE_TYPE_UUID,
		STORAGE_TYPE_TIMEUUID,  STORAGE_TYPE_VARINT,
	};
	rng = seed | 1;
	struct buf ta, tb;
	buf_init(&ta);
	buf_init(&tb);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		const struct storage_type *ty = storage_type_simple(kinds[k]);
		for (int i = 0; i < 20000; i++) {
			uint8_t a[16], b[16];
			size_t al = random_value(kinds[k], a);
			size_t bl = i % 5 == 0 ? (memcpy(b, a, al), al)
					       : random_value(kinds[k], b);
			buf_clear(&ta);
			buf_clear(&tb);
			ck_assert_int_eq(sai_term_encode(ty, false,
							 (struct slice){a, al},
							 &ta),
					 0);
			ck_assert_int_eq(sai_term_encode(ty, false,
							 (struct slice){b, bl},
							 &tb),
					 0);
			int want =
				sign(storage_value_cmp(kinds[k], a, al, b, bl));
			ck_assert_msg(bytes_cmp(&ta, &tb) == want,
				      "kind %u: terms order %d, values %d",
				      kinds[k], bytes_cmp(&ta, &tb), want);
		}
	}
	/* a non-minimal varint is the same term as the minimal one */
	const struct storage_type *vi =
		storage_type_simple(STORAGE_TYPE_VARINT);
	uint8_t x1[] = {0x00, 0x05}, x2[] = {0x05}, y1[] = {0xff, 0xfb},
		y2[] = {0xfb};
	buf_clear(&ta);
	buf_clear(&tb);
	sai_term_encode(vi, false, (struct slice){x1, 2}, &ta);
	sai_term_encode(vi, false, (struct slice){x2, 1}, &tb);
	ck_assert_int_eq(bytes_cmp(&ta, &tb), 0);
	buf_clear(&ta);
	buf_clear(&tb);
	sai_term_encode(vi, false, (struct slice){y1, 2}, &ta);
	sai_term_encode(vi, false, (struct slice){y2, 1}, &tb);
	ck_assert_int_eq(bytes_cmp(&ta, &tb), 0);
	buf_free(&ta);
	buf_free(&tb);
}
END_TEST

/* The analyzer against values computed with Java's / Python's rules
 * (scripts/gen_sai_unicode.py's tables were checked against Python's
 * unicodedata for every code point and 20,000 random strings). */
static void analysed(unsigned an, const char *in, const char *want)
{
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(
		storage_sai_analyze(an, (const uint8_t *)in, strlen(in), &b),
		0);
	ck_assert_msg(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0,
		      "%u '%s': '%.*s', want '%s'", an, in, (int)b.len,
		      (const char *)b.data, want);
	buf_free(&b);
}

START_TEST(text_analysis_as_cassandras)
{
	const unsigned L = STORAGE_SAI_LOWER, N = STORAGE_SAI_NORMALIZE,
		       A = STORAGE_SAI_ASCII;
	analysed(0, "Caf\xc3\xa9", "Caf\xc3\xa9");
	analysed(L, "HeLLo", "hello");
	/* lower case beyond ASCII: É, Ж, Σ (final ς), İ */
	analysed(L, "\xc3\x89T\xc3\x89", "\xc3\xa9t\xc3\xa9");
	analysed(L, "\xd0\x96", "\xd0\xb6");
	analysed(L, "\xce\x9f\xce\xa3 \xce\xa3\xce\x91",
		 "\xce\xbf\xcf\x82 \xcf\x83\xce\xb1");
	analysed(L, "\xc4\xb0", "i\xcc\x87");
	/* NFC: e + U+0301 is é; ordering of marks; Hangul; Angstrom sign */
	analysed(N, "cafe\xcc\x81", "caf\xc3\xa9");
	analysed(N, "a\xcc\xa3\xcc\x82", "\xe1\xba\xad");
	analysed(N, "a\xcc\x82\xcc\xa3", "\xe1\xba\xad");
	analysed(N, "\xe1\x84\x80\xe1\x85\xa1", "\xea\xb0\x80");
	analysed(N, "\xe2\x84\xab", "\xc3\x85");
	analysed(N, "\xd0\xb8\xcc\x86", "\xd0\xb9"); /* и + breve: й */
	analysed(N, "\xce\xb1\xcc\x81", "\xce\xac"); /* α + acute: ά */
	/* ASCII folding; without NFC a decomposed é keeps its mark */
	analysed(A,
		 "Cr\xc3\xa8me Br\xc3\xbbl\xc3\xa9"
		 "e",
		 "Creme Brulee");
	analysed(A,
		 "\xc3\x86gir Stra\xc3\x9f"
		 "e \xc5\x81\xc3\xb3"
		 "d\xc5\xba",
		 "AEgir Strasse Lodz");
	analysed(A, "cafe\xcc\x81", "cafe\xcc\x81");
	analysed(N | A, "cafe\xcc\x81", "cafe");
	analysed(L | N | A,
		 "\xc3\x89"
		 "COLE",
		 "ecole");
	/* not UTF-8: as given */
	analysed(L | N | A, "\xff\xc3", "\xff\xc3");
}
END_TEST

START_TEST(targets_give_their_terms)
{
	uint8_t id[16] = {1};
	struct storage_table_meta *t = storage_table_meta_new("ks", "t", id);
	const struct storage_type *it = storage_type_simple(STORAGE_TYPE_INT);
	const struct storage_type *tx = storage_type_simple(STORAGE_TYPE_TEXT);
	const struct storage_type *subs[] = {it, tx};
	const struct storage_type mt = {
		.kind = STORAGE_TYPE_MAP, .count = 2, .sub = subs};
	const struct storage_type dec = {.kind = STORAGE_TYPE_DECIMAL};
	storage_table_meta_add_column(t, "k", STORAGE_COLUMN_PARTITION_KEY, it,
				      false);
	storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING, it,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, tx,
				      false);
	storage_table_meta_add_column(t, "m", STORAGE_COLUMN_REGULAR, &mt,
				      false);
	storage_table_meta_add_column(t, "d", STORAGE_COLUMN_REGULAR, &dec,
				      false);
	ck_assert_int_eq(storage_table_meta_add_index(
				 t, "vi", 2, STORAGE_INDEX_VALUE, true),
			 0);
	ck_assert_int_eq(storage_table_meta_add_index(
				 t, "mk", 3, STORAGE_INDEX_KEYS, false),
			 0);
	ck_assert_int_eq(storage_table_meta_add_index(
				 t, "mv", 3, STORAGE_INDEX_VALUES, false),
			 0);
	ck_assert_int_eq(storage_table_meta_add_index(
				 t, "me", 3, STORAGE_INDEX_ENTRIES, false),
			 0);
	ck_assert_int_eq(storage_table_meta_add_index(
				 t, "ci", 1, STORAGE_INDEX_VALUE, false),
			 0);
	ck_assert_int_eq(storage_table_meta_add_index(
				 t, "di", 4, STORAGE_INDEX_VALUE, false),
			 0);
	ck_assert_int_ne(storage_table_meta_add_index(
				 t, "vi", 2, STORAGE_INDEX_VALUE, false),
			 0);
	ck_assert(sai_index_exact(t, storage_table_meta_index(t, "vi")));
	ck_assert(!sai_index_exact(t, storage_table_meta_index(t, "di")));

	struct buf a, b;
	buf_init(&a);
	buf_init(&b);
	/* case folding: 'HeLLo' and 'hello' are one term */
	struct slice hi = {(const uint8_t *)"HeLLo", 5};
	struct slice lo = {(const uint8_t *)"hello", 5};
	const struct storage_index *vi = storage_table_meta_index(t, "vi");
	sai_index_term(t, vi, &hi, 1, &a);
	sai_index_term(t, vi, &lo, 1, &b);
	ck_assert_int_eq(bytes_cmp(&a, &b), 0);
	struct atom cell = {.slot = 3, .kind = ATOM_KIND_LIVE, .value = hi};
	ck_assert_int_eq(sai_atom_term(t, vi, &cell, &a), 1);
	ck_assert_int_eq(bytes_cmp(&a, &b), 0);
	cell.flags = ATOM_TOMBSTONE;
	ck_assert_int_eq(sai_atom_term(t, vi, &cell, &a), 0);

	/* a map element: keys() gives its key, values() its value */
	uint8_t four[4] = {0, 0, 0, 4};
	struct atom el = {.slot = 4,
			  .kind = ATOM_KIND_LIVE,
			  .path = {four, 4},
			  .value = lo};
	struct slice k4 = {four, 4};
	ck_assert_int_eq(
		sai_atom_term(t, storage_table_meta_index(t, "mk"), &el, &a),
		1);
	sai_index_term(t, storage_table_meta_index(t, "mk"), &k4, 1, &b);
	ck_assert_int_eq(bytes_cmp(&a, &b), 0);
	ck_assert_int_eq(
		sai_atom_term(t, storage_table_meta_index(t, "mv"), &el, &a),
		1);
	ck_assert_int_eq(a.len, 5);
	/* entries(): the (key, value) pair, given as two values or as one
	 * tuple<key, value> value (m[k] = v's lookup) */
	const struct storage_index *me = storage_table_meta_index(t, "me");
	ck_assert_int_eq(sai_atom_term(t, me, &el, &a), 1);
	struct slice kv[2] = {k4, lo};
	ck_assert_int_eq(sai_index_term(t, me, kv, 2, &b), 0);
	ck_assert_int_eq(bytes_cmp(&a, &b), 0);
	uint8_t pair[4 + 4 + 4 + 5] = {0, 0, 0, 4,   0,   0,   0,   4,  0,
				       0, 0, 5, 'h', 'e', 'l', 'l', 'o'};
	struct slice ps = {pair, sizeof(pair)};
	ck_assert_int_eq(sai_index_term(t, me, &ps, 1, &b), 0);
	ck_assert_int_eq(bytes_cmp(&a, &b), 0);
	ps.len--; /* a value cut short */
	ck_assert_int_eq(sai_index_term(t, me, &ps, 1, &b), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	pair[3] = 5; /* a key one byte longer: the rest does not parse */
	ps.len++;
	ck_assert_int_eq(sai_index_term(t, me, &ps, 1, &b), -1);

	/* a clustering value from any atom of the row */
	struct buf ck;
	buf_init(&ck);
	struct slice cv = {four, 4};
	storage_ck_encode(&ck, CK_ROW, &cv, 1);
	struct atom marker = {
		.ck = {ck.data, ck.len}, .slot = 0, .kind = ATOM_KIND_LIVE};
	ck_assert_int_eq(sai_atom_term(t, storage_table_meta_index(t, "ci"),
				       &marker, &a),
			 1);
	sai_index_term(t, storage_table_meta_index(t, "ci"), &k4, 1, &b);
	ck_assert_int_eq(bytes_cmp(&a, &b), 0);
	buf_free(&ck);
	buf_free(&a);
	buf_free(&b);
	storage_table_meta_delete(t);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("storage_sai_terms");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, terms_sort_as_their_type);
	tcase_add_test(tc, targets_give_their_terms);
	tcase_add_test(tc, text_analysis_as_cassandras);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	seed = test_seed(0x5a1);
	return test_run(suite());
}
