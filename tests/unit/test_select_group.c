/* client/exec GROUP BY: Cassandra's refusals (getAggregationSpecification),
 * and groups paged at every page size through the plan and the encoder as
 * the data path drives them (partitions kept while they add groups, up to
 * the budget), each group once, whole, in order. */
#include "client/cql/cql_parse.h"
#include "client/exec/select.h"
#include "client/exec/select_internal.h"
#include "client/schema/schema.h"
#include "common/err.h"
#include "common/murmur3.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct cql_schema *schema;

static void ddl(const char *q)
{
	struct arena a;
	int binds;
	uint8_t id[16] = {0};
	struct cql_schema_change ch;
	static int n;
	id[15] = (uint8_t)++n;
	arena_create(&a, 0);
	struct cql_stmt *s = cql_parse(&a, q, strlen(q), &binds, NULL);
	ck_assert_msg(s != NULL, "%s", err_msg());
	ck_assert_int_eq(cql_schema_apply(schema, s, "ks", id, &ch),
			 CQL_SCHEMA_OK);
	arena_destroy(&a);
}

static void setup(void)
{
	schema = cql_schema_new();
	ddl("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
	    "'replication_factor': 1}");
	ddl("CREATE TABLE ks.t (a int, b int, c int, d int, e int, "
	    "PRIMARY KEY (a, b, c, d))");
	ddl("CREATE TABLE ks.t2 (a int, b int, c int, d int, "
	    "PRIMARY KEY ((a, b), c))");
	ddl("CREATE TABLE ks.t3 (a int PRIMARY KEY, b int, c int)");
}

static void teardown(void)
{
	cql_schema_delete(schema);
}

static const struct cql_table *table(const char *name)
{
	return cql_schema_table(schema, "ks", name);
}

/* cql_select_check of `q`: "" when accepted, else the message. */
static const char *check(const char *q)
{
	static char msg[512];
	struct arena a;
	int binds;
	arena_create(&a, 0);
	struct cql_stmt *s = cql_parse(&a, q, strlen(q), &binds, NULL);
	ck_assert_msg(s && s->kind == CQL_STMT_SELECT, "%s: %s", q, err_msg());
	int rc = cql_select_check(&a, &s->u.select,
				  table(s->u.select.table.name));
	snprintf(msg, sizeof(msg), "%s", rc == 0 ? "" : err_msg());
	arena_destroy(&a);
	return msg;
}

#define ORDER_MSG                                                              \
	"Group by currently only support groups of columns following their "   \
	"declared order in the PRIMARY KEY"

START_TEST(refusals_are_cassandras)
{
	ck_assert_str_eq(check("SELECT a, count(*) FROM ks.t GROUP BY a, b"),
			 "");
	ck_assert_str_eq(check("SELECT a FROM ks.t WHERE a = 1 GROUP BY b, c"),
			 "");
	ck_assert_str_eq(
		check("SELECT a FROM ks.t WHERE a = 1 AND b = 2 GROUP BY c"),
		"");
	ck_assert_str_eq(
		check("SELECT a FROM ks.t WHERE a = 1 AND (b, c) = (1, 2) "
		      "GROUP BY d"),
		"");
	ck_assert_str_eq(check("SELECT a FROM ks.t WHERE a = 1 GROUP BY a, e"),
			 "Group by is currently only supported on the columns "
			 "of the PRIMARY KEY, got e");
	ck_assert_str_eq(check("SELECT a FROM ks.t WHERE a = 1 GROUP BY c"),
			 ORDER_MSG);
	ck_assert_str_eq(
		check("SELECT a FROM ks.t WHERE a = 1 GROUP BY a, c, b"),
		ORDER_MSG);
	ck_assert_str_eq(check("SELECT a FROM ks.t WHERE a = 1 GROUP BY a, a"),
			 ORDER_MSG);
	ck_assert_str_eq(check("SELECT a FROM ks.t WHERE a IN (1, 2) GROUP BY "
			       "b"),
			 ORDER_MSG);
	ck_assert_str_eq(check("SELECT a FROM ks.t WHERE token(a) = token(1) "
			       "GROUP BY b"),
			 ORDER_MSG);
	ck_assert_str_eq(check("SELECT a FROM ks.t GROUP BY a, z"),
			 "Undefined column name z in table ks.t");
	ck_assert_str_eq(check("SELECT DISTINCT a FROM ks.t GROUP BY a, b"),
			 "Grouping on clustering columns is not allowed for "
			 "SELECT DISTINCT queries");
	ck_assert_str_eq(check("SELECT DISTINCT a, count(a) FROM ks.t GROUP BY "
			       "a"),
			 "");
	ck_assert_str_eq(check("SELECT a, max(d) FROM ks.t2 GROUP BY a"),
			 "Group by is not supported on only a part of the "
			 "partition key");
	ck_assert_str_eq(check("SELECT a, max(d) FROM ks.t2 WHERE a = 1 AND "
			       "b = 1 GROUP BY b"),
			 "");
	ck_assert_str_eq(check("SELECT a, max(c) FROM ks.t3 GROUP BY a, a"),
			 ORDER_MSG);
	/* PER PARTITION LIMIT: refused for an aggregate of everything only */
	ck_assert_str_eq(check("SELECT a, count(*) FROM ks.t GROUP BY a, b "
			       "PER PARTITION LIMIT 1"),
			 "");
	ck_assert_str_eq(check("SELECT count(*) FROM ks.t PER PARTITION LIMIT "
			       "1"),
			 "PER PARTITION LIMIT is not allowed with aggregate "
			 "queries.");
}
END_TEST

/* ---- synthetic partitions of ks.t ------------------------------------- */

struct part {
	uint8_t key[4];
	struct storage_result r;
	struct storage_row_view rows[8];
	struct slice ck[8][3];
	struct storage_cell_view cells[8];
	uint8_t vals[8][4][4];
};

static struct part parts[3];

static void put_int(uint8_t *b, int32_t v)
{
	be32_store(b, (uint32_t)v);
}

/* Partition `a` with `n` rows of (b, c, d, e), in clustering order. */
static void make_part(struct part *pt, int32_t a, const int32_t (*rows)[4],
		      size_t n)
{
	memset(pt, 0, sizeof(*pt));
	put_int(pt->key, a);
	pt->r.key = slice_make(pt->key, 4);
	pt->r.token = murmur3_token(pt->key, 4);
	pt->r.rows = pt->rows;
	pt->r.row_count = n;
	int e = cql_table_column(table("t"), "e");
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < 4; k++)
			put_int(pt->vals[i][k], rows[i][k]);
		for (size_t k = 0; k < 3; k++)
			pt->ck[i][k] = slice_make(pt->vals[i][k], 4);
		pt->cells[i] = (struct storage_cell_view){
			.column = (uint16_t)e,
			.value = slice_make(pt->vals[i][3], 4),
			.ts = 1};
		pt->rows[i] = (struct storage_row_view){.clustering = pt->ck[i],
							.clustering_count = 3,
							.marker_ts = 1,
							.cells = &pt->cells[i],
							.cell_count = 1};
	}
}

static void make_parts(void)
{
	static const int32_t p1[][4] = {
		{2, 1, 3, 6}, {2, 2, 6, 12}, {4, 2, 6, 12}, {4, 2, 12, 24}};
	static const int32_t p2[][4] = {{2, 3, 3, 6}, {4, 3, 6, 12}};
	make_part(&parts[0], 1, p1, 4);
	make_part(&parts[1], 2, p2, 2);
	make_part(&parts[2], 3, NULL, 0);
}

static const struct storage_result *result_of(struct slice key)
{
	for (size_t i = 0; i < 3; i++)
		if (slice_eq(parts[i].r.key, key))
			return &parts[i].r;
	return NULL;
}

/* ---- a RESULT Rows frame read back ------------------------------------- */

#define NULLV INT64_MIN

struct page {
	int64_t rows[64][8];
	size_t nrows, ncols;
	uint8_t state[512];
	size_t state_len;
	bool more;
};

static uint32_t rd32(const uint8_t **p)
{
	uint32_t v = be32_load(*p);
	*p += 4;
	return v;
}

static uint16_t rd16(const uint8_t **p)
{
	uint16_t v = (uint16_t)((*p)[0] << 8 | (*p)[1]);
	*p += 2;
	return v;
}

static void parse_page(const struct buf *b, struct page *pg)
{
	memset(pg, 0, sizeof(*pg));
	const uint8_t *p = b->data + 9;
	ck_assert_uint_eq(b->data[4], CQL_OP_RESULT);
	ck_assert_uint_eq(rd32(&p), CQL_RESULT_ROWS);
	uint32_t flags = rd32(&p);
	pg->ncols = rd32(&p);
	if (flags & 0x0002) {
		pg->more = true;
		pg->state_len = rd32(&p);
		ck_assert_uint_le(pg->state_len, sizeof(pg->state));
		memcpy(pg->state, p, pg->state_len);
		p += pg->state_len;
	}
	bool global = flags & 0x0001;
	if (global)
		for (int i = 0; i < 2; i++)
			p += rd16(&p);
	for (size_t c = 0; c < pg->ncols; c++) {
		for (int i = 0; !global && i < 2; i++)
			p += rd16(&p);
		p += rd16(&p);
		rd16(&p); /* int and bigint only here */
	}
	pg->nrows = rd32(&p);
	ck_assert_uint_le(pg->nrows, 64);
	for (size_t r = 0; r < pg->nrows; r++)
		for (size_t c = 0; c < pg->ncols; c++) {
			int32_t len = (int32_t)rd32(&p);
			int64_t v = NULLV;
			if (len == 4)
				v = (int32_t)be32_load(p);
			else if (len == 8)
				v = (int64_t)be64_load(p);
			p += len > 0 ? len : 0;
			pg->rows[r][c] = v;
		}
	ck_assert_ptr_eq(p, b->data + b->len);
}

/* Runs `q` with pages of `page` groups to the end, as the data path
 * does (keys from the plan's first key; a partition kept when it adds
 * groups; reads stop at the budget); every row in `out`. */
static size_t run_paged(const char *q, int32_t page, int64_t (*out)[8],
			size_t cap, size_t *ncols)
{
	uint8_t state[512];
	size_t state_len = 0, n = 0, pages = 0;
	bool first = true;
	for (;;) {
		struct arena a;
		int binds;
		arena_create(&a, 0);
		struct cql_stmt *s = cql_parse(&a, q, strlen(q), &binds, NULL);
		ck_assert_ptr_nonnull(s);
		struct cql_fn_ctx fn = {0};
		struct cql_select_plan *p = cql_select_plan_new(
			&a, &s->u.select, table("t"), NULL, 0, &fn);
		ck_assert_msg(p != NULL, "%s: %s", q, err_msg());
		struct slice st = slice_make(state, state_len);
		ck_assert_msg(
			cql_select_plan_page(p, page, first ? NULL : &st) == 0,
			"%s", err_msg());
		ck_assert(cql_select_plan_is_grouped(p));
		size_t budget = cql_select_plan_row_budget(p), rows = 0, k = 0;
		struct storage_result *kept[3];
		for (size_t i = cql_select_plan_first_key(p);
		     rows < budget && i < cql_select_plan_key_count(p); i++) {
			const struct storage_result *r =
				result_of(cql_select_plan_key(p, i));
			size_t fresh = cql_select_plan_rows_new(p, r, k);
			if (fresh) {
				kept[k++] = (struct storage_result *)r;
				rows += fresh;
			}
		}
		struct buf b;
		buf_init(&b);
		ck_assert_msg(cql_select_encode(p, kept, k, rows >= budget, 1,
						4, 0, &b) == 0,
			      "%s", err_msg());
		struct page pg;
		parse_page(&b, &pg);
		buf_free(&b);
		arena_destroy(&a);
		ck_assert_uint_le(pg.nrows, (size_t)page);
		/* a page with a state is never empty */
		ck_assert(!pg.more || pg.nrows > 0);
		*ncols = pg.ncols;
		for (size_t r = 0; r < pg.nrows && n < cap; r++)
			memcpy(out[n++], pg.rows[r], sizeof(out[0]));
		ck_assert_uint_lt(++pages, 50);
		if (!pg.more)
			return n;
		memcpy(state, pg.state, pg.state_len);
		state_len = pg.state_len;
		first = false;
	}
}

static void expect_groups(const char *q, const int64_t (*want)[8], size_t n,
			  size_t ncols)
{
	for (int32_t page = 1; page <= 6; page++) {
		int64_t got[64][8];
		size_t nc = 0;
		size_t m = run_paged(q, page, got, 64, &nc);
		ck_assert_msg(m == n, "%s page %d: %zu rows, want %zu", q, page,
			      m, n);
		ck_assert_uint_eq(nc, ncols);
		for (size_t r = 0; r < n; r++)
			for (size_t c = 0; c < ncols; c++)
				ck_assert_msg(
					got[r][c] == want[r][c],
					"%s page %d row %zu col %zu: %lld "
					"want %lld",
					q, page, r, c, (long long)got[r][c],
					(long long)want[r][c]);
	}
}

START_TEST(groups_page_whole_and_once)
{
	make_parts();
	static const int64_t by_b[][8] = {{1, 2, 6, 2, 12},
					  {1, 4, 12, 2, 24},
					  {2, 2, 6, 1, 6},
					  {2, 4, 12, 1, 12}};
	expect_groups("SELECT a, b, e, count(b), max(e) FROM ks.t WHERE a IN "
		      "(1, 2, 3) GROUP BY a, b",
		      by_b, 4, 5);
	static const int64_t by_c[][8] = {{1, 2, 1, 6, 1},
					  {1, 2, 2, 12, 1},
					  {1, 4, 2, 12, 2},
					  {2, 2, 3, 6, 1},
					  {2, 4, 3, 12, 1}};
	expect_groups("SELECT a, b, c, e, count(*) FROM ks.t WHERE a IN (3, "
		      "2, 1) GROUP BY a, b, c",
		      by_c, 5, 5);
	static const int64_t by_a[][8] = {{1, 2, 54, 4}, {2, 2, 18, 2}};
	expect_groups("SELECT a, b, sum(e), count(e) FROM ks.t WHERE a IN (1, "
		      "2, 3) GROUP BY a",
		      by_a, 2, 4);
	/* LIMIT and PER PARTITION LIMIT count groups across pages */
	expect_groups("SELECT a, b, e, count(b), max(e) FROM ks.t WHERE a IN "
		      "(1, 2, 3) GROUP BY a, b LIMIT 3",
		      by_b, 3, 5);
	static const int64_t ppl[][8] = {{1, 2, 6, 2, 12}, {2, 2, 6, 1, 6}};
	expect_groups("SELECT a, b, e, count(b), max(e) FROM ks.t WHERE a IN "
		      "(1, 2, 3) GROUP BY a, b PER PARTITION LIMIT 1",
		      ppl, 2, 5);
	static const int64_t one[][8] = {
		{1, 2, 1, 6, 1}, {1, 2, 2, 12, 1}, {1, 4, 2, 12, 2}};
	expect_groups("SELECT a, b, c, e, count(*) FROM ks.t WHERE a = 1 "
		      "GROUP BY b, c",
		      one, 3, 5);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("select_group");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, refusals_are_cassandras);
	tcase_add_test(tc, groups_page_whole_and_once);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
