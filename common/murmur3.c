/*
 * MurmurHash3_x64_128 as Cassandra computes it (see murmur3.h).
 *
 * The compound form streams the components through the same block/tail
 * machinery without building the routing key, so storage and the
 * coordinator can hash multi-column keys without allocating.
 */
#include "common/murmur3.h"

#include "common/err.h"

#include <string.h>

#define C1 0x87c37b91114253d5ULL
#define C2 0x4cf5ad432745937fULL

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t fmix64(uint64_t k)
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
		v = (v << 8) | p[i];
	return v;
}

/* Hash state fed in 16-byte blocks; `pend` holds a partial block. */
struct m3 {
	uint64_t h1, h2;
	uint8_t pend[16];
	size_t npend;
	size_t total;
};

static void m3_block(struct m3 *s, const uint8_t *b)
{
	uint64_t k1 = load_le64(b), k2 = load_le64(b + 8);
	k1 *= C1;
	k1 = rotl64(k1, 31);
	k1 *= C2;
	s->h1 ^= k1;
	s->h1 = rotl64(s->h1, 27);
	s->h1 += s->h2;
	s->h1 = s->h1 * 5 + 0x52dce729;
	k2 *= C2;
	k2 = rotl64(k2, 33);
	k2 *= C1;
	s->h2 ^= k2;
	s->h2 = rotl64(s->h2, 31);
	s->h2 += s->h1;
	s->h2 = s->h2 * 5 + 0x38495ab5;
}

static void m3_init(struct m3 *s, uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->h1 = seed;
	s->h2 = seed;
}

static void m3_update(struct m3 *s, const uint8_t *p, size_t n)
{
	s->total += n;
	if (s->npend) {
		size_t take = 16 - s->npend;
		if (take > n)
			take = n;
		memcpy(s->pend + s->npend, p, take);
		s->npend += take;
		p += take;
		n -= take;
		if (s->npend < 16)
			return;
		m3_block(s, s->pend);
		s->npend = 0;
	}
	while (n >= 16) {
		m3_block(s, p);
		p += 16;
		n -= 16;
	}
	if (n) {
		memcpy(s->pend, p, n);
		s->npend = n;
	}
}

/* Java reads tail bytes as signed bytes and widens them to long before
 * shifting: a byte >= 0x80 sets every higher bit, which the xor keeps. */
static inline uint64_t sext(uint8_t b)
{
	return (uint64_t)(int64_t)(int8_t)b;
}

static void m3_final(struct m3 *s, uint64_t out[2])
{
	uint64_t k1 = 0, k2 = 0;
	const uint8_t *t = s->pend;
	size_t n = s->npend;
	for (size_t i = n; i > 8; i--)
		k2 ^= sext(t[i - 1]) << ((i - 9) * 8);
	if (n > 8) {
		k2 *= C2;
		k2 = rotl64(k2, 33);
		k2 *= C1;
		s->h2 ^= k2;
	}
	for (size_t i = n < 8 ? n : 8; i > 0; i--)
		k1 ^= sext(t[i - 1]) << ((i - 1) * 8);
	if (n > 0) {
		k1 *= C1;
		k1 = rotl64(k1, 31);
		k1 *= C2;
		s->h1 ^= k1;
	}
	s->h1 ^= (uint64_t)s->total;
	s->h2 ^= (uint64_t)s->total;
	s->h1 += s->h2;
	s->h2 += s->h1;
	s->h1 = fmix64(s->h1);
	s->h2 = fmix64(s->h2);
	s->h1 += s->h2;
	s->h2 += s->h1;
	out[0] = s->h1;
	out[1] = s->h2;
}

void murmur3_hash128(const void *key, size_t len, uint64_t seed,
		     uint64_t out[2])
{
	struct m3 s;
	m3_init(&s, seed);
	if (len)
		m3_update(&s, key, len);
	m3_final(&s, out);
}

static int64_t normalize(uint64_t h1)
{
	int64_t t = (int64_t)h1;
	return t == INT64_MIN ? INT64_MAX : t;
}

int64_t murmur3_token(const void *key, size_t len)
{
	uint64_t h[2];
	murmur3_hash128(key, len, 0, h);
	return normalize(h[0]);
}

int64_t murmur3_token_of_hash(const uint64_t hash[2])
{
	return normalize(hash[0]);
}

int murmur3_compound_key(struct buf *dst, const struct slice *parts, size_t n)
{
	size_t need = 0;
	for (size_t i = 0; i < n; i++) {
		if (parts[i].len > 0xffff)
			return err_set(
				ERR_INVALID,
				"partition key component %zu is %zu bytes "
				"(max 65535)",
				i, parts[i].len);
		need += 3 + parts[i].len;
	}
	if (buf_reserve(dst, need) != 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		uint8_t hdr[2] = {(uint8_t)(parts[i].len >> 8),
				  (uint8_t)parts[i].len};
		uint8_t *p = buf_extend(dst, 3 + parts[i].len);
		memcpy(p, hdr, 2);
		if (parts[i].len)
			memcpy(p + 2, parts[i].ptr, parts[i].len);
		p[2 + parts[i].len] = 0;
	}
	return 0;
}

int murmur3_compound_token(const struct slice *parts, size_t n, int64_t *token)
{
	struct m3 s;
	uint64_t h[2];
	m3_init(&s, 0);
	for (size_t i = 0; i < n; i++) {
		if (parts[i].len > 0xffff)
			return err_set(
				ERR_INVALID,
				"partition key component %zu is %zu bytes "
				"(max 65535)",
				i, parts[i].len);
		uint8_t hdr[2] = {(uint8_t)(parts[i].len >> 8),
				  (uint8_t)parts[i].len};
		uint8_t zero = 0;
		m3_update(&s, hdr, 2);
		if (parts[i].len)
			m3_update(&s, parts[i].ptr, parts[i].len);
		m3_update(&s, &zero, 1);
	}
	m3_final(&s, h);
	*token = normalize(h[0]);
	return 0;
}
