/*
 * Native protocol v5 segments: the checksummed (and optionally LZ4
 * compressed) frames that carry envelopes once a v5 connection is set up.
 * The layout is in proto.h; the checksums are those of Cassandra's
 * FrameEncoderCrc / FrameEncoderLZ4 and the DataStax drivers.
 */
#include "client/proto/proto.h"

#include "common/crc.h"
#include "common/err.h"

#include <lz4.h>
#include <string.h>

#define CRC24_INIT 0x875060u
#define CRC24_POLY 0x1974f0bu

uint32_t cql_crc24(uint64_t bytes, int len)
{
	uint32_t crc = CRC24_INIT;
	for (int i = 0; i < len; i++) {
		crc ^= (uint32_t)(bytes & 0xff) << 16;
		bytes >>= 8;
		for (int bit = 0; bit < 8; bit++) {
			crc <<= 1;
			if (crc & 0x1000000u)
				crc ^= CRC24_POLY;
		}
	}
	return crc & 0xffffffu;
}

uint32_t cql_segment_crc32(const uint8_t *p, size_t n)
{
	static const uint8_t seed[4] = {0xfa, 0x2d, 0x55, 0xca};
	return crc32_ieee(crc32_ieee(0, seed, sizeof(seed)), p, n);
}

static void store_le(uint8_t *p, uint64_t v, int len)
{
	for (int i = 0; i < len; i++, v >>= 8)
		p[i] = (uint8_t)(v & 0xff);
}

static uint64_t load_le(const uint8_t *p, int len)
{
	uint64_t v = 0;
	for (int i = len - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* One segment of payload p[0, n) (n <= CQL_SEGMENT_MAX_PAYLOAD). */
static int encode_one(struct buf *out, const uint8_t *p, size_t n,
		      bool self_contained, bool lz4)
{
	int hlen = lz4 ? 5 : 3;
	size_t mark = out->len;
	int bound = lz4 ? LZ4_compressBound((int)n) : 0;
	uint8_t *h = buf_extend(out, (size_t)hlen + 3 + n + (size_t)bound + 4);
	if (!h)
		return -1;
	uint8_t *body = h + hlen + 3;
	size_t plen = n;
	uint64_t uncompressed = 0;
	if (lz4 && n > 0) {
		int c = LZ4_compress_default((const char *)p, (char *)body,
					     (int)n, bound);
		if (c > 0 && (size_t)c < n) {
			plen = (size_t)c;
			uncompressed = n;
		}
	}
	if (!uncompressed)
		memcpy(body, p, n);
	uint64_t hdr = plen;
	int flag_at = 17;
	if (lz4) {
		hdr |= uncompressed << 17;
		flag_at = 34;
	}
	if (self_contained)
		hdr |= 1ull << flag_at;
	store_le(h, hdr, hlen);
	store_le(h + hlen, cql_crc24(hdr, hlen), 3);
	store_le(body + plen, cql_segment_crc32(body, plen), 4);
	out->len = mark + (size_t)hlen + 3 + plen + 4;
	return 0;
}

int cql_segment_encode(struct buf *out, const uint8_t *p, size_t n, bool lz4)
{
	size_t mark = out->len;
	if (n <= CQL_SEGMENT_MAX_PAYLOAD)
		return encode_one(out, p, n, true, lz4);
	for (size_t off = 0; off < n; off += CQL_SEGMENT_MAX_PAYLOAD) {
		size_t len = n - off < CQL_SEGMENT_MAX_PAYLOAD
				     ? n - off
				     : CQL_SEGMENT_MAX_PAYLOAD;
		if (encode_one(out, p + off, len, false, lz4) != 0) {
			out->len = mark;
			return -1;
		}
	}
	return 0;
}

enum cql_segment_status cql_segment_decode(const uint8_t *p, size_t n, bool lz4,
					   struct buf *payload, size_t *used,
					   bool *self_contained)
{
	int hlen = lz4 ? 5 : 3;
	if (n < (size_t)hlen + 3)
		return CQL_SEGMENT_PARTIAL;
	uint64_t hdr = load_le(p, hlen);
	uint32_t want = (uint32_t)load_le(p + hlen, 3);
	uint32_t got = cql_crc24(hdr, hlen);
	if (want != got) {
		err_set(ERR_PROTOCOL,
			"Invalid CRC in segment header: read 0x%06x, computed "
			"0x%06x (corrupt frame; closing the connection)",
			want, got);
		return CQL_SEGMENT_CORRUPT;
	}
	size_t plen = (size_t)(hdr & CQL_SEGMENT_MAX_PAYLOAD);
	size_t raw = lz4 ? (size_t)((hdr >> 17) & CQL_SEGMENT_MAX_PAYLOAD) : 0;
	*self_contained = (hdr >> (lz4 ? 34 : 17)) & 1;
	size_t total = (size_t)hlen + 3 + plen + 4;
	if (n < total)
		return CQL_SEGMENT_PARTIAL;
	const uint8_t *body = p + hlen + 3;
	want = (uint32_t)load_le(body + plen, 4);
	got = cql_segment_crc32(body, plen);
	if (want != got) {
		err_set(ERR_PROTOCOL,
			"Invalid CRC in segment payload: read 0x%08x, computed "
			"0x%08x (corrupt frame; closing the connection)",
			want, got);
		return CQL_SEGMENT_CORRUPT;
	}
	if (raw == 0) {
		if (buf_append(payload, body, plen) != 0) {
			err_set(ERR_NOMEM, "out of memory");
			return CQL_SEGMENT_CORRUPT;
		}
	} else {
		uint8_t *dst = buf_extend(payload, raw);
		if (!dst) {
			err_set(ERR_NOMEM, "out of memory");
			return CQL_SEGMENT_CORRUPT;
		}
		int d = LZ4_decompress_safe((const char *)body, (char *)dst,
					    (int)plen, (int)raw);
		if (d < 0 || (size_t)d != raw) {
			payload->len -= raw;
			err_set(ERR_PROTOCOL,
				"Corrupt LZ4 segment: %zu bytes do not "
				"decompress to the %zu the header gives",
				plen, raw);
			return CQL_SEGMENT_CORRUPT;
		}
	}
	*used = total;
	return CQL_SEGMENT_OK;
}
