/*
 * A node's small state file (state_file.h).
 */
#define LOG_MODULE "state"
#include "node/state_file.h"

#include "common/env.h"
#include "common/err.h"
#include "common/log.h"
#include "common/loopq.h"
#include "common/workers.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

struct node_state_file {
	struct env *env;
	struct loopq *q;
	struct workers *workers;
	char path[PATH_MAX];
	bool busy;        /* a write runs */
	bool closing;     /* shutdown: the last write is synchronous */
	uint8_t *pending; /* the newest state not yet written */
	size_t pending_len;
};

struct save_job {
	struct work work;
	struct loopq_item item;
	struct node_state_file *f;
	uint8_t *data;
	size_t len;
	int status;
	char msg[ERR_MSG_MAX];
};

static void save_run(struct work *w)
{
	struct save_job *j = (struct save_job *)w;
	j->status =
		env_write_file_atomic(j->f->env, j->f->path, j->data, j->len);
	if (j->status)
		snprintf(j->msg, sizeof(j->msg), "%s", err_msg());
	loopq_post(j->f->q, &j->item);
}

static void save_submit(struct node_state_file *f, uint8_t *data, size_t len);

static void save_done(struct loopq_item *it)
{
	struct save_job *j =
		(struct save_job *)((char *)it -
				    offsetof(struct save_job, item));
	struct node_state_file *f = j->f;
	if (j->status)
		LOG_WARN("cannot write %s: %s", f->path, j->msg);
	free(j->data);
	free(j);
	f->busy = false;
	if (f->pending && !f->closing) {
		uint8_t *d = f->pending;
		f->pending = NULL;
		save_submit(f, d, f->pending_len);
	}
}

static void save_submit(struct node_state_file *f, uint8_t *data, size_t len)
{
	struct save_job *j = calloc(1, sizeof(*j));
	if (!j) {
		LOG_WARN("cannot write %s: out of memory", f->path);
		free(data);
		return;
	}
	j->f = f;
	j->data = data;
	j->len = len;
	j->work.run = save_run;
	j->item.fn = save_done;
	f->busy = true;
	workers_submit(f->workers, &j->work);
}

void node_state_file_save(struct node_state_file *f, uint8_t *data, size_t len)
{
	if (f->closing || f->busy) {
		free(f->pending); /* superseded */
		f->pending = data;
		f->pending_len = len;
		return;
	}
	save_submit(f, data, len);
}

struct node_state_file *node_state_file_new(struct env *env, struct loopq *q,
					    const char *path,
					    const char *thread)
{
	struct node_state_file *f = calloc(1, sizeof(*f));
	if (!f) {
		err_set(ERR_NOMEM, "state file");
		return NULL;
	}
	f->env = env;
	f->q = q;
	snprintf(f->path, sizeof(f->path), "%s", path);
	if (!(f->workers = workers_new(1, thread))) {
		free(f);
		return NULL;
	}
	return f;
}

void node_state_file_delete(struct node_state_file *f)
{
	if (!f)
		return;
	f->closing = true;
	workers_delete(f->workers); /* the write in flight finishes */
	if (f->q)
		loopq_run_pending(f->q);
	if (f->pending &&
	    env_write_file_atomic(f->env, f->path, f->pending, f->pending_len))
		LOG_WARN("cannot write %s: %s", f->path, err_msg());
	free(f->pending);
	free(f);
}

const char *node_state_file_path(const struct node_state_file *f)
{
	return f->path;
}

int node_state_file_read(struct node_state_file *f, size_t max, uint8_t **data,
			 size_t *len)
{
	return env_read_file(f->env, f->path, max, data, len);
}

void node_state_file_set_aside(struct node_state_file *f)
{
	char aside[PATH_MAX + 16];
	snprintf(aside, sizeof(aside), "%s.corrupt", f->path);
	if (env_rename(f->env, f->path, aside))
		LOG_WARN("cannot move %s aside: %s", f->path, err_msg());
}

int node_state_file_load(struct node_state_file *f, size_t max,
			 int (*parse)(void *arg, const uint8_t *data,
				      size_t len),
			 void *arg, const char *instead)
{
	uint8_t *data;
	size_t len;
	if (node_state_file_read(f, max, &data, &len)) {
		if (err_code() != ERR_NOT_FOUND)
			LOG_ERROR("cannot read %s: %s", f->path, err_msg());
		return 0;
	}
	int rc = parse(arg, data, len);
	free(data);
	if (rc == 0)
		return 1;
	LOG_ERROR("%s: %s; moved to %s.corrupt, %s", f->path, err_msg(),
		  f->path, instead);
	node_state_file_set_aside(f);
	return -1;
}
