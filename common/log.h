/*
 * Logging: one line per event, to the node's log file and/or stderr.
 *
 *   2026-11-30 04:30:00,123 INFO  [gossip] node1: 127.0.0.2 is now UP
 *
 * The sink (file, stderr, level) is process-wide: it is output plumbing, not
 * node state. A thread may set a context tag (the simulator tags each node it
 * runs) and a clock (the simulator stamps lines with simulated time). Each
 * line goes out in one write(2), so lines from several threads never
 * interleave.
 *
 * A file that wants logs defines LOG_MODULE before including this header:
 *   #define LOG_MODULE "gossip"
 */
#ifndef CASSINI_COMMON_LOG_H
#define CASSINI_COMMON_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum log_level {
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN,
	LOG_LEVEL_INFO,
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_TRACE,
};

/* Opens (creates, appends to) the log file. Returns 0 or -1 with err set. */
int log_open_file(const char *path);
void log_close_file(void);
/* Opens `path` again in place of the current file (after logrotate moved
 * it away): lines written meanwhile go to one file or the other, never
 * lost, and threads logging at that moment keep a valid descriptor (the
 * new file takes the old one's number). Returns 0 or -1 with err set, the
 * old file kept. */
int log_reopen_file(const char *path);
void log_set_stderr(bool enabled);
void log_set_level(enum log_level level);
bool log_enabled(enum log_level level);

/* "error", "warn"/"warning", "info", "debug", "trace" (any case). */
int log_level_parse(const char *name, enum log_level *out);
const char *log_level_name(enum log_level level);

/* Per-thread tag printed after the module; NULL clears. The string must stay
 * live while set. */
void log_set_context(const char *tag);

/* Per-thread clock for timestamps: returns wall-clock microseconds since the
 * epoch. NULL restores the real clock. */
typedef int64_t (*log_clock_fn)(void *arg);
void log_set_clock(log_clock_fn fn, void *arg);

void log_write(enum log_level level, const char *module, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#ifndef LOG_MODULE
#define LOG_MODULE "-"
#endif

#define LOG_AT(lvl, ...)                                                       \
	do {                                                                   \
		if (log_enabled(lvl))                                          \
			log_write(lvl, LOG_MODULE, __VA_ARGS__);               \
	} while (0)
#define LOG_ERROR(...) LOG_AT(LOG_LEVEL_ERROR, __VA_ARGS__)
#define LOG_WARN(...)  LOG_AT(LOG_LEVEL_WARN, __VA_ARGS__)
#define LOG_INFO(...)  LOG_AT(LOG_LEVEL_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) LOG_AT(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define LOG_TRACE(...) LOG_AT(LOG_LEVEL_TRACE, __VA_ARGS__)

#endif
