#include "common/workers.h"

#include "common/err.h"
#include "common/loopq.h"
#include "common/thread.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct workers {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct work *head, *tail;
	bool stopping;
	int count;
	bool background;
	pthread_t *threads;
};

static void *worker_main(void *arg)
{
	struct workers *w = arg;
	if (w->background)
		thread_background();
	for (;;) {
		pthread_mutex_lock(&w->lock);
		while (!w->head && !w->stopping)
			pthread_cond_wait(&w->cond, &w->lock);
		struct work *job = w->head;
		if (job) {
			w->head = job->next;
			if (!w->head)
				w->tail = NULL;
		}
		pthread_mutex_unlock(&w->lock);
		if (!job)
			return NULL; /* stopping and drained */
		job->run(job);
	}
}

static struct workers *start(int threads, const char *name, bool background)
{
	struct workers *w = calloc(1, sizeof(*w));
	if (!w || threads < 1 ||
	    !(w->threads = calloc((size_t)threads, sizeof(*w->threads)))) {
		free(w);
		err_set(ERR_NOMEM, "cannot allocate %d workers", threads);
		return NULL;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->background = background;
	for (; w->count < threads; w->count++) {
		if (pthread_create(&w->threads[w->count], NULL, worker_main,
				   w) != 0) {
			err_set(ERR_NOMEM, "cannot start worker threads");
			workers_delete(w);
			return NULL;
		}
		char tname[16];
		snprintf(tname, sizeof(tname), "%.10s-%d", name, w->count);
		pthread_setname_np(w->threads[w->count], tname);
	}
	return w;
}

struct workers *workers_new(int threads, const char *name)
{
	return start(threads, name, false);
}

struct workers *workers_new_background(int threads, const char *name)
{
	return start(threads, name, true);
}

void workers_delete(struct workers *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (int i = 0; i < w->count; i++)
		pthread_join(w->threads[i], NULL);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w->threads);
	free(w);
}

void workers_submit(struct workers *w, struct work *job)
{
	job->next = NULL;
	pthread_mutex_lock(&w->lock);
	if (w->tail)
		w->tail->next = job;
	else
		w->head = job;
	w->tail = job;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

struct offload {
	struct work work;
	struct loopq_item item;
	struct loopq *q;
	void (*run)(void *job);
	void (*done)(void *job);
	void *job;
};

static void offload_run(struct work *w)
{
	struct offload *o = (struct offload *)w;
	o->run(o->job);
	loopq_post(o->q, &o->item);
}

static void offload_done(struct loopq_item *it)
{
	struct offload *o =
		(struct offload *)((char *)it - offsetof(struct offload, item));
	o->done(o->job);
	free(o);
}

void workers_offload(struct workers *w, struct loopq *q, void (*run)(void *job),
		     void (*done)(void *job), void *job)
{
	struct offload *o = w ? malloc(sizeof(*o)) : NULL;
	if (!o) {
		run(job);
		done(job);
		return;
	}
	*o = (struct offload){.work.run = offload_run,
			      .item.fn = offload_done,
			      .q = q,
			      .run = run,
			      .done = done,
			      .job = job};
	workers_submit(w, &o->work);
}
