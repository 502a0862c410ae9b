/* common/: errors, buffers and codecs, arena, CRC, addresses, PRNG, the real
 * env (files, timers) and logging. */
#include "common/arena.h"
#include "common/buf.h"
#include "common/crc.h"
#include "common/env_real.h"
#include "common/err.h"
#include "common/inet.h"
#include "common/log.h"
#include "common/loopq.h"
#include "common/rand.h"
#include "common/ratelimit.h"
#include "common/thread.h"
#include "common/uuid.h"
#include "common/workers.h"
#include "tests/lib/testutil.h"

#include <event2/event.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static uint64_t seed;

/* ---- err ----------------------------------------------------------------- */

START_TEST(err_slot_keeps_code_message_and_prefix)
{
	err_clear();
	ck_assert_int_eq(err_code(), ERR_NONE);
	ck_assert_int_eq(err_set(ERR_CORRUPT, "block %d bad", 7), -1);
	ck_assert_int_eq(err_code(), ERR_CORRUPT);
	ck_assert_str_eq(err_msg(), "block 7 bad");
	err_prefix("sstable %s", "nb-1");
	ck_assert_str_eq(err_msg(), "sstable nb-1: block 7 bad");
	ck_assert_int_eq(err_code(), ERR_CORRUPT);
	err_set_errno(28 /* ENOSPC */, "write %s", "x");
	ck_assert_int_eq(err_code(), ERR_NOSPACE);
	ck_assert_str_eq(err_msg(), "write x: No space left on device");
	ck_assert_str_eq(err_code_name(ERR_TIMEOUT), "timeout");
}
END_TEST

START_TEST(err_prefix_truncates_instead_of_overflowing)
{
	char big[2 * ERR_MSG_MAX];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	err_set(ERR_IO, "%s", big);
	err_prefix("%s", big);
	ck_assert_uint_eq(strlen(err_msg()), ERR_MSG_MAX - 1);
}
END_TEST

/* ---- buf / cursor -------------------------------------------------------- */

START_TEST(buf_round_trips_big_endian_and_varints)
{
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(buf_put_u8(&b, 0xab), 0);
	ck_assert_int_eq(buf_put_be16(&b, 0x1234), 0);
	ck_assert_int_eq(buf_put_be32(&b, 0xdeadbeef), 0);
	ck_assert_int_eq(buf_put_be64(&b, 0x0102030405060708ull), 0);
	uint64_t vs[] = {0, 1, 127, 128, 300, 1ull << 35, UINT64_MAX};
	for (size_t i = 0; i < 7; i++)
		ck_assert_int_eq(buf_put_uvarint(&b, vs[i]), 0);
	ck_assert_int_eq(buf_append(&b, "tail", 4), 0);
	ck_assert_uint_eq(b.data[1], 0x12); /* big-endian on the wire */

	struct cursor c = cursor_make(b.data, b.len);
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	struct slice tail;
	ck_assert_int_eq(cursor_u8(&c, &u8), 0);
	ck_assert_uint_eq(u8, 0xab);
	ck_assert_int_eq(cursor_be16(&c, &u16), 0);
	ck_assert_uint_eq(u16, 0x1234);
	ck_assert_int_eq(cursor_be32(&c, &u32), 0);
	ck_assert_uint_eq(u32, 0xdeadbeef);
	ck_assert_int_eq(cursor_be64(&c, &u64), 0);
	ck_assert_uint_eq(u64, 0x0102030405060708ull);
	for (size_t i = 0; i < 7; i++) {
		ck_assert_int_eq(cursor_uvarint(&c, &u64), 0);
		ck_assert_uint_eq(u64, vs[i]);
	}
	ck_assert_int_eq(cursor_take(&c, 4, &tail), 0);
	ck_assert(slice_eq(tail, slice_from_cstr("tail")));
	ck_assert_uint_eq(cursor_left(&c), 0);
	buf_free(&b);
}
END_TEST

START_TEST(cursor_refuses_to_read_past_the_end)
{
	uint8_t bytes[3] = {1, 2, 3};
	struct cursor c = cursor_make(bytes, 3);
	uint32_t u32;
	uint64_t u64;
	struct slice s;
	ck_assert_int_eq(cursor_be32(&c, &u32), -1);
	ck_assert_uint_eq(cursor_left(&c), 3); /* nothing consumed */
	ck_assert_int_eq(cursor_take(&c, 4, &s), -1);
	ck_assert_int_eq(cursor_skip(&c, SIZE_MAX), -1);
	ck_assert_int_eq(cursor_take(&c, 3, &s), 0);
	ck_assert_int_eq(cursor_be16(&c, (uint16_t *)&u32), -1);

	/* Varints: truncated, too long, overflowing. */
	uint8_t trunc[] = {0x80, 0x80};
	c = cursor_make(trunc, sizeof(trunc));
	ck_assert_int_eq(cursor_uvarint(&c, &u64), -1);
	uint8_t toolong[11];
	memset(toolong, 0x80, sizeof(toolong));
	c = cursor_make(toolong, sizeof(toolong));
	ck_assert_int_eq(cursor_uvarint(&c, &u64), -1);
	uint8_t overflow[10] = {0xff, 0xff, 0xff, 0xff, 0xff,
				0xff, 0xff, 0xff, 0xff, 0x02};
	c = cursor_make(overflow, sizeof(overflow));
	ck_assert_int_eq(cursor_uvarint(&c, &u64), -1);
}
END_TEST

START_TEST(cursor_over_an_empty_null_buffer_is_empty)
{
	struct buf empty;
	buf_init(&empty);
	struct cursor c = cursor_make(empty.data, empty.len);
	uint8_t u8;
	ck_assert_uint_eq(cursor_left(&c), 0);
	ck_assert_int_eq(cursor_u8(&c, &u8), -1);
}
END_TEST

START_TEST(extending_an_empty_buffer_by_zero_gives_a_real_pointer)
{
	struct buf b;
	buf_init(&b);
	uint8_t *p = buf_extend(&b, 0);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_int_eq(buf_append(&b, "", 0), 0);
	buf_free(&b);
}
END_TEST

START_TEST(slices_compare_like_memcmp_then_length)
{
	ck_assert_int_lt(
		slice_cmp(slice_from_cstr("ab"), slice_from_cstr("abc")), 0);
	ck_assert_int_gt(
		slice_cmp(slice_from_cstr("b"), slice_from_cstr("abc")), 0);
	ck_assert_int_eq(slice_cmp(slice_make(NULL, 0), slice_make("", 0)), 0);
	uint8_t hi[] = {0xff}, lo[] = {0x01};
	ck_assert_int_gt(slice_cmp(slice_make(hi, 1), slice_make(lo, 1)), 0);
}
END_TEST

/* ---- arena --------------------------------------------------------------- */

/* A block an arena gives back serves the next arena of about its size on
 * the same thread; a thread's spare blocks are freed when it exits (the leak
 * checker of the sanitizer build would report them). */
static void *arena_thread(void *arg)
{
	(void)arg;
	struct arena a;
	for (int i = 0; i < 20; i++) {
		arena_create(&a, 0);
		for (int k = 0; k < 5; k++)
			ck_assert_ptr_nonnull(arena_alloc(&a, 20000));
		arena_destroy(&a);
	}
	return NULL;
}

START_TEST(arena_reuses_blocks_on_its_thread)
{
	struct arena a, b;
	arena_create(&a, 0);
	void *p = arena_alloc(&a, 100);
	ck_assert_ptr_nonnull(p);
	arena_destroy(&a);
	arena_create(&b, 0);
	ck_assert_ptr_eq(arena_alloc(&b, 100), p);
	arena_destroy(&b);
	/* A small arena does not take the big spare block; its own block is
	 * kept too and serves the next small arena. */
	arena_create(&a, 4096);
	void *q = arena_alloc(&a, 100);
	ck_assert_ptr_nonnull(q);
	ck_assert_ptr_ne(q, p);
	arena_destroy(&a);
	arena_create(&a, 4096);
	ck_assert_ptr_eq(arena_alloc(&a, 100), q);
	arena_destroy(&a);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, arena_thread, NULL), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
}
END_TEST

START_TEST(arena_aligns_counts_and_resets)
{
	struct arena a;
	arena_create(&a, 4096);
	char *p1 = arena_alloc(&a, 3);
	char *p2 = arena_alloc(&a, 8);
	ck_assert_ptr_nonnull(p1);
	ck_assert_uint_eq((uintptr_t)p2 % _Alignof(max_align_t), 0);
	void *big = arena_alloc(&a, 100000); /* its own block */
	ck_assert_ptr_nonnull(big);
	memset(big, 1, 100000);
	char *p3 = arena_alloc(&a, 16); /* still served by the small block */
	ck_assert_ptr_nonnull(p3);
	ck_assert_uint_ge(arena_memory_usage(&a), 100000 + 4096);
	char *s = arena_strdup(&a, "hello");
	ck_assert_str_eq(s, "hello");
	for (int i = 0; i < 1000; i++)
		ck_assert_ptr_nonnull(arena_alloc_aligned(&a, 33, 64));
	arena_reset(&a);
	ck_assert_uint_le(arena_memory_usage(&a), 4096 + 64);
	ck_assert_ptr_nonnull(arena_alloc(&a, 10));
	arena_destroy(&a);
	ck_assert_uint_eq(arena_memory_usage(&a), 0);
}
END_TEST

/* A growing arena (a memtable's) starts with a small block and doubles
 * its blocks up to the largest: an arena that stays nearly empty costs
 * the small one, a busy one soon gets large blocks; destroyed, it starts
 * small again. */
START_TEST(a_growing_arena_starts_small)
{
	struct arena a;
	arena_create_growing(&a, 4096, 256 * 1024);
	ck_assert_ptr_nonnull(arena_alloc(&a, 100));
	ck_assert_uint_le(arena_memory_usage(&a), 4096 + 64);
	size_t before = arena_memory_usage(&a);
	/* fill blocks of 4, 8, 16, ... 256 KiB, then 256 KiB each */
	for (int i = 0; i < 20000; i++)
		ck_assert_ptr_nonnull(arena_alloc(&a, 100));
	size_t grown = arena_memory_usage(&a) - before;
	ck_assert_uint_ge(grown, 20000 * 100);
	/* the blocks reached the largest size, and what is not handed out
	 * is at most the last block's rest */
	ck_assert_uint_eq(a.block_size, 256 * 1024);
	ck_assert_uint_le(arena_memory_usage(&a), a.used + 256 * 1024 + 1024);
	arena_destroy(&a);
	ck_assert_uint_eq(arena_memory_usage(&a), 0);
	ck_assert_ptr_nonnull(arena_alloc(&a, 100));
	ck_assert_uint_le(arena_memory_usage(&a), 4096 + 64);
	arena_destroy(&a);
}
END_TEST

/* ---- thread -------------------------------------------------------------- */

struct bg_seen {
	int nice;
	char name[16];
};

static void *background_thread(void *arg)
{
	struct bg_seen *seen = arg;
	thread_name_self("background-test-thread");
	thread_background();
	seen->nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
	pthread_getname_np(pthread_self(), seen->name, sizeof(seen->name));
	return NULL;
}

/* A background thread is niced by itself: the rest of the process keeps
 * its priority. */
START_TEST(background_threads_are_niced_alone)
{
	int before = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
	struct bg_seen seen;
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, background_thread, &seen), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	int want = before + THREAD_BACKGROUND_NICE;
	ck_assert_int_eq(seen.nice, want > 19 ? 19 : want);
	ck_assert_str_eq(seen.name, "background-test");
	ck_assert_int_eq(getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid)),
			 before);
}
END_TEST

/* ---- crc ----------------------------------------------------------------- */

START_TEST(crc32c_matches_known_vectors_and_both_paths)
{
	ck_assert_uint_eq(crc32c(0, "123456789", 9), 0xe3069283u);
	ck_assert_uint_eq(crc32c_portable(0, "123456789", 9), 0xe3069283u);
	ck_assert_uint_eq(crc32c(0, "", 0), 0);
	uint8_t zeros[32] = {0};
	ck_assert_uint_eq(crc32c(0, zeros, 32), 0x8a9136aau); /* RFC 3720 */
	ck_assert_uint_eq(crc32_ieee(0, "123456789", 9), 0xcbf43926u);

	struct rng r;
	rng_seed(&r, seed);
	uint8_t buf[1000];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rng_next(&r);
	for (size_t off = 0; off < 9; off++) {
		for (size_t len = 0; len < 200; len += 7) {
			uint32_t whole = crc32c(0, buf + off, len);
			ck_assert_uint_eq(whole,
					  crc32c_portable(0, buf + off, len));
			/* Incremental equals one shot. */
			uint32_t part = crc32c(0, buf + off, len / 3);
			part = crc32c(part, buf + off + len / 3, len - len / 3);
			ck_assert_uint_eq(part, whole);
		}
	}
	/* long inputs: the hardware path's three interleaved chains (4080
	 * bytes at a time) against the table-driven one */
	static uint8_t big[13000];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)rng_next(&r);
	for (size_t len = 4000; len < sizeof(big); len += 997)
		for (size_t off = 0; off < 3; off++) {
			uint32_t whole = crc32c(0, big + off, len - off);
			ck_assert_uint_eq(whole, crc32c_portable(0, big + off,
								 len - off));
			uint32_t part = crc32c(0, big + off, 100);
			part = crc32c(part, big + off + 100, len - off - 100);
			ck_assert_uint_eq(part, whole);
		}
	uint32_t c = 0x12345678;
	ck_assert_uint_eq(crc32c_unmask(crc32c_mask(c)), c);
}
END_TEST

/* ---- inet ---------------------------------------------------------------- */

START_TEST(inet_parses_and_formats_v4_and_v6)
{
	struct inet_addr a, b;
	char buf[INET_ADDR_STRLEN];
	ck_assert_int_eq(inet_addr_parse("127.0.0.2", 7000, &a), 0);
	ck_assert_str_eq(inet_addr_format(&a, buf, sizeof(buf)),
			 "127.0.0.2:7000");
	ck_assert_int_eq(inet_addr_parse("127.0.0.2:7001", 7000, &b), 0);
	ck_assert_int_lt(inet_addr_cmp(&a, &b), 0);
	ck_assert_int_eq(inet_addr_parse("[::1]:9042", 1, &a), 0);
	ck_assert_str_eq(inet_addr_format(&a, buf, sizeof(buf)), "[::1]:9042");
	ck_assert_int_eq(inet_addr_parse("::1", 7000, &a), 0);
	ck_assert_uint_eq(a.port, 7000);
	ck_assert_str_eq(inet_addr_format_host(&a, buf, sizeof(buf)), "::1");
	ck_assert_int_eq(inet_addr_parse("0.0.0.0", 1, &a), 0);
	ck_assert(inet_addr_is_wildcard(&a));

	const char *bad[] = {"localhost",
			     "127.0.0.1:0",
			     "127.0.0.1:70000",
			     "127.0.0.1:",
			     "[::1",
			     "1.2.3",
			     ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(inet_addr_parse(bad[i], 1, &a) == -1, "%s",
			      bad[i]);
		ck_assert_int_eq(err_code(), ERR_INVALID);
	}
}
END_TEST

/* ---- rand ---------------------------------------------------------------- */

START_TEST(rng_is_deterministic_and_bounded)
{
	struct rng a, b;
	rng_seed(&a, seed);
	rng_seed(&b, seed);
	for (int i = 0; i < 100; i++)
		ck_assert_uint_eq(rng_next(&a), rng_next(&b));
	int hist[10] = {0};
	for (int i = 0; i < 100000; i++) {
		uint64_t v = rng_below(&a, 10);
		ck_assert_uint_lt(v, 10);
		hist[v]++;
		double d = rng_double(&a);
		ck_assert(d >= 0.0 && d < 1.0);
	}
	for (int i = 0; i < 10; i++)
		ck_assert_int_gt(hist[i], 9000);
}
END_TEST

/* ---- env_real ------------------------------------------------------------ */

static int count_entry(void *arg, const char *name)
{
	(void)name;
	(*(int *)arg)++;
	return 0;
}

START_TEST(env_real_files_are_durable_and_atomic)
{
	struct env *e = env_real_new(NULL);
	ck_assert_ptr_nonnull(e);
	char dir[512], path[600], deep[600];
	snprintf(dir, sizeof(dir), "%s", test_tmpdir("env"));
	snprintf(deep, sizeof(deep), "%s/a/b/c", dir);
	ck_assert_int_eq(env_mkdir_p(e, deep), 0);
	ck_assert_int_eq(env_mkdir_p(e, deep), 0); /* idempotent */
	ck_assert_int_eq(env_exists(e, deep), 1);

	snprintf(path, sizeof(path), "%s/state", dir);
	ck_assert_int_eq(env_write_file_atomic(e, path, "one", 3), 0);
	ck_assert_int_eq(env_write_file_atomic(e, path, "second", 6), 0);
	uint8_t *data;
	size_t len;
	ck_assert_int_eq(env_read_file(e, path, 1024, &data, &len), 0);
	ck_assert_uint_eq(len, 6);
	ck_assert_str_eq((char *)data, "second");
	free(data);
	ck_assert_int_eq(env_read_file(e, path, 3, &data, &len), -1);
	ck_assert_int_eq(err_code(), ERR_NOMEM);

	struct env_file *f;
	snprintf(path, sizeof(path), "%s/log", dir);
	ck_assert_int_eq(env_file_open(e, path,
				       ENV_FILE_READ | ENV_FILE_WRITE |
					       ENV_FILE_CREATE | ENV_FILE_EXCL,
				       &f),
			 0);
	ck_assert_int_eq(env_file_append(f, "abc", 3), 0);
	ck_assert_int_eq(env_file_append(f, "def", 3), 0);
	ck_assert_int_eq(env_file_pwrite(f, "X", 1, 1), 0);
	ck_assert_int_eq(env_file_sync(f), 0);
	char rd[16] = {0};
	ck_assert_int_eq(env_file_pread(f, rd, 16, 0), 6);
	ck_assert_str_eq(rd, "aXcdef");
	/* Just written, so in the page cache: a non-blocking read finds it;
	 * one reaching past the end is not answered (the blocking read
	 * says what is there). */
	memset(rd, 0, sizeof(rd));
	ck_assert_int_eq(env_file_pread_nowait(f, rd, 5, 1), 5);
	ck_assert_str_eq(rd, "Xcdef");
	ck_assert_int_eq(env_file_pread_nowait(f, rd, 16, 0), -1);
	ck_assert_int_eq(err_code(), ERR_AGAIN);
	ck_assert_int_eq(env_file_allocate(f, 0, 4096), 0);
	ck_assert_int_eq(env_file_size(f), 4096);
	ck_assert_int_eq(env_file_truncate(f, 2), 0);
	ck_assert_int_eq(env_file_size(f), 2);
	/* Appending after a truncate continues at the new end: no hole. */
	ck_assert_int_eq(env_file_append(f, "Z", 1), 0);
	ck_assert_int_eq(env_file_size(f), 3);
	ck_assert_int_eq(env_file_close(f), 0);
	ck_assert_int_eq(
		env_file_open(e, path,
			      ENV_FILE_WRITE | ENV_FILE_CREATE | ENV_FILE_EXCL,
			      &f),
		-1);
	ck_assert_int_eq(err_code(), ERR_EXISTS);

	int n = 0;
	ck_assert_int_eq(env_list_dir(e, dir, count_entry, &n), 0);
	ck_assert_int_eq(n, 3); /* a, state, log */
	ck_assert_int_eq(env_unlink(e, path), 0);
	ck_assert_int_eq(env_unlink(e, path), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	ck_assert_int_eq(env_file_open(e, path, ENV_FILE_READ, &f), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	ck_assert_int_eq(env_send(e, NULL, 0, "", 0), -1);
	ck_assert_int_eq(err_code(), ERR_UNAVAILABLE);
	test_tmpdir_remove(dir);
	env_real_delete(e);
}
END_TEST

struct tick {
	struct env *env;
	struct env_timer *t;
	int fired;
	uint64_t first_us;
	uint64_t last_us;
};

static void on_tick(void *arg)
{
	struct tick *k = arg;
	k->last_us = env_mono_us(k->env);
	if (++k->fired < 3)
		env_timer_arm(k->env, k->t, 2000);
}

START_TEST(env_real_timers_fire_on_the_loop)
{
	struct event_base *base = event_base_new();
	struct env *e = env_real_new(base);
	struct tick k = {.env = e};
	k.t = env_timer_new(e, on_tick, &k);
	ck_assert_ptr_nonnull(k.t);
	k.first_us = env_mono_us(e);
	env_timer_arm(e, k.t, 1000);
	event_base_dispatch(base);
	ck_assert_int_eq(k.fired, 3);
	ck_assert_uint_ge(k.last_us - k.first_us, 5000);
	ck_assert_int_gt(env_wall_us(e), 1600000000000000);
	env_timer_free(e, k.t);
	env_real_delete(e);
	event_base_free(base);

	/* No loop: timers are refused, not crashed on. */
	e = env_real_new(NULL);
	ck_assert_ptr_null(env_timer_new(e, on_tick, &k));
	env_real_delete(e);
}
END_TEST

/* ---- workers and loopq --------------------------------------------------- */

struct job {
	struct work work;       /* runs on a worker */
	struct loopq_item done; /* then on the loop */
	struct loopq *q;
	struct event_base *base;
	int input;
	int output;
	int *completed;
	int total;
	pthread_t worker_thread;
};

static void job_done(struct loopq_item *it)
{
	struct job *j = (struct job *)((char *)it - offsetof(struct job, done));
	ck_assert(!pthread_equal(j->worker_thread, pthread_self()));
	if (++*j->completed == j->total)
		event_base_loopbreak(j->base);
}

static void job_run(struct work *w)
{
	struct job *j = (struct job *)w;
	j->worker_thread = pthread_self();
	j->output = j->input * j->input;
	j->done.fn = job_done;
	loopq_post(j->q, &j->done);
}

START_TEST(worker_jobs_complete_back_on_the_loop)
{
	enum { N = 500 };
	struct event_base *base = event_base_new();
	struct loopq *q = loopq_new(base);
	struct workers *w = workers_new(3, "test");
	ck_assert_ptr_nonnull(q);
	ck_assert_ptr_nonnull(w);
	static struct job jobs[N];
	int completed = 0;
	for (int i = 0; i < N; i++) {
		jobs[i] = (struct job){.work.run = job_run,
				       .q = q,
				       .base = base,
				       .input = i,
				       .completed = &completed,
				       .total = N};
		workers_submit(w, &jobs[i].work);
	}
	event_base_dispatch(base);
	ck_assert_int_eq(completed, N);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(jobs[i].output, i * i);
	workers_delete(w); /* idle: joins at once */
	loopq_delete(q);
	event_base_free(base);
}
END_TEST

/* A deferred item runs after its caller returns, within the same loop
 * turn (one EVLOOP_NONBLOCK round), in order; one deferred while the list
 * runs still makes that turn. loopq_post would need another turn. */
struct deferred {
	struct loopq_item item;
	struct loopq *q;
	char name;
	char *log;
	struct deferred *then; /* deferred by this one when it runs */
};

static void deferred_run(struct loopq_item *it)
{
	struct deferred *d = (struct deferred *)it;
	size_t n = strlen(d->log);
	d->log[n] = d->name;
	d->log[n + 1] = 0;
	if (d->then)
		loopq_defer(d->q, &d->then->item);
}

struct defer_case {
	struct loopq *q;
	struct deferred *a, *b;
	char *log;
};

static void defer_from_callback(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct defer_case *c = arg;
	loopq_defer(c->q, &c->a->item);
	loopq_defer(c->q, &c->b->item);
	ck_assert_str_eq(c->log, ""); /* not run inside loopq_defer */
	strcat(c->log, "-");
}

START_TEST(deferred_items_run_later_in_the_same_turn)
{
	struct event_base *base = event_base_new();
	struct loopq *q = loopq_new(base);
	ck_assert_ptr_nonnull(q);
	char log[16] = "";
	struct deferred c = {{deferred_run, NULL}, q, 'c', log, NULL};
	struct deferred a = {{deferred_run, NULL}, q, 'a', log, &c};
	struct deferred b = {{deferred_run, NULL}, q, 'b', log, NULL};
	struct defer_case dc = {q, &a, &b, log};
	struct event *ev = event_new(base, -1, 0, defer_from_callback, &dc);
	event_active(ev, EV_TIMEOUT, 1);
	event_base_loop(base, EVLOOP_NONBLOCK | EVLOOP_ONCE);
	ck_assert_str_eq(log, "-abc");
	/* Nothing left for a second turn. */
	event_base_loop(base, EVLOOP_NONBLOCK | EVLOOP_ONCE);
	ck_assert_str_eq(log, "-abc");
	/* Deleting the queue runs what was deferred and never reached. */
	a.then = NULL;
	loopq_defer(q, &a.item);
	loopq_delete(q);
	ck_assert_str_eq(log, "-abca");
	event_free(ev);
	event_base_free(base);
}
END_TEST

/* ---- log ----------------------------------------------------------------- */

/* Compaction and repair validation book into one limiter: whoever books
 * next waits for everything booked before, so together they keep to the
 * rate; time left unused is not banked. (An injected clock: no timing.) */
START_TEST(one_rate_limit_paces_every_caller_together)
{
	struct ratelimit *r = ratelimit_new(1u << 20); /* 1 MiB/s */
	ck_assert_ptr_nonnull(r);
	/* two callers at t=0, 1 MiB each: the second waits for both */
	ck_assert_uint_eq(ratelimit_book(r, 1u << 20, 0), 1000000);
	ck_assert_uint_eq(ratelimit_book(r, 1u << 20, 0), 2000000);
	/* half a second later, 512 KiB more: due at 2.5 s */
	ck_assert_uint_eq(ratelimit_book(r, 512u << 10, 500000), 2000000);
	/* long idle: no credit for the idle time */
	ck_assert_uint_eq(ratelimit_book(r, 1024, 100000000), 976);
	/* large counts do not overflow */
	ck_assert_uint_eq(ratelimit_book(r, 1ull << 50, 200000000),
			  (1ull << 30) * 1000000u);
	ratelimit_delete(r);
	/* 0 is unlimited */
	r = ratelimit_new(0);
	ck_assert_uint_eq(ratelimit_book(r, 1u << 30, 0), 0);
	ratelimit_pay(r, 1u << 30); /* returns at once */
	/* setcompactionthroughput: a new rate applies to the next bytes */
	ck_assert_uint_eq(ratelimit_rate(r), 0);
	ratelimit_set_rate(r, 2u << 20);
	ck_assert_uint_eq(ratelimit_rate(r), 2u << 20);
	ck_assert_uint_eq(ratelimit_book(r, 1u << 20, 300000000), 500000);
	ratelimit_set_rate(r, 0);
	ck_assert_uint_eq(ratelimit_book(r, 1u << 30, 300000000), 0);
	ratelimit_delete(r);
}
END_TEST

START_TEST(log_writes_levels_module_and_context_to_file)
{
	char dir[512], path[600];
	snprintf(dir, sizeof(dir), "%s", test_tmpdir("log"));
	snprintf(path, sizeof(path), "%s/system.log", dir);
	ck_assert_int_eq(log_open_file(path), 0);
	log_set_stderr(false);
	log_set_level(LOG_LEVEL_INFO);
	log_write(LOG_LEVEL_INFO, "gossip", "node %d up", 2);
	log_write(LOG_LEVEL_DEBUG, "gossip", "hidden");
	ck_assert(!log_enabled(LOG_LEVEL_DEBUG));
	log_set_context("node1");
	log_write(LOG_LEVEL_WARN, "ring", "tagged");
	log_set_context(NULL);
	log_close_file();
	log_set_stderr(true);

	FILE *f = fopen(path, "r");
	char line[512];
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	ck_assert_ptr_nonnull(strstr(line, "INFO  [gossip] node 2 up\n"));
	ck_assert_int_eq(line[4], '-'); /* 2026-11-30 ... */
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	ck_assert_ptr_nonnull(strstr(line, "WARN  [ring] node1: tagged"));
	ck_assert_ptr_null(fgets(line, sizeof(line), f));
	fclose(f);

	enum log_level lv;
	ck_assert_int_eq(log_level_parse("DEBUG", &lv), 0);
	ck_assert_int_eq(lv, LOG_LEVEL_DEBUG);
	ck_assert_int_eq(log_level_parse("loud", &lv), -1);
	test_tmpdir_remove(dir);
}
END_TEST

START_TEST(uuid_text_round_trip)
{
	static const uint8_t id[16] = {0xaa, 1, 2,  3,  4,  5,  6,  7,
				       8,    9, 10, 11, 12, 13, 14, 15};
	char t[UUID_TEXT_LEN + 1];
	uint8_t back[16];
	uuid_format(id, t);
	ck_assert_str_eq(t, "aa010203-0405-0607-0809-0a0b0c0d0e0f");
	ck_assert_int_eq(uuid_parse(t, back), 0);
	ck_assert_mem_eq(back, id, 16);
	ck_assert_int_eq(
		uuid_parse("AA010203-0405-0607-0809-0A0B0C0D0E0F", back), 0);
	ck_assert_int_eq(
		uuid_parse("aa010203-0405-0607-0809-0a0b0c0d0e0", back), -1);
	ck_assert_int_eq(
		uuid_parse("aa010203x0405-0607-0809-0a0b0c0d0e0f", back), -1);
	ck_assert_int_eq(hex_digit('0'), 0);
	ck_assert_int_eq(hex_digit('a'), 10);
	ck_assert_int_eq(hex_digit('F'), 15);
	ck_assert_int_eq(hex_digit('g'), -1);
	ck_assert_int_eq(hex_digit('-'), -1);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("common");
	TCase *tc = tcase_create("core");
	seed = test_seed(12345);
	tcase_add_test(tc, err_slot_keeps_code_message_and_prefix);
	tcase_add_test(tc, uuid_text_round_trip);
	tcase_add_test(tc, err_prefix_truncates_instead_of_overflowing);
	tcase_add_test(tc, buf_round_trips_big_endian_and_varints);
	tcase_add_test(tc, cursor_refuses_to_read_past_the_end);
	tcase_add_test(tc, cursor_over_an_empty_null_buffer_is_empty);
	tcase_add_test(tc,
		       extending_an_empty_buffer_by_zero_gives_a_real_pointer);
	tcase_add_test(tc, slices_compare_like_memcmp_then_length);
	tcase_add_test(tc, arena_aligns_counts_and_resets);
	tcase_add_test(tc, background_threads_are_niced_alone);
	tcase_add_test(tc, arena_reuses_blocks_on_its_thread);
	tcase_add_test(tc, a_growing_arena_starts_small);
	tcase_add_test(tc, crc32c_matches_known_vectors_and_both_paths);
	tcase_add_test(tc, inet_parses_and_formats_v4_and_v6);
	tcase_add_test(tc, rng_is_deterministic_and_bounded);
	tcase_add_test(tc, env_real_files_are_durable_and_atomic);
	tcase_add_test(tc, env_real_timers_fire_on_the_loop);
	tcase_add_test(tc, worker_jobs_complete_back_on_the_loop);
	tcase_add_test(tc, deferred_items_run_later_in_the_same_turn);
	tcase_add_test(tc, log_writes_levels_module_and_context_to_file);
	tcase_add_test(tc, one_rate_limit_paces_every_caller_together);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
