/*
 * The insides of a SELECT plan, shared by select.c (planning: ORDER BY,
 * limits, checks of the selection), select_where.c (WHERE),
 * select_selectors.c (selections) and select_rows.c (what a read sends
 * back: rows, aggregates, paging states).
 */
#ifndef CASSINI_CLIENT_SELECT_INTERNAL_H
#define CASSINI_CLIENT_SELECT_INTERNAL_H

#include "client/cql/cql_functions.h"
#include "client/exec/select.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum out_kind {
	OUT_COLUMN,
	OUT_WRITETIME,
	OUT_TTL,
	OUT_TOKEN,
	OUT_COUNT,   /* count(*) */
	OUT_AGG,     /* an aggregate of a column: agg */
	OUT_ELEMENT, /* m['k'], s[e]: the cell at path `element` */
	OUT_FN,      /* a native function, cast or typed constant: expr */
	/* a non-frozen collection's cells (select_times.c, Cassandra
	 * 5.0): writetime() and ttl() as lists, maxwritetime() */
	OUT_WRITETIMES,
	OUT_TTLS,
	OUT_MAXWRITETIME,
	OUT_FIELD, /* u.f, u.f.g: a user type column's field */
};

/* How deep u.f.g... may select. */
#define OUT_FIELD_DEPTH 8

/* A selection made of native functions (client/cql/cql_functions.h) over a
 * column or constants: a column's value, a constant (folded when the
 * plan is made), or a call of `fn` on `arg`. */
/* floor(c, duration[, start]) of a column of type `kind` (Cassandra 5.0),
 * in GROUP BY or as a selector. */
struct cql_floor_spec {
	uint8_t kind; /* enum cql_floor_kind */
	struct storage_duration dur;
	int64_t start; /* ms (days for a date column) */
};

struct sel_expr {
	int column;    /* >= 0: that column's value */
	bool is_const; /* else: the constant `value` (null: `null`) */
	bool null;
	struct slice value;
	struct cql_fn fn;     /* else: fn(arg) */
	struct sel_expr *arg; /* NULL when fn takes no argument */
	uint16_t type;        /* what it gives (0: an untyped literal) */
	const struct cql_term *literal; /* an untyped literal, until typed */
	const struct cql_floor_spec *floor; /* else: floor(arg, ...) */
};

/* Cassandra's native aggregates of one column. */
enum agg_fn { AGG_COUNT, AGG_MIN, AGG_MAX, AGG_SUM, AGG_AVG };

struct out_col {
	enum out_kind kind;
	int column;
	const char *name;
	/* The column's type (held by the plan's meta), or a static leaf */
	const struct storage_type *type;
	enum agg_fn agg;       /* OUT_AGG */
	struct slice element;  /* OUT_ELEMENT */
	struct sel_expr *expr; /* OUT_FN */
	/* toJson(): the value is sent as its JSON text, `to_json` times
	 * (toJson(toJson(v))), the first of `json_type` (select_json.c) */
	uint8_t to_json;
	const struct storage_type *json_type;
	/* OUT_FIELD: the field positions, outermost first; OUT_WRITETIME and
	 * OUT_TTL of u.f (Cassandra 5.0): fields[0] is the non-frozen user
	 * type's field whose cell is read (field_depth > 0) */
	uint16_t fields[OUT_FIELD_DEPTH];
	size_t field_depth;
};

/* A restriction checked on every row read (ALLOW FILTERING, or a column
 * with a secondary index: the index only narrows what is read, each row is
 * checked against the data all the same). `op` is =, <, <=, >, >= against
 * `value`, IN against `in` (n_in values), or CONTAINS / CONTAINS KEY of
 * `value` among a collection's elements (values) or keys; `type` is what
 * `value` is compared as (the column's type, or its elements' or keys').
 * `analyzer` (STORAGE_SAI_* bits: an index with case_sensitive: false,
 * normalize or ascii) compares text analysed, against `avalue` / `ain`,
 * the analysed copies of `value` / `in`. */
struct filter {
	int column;
	enum cql_op op;
	const struct storage_type *type;
	struct slice value;
	struct slice *in;
	size_t n_in;
	unsigned analyzer;
	struct slice avalue;
	struct slice *ain;
	/* the index serving it, or NULL (cql_select_plan_index) */
	const struct cql_index *ix;
	/* m[key] = value (op EQ, type the map's values'): the cell of path
	 * `key` holds `value`; `pair` is (key, value) as a tuple<key, value>
	 * value, what an entries(m) index looks up */
	bool entry;
	struct slice key;
	struct slice pair;
};

/* Where a page stopped: the last row looked at (sent or filtered out). */
#define PAGE_STATE_MAGIC 0xC1
#define PAGE_WHOLE       0x01 /* that partition's output is complete */
struct page_pos {
	bool set;
	bool whole;
	uint32_t key_index; /* key lists: which key */
	int64_t token;      /* scans: the partition's token */
	struct slice key;
	struct slice ck[32];
	size_t ck_count;
	uint64_t emitted;      /* rows sent on earlier pages */
	uint64_t in_partition; /* of them, rows of the position's partition */
};

struct cql_select_plan {
	const struct cql_table *t;
	const struct storage_table_meta *m;
	struct arena *a;
	/* now(), uuid(), ... in WHERE: the request's time and generators,
	 * while cql_select_plan_new runs (NULL after) */
	const struct cql_fn_ctx *fn;
	struct buf keys;
	size_t *key_offs;
	size_t key_count;
	bool scan;
	int64_t start_token, end_token;
	struct storage_read_cmd cmd;
	struct storage_slice slice;
	struct out_col *outs;
	size_t nouts;
	struct filter *filters;
	size_t nfilters;
	size_t per_partition_limit;
	bool distinct;
	bool json;      /* SELECT JSON: one [json] text column per row */
	bool aggregate; /* count(*) or aggregates: one row of them */
	bool clustering_restricted;
	/* IN on a partition key column; with ORDER BY, rows are sorted
	 * across partitions after the reads (by the first order_count
	 * clustering columns), which only an unpaged query can do. */
	bool key_in;
	bool post_order;
	size_t order_count;
	bool ck_eq[32]; /* clustering column i is restricted by = */
	/* Paging: the user's LIMIT (SIZE_MAX: none), rows per page, and where
	 * the previous page stopped. */
	size_t user_limit;
	size_t page;
	bool paged;
	struct page_pos pos;
	/* GROUP BY (select_group.c): rows grouped by partition and the first
	 * group_ck clustering values; LIMIT, PER PARTITION LIMIT and pages
	 * count groups. */
	bool grouped;
	size_t group_ck;
	/* GROUP BY ..., floor(c, floor_dur[, start]) (Cassandra 5.0): the
	 * last grouped clustering column is compared by its floor */
	bool group_floor;
	struct cql_floor_spec group_fl;
	bool token_restricted; /* a token() relation made the range */
};

/* An aggregate's running value over the rows a query selects. */
struct agg_acc {
	uint64_t n;        /* values seen (NULLs are skipped) */
	uint64_t isum;     /* integer sum, wrapping as Java's does */
	__int128 wide;     /* the same without overflow, for avg */
	double dsum;       /* floating sum */
	struct slice best; /* min, max: the value so far (in the results) */
};

/* select_rows.c's row pieces, for select_group.c. */
bool cql_select_at_position(const struct cql_select_plan *p,
			    const struct storage_result *r, size_t k);
bool cql_select_row_passes(const struct cql_select_plan *p,
			   const struct storage_result *r,
			   const struct storage_row_view *row,
			   const struct storage_row_view *stat);
/* `n` rows (groups) of a partition as PER PARTITION LIMIT lets them be
 * sent: at most what the limit leaves of it (less the rows sent before
 * when the page resumes in it, `at_pos`). */
size_t cql_select_ppl_clamp(const struct cql_select_plan *p, bool at_pos,
			    size_t n);
bool cql_select_column_value(const struct cql_select_plan *p,
			     const struct storage_result *r,
			     const struct storage_row_view *row,
			     const struct storage_row_view *stat, int column,
			     struct slice *v);
int cql_select_write_out(const struct cql_select_plan *p, struct buf *out,
			 const struct out_col *o,
			 const struct storage_result *r,
			 const struct storage_row_view *row,
			 const struct storage_row_view *stat, int64_t now_sec);
void cql_select_agg_add(const struct cql_select_plan *p,
			const struct out_col *o, struct agg_acc *a,
			struct slice v);
int cql_select_agg_write(const struct cql_select_plan *p,
			 const struct out_col *o, const struct agg_acc *a,
			 struct buf *out);

/* OUT_WRITETIMES, OUT_TTLS, OUT_MAXWRITETIME of `src` (the row or the
 * static row), as one value (select_times.c). */
/* Their result type: list<bigint>, or list<int> for ttl(). */
const struct storage_type *cql_select_times_type(bool ttl);
int cql_select_write_cell_times(const struct cql_select_plan *p,
				struct buf *out, const struct out_col *o,
				const struct storage_row_view *src,
				int64_t now_sec);
/* writetime() (bigint) or ttl() (int, null without a TTL) of one cell,
 * null when c is NULL (select_times.c). */
int cql_select_write_cell_time(struct buf *out, bool writetime,
			       const struct storage_cell_view *c,
			       int64_t now_sec);

/* GROUP BY (select_group.c). The checks Cassandra makes when it prepares
 * the statement (getAggregationSpecification): 0 with *ck the length of
 * the grouped clustering prefix, or -1 with the client's error. */
int cql_select_group_check(const struct cql_select_plan *p,
			   const struct cql_select *q, size_t *ck);
/* Makes `p` (planned without its GROUP BY) a grouped read. */
int cql_select_group_plan(struct cql_select_plan *p,
			  const struct cql_select *q);
/* cql_select_plan_rows_new and cql_select_encode of a grouped plan: groups
 * instead of rows. */
size_t cql_select_group_rows_new(const struct cql_select_plan *p,
				 const struct storage_result *r, size_t k);
int cql_select_group_encode(const struct cql_select_plan *p,
			    struct storage_result *const *results, size_t n,
			    bool read_cut, int64_t now_sec, uint8_t version,
			    int16_t stream, struct buf *out);

/* Frames a page of encoded rows (rowsb) as a Rows result, with the paging
 * state in `state` when has_state; frees rowsb and state. rc: the status of
 * the page's encoding so far (non-zero: the error set, out emptied). */
int cql_select_reply_rows(struct buf *out, uint8_t version, int16_t stream,
			  const struct cql_column_spec *specs, size_t nspecs,
			  bool has_state, size_t page_rows, struct buf *rowsb,
			  struct buf *state, int rc);

/* floor()'s arguments after the column (`args`: the duration and the
 * optional start) for a column of CQL type `type`: 0 with *out, or -1 with
 * Cassandra's error. Shared by GROUP BY floor() and the selector; the
 * duration's own check (cql_floor_check) is the caller's, in Cassandra's
 * order. */
int cql_select_floor_args(uint16_t type, const struct cql_term *const *args,
			  size_t nargs, struct cql_floor_spec *out);
/* The floor of a column value `v`, in the column's unit (ms for a
 * timestamp or timeuuid, days for a date, ns for a time): 0, or -1 with
 * Cassandra's error (a time before the window's start). An empty value
 * floors to 0. */
int cql_select_floor_value(const struct cql_floor_spec *fl, struct slice v,
			   int64_t *out);
/* Cassandra's "none of its type signatures match" for floor(): -1. */
int cql_select_floor_signatures_error(void);

/* The width of an integer type's values, or 0 for a type that is not. */
static inline size_t select_int_width(uint16_t kind)
{
	switch (kind) {
	case STORAGE_TYPE_TINYINT:
		return 1;
	case STORAGE_TYPE_SMALLINT:
		return 2;
	case STORAGE_TYPE_INT:
		return 4;
	case STORAGE_TYPE_BIGINT:
	case STORAGE_TYPE_COUNTER:
		return 8;
	default:
		return 0;
	}
}

/* What a term gave: a value, null, or (bound) unset. */
enum given { GIVEN_VALUE, GIVEN_NULL, GIVEN_UNSET };

/* A relation's value for column type `type`, copied into the arena;
 * *given says whether it was null or unset instead (select_where.c). */
int cql_select_value_of(struct cql_select_plan *p, const struct cql_term *t,
			const struct storage_type *type, const char *column,
			const struct cql_value *binds, size_t nbinds,
			struct slice *out, enum given *given);
/* WHERE into keys, token ranges, clustering slices and filters
 * (select_where.c). */
int cql_select_plan_where(struct cql_select_plan *p, const struct cql_select *q,
			  const struct cql_value *binds, size_t nbinds);
/* SELECT JSON and toJson() (select_json.c): toJson(x) in a selection
 * (1 when `s` is not a call of it); the rows written as JSON, in place;
 * the result columns of the plan. */
int cql_select_plan_to_json(struct cql_select_plan *p,
			    const struct cql_selector *s);
int cql_select_json_rows(const struct cql_select_plan *p, struct buf *rows,
			 size_t nrows);
struct cql_column_spec *cql_select_specs(const struct cql_select_plan *p,
					 size_t *n);
/* Selectors (select_selectors.c). */
int cql_select_plan_star(struct cql_select_plan *p);
int cql_select_plan_selector(struct cql_select_plan *p,
			     const struct cql_selector *s);

#endif
