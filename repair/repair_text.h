/*
 * repair/ internals: the pieces of repair's text state files (the
 * scheduler's state, the manual repair history), so both read and write
 * them the same way: lines of words, names escaped to one word, and a
 * checksum line at the end:
 *
 *   HEADER LINE
 *   ...
 *   crc32c HEX8        (8 hex digits, crc32c of every byte before it)
 */
#ifndef CASSINI_REPAIR_REPAIR_TEXT_H
#define CASSINI_REPAIR_REPAIR_TEXT_H

#include "common/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Appends printf output to `b`; ERR_NOMEM (`what` in the message). */
__attribute__((format(printf, 3, 4))) int
repair_text_put(struct buf *b, const char *what, const char *fmt, ...);

/* `in` as one word: bytes <= ' ', '%' and DEL as %XX (quoted CQL
 * identifiers may hold spaces); truncated to fit `cap`. */
void repair_text_escape(const char *in, char *out, size_t cap);
/* Undoes repair_text_escape in place; -1 for a malformed %XX. */
int repair_text_unescape(char *s);

/* Whether a table's name ("ks.table") is `filter` or in keyspace
 * `filter` (NULL: every name). */
bool repair_text_name_match(const char *filter, const char *name);

/* Wall-clock microseconds as "YYYY-MM-DD HH:MM:SS" (UTC); "-" for 0. */
void repair_text_time(int64_t us, char *out, size_t cap);

/* Appends the checksum line of out[from..]. */
int repair_text_seal(struct buf *out, size_t from, const char *what);
/* Checks the checksum line and `header` (with its newline) of a file;
 * ERR_CORRUPT naming `what`. On success *body_len is the length before
 * the checksum line. */
int repair_text_check(const uint8_t *data, size_t len, const char *header,
		      const char *what, size_t *body_len);

#endif
