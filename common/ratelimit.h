/*
 * A byte rate shared by threads.
 *
 * compaction_throughput is one budget for compaction and repair
 * validation together, as in Cassandra: both book the bytes they moved
 * against the same limiter, and a caller that is ahead of the rate waits
 * until its bytes are paid for. Unused time is not banked: after an idle
 * spell the next bytes start from now. Thread-safe (a mutex held only to
 * move the account). Worker threads only: ratelimit_pay sleeps.
 */
#ifndef CASSINI_COMMON_RATELIMIT_H
#define CASSINI_COMMON_RATELIMIT_H

#include <stdint.h>

struct ratelimit;

/* bytes_per_sec 0 means unlimited. NULL with err set (ERR_NOMEM). */
struct ratelimit *ratelimit_new(uint64_t bytes_per_sec);
void ratelimit_delete(struct ratelimit *r);
/* Changes the rate (0: unlimited) from any thread; what is booked already
 * keeps its time. */
void ratelimit_set_rate(struct ratelimit *r, uint64_t bytes_per_sec);
uint64_t ratelimit_rate(struct ratelimit *r);

/* Books `bytes` moved at `now_us` (any monotonic clock, the same for
 * every caller) and returns how many microseconds the caller must wait
 * for everything booked so far to keep to the rate (0 when it does). */
uint64_t ratelimit_book(struct ratelimit *r, uint64_t bytes, uint64_t now_us);

/* ratelimit_book on CLOCK_MONOTONIC, then sleeps that long when it is a
 * millisecond or more (shorter debts carry over to the next call). */
void ratelimit_pay(struct ratelimit *r, uint64_t bytes);

#endif
