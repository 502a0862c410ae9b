/* The slow query log's reports (node/slow_queries.h) on a simulated clock:
 * what is reported, how entries are gathered, and that each report's
 * figures are its own. */
#include "common/inet.h"
#include "common/log.h"
#include "node/slow_queries.h"
#include "tests/lib/testutil.h"
#include "tests/sim/sim.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char log_path[600];

static char *read_log(void)
{
	FILE *f = fopen(log_path, "r");
	ck_assert_ptr_nonnull(f);
	static char text[65536];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	return text;
}

static size_t count(const char *hay, const char *needle)
{
	size_t c = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		c++;
	return c;
}

START_TEST(reports_are_gathered_and_each_stands_alone)
{
	const char *dir = test_tmpdir("slowq");
	snprintf(log_path, sizeof(log_path), "%s/system.log", dir);
	ck_assert_int_eq(log_open_file(log_path), 0);
	struct sim *s = sim_new(1, 1700000000000000);
	struct inet_addr a;
	inet_addr_parse("127.0.0.1:7000", 7000, &a);
	struct env *e = sim_env_new(s, &a);
	ck_assert_ptr_null(node_slow_queries_new(e, 0)); /* off */
	struct node_slow_queries *q = node_slow_queries_new(e, 500000);
	ck_assert_ptr_nonnull(q);
	const char *sel = "SELECT *\n  FROM ks.t\tWHERE k = ?";
	node_slow_queries_note(q, sel, strlen(sel), 400000, 1); /* fast */
	node_slow_queries_note(q, sel, strlen(sel), 600000, 1);
	node_slow_queries_note(q, sel, strlen(sel), 800000, 3);
	node_slow_queries_note(q, "SELECT * FROM ks.t", 18, 900000, 40);
	sim_run_for(s, NODE_SLOW_QUERIES_INTERVAL_US + 1);
	char *log = read_log();
	ck_assert_ptr_nonnull(
		strstr(log, "3 operations were slow in the last 5000 msecs:"));
	ck_assert_ptr_nonnull(strstr(
		log, "<SELECT * FROM ks.t WHERE k = ?>, was slow 2 times: "
		     "avg/min/max 700/600/800 msec - slow timeout 500 msec, 2 "
		     "rows avg"));
	ck_assert_ptr_nonnull(strstr(log, "<SELECT * FROM ks.t>, time 900 msec "
					  "- slow timeout 500 msec, 40 rows"));
	/* the next report counts only its own operations */
	node_slow_queries_note(q, sel, strlen(sel), 550000, 1);
	sim_run_for(s, NODE_SLOW_QUERIES_INTERVAL_US);
	log = read_log();
	ck_assert_ptr_nonnull(strstr(
		log, "<SELECT * FROM ks.t WHERE k = ?>, time 550 msec - slow "
		     "timeout 500 msec, 1 rows"));
	ck_assert_uint_eq(count(log, "operations were slow"), 2);
	/* a quiet interval reports nothing */
	sim_run_for(s, NODE_SLOW_QUERIES_INTERVAL_US);
	ck_assert_uint_eq(count(read_log(), "operations were slow"), 2);
	/* past the cap of distinct queries the rest are counted */
	char text[32];
	for (int i = 0; i < NODE_SLOW_QUERIES_MAX + 3; i++) {
		int n = snprintf(text, sizeof(text), "SELECT %d", i);
		node_slow_queries_note(q, text, (size_t)n, 600000, 0);
	}
	node_slow_queries_flush(q);
	ck_assert_ptr_nonnull(strstr(
		read_log(), "... and 3 more slow operations of other queries"));
	node_slow_queries_delete(q);
	sim_delete(s);
	log_close_file();
	test_tmpdir_remove(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_slow_queries");
	TCase *t = tcase_create("reports");
	tcase_add_test(t, reports_are_gathered_and_each_stands_alone);
	suite_add_tcase(s, t);
	return test_run(s);
}
