/*
 * SELECT on a user table: planning the read and encoding what it found.
 *
 * Planning turns the WHERE clause into storage reads: partition keys from
 * `=` / IN on every partition key column (in the key type's order, each
 * once, as Cassandra's IN is a set), or a token range from token(...)
 * relations, or the whole ring; a clustering slice from a prefix of `=`
 * and a final range; ORDER BY as a reverse read (with IN on the partition
 * key also a sort of every partition's rows after the reads, which only
 * an unpaged query may ask for); LIMIT and PER PARTITION LIMIT; `=` on
 * other columns when ALLOW FILTERING is given. Null, unset and oversized
 * keys are refused with Cassandra's words.
 * Encoding rebuilds CQL rows from storage rows: key columns from the key and
 * clustering, collections from their cells, the static row, writetime(),
 * ttl(), token() and count(*).
 *
 * Paging: with a page size, a reply holds at most that many rows and, when
 * more may follow, an opaque paging state naming the last row looked at
 * (its partition key and token, clustering, and the rows sent so far), so
 * any node can resume the query from it. Without a page size every row
 * comes in one reply, at most CQL_SELECT_MAX_ROWS (more is an error, never
 * a silently short answer).
 *
 * Not yet: restrictions after an IN on a clustering column, multi-column
 * relations, aggregates other than count.
 */
#ifndef CASSINI_CLIENT_SELECT_H
#define CASSINI_CLIENT_SELECT_H

#include "client/cql/cql_ast.h"
#include "client/proto/proto.h"
#include "client/schema/schema.h"
#include "common/arena.h"
#include "storage/storage.h"

#define CQL_SELECT_MAX_ROWS 100000

struct cql_select_plan;
struct cql_fn_ctx;

/*
 * Plans `q` on `t`. Everything the plan needs (bound values included) is
 * copied into `a`, which must outlive the plan; `fn` (the request's time
 * and generators, for now() and the like in WHERE) only this call. NULL
 * with ERR_INVALID or ERR_UNSUPPORTED and the client's message.
 */
struct cql_select_plan *
cql_select_plan_new(struct arena *a, const struct cql_select *q,
		    const struct cql_table *t, const struct cql_value *binds,
		    size_t bind_count, const struct cql_fn_ctx *fn);

/* Sets the page size (<= 0: no paging) and the paging state the client
 * sent back (NULL: first page). Fails with ERR_INVALID for a state this
 * query could not have produced. */
int cql_select_plan_page(struct cql_select_plan *p, int32_t page_size,
			 const struct slice *state);

/* The storage reads: either keys (one read per key, from
 * cql_select_plan_first_key) or a token range. */
size_t cql_select_plan_key_count(const struct cql_select_plan *p);
size_t cql_select_plan_first_key(const struct cql_select_plan *p);
struct slice cql_select_plan_key(const struct cql_select_plan *p, size_t i);
bool cql_select_plan_is_scan(const struct cql_select_plan *p);
/* True when rows are checked against restrictions after the read (ALLOW
 * FILTERING, a column served by a secondary index): a scan may then read
 * many partitions per row it sends. */
bool cql_select_plan_is_filtered(const struct cql_select_plan *p);
/* The index restriction a scan's replicas can answer with (their
 * index's candidates instead of every partition; docs/indexes.md): an
 * indexed =, CONTAINS or CONTAINS KEY first, then an indexed IN (at most
 * CQL_SELECT_INDEX_MAX values), then the bounds of a range on an indexed
 * column of a type SAI ranges over. Its pointers borrow from the plan
 * (and `out` itself for lo / hi). False when none (not a scan, no
 * indexed restriction): the scan reads every partition. Rows are still
 * checked against every restriction after the read. */
#define CQL_SELECT_INDEX_MAX 64
struct cql_select_index {
	const char *name;
	const struct slice *vals; /* a partition holding any of them */
	size_t n_vals;
	bool range; /* instead: the values within lo..hi (NULL: open) */
	const struct storage_index_bound *lo, *hi;
	struct storage_index_bound lo_b, hi_b;
	const void *ix; /* the plan's index (for cql_select_plan_index_and) */
};
bool cql_select_plan_index(const struct cql_select_plan *p,
			   struct cql_select_index *out);
/* A second index restriction, on another index than `first`'s, chosen as
 * cql_select_plan_index chooses: the replicas intersect both indexes'
 * candidates (Cassandra's sai_intersection_clause_limit, 2). False when
 * none. */
bool cql_select_plan_index_and(const struct cql_select_plan *p,
			       const struct cql_select_index *first,
			       struct cql_select_index *out);
/* True for count(*) / count(1): the answer is one aggregated row. */
bool cql_select_plan_is_aggregate(const struct cql_select_plan *p);
/* True for GROUP BY: one row per group (select_group.c). */
bool cql_select_plan_is_grouped(const struct cql_select_plan *p);
/* True when an IN restricts the partition key. */
bool cql_select_plan_key_in(const struct cql_select_plan *p);
/* True when the WHERE clause restricts the partition key at all (=, IN
 * or token()): Cassandra's hasPartitionKeyRestrictions. */
bool cql_select_plan_key_restricted(const struct cql_select_plan *p);
void cql_select_plan_range(const struct cql_select_plan *p, int64_t *start,
			   int64_t *end);
const struct storage_read_cmd *
cql_select_plan_cmd(const struct cql_select_plan *p);
const uint8_t *cql_select_plan_table_id(const struct cql_select_plan *p);
/* Stop reading once this many new rows are found (the page, the LIMIT
 * left, or the cap, plus one). Result `k` of a read (k-th partition kept)
 * adds cql_select_plan_rows_new() rows: those the encoder would send,
 * past the resume point and passing the filters; one that adds none need
 * not be kept. */
size_t cql_select_plan_row_budget(const struct cql_select_plan *p);
size_t cql_select_plan_rows_new(const struct cql_select_plan *p,
				const struct storage_result *r, size_t k);

/* What Cassandra refuses when it prepares `q` on `t`, before any value
 * is bound (DISTINCT and PER PARTITION LIMIT rules, static-only
 * selections, the selection itself): 0, or -1 with the client's error.
 * Scratch memory comes from `a`. */
int cql_select_check(struct arena *a, const struct cql_select *q,
		     const struct cql_table *t);

/* The result columns of `q` on `t` (what each Rows reply describes), for
 * the PREPARED result's metadata; allocated in `a`. 0 or -1 with err set. */
int cql_select_result_specs(struct arena *a, const struct cql_select *q,
			    const struct cql_table *t,
			    struct cql_column_spec **specs, size_t *n);

/* Appends the RESULT Rows frame for `results` (in read order); `read_cut`
 * says the reads stopped at the budget, so more rows may exist. `now_sec`
 * is the local time for ttl(). Fails with ERR_INVALID when an unpaged
 * query has more than CQL_SELECT_MAX_ROWS rows, or ERR_NOMEM. */
int cql_select_encode(const struct cql_select_plan *p,
		      struct storage_result *const *results, size_t n,
		      bool read_cut, int64_t now_sec, uint8_t version,
		      int16_t stream, struct buf *out);

/* The checks of a map element relation `m[k] op v` on `col` (Cassandra's
 * SingleColumnRelation.toReceivers): a non-frozen map and `=`. 0, or -1
 * with ERR_INVALID and Cassandra's sentence. */
int cql_where_element_check(const struct storage_column *col,
			    const struct cql_relation *r);

#endif
