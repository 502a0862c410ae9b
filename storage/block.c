/*
 * SSTable block codec (none / LZ4 / Deflate, CRC-protected) and the
 * component envelope. See block_internal.h.
 */
#include "storage/block_internal.h"

#include "common/crc.h"
#include "common/err.h"
#include "storage/schema.h"

#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int storage_block_encode(struct buf *out, uint8_t compression,
			 const uint8_t *raw, size_t len)
{
	buf_clear(out);
	if (len > BLOCK_MAX_RAW)
		return err_set(ERR_INVALID, "block of %zu bytes", len);
	size_t bound = len;
	if (compression == STORAGE_COMPRESSION_LZ4)
		bound = (size_t)LZ4_compressBound((int)len);
	else if (compression == STORAGE_COMPRESSION_DEFLATE)
		bound = compressBound(len);
	uint8_t *p = buf_extend(out, BLOCK_HEADER + bound + BLOCK_TRAILER);
	if (!p)
		return err_set(ERR_NOMEM, "block");
	size_t stored = len;
	uint8_t *dst = p + BLOCK_HEADER;
	if (compression == STORAGE_COMPRESSION_LZ4) {
		int n = LZ4_compress_default((const char *)raw, (char *)dst,
					     (int)len, (int)bound);
		if (n <= 0)
			return err_set(ERR_INVALID, "lz4 compression failed");
		stored = (size_t)n;
	} else if (compression == STORAGE_COMPRESSION_DEFLATE) {
		uLongf n = bound;
		if (compress2(dst, &n, raw, len, 1) != Z_OK)
			return err_set(ERR_INVALID, "deflate failed");
		stored = n;
	} else {
		compression = STORAGE_COMPRESSION_NONE;
		memcpy(dst, raw, len);
	}
	/* Incompressible data is stored as it is. */
	if (compression != STORAGE_COMPRESSION_NONE && stored >= len) {
		compression = STORAGE_COMPRESSION_NONE;
		memcpy(dst, raw, len);
		stored = len;
	}
	p[0] = compression;
	be32_store(p + 1, (uint32_t)len);
	be32_store(p + 5, (uint32_t)stored);
	uint32_t crc = crc32c(0, p, BLOCK_HEADER + stored);
	be32_store(p + BLOCK_HEADER + stored, crc32c_mask(crc));
	out->len = BLOCK_HEADER + stored + BLOCK_TRAILER;
	return 0;
}

/* Verifies lengths and the checksum of a block image. */
static int block_check(const uint8_t *p, size_t len)
{
	if (len < BLOCK_HEADER + BLOCK_TRAILER)
		return err_set(ERR_CORRUPT, "short block");
	uint8_t comp = p[0];
	uint32_t rlen = be32_load(p + 1), slen = be32_load(p + 5);
	if ((uint64_t)slen + BLOCK_HEADER + BLOCK_TRAILER != len)
		return err_set(ERR_CORRUPT, "block length mismatch");
	uint32_t want = crc32c_unmask(be32_load(p + BLOCK_HEADER + slen));
	if (crc32c(0, p, BLOCK_HEADER + slen) != want)
		return err_set(ERR_CORRUPT, "block checksum mismatch");
	if (rlen > BLOCK_MAX_RAW || comp > STORAGE_COMPRESSION_DEFLATE ||
	    (comp == STORAGE_COMPRESSION_NONE && rlen != slen))
		return err_set(ERR_CORRUPT, "bad block header");
	return 0;
}

/* Decompresses the checked image `p` into `out` (its raw length). */
static int block_inflate(const uint8_t *p, uint8_t *out)
{
	uint8_t comp = p[0];
	uint32_t rlen = be32_load(p + 1), slen = be32_load(p + 5);
	const uint8_t *src = p + BLOCK_HEADER;
	int ok = 1;
	if (comp == STORAGE_COMPRESSION_LZ4) {
		int n = LZ4_decompress_safe((const char *)src, (char *)out,
					    (int)slen, (int)rlen);
		ok = n >= 0 && (uint32_t)n == rlen;
	} else if (comp == STORAGE_COMPRESSION_DEFLATE) {
		uLongf n = rlen;
		ok = uncompress(out, &n, src, slen) == Z_OK && n == rlen;
	} else {
		memcpy(out, src, rlen);
	}
	if (!ok)
		return err_set(ERR_CORRUPT, "block does not decompress");
	return 0;
}

int storage_block_decode(const uint8_t *p, size_t len, uint8_t **raw,
			 size_t *raw_len)
{
	*raw = NULL;
	if (block_check(p, len))
		return -1;
	uint32_t rlen = be32_load(p + 1);
	uint8_t *out = malloc(rlen ? rlen : 1);
	if (!out)
		return err_set(ERR_NOMEM, "block");
	if (block_inflate(p, out)) {
		free(out);
		return -1;
	}
	*raw = out;
	*raw_len = rlen;
	return 0;
}

/* Makes *mem (malloc'ed, *cap bytes) hold at least n bytes; its contents
 * need not survive. */
static uint8_t *mem_reserve(uint8_t **mem, size_t *cap, size_t n)
{
	if (*cap < n || !*mem) {
		free(*mem);
		*cap = 0;
		if (!(*mem = malloc(n ? n : 1))) {
			err_set(ERR_NOMEM, "block");
			return NULL;
		}
		*cap = n;
	}
	return *mem;
}

static ssize_t pread_maybe(struct env_file *f, void *buf, size_t n,
			   uint64_t off, bool nowait)
{
	return nowait ? env_file_pread_nowait(f, buf, n, off)
		      : env_file_pread(f, buf, n, off);
}

static int read_into(struct env_file *f, const char *path, uint64_t off,
		     uint64_t disk_len, uint8_t **mem, size_t *cap,
		     const uint8_t **raw, size_t *raw_len, uint64_t *next,
		     bool nowait)
{
	uint8_t h[BLOCK_HEADER];
	*raw = NULL;
	if (!disk_len) {
		ssize_t n = pread_maybe(f, h, BLOCK_HEADER, off, nowait);
		if (n < 0)
			return nowait ? -1 : err_prefix("%s", path);
		if (n != BLOCK_HEADER)
			return err_set(ERR_CORRUPT,
				       "%s: truncated block at "
				       "offset %llu",
				       path, (unsigned long long)off);
		disk_len = (uint64_t)be32_load(h + 5) + BLOCK_HEADER +
			   BLOCK_TRAILER;
	}
	if (disk_len > BLOCK_MAX_RAW + 1024)
		return err_set(ERR_CORRUPT,
			       "%s: block at offset %llu too "
			       "large",
			       path, (unsigned long long)off);
	/* Read into *mem: a block stored raw is then used in place. A
	 * compressed image goes to a temporary buffer instead, decoded into
	 * *mem. */
	uint8_t *img = mem_reserve(mem, cap, (size_t)disk_len);
	if (!img)
		return -1;
	ssize_t n = pread_maybe(f, img, (size_t)disk_len, off, nowait);
	int rc = 0;
	if (n < 0) {
		rc = nowait ? -1 : err_prefix("%s", path);
	} else if ((uint64_t)n != disk_len) {
		rc = err_set(ERR_CORRUPT,
			     "%s: truncated block at offset "
			     "%llu",
			     path, (unsigned long long)off);
	} else if (!(rc = block_check(img, disk_len))) {
		size_t len = be32_load(img + 1);
		if (img[0] == STORAGE_COMPRESSION_NONE) {
			*raw = img + BLOCK_HEADER;
		} else {
			/* the image moves out of *mem, the output into it */
			uint8_t *tmp = img;
			*mem = NULL;
			*cap = 0;
			uint8_t *out = mem_reserve(mem, cap, len);
			rc = out ? block_inflate(tmp, out) : -1;
			free(tmp);
			if (!rc)
				*raw = out;
		}
		*raw_len = len;
	}
	if (rc && n >= 0 && (uint64_t)n == disk_len)
		err_prefix("%s: offset %llu", path, (unsigned long long)off);
	if (!rc)
		*next = off + disk_len;
	return rc;
}

int storage_block_read_into(struct env_file *f, const char *path, uint64_t off,
			    uint64_t disk_len, uint8_t **mem, size_t *cap,
			    const uint8_t **raw, size_t *raw_len,
			    uint64_t *next)
{
	return read_into(f, path, off, disk_len, mem, cap, raw, raw_len, next,
			 false);
}

int storage_block_read_into_nowait(struct env_file *f, const char *path,
				   uint64_t off, uint64_t disk_len,
				   uint8_t **mem, size_t *cap,
				   const uint8_t **raw, size_t *raw_len,
				   uint64_t *next)
{
	return read_into(f, path, off, disk_len, mem, cap, raw, raw_len, next,
			 true);
}

int storage_block_map_into(const uint8_t *map, uint64_t map_len,
			   const char *path, uint64_t off, uint64_t disk_len,
			   size_t want, uint8_t **mem, size_t *cap,
			   const uint8_t **raw, size_t *raw_len, uint64_t *next)
{
	*raw = NULL;
	if (off > map_len || map_len - off < BLOCK_HEADER)
		return err_set(ERR_CORRUPT,
			       "%s: truncated block at offset %llu", path,
			       (unsigned long long)off);
	const uint8_t *img = map + off;
	if (!disk_len)
		disk_len = (uint64_t)be32_load(img + 5) + BLOCK_HEADER +
			   BLOCK_TRAILER;
	if (disk_len > BLOCK_MAX_RAW + 1024)
		return err_set(ERR_CORRUPT,
			       "%s: block at offset %llu too large", path,
			       (unsigned long long)off);
	if (map_len - off < disk_len)
		return err_set(ERR_CORRUPT,
			       "%s: truncated block at offset %llu", path,
			       (unsigned long long)off);
	int rc = block_check(img, (size_t)disk_len);
	size_t len = rc ? 0 : be32_load(img + 1);
	if (!rc && img[0] == STORAGE_COMPRESSION_NONE) {
		*raw = img + BLOCK_HEADER;
	} else if (!rc && img[0] == STORAGE_COMPRESSION_LZ4 && want &&
		   want < len) {
		/* the part the read needs: LZ4 decodes its sequences in
		 * order and can stop early (the checksum covered it all) */
		uint8_t *out = mem_reserve(mem, cap, len);
		int n = out ? LZ4_decompress_safe_partial(
				      (const char *)img + BLOCK_HEADER,
				      (char *)out, (int)be32_load(img + 5),
				      (int)want, (int)len)
			    : -1;
		if (!out)
			rc = -1;
		else if (n < 0 || (size_t)n < want)
			rc = err_set(ERR_CORRUPT, "block does not decompress");
		else {
			*raw = out;
			len = (size_t)n;
		}
	} else if (!rc) {
		uint8_t *out = mem_reserve(mem, cap, len);
		rc = out ? block_inflate(img, out) : -1;
		if (!rc)
			*raw = out;
	}
	if (rc)
		return err_prefix("%s: offset %llu", path,
				  (unsigned long long)off);
	*raw_len = len;
	*next = off + disk_len;
	return 0;
}

int storage_block_read(struct env_file *f, const char *path, uint64_t off,
		       uint64_t disk_len, uint8_t **raw, size_t *raw_len,
		       uint64_t *next)
{
	uint8_t *mem = NULL;
	size_t cap = 0;
	const uint8_t *r;
	*raw = NULL;
	if (storage_block_read_into(f, path, off, disk_len, &mem, &cap, &r,
				    raw_len, next)) {
		free(mem);
		return -1;
	}
	memmove(mem, r, *raw_len);
	*raw = mem;
	return 0;
}

int storage_component_seal(struct buf *b)
{
	uint32_t crc = crc32c(0, b->data, b->len);
	return buf_put_be32(b, crc32c_mask(crc));
}

int storage_component_open_version(const uint8_t *p, size_t len,
				   const char *magic, uint8_t max_version,
				   uint8_t *version, const uint8_t **body,
				   size_t *body_len)
{
	if (len < 9 || memcmp(p, magic, 4) != 0)
		return err_set(ERR_CORRUPT, "bad component header");
	if (p[4] < 1 || p[4] > max_version)
		return err_set(ERR_CORRUPT, "unknown format version %u", p[4]);
	*version = p[4];
	if (crc32c_unmask(be32_load(p + len - 4)) != crc32c(0, p, len - 4))
		return err_set(ERR_CORRUPT, "component checksum mismatch");
	*body = p + 5;
	*body_len = len - 9;
	return 0;
}

int storage_component_open(const uint8_t *p, size_t len, const char *magic,
			   const uint8_t **body, size_t *body_len)
{
	uint8_t v;
	return storage_component_open_version(p, len, magic, SST_VERSION, &v,
					      body, body_len);
}
