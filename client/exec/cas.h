/*
 * Conditional writes (lightweight transactions), the CQL side: what
 * Cassandra's ModificationStatement, CQL3CasRequest and ColumnCondition do
 * around Paxos (replication/paxos.h), which the data path runs.
 *
 *   cql_cas_new      refusals Cassandra makes (custom timestamps, counters,
 *                    conditions on key columns, IN on keys, batches over
 *                    several partitions), the write built once with
 *                    timestamp 0 (re-stamped with the ballot's time), the
 *                    conditions' values resolved and copied
 *   cql_cas_eval     the conditions against the partition as Paxos read it
 *                    (IF NOT EXISTS, IF EXISTS, c op v, c[k] op v, u.f op
 *                    v, u op v on a whole non-frozen user type, IN, = null
 *                    / != null; static columns on the static row)
 *   cql_cas_encode   the Rows answer: `[applied]` alone when applied (or
 *                    when nothing the conditions name exists); else
 *                    `[applied]` = false and the current values of the
 *                    condition columns in IF order, deduplicated (every
 *                    column for IF EXISTS / IF NOT EXISTS), a batch's rows
 *                    prefixed with their primary key columns
 *
 * Everything a struct cql_cas holds is copied: it outlives the request.
 */
#ifndef CASSINI_CLIENT_EXEC_CAS_H
#define CASSINI_CLIENT_EXEC_CAS_H

#include "client/exec/dml.h"
#include "client/exec/executor.h"
#include "storage/storage.h"

#include <stdbool.h>

struct cql_cas;

/* Whether `dr` is a conditional statement or a batch holding one. */
bool cql_cas_is_conditional(const struct cql_data_request *dr);

/* NULL with ERR_INVALID (Cassandra's message) or ERR_NOMEM. `ctx` gives
 * now() and the clock; its timestamp is ignored. */
struct cql_cas *cql_cas_new(const struct cql_data_request *dr,
			    const struct cql_write_ctx *ctx);
void cql_cas_delete(struct cql_cas *c);

/* The partition the statement writes, and its table. */
const struct storage_mutation *cql_cas_mutation(const struct cql_cas *c);
const struct cql_table *cql_cas_table(const struct cql_cas *c);

/* The conditions against `cur` (the partition, resolved; NULL: absent):
 * *applied. -1 with ERR_INVALID for a comparison Cassandra refuses. */
int cql_cas_eval(const struct cql_cas *c, const struct storage_result *cur,
		 bool *applied);

/* Appends the RESULT Rows frame. */
int cql_cas_encode(const struct cql_cas *c, const struct storage_result *cur,
		   bool applied, uint8_t version, int16_t stream,
		   struct buf *out);

#endif
