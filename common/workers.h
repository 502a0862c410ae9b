/*
 * A small pool of threads for blocking work (SSTable reads, scans).
 *
 * Jobs are embedded in the caller's structs and run in submission order by
 * whichever thread is free. A job that must finish on the event loop posts
 * itself to a loopq when done. workers_delete() finishes every queued job,
 * then joins the threads.
 */
#ifndef CASSINI_COMMON_WORKERS_H
#define CASSINI_COMMON_WORKERS_H

struct workers;

struct work {
	void (*run)(struct work *w); /* runs on a worker thread */
	struct work *next;
};

/* `threads` >= 1. NULL with err set. */
struct workers *workers_new(int threads, const char *name);
/* For background work (repair, maintenance): the threads run at a lower
 * CPU priority than the event loop (common/thread.h). */
struct workers *workers_new_background(int threads, const char *name);
void workers_delete(struct workers *w);
/* Thread-safe; never fails. The job must stay live until run returns. */
void workers_submit(struct workers *w, struct work *job);

/* The offload hook the modules take (hints, batchlog, repair): run(job) on
 * a worker of `w`, then done(job) on the loop thread behind `q`. Both run
 * inline when `w` is NULL (stopped) or memory is short. */
struct loopq;
void workers_offload(struct workers *w, struct loopq *q, void (*run)(void *job),
		     void (*done)(void *job), void *job);

#endif
