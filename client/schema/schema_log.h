/*
 * The schema log: every applied DDL statement, in order, so a restarted
 * node rebuilds exactly the schema it had.
 *
 * Replaying the statements (rather than storing a snapshot) keeps what the
 * data depends on identical across restarts: table ids and column numbers,
 * including the slots of dropped columns. Each record carries the keyspace
 * the statement ran in and the id a CREATE TABLE received.
 *
 * File format (little-endian nothing: all integers big-endian):
 *
 *   record := u32 body_length | u32 crc32c(body) | body
 *   body   := u8 version (1, 2 or 3) | 16-byte table id |
 *             u16 keyspace length | keyspace | u32 statement length |
 *             statement (CQL text) | [version 2, 3: i64 time_us] |
 *             [version 3: u16 columns_before]
 *
 * Version 2 (written only for a record with a time: ALTER TABLE ... DROP
 * without USING TIMESTAMP, ALTER TABLE ... WITH, ALTER KEYSPACE) carries
 * the microsecond time the node that ran the statement stamped it with
 * (cql_schema_stmt_timed), so every node and every replay records the same
 * drop time, and keeps the option written last when two nodes altered it
 * at once. A version-1 DROP has drop time 0 (its column is hidden all the
 * same); a version-1 ALTER of options always applies, in log order.
 *
 * Version 3 (ALTER TABLE ... ADD) also carries how many columns the table
 * had on the node that ran it. Columns are numbered in the order they are
 * added and cells travel between nodes by number, so two ADDs run on two
 * nodes at once number the new columns differently there; the count tells
 * every node (and every replay) that this happened to the table, and
 * cql_table_columns_diverged then refuses its reads and writes.
 *
 * Appends are written with write(2) before the DDL is answered and
 * fsynced soon after (cql_schema_log_sync, on a worker), like Cassandra's
 * schema mutations under commitlog_sync: periodic. On replay a torn last
 * record (a crash mid-append) is dropped and the file cut back; a checksum
 * failure anywhere else refuses to start, naming the file and offset.
 */
#ifndef CASSINI_CLIENT_SCHEMA_LOG_H
#define CASSINI_CLIENT_SCHEMA_LOG_H

#include "client/schema/schema.h"
#include "common/buf.h"
#include "common/env.h"

#include <stddef.h>
#include <stdint.h>

struct cql_schema_log;

/* Opens (creates) the log at `path`. NULL with err set. */
struct cql_schema_log *cql_schema_log_open(struct env *env, const char *path);
void cql_schema_log_close(struct cql_schema_log *l);

/* Called for each record body replayed (after it applied). */
typedef int (*cql_schema_record_fn)(void *arg, const uint8_t *body, size_t len);

/* Applies every record to `s` (which holds only the system keyspaces),
 * calling `fn` (may be NULL) with each body. Returns the number of
 * statements applied, or -1 (ERR_CORRUPT names file and offset; a statement
 * that no longer applies is ERR_CORRUPT too). */
long cql_schema_log_replay(struct cql_schema_log *l, struct cql_schema *s,
			   cql_schema_record_fn fn, void *arg);

/* Appends one applied statement (write(2), no fsync). */
int cql_schema_log_append(struct cql_schema_log *l, const char *keyspace,
			  const uint8_t id[16], const char *cql, size_t len);
/* Appends a record body as built by cql_schema_record_encode. */
int cql_schema_log_append_record(struct cql_schema_log *l, const uint8_t *body,
				 size_t len);

/*
 * Records travel between nodes too (schema push and pull): the same body as
 * in the file, without the length and checksum that frame it there.
 * `time_us` is an ALTER TABLE DROP's time (0: none), `columns_before` an
 * ALTER TABLE ADD's count of the table's columns before it (-1: none; see
 * cql_schema_apply_replicated). With neither it is a version-1 record.
 */
int cql_schema_record_encode(struct buf *out, const char *keyspace,
			     const uint8_t id[16], const char *cql, size_t len,
			     int64_t time_us, int columns_before);
/* Parses and applies a body. Returns the status of the apply (or
 * CQL_SCHEMA_INVALID for a malformed body, err set); `change` is filled on
 * CQL_SCHEMA_OK. */
enum cql_schema_status
cql_schema_record_apply(struct cql_schema *s, const uint8_t *body, size_t len,
			struct cql_schema_change *change);
/* fdatasync; blocks: call from a worker thread. */
int cql_schema_log_sync(struct cql_schema_log *l);

#endif
