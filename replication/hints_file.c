/*
 * Hint files: record encoding, a parser that never trusts the bytes, the
 * whole-file scan done at open, and the uuid and file-name text forms.
 *
 * The parser is a pure function over a caller's buffer, so the same code
 * scans files at open (synchronous reads) and feeds delivery (chunks read
 * off the loop). It never allocates and never reads outside [buf, buf_len).
 */
#include "replication/hints_internal.h"

#include "common/crc.h"
#include "common/env.h"
#include "common/err.h"
#include "common/uuid.h"
#include "replication/hints.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t masked_crc(const uint8_t *p, size_t n)
{
	return crc32c_mask(crc32c(0, p, n));
}

int hints_header_encode(struct buf *out)
{
	uint8_t h[HINTS_HEADER_SIZE];
	be32_store(h, HINTS_FILE_MAGIC);
	be32_store(h + 4, HINTS_FILE_VERSION);
	return buf_append(out, h, sizeof(h));
}

int hints_record_encode(struct buf *out, int64_t created_us,
			const uint8_t *mutation, size_t len)
{
	size_t body = 8 + len;
	uint8_t *p = buf_extend(out, HINTS_RECORD_OVERHEAD + len);
	if (!p)
		return -1;
	be32_store(p, (uint32_t)body);
	be32_store(p + 4, masked_crc(p, 4));
	be64_store(p + 8, (uint64_t)created_us);
	if (len)
		memcpy(p + 16, mutation, len);
	be32_store(p + 8 + body, masked_crc(p + 8, body));
	return 0;
}

/* A damaged region ends at `end`: a run of zeros up to the end of the file
 * is an unfinished tail (preallocated or never written); anything else is
 * damage. */
static void region_done(struct hints_cursor *c, uint64_t end, uint64_t file_end,
			hints_damage_fn damage, void *arg)
{
	bool torn = end == file_end && !c->resync_nonzero;
	if (c->resync && damage)
		damage(arg, torn ? HINTS_DAMAGE_TORN : HINTS_DAMAGE_REGION,
		       c->resync_from, end);
	c->resync = false;
	c->resync_nonzero = false;
}

/* A damaged length at c->off: start or continue sliding. */
static void slide(struct hints_cursor *c, const uint8_t *at)
{
	if (!c->resync) {
		c->resync = true;
		c->resync_from = c->off;
		c->resync_nonzero = false;
	}
	if (*at)
		c->resync_nonzero = true;
	c->off++;
}

static enum hints_parse_result parse_header(struct hints_cursor *c,
					    const uint8_t *p, size_t avail,
					    uint64_t file_end, size_t *need,
					    hints_damage_fn damage, void *arg)
{
	if (file_end < HINTS_HEADER_SIZE) {
		if (damage && file_end > 0)
			damage(arg, HINTS_DAMAGE_TORN, 0, file_end);
		c->off = file_end;
		return HINTS_PARSE_END;
	}
	if (avail < HINTS_HEADER_SIZE) {
		*need = HINTS_HEADER_SIZE;
		return HINTS_PARSE_NEED;
	}
	if ((be32_load(p) != HINTS_FILE_MAGIC ||
	     be32_load(p + 4) != HINTS_FILE_VERSION) &&
	    damage)
		damage(arg, HINTS_DAMAGE_HEADER, 0, HINTS_HEADER_SIZE);
	c->off = HINTS_HEADER_SIZE;
	c->good_end = HINTS_HEADER_SIZE;
	return HINTS_PARSE_RECORD; /* not a record: the caller loops */
}

enum hints_parse_result hints_parse_next(struct hints_cursor *c,
					 const uint8_t *buf, uint64_t buf_off,
					 size_t buf_len, uint64_t file_end,
					 struct hints_record *rec, size_t *need,
					 hints_damage_fn damage, void *arg)
{
	uint64_t buf_end = buf_off + buf_len;
	for (;;) {
		if (c->off >= file_end) {
			region_done(c, file_end, file_end, damage, arg);
			c->off = file_end;
			return HINTS_PARSE_END;
		}
		if (!buf || c->off < buf_off || c->off > buf_end) {
			if (c->off == 0 && file_end < HINTS_HEADER_SIZE)
				return parse_header(c, NULL, 0, file_end, need,
						    damage, arg);
			*need = file_end - c->off < 8
					? (size_t)(file_end - c->off)
					: 8;
			return HINTS_PARSE_NEED;
		}
		const uint8_t *p = buf + (c->off - buf_off);
		uint64_t in_file = file_end - c->off;
		size_t avail =
			(size_t)((buf_end < file_end ? buf_end : file_end) -
				 c->off);
		if (c->off == 0) {
			enum hints_parse_result r = parse_header(
				c, p, avail, file_end, need, damage, arg);
			if (r != HINTS_PARSE_RECORD)
				return r;
			continue;
		}
		if (in_file < 8) {
			/* Too short for a length: torn unless already in a
			 * damaged region, which then runs to the end. */
			if (!c->resync && damage)
				damage(arg, HINTS_DAMAGE_TORN, c->off,
				       file_end);
			if (c->resync && avail < in_file) {
				*need = (size_t)in_file;
				return HINTS_PARSE_NEED;
			}
			for (size_t i = 0; c->resync && i < avail; i++)
				if (p[i])
					c->resync_nonzero = true;
			region_done(c, file_end, file_end, damage, arg);
			c->off = file_end;
			return HINTS_PARSE_END;
		}
		if (avail < 8) {
			*need = 8;
			return HINTS_PARSE_NEED;
		}
		uint32_t len = be32_load(p);
		if (be32_load(p + 4) != masked_crc(p, 4) || len < 8 ||
		    len > HINTS_MAX_MUTATION + 8) {
			slide(c, p);
			continue;
		}
		uint64_t total = (uint64_t)len + 12;
		if (total > in_file) {
			if (c->resync) {
				slide(c, p);
				continue;
			}
			if (damage)
				damage(arg, HINTS_DAMAGE_TORN, c->off,
				       file_end);
			c->off = file_end;
			return HINTS_PARSE_END;
		}
		if (total > avail) {
			*need = (size_t)total;
			return HINTS_PARSE_NEED;
		}
		if (be32_load(p + 8 + len) != masked_crc(p + 8, len)) {
			if (c->resync) {
				slide(c, p);
				continue;
			}
			if (damage)
				damage(arg, HINTS_DAMAGE_RECORD, c->off,
				       c->off + total);
			c->off += total;
			continue;
		}
		region_done(c, c->off, file_end, damage, arg);
		rec->off = c->off;
		rec->end = c->off + total;
		rec->created_us = (int64_t)be64_load(p + 8);
		rec->mutation = p + 16;
		rec->len = len - 8;
		c->off = rec->end;
		c->good_end = rec->end;
		return HINTS_PARSE_RECORD;
	}
}

/* ---- file names ---------------------------------------------------------- */

/* "<uuid>-<seq>.hints" */
bool hints_file_name_parse(const char *name, uint8_t id[16], uint64_t *seq)
{
	size_t n = strlen(name);
	if (n < 36 + 1 + 1 + 6 || strcmp(name + n - 6, ".hints") != 0 ||
	    name[36] != '-' || uuid_parse_n(name, id) != 0)
		return false;
	uint64_t v = 0;
	for (size_t i = 37; i < n - 6; i++) {
		if (name[i] < '0' || name[i] > '9' || v > UINT64_MAX / 10 - 1)
			return false;
		v = v * 10 + (uint64_t)(name[i] - '0');
	}
	*seq = v;
	return true;
}

/* ---- scanning a whole file ----------------------------------------------- */

#define SCAN_CHUNK (1u << 20)

int hints_file_scan(struct env_file *fp, uint64_t size, hints_damage_fn damage,
		    void *arg, struct hints_scan *out)
{
	struct hints_cursor c = {0};
	uint8_t *buf = NULL;
	uint64_t boff = 0;
	size_t blen = 0, bcap = 0;
	memset(out, 0, sizeof(*out));
	for (;;) {
		struct hints_record rec;
		size_t need = 0;
		enum hints_parse_result r = hints_parse_next(
			&c, buf, boff, blen, size, &rec, &need, damage, arg);
		if (r == HINTS_PARSE_END)
			break;
		if (r == HINTS_PARSE_RECORD) {
			if (out->records == 0 ||
			    rec.created_us < out->oldest_us)
				out->oldest_us = rec.created_us;
			if (out->records == 0 ||
			    rec.created_us > out->newest_us)
				out->newest_us = rec.created_us;
			out->records++;
			continue;
		}
		size_t want = need > SCAN_CHUNK ? need : SCAN_CHUNK;
		if (want > bcap) {
			uint8_t *n = realloc(buf, want);
			if (!n) {
				free(buf);
				return err_set(ERR_NOMEM,
					       "hints: out of memory");
			}
			buf = n;
			bcap = want;
		}
		ssize_t got = env_file_pread(fp, buf, want, c.off);
		if (got < 0) {
			free(buf);
			return -1;
		}
		if ((size_t)got < need)
			break; /* shorter than its size said: stop here */
		boff = c.off;
		blen = (size_t)got;
	}
	free(buf);
	out->good_end = c.good_end;
	return 0;
}
