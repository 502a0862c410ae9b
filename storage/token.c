/*
 * MurmurHash3_x64_128 as Cassandra's org.apache.cassandra.utils.MurmurHash
 * (hash3_x64_128) computes it. Differences from the reference C version:
 * the tail bytes are read as signed Java bytes and sign-extended before
 * shifting. Blocks are read little-endian.
 *
 * To be replaced by ring/murmur3.h when it lands.
 */
#include "storage/token.h"

static inline uint64_t rotl64(uint64_t v, int n)
{
	return (v << n) | (v >> (64 - n));
}

static inline uint64_t fmix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* A Java byte widened to long: sign-extended. */
static inline uint64_t sx(uint8_t b)
{
	return (uint64_t)(int64_t)(int8_t)b;
}

void storage_murmur3_128(const uint8_t *key, size_t len, uint64_t seed,
			 uint64_t out[2])
{
	const uint64_t c1 = 0x87c37b91114253d5ULL;
	const uint64_t c2 = 0x4cf5ad432745937fULL;
	uint64_t h1 = seed, h2 = seed;
	size_t nblocks = len / 16;

	for (size_t i = 0; i < nblocks; i++) {
		uint64_t k1 = load_le64(key + i * 16);
		uint64_t k2 = load_le64(key + i * 16 + 8);
		k1 *= c1;
		k1 = rotl64(k1, 31);
		k1 *= c2;
		h1 ^= k1;
		h1 = rotl64(h1, 27);
		h1 += h2;
		h1 = h1 * 5 + 0x52dce729;
		k2 *= c2;
		k2 = rotl64(k2, 33);
		k2 *= c1;
		h2 ^= k2;
		h2 = rotl64(h2, 31);
		h2 += h1;
		h2 = h2 * 5 + 0x38495ab5;
	}

	const uint8_t *tail = key + nblocks * 16;
	uint64_t k1 = 0, k2 = 0;
	switch (len & 15) {
	case 15: k2 ^= sx(tail[14]) << 48; /* fall through */
	case 14: k2 ^= sx(tail[13]) << 40; /* fall through */
	case 13: k2 ^= sx(tail[12]) << 32; /* fall through */
	case 12: k2 ^= sx(tail[11]) << 24; /* fall through */
	case 11: k2 ^= sx(tail[10]) << 16; /* fall through */
	case 10: k2 ^= sx(tail[9]) << 8;   /* fall through */
	case 9:
		k2 ^= sx(tail[8]);
		k2 *= c2;
		k2 = rotl64(k2, 33);
		k2 *= c1;
		h2 ^= k2;
		/* fall through */
	case 8: k1 ^= sx(tail[7]) << 56; /* fall through */
	case 7: k1 ^= sx(tail[6]) << 48; /* fall through */
	case 6: k1 ^= sx(tail[5]) << 40; /* fall through */
	case 5: k1 ^= sx(tail[4]) << 32; /* fall through */
	case 4: k1 ^= sx(tail[3]) << 24; /* fall through */
	case 3: k1 ^= sx(tail[2]) << 16; /* fall through */
	case 2: k1 ^= sx(tail[1]) << 8;  /* fall through */
	case 1:
		k1 ^= sx(tail[0]);
		k1 *= c1;
		k1 = rotl64(k1, 31);
		k1 *= c2;
		h1 ^= k1;
		break;
	default:
		break;
	}

	h1 ^= (uint64_t)len;
	h2 ^= (uint64_t)len;
	h1 += h2;
	h2 += h1;
	h1 = fmix(h1);
	h2 = fmix(h2);
	h1 += h2;
	h2 += h1;
	out[0] = h1;
	out[1] = h2;
}

int64_t storage_token(const uint8_t *key, size_t len)
{
	uint64_t h[2];
	storage_murmur3_128(key, len, 0, h);
	int64_t t = (int64_t)h[0];
	return t == INT64_MIN ? INT64_MAX : t;
}
