/*
 * The env seam: everything a state machine needs from the outside world.
 *
 * Gossip, the failure detector, the coordinator, hints and repair never call
 * time(), rand(), sockets or open() themselves. They are handed a
 * `struct env` and reach the world only through it:
 *
 *   clocks    env_mono_us() (never goes back), env_wall_us() (may jump)
 *   timers    one-shot, re-armable; callbacks run on the env's loop thread
 *   random    env_random() from a seeded generator
 *   messages  env_send() to a peer address; arrivals go to the receiver set
 *             with env_set_receiver(), on the loop thread
 *   files     open/pread/append/pwrite/sync/truncate/close, rename, unlink,
 *             mkdir, fsync of a directory, directory listing
 *
 * The daemon uses the real env (env_real.c: libevent timers, POSIX files,
 * a transport installed by node/). Tests use the simulated one
 * (tests/sim/sim_env.c): a clock that jumps to the next deadline, a fake
 * network and disk, and a PRNG seeded by the test.
 *
 * Threads: clocks, random and timers belong to the loop thread that owns the
 * env. File operations are safe from any thread (disk work runs on workers).
 *
 * Implementations embed `struct env` as their first member and fill `ops`.
 */
#ifndef CASSINI_COMMON_ENV_H
#define CASSINI_COMMON_ENV_H

#include "common/inet.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct env;
struct env_timer;
struct env_file;

typedef void (*env_timer_fn)(void *arg);

/* A message arrived from `from` (the sender's advertised address). The bytes
 * are borrowed for the duration of the call. */
typedef void (*env_recv_fn)(void *arg, const struct inet_addr *from,
			    uint32_t verb, const uint8_t *msg, size_t len);

/* Called for each entry of a directory; return non-zero to stop early. */
typedef int (*env_dir_fn)(void *arg, const char *name);

enum env_file_flags {
	ENV_FILE_READ = 1 << 0,
	ENV_FILE_WRITE = 1 << 1,
	ENV_FILE_CREATE = 1 << 2,
	ENV_FILE_EXCL = 1 << 3, /* with CREATE: fail if it exists */
	ENV_FILE_TRUNC = 1 << 4,
};

struct env_ops {
	uint64_t (*mono_us)(struct env *e);
	int64_t (*wall_us)(struct env *e);
	uint64_t (*random)(struct env *e);

	struct env_timer *(*timer_new)(struct env *e, env_timer_fn fn,
				       void *arg);
	/* (Re)arms to fire once after delay_us; an armed timer is moved. */
	void (*timer_arm)(struct env *e, struct env_timer *t,
			  uint64_t delay_us);
	void (*timer_cancel)(struct env *e, struct env_timer *t);
	/* Cancels and frees; NULL is ignored. */
	void (*timer_free)(struct env *e, struct env_timer *t);

	int (*send)(struct env *e, const struct inet_addr *to, uint32_t verb,
		    const void *msg, size_t len);

	int (*file_open)(struct env *e, const char *path, int flags,
			 struct env_file **out);
	int (*rename)(struct env *e, const char *from, const char *to);
	int (*unlink)(struct env *e, const char *path);
	/* A hard link: `to` names the file `from` names (snapshots). */
	int (*link)(struct env *e, const char *from, const char *to);
	int (*mkdir)(struct env *e, const char *path);
	int (*rmdir)(struct env *e, const char *path);
	int (*sync_dir)(struct env *e, const char *path);
	int (*list_dir)(struct env *e, const char *path, env_dir_fn fn,
			void *arg);
	/* 1 exists, 0 does not, -1 error. */
	int (*exists)(struct env *e, const char *path);
};

struct env {
	const struct env_ops *ops;
	env_recv_fn recv_fn;
	void *recv_arg;
};

struct env_file_ops {
	/* Reads up to n bytes at off; returns bytes read (short only at end of
	 * file) or -1. */
	ssize_t (*pread)(struct env_file *f, void *buf, size_t n, uint64_t off);
	/* pread's contract, but only from memory the OS already holds (the
	 * page cache): all n bytes, or -1 with ERR_AGAIN where reading would
	 * wait for the disk. Never blocks, so an event loop may call it.
	 * Optional: NULL means always ERR_AGAIN. */
	ssize_t (*pread_nowait)(struct env_file *f, void *buf, size_t n,
				uint64_t off);
	/* Writes all n bytes at the end of the file (the end as truncate
	 * left it), or fails. */
	int (*append)(struct env_file *f, const void *buf, size_t n);
	/* Writes all n bytes at off, or fails. */
	int (*pwrite)(struct env_file *f, const void *buf, size_t n,
		      uint64_t off);
	/* Makes written data durable (fdatasync). */
	int (*sync)(struct env_file *f);
	int (*truncate)(struct env_file *f, uint64_t size);
	/* Reserves space so later writes below off+len cannot hit ENOSPC. */
	int (*allocate)(struct env_file *f, uint64_t off, uint64_t len);
	int64_t (*size)(struct env_file *f);
	/* Closes and frees. */
	int (*close)(struct env_file *f);
	/* Optional (NULL: not supported). A read-only mapping of the whole
	 * file as it is now (for files nobody writes any more), valid until
	 * close; NULL with *len 0 when it cannot be made. Reading a page of
	 * it may wait for the disk: see resident. */
	const uint8_t *(*map)(struct env_file *f, uint64_t *len);
	/* Whether bytes [off, off+n) of the mapping are in memory now (the
	 * OS page cache), so reading them does not wait for the disk. Pages
	 * past the file's end (a file cut short under its mapping) are not:
	 * checked first, a mapped read cannot fault on them (SIGBUS) but
	 * in the window between the check and the read. */
	bool (*resident)(struct env_file *f, uint64_t off, size_t n);
};

struct env_file {
	const struct env_file_ops *ops;
};

/* Inline dispatch, so call sites read like plain functions. */
static inline uint64_t env_mono_us(struct env *e)
{
	return e->ops->mono_us(e);
}
static inline int64_t env_wall_us(struct env *e)
{
	return e->ops->wall_us(e);
}
static inline uint64_t env_random(struct env *e)
{
	return e->ops->random(e);
}

static inline struct env_timer *env_timer_new(struct env *e, env_timer_fn fn,
					      void *arg)
{
	return e->ops->timer_new(e, fn, arg);
}
static inline void env_timer_arm(struct env *e, struct env_timer *t,
				 uint64_t delay_us)
{
	e->ops->timer_arm(e, t, delay_us);
}
static inline void env_timer_cancel(struct env *e, struct env_timer *t)
{
	e->ops->timer_cancel(e, t);
}
static inline void env_timer_free(struct env *e, struct env_timer *t)
{
	e->ops->timer_free(e, t);
}

static inline int env_send(struct env *e, const struct inet_addr *to,
			   uint32_t verb, const void *msg, size_t len)
{
	return e->ops->send(e, to, verb, msg, len);
}
static inline void env_set_receiver(struct env *e, env_recv_fn fn, void *arg)
{
	e->recv_fn = fn;
	e->recv_arg = arg;
}
/* For env implementations: hand an arrived message to the receiver. */
static inline void env_deliver(struct env *e, const struct inet_addr *from,
			       uint32_t verb, const uint8_t *msg, size_t len)
{
	if (e->recv_fn)
		e->recv_fn(e->recv_arg, from, verb, msg, len);
}

static inline int env_file_open(struct env *e, const char *path, int flags,
				struct env_file **out)
{
	return e->ops->file_open(e, path, flags, out);
}
static inline ssize_t env_file_pread(struct env_file *f, void *buf, size_t n,
				     uint64_t off)
{
	return f->ops->pread(f, buf, n, off);
}
ssize_t env_file_pread_nowait(struct env_file *f, void *buf, size_t n,
			      uint64_t off);
static inline int env_file_append(struct env_file *f, const void *buf, size_t n)
{
	return f->ops->append(f, buf, n);
}
static inline int env_file_pwrite(struct env_file *f, const void *buf, size_t n,
				  uint64_t off)
{
	return f->ops->pwrite(f, buf, n, off);
}
static inline int env_file_sync(struct env_file *f)
{
	return f->ops->sync(f);
}
static inline int env_file_truncate(struct env_file *f, uint64_t size)
{
	return f->ops->truncate(f, size);
}
static inline int env_file_allocate(struct env_file *f, uint64_t off,
				    uint64_t len)
{
	return f->ops->allocate(f, off, len);
}
/* NULL (*len 0) where the env cannot map files. */
static inline const uint8_t *env_file_map(struct env_file *f, uint64_t *len)
{
	*len = 0;
	return f->ops->map ? f->ops->map(f, len) : NULL;
}
static inline bool env_file_resident(struct env_file *f, uint64_t off, size_t n)
{
	return f->ops->resident && f->ops->resident(f, off, n);
}
static inline int64_t env_file_size(struct env_file *f)
{
	return f->ops->size(f);
}
static inline int env_file_close(struct env_file *f)
{
	return f->ops->close(f);
}

static inline int env_rename(struct env *e, const char *from, const char *to)
{
	return e->ops->rename(e, from, to);
}
static inline int env_unlink(struct env *e, const char *path)
{
	return e->ops->unlink(e, path);
}
static inline int env_link(struct env *e, const char *from, const char *to)
{
	return e->ops->link(e, from, to);
}
static inline int env_mkdir(struct env *e, const char *path)
{
	return e->ops->mkdir(e, path);
}
static inline int env_rmdir(struct env *e, const char *path)
{
	return e->ops->rmdir(e, path);
}
static inline int env_sync_dir(struct env *e, const char *path)
{
	return e->ops->sync_dir(e, path);
}
static inline int env_list_dir(struct env *e, const char *path, env_dir_fn fn,
			       void *arg)
{
	return e->ops->list_dir(e, path, fn, arg);
}
static inline int env_exists(struct env *e, const char *path)
{
	return e->ops->exists(e, path);
}

/*
 * Helpers built only on the ops above, so they work in every env.
 */

/* Creates the directory and its missing parents. */
int env_mkdir_p(struct env *e, const char *path);

/* Reads a whole file (at most max_len bytes, else ERR_NOMEM). On success
 * *out is malloc'ed and NUL-terminated past *len; the caller frees it. */
int env_read_file(struct env *e, const char *path, size_t max_len,
		  uint8_t **out, size_t *len);

/* Replaces `path` atomically and durably: writes path.tmp, fsyncs it,
 * renames it over path, fsyncs the directory. */
int env_write_file_atomic(struct env *e, const char *path, const void *data,
			  size_t len);

#endif
