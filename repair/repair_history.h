/*
 * The manual repair history a coordinating node keeps: one entry per
 * (table, range) task of its `repair` sessions (when it started and
 * ended, the outcome, the session's options, mismatched ranges, rows and
 * bytes streamed), newest last, at most `max` of them (the oldest are
 * dropped). Scheduled segments keep their own history (repair_sched.h).
 *
 * State file (text, version 1; written whole, atomically, after every
 * session; the node keeps it as <saved_caches_directory>/repair_history):
 *
 *   cassini repair history 1
 *   task SESSION TABLE START END STARTED FINISHED OUTCOME MISMATCHED
 *        ROWS BYTES OPTIONS ERROR
 *   ...
 *   crc32c HEX8                     (8 hex digits, of every byte before it)
 *
 * One `task` line per entry, oldest first. TABLE, OPTIONS and ERROR are
 * one word each, escaped as repair_text_escape does ("-" for empty
 * OPTIONS or ERROR); STARTED and FINISHED are wall-clock microseconds;
 * the range is (START, END]; OUTCOME is ok, failed or preview. A file
 * whose checksum, header or any line does not parse is refused whole
 * (ERR_CORRUPT), leaving the history as it was.
 */
#ifndef CASSINI_REPAIR_REPAIR_HISTORY_H
#define CASSINI_REPAIR_REPAIR_HISTORY_H

#include "common/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REPAIR_HISTORY_NAME_MAX    160
#define REPAIR_HISTORY_OPTIONS_MAX 96
#define REPAIR_HISTORY_ERROR_MAX   256
#define REPAIR_HISTORY_DEFAULT_MAX 2048 /* entries: ~0.5 MB of file */

enum repair_history_outcome {
	REPAIR_HISTORY_OK,
	REPAIR_HISTORY_FAILED,
	REPAIR_HISTORY_PREVIEW,
};

struct repair_history_entry {
	uint64_t session;
	char table[REPAIR_HISTORY_NAME_MAX]; /* "ks.table" */
	int64_t start, end;                  /* (start, end] */
	int64_t started_us, finished_us;     /* wall clock */
	enum repair_history_outcome outcome;
	uint64_t mismatched_ranges, rows_streamed, bytes_streamed;
	char options[REPAIR_HISTORY_OPTIONS_MAX]; /* "-seq -j 2" */
	char error[REPAIR_HISTORY_ERROR_MAX];
};

struct repair_history;

/* At most `max` entries (>= 1). NULL with ERR_NOMEM. */
struct repair_history *repair_history_new(size_t max);
void repair_history_delete(struct repair_history *h);

/* Appends a copy of `e`, dropping the oldest entry when full. */
void repair_history_add(struct repair_history *h,
			const struct repair_history_entry *e);
size_t repair_history_count(const struct repair_history *h);
/* Entry i, oldest first (i < count); borrowed until the next add/load. */
const struct repair_history_entry *
repair_history_at(const struct repair_history *h, size_t i);

/* Appends the state file to `out`. */
int repair_history_encode(const struct repair_history *h, struct buf *out);
/* Replaces the entries with a state file's (the newest `max` of them);
 * -1 with ERR_CORRUPT (or ERR_NOMEM), entries unchanged. */
int repair_history_load(struct repair_history *h, const uint8_t *data,
			size_t len);

/* The entries of tables matching `filter` ("ks" or "ks.table"; NULL:
 * all), newest last, as an operator's table. */
int repair_history_format(const struct repair_history *h, const char *filter,
			  struct buf *out);

#endif
