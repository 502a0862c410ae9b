#include "common/ratelimit.h"

#include "common/err.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct ratelimit {
	pthread_mutex_t mu;
	uint64_t rate;    /* bytes a second; 0 unlimited */
	uint64_t next_us; /* when everything booked is paid for */
};

struct ratelimit *ratelimit_new(uint64_t bytes_per_sec)
{
	struct ratelimit *r = calloc(1, sizeof(*r));
	if (!r) {
		err_set(ERR_NOMEM, "cannot allocate a rate limiter");
		return NULL;
	}
	pthread_mutex_init(&r->mu, NULL);
	r->rate = bytes_per_sec;
	return r;
}

void ratelimit_delete(struct ratelimit *r)
{
	if (!r)
		return;
	pthread_mutex_destroy(&r->mu);
	free(r);
}

void ratelimit_set_rate(struct ratelimit *r, uint64_t bytes_per_sec)
{
	pthread_mutex_lock(&r->mu);
	r->rate = bytes_per_sec;
	pthread_mutex_unlock(&r->mu);
}

uint64_t ratelimit_rate(struct ratelimit *r)
{
	pthread_mutex_lock(&r->mu);
	uint64_t rate = r->rate;
	pthread_mutex_unlock(&r->mu);
	return rate;
}

uint64_t ratelimit_book(struct ratelimit *r, uint64_t bytes, uint64_t now_us)
{
	if (!r)
		return 0;
	pthread_mutex_lock(&r->mu);
	if (!r->rate) {
		pthread_mutex_unlock(&r->mu);
		return 0;
	}
	/* bytes/rate seconds, without overflowing bytes * 10^6 */
	uint64_t cost = bytes / r->rate * 1000000u +
			bytes % r->rate * 1000000u / r->rate;
	if (r->next_us < now_us)
		r->next_us = now_us;
	r->next_us += cost;
	uint64_t wait = r->next_us - now_us;
	pthread_mutex_unlock(&r->mu);
	return wait;
}

void ratelimit_pay(struct ratelimit *r, uint64_t bytes)
{
	if (!r || !bytes)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now =
		(uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	uint64_t us = ratelimit_book(r, bytes, now);
	if (us < 1000)
		return;
	struct timespec d = {(time_t)(us / 1000000u),
			     (long)(us % 1000000u) * 1000};
	while (nanosleep(&d, &d) != 0 && errno == EINTR)
		;
}
