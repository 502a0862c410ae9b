/*
 * The hint file format, shared by the store (hints.c) and its tests.
 *
 *   file    := header record*
 *   header  := be32 magic "CHNT" | be32 version (1)
 *   record  := be32 len | be32 crc(len) | body (len bytes) | be32 crc(body)
 *   body    := be64 created_us | mutation bytes (len - 8)
 *
 * crc is crc32c masked as leveldb does (crc32c_mask). The length has its
 * own CRC so a damaged length is recognised before it is trusted: the
 * parser then slides one byte at a time until a record whose length and
 * body CRCs both match (resynchronisation), and reports the skipped region.
 * A record whose length is sound but whose body is not is skipped whole.
 * A record cut short by the end of the file (or a tail of zeros) is a torn
 * tail, not corruption.
 */
#ifndef CASSINI_REPLICATION_HINTS_INTERNAL_H
#define CASSINI_REPLICATION_HINTS_INTERNAL_H

#include "common/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HINTS_FILE_MAGIC      0x43484e54u /* "CHNT" */
#define HINTS_FILE_VERSION    1u
#define HINTS_HEADER_SIZE     8u
#define HINTS_RECORD_OVERHEAD 20u /* len, crc(len), created_us, crc(body) */
#define HINTS_MAX_MUTATION    (64u << 20)

/* Appends the file header. 0 or -1 (ERR_NOMEM). */
int hints_header_encode(struct buf *out);
/* Appends one record. 0 or -1 (ERR_NOMEM). */
int hints_record_encode(struct buf *out, int64_t created_us,
			const uint8_t *mutation, size_t len);

/* A reading position in one file. Zero-initialised = the file's start. */
struct hints_cursor {
	uint64_t off;      /* next byte to look at */
	uint64_t good_end; /* end of the last sound record (or the header) */
	bool resync;       /* sliding over a damaged region */
	bool resync_nonzero;
	uint64_t resync_from;
};

struct hints_record {
	uint64_t off; /* where the record starts */
	uint64_t end; /* where the next one starts */
	int64_t created_us;
	const uint8_t *mutation; /* borrowed from the caller's buffer */
	size_t len;
};

enum hints_parse_result {
	HINTS_PARSE_RECORD, /* *rec filled, cursor past it */
	HINTS_PARSE_NEED,   /* read at least *need bytes from cursor->off */
	HINTS_PARSE_END,    /* end of the file's sound records */
};

enum hints_damage {
	HINTS_DAMAGE_HEADER, /* bad magic or version; parsing goes on */
	HINTS_DAMAGE_RECORD, /* sound length, bad body: skipped */
	HINTS_DAMAGE_REGION, /* bad length: bytes [off, end) skipped */
	HINTS_DAMAGE_TORN,   /* the tail from off is an unfinished record */
};

/* Told about each damaged place once per parse over it. */
typedef void (*hints_damage_fn)(void *arg, enum hints_damage what, uint64_t off,
				uint64_t end);

/*
 * Parses the next record at c->off. `buf` holds the file bytes
 * [buf_off, buf_off + buf_len) and must start at or before c->off;
 * `file_end` is the file's size.
 */
enum hints_parse_result hints_parse_next(struct hints_cursor *c,
					 const uint8_t *buf, uint64_t buf_off,
					 size_t buf_len, uint64_t file_end,
					 struct hints_record *rec, size_t *need,
					 hints_damage_fn damage, void *arg);

/* "<uuid>-<seq>.hints" */
bool hints_file_name_parse(const char *name, uint8_t id[16], uint64_t *seq);

struct env_file;

struct hints_scan {
	uint64_t records;
	int64_t oldest_us;
	int64_t newest_us;
	uint64_t good_end; /* end of the last sound record */
};

/* Reads a whole file of `size` bytes in 1 MiB steps, reporting damage.
 * Blocks. 0, or -1 with err set (read error, no memory). */
int hints_file_scan(struct env_file *fp, uint64_t size, hints_damage_fn damage,
		    void *arg, struct hints_scan *out);

#endif
