/*
 * Row-level replica filtering protection in the simulator
 * (docs/indexes.md, "Row positions"): on a table with a clustering column
 * the replicas answer an indexed step with their index's rows only, at
 * every consistency level, and the coordinator reads from each contact
 * the rows another contact returned and it did not, by primary key, so a
 * row that is live and matching on one replica and deleted, updated or
 * missing on another resolves to its newest version.
 *
 * The store's index (coord_cluster.c, simc_new_clustered) lists the rows
 * whose live `v` is the value as that replica holds them.
 */
#include "tests/sim/coord_cluster.h"

#include "common/err.h"
#include "tests/lib/testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_seed;

#define NODES_ALL 7 /* a mask of nodes 0, 1, 2 */

/* Row (key, ck) = val (NULL: deleted) at ts, on the nodes of `mask`. */
static void put(struct simc *c, int mask, const char *key, const char *ck,
		const char *val, int64_t ts)
{
	struct storage_mutation *m = make_row_write(c, key, ck, val, ts);
	for (int i = 0; i < c->n; i++)
		if (mask & (1 << i))
			simc_apply(c, i, m);
	storage_mutation_delete(m);
}

/* Partition `key` deleted at ts (rows [from, to] only when from is set),
 * on the nodes of `mask`. */
static void del(struct simc *c, int mask, const char *key, const char *from,
		const char *to, int64_t ts)
{
	struct storage_mutation *m = storage_mutation_new(
		c->meta, (const uint8_t *)key, strlen(key));
	ck_assert_ptr_nonnull(m);
	if (from) {
		struct slice a =
			slice_make((const uint8_t *)from, strlen(from));
		struct slice b = slice_make((const uint8_t *)to, strlen(to));
		ck_assert_int_eq(storage_mutation_delete_range(m, &a, 1, true,
							       &b, 1, true, ts,
							       ts / 1000000),
				 0);
	} else
		ck_assert_int_eq(
			storage_mutation_delete_partition(m, ts, ts / 1000000),
			0);
	for (int i = 0; i < c->n; i++)
		if (mask & (1 << i))
			simc_apply(c, i, m);
	storage_mutation_delete(m);
}

/* The rows a walk's merged answer holds whose v is the value (the
 * coordinator's re-check), as "key/ck", sorted by the walk's order. */
#define MAXR 64
struct rows {
	int n;
	char row[MAXR][24];
	int steps;
};

static bool has_row(const struct rows *r, const char *row)
{
	for (int i = 0; i < r->n; i++)
		if (strcmp(r->row[i], row) == 0)
			return true;
	return false;
}

static void collect(struct simc *c, const struct storage_mutation *f,
		    const char *want, struct rows *out)
{
	struct storage_read_cmd cmd = {.with_static = true};
	struct storage_result *r = NULL;
	ck_assert_int_eq(
		storage_fragment_resolve(c->meta, f, &cmd, 1700000000, &r), 0);
	for (size_t i = 0; i < r->row_count; i++)
		for (size_t j = 0; j < r->rows[i].cell_count; j++) {
			struct storage_cell_view *cv = &r->rows[i].cells[j];
			if (cv->column != c->v_col ||
			    cv->value.len != strlen(want) ||
			    memcmp(cv->value.ptr, want, strlen(want)) != 0)
				continue;
			ck_assert_int_lt(out->n, MAXR);
			struct slice ck = r->rows[i].clustering[0];
			snprintf(out->row[out->n++], 24, "%.*s/%.*s",
				 (int)r->key.len, (const char *)r->key.ptr,
				 (int)ck.len, (const char *)ck.ptr);
		}
	storage_result_delete(r);
}

/* A walk of the whole ring from `coord` at `cl` with v = `value`, `max`
 * partitions a step, merged pieces. */
static void walk_rows(struct simc *c, int coord, const struct ring_strategy *s,
		      int cl, const char *value, uint32_t max, bool read_repair,
		      struct rows *out)
{
	memset(out, 0, sizeof(*out));
	struct slice val = slice_make((const uint8_t *)value, strlen(value));
	struct repl_index_expr ix = {
		.name = "t_v_idx", .vals = &val, .n_vals = 1};
	int64_t start = INT64_MIN;
	for (;; out->steps++) {
		struct range_out o;
		struct storage_read_cmd cmd = {.with_static = true};
		struct repl_range q = whole_ring_range(c, s, cl, &cmd, max);
		q.read_repair = read_repair;
		q.index = &ix;
		q.merge = true;
		q.start = start;
		run_range_step(c, coord, &q, &o);
		ck_assert_msg(o.res.outcome == REPL_OK, "%s", o.res.msg);
		for (size_t i = 0; i < o.n; i++)
			collect(c, o.f[i], value, out);
		bool finished = o.finished;
		int64_t resume = o.resume;
		range_out_free(&o);
		ck_assert_int_lt(out->steps, 1000);
		if (finished)
			break;
		ck_assert(resume > start);
		start = resume;
	}
}

static uint64_t rows_read(struct simc *c)
{
	uint64_t n = 0;
	for (int i = 0; i < c->n; i++)
		n += c->nodes[i].rows_read;
	return n;
}

static void rows_read_reset(struct simc *c)
{
	for (int i = 0; i < c->n; i++)
		c->nodes[i].rows_read = 0;
}

/* Four partitions of 20 rows (v "other", c05 "hit" everywhere), then the
 * replicas diverge, each divergence reaching two of the three (a
 * quorum), the third stale:
 *   p0/c07 written "hit" on 0 and 1 (2 lacks the row): found;
 *   p0/c05 deleted on 1 and 2 (0's index still lists it): gone;
 *   p0/c10 "hit" everywhere, then "miss" on 0 and 2 (1 stale): gone;
 *   p0/c12 "other" updated to "hit" on 1 and 2: found;
 *   p1 deleted on 0 and 1 (2 still lists c05): gone;
 *   p2 rows c00..c09 deleted on 1 and 2 (0 lists c05): gone;
 *   p3 as written: p3/c05 found. */
static void diverge(struct simc *c)
{
	const char *keys[4] = {"p0", "p1", "p2", "p3"};
	for (int k = 0; k < 4; k++)
		for (int r = 0; r < 20; r++) {
			char ck[8];
			snprintf(ck, sizeof(ck), "c%02d", r);
			put(c, NODES_ALL, keys[k], ck,
			    r == 5 || (k == 0 && r == 10) ? "hit" : "other",
			    10);
		}
	put(c, 1 | 2, "p0", "c07", "hit", 100);
	put(c, 2 | 4, "p0", "c05", NULL, 100);
	put(c, 1 | 4, "p0", "c10", "miss", 100);
	put(c, 2 | 4, "p0", "c12", "hit", 100);
	del(c, 1 | 2, "p1", NULL, NULL, 100);
	del(c, 2 | 4, "p2", "c00", "c09", 100);
}

static void check_rows(const struct rows *r)
{
	ck_assert_msg(r->n == 3, "%d rows: %s %s %s %s", r->n,
		      r->n > 0 ? r->row[0] : "", r->n > 1 ? r->row[1] : "",
		      r->n > 2 ? r->row[2] : "", r->n > 3 ? r->row[3] : "");
	ck_assert(has_row(r, "p0/c07"));
	ck_assert(has_row(r, "p0/c12"));
	ck_assert(has_row(r, "p3/c05"));
}

/* Every divergence resolves to the newest version (no resurrection, no
 * missing row) from every coordinator at QUORUM and ALL, in steps cut
 * at one partition and whole; the replicas read rows, not partitions. */
START_TEST(divergent_rows_resolve_to_the_newest)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new_clustered(g_seed, 3, dcs);
	struct ring_strategy *s = simple(3);
	diverge(c);
	int cls[2] = {REPL_CL_QUORUM, REPL_CL_ALL};
	uint32_t maxes[2] = {1000, 1};
	for (int k = 0; k < 2; k++)
		for (int m = 0; m < 2; m++)
			for (int coord = 0; coord < 3; coord++) {
				struct rows r;
				rows_read_reset(c);
				walk_rows(c, coord, s, cls[k], "hit", maxes[m],
					  false, &r);
				check_rows(&r);
				/* whole partitions: 20 rows each contact
				 * each partition (at least 160) */
				ck_assert_uint_lt(rows_read(c), 60);
				if (k == 0 && m == 0 && coord == 0)
					printf("rows read at QUORUM: %llu\n",
					       (unsigned long long)rows_read(
						       c));
			}
	/* read repair writes the merged rows back; the answer stands */
	struct rows r;
	walk_rows(c, 0, s, REPL_CL_ALL, "hit", 1000, true, &r);
	check_rows(&r);
	for (int i = 0; i < 3; i++) {
		walk_rows(c, i, s, REPL_CL_ONE, "hit", 1000, false, &r);
		check_rows(&r);
	}
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* One row hit on node 0 only: at ALL the other two are asked for that
 * row by its primary key, one row read each, not the partition's 20. */
START_TEST(protection_asks_for_the_rows_by_primary_key)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new_clustered(g_seed + 1, 3, dcs);
	struct ring_strategy *s = simple(3);
	for (int r = 0; r < 20; r++) {
		char ck[8];
		snprintf(ck, sizeof(ck), "c%02d", r);
		put(c, NODES_ALL, "p0", ck, "other", 10);
	}
	put(c, 1, "p0", "c05", "hit", 100);
	struct rows r;
	rows_read_reset(c);
	walk_rows(c, 0, s, REPL_CL_ALL, "hit", 1000, false, &r);
	ck_assert_int_eq(r.n, 1);
	ck_assert(has_row(&r, "p0/c05"));
	ck_assert_uint_eq(c->nodes[0].rows_read, 1);
	ck_assert_uint_eq(c->nodes[1].rows_read, 1);
	ck_assert_uint_eq(c->nodes[2].rows_read, 1);
	/* node 2 updated the row past the match: asked for it, it wins */
	put(c, 4, "p0", "c05", "miss", 200);
	walk_rows(c, 1, s, REPL_CL_ALL, "hit", 1000, false, &r);
	ck_assert_int_eq(r.n, 0);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* Older nodes: one that ignores ReadReq.cmds reads the partitions whole
 * for protection, one that ignores IndexExpr.rows answers with whole
 * partitions, one without ReadReq.keys one partition a message: the
 * answers stay exact, at more rows read. */
START_TEST(older_nodes_fall_back_to_partition_reads)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new_clustered(g_seed + 2, 3, dcs);
	struct ring_strategy *s = simple(3);
	diverge(c);
	struct rows r;
	rows_read_reset(c);
	walk_rows(c, 0, s, REPL_CL_ALL, "hit", 1000, false, &r);
	check_rows(&r);
	uint64_t rows_new = rows_read(c);
	for (int v = 0; v < 3; v++) {
		for (int i = 0; i < 3; i++) {
			c->nodes[i].old_rows = v == 0 && i > 0;
			c->nodes[i].old_index_rows = v == 1 && i == 2;
			c->nodes[i].old_reads = v == 2 && i == 1;
		}
		for (int coord = 0; coord < 3; coord++) {
			for (int k = 0; k < 2; k++) {
				rows_read_reset(c);
				walk_rows(c, coord, s,
					  k ? REPL_CL_ALL : REPL_CL_QUORUM,
					  "hit", k ? 1000 : 1, false, &r);
				check_rows(&r);
			}
		}
		rows_read_reset(c);
		walk_rows(c, 0, s, REPL_CL_ALL, "hit", 1000, false, &r);
		check_rows(&r);
		if (v < 2) /* whole partitions somewhere */
			ck_assert_uint_gt(rows_read(c), rows_new + 19);
	}
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("index_rows_sim");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, divergent_rows_resolve_to_the_newest);
	tcase_add_test(tc, protection_asks_for_the_rows_by_primary_key);
	tcase_add_test(tc, older_nodes_fall_back_to_partition_reads);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	g_seed = test_seed(20261207);
	return test_run(suite());
}
