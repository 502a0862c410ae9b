/*
 * Internal to replication/: the batchlog store (batchlog.c).
 *
 * A logged batch's coordinator first stores the batch on up to two other
 * nodes of its datacenter; they replay it (through their own coordinator)
 * if the coordinator does not report it applied within twice the write
 * timeout, e.g. because it died half way.
 */
#ifndef CASSINI_REPLICATION_REPL_INTERNAL_H
#define CASSINI_REPLICATION_REPL_INTERNAL_H

#include "common/buf.h"
#include "common/env.h"

#include <stddef.h>
#include <stdint.h>

struct batchlog;

/* Creates `dir` if needed and indexes the batches already in it (they are
 * due for replay at once). NULL with err set. */
struct batchlog *batchlog_open(struct env *env, const char *dir);
void batchlog_close(struct batchlog *b);

/* Stores a batch (its encoded mutations) under `id`. 0 or -1. */
int batchlog_store(struct batchlog *b, const uint8_t id[16], int64_t created_us,
		   const struct slice *muts, size_t n);
/* Forgets and deletes a batch; unknown ids are ignored. */
void batchlog_remove(struct batchlog *b, const uint8_t id[16]);
/* Up to `cap` ids of batches stored before monotonic time
 * `stored_before` (those found at open: always). */
size_t batchlog_due(struct batchlog *b, uint64_t stored_before,
		    uint8_t (*ids)[16], size_t cap);
size_t batchlog_count(const struct batchlog *b);
uint64_t batchlog_corrupt(const struct batchlog *b);
/* Reads a batch: its bytes go to `out` and *muts (malloc'ed; free it)
 * points into them; *created_us is when its coordinator wrote it (wall
 * clock). -1 with ERR_CORRUPT for a damaged file (the caller removes it). */
int batchlog_read(struct batchlog *b, const uint8_t id[16], struct buf *out,
		  struct slice **muts, size_t *n, int64_t *created_us);

#endif
