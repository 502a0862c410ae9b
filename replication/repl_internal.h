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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct batchlog;

/* Runs run(job) off the loop, then done(job) on the loop (replication.h's
 * repl_offload_fn); NULL runs both inline. */
typedef void (*batchlog_offload_fn)(void *arg, void (*run)(void *job),
				    void (*done)(void *job), void *job);

/* Creates `dir` if needed and indexes the batches already in it (blocks:
 * startup). File work after that goes through `offload`. NULL with err
 * set. */
struct batchlog *batchlog_open(struct env *env, const char *dir,
			       batchlog_offload_fn offload, void *offload_arg);
/* Every job must have completed (the node stops its workers and runs
 * their completions before it deletes the coordinator). */
void batchlog_close(struct batchlog *b);

/* Stores a batch (its encoded mutations, copied) under `id`, off the loop;
 * done(arg, 0 or -1, why) runs on the loop once the file is in place (it
 * may run before batchlog_store returns). */
typedef void (*batchlog_done_fn)(void *arg, int status, const char *why);
void batchlog_store(struct batchlog *b, const uint8_t id[16],
		    int64_t created_us, const struct slice *muts, size_t n,
		    batchlog_done_fn done, void *arg);
/* Forgets a batch and deletes its file off the loop (once its store has
 * finished, if one is under way); unknown ids are ignored. */
void batchlog_remove(struct batchlog *b, const uint8_t id[16]);
/* Up to `cap` ids of batches stored before monotonic time
 * `stored_before` (those found at open: always). */
size_t batchlog_due(struct batchlog *b, uint64_t stored_before,
		    uint8_t (*ids)[16], size_t cap);
/* Batches kept (stores under way included). */
size_t batchlog_count(const struct batchlog *b);
uint64_t batchlog_corrupt(const struct batchlog *b);

/* Reads a batch off the loop, then on the loop calls done(arg, status,
 * muts, n, created_us): the mutations (valid during the call) and when its
 * coordinator wrote it (wall clock). status -1 with `corrupt` for a
 * damaged file (the caller removes it). */
typedef void (*batchlog_read_fn)(void *arg, int status, bool corrupt,
				 const struct slice *muts, size_t n,
				 int64_t created_us);
void batchlog_read(struct batchlog *b, const uint8_t id[16],
		   batchlog_read_fn done, void *arg);

#endif
