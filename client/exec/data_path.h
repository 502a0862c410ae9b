/*
 * Pieces of the data path that serves statements on user tables
 * (node/cql_data.c: the coordinator over this node's storage), kept in
 * client/ because they speak CQL: the mutations of a write and its
 * timestamp, and the storage hook that brings write acknowledgements back
 * to the loop.
 */
#ifndef CASSINI_CLIENT_DATA_PATH_H
#define CASSINI_CLIENT_DATA_PATH_H

#include "client/exec/executor.h"
#include "common/loopq.h"
#include "storage/storage.h"

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
