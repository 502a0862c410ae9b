#include "common/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct err_slot {
	enum err_code code;
	char msg[ERR_MSG_MAX];
};

static _Thread_local struct err_slot slot;

__attribute__((format(printf, 3, 0))) static void
slot_vformat(char *dst, size_t cap, const char *fmt, va_list ap)
{
	int n = vsnprintf(dst, cap, fmt, ap);
	if (n < 0)
		snprintf(dst, cap, "(unformattable error)");
}

/* Formatting goes through a local buffer: callers may pass err_msg() itself
 * as an argument ("%s", err_msg()) to change the code and keep the text. */
int err_set(enum err_code code, const char *fmt, ...)
{
	char tmp[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	slot_vformat(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	slot.code = code;
	memcpy(slot.msg, tmp, sizeof(tmp));
	return -1;
}

int err_set_errno(int errnum, const char *fmt, ...)
{
	char tmp[ERR_MSG_MAX];
	va_list ap;
	size_t len;
	va_start(ap, fmt);
	slot_vformat(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	switch (errnum) {
	case ENOSPC:
	case EDQUOT:
		slot.code = ERR_NOSPACE;
		break;
	case ENOMEM:
		slot.code = ERR_NOMEM;
		break;
	default:
		slot.code = ERR_IO;
	}
	memcpy(slot.msg, tmp, sizeof(tmp));
	len = strlen(slot.msg);
	snprintf(slot.msg + len, sizeof(slot.msg) - len, ": %s",
		 strerror(errnum));
	return -1;
}

int err_prefix(const char *fmt, ...)
{
	char prefix[ERR_MSG_MAX];
	char old[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	slot_vformat(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, slot.msg, sizeof(old));
	/* Truncation is fine: the slot keeps the first ERR_MSG_MAX bytes. */
	size_t n = strnlen(prefix, sizeof(prefix) - 1);
	if (n > sizeof(slot.msg) - 3)
		n = sizeof(slot.msg) - 3;
	memcpy(slot.msg, prefix, n);
	memcpy(slot.msg + n, ": ", 2);
	n += 2;
	size_t rest = strnlen(old, sizeof(old) - 1);
	if (rest > sizeof(slot.msg) - 1 - n)
		rest = sizeof(slot.msg) - 1 - n;
	memcpy(slot.msg + n, old, rest);
	slot.msg[n + rest] = '\0';
	return -1;
}

enum err_code err_code(void)
{
	return slot.code;
}

const char *err_msg(void)
{
	return slot.code == ERR_NONE && slot.msg[0] == '\0' ? "no error"
							    : slot.msg;
}

void err_clear(void)
{
	slot.code = ERR_NONE;
	slot.msg[0] = '\0';
}

const char *err_code_name(enum err_code code)
{
	static const char *const names[ERR_CODE_COUNT] = {
		[ERR_NONE] = "none",
		[ERR_INVALID] = "invalid",
		[ERR_NOMEM] = "out of memory",
		[ERR_IO] = "i/o error",
		[ERR_NOSPACE] = "no space",
		[ERR_CORRUPT] = "corrupt",
		[ERR_PROTOCOL] = "protocol error",
		[ERR_CONFIG] = "configuration error",
		[ERR_NOT_FOUND] = "not found",
		[ERR_EXISTS] = "already exists",
		[ERR_TIMEOUT] = "timeout",
		[ERR_UNAVAILABLE] = "unavailable",
		[ERR_OVERLOADED] = "overloaded",
		[ERR_UNSUPPORTED] = "unsupported",
		[ERR_CLOSED] = "closed",
		[ERR_AGAIN] = "would block",
		[ERR_TOMBSTONES] = "READ_TOO_MANY_TOMBSTONES",
		[ERR_INDEX_NOT_AVAILABLE] = "INDEX_NOT_AVAILABLE",
	};
	if ((unsigned)code >= ERR_CODE_COUNT)
		return "unknown";
	return names[code];
}
