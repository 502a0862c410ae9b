/*
 * Phi-accrual failure detector, as Cassandra's FailureDetector/ArrivalWindow:
 * a bounded window of heartbeat inter-arrival times per endpoint (intervals
 * above the cap are ignored so a long partition does not inflate the mean),
 * phi = elapsed / mean, reported scaled by PHI_FACTOR = 1/ln(10).
 *
 * The window grows on demand up to its cap, so a thousand simulated nodes
 * that each know a thousand peers do not each reserve a thousand samples.
 *
 * One departure from Cassandra: its first arrival seeds the window with a
 * deliberately high guess (two gossip intervals) that then stays among the
 * samples until a thousand real ones push it out. On a young cluster that
 * guess inflates the mean by 5-10% and delays every conviction by a second
 * or two. Here the guess counts only until GOSSIP_FD_WARMUP intervals have
 * been measured: enough that one burst of close arrivals cannot shrink the
 * mean, and the reason for the guess (no flapping while nothing is known)
 * still holds.
 *
 * A second departure: Cassandra samples the moments heartbeat news reaches
 * it. Gossip spreads news in bursts (two heartbeats in one round, none in
 * the next) and late (a peer hears a node's last heartbeat one to three
 * rounds after it was sent), so its mean and its "time since last" both
 * measure gossip's spread as much as the node's silence: a kill -9 was
 * seen 18 to 22 s later depending on the observer. Each gossiped state here
 * carries its heartbeat's number and age, so a report says which heartbeat
 * and when it was born (on our clock); an interval is the birth gap divided
 * by the beats between, and phi counts from the last birth. Every observer
 * then convicts a dead node about 18.4 mean intervals after its last
 * heartbeat, whichever way the news travelled.
 */
#include "gossip/gossip_internal.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

#define PHI_FACTOR 0.434294481903251828 /* 1 / ln(10) */

void gossip_fd_init(struct gossip_fd_window *w, uint32_t cap)
{
	memset(w, 0, sizeof(*w));
	w->cap = cap ? cap : GOSSIP_FD_WINDOW;
}

void gossip_fd_free(struct gossip_fd_window *w)
{
	free(w->samples);
	w->samples = NULL;
	w->alloc = w->len = w->head = 0;
	w->sum = 0;
	w->last_us = 0;
	w->initial_us = 0;
	w->based = false;
}

void gossip_fd_restart(struct gossip_fd_window *w)
{
	w->based = false;
}

static int add_sample(struct gossip_fd_window *w, uint32_t v)
{
	if (w->len < w->cap && w->len == w->alloc) {
		/* Grow; the ring is linear while len == alloc and head == 0. */
		uint32_t na = w->alloc ? w->alloc * 2 : 8;
		if (na > w->cap)
			na = w->cap;
		uint32_t *s = realloc(w->samples, (size_t)na * sizeof(*s));
		if (!s)
			return err_set(ERR_NOMEM, "failure detector window");
		w->samples = s;
		w->alloc = na;
	}
	if (w->len < w->cap) {
		w->samples[w->len++] = v;
	} else {
		w->sum -= w->samples[w->head];
		w->samples[w->head] = v;
		w->head = (w->head + 1) % w->cap;
	}
	w->sum += v;
	return 0;
}

int gossip_fd_report(struct gossip_fd_window *w, uint64_t born_us,
		     uint32_t beats, uint64_t initial_us,
		     uint64_t max_interval_us)
{
	if (!w->based) {
		if (w->len == 0 && w->last_us == 0)
			w->initial_us = initial_us;
	} else {
		if (born_us <= w->base_us || (beats && beats <= w->base_beats))
			return 0; /* not newer than what we know */
		uint32_t n = beats && w->base_beats ? beats - w->base_beats : 1;
		uint64_t gap = (born_us - w->base_us) / n;
		if (gap <= max_interval_us && add_sample(w, (uint32_t)gap) != 0)
			return -1;
		uint32_t warm =
			w->cap < GOSSIP_FD_WARMUP ? w->cap : GOSSIP_FD_WARMUP;
		if (w->len >= warm)
			w->initial_us = 0;
	}
	w->based = true;
	w->base_us = born_us;
	w->base_beats = beats;
	if (born_us > w->last_us)
		w->last_us = born_us;
	return 0;
}

void gossip_fd_touch(struct gossip_fd_window *w, uint64_t now_us)
{
	if (now_us > w->last_us)
		w->last_us = now_us;
}

double gossip_fd_mean_us(const struct gossip_fd_window *w)
{
	size_t n = w->len + (w->initial_us ? 1 : 0);
	return n ? (double)(w->sum + w->initial_us) / (double)n : 0.0;
}

double gossip_fd_phi(const struct gossip_fd_window *w, uint64_t now_us)
{
	double mean = gossip_fd_mean_us(w);
	if (w->last_us == 0 || mean <= 0.0 || now_us <= w->last_us)
		return 0.0;
	return PHI_FACTOR * (double)(now_us - w->last_us) / mean;
}
