/*
 * Handing work to an event-loop thread from any thread.
 *
 * A mutex-protected FIFO plus an eventfd the loop watches: loopq_post()
 * appends and rings; the loop drains everything queued in order. Items are
 * embedded in the caller's structs, so posting never allocates and never
 * fails. Used for completions of disk work (commitlog syncs, reads on
 * worker threads) that must finish on the loop.
 *
 * loopq_defer() is the loop thread's own shortcut: an item it queues runs
 * later in the same loop turn, after the callbacks already ready (no
 * eventfd, no system call), for work done at once whose callee expects its
 * callback after the call returns.
 */
#ifndef CASSINI_COMMON_LOOPQ_H
#define CASSINI_COMMON_LOOPQ_H

struct event_base;
struct loopq;

struct loopq_item {
	void (*fn)(struct loopq_item *item); /* runs on the loop thread */
	struct loopq_item *next;
};

/* NULL with err set. The base must outlive the queue. */
struct loopq *loopq_new(struct event_base *base);
/* Items still queued are run first, on the calling (loop) thread. */
void loopq_delete(struct loopq *q);
/* Runs what is queued, on the calling (loop) thread, until nothing is
 * (items queued by the items run too). */
void loopq_run_pending(struct loopq *q);
/* Thread-safe. The item must stay live until its fn runs. */
void loopq_post(struct loopq *q, struct loopq_item *item);
/* Loop thread only. Runs the item in this loop turn, after the callbacks
 * already ready; items run in the order deferred. */
void loopq_defer(struct loopq *q, struct loopq_item *item);

#endif
