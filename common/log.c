#include "common/log.h"

#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 4096

/* The sink. The fd is swapped only at startup and shutdown; a reopen
 * (SIGHUP) replaces the file behind the same descriptor. */
static atomic_int sink_level = LOG_LEVEL_INFO;
static atomic_int sink_fd = -1;
static atomic_bool sink_stderr = true;

static _Thread_local const char *thread_tag;
static _Thread_local log_clock_fn thread_clock;
static _Thread_local void *thread_clock_arg;

static const char *const level_names[] = {
	[LOG_LEVEL_ERROR] = "ERROR", [LOG_LEVEL_WARN] = "WARN",
	[LOG_LEVEL_INFO] = "INFO",   [LOG_LEVEL_DEBUG] = "DEBUG",
	[LOG_LEVEL_TRACE] = "TRACE",
};

int log_open_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return err_set_errno(errno, "cannot open log file %s", path);
	int old = atomic_exchange(&sink_fd, fd);
	if (old >= 0)
		close(old);
	return 0;
}

int log_reopen_file(const char *path)
{
	int old = atomic_load(&sink_fd);
	if (old < 0)
		return log_open_file(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return err_set_errno(errno, "cannot open log file %s", path);
	/* dup3 swaps the file behind `old` atomically: a write racing with
	 * it lands in one file or the other. */
	int rc = dup3(fd, old, O_CLOEXEC);
	int saved = errno;
	close(fd);
	if (rc < 0)
		return err_set_errno(saved, "cannot reopen log file %s", path);
	return 0;
}

void log_close_file(void)
{
	int old = atomic_exchange(&sink_fd, -1);
	if (old >= 0)
		close(old);
}

void log_set_stderr(bool enabled)
{
	atomic_store(&sink_stderr, enabled);
}

void log_set_level(enum log_level level)
{
	atomic_store(&sink_level, (int)level);
}

bool log_enabled(enum log_level level)
{
	return (int)level <=
	       atomic_load_explicit(&sink_level, memory_order_relaxed);
}

int log_level_parse(const char *name, enum log_level *out)
{
	static const struct {
		const char *name;
		enum log_level level;
	} table[] = {
		{"error", LOG_LEVEL_ERROR},  {"warn", LOG_LEVEL_WARN},
		{"warning", LOG_LEVEL_WARN}, {"info", LOG_LEVEL_INFO},
		{"debug", LOG_LEVEL_DEBUG},  {"trace", LOG_LEVEL_TRACE},
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (strcasecmp(name, table[i].name) == 0) {
			*out = table[i].level;
			return 0;
		}
	}
	return err_set(ERR_INVALID,
		       "unknown log level '%s' (expected error, warn, info, "
		       "debug or trace)",
		       name);
}

const char *log_level_name(enum log_level level)
{
	if ((unsigned)level > LOG_LEVEL_TRACE)
		return "?";
	return level_names[level];
}

void log_set_context(const char *tag)
{
	thread_tag = tag;
}

void log_set_clock(log_clock_fn fn, void *arg)
{
	thread_clock = fn;
	thread_clock_arg = arg;
}

static int64_t now_wall_us(void)
{
	if (thread_clock)
		return thread_clock(thread_clock_arg);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return; /* nowhere left to report a logging failure */
		}
		p += w;
		n -= (size_t)w;
	}
}

void log_write(enum log_level level, const char *module, const char *fmt, ...)
{
	char line[LOG_LINE_MAX];
	int64_t us = now_wall_us();
	time_t secs = (time_t)(us / 1000000);
	struct tm tm;
	size_t n;
	va_list ap;

	if (!log_enabled(level))
		return;
	gmtime_r(&secs, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, ",%03d %-5s [%s] ",
			      (int)(us / 1000 % 1000), log_level_name(level),
			      module);
	if (thread_tag && n < sizeof(line))
		n += (size_t)snprintf(line + n, sizeof(line) - n,
				      "%s: ", thread_tag);
	if (n < sizeof(line)) {
		va_start(ap, fmt);
		int m = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		va_end(ap);
		if (m > 0)
			n += (size_t)m;
	}
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2; /* truncated: keep the newline */
	line[n++] = '\n';

	int fd = atomic_load(&sink_fd);
	if (fd >= 0)
		write_all(fd, line, n);
	if (atomic_load(&sink_stderr))
		write_all(STDERR_FILENO, line, n);
}
