/*
 * INSERT, UPDATE and DELETE -> storage mutations, with Cassandra's rules.
 *
 *   INSERT  writes a row marker (the row exists even with every regular
 *           column null), a cell per column; a null writes a tombstone and
 *           an unset value writes nothing; a non-frozen collection is
 *           replaced (collection tombstone at ts - 1, then its elements).
 *   UPDATE  writes cells but no marker; `c = c + x` appends or adds,
 *           `c = x + c` prepends (paths below every earlier prepend's, so
 *           several in one batch keep their order), `c = c - x` removes
 *           set elements or map keys, `m[k] = v` sets one map entry; a
 *           null or unset operand changes nothing. Forms that need a read
 *           first (list element by index, list removal by value) are
 *           refused clearly.
 *   DELETE  a cell, a collection, a map entry, rows, a clustering range
 *           (prefix equalities or IN, and a final slice), or a partition.
 *
 * Keys: every partition key column needs `=` or IN; INSERT and UPDATE need
 * the whole clustering (UPDATE of static columns only needs the partition,
 * and may not name the clustering); IN expands to one mutation per
 * partition, each once (IN is a set). Keys are checked as Cassandra checks
 * them (null, unset, empty, over 64 KiB). An INSERT that names the whole
 * primary key writes the row marker even when it sets only static columns.
 * Errors use Cassandra's words.
 */
#ifndef CASSINI_CLIENT_DML_H
#define CASSINI_CLIENT_DML_H

#include "client/cql/cql_ast.h"
#include "client/cql/cql_values.h"
#include "client/proto/proto.h"
#include "client/schema/schema.h"
#include "storage/storage.h"

struct cql_write_ctx {
	int64_t timestamp;     /* microseconds, unless USING TIMESTAMP says */
	int64_t now_sec;       /* local time of the write (TTL, tombstones) */
	struct cql_fn_ctx *fn; /* now(), uuid() and list paths */
	cql_value_cmp_fn cmp;  /* set and map ordering */
};

struct cql_mutations {
	struct storage_mutation **items;
	size_t count;
};

/*
 * Builds the mutations of an INSERT, UPDATE or DELETE on `t`. `binds` holds
 * the statement's bound values. On success the caller owns `out` (free with
 * cql_mutations_free); on failure out is empty and err is set (ERR_INVALID
 * or ERR_UNSUPPORTED with the client's message).
 */
int cql_dml_build(const struct cql_stmt *s, const struct cql_table *t,
		  const struct cql_value *binds, size_t bind_count,
		  const struct cql_write_ctx *ctx, struct cql_mutations *out);
void cql_mutations_free(struct cql_mutations *m);

/* The checks of an INSERT, UPDATE or DELETE on `t` that need no values
 * (operations that do not suit their column's type, static-only changes
 * with a clustering restriction), which Cassandra makes when it prepares
 * the statement: 0, or -1 with ERR_INVALID / ERR_UNSUPPORTED. */
int cql_dml_check(const struct cql_stmt *s, const struct cql_table *t);

/* Whether `t` is a counter table (its non-key columns are counters). */
bool cql_dml_counter_table(const struct cql_table *t);

/* INSERT JSON (dml_json.c): `in` as the INSERT of every column, with
 * the values map's values appended to `binds` (a copy in `a`, as are the
 * columns and terms of *out). -1 with Cassandra's message. */
int cql_dml_json_insert(struct arena *a, const struct cql_insert *in,
			const struct cql_table *t,
			const struct cql_value *binds, size_t nbinds,
			struct cql_insert *out, const struct cql_value **obinds,
			size_t *onbinds);

#endif
