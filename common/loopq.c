#include "common/loopq.h"

#include "common/err.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct loopq {
	pthread_mutex_t lock;
	struct loopq_item *head, *tail;
	int efd;
	struct event *ev;
	/* loopq_defer's FIFO: the loop thread's own, no lock, no fd */
	struct loopq_item *local_head, *local_tail;
	struct event *local_ev;
};

static void run_items(struct loopq_item *it)
{
	while (it) {
		struct loopq_item *next = it->next;
		it->fn(it); /* may free the item */
		it = next;
	}
}

static void drain(struct loopq *q)
{
	pthread_mutex_lock(&q->lock);
	struct loopq_item *it = q->head;
	q->head = q->tail = NULL;
	pthread_mutex_unlock(&q->lock);
	run_items(it);
}

/* Takes the list first: items deferred by these run in a later round of
 * the same turn (loopq_defer activates the event again). */
static void drain_local(struct loopq *q)
{
	struct loopq_item *it = q->local_head;
	q->local_head = q->local_tail = NULL;
	run_items(it);
}

static void on_local(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	drain_local(arg);
}

static void on_ring(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	uint64_t n;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	drain(arg);
}

struct loopq *loopq_new(struct event_base *base)
{
	struct loopq *q = calloc(1, sizeof(*q));
	if (!q) {
		err_set(ERR_NOMEM, "cannot allocate a loop queue");
		return NULL;
	}
	pthread_mutex_init(&q->lock, NULL);
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->efd < 0) {
		err_set_errno(errno, "eventfd");
		free(q);
		return NULL;
	}
	q->ev = event_new(base, q->efd, EV_READ | EV_PERSIST, on_ring, q);
	q->local_ev = event_new(base, -1, 0, on_local, q);
	if (!q->ev || !q->local_ev || event_add(q->ev, NULL) != 0) {
		if (q->ev)
			event_free(q->ev);
		if (q->local_ev)
			event_free(q->local_ev);
		close(q->efd);
		free(q);
		err_set(ERR_NOMEM, "cannot watch the loop queue");
		return NULL;
	}
	return q;
}

void loopq_run_pending(struct loopq *q)
{
	/* until nothing is left: a run item may queue another */
	for (;;) {
		pthread_mutex_lock(&q->lock);
		bool posted = q->head != NULL;
		pthread_mutex_unlock(&q->lock);
		if (!posted && !q->local_head)
			return;
		drain_local(q);
		drain(q);
	}
}

void loopq_delete(struct loopq *q)
{
	if (!q)
		return;
	drain_local(q);
	drain(q);
	event_free(q->local_ev);
	event_free(q->ev);
	close(q->efd);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

void loopq_post(struct loopq *q, struct loopq_item *item)
{
	item->next = NULL;
	pthread_mutex_lock(&q->lock);
	int was_empty = q->head == NULL;
	if (q->tail)
		q->tail->next = item;
	else
		q->head = item;
	q->tail = item;
	pthread_mutex_unlock(&q->lock);
	if (was_empty) {
		uint64_t one = 1;
		/* A full counter still wakes the loop; nothing to do on EAGAIN.
		 */
		(void)!write(q->efd, &one, sizeof(one));
	}
}

void loopq_defer(struct loopq *q, struct loopq_item *item)
{
	item->next = NULL;
	if (q->local_tail)
		q->local_tail->next = item;
	else {
		q->local_head = item;
		/* Queued behind the callbacks already ready in this turn. */
		event_active(q->local_ev, EV_TIMEOUT, 1);
	}
	q->local_tail = item;
}
