/* Gossip pieces on their own: the wire codec (round trips and garbage) and
 * the phi-accrual arithmetic. */
#include "common/err.h"
#include "gossip/gossip_internal.h"
#include "tests/lib/testutil.h"

#include <stdlib.h>
#include <string.h>

static struct inet_addr addr(const char *s)
{
	struct inet_addr a;
	ck_assert_int_eq(inet_addr_parse(s, 7000, &a), 0);
	return a;
}

START_TEST(syn_round_trip)
{
	struct gossip_digest d[2] = {
		{addr("127.0.0.1"), 1760000000, 42},
		{addr("[::1]:7001"), 1760000001, 0},
	};
	struct buf b = {0};
	ck_assert_int_eq(gossip_msg_encode_syn("C", "P", d, 2, &b), 0);
	struct gossip_msg m;
	ck_assert_int_eq(gossip_msg_decode(GOSSIP_VERB_SYN, b.data, b.len, &m),
			 0);
	ck_assert_str_eq(m.cluster_name, "C");
	ck_assert_str_eq(m.partitioner, "P");
	ck_assert_uint_eq(m.digest_count, 2);
	ck_assert(inet_addr_eq(&m.digests[1].addr, &d[1].addr));
	ck_assert_int_eq(m.digests[0].max_version, 42);
	ck_assert_int_eq(m.digests[1].generation, 1760000001);
	gossip_msg_free(&m);
	buf_free(&b);
}
END_TEST

START_TEST(ack_round_trip_skips_unknown_keys)
{
	struct gossip_wire_app apps[2] = {
		{GOSSIP_STATE_DC, "dc1", 3},
		{GOSSIP_STATE_TOKENS, "1,2,3", 4},
	};
	struct gossip_wire_state st = {.addr = addr("127.0.0.2"),
				       .generation = 1760000000,
				       .heartbeat = 9,
				       .beats = 7,
				       .age_us = 250000,
				       .count = 2,
				       .apps = apps};
	struct gossip_digest req = {addr("127.0.0.3"), 5, 0};
	struct buf b = {0};
	ck_assert_int_eq(gossip_msg_encode_ack(&req, 1, &st, 1, &b), 0);
	struct gossip_msg m;
	ck_assert_int_eq(gossip_msg_decode(GOSSIP_VERB_ACK, b.data, b.len, &m),
			 0);
	ck_assert_uint_eq(m.digest_count, 1);
	ck_assert_uint_eq(m.state_count, 1);
	ck_assert_int_eq(m.states[0].heartbeat, 9);
	ck_assert_uint_eq(m.states[0].beats, 7);
	ck_assert_uint_eq(m.states[0].age_us, 250000);
	ck_assert_uint_eq(m.states[0].count, 2);
	ck_assert_str_eq(m.states[0].apps[1].value, "1,2,3");
	gossip_msg_free(&m);
	buf_free(&b);

	/* A state key from a newer version is dropped, not an error. */
	apps[0].key = 200;
	ck_assert_int_eq(gossip_msg_encode_ack2(&st, 1, &b), 0);
	ck_assert_int_eq(gossip_msg_decode(GOSSIP_VERB_ACK2, b.data, b.len, &m),
			 0);
	ck_assert_uint_eq(m.states[0].count, 1);
	gossip_msg_free(&m);
	buf_free(&b);
}
END_TEST

START_TEST(garbage_is_refused)
{
	uint8_t junk[64];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 37 + 11);
	struct gossip_msg m;
	ck_assert_int_eq(
		gossip_msg_decode(GOSSIP_VERB_SYN, junk, sizeof(junk), &m), -1);
	ck_assert_int_eq(gossip_msg_decode(99, junk, 0, &m), -1);
	/* A truncated digest: field 3 (bytes) holding 5 bytes. */
	uint8_t trunc[] = {0x1a, 0x05, 0x04, 127, 0, 0, 1};
	ck_assert_int_eq(
		gossip_msg_decode(GOSSIP_VERB_SYN, trunc, sizeof(trunc), &m),
		-1);
	ck_assert_int_eq(err_code(), ERR_PROTOCOL);
	/* A bad family byte. */
	uint8_t fam[] = {0x1a, 0x13, 0x05, 127, 0, 0, 1, 0x1b, 0x58, 0, 0,
			 0,    0,    0,    0,   0, 1, 0, 0,    0,    1};
	ck_assert_int_eq(
		gossip_msg_decode(GOSSIP_VERB_SYN, fam, sizeof(fam), &m), -1);
}
END_TEST

/* Found by fuzz_gossip: 20 bytes of digests (one 19-byte digest and one
 * stray byte) wrote a second digest past the array. */
START_TEST(digest_list_with_trailing_byte_is_refused)
{
	struct gossip_digest d = {addr("127.0.0.1"), 1760000000, 1};
	struct buf b = {0};
	ck_assert_int_eq(gossip_msg_encode_syn("C", "P", &d, 1, &b), 0);
	/* The digests field is last: add one byte inside it. */
	uint8_t *p = b.data;
	size_t n = b.len;
	ck_assert_uint_eq(p[n - 21], 0x1a);
	ck_assert_uint_eq(p[n - 20], 19);
	p[n - 20] = 20;
	ck_assert_int_eq(buf_put_u8(&b, 4), 0);
	struct gossip_msg m;
	ck_assert_int_eq(gossip_msg_decode(GOSSIP_VERB_SYN, b.data, b.len, &m),
			 -1);
	ck_assert_int_eq(err_code(), ERR_PROTOCOL);
	buf_free(&b);
}
END_TEST

START_TEST(phi_follows_cassandra)
{
	struct gossip_fd_window w;
	gossip_fd_init(&w, 4);
	ck_assert(gossip_fd_phi(&w, 5000000) == 0.0);
	/* First report seeds the window with the initial value (2 s). */
	ck_assert_int_eq(gossip_fd_report(&w, 1000000, 0, 2000000, 2000000), 0);
	ck_assert(gossip_fd_mean_us(&w) == 2000000.0);
	for (uint64_t t = 2000000; t <= 10000000; t += 1000000)
		ck_assert_int_eq(gossip_fd_report(&w, t, 0, 2000000, 2000000),
				 0);
	/* The window holds 4 samples: all 1 s now. */
	ck_assert(gossip_fd_mean_us(&w) == 1000000.0);
	/* phi = 0.434 * elapsed / mean: convicts at 8 after ~18.4 s. */
	double phi = gossip_fd_phi(&w, 10000000 + 18000000);
	ck_assert(phi > 7.8 && phi < 7.9);
	ck_assert(gossip_fd_phi(&w, 10000000 + 18500000) > 8.0);
	/* An interval above the cap is not sampled. */
	ck_assert_int_eq(gossip_fd_report(&w, 40000000, 0, 2000000, 2000000),
			 0);
	ck_assert(gossip_fd_mean_us(&w) == 1000000.0);
	gossip_fd_free(&w);
}
END_TEST

START_TEST(phi_starting_guess_counts_until_warm)
{
	struct gossip_fd_window w;
	gossip_fd_init(&w, GOSSIP_FD_WINDOW);
	ck_assert_int_eq(gossip_fd_report(&w, 1000000, 0, 2000000, 2000000), 0);
	/* A burst of close arrivals cannot shrink the mean to nothing: the
	 * 2 s guess still counts. */
	ck_assert_int_eq(gossip_fd_report(&w, 1010000, 0, 2000000, 2000000), 0);
	ck_assert_int_eq(gossip_fd_report(&w, 1020000, 0, 2000000, 2000000), 0);
	ck_assert(gossip_fd_mean_us(&w) > 600000.0);
	uint64_t t = 1020000;
	for (unsigned i = 2; i < GOSSIP_FD_WARMUP - 1; i++)
		ck_assert_int_eq(
			gossip_fd_report(&w, t += 1000000, 0, 2000000, 2000000),
			0);
	ck_assert(gossip_fd_mean_us(&w) > 850000.0); /* guess still in */
	ck_assert_int_eq(
		gossip_fd_report(&w, t += 1000000, 0, 2000000, 2000000), 0);
	/* Warm: only measured intervals count (2 x 10 ms + 6 x 1 s) / 8. */
	ck_assert(gossip_fd_mean_us(&w) == (20000.0 + 6000000.0) / 8);
	gossip_fd_free(&w);
}
END_TEST

START_TEST(phi_samples_numbered_heartbeats_by_birth)
{
	struct gossip_fd_window w;
	gossip_fd_init(&w, 16);
	/* Heartbeats 1..9 born a second apart, heard in bursts and late:
	 * only their births and numbers count. */
	ck_assert_int_eq(gossip_fd_report(&w, 1000000, 1, 2000000, 2000000), 0);
	ck_assert_int_eq(gossip_fd_report(&w, 3000000, 3, 2000000, 2000000), 0);
	ck_assert_int_eq(gossip_fd_report(&w, 4000000, 4, 2000000, 2000000), 0);
	/* An older or repeated heartbeat changes nothing. */
	ck_assert_int_eq(gossip_fd_report(&w, 3500000, 3, 2000000, 2000000), 0);
	ck_assert_int_eq(gossip_fd_report(&w, 4000000, 4, 2000000, 2000000), 0);
	/* Five beats in one gap of 5 s: five 1 s samples' worth. */
	ck_assert_int_eq(gossip_fd_report(&w, 9000000, 9, 2000000, 2000000), 0);
	ck_assert_uint_eq(w.len, 3);
	ck_assert(gossip_fd_mean_us(&w) == (2000000.0 + 1000000 * 3) / 4);
	for (uint32_t b = 10; b < 20; b++)
		ck_assert_int_eq(gossip_fd_report(&w, b * 1000000ull, b,
						  2000000, 2000000),
				 0);
	ck_assert(gossip_fd_mean_us(&w) == 1000000.0);
	/* phi counts from the last birth, however late it was heard. */
	ck_assert(gossip_fd_phi(&w, 19000000 + 18500000) > 8.0);
	/* An ECHO answer moves "last" without a sample. */
	gossip_fd_touch(&w, 30000000);
	ck_assert(gossip_fd_phi(&w, 30000000 + 1000000) < 0.5);
	ck_assert(gossip_fd_mean_us(&w) == 1000000.0);
	/* A restart numbers heartbeats afresh: beat 1 again is news. */
	gossip_fd_restart(&w);
	ck_assert_int_eq(gossip_fd_report(&w, 31000000, 1, 2000000, 2000000),
			 0);
	ck_assert_int_eq(gossip_fd_report(&w, 32000000, 2, 2000000, 2000000),
			 0);
	ck_assert(gossip_fd_mean_us(&w) == 1000000.0);
	gossip_fd_free(&w);
}
END_TEST

START_TEST(status_names_parse)
{
	ck_assert_int_eq(gossip_status_parse("NORMAL,123"),
			 GOSSIP_STATUS_NORMAL);
	ck_assert_int_eq(gossip_status_parse("shutdown,true"),
			 GOSSIP_STATUS_SHUTDOWN);
	ck_assert_int_eq(gossip_status_parse("NORMALX"), GOSSIP_STATUS_UNKNOWN);
	ck_assert_int_eq(gossip_status_parse(NULL), GOSSIP_STATUS_UNKNOWN);
	ck_assert_str_eq(gossip_app_state_name(GOSSIP_STATE_TOKENS), "TOKENS");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gossip_unit");
	TCase *t = tcase_create("gossip");
	tcase_add_test(t, syn_round_trip);
	tcase_add_test(t, ack_round_trip_skips_unknown_keys);
	tcase_add_test(t, garbage_is_refused);
	tcase_add_test(t, digest_list_with_trailing_byte_is_refused);
	tcase_add_test(t, phi_follows_cassandra);
	tcase_add_test(t, phi_starting_guess_counts_until_warm);
	tcase_add_test(t, phi_samples_numbered_heartbeats_by_birth);
	tcase_add_test(t, status_names_parse);
	suite_add_tcase(s, t);
	return test_run(s);
}
