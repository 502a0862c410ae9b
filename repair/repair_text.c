/*
 * The pieces of repair's text state files (repair_text.h).
 */
#include "repair/repair_text.h"

#include "common/crc.h"
#include "common/err.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int repair_text_put(struct buf *b, const char *what, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_reserve(b, (size_t)n + 1))
		return err_set(ERR_NOMEM, "%s", what);
	va_start(ap, fmt);
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void repair_text_escape(const char *in, char *out, size_t cap)
{
	size_t n = 0;
	for (; *in && n + 4 < cap; in++) {
		unsigned char ch = (unsigned char)*in;
		if (ch <= ' ' || ch == '%' || ch == 0x7f)
			n += (size_t)snprintf(out + n, cap - n, "%%%02x", ch);
		else
			out[n++] = (char)ch;
	}
	out[n] = '\0';
}

int repair_text_unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		unsigned v;
		if (*r != '%') {
			*w++ = *r;
		} else if (sscanf(r + 1, "%2x", &v) == 1 && r[1] && r[2]) {
			*w++ = (char)v;
			r += 2;
		} else {
			return -1;
		}
	}
	*w = '\0';
	return 0;
}

bool repair_text_name_match(const char *filter, const char *name)
{
	if (!filter)
		return true;
	size_t n = strlen(filter);
	return strcmp(filter, name) == 0 ||
	       (strncmp(filter, name, n) == 0 && name[n] == '.' &&
		!strchr(filter, '.'));
}

void repair_text_time(int64_t us, char *out, size_t cap)
{
	if (!us) {
		snprintf(out, cap, "-");
		return;
	}
	time_t t = (time_t)(us / 1000000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm);
}

int repair_text_seal(struct buf *out, size_t from, const char *what)
{
	uint32_t crc = crc32c(0, out->data + from, out->len - from);
	return repair_text_put(out, what, "crc32c %08" PRIx32 "\n", crc);
}

int repair_text_check(const uint8_t *data, size_t len, const char *header,
		      const char *what, size_t *body_len)
{
	/* the checksum line: the last one */
	const char *text = (const char *)data;
	size_t hlen = strlen(header);
	if (len < hlen + 1 || text[len - 1] != '\n')
		return err_set(ERR_CORRUPT, "%s: truncated", what);
	size_t last = len - 1;
	while (last > 0 && text[last - 1] != '\n')
		last--;
	unsigned crc;
	int n = 0;
	char tail[40];
	snprintf(tail, sizeof(tail), "%.*s", (int)(len - last), text + last);
	if (sscanf(tail, "crc32c %8x\n%n", &crc, &n) != 1 ||
	    (size_t)n != len - last)
		return err_set(ERR_CORRUPT, "%s: no checksum line (truncated?)",
			       what);
	if (crc32c(0, data, last) != crc)
		return err_set(ERR_CORRUPT, "%s: checksum mismatch", what);
	if (last < hlen || memcmp(text, header, hlen) != 0)
		return err_set(ERR_CORRUPT, "%s: not a version 1 file", what);
	*body_len = last;
	return 0;
}
