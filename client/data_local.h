/*
 * The data path of a node before the coordinator lands: statements on user
 * tables run against this node's own storage engine.
 *
 * Writes build their mutations on the loop (client/dml.c) and are
 * acknowledged when storage acknowledges them (after write(2) or fsync, as
 * commitlog_sync says). Reads are planned on the loop (client/select.c),
 * executed on worker threads (storage reads may block on disk), and encoded
 * back on the loop. Timestamps are the client's when given, else this
 * node's, unique and increasing in microseconds.
 *
 * The Coordinator issue replaces this with replicated reads and writes at
 * the requested consistency level; the executor interface stays the same.
 */
#ifndef CASSINI_CLIENT_DATA_LOCAL_H
#define CASSINI_CLIENT_DATA_LOCAL_H

#include "client/executor.h"
#include "common/env.h"
#include "common/loopq.h"
#include "storage/storage.h"

struct cql_local;

/* `db`, `env` and `q` (the loop's queue) must outlive it. */
struct cql_local *cql_local_new(struct storage *db, struct env *env,
				struct loopq *q, int read_threads);
/* Waits for queued reads to finish on the workers; their completions are
 * then queued on the loop's loopq (run them before deleting). */
void cql_local_stop(struct cql_local *l);
/* Stops if needed, then frees. */
void cql_local_delete(struct cql_local *l);

/* The executor's data hook (arg = the cql_local). */
void cql_local_data(void *arg, const struct cql_data_request *dr);

/* Shared with the replicated data path (node/): */

/* The mutations of a data request's writes (one statement, or every write
 * of a batch), in order; with `tables`, (*tables)[i] is the table of
 * all->items[i] (free the array). ERR_INVALID/ERR_UNSUPPORTED with the
 * client's message, or ERR_NOMEM. */
struct cql_write_ctx;
struct cql_mutations;
int cql_data_build_writes(const struct cql_data_request *dr,
			  const struct cql_write_ctx *ctx,
			  struct cql_mutations *all,
			  const struct cql_table ***tables);
/* The write's timestamp: the batch's or the client's when given, else the
 * next of `*last` (unique, increasing microseconds from now_us). */
int64_t cql_data_timestamp(const struct cql_data_request *dr, int64_t *last,
			   int64_t now_us);

/* storage_options.post for a loop served by `q` (post_arg = the loopq):
 * write acknowledgements from the commitlog syncer run on the loop. */
void cql_storage_post(void *post_arg, storage_done_fn fn, void *arg, int status,
		      enum err_code code);

#endif
