/* hints: store/reopen/deliver round trips, 100,000 hints through an
 * asynchronous fake sender, failed sends resumed without loss, the hint
 * window (and its survival across a reopen), the size cap, torn tails and
 * corrupt records, removed hosts, the throttle in simulated time, operator
 * controls, and delivery with the disk reads deferred as a worker would. */
#include "common/err.h"
#include "replication/hints.h"
#include "replication/hints_internal.h"
#include "tests/lib/testutil.h"
#include "tests/sim/sim.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define START_WALL 1700000000000000LL
#define MUT_LEN    100

static uint64_t seed;

static const uint8_t HOST_A[16] = {0xaa, 1, 2,  3,  4,  5,  6,  7,
				   8,    9, 10, 11, 12, 13, 14, 15};
static const uint8_t HOST_B[16] = {0xbb, 1, 2,  3,  4,  5,  6,  7,
				   8,    9, 10, 11, 12, 13, 14, 15};

/* ---- a fake sender --------------------------------------------------------
 */

enum ack_mode {
	ACK_INLINE, /* done() before send returns */
	ACK_LATER,  /* done() from a timer, newest first */
	ACK_NEVER,  /* kept until the test acks */
};

struct pending {
	hints_done_fn done;
	void *arg;
	uint32_t idx;
};

struct fake {
	struct env *env;
	enum ack_mode mode;
	struct env_timer *timer;
	bool armed;
	struct pending *q;
	size_t qn, qcap;
	/* send number at which to fail (done with -1), 0 = never; and
	 * how many sends to fail from there */
	uint64_t fail_at;
	uint64_t fail_count;
	bool refuse; /* send() returns -1 */
	uint64_t sends;
	uint64_t acks;
	uint64_t bytes;
	uint32_t *order; /* index of each send, in send order */
	size_t order_cap;
	uint8_t *acked; /* per hint index: acknowledged at least once */
	size_t acked_cap;
	size_t max_in_flight;
	size_t in_flight;
	bool bad_host;
	uint8_t expect_host[16];
};

/* Check's assertions report every location they pass (a write to a pipe
 * each): hot loops test first and assert only on failure. */
static uint32_t mut_index(const uint8_t *m, size_t len)
{
	if (len < 9)
		ck_abort_msg("mutation of %zu bytes", len);
	return (uint32_t)strtoul((const char *)m + 1, NULL, 10);
}

static void make_mut(uint8_t *m, size_t len, uint32_t idx)
{
	memset(m, 'x', len);
	char tmp[16];
	snprintf(tmp, sizeof(tmp), "m%08u", idx);
	memcpy(m, tmp, 9);
}

static void fake_ack(struct fake *f, struct pending p, int status)
{
	f->in_flight--;
	if (status == 0) {
		f->acks++;
		if (p.idx < f->acked_cap)
			f->acked[p.idx] = 1;
	}
	p.done(p.arg, status);
}

static int fake_status(struct fake *f)
{
	if (f->fail_at && f->sends >= f->fail_at &&
	    f->sends < f->fail_at + f->fail_count)
		return -1;
	return 0;
}

static void fake_fire(void *arg)
{
	struct fake *f = arg;
	f->armed = false;
	/* The sends queued so far (new ones wait for the next round), newest
	 * first: acknowledgements arrive out of order. */
	size_t n = f->qn;
	struct pending *batch = malloc((n ? n : 1) * sizeof(*batch));
	memcpy(batch, f->q, n * sizeof(*batch));
	f->qn = 0;
	while (n > 0) {
		struct pending p = batch[--n];
		fake_ack(f, p, p.idx & 0x80000000u ? -1 : 0);
	}
	free(batch);
}

static int fake_send(void *arg, const uint8_t host_id[16],
		     const uint8_t *mutation, size_t len, int64_t created_us,
		     hints_done_fn done, void *done_arg)
{
	struct fake *f = arg;
	(void)created_us;
	if (memcmp(host_id, f->expect_host, 16) != 0)
		f->bad_host = true;
	if (f->refuse)
		return -1;
	uint32_t idx = mut_index(mutation, len);
	f->sends++;
	f->bytes += len;
	if (f->order && f->sends <= f->order_cap)
		f->order[f->sends - 1] = idx;
	f->in_flight++;
	if (f->in_flight > f->max_in_flight)
		f->max_in_flight = f->in_flight;
	int status = fake_status(f);
	struct pending p = {done, done_arg, idx};
	if (f->mode == ACK_INLINE) {
		fake_ack(f, p, status);
		return 0;
	}
	if (f->qn == f->qcap) {
		f->qcap = f->qcap ? f->qcap * 2 : 256;
		f->q = realloc(f->q, f->qcap * sizeof(*f->q));
	}
	if (status != 0)
		p.idx |= 0x80000000u;
	f->q[f->qn++] = p;
	if (f->mode == ACK_LATER && !f->armed) {
		f->armed = true;
		env_timer_arm(f->env, f->timer, 300);
	}
	return 0;
}

static void fake_init(struct fake *f, struct env *env, enum ack_mode mode,
		      size_t hints)
{
	memset(f, 0, sizeof(*f));
	f->env = env;
	f->mode = mode;
	f->timer = env_timer_new(env, fake_fire, f);
	f->order_cap = hints * 3;
	f->order = calloc(f->order_cap + 1, sizeof(*f->order));
	f->acked_cap = hints;
	f->acked = calloc(hints + 1, 1);
	memcpy(f->expect_host, HOST_A, 16);
}

static void fake_free(struct fake *f)
{
	env_timer_free(f->env, f->timer);
	free(f->q);
	free(f->order);
	free(f->acked);
}

/* ---- fixture -------------------------------------------------------------
 */

struct fx {
	struct sim *sim;
	struct env *env;
	char dir[512];
	struct hints_options o;
	struct fake fake;
	struct hints *h;
};

static void fx_init(struct fx *x, const char *tag, enum ack_mode mode,
		    size_t hints)
{
	memset(x, 0, sizeof(*x));
	x->sim = sim_new(seed, START_WALL);
	struct inet_addr a;
	ck_assert_int_eq(inet_addr_parse("127.0.0.1", 7000, &a), 0);
	x->env = sim_env_new(x->sim, &a);
	snprintf(x->dir, sizeof(x->dir), "%s/hints", test_tmpdir(tag));
	fake_init(&x->fake, x->env, mode, hints);
	hints_options_default(&x->o);
	x->o.env = x->env;
	x->o.dir = x->dir;
	x->o.send = fake_send;
	x->o.hook_arg = &x->fake;
	x->o.throttle = 0;
}

static struct hints *fx_open(struct fx *x)
{
	x->h = hints_open(&x->o);
	ck_assert_msg(x->h != NULL, "hints_open: %s", err_msg());
	return x->h;
}

static void fx_close(struct fx *x)
{
	hints_close(x->h);
	x->h = NULL;
}

static void fx_free(struct fx *x)
{
	if (x->h)
		fx_close(x);
	fake_free(&x->fake);
	char parent[512];
	snprintf(parent, sizeof(parent), "%s", x->dir);
	*strrchr(parent, '/') = '\0';
	test_tmpdir_remove(parent);
	sim_delete(x->sim);
}

static void store_n(struct fx *x, const uint8_t *host, uint32_t from,
		    uint32_t n)
{
	uint8_t m[MUT_LEN];
	for (uint32_t i = from; i < from + n; i++) {
		make_mut(m, sizeof(m), i);
		if (hints_store(x->h, host, m, sizeof(m), START_WALL + i) != 0)
			ck_abort_msg("store %u: %s", i, err_msg());
	}
}

static size_t count_files(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		size_t l = strlen(e->d_name);
		if (l > 6 && strcmp(e->d_name + l - 6, ".hints") == 0 &&
		    (!prefix || strncmp(e->d_name, prefix, 2) == 0))
			n++;
	}
	closedir(d);
	return n;
}

/* The first send whose index is not its position, or -1. */
static long first_out_of_order(const struct fake *f, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (f->order[i] != i)
			return (long)i;
	return -1;
}

/* The path of the first hint file in dir. */
static void first_file(const char *dir, char *out, size_t cap)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	out[0] = '\0';
	while ((e = readdir(d)) != NULL) {
		size_t l = strlen(e->d_name);
		if (l > 6 && strcmp(e->d_name + l - 6, ".hints") == 0) {
			snprintf(out, cap, "%s/%s", dir, e->d_name);
			break;
		}
	}
	closedir(d);
	ck_assert(out[0] != '\0');
}

struct until {
	struct fx *x;
	uint64_t delivered;
};

static bool delivered_reached(void *arg)
{
	struct until *u = arg;
	struct hints_stats st;
	hints_get_stats(u->x->h, &st);
	return st.delivered >= u->delivered && st.in_flight == 0;
}

static void run_until_delivered(struct fx *x, uint64_t n, uint64_t max_us)
{
	struct until u = {x, n};
	ck_assert_msg(sim_run_until(x->sim, delivered_reached, &u, max_us),
		      "not delivered in time");
}

static struct hints_stats stats(struct fx *x)
{
	struct hints_stats st;
	hints_get_stats(x->h, &st);
	return st;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- tests ---------------------------------------------------------------
 */

START_TEST(store_reopen_deliver_round_trip)
{
	struct fx x;
	fx_init(&x, "hints-rt", ACK_LATER, 100);
	fx_open(&x);
	store_n(&x, HOST_A, 0, 10);
	store_n(&x, HOST_B, 100, 5);
	ck_assert_uint_eq(stats(&x).stored, 15);
	fx_close(&x);

	fx_open(&x);
	struct hints_host_stats hs[4];
	ck_assert_uint_eq(hints_list_pending(x.h, hs, 4), 2);
	struct hints_host_stats *a =
		memcmp(hs[0].host_id, HOST_A, 16) == 0 ? &hs[0] : &hs[1];
	ck_assert_mem_eq(a->host_id, HOST_A, 16);
	ck_assert_uint_eq(a->files, 1);
	ck_assert_uint_eq(a->records, 10);
	ck_assert_uint_eq(a->bytes, HINTS_HEADER_SIZE +
					    10 * (HINTS_RECORD_OVERHEAD + 100));
	ck_assert_int_eq(a->oldest_us, START_WALL);
	ck_assert_int_eq(a->newest_us, START_WALL + 9);
	ck_assert_uint_eq(stats(&x).hosts, 2);

	hints_host_up(x.h, HOST_A);
	run_until_delivered(&x, 10, 10000000);
	ck_assert(!x.fake.bad_host);
	ck_assert_uint_eq(x.fake.sends, 10);
	for (uint32_t i = 0; i < 10; i++)
		ck_assert_uint_eq(x.fake.order[i], i);
	ck_assert_uint_eq(count_files(x.dir, "aa"), 0);
	ck_assert_uint_eq(count_files(x.dir, "bb"), 1);
	ck_assert_uint_eq(hints_list_pending(x.h, hs, 4), 1);
	ck_assert_mem_eq(hs[0].host_id, HOST_B, 16);
	fx_free(&x);
}
END_TEST

START_TEST(hundred_thousand_hints_async_acks)
{
	const uint32_t n = 100000;
	struct fx x;
	fx_init(&x, "hints-100k", ACK_LATER, n);
	x.o.max_file_size = 1 << 20; /* several files, delivered in order */
	fx_open(&x);
	store_n(&x, HOST_A, 0, n);
	struct hints_host_stats hs;
	ck_assert_uint_eq(hints_list_pending(x.h, &hs, 1), 1);
	ck_assert_uint_eq(hs.records, n);
	ck_assert_uint_gt(hs.files, 5);
	hints_host_up(x.h, HOST_A);
	run_until_delivered(&x, n, 3600ull * 1000000);
	ck_assert_uint_eq(x.fake.sends, n);
	ck_assert_uint_eq(x.fake.acks, n);
	ck_assert_uint_le(x.fake.max_in_flight, x.o.max_in_flight);
	ck_assert_uint_gt(x.fake.max_in_flight, 1);
	ck_assert_int_eq(first_out_of_order(&x.fake, n), -1);
	ck_assert_uint_eq(count_files(x.dir, NULL), 0);
	ck_assert_uint_eq(hints_list_pending(x.h, &hs, 1), 0);
	ck_assert_uint_eq(stats(&x).delivered, n);
	fx_free(&x);
}
END_TEST

/* Store and deliver 100,000 ~100-byte hints with an immediately acking
 * sender and no throttle; prints the figures. */
START_TEST(measure_store_and_deliver)
{
	const uint32_t n = 100000;
	struct fx x;
	fx_init(&x, "hints-bench", ACK_INLINE, n);
	fx_open(&x);
	double t0 = now_s();
	store_n(&x, HOST_A, 0, n);
	double t1 = now_s();
	hints_host_up(x.h, HOST_A);
	run_until_delivered(&x, n, 3600ull * 1000000);
	double t2 = now_s();
	ck_assert_uint_eq(x.fake.acks, n);
	ck_assert_uint_eq(count_files(x.dir, NULL), 0);
	double mib = (double)n * (MUT_LEN + HINTS_RECORD_OVERHEAD) / 1048576.0;
	fprintf(stderr,
		"hints bench: %u hints of %d bytes (%.1f MiB): store %.3f s "
		"(%.0f hints/s), deliver %.3f s (%.0f hints/s, %.0f MiB/s)\n",
		n, MUT_LEN, mib, t1 - t0, n / (t1 - t0), t2 - t1, n / (t2 - t1),
		mib / (t2 - t1));
	fx_free(&x);
}
END_TEST

START_TEST(failed_send_resumes_without_loss)
{
	const uint32_t n = 2000;
	struct fx x;
	fx_init(&x, "hints-fail", ACK_LATER, n);
	x.o.read_chunk = 4096; /* the failure lands mid-file, across chunks */
	fx_open(&x);
	store_n(&x, HOST_A, 0, n);
	x.fake.fail_at = 700;
	x.fake.fail_count = 3;
	hints_host_up(x.h, HOST_A);
	struct until u = {&x, 0};
	/* The attempt stops: fewer than n delivered, nothing in flight. */
	sim_run_for(x.sim, 1000000);
	struct hints_stats st = stats(&x);
	ck_assert_uint_lt(st.delivered, n);
	ck_assert_uint_eq(st.in_flight, 0);
	ck_assert_uint_ge(st.send_failures, 1);
	ck_assert_uint_eq(count_files(x.dir, NULL), 1);
	(void)u;
	/* The periodic check retries from the first unacknowledged hint. */
	run_until_delivered(&x, n, 120ull * 1000000);
	sim_run_for(x.sim, 1000000);
	for (uint32_t i = 0; i < n; i++)
		if (!x.fake.acked[i])
			ck_abort_msg("hint %u lost", i);
	ck_assert_uint_eq(count_files(x.dir, NULL), 0);
	/* Resent from the first unacked record, not from the start. */
	ck_assert_uint_lt(x.fake.sends, n + 2 * x.o.max_in_flight + 10);
	fx_free(&x);
}
END_TEST

START_TEST(refused_send_then_host_up_delivers)
{
	struct fx x;
	fx_init(&x, "hints-refuse", ACK_INLINE, 50);
	fx_open(&x);
	store_n(&x, HOST_A, 0, 50);
	x.fake.refuse = true;
	hints_host_up(x.h, HOST_A);
	ck_assert_uint_eq(stats(&x).delivered, 0);
	ck_assert_uint_eq(stats(&x).send_failures, 1);
	x.fake.refuse = false;
	hints_host_up(x.h, HOST_A);
	ck_assert_uint_eq(stats(&x).delivered, 50);
	ck_assert_uint_eq(count_files(x.dir, NULL), 0);
	fx_free(&x);
}
END_TEST

START_TEST(window_refuses_and_survives_reopen)
{
	struct fx x;
	fx_init(&x, "hints-window", ACK_INLINE, 10);
	x.o.max_window_ms = 3ull * 3600 * 1000;
	fx_open(&x);
	uint8_t m[MUT_LEN];
	make_mut(m, sizeof(m), 1);
	int64_t now = env_wall_us(x.env);
	/* Down for 4 h already: refused. */
	hints_host_down(x.h, HOST_A, now - 4ll * 3600 * 1000000);
	ck_assert(!hints_should_hint(x.h, HOST_A, NULL, now));
	ck_assert_int_eq(hints_store(x.h, HOST_A, m, sizeof(m), now), -1);
	ck_assert_int_eq(err_code(), ERR_UNAVAILABLE);
	ck_assert_uint_eq(stats(&x).dropped_window, 1);
	/* Down just now: stored, until the window passes. */
	hints_host_down(x.h, HOST_B, now);
	ck_assert(hints_should_hint(x.h, HOST_B, "dc1", now));
	ck_assert_int_eq(hints_store(x.h, HOST_B, m, sizeof(m), now), 0);
	/* A second conviction does not move the start of the window. */
	sim_run_for(x.sim, 3600ull * 1000000);
	hints_host_down(x.h, HOST_B, env_wall_us(x.env));
	sim_run_for(x.sim, 2ull * 3600 * 1000000 + 1000000);
	now = env_wall_us(x.env);
	ck_assert_int_eq(hints_store(x.h, HOST_B, m, sizeof(m), now), -1);
	ck_assert_uint_eq(stats(&x).dropped_window, 2);
	fx_close(&x);

	/* The down times were persisted. */
	fx_open(&x);
	ck_assert_int_eq(hints_store(x.h, HOST_B, m, sizeof(m), now), -1);
	ck_assert_int_eq(hints_store(x.h, HOST_A, m, sizeof(m), now), -1);
	ck_assert_uint_eq(stats(&x).dropped_window, 2);
	/* setmaxhintwindow widens it at run time. */
	hints_set_max_window(x.h, 24ull * 3600 * 1000);
	ck_assert_int_eq(hints_store(x.h, HOST_B, m, sizeof(m), now), 0);
	hints_set_max_window(x.h, 3ull * 3600 * 1000);
	/* Up again: hints are taken (and the first one delivered). */
	memcpy(x.fake.expect_host, HOST_B, 16);
	hints_host_up(x.h, HOST_B);
	ck_assert_int_eq(hints_store(x.h, HOST_B, m, sizeof(m), now), 0);
	ck_assert_uint_eq(stats(&x).delivered, 2);
	fx_close(&x);
	fx_open(&x);
	ck_assert_int_eq(hints_store(x.h, HOST_B, m, sizeof(m), now), 0);
	ck_assert(!x.fake.bad_host);
	fx_free(&x);
}
END_TEST

START_TEST(size_cap_refuses_past_max_per_host)
{
	struct fx x;
	fx_init(&x, "hints-cap", ACK_INLINE, 10);
	x.o.max_size_per_host = 10 * 1024;
	fx_open(&x);
	uint8_t m[MUT_LEN];
	make_mut(m, sizeof(m), 1);
	int stored = 0;
	while (hints_store(x.h, HOST_A, m, sizeof(m), START_WALL) == 0)
		stored++;
	ck_assert_int_eq(err_code(), ERR_OVERLOADED);
	ck_assert_int_eq(stored, (10 * 1024 - HINTS_HEADER_SIZE) /
					 (HINTS_RECORD_OVERHEAD + MUT_LEN));
	struct hints_host_stats hs;
	hints_list_pending(x.h, &hs, 1);
	ck_assert_uint_le(hs.bytes, 10 * 1024);
	ck_assert_uint_eq(stats(&x).dropped_size, 1);
	/* Other hosts have their own budget. */
	ck_assert_int_eq(hints_store(x.h, HOST_B, m, sizeof(m), START_WALL), 0);
	fx_free(&x);
}
END_TEST

static void flip_byte(const char *path, long off)
{
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	uint8_t b;
	ck_assert_int_eq(pread(fd, &b, 1, off), 1);
	b ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

static long file_size(const char *path)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	return (long)st.st_size;
}

START_TEST(torn_tail_and_corrupt_records_are_skipped)
{
	const uint32_t n = 100;
	const long rec = HINTS_RECORD_OVERHEAD + MUT_LEN;
	struct fx x;
	fx_init(&x, "hints-corrupt", ACK_LATER, n);
	fx_open(&x);
	store_n(&x, HOST_A, 0, n);
	fx_close(&x);

	char path[1024];
	first_file(x.dir, path, sizeof(path));
	long full = file_size(path);
	ck_assert_int_eq(full, HINTS_HEADER_SIZE + n * rec);
	/* Record 30: a byte of its body. Record 60: a byte of its length,
	 * so the parser must find its way to record 61. */
	flip_byte(path, HINTS_HEADER_SIZE + 30 * rec + 40);
	flip_byte(path, HINTS_HEADER_SIZE + 60 * rec + 1);
	/* A torn tail: half of a record. */
	{
		struct buf b = {0};
		uint8_t m[MUT_LEN];
		make_mut(m, sizeof(m), 999);
		ck_assert_int_eq(hints_record_encode(&b, 1, m, sizeof(m)), 0);
		FILE *fp = fopen(path, "ab");
		ck_assert_uint_eq(fwrite(b.data, 1, b.len / 2, fp), b.len / 2);
		fclose(fp);
		buf_free(&b);
	}

	fx_open(&x);
	ck_assert_uint_eq(stats(&x).corrupt, 2);
	struct hints_host_stats hs;
	ck_assert_uint_eq(hints_list_pending(x.h, &hs, 1), 1);
	ck_assert_uint_eq(hs.records, n - 2);
	/* The torn tail was cut off. */
	ck_assert_int_eq(file_size(path), full);

	hints_host_up(x.h, HOST_A);
	run_until_delivered(&x, n - 2, 10000000);
	sim_run_for(x.sim, 1000000);
	ck_assert_uint_eq(x.fake.sends, n - 2);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_int_eq(x.fake.acked[i], i != 30 && i != 60);
	/* Damage is counted once, not again on delivery. */
	ck_assert_uint_eq(stats(&x).corrupt, 2);
	ck_assert_uint_eq(count_files(x.dir, NULL), 0);
	fx_free(&x);
}
END_TEST

START_TEST(garbage_and_zero_filled_files_never_crash)
{
	struct fx x;
	fx_init(&x, "hints-garbage", ACK_INLINE, 10);
	ck_assert_int_eq(mkdir(x.dir, 0755), 0);
	char path[1024];
	/* Random bytes, a zero-filled file, a short header, an empty file. */
	const char *names[] = {
		"aa010203-0405-0607-0809-0a0b0c0d0e0f-1.hints",
		"aa010203-0405-0607-0809-0a0b0c0d0e0f-2.hints",
		"aa010203-0405-0607-0809-0a0b0c0d0e0f-3.hints",
		"aa010203-0405-0607-0809-0a0b0c0d0e0f-4.hints",
	};
	uint8_t junk[5000];
	uint64_t r = seed | 1;
	for (size_t i = 0; i < sizeof(junk); i++) {
		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		junk[i] = (uint8_t)r;
	}
	size_t lens[] = {sizeof(junk), sizeof(junk), 5, 0};
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", x.dir, names[i]);
		FILE *fp = fopen(path, "wb");
		if (i == 1)
			memset(junk, 0, sizeof(junk));
		fwrite(junk, 1, lens[i], fp);
		fclose(fp);
	}
	fx_open(&x);
	/* Nothing sound: every file is gone, nothing to deliver. */
	ck_assert_uint_eq(hints_list_pending(x.h, NULL, 0), 0);
	ck_assert_uint_eq(count_files(x.dir, NULL), 0);
	/* New hints go to a file with a fresh sequence number. */
	store_n(&x, HOST_A, 0, 3);
	hints_host_up(x.h, HOST_A);
	ck_assert_uint_eq(x.fake.acks, 3);
	fx_free(&x);
}
END_TEST

START_TEST(removed_host_files_are_deleted)
{
	struct fx x;
	fx_init(&x, "hints-removed", ACK_NEVER, 300);
	x.o.max_file_size = 4096;
	fx_open(&x);
	store_n(&x, HOST_A, 0, 300);
	store_n(&x, HOST_B, 0, 3);
	hints_host_down(x.h, HOST_A, env_wall_us(x.env));
	ck_assert_uint_gt(count_files(x.dir, "aa"), 1);
	/* Some sends in flight when it is removed. */
	hints_host_up(x.h, HOST_A);
	ck_assert_uint_gt(x.fake.qn, 0);
	hints_host_removed(x.h, HOST_A);
	ck_assert_uint_eq(count_files(x.dir, "aa"), 0);
	ck_assert_uint_eq(count_files(x.dir, "bb"), 1);
	ck_assert_uint_eq(hints_list_pending(x.h, NULL, 0), 1);
	/* Late acknowledgements are harmless. */
	x.fake.mode = ACK_LATER;
	fake_fire(&x.fake);
	ck_assert_uint_eq(stats(&x).in_flight, 0);
	/* A host with the same id coming back starts afresh. */
	store_n(&x, HOST_A, 5, 1);
	ck_assert_uint_eq(count_files(x.dir, "aa"), 1);
	fx_close(&x);
	fx_open(&x);
	ck_assert_uint_eq(hints_list_pending(x.h, NULL, 0), 2);
	hints_truncate_all(x.h);
	ck_assert_uint_eq(hints_list_pending(x.h, NULL, 0), 0);
	ck_assert_uint_eq(count_files(x.dir, NULL), 0);
	fx_free(&x);
}
END_TEST

START_TEST(throttle_is_respected_in_simulated_time)
{
	/* 1 MiB of hints at 512 KiB/s: about two seconds. */
	const uint32_t mut = 1004; /* records of exactly 1 KiB */
	const uint32_t n = 1024;
	struct fx x;
	fx_init(&x, "hints-throttle", ACK_LATER, n);
	x.o.throttle = 512 * 1024;
	fx_open(&x);
	uint8_t *m = malloc(mut);
	for (uint32_t i = 0; i < n; i++) {
		make_mut(m, mut, i);
		ck_assert_int_eq(hints_store(x.h, HOST_A, m, mut, START_WALL),
				 0);
	}
	free(m);
	uint64_t t0 = sim_now_us(x.sim);
	hints_host_up(x.h, HOST_A);
	run_until_delivered(&x, n, 60ull * 1000000);
	double took = (double)(sim_now_us(x.sim) - t0) / 1e6;
	ck_assert_msg(took >= 1.8 && took <= 2.3, "took %.3f s", took);
	/* Changed at run time (sethintedhandoffthrottlekb). */
	store_n(&x, HOST_A, 0, 1000);
	hints_set_throttle(x.h, 0);
	t0 = sim_now_us(x.sim);
	hints_host_up(x.h, HOST_A);
	run_until_delivered(&x, n + 1000, 60ull * 1000000);
	ck_assert_uint_lt(sim_now_us(x.sim) - t0, 100000);
	fx_free(&x);
}
END_TEST

START_TEST(operator_controls)
{
	struct fx x;
	fx_init(&x, "hints-ops", ACK_INLINE, 20);
	const char *dcs[] = {"dc2"};
	x.o.disabled_dcs = dcs;
	x.o.disabled_dc_count = 1;
	fx_open(&x);
	int64_t now = env_wall_us(x.env);
	ck_assert(hints_should_hint(x.h, HOST_A, "dc1", now));
	ck_assert(!hints_should_hint(x.h, HOST_A, "dc2", now));
	ck_assert_int_eq(hints_set_dc_enabled(x.h, "dc2", true), 0);
	ck_assert(hints_should_hint(x.h, HOST_A, "dc2", now));
	ck_assert_int_eq(hints_set_dc_enabled(x.h, "dc3", false), 0);
	ck_assert(!hints_should_hint(x.h, HOST_A, "dc3", now));

	/* disablehandoff: nothing stored. */
	hints_set_enabled(x.h, false);
	ck_assert(!hints_should_hint(x.h, HOST_A, "dc1", now));
	uint8_t m[MUT_LEN];
	make_mut(m, sizeof(m), 0);
	ck_assert_int_eq(hints_store(x.h, HOST_A, m, sizeof(m), now), -1);
	ck_assert_uint_eq(stats(&x).dropped_disabled, 1);
	hints_set_enabled(x.h, true);

	/* pausehandoff: stored but not delivered, until resumed. */
	hints_set_paused(x.h, true);
	store_n(&x, HOST_A, 0, 20);
	hints_host_up(x.h, HOST_A);
	sim_run_for(x.sim, 30ull * 1000000);
	ck_assert_uint_eq(x.fake.sends, 0);
	hints_set_paused(x.h, false);
	ck_assert_uint_eq(x.fake.acks, 20);
	ck_assert_uint_eq(count_files(x.dir, NULL), 0);
	fx_free(&x);
}
END_TEST

START_TEST(hints_stored_during_delivery_and_down_mid_delivery)
{
	const uint32_t n = 3000;
	struct fx x;
	fx_init(&x, "hints-during", ACK_LATER, n);
	x.o.read_chunk = 8192;
	fx_open(&x);
	store_n(&x, HOST_A, 0, 1000);
	hints_host_up(x.h, HOST_A);
	/* New hints while the first file is being replayed go to a new
	 * file, delivered after it. */
	sim_run_for(x.sim, 1000);
	ck_assert_uint_gt(x.fake.acks, 0);
	ck_assert_uint_lt(x.fake.acks, 1000);
	store_n(&x, HOST_A, 1000, 1000);
	ck_assert_uint_eq(count_files(x.dir, NULL), 2);
	/* Convicted mid-delivery: sending stops after the window drains. */
	hints_host_down(x.h, HOST_A, env_wall_us(x.env));
	sim_run_for(x.sim, 5000);
	uint64_t sends = x.fake.sends;
	ck_assert_uint_lt(sends, 2000);
	sim_run_for(x.sim, 60ull * 1000000);
	ck_assert_uint_eq(x.fake.sends, sends);
	store_n(&x, HOST_A, 2000, 1000);
	hints_host_up(x.h, HOST_A);
	run_until_delivered(&x, n, 60ull * 1000000);
	ck_assert_int_eq(first_out_of_order(&x.fake, n), -1);
	ck_assert_uint_eq(x.fake.sends, n);
	ck_assert_uint_eq(count_files(x.dir, NULL), 0);
	fx_free(&x);
}
END_TEST

static bool alive_answer;
static bool fake_alive(void *arg, const uint8_t host_id[16])
{
	(void)arg;
	(void)host_id;
	return alive_answer;
}

START_TEST(periodic_check_delivers_to_alive_hosts)
{
	struct fx x;
	fx_init(&x, "hints-check", ACK_LATER, 30);
	x.o.alive = fake_alive;
	alive_answer = false;
	fx_open(&x);
	/* Hinted after a timeout: the host was never marked down. */
	store_n(&x, HOST_A, 0, 30);
	sim_run_for(x.sim, 25ull * 1000000);
	ck_assert_uint_eq(x.fake.sends, 0);
	alive_answer = true;
	sim_run_for(x.sim, 11ull * 1000000);
	ck_assert_uint_eq(x.fake.acks, 30);
	/* Marked down: the check leaves it alone even if "alive". */
	store_n(&x, HOST_A, 30, 0);
	hints_host_down(x.h, HOST_A, env_wall_us(x.env));
	uint8_t m[MUT_LEN];
	make_mut(m, sizeof(m), 0);
	ck_assert_int_eq(hints_store(x.h, HOST_A, m, sizeof(m), 1), 0);
	sim_run_for(x.sim, 25ull * 1000000);
	ck_assert_uint_eq(x.fake.acks, 30);
	fx_free(&x);
}
END_TEST

/* An offload hook that runs the job at once (the "worker") but completes it
 * from a timer later, as a loopq completion would. */
struct deferred {
	void (*done)(void *);
	void *job;
};
struct offloader {
	struct env *env;
	struct env_timer *timer;
	struct deferred q[64];
	size_t n;
	uint64_t jobs;
};

static void offloader_fire(void *arg)
{
	struct offloader *o = arg;
	while (o->n > 0) {
		struct deferred d = o->q[0];
		memmove(o->q, o->q + 1, (o->n - 1) * sizeof(*o->q));
		o->n--;
		d.done(d.job);
	}
}

static void offload_hook(void *arg, void (*run)(void *), void (*done)(void *),
			 void *job)
{
	struct offloader *o = arg;
	ck_assert_uint_lt(o->n, 64);
	run(job);
	o->q[o->n++] = (struct deferred){done, job};
	o->jobs++;
	env_timer_arm(o->env, o->timer, 50);
}

struct handed {
	int calls;
	bool ok;
};

static void on_handed(void *arg, bool ok)
{
	struct handed *r = arg;
	r->calls++;
	r->ok = ok;
}

static bool handed_once(void *arg)
{
	return ((struct handed *)arg)->calls > 0;
}

START_TEST(hand_over_sends_every_host_through_via)
{
	struct fx x;
	fx_init(&x, "hints-handover", ACK_LATER, 100);
	fx_open(&x);
	struct handed r = {0};
	/* nothing stored: done at once */
	ck_assert_int_eq(
		hints_hand_over(x.h, fake_send, &x.fake, on_handed, &r), 0);
	ck_assert_int_eq(r.calls, 1);
	ck_assert(r.ok);

	/* A is down, delivery paused: the hand-over sends anyway, every
	 * hint of both hosts, through `via` only, and deletes the files. */
	store_n(&x, HOST_A, 0, 30);
	store_n(&x, HOST_B, 30, 20);
	hints_host_down(x.h, HOST_A, START_WALL);
	hints_set_paused(x.h, true);
	struct fake via;
	fake_init(&via, x.env, ACK_LATER, 100);
	r = (struct handed){0};
	ck_assert_int_eq(hints_hand_over(x.h, fake_send, &via, on_handed, &r),
			 0);
	ck_assert_int_ne(hints_hand_over(x.h, fake_send, &via, on_handed, &r),
			 0);
	ck_assert_int_eq(err_code(), ERR_EXISTS);
	store_n(&x, HOST_B, 50, 5); /* stored meanwhile: goes too */
	ck_assert(sim_run_until(x.sim, handed_once, &r, 10000000));
	sim_run_for(x.sim, 100000);
	ck_assert_int_eq(r.calls, 1);
	ck_assert(r.ok);
	ck_assert_uint_eq(x.fake.sends, 0);
	ck_assert_uint_eq(via.acks, 55);
	for (uint32_t i = 0; i < 55; i++)
		ck_assert_msg(via.acked[i], "hint %u not handed over", i);
	ck_assert_uint_eq(count_files(x.dir, NULL), 0);
	struct hints_host_stats hs[4];
	ck_assert_uint_eq(hints_list_pending(x.h, hs, 4), 0);

	/* A failed send ends it: ok false, the rest kept and delivered to
	 * the target later as usual. */
	store_n(&x, HOST_A, 0, 40);
	fake_free(&via);
	fake_init(&via, x.env, ACK_LATER, 100);
	via.fail_at = 10;
	via.fail_count = 100;
	r = (struct handed){0};
	ck_assert_int_eq(hints_hand_over(x.h, fake_send, &via, on_handed, &r),
			 0);
	ck_assert(sim_run_until(x.sim, handed_once, &r, 10000000));
	ck_assert(!r.ok);
	ck_assert_uint_lt(via.acks, 40);
	ck_assert_uint_eq(count_files(x.dir, "aa"), 1);
	hints_set_paused(x.h, false);
	hints_host_up(x.h, HOST_A);
	sim_run_for(x.sim, 5000000);
	for (uint32_t i = 0; i < 40; i++)
		ck_assert_msg(via.acked[i] || x.fake.acked[i], "hint %u lost",
			      i);
	ck_assert_uint_eq(count_files(x.dir, NULL), 0);
	ck_assert_int_eq(r.calls, 1);
	fake_free(&via);
	fx_free(&x);
}
END_TEST

START_TEST(offloaded_reads_and_syncs)
{
	const uint32_t n = 20000;
	struct fx x;
	fx_init(&x, "hints-offload", ACK_LATER, n);
	struct offloader off = {.env = x.env};
	off.timer = env_timer_new(x.env, offloader_fire, &off);
	x.o.offload = offload_hook;
	x.o.offload_arg = &off;
	x.o.read_chunk = 64 * 1024;
	x.o.max_file_size = 512 * 1024;
	fx_open(&x);
	store_n(&x, HOST_A, 0, n);
	hints_host_down(x.h, HOST_A, env_wall_us(x.env));
	hints_host_up(x.h, HOST_A);
	run_until_delivered(&x, n, 3600ull * 1000000);
	ck_assert_int_eq(first_out_of_order(&x.fake, n), -1);
	ck_assert_uint_gt(off.jobs, 30); /* reads, file syncs, state */
	ck_assert_uint_eq(count_files(x.dir, NULL), 0);
	/* Closing with a job outstanding: its completion frees the store. */
	store_n(&x, HOST_A, 0, 10);
	hints_host_down(x.h, HOST_A, env_wall_us(x.env));
	ck_assert_uint_gt(off.n, 0);
	fx_close(&x);
	sim_run_for(x.sim, 1000);
	ck_assert_uint_eq(off.n, 0);
	fx_open(&x);
	ck_assert_uint_eq(hints_list_pending(x.h, NULL, 0), 1);
	uint8_t m[MUT_LEN];
	make_mut(m, sizeof(m), 0);
	ck_assert_int_eq(hints_store(x.h, HOST_A, m, sizeof(m), 1), 0);
	fx_close(&x);
	env_timer_free(x.env, off.timer);
	fx_free(&x);
}
END_TEST

static Suite *hints_suite(void)
{
	Suite *s = suite_create("hints");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, store_reopen_deliver_round_trip);
	tcase_add_test(tc, hundred_thousand_hints_async_acks);
	tcase_add_test(tc, failed_send_resumes_without_loss);
	tcase_add_test(tc, refused_send_then_host_up_delivers);
	tcase_add_test(tc, window_refuses_and_survives_reopen);
	tcase_add_test(tc, size_cap_refuses_past_max_per_host);
	tcase_add_test(tc, torn_tail_and_corrupt_records_are_skipped);
	tcase_add_test(tc, garbage_and_zero_filled_files_never_crash);
	tcase_add_test(tc, removed_host_files_are_deleted);
	tcase_add_test(tc, throttle_is_respected_in_simulated_time);
	tcase_add_test(tc, operator_controls);
	tcase_add_test(tc, hints_stored_during_delivery_and_down_mid_delivery);
	tcase_add_test(tc, periodic_check_delivers_to_alive_hosts);
	tcase_add_test(tc, offloaded_reads_and_syncs);
	tcase_add_test(tc, hand_over_sends_every_host_through_via);
	suite_add_tcase(s, tc);
	/* Alone with CK_RUN_CASE=bench. */
	TCase *bench = tcase_create("bench");
	tcase_set_timeout(bench, 120);
	tcase_add_test(bench, measure_store_and_deliver);
	suite_add_tcase(s, bench);
	return s;
}

int main(void)
{
	seed = test_seed(20261130);
	return test_run(hints_suite());
}
