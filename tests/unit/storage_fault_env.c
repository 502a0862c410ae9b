/*
 * Fault-injecting env; see storage_fault_env.h.
 */
#include "tests/unit/storage_fault_env.h"

#include "common/err.h"
#include "common/rand.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct undo {
	uint64_t off, len;
	uint64_t old_size;
	uint8_t *old;     /* bytes that were at [off, off+len) before */
	uint64_t old_len; /* how many of them existed */
	struct undo *prev;
};

struct track {
	char *path;
	struct undo *last;
	struct track *next;
};

struct fault_env {
	struct env env; /* first: the env handed out */
	struct env *base;
	pthread_mutex_t mu;
	struct track *tracks;
	_Atomic bool frozen;
	/* power-cut points: mutating operations left before the power goes
	 * (-1: none armed), and those seen since fault_env_new */
	_Atomic int64_t ops_left;
	_Atomic uint64_t ops_seen;
	int64_t wall_us;
	char *fail_substr;
	int fail_errno;
	uint64_t nowait_reads; /* every other one finds its page "cached" */
	_Atomic uint64_t sync_delay_us;
};

struct fault_file {
	struct env_file file;
	struct env_file *base;
	struct fault_env *fe;
	struct track *t;
};

static struct fault_env *fenv(struct env *e)
{
	return (struct fault_env *)e;
}
static struct fault_file *ffile(struct env_file *f)
{
	return (struct fault_file *)f;
}

static struct track *track_get(struct fault_env *fe, const char *path)
{
	for (struct track *t = fe->tracks; t; t = t->next)
		if (strcmp(t->path, path) == 0)
			return t;
	struct track *t = calloc(1, sizeof(*t));
	t->path = strdup(path);
	t->next = fe->tracks;
	fe->tracks = t;
	return t;
}

static void undo_free_all(struct track *t)
{
	while (t->last) {
		struct undo *u = t->last;
		t->last = u->prev;
		free(u->old);
		free(u);
	}
}

/* A mutating operation (a write, sync, truncation, rename, link, unlink,
 * directory change or sync) is about to run: counted, and the armed
 * power cut falls before it when its count is reached. */
static void step(struct fault_env *fe)
{
	atomic_fetch_add(&fe->ops_seen, 1);
	if (atomic_load(&fe->ops_left) < 0)
		return;
	if (atomic_fetch_sub(&fe->ops_left, 1) <= 0) {
		atomic_store(&fe->ops_left, -1);
		atomic_store(&fe->frozen, true);
	}
}

static int check_power(struct fault_env *fe, const char *path, bool write)
{
	if (write && !fe->frozen)
		step(fe);
	if (fe->frozen)
		return err_set_errno(EIO, "simulated power loss");
	if (write && fe->fail_substr && path && strstr(path, fe->fail_substr))
		return err_set_errno(fe->fail_errno, "injected fault on %s",
				     path);
	return 0;
}

static ssize_t f_pread(struct env_file *f, void *buf, size_t n, uint64_t off)
{
	struct fault_file *ff = ffile(f);
	if (ff->fe->frozen)
		return err_set_errno(EIO, "simulated power loss");
	return env_file_pread(ff->base, buf, n, off);
}

/* A page cache that holds about half of what is asked for: every other
 * non-blocking read succeeds (from the base file), the rest need the
 * disk. */
static ssize_t f_pread_nowait(struct env_file *f, void *buf, size_t n,
			      uint64_t off)
{
	struct fault_file *ff = ffile(f);
	pthread_mutex_lock(&ff->fe->mu);
	bool cached = !ff->fe->frozen && ff->fe->nowait_reads++ % 2 == 0;
	pthread_mutex_unlock(&ff->fe->mu);
	if (!cached)
		return err_set(ERR_AGAIN, "not in the simulated page cache");
	ssize_t got = env_file_pread(ff->base, buf, n, off);
	if (got >= 0 && (size_t)got != n)
		return err_set(ERR_AGAIN, "short non-blocking read");
	return got;
}

/* Records what a write at [off, off+n) will overwrite. */
static int remember(struct fault_file *ff, uint64_t off, size_t n)
{
	struct undo *u = calloc(1, sizeof(*u));
	int64_t size = env_file_size(ff->base);
	if (!u || size < 0) {
		free(u);
		return -1;
	}
	u->off = off;
	u->len = n;
	u->old_size = (uint64_t)size;
	if ((uint64_t)size > off) {
		uint64_t have = (uint64_t)size - off;
		u->old_len = have < n ? have : n;
		u->old = malloc(u->old_len);
		if (!u->old || env_file_pread(ff->base, u->old, u->old_len,
					      off) != (ssize_t)u->old_len) {
			free(u->old);
			free(u);
			return -1;
		}
	}
	u->prev = ff->t->last;
	ff->t->last = u;
	return 0;
}

static int do_write(struct env_file *f, const void *buf, size_t n, int64_t off)
{
	struct fault_file *ff = ffile(f);
	struct fault_env *fe = ff->fe;
	pthread_mutex_lock(&fe->mu);
	int rc = check_power(fe, ff->t->path, true);
	uint64_t at = 0;
	if (!rc) {
		int64_t size = env_file_size(ff->base);
		at = off < 0 ? (uint64_t)size : (uint64_t)off;
		rc = size < 0 ? -1 : remember(ff, at, n);
	}
	if (!rc)
		rc = off < 0 ? env_file_append(ff->base, buf, n)
			     : env_file_pwrite(ff->base, buf, n, at);
	pthread_mutex_unlock(&fe->mu);
	return rc;
}

static int f_append(struct env_file *f, const void *buf, size_t n)
{
	return do_write(f, buf, n, -1);
}

static int f_pwrite(struct env_file *f, const void *buf, size_t n, uint64_t off)
{
	return do_write(f, buf, n, (int64_t)off);
}

static int f_sync(struct env_file *f)
{
	struct fault_file *ff = ffile(f);
	struct fault_env *fe = ff->fe;
	uint64_t delay = atomic_load(&fe->sync_delay_us);
	if (delay) {
		struct timespec ts = {(time_t)(delay / 1000000),
				      (long)(delay % 1000000) * 1000};
		while (nanosleep(&ts, &ts) != 0)
			;
	}
	pthread_mutex_lock(&fe->mu);
	int rc = check_power(fe, ff->t->path, true);
	if (!rc)
		rc = env_file_sync(ff->base);
	if (!rc)
		undo_free_all(ff->t);
	pthread_mutex_unlock(&fe->mu);
	return rc;
}

static int f_truncate(struct env_file *f, uint64_t size)
{
	struct fault_file *ff = ffile(f);
	if (check_power(ff->fe, ff->t->path, true))
		return -1;
	return env_file_truncate(ff->base, size);
}

static int f_allocate(struct env_file *f, uint64_t off, uint64_t len)
{
	struct fault_file *ff = ffile(f);
	if (check_power(ff->fe, ff->t->path, true))
		return -1;
	return env_file_allocate(ff->base, off, len);
}

static int64_t f_size(struct env_file *f)
{
	return env_file_size(ffile(f)->base);
}

static int f_close(struct env_file *f)
{
	struct fault_file *ff = ffile(f);
	int rc = env_file_close(ff->base);
	free(ff);
	return rc;
}

static const struct env_file_ops fault_file_ops = {
	.pread = f_pread,
	.pread_nowait = f_pread_nowait,
	.append = f_append,
	.pwrite = f_pwrite,
	.sync = f_sync,
	.truncate = f_truncate,
	.allocate = f_allocate,
	.size = f_size,
	.close = f_close,
};

static int e_file_open(struct env *e, const char *path, int flags,
		       struct env_file **out)
{
	struct fault_env *fe = fenv(e);
	if (fe->frozen)
		return err_set_errno(EIO, "simulated power loss");
	struct fault_file *ff = calloc(1, sizeof(*ff));
	if (!ff)
		return err_set(ERR_NOMEM, "fault file");
	if (env_file_open(fe->base, path, flags, &ff->base)) {
		free(ff);
		return -1;
	}
	ff->file.ops = &fault_file_ops;
	ff->fe = fe;
	pthread_mutex_lock(&fe->mu);
	ff->t = track_get(fe, path);
	if (flags & ENV_FILE_TRUNC)
		undo_free_all(ff->t);
	pthread_mutex_unlock(&fe->mu);
	*out = &ff->file;
	return 0;
}

static uint64_t e_mono(struct env *e)
{
	return env_mono_us(fenv(e)->base);
}
static int64_t e_wall(struct env *e)
{
	struct fault_env *fe = fenv(e);
	return fe->wall_us ? fe->wall_us : env_wall_us(fe->base);
}
static uint64_t e_random(struct env *e)
{
	return env_random(fenv(e)->base);
}

static int e_rename(struct env *e, const char *a, const char *b)
{
	struct fault_env *fe = fenv(e);
	if (check_power(fe, b, true))
		return -1;
	pthread_mutex_lock(&fe->mu);
	/* Unsynced writes follow the file to its new name. */
	struct track *ta = track_get(fe, a), *tb = track_get(fe, b);
	undo_free_all(tb);
	tb->last = ta->last;
	ta->last = NULL;
	pthread_mutex_unlock(&fe->mu);
	return env_rename(fe->base, a, b);
}

static int e_unlink(struct env *e, const char *p)
{
	struct fault_env *fe = fenv(e);
	if (!fe->frozen)
		step(fe);
	if (check_power(fe, p, false))
		return -1;
	pthread_mutex_lock(&fe->mu);
	undo_free_all(track_get(fe, p));
	pthread_mutex_unlock(&fe->mu);
	return env_unlink(fe->base, p);
}

static int e_link(struct env *e, const char *a, const char *b)
{
	struct fault_env *fe = fenv(e);
	if (check_power(fe, b, true))
		return -1;
	return env_link(fe->base, a, b);
}

static int e_mkdir(struct env *e, const char *p)
{
	if (!fenv(e)->frozen)
		step(fenv(e));
	if (check_power(fenv(e), p, false))
		return -1;
	return env_mkdir(fenv(e)->base, p);
}
static int e_rmdir(struct env *e, const char *p)
{
	if (!fenv(e)->frozen)
		step(fenv(e));
	if (check_power(fenv(e), p, false))
		return -1;
	return env_rmdir(fenv(e)->base, p);
}
static int e_sync_dir(struct env *e, const char *p)
{
	if (check_power(fenv(e), p, true))
		return -1;
	return env_sync_dir(fenv(e)->base, p);
}
static int e_list_dir(struct env *e, const char *p, env_dir_fn fn, void *arg)
{
	if (check_power(fenv(e), p, false))
		return -1;
	return env_list_dir(fenv(e)->base, p, fn, arg);
}
static int e_exists(struct env *e, const char *p)
{
	if (check_power(fenv(e), p, false))
		return -1;
	return env_exists(fenv(e)->base, p);
}

static struct env_timer *e_timer_new(struct env *e, env_timer_fn fn, void *a)
{
	return env_timer_new(fenv(e)->base, fn, a);
}
static void e_timer_arm(struct env *e, struct env_timer *t, uint64_t d)
{
	env_timer_arm(fenv(e)->base, t, d);
}
static void e_timer_cancel(struct env *e, struct env_timer *t)
{
	env_timer_cancel(fenv(e)->base, t);
}
static void e_timer_free(struct env *e, struct env_timer *t)
{
	env_timer_free(fenv(e)->base, t);
}
static int e_send(struct env *e, const struct inet_addr *to, uint32_t verb,
		  const void *msg, size_t len)
{
	return env_send(fenv(e)->base, to, verb, msg, len);
}

static const struct env_ops fault_ops = {
	.mono_us = e_mono,
	.wall_us = e_wall,
	.random = e_random,
	.timer_new = e_timer_new,
	.timer_arm = e_timer_arm,
	.timer_cancel = e_timer_cancel,
	.timer_free = e_timer_free,
	.send = e_send,
	.file_open = e_file_open,
	.rename = e_rename,
	.unlink = e_unlink,
	.link = e_link,
	.mkdir = e_mkdir,
	.rmdir = e_rmdir,
	.sync_dir = e_sync_dir,
	.list_dir = e_list_dir,
	.exists = e_exists,
};

struct fault_env *fault_env_new(struct env *base)
{
	struct fault_env *fe = calloc(1, sizeof(*fe));
	if (!fe)
		return NULL;
	fe->env.ops = &fault_ops;
	fe->base = base;
	atomic_store(&fe->ops_left, -1);
	pthread_mutex_init(&fe->mu, NULL);
	return fe;
}

struct env *fault_env_env(struct fault_env *fe)
{
	return &fe->env;
}

void fault_env_set_wall_us(struct fault_env *fe, int64_t us)
{
	fe->wall_us = us;
}

void fault_env_freeze(struct fault_env *fe)
{
	pthread_mutex_lock(&fe->mu);
	fe->frozen = true;
	pthread_mutex_unlock(&fe->mu);
}

static void undo_track(struct fault_env *fe, struct track *t, struct rng *r)
{
	if (!t->last)
		return;
	struct env_file *f;
	if (env_file_open(fe->base, t->path, ENV_FILE_READ | ENV_FILE_WRITE,
			  &f)) {
		undo_free_all(t); /* the file is gone: nothing to undo */
		return;
	}
	bool newest = true;
	while (t->last) {
		struct undo *u = t->last;
		/* The newest write keeps a random prefix: a torn write. */
		uint64_t keep = newest ? rng_below(r, u->len + 1) : 0;
		newest = false;
		if (keep < u->old_len)
			env_file_pwrite(f, u->old + keep, u->old_len - keep,
					u->off + keep);
		/* Bytes past the old end of file go, but for the kept
		 * prefix. */
		uint64_t end = u->off + keep;
		uint64_t size = u->old_size > end ? u->old_size : end;
		int64_t cur = env_file_size(f);
		if (cur >= 0 && (uint64_t)cur > size)
			env_file_truncate(f, size);
		t->last = u->prev;
		free(u->old);
		free(u);
	}
	env_file_sync(f);
	env_file_close(f);
}

void fault_env_crash(struct fault_env *fe, uint64_t seed)
{
	struct rng r;
	rng_seed(&r, seed);
	pthread_mutex_lock(&fe->mu);
	for (struct track *t = fe->tracks; t; t = t->next)
		undo_track(fe, t, &r);
	fe->frozen = false;
	pthread_mutex_unlock(&fe->mu);
}

void fault_env_freeze_after(struct fault_env *fe, int64_t n)
{
	atomic_store(&fe->ops_left, n);
}

uint64_t fault_env_ops(struct fault_env *fe)
{
	return atomic_load(&fe->ops_seen);
}

bool fault_env_frozen(struct fault_env *fe)
{
	return atomic_load(&fe->frozen);
}

void fault_env_thaw(struct fault_env *fe)
{
	pthread_mutex_lock(&fe->mu);
	fe->frozen = false;
	pthread_mutex_unlock(&fe->mu);
}

void fault_env_fail_writes(struct fault_env *fe, const char *substr, int errnum)
{
	pthread_mutex_lock(&fe->mu);
	free(fe->fail_substr);
	fe->fail_substr = substr ? strdup(substr) : NULL;
	fe->fail_errno = errnum;
	pthread_mutex_unlock(&fe->mu);
}

void fault_env_set_sync_delay_us(struct fault_env *fe, uint64_t us)
{
	atomic_store(&fe->sync_delay_us, us);
}

void fault_env_delete(struct fault_env *fe)
{
	if (!fe)
		return;
	while (fe->tracks) {
		struct track *t = fe->tracks;
		fe->tracks = t->next;
		undo_free_all(t);
		free(t->path);
		free(t);
	}
	free(fe->fail_substr);
	pthread_mutex_destroy(&fe->mu);
	free(fe);
}
