#include "common/env_real.h"

#include "common/err.h"
#include "common/rand.h"
#include "common/zalloc.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

struct env_real {
	struct env base; /* must be first */
	struct event_base *loop;
	struct rng rng;
	env_send_fn send_fn;
	void *send_arg;
	int64_t wall_offset_us; /* clock skew of a test cluster; 0 normally */
};

struct env_timer {
	struct event *ev;
	env_timer_fn fn;
	void *arg;
};

struct real_file {
	struct env_file base; /* must be first */
	int fd;
	char *path;   /* for error messages */
	uint8_t *map; /* file_map's mapping, or NULL */
	size_t map_len;
};

static struct env_real *real(struct env *e)
{
	return (struct env_real *)e;
}

/* ---- clocks and random --------------------------------------------------- */

static uint64_t real_mono_us(struct env *e)
{
	(void)e;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int64_t real_wall_us(struct env *e)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 +
	       (e ? real(e)->wall_offset_us : 0);
}

static uint64_t real_random(struct env *e)
{
	return rng_next(&real(e)->rng);
}

/* ---- timers -------------------------------------------------------------- */

static void timer_trampoline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct env_timer *t = arg;
	t->fn(t->arg);
}

static struct env_timer *real_timer_new(struct env *e, env_timer_fn fn,
					void *arg)
{
	struct env_real *r = real(e);
	if (!r->loop) {
		err_set(ERR_INVALID, "this env has no event loop for timers");
		return NULL;
	}
	struct env_timer *t = zcalloc(1, sizeof(*t));
	if (!t) {
		err_set(ERR_NOMEM, "cannot allocate a timer");
		return NULL;
	}
	t->fn = fn;
	t->arg = arg;
	t->ev = evtimer_new(r->loop, timer_trampoline, t);
	if (!t->ev) {
		free(t);
		err_set(ERR_NOMEM, "cannot allocate a timer event");
		return NULL;
	}
	return t;
}

static void real_timer_arm(struct env *e, struct env_timer *t,
			   uint64_t delay_us)
{
	(void)e;
	struct timeval tv = {
		.tv_sec = (time_t)(delay_us / 1000000u),
		.tv_usec = (suseconds_t)(delay_us % 1000000u),
	};
	evtimer_add(t->ev, &tv);
}

static void real_timer_cancel(struct env *e, struct env_timer *t)
{
	(void)e;
	evtimer_del(t->ev);
}

static void real_timer_free(struct env *e, struct env_timer *t)
{
	(void)e;
	if (!t)
		return;
	event_free(t->ev);
	free(t);
}

/* ---- messages ------------------------------------------------------------ */

static int real_send(struct env *e, const struct inet_addr *to, uint32_t verb,
		     const void *msg, size_t len)
{
	struct env_real *r = real(e);
	if (!r->send_fn)
		return err_set(ERR_UNAVAILABLE, "no transport installed");
	return r->send_fn(r->send_arg, to, verb, msg, len);
}

void env_real_set_wall_offset(struct env *e, int64_t offset_us)
{
	real(e)->wall_offset_us = offset_us;
}

int64_t env_real_wall_offset(struct env *e)
{
	return real(e)->wall_offset_us;
}

void env_real_set_transport(struct env *e, env_send_fn fn, void *arg)
{
	real(e)->send_fn = fn;
	real(e)->send_arg = arg;
}

/* ---- files --------------------------------------------------------------- */

static struct real_file *rfile(struct env_file *f)
{
	return (struct real_file *)f;
}

static ssize_t file_pread(struct env_file *f, void *buf, size_t n, uint64_t off)
{
	struct real_file *rf = rfile(f);
	size_t done = 0;
	while (done < n) {
		ssize_t got = pread(rf->fd, (char *)buf + done, n - done,
				    (off_t)(off + done));
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return err_set_errno(errno, "read %s", rf->path);
		}
		if (got == 0)
			break;
		done += (size_t)got;
	}
	return (ssize_t)done;
}

static ssize_t file_pread_nowait(struct env_file *f, void *buf, size_t n,
				 uint64_t off)
{
	struct real_file *rf = rfile(f);
	struct iovec iov = {.iov_base = buf, .iov_len = n};
	/* RWF_NOWAIT: EAGAIN rather than wait for the disk; a short count
	 * means part of the range is not cached (or the file ends there,
	 * which the blocking path then reports). */
	ssize_t got = preadv2(rf->fd, &iov, 1, (off_t)off, RWF_NOWAIT);
	if (got == (ssize_t)n)
		return got;
	return err_set(ERR_AGAIN, "%s: not in the page cache", rf->path);
}

static int write_all(struct real_file *rf, const void *buf, size_t n,
		     int64_t off)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = off < 0 ? write(rf->fd, p, n)
				    : pwrite(rf->fd, p, n, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return err_set_errno(errno, "write %s", rf->path);
		}
		p += w;
		n -= (size_t)w;
		if (off >= 0)
			off += w;
	}
	return 0;
}

static int file_append(struct env_file *f, const void *buf, size_t n)
{
	return write_all(rfile(f), buf, n, -1);
}

static int file_pwrite(struct env_file *f, const void *buf, size_t n,
		       uint64_t off)
{
	return write_all(rfile(f), buf, n, (int64_t)off);
}

static int file_sync(struct env_file *f)
{
	struct real_file *rf = rfile(f);
	if (fdatasync(rf->fd) != 0)
		return err_set_errno(errno, "fdatasync %s", rf->path);
	return 0;
}

static int file_truncate(struct env_file *f, uint64_t size)
{
	struct real_file *rf = rfile(f);
	if (ftruncate(rf->fd, (off_t)size) != 0)
		return err_set_errno(errno, "truncate %s", rf->path);
	/* append() writes at the end: a shrunk file's end moved back. */
	off_t pos = lseek(rf->fd, 0, SEEK_CUR);
	if (pos > (off_t)size && lseek(rf->fd, (off_t)size, SEEK_SET) < 0)
		return err_set_errno(errno, "seek %s", rf->path);
	return 0;
}

static int file_allocate(struct env_file *f, uint64_t off, uint64_t len)
{
	struct real_file *rf = rfile(f);
	int rc = posix_fallocate(rf->fd, (off_t)off, (off_t)len);
	if (rc != 0)
		return err_set_errno(rc, "allocate %s", rf->path);
	return 0;
}

static int64_t file_size(struct env_file *f)
{
	struct real_file *rf = rfile(f);
	struct stat st;
	if (fstat(rf->fd, &st) != 0)
		return err_set_errno(errno, "stat %s", rf->path);
	return (int64_t)st.st_size;
}

static const uint8_t *file_map(struct env_file *f, uint64_t *len)
{
	struct real_file *rf = rfile(f);
	if (!rf->map) {
		struct stat st;
		if (fstat(rf->fd, &st) != 0 || st.st_size <= 0 ||
		    (uint64_t)st.st_size > SIZE_MAX)
			return NULL;
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED,
			       rf->fd, 0);
		if (p == MAP_FAILED)
			return NULL;
		rf->map = p;
		rf->map_len = (size_t)st.st_size;
	}
	*len = rf->map_len;
	return rf->map;
}

/* cachestat(2) (Linux 6.5): how many pages of a range of the file are in
 * the page cache, without mincore's mapping lock and scratch page (about
 * half its cost). Older kernels answer ENOSYS: mincore then. */
struct cachestat_range_ {
	uint64_t off, len;
};
struct cachestat_ {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted,
		nr_recently_evicted;
};
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif
static _Atomic int cachestat_missing; /* the kernel has none */

static bool file_resident(struct env_file *f, uint64_t off, size_t n)
{
	struct real_file *rf = rfile(f);
	static _Thread_local long page;
	if (!page)
		page = sysconf(_SC_PAGESIZE);
	if (!rf->map || off > rf->map_len || n > rf->map_len - off || !n)
		return false;
	if (!atomic_load_explicit(&cachestat_missing, memory_order_relaxed)) {
		uint64_t first = off / (uint64_t)page;
		uint64_t last = (off + n - 1) / (uint64_t)page;
		struct cachestat_range_ r = {first * (uint64_t)page,
					     (last - first + 1) *
						     (uint64_t)page};
		struct cachestat_ cs;
		if (syscall(SYS_cachestat, rf->fd, &r, &cs, 0) == 0)
			return cs.nr_cache == last - first + 1;
		if (errno == ENOSYS)
			atomic_store(&cachestat_missing, 1);
	}
	uint64_t start = off / (uint64_t)page * (uint64_t)page;
	size_t pages = (size_t)((off + n - start + (uint64_t)page - 1) /
				(uint64_t)page);
	unsigned char vec[64];
	if (pages > sizeof(vec) ||
	    mincore(rf->map + start, (size_t)(off + n - start), vec) != 0)
		return false;
	for (size_t i = 0; i < pages; i++)
		if (!(vec[i] & 1))
			return false;
	return true;
}

static int file_close(struct env_file *f)
{
	struct real_file *rf = rfile(f);
	int rc = 0;
	if (rf->map)
		munmap(rf->map, rf->map_len);
	if (close(rf->fd) != 0)
		rc = err_set_errno(errno, "close %s", rf->path);
	free(rf->path);
	free(rf);
	return rc;
}

static const struct env_file_ops real_file_ops = {
	.pread = file_pread,
	.pread_nowait = file_pread_nowait,
	.append = file_append,
	.pwrite = file_pwrite,
	.sync = file_sync,
	.truncate = file_truncate,
	.allocate = file_allocate,
	.size = file_size,
	.close = file_close,
	.map = file_map,
	.resident = file_resident,
};

static int real_file_open(struct env *e, const char *path, int flags,
			  struct env_file **out)
{
	(void)e;
	int oflags = O_CLOEXEC;
	if ((flags & ENV_FILE_READ) && (flags & ENV_FILE_WRITE))
		oflags |= O_RDWR;
	else if (flags & ENV_FILE_WRITE)
		oflags |= O_WRONLY;
	else
		oflags |= O_RDONLY;
	if (flags & ENV_FILE_CREATE)
		oflags |= O_CREAT;
	if (flags & ENV_FILE_EXCL)
		oflags |= O_EXCL;
	if (flags & ENV_FILE_TRUNC)
		oflags |= O_TRUNC;

	struct real_file *rf = calloc(1, sizeof(*rf));
	char *copy = strdup(path);
	if (!rf || !copy) {
		free(rf);
		free(copy);
		return err_set(ERR_NOMEM, "cannot open %s: out of memory",
			       path);
	}
	int fd = open(path, oflags, 0644);
	if (fd < 0) {
		int saved = errno;
		free(rf);
		free(copy);
		if (saved == ENOENT)
			return err_set(ERR_NOT_FOUND, "open %s: no such file",
				       path);
		if (saved == EEXIST)
			return err_set(ERR_EXISTS, "open %s: file exists",
				       path);
		return err_set_errno(saved, "open %s", path);
	}
	/* append() writes at the end: start there (pwrite ignores it). */
	if ((flags & ENV_FILE_WRITE) && lseek(fd, 0, SEEK_END) < 0) {
		int saved = errno;
		close(fd);
		free(rf);
		free(copy);
		return err_set_errno(saved, "seek %s", path);
	}
	rf->base.ops = &real_file_ops;
	rf->fd = fd;
	rf->path = copy;
	*out = &rf->base;
	return 0;
}

static int real_rename(struct env *e, const char *from, const char *to)
{
	(void)e;
	if (rename(from, to) != 0)
		return err_set_errno(errno, "rename %s to %s", from, to);
	return 0;
}

static int real_link(struct env *e, const char *from, const char *to)
{
	(void)e;
	if (link(from, to) != 0)
		return err_set_errno(errno, "link %s to %s", from, to);
	return 0;
}

static int real_unlink(struct env *e, const char *path)
{
	(void)e;
	if (unlink(path) != 0) {
		if (errno == ENOENT)
			return err_set(ERR_NOT_FOUND, "unlink %s: no such file",
				       path);
		return err_set_errno(errno, "unlink %s", path);
	}
	return 0;
}

static int real_mkdir(struct env *e, const char *path)
{
	(void)e;
	if (mkdir(path, 0755) != 0) {
		if (errno == EEXIST)
			return err_set(ERR_EXISTS, "mkdir %s: exists", path);
		return err_set_errno(errno, "mkdir %s", path);
	}
	return 0;
}

static int real_rmdir(struct env *e, const char *path)
{
	(void)e;
	if (rmdir(path) != 0)
		return err_set_errno(errno, "rmdir %s", path);
	return 0;
}

static int real_sync_dir(struct env *e, const char *path)
{
	(void)e;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return err_set_errno(errno, "open directory %s", path);
	int rc = 0;
	if (fsync(fd) != 0)
		rc = err_set_errno(errno, "fsync directory %s", path);
	close(fd);
	return rc;
}

static int real_list_dir(struct env *e, const char *path, env_dir_fn fn,
			 void *arg)
{
	(void)e;
	DIR *d = opendir(path);
	if (!d)
		return err_set_errno(errno, "open directory %s", path);
	struct dirent *de;
	int rc = 0;
	errno = 0;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fn(arg, de->d_name) != 0)
			break;
		errno = 0;
	}
	if (!de && errno != 0)
		rc = err_set_errno(errno, "read directory %s", path);
	closedir(d);
	return rc;
}

static int real_exists(struct env *e, const char *path)
{
	(void)e;
	struct stat st;
	if (stat(path, &st) == 0)
		return 1;
	if (errno == ENOENT || errno == ENOTDIR)
		return 0;
	return err_set_errno(errno, "stat %s", path);
}

static const struct env_ops real_ops = {
	.mono_us = real_mono_us,
	.wall_us = real_wall_us,
	.random = real_random,
	.timer_new = real_timer_new,
	.timer_arm = real_timer_arm,
	.timer_cancel = real_timer_cancel,
	.timer_free = real_timer_free,
	.send = real_send,
	.file_open = real_file_open,
	.rename = real_rename,
	.unlink = real_unlink,
	.link = real_link,
	.mkdir = real_mkdir,
	.rmdir = real_rmdir,
	.sync_dir = real_sync_dir,
	.list_dir = real_list_dir,
	.exists = real_exists,
};

struct env *env_real_new(struct event_base *base)
{
	struct env_real *r = calloc(1, sizeof(*r));
	if (!r) {
		err_set(ERR_NOMEM, "cannot allocate the env");
		return NULL;
	}
	uint64_t seed;
	if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		seed = (uint64_t)real_wall_us(NULL) ^ (uint64_t)getpid();
	rng_seed(&r->rng, seed);
	r->base.ops = &real_ops;
	r->loop = base;
	return &r->base;
}

void env_real_delete(struct env *e)
{
	free(e);
}
