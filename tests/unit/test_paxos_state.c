/* Paxos ballots and acceptor registers (replication/paxos.h): the timeuuid
 * form, a clock that never repeats or goes back, the prepare / propose /
 * commit rules, and the stored form refusing damaged bytes. */
#include "common/err.h"
#include "replication/paxos.h"
#include "replication/paxos_internal.h"
#include "tests/lib/testutil.h"

#include <stdlib.h>

static struct paxos_ballot B(int64_t us, uint64_t lsb) {
	return (struct paxos_ballot){us, (lsb & ~(3ULL << 62)) | (2ULL << 62)};
}

START_TEST(ballot_uuid_round_trip_and_order)
{
	struct paxos_clock c;
	paxos_clock_init(&c, 0x1234567890abcdefULL, 0);
	struct paxos_ballot prev = {0, 0};
	for (int i = 0; i < 1000; i++) {
		struct paxos_ballot b =
			paxos_clock_next(&c, 1700000000000000LL + i / 3, NULL);
		ck_assert_int_gt(paxos_ballot_cmp(&b, &prev), 0);
		uint8_t u[16];
		paxos_ballot_to_uuid(&b, u);
		ck_assert_int_eq(u[6] >> 4, 1); /* version 1 */
		ck_assert_int_eq(u[8] >> 6, 2); /* RFC 4122 variant */
		struct paxos_ballot d;
		ck_assert_int_eq(paxos_ballot_from_uuid(u, &d), 0);
		ck_assert_int_eq(paxos_ballot_cmp(&b, &d), 0);
		prev = b;
	}
	uint8_t zero[16] = {0}, junk[16] = {0xff, 1, 2,  3,  4,  5,  0x40, 7,
					    0x80, 9, 10, 11, 12, 13, 14,   15};
	struct paxos_ballot d;
	ck_assert_int_eq(paxos_ballot_from_uuid(zero, &d), 0);
	ck_assert(paxos_ballot_is_none(&d));
	ck_assert_int_eq(paxos_ballot_from_uuid(junk, &d), -1); /* v4 */
}
END_TEST

/* The clock steps back, a refusal teaches a higher promise, a restart
 * gives a floor: ballots still only go up. */
START_TEST(clock_is_monotonic_across_steps_and_restarts)
{
	struct paxos_clock c;
	paxos_clock_init(&c, 7, 0);
	struct paxos_ballot a = paxos_clock_next(&c, 5000, NULL);
	struct paxos_ballot b = paxos_clock_next(&c, 1000, NULL); /* step */
	ck_assert_int_gt(paxos_ballot_cmp(&b, &a), 0);
	struct paxos_ballot seen = B(90000, 99);
	struct paxos_ballot d = paxos_clock_next(&c, 1000, &seen);
	ck_assert_int_gt(paxos_ballot_cmp(&d, &seen), 0);
	/* a new process with the persisted floor and a slower clock */
	struct paxos_clock r;
	paxos_clock_init(&r, 8, d.us);
	struct paxos_ballot e = paxos_clock_next(&r, 10, NULL);
	ck_assert_int_gt(e.us, d.us);
	ck_assert_uint_ne(e.lsb, d.lsb);
}
END_TEST

START_TEST(acceptor_rules)
{
	struct paxos_state s;
	paxos_state_init(&s);
	struct paxos_ballot b1 = B(10, 1), b2 = B(20, 2), b3 = B(30, 3);
	ck_assert_int_eq(paxos_state_prepare(&s, &b2), 1);
	ck_assert_int_eq(paxos_state_prepare(&s, &b2), 0); /* not above */
	ck_assert_int_eq(paxos_state_prepare(&s, &b1), 0);
	/* a proposal below the promise is refused */
	ck_assert_int_eq(paxos_state_propose(&s, &b1, slice_from_cstr("x")), 0);
	ck_assert_int_eq(paxos_state_propose(&s, &b2, slice_from_cstr("y")), 1);
	ck_assert_int_eq(paxos_ballot_cmp(&s.accepted, &b2), 0);
	ck_assert(
		slice_eq(buf_slice(&s.accepted_update), slice_from_cstr("y")));
	/* the commit of b2 supersedes the accepted value */
	ck_assert_int_eq(paxos_state_commit(&s, &b2, slice_from_cstr("y")), 1);
	ck_assert(paxos_ballot_is_none(&s.accepted));
	ck_assert_uint_eq(s.accepted_update.len, 0);
	ck_assert_int_eq(paxos_ballot_cmp(&s.committed, &b2), 0);
	/* an older commit is not recorded; a proposal at or below the
	 * newest commit is refused */
	ck_assert_int_eq(paxos_state_commit(&s, &b1, slice_from_cstr("x")), 0);
	ck_assert_int_eq(paxos_state_propose(&s, &b2, slice_from_cstr("z")), 0);
	/* a higher proposal without a prepare here (this replica was not in
	 * the proposer's quorum) is accepted and raises the promise */
	ck_assert_int_eq(paxos_state_propose(&s, &b3, slice_from_cstr("w")), 1);
	ck_assert_int_eq(paxos_ballot_cmp(&s.promised, &b3), 0);
	/* a commit that is newer than the last commit but older than the
	 * accepted value leaves the accepted value in place */
	struct paxos_state t;
	paxos_state_init(&t);
	ck_assert_int_eq(paxos_state_propose(&t, &b3, slice_from_cstr("w")), 1);
	ck_assert_int_eq(paxos_state_commit(&t, &b1, slice_from_cstr("x")), 1);
	ck_assert_int_eq(paxos_ballot_cmp(&t.accepted, &b3), 0);
	paxos_state_free(&t);
	paxos_state_free(&s);
}
END_TEST

START_TEST(stored_form_round_trip_and_damage)
{
	struct paxos_state s;
	paxos_state_init(&s);
	struct paxos_ballot b1 = B(1700000000000001LL, 1),
			    b2 = B(1700000000000002LL, 2);
	ck_assert_int_eq(paxos_state_commit(&s, &b1, slice_from_cstr("old")),
			 1);
	ck_assert_int_eq(paxos_state_prepare(&s, &b2), 1);
	ck_assert_int_eq(paxos_state_propose(&s, &b2, slice_from_cstr("new")),
			 1);
	struct buf enc = {0};
	ck_assert_int_eq(paxos_state_encode(&s, &enc), 0);
	struct paxos_state d;
	ck_assert_int_eq(paxos_state_decode(buf_slice(&enc), &d), 0);
	ck_assert_int_eq(paxos_ballot_cmp(&d.promised, &b2), 0);
	ck_assert_int_eq(paxos_ballot_cmp(&d.accepted, &b2), 0);
	ck_assert_int_eq(paxos_ballot_cmp(&d.committed, &b1), 0);
	ck_assert(slice_eq(buf_slice(&d.accepted_update),
			   slice_from_cstr("new")));
	ck_assert(slice_eq(buf_slice(&d.committed_update),
			   slice_from_cstr("old")));
	paxos_state_free(&d);
	/* every flipped byte and every truncation is refused */
	for (size_t i = 0; i < enc.len; i++) {
		enc.data[i] ^= 0x20;
		ck_assert_int_eq(paxos_state_decode(buf_slice(&enc), &d), -1);
		ck_assert_int_eq(err_code(), ERR_CORRUPT);
		enc.data[i] ^= 0x20;
		ck_assert_int_eq(
			paxos_state_decode(slice_make(enc.data, i), &d), -1);
	}
	buf_free(&enc);
	paxos_state_free(&s);
}
END_TEST

/* Garbage on the wire never decodes into a message with a bad ballot or an
 * oversized field, and never crashes. */
START_TEST(messages_refuse_garbage)
{
	struct paxos_msg m = {0}, d;
	m.id = 42;
	m.round = 3;
	m.key = slice_from_cstr("k");
	m.ballot = B(1700000000000000LL, 5);
	m.update = slice_from_cstr("u");
	struct buf b = {0};
	ck_assert_int_eq(paxos_msg_encode(PAXOS_VERB_PROPOSE, &m, &b), 0);
	void *owner;
	ck_assert_int_eq(
		paxos_msg_decode(PAXOS_VERB_PROPOSE, b.data, b.len, &d, &owner),
		0);
	ck_assert_uint_eq(d.id, 42);
	ck_assert_int_eq(paxos_ballot_cmp(&d.ballot, &m.ballot), 0);
	paxos_msg_free(PAXOS_VERB_PROPOSE, owner);
	/* a request without a ballot or key is refused */
	struct paxos_msg bad = m;
	bad.ballot = (struct paxos_ballot){0, 0};
	buf_clear(&b);
	ck_assert_int_eq(paxos_msg_encode(PAXOS_VERB_PREPARE, &bad, &b), 0);
	ck_assert_int_eq(
		paxos_msg_decode(PAXOS_VERB_PREPARE, b.data, b.len, &d, &owner),
		-1);
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	for (int i = 0; i < 20000; i++) {
		uint8_t junk[64];
		size_t n = (size_t)(i % 64);
		for (size_t k = 0; k < n; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			junk[k] = (uint8_t)x;
		}
		uint32_t verb = PAXOS_VERB_FIRST + (uint32_t)(i % 6);
		if (paxos_msg_decode(verb, junk, n, &d, &owner) == 0)
			paxos_msg_free(verb, owner);
		else
			ck_assert_int_eq(err_code(), ERR_PROTOCOL);
	}
	ck_assert_int_eq(paxos_msg_decode(99, b.data, b.len, &d, &owner), -1);
	buf_free(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("paxos_state");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, ballot_uuid_round_trip_and_order);
	tcase_add_test(tc, clock_is_monotonic_across_steps_and_restarts);
	tcase_add_test(tc, acceptor_rules);
	tcase_add_test(tc, stored_form_round_trip_and_damage);
	tcase_add_test(tc, messages_refuse_garbage);
	suite_add_tcase(s, tc);
	return test_run(s);
}
