/* Read_failure and Write_failure as the node answers them
 * (cql_data_encode_result): v5's reason map names each failed replica
 * with its RequestFailureReason code, v3/v4's <failures> counts them (1
 * when the coordinator named none). */
#include "client/proto/proto.h"
#include "common/buf.h"
#include "common/inet.h"
#include "node/cql_data_internal.h"
#include "replication/replication.h"
#include "tests/lib/testutil.h"

#include <check.h>
#include <stdint.h>
#include <string.h>

#define HEADER 9 /* version, flags, stream, opcode, length */

struct reader {
	const uint8_t *p;
	size_t left;
};

static uint32_t rd(struct reader *r, size_t n)
{
	ck_assert_uint_ge(r->left, n);
	uint32_t v = 0;
	for (size_t i = 0; i < n; i++)
		v = v << 8 | r->p[i];
	r->p += n;
	r->left -= n;
	return v;
}

/* The frame's error body up to <failures> / <reasonmap>: checks the
 * code, skips message, cl, received and block_for. */
static struct reader failure_body(const struct buf *b, uint32_t code)
{
	ck_assert_uint_gt(b->len, HEADER);
	struct reader r = {b->data + HEADER, b->len - HEADER};
	ck_assert_uint_eq(rd(&r, 4), code);
	uint32_t msg = rd(&r, 2);
	ck_assert_uint_ge(r.left, msg);
	r.p += msg;
	r.left -= msg;
	rd(&r, 2); /* cl */
	rd(&r, 4); /* received */
	rd(&r, 4); /* block_for */
	return r;
}

static void result_init(struct repl_result *res, enum repl_outcome o, int cl)
{
	memset(res, 0, sizeof(*res));
	res->outcome = o;
	res->cl = cl;
}

static void failed(struct repl_result *res, const char *ip, uint16_t code)
{
	struct inet_addr a;
	ck_assert_int_eq(inet_addr_parse(ip, 7000, &a), 0);
	repl_result_add_failure(res, &a, code);
}

START_TEST(read_failure_names_the_replica_in_v5_and_counts_it_before)
{
	struct repl_result res;
	result_init(&res, REPL_READ_FAILURE, REPL_CL_ONE);
	res.required = 1;
	failed(&res, "127.0.0.7", REPL_FAILURE_READ_TOO_MANY_TOMBSTONES);
	struct buf b;
	buf_init(&b);
	cql_data_encode_result(&b, 5, 3, &res, NULL);
	struct reader r = failure_body(&b, CQL_ERR_READ_FAILURE);
	ck_assert_uint_eq(rd(&r, 4), 1); /* one pair */
	ck_assert_uint_eq(rd(&r, 1), 4); /* an IPv4 address */
	ck_assert_uint_eq(rd(&r, 4), 0x7f000007);
	ck_assert_uint_eq(rd(&r, 2), 0x0001);
	ck_assert_uint_eq(rd(&r, 1), 0); /* data_present */
	ck_assert_uint_eq(r.left, 0);
	buf_free(&b);
	buf_init(&b);
	cql_data_encode_result(&b, 4, 3, &res, NULL);
	r = failure_body(&b, CQL_ERR_READ_FAILURE);
	ck_assert_uint_eq(rd(&r, 4), 1); /* <failures> */
	ck_assert_uint_eq(rd(&r, 1), 0);
	ck_assert_uint_eq(r.left, 0);
	buf_free(&b);
}
END_TEST

START_TEST(write_failure_names_every_failed_replica)
{
	struct repl_result res;
	result_init(&res, REPL_WRITE_FAILURE, REPL_CL_QUORUM);
	res.write_type = REPL_WRITE_SIMPLE;
	failed(&res, "127.0.0.2", REPL_FAILURE_UNKNOWN);
	failed(&res, "::1", REPL_FAILURE_INDEX_NOT_AVAILABLE);
	struct buf b;
	buf_init(&b);
	cql_data_encode_result(&b, 5, 1, &res, NULL);
	struct reader r = failure_body(&b, CQL_ERR_WRITE_FAILURE);
	ck_assert_uint_eq(rd(&r, 4), 2);
	ck_assert_uint_eq(rd(&r, 1), 4);
	ck_assert_uint_eq(rd(&r, 4), 0x7f000002);
	ck_assert_uint_eq(rd(&r, 2), 0x0000);
	ck_assert_uint_eq(rd(&r, 1), 16); /* an IPv6 address */
	for (int i = 0; i < 15; i++)
		ck_assert_uint_eq(rd(&r, 1), 0);
	ck_assert_uint_eq(rd(&r, 1), 1);
	ck_assert_uint_eq(rd(&r, 2), 0x0006);
	ck_assert_uint_eq(rd(&r, 2), strlen("SIMPLE"));
	buf_free(&b);
	buf_init(&b);
	cql_data_encode_result(&b, 4, 1, &res, NULL);
	r = failure_body(&b, CQL_ERR_WRITE_FAILURE);
	ck_assert_uint_eq(rd(&r, 4), 2);
	buf_free(&b);
}
END_TEST

/* Past REPL_RESULT_FAILURES_MAX the count goes on, the list stops; with
 * no replica named, v4 still says 1 and v5 sends an empty map. */
START_TEST(the_list_is_bounded_and_an_unnamed_failure_counts_one)
{
	struct repl_result res;
	result_init(&res, REPL_WRITE_FAILURE, REPL_CL_ALL);
	for (int i = 0; i < REPL_RESULT_FAILURES_MAX + 4; i++)
		failed(&res, "127.0.0.9", REPL_FAILURE_UNKNOWN);
	ck_assert_uint_eq(res.n_failed, REPL_RESULT_FAILURES_MAX + 4);
	ck_assert_uint_eq(res.n_failed_listed, REPL_RESULT_FAILURES_MAX);
	struct buf b;
	buf_init(&b);
	cql_data_encode_result(&b, 4, 1, &res, NULL);
	struct reader r = failure_body(&b, CQL_ERR_WRITE_FAILURE);
	ck_assert_uint_eq(rd(&r, 4), REPL_RESULT_FAILURES_MAX + 4);
	buf_free(&b);

	result_init(&res, REPL_READ_FAILURE, REPL_CL_ONE);
	buf_init(&b);
	cql_data_encode_result(&b, 4, 1, &res, NULL);
	r = failure_body(&b, CQL_ERR_READ_FAILURE);
	ck_assert_uint_eq(rd(&r, 4), 1);
	buf_free(&b);
	buf_init(&b);
	cql_data_encode_result(&b, 5, 1, &res, NULL);
	r = failure_body(&b, CQL_ERR_READ_FAILURE);
	ck_assert_uint_eq(rd(&r, 4), 0);
	buf_free(&b);
}
END_TEST

START_TEST(replica_errors_map_to_request_failure_reasons)
{
	ck_assert_int_eq(repl_failure_code_of("READ_TOO_MANY_TOMBSTONES"),
			 REPL_FAILURE_READ_TOO_MANY_TOMBSTONES);
	ck_assert_int_eq(repl_failure_code_of("INDEX_NOT_AVAILABLE"),
			 REPL_FAILURE_INDEX_NOT_AVAILABLE);
	ck_assert_int_eq(repl_failure_code_of("IO"), REPL_FAILURE_UNKNOWN);
	ck_assert_int_eq(repl_failure_code_of(NULL), REPL_FAILURE_UNKNOWN);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_failures");
	TCase *tc = tcase_create("core");
	tcase_add_test(
		tc, read_failure_names_the_replica_in_v5_and_counts_it_before);
	tcase_add_test(tc, write_failure_names_every_failed_replica);
	tcase_add_test(tc,
		       the_list_is_bounded_and_an_unnamed_failure_counts_one);
	tcase_add_test(tc, replica_errors_map_to_request_failure_reasons);
	suite_add_tcase(s, tc);
	return test_run(s);
}
