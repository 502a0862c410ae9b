/*
 * Checksums.
 *
 * crc32c (Castagnoli) protects everything we store and send: commitlog
 * records, SSTable blocks, hints, internode frames. It uses the SSE4.2
 * instruction when the CPU has it, else slicing-by-8 tables; both give the
 * same values (the iSCSI / ext4 / leveldb CRC; crc32c("123456789") =
 * 0xe3069283). crc32 (zlib's IEEE polynomial) is for formats that demand it.
 *
 * Both take the running value of a previous call, starting from 0, so a
 * checksum can be built over several pieces.
 */
#ifndef CASSINI_COMMON_CRC_H
#define CASSINI_COMMON_CRC_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(uint32_t crc, const void *data, size_t len);
uint32_t crc32_ieee(uint32_t crc, const void *data, size_t len);

/* The table-driven path alone, so tests can check it against the SSE4.2
 * path on machines that have both. */
uint32_t crc32c_portable(uint32_t crc, const void *data, size_t len);

/* leveldb's masking, for a CRC stored next to the data it covers (a CRC of
 * bytes that themselves contain CRCs is otherwise weak). */
static inline uint32_t crc32c_mask(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
static inline uint32_t crc32c_unmask(uint32_t masked)
{
	uint32_t rot = masked - 0xa282ead8u;
	return (rot >> 17) | (rot << 15);
}

#endif
