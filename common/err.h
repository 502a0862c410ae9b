/*
 * Per-thread error slot.
 *
 * Functions return 0 / -1 (constructors return NULL); the reason goes into a
 * slot owned by the calling thread, holding a code and a message. Callers read
 * it with err_code() / err_msg() right after the failing call, add context with
 * err_prefix() as the error climbs, or clear it. Across threads the status
 * travels in the completion struct, never in this slot.
 */
#ifndef CASSINI_COMMON_ERR_H
#define CASSINI_COMMON_ERR_H

#include <stddef.h>

enum err_code {
	ERR_NONE = 0,
	ERR_INVALID,  /* bad argument or input that fails validation */
	ERR_NOMEM,    /* allocation failed or a size cap was hit */
	ERR_IO,       /* an OS call failed; message carries strerror */
	ERR_NOSPACE,  /* ENOSPC / quota */
	ERR_CORRUPT,  /* checksum or structure mismatch in stored bytes */
	ERR_PROTOCOL, /* peer or client violated a wire format */
	ERR_CONFIG,   /* configuration rejected */
	ERR_NOT_FOUND,
	ERR_EXISTS,
	ERR_TIMEOUT,
	ERR_UNAVAILABLE,
	ERR_OVERLOADED,
	ERR_UNSUPPORTED, /* valid request for a feature we do not have */
	ERR_CLOSED,      /* object shut down */
	ERR_AGAIN, /* would block on disk: redo where blocking is allowed */
	/* a read met more tombstones than tombstone_failure_threshold
	 * (Cassandra's TombstoneOverwhelmingException; named
	 * READ_TOO_MANY_TOMBSTONES, its RequestFailureReason) */
	ERR_TOMBSTONES,
	/* a query needs a secondary index still being built on this node
	 * (IndexNotAvailableException; RequestFailureReason
	 * INDEX_NOT_AVAILABLE) */
	ERR_INDEX_NOT_AVAILABLE,
	ERR_CODE_COUNT
};

#define ERR_MSG_MAX 512

/* Sets the slot and returns -1, so callers can `return err_set(...)`. */
int err_set(enum err_code code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Like err_set, appending ": strerror(errnum)". Maps ENOSPC/EDQUOT to
 * ERR_NOSPACE, ENOMEM to ERR_NOMEM, everything else to ERR_IO. */
int err_set_errno(int errnum, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Prepends "<prefix>: " to the current message, keeping the code. Returns -1.
 */
int err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

enum err_code err_code(void);
const char *err_msg(void);
void err_clear(void);

/* Stable lower-case name of a code ("invalid", "corrupt", ...). */
const char *err_code_name(enum err_code code);

#endif
