/*
 * SSTable blocks and the small helpers the SSTable components share.
 *
 * A block on disk:
 *
 *   u8    compression   0 none, 1 lz4, 2 deflate
 *   be32  raw length    bytes after decompression (<= BLOCK_MAX_RAW)
 *   be32  stored length bytes that follow
 *   ...   stored bytes
 *   be32  masked crc32c of the 9 header bytes and the stored bytes
 *
 * The checksum is verified before anything is decompressed or parsed; a
 * block that fails it never yields data (ERR_CORRUPT naming the file and
 * offset).
 */
#ifndef CASSINI_STORAGE_BLOCK_INTERNAL_H
#define CASSINI_STORAGE_BLOCK_INTERNAL_H

#include "common/buf.h"
#include "common/env.h"

#include <stdint.h>

#define BLOCK_HEADER  9
#define BLOCK_TRAILER 4
#define BLOCK_MAX_RAW (64u << 20)

/* Compresses `raw` into `out` (cleared first) as one block. */
int storage_block_encode(struct buf *out, uint8_t compression,
			 const uint8_t *raw, size_t len);
/* Checks and decodes one block image of exactly `len` bytes. On success
 * *raw is malloc'ed (caller frees) and *raw_len set. */
int storage_block_decode(const uint8_t *p, size_t len, uint8_t **raw,
			 size_t *raw_len);
/* Reads the block at `off` (its size read from the header unless
 * `disk_len` is non-zero), verifies and decodes it. *next is the offset
 * just past it. `path` names the file in errors. */
int storage_block_read(struct env_file *f, const char *path, uint64_t off,
		       uint64_t disk_len, uint8_t **raw, size_t *raw_len,
		       uint64_t *next);
/* storage_block_read into memory the caller keeps: *mem (malloc'ed, *cap bytes,
 * may be NULL) is replaced when too small, and *raw points into it (past
 * the header of a block stored raw: no copy). *mem stays the caller's on
 * failure too. */
int storage_block_read_into(struct env_file *f, const char *path, uint64_t off,
			    uint64_t disk_len, uint8_t **mem, size_t *cap,
			    const uint8_t **raw, size_t *raw_len,
			    uint64_t *next);
/* storage_block_read_into from the OS page cache only: never waits for the
 * disk, so an event loop may call it; -1 when the bytes are not there (or fail
 * their checks), err left unspecified. */
int storage_block_read_into_nowait(struct env_file *f, const char *path,
				   uint64_t off, uint64_t disk_len,
				   uint8_t **mem, size_t *cap,
				   const uint8_t **raw, size_t *raw_len,
				   uint64_t *next);

/* storage_block_read_into from a read-only mapping of the file (`map`,
 * `map_len` bytes: env_file_map), for bytes the caller knows are in
 * memory (env_file_resident): no system call and no copy. A block stored
 * raw is used in place (*raw points into the mapping, which must outlive
 * its use); a compressed one is decoded into *mem. Checked as
 * storage_block_read_into checks. disk_len 0: read from the header.
 * `want` > 0: only the first `want` raw bytes are needed; an LZ4 block
 * may then be decoded that far only (*raw_len, at least `want`, says how
 * far: less than the block's raw length means a partial block). */
int storage_block_map_into(const uint8_t *map, uint64_t map_len,
			   const char *path, uint64_t off, uint64_t disk_len,
			   size_t want, uint8_t **mem, size_t *cap,
			   const uint8_t **raw, size_t *raw_len,
			   uint64_t *next);

/* A component written to memory then to a file: magic(4) + version(1)
 * + body + be32 masked crc32c of all before. */
int storage_component_seal(struct buf *b);
/* Verifies a sealed component image; on success body and body_len cover
 * what is between the header and the CRC. Accepts versions 1 to
 * `max_version` (*version gets the file's). */
int storage_component_open_version(const uint8_t *p, size_t len,
				   const char *magic, uint8_t max_version,
				   uint8_t *version, const uint8_t **body,
				   size_t *body_len);
/* storage_component_open_version of version 1 only. */
int storage_component_open(const uint8_t *p, size_t len, const char *magic,
			   const uint8_t **body, size_t *body_len);

#define SST_VERSION 1
/* Statistics.db only: version 2 adds the tombstone histogram, version 3
 * the leveled compaction level. */
#define SST_STATS_VERSION 5

#endif
