#include "common/crc.h"

#include <pthread.h>
#include <string.h>
#include <zlib.h>

/* Reflected Castagnoli polynomial. */
#define CRC32C_POLY 0x82f63b78u

/* The hardware path runs three independent crc32 chains over three
 * stretches of CRC_STRIDE bytes (one chain is bound by the instruction's
 * latency, three use its throughput) and joins them: with the register
 * not inverted the CRC is linear, so crc(s, A||B) = shift(crc(s, A), |B|)
 * ^ crc(0, B), where shift(v, n) = crc(v, n zero bytes) = v * x^(8n) mod
 * P, a linear map tabulated per byte of v. Three stretches cover a 4 KiB
 * SSTable block. */
#define CRC_STRIDE 1360

static uint32_t table[8][256];
static uint32_t shift_tab[4][256]; /* v -> shift(v, CRC_STRIDE), by byte */
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static int have_sse42;

static uint32_t crc32c_sw(uint32_t crc, const uint8_t *p, size_t len);

static void shift_init(void)
{
	static const uint8_t zeros[CRC_STRIDE];
	uint32_t bit[32];
	for (int i = 0; i < 32; i++)
		bit[i] = crc32c_sw(1u << i, zeros, CRC_STRIDE);
	for (int k = 0; k < 4; k++)
		for (uint32_t b = 0; b < 256; b++) {
			uint32_t v = 0;
			for (int i = 0; i < 8; i++)
				if (b & (1u << i))
					v ^= bit[8 * k + i];
			shift_tab[k][b] = v;
		}
}

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1)));
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++) {
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^
				      table[0][table[t - 1][i] & 0xff];
	}
	shift_init();
#if defined(__x86_64__)
	__builtin_cpu_init();
	have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc32c_sw(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
		len--;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= crc; /* little-endian host assumed below */
		crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
		      table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
		      table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		      table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
	return crc;
}

static uint32_t crc32c_shift(uint32_t v)
{
	return shift_tab[0][v & 0xff] ^ shift_tab[1][(v >> 8) & 0xff] ^
	       shift_tab[2][(v >> 16) & 0xff] ^ shift_tab[3][v >> 24];
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(uint32_t crc, const uint8_t *p, size_t len)
{
	uint64_t c = crc;
	while (len >= 3 * CRC_STRIDE) {
		uint64_t c1 = 0, c2 = 0;
		for (size_t i = 0; i < CRC_STRIDE; i += 8) {
			uint64_t w0, w1, w2;
			memcpy(&w0, p + i, 8);
			memcpy(&w1, p + CRC_STRIDE + i, 8);
			memcpy(&w2, p + 2 * CRC_STRIDE + i, 8);
			c = __builtin_ia32_crc32di(c, w0);
			c1 = __builtin_ia32_crc32di(c1, w1);
			c2 = __builtin_ia32_crc32di(c2, w2);
		}
		c = crc32c_shift((uint32_t)c) ^ c1;
		c = crc32c_shift((uint32_t)c) ^ c2;
		p += 3 * CRC_STRIDE;
		len -= 3 * CRC_STRIDE;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = __builtin_ia32_crc32di(c, w);
		p += 8;
		len -= 8;
	}
	uint32_t c32 = (uint32_t)c;
	while (len--)
		c32 = __builtin_ia32_crc32qi(c32, *p++);
	return c32;
}
#endif

uint32_t crc32c(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&table_once, crc32c_init);
	crc = ~crc;
#if defined(__x86_64__)
	if (have_sse42)
		return ~crc32c_hw(crc, data, len);
#endif
	return ~crc32c_sw(crc, data, len);
}

uint32_t crc32_ieee(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;
	/* zlib takes uInt lengths. */
	while (len > 0) {
		uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
		crc = (uint32_t)crc32(crc, p, n);
		p += n;
		len -= n;
	}
	return crc;
}

uint32_t crc32c_portable(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&table_once, crc32c_init);
	return ~crc32c_sw(~crc, data, len);
}
