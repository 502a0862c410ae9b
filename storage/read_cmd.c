/*
 * The internode form of a read command: what a coordinator sends a replica
 * inside the protobuf envelope for a data, digest or fragment read.
 *
 * Encoding, version 1 (uvarint = unsigned LEB128):
 *
 *   u8       magic 0xC5
 *   u8       version (1)
 *   uvarint  key length (<= 65535; 0 for scans), key bytes
 *   u8       flags: bit 0 reverse, bit 1 with_static,
 *                   bit 2 slices follow, bit 3 columns follow
 *   uvarint  limit (<= 2^32-1)
 *   [uvarint slice count (0: nothing is read, as for `IN ()`), each:
 *      u8       bit 0 start inclusive, bit 1 end inclusive
 *      uvarint  start value count (<= 32), each uvarint length + bytes
 *      uvarint  end value count (<= 32), each uvarint length + bytes]
 *   [uvarint column count, each uvarint column (<= 65535)]
 *
 * No checksum: the internode transport frames and checks its messages.
 * The decoder checks every length against what remains, caps every count
 * by the bytes left before allocating, refuses trailing bytes, and copies
 * everything it keeps into the caller's arena.
 */
#include "common/arena.h"
#include "common/err.h"
#include "storage/storage.h"

#include <string.h>

#define READ_CMD_MAGIC   0xC5
#define READ_CMD_VERSION 1
#define READ_CMD_MAX_CK  32

enum {
	RC_REVERSE = 1 << 0,
	RC_STATIC = 1 << 1,
	RC_SLICES = 1 << 2,
	RC_COLUMNS = 1 << 3,
};

static int put_bound(struct buf *out, const struct slice *vals, size_t n)
{
	int rc = buf_put_uvarint(out, n);
	for (size_t i = 0; !rc && i < n; i++)
		rc = buf_put_uvarint(out, vals[i].len) ||
		     buf_append(out, vals[i].ptr, vals[i].len);
	return rc;
}

int storage_read_cmd_encode(const struct storage_read_cmd *cmd, struct buf *out)
{
	if (cmd->key_len > 0xffff || (cmd->key_len && !cmd->key))
		return err_set(ERR_INVALID, "read key of %zu bytes",
			       cmd->key_len);
	for (size_t i = 0; cmd->slices && i < cmd->slice_count; i++)
		if (cmd->slices[i].start_count > READ_CMD_MAX_CK ||
		    cmd->slices[i].end_count > READ_CMD_MAX_CK)
			return err_set(ERR_INVALID, "slice bound of more "
						    "than 32 values");
	if (cmd->columns && cmd->column_count > 0xffff)
		return err_set(ERR_INVALID, "projection of %zu columns",
			       cmd->column_count);
	size_t start = out->len;
	uint8_t flags = (uint8_t)((cmd->reverse ? RC_REVERSE : 0) |
				  (cmd->with_static ? RC_STATIC : 0) |
				  (cmd->slices ? RC_SLICES : 0) |
				  (cmd->columns ? RC_COLUMNS : 0));
	int rc = buf_put_u8(out, READ_CMD_MAGIC) ||
		 buf_put_u8(out, READ_CMD_VERSION) ||
		 buf_put_uvarint(out, cmd->key_len) ||
		 buf_append(out, cmd->key, cmd->key_len) ||
		 buf_put_u8(out, flags) || buf_put_uvarint(out, cmd->limit);
	if (!rc && cmd->slices)
		rc = buf_put_uvarint(out, cmd->slice_count);
	for (size_t i = 0; !rc && cmd->slices && i < cmd->slice_count; i++) {
		const struct storage_slice *s = &cmd->slices[i];
		rc = buf_put_u8(out, (uint8_t)((s->start_incl ? 1 : 0) |
					       (s->end_incl ? 2 : 0))) ||
		     put_bound(out, s->start, s->start_count) ||
		     put_bound(out, s->end, s->end_count);
	}
	if (!rc && cmd->columns)
		rc = buf_put_uvarint(out, cmd->column_count);
	for (size_t i = 0; !rc && cmd->columns && i < cmd->column_count; i++)
		rc = buf_put_uvarint(out, cmd->columns[i]);
	if (rc) {
		out->len = start;
		return err_set(ERR_NOMEM, "read command encode");
	}
	return 0;
}

/* Copies `len` bytes into the arena ("" for none). */
static int take_copy(struct cursor *c, struct arena *a, uint64_t len,
		     struct slice *out)
{
	struct slice s;
	if (len > cursor_left(c) || cursor_take(c, (size_t)len, &s))
		return err_set(ERR_CORRUPT, "read command: truncated");
	if (len == 0) {
		*out = slice_make("", 0);
		return 0;
	}
	void *p = arena_memdup(a, s.ptr, s.len);
	if (!p)
		return err_set(ERR_NOMEM, "read command");
	*out = slice_make(p, s.len);
	return 0;
}

static int get_bound(struct cursor *c, struct arena *a,
		     const struct slice **vals, size_t *count)
{
	uint64_t n;
	if (cursor_uvarint(c, &n) || n > READ_CMD_MAX_CK || n > cursor_left(c))
		return err_set(ERR_CORRUPT, "read command: bad bound");
	*vals = NULL;
	*count = (size_t)n;
	if (n == 0)
		return 0;
	struct slice *v = arena_alloc(a, (size_t)n * sizeof(*v));
	if (!v)
		return err_set(ERR_NOMEM, "read command");
	for (uint64_t i = 0; i < n; i++) {
		uint64_t len;
		if (cursor_uvarint(c, &len))
			return err_set(ERR_CORRUPT, "read command: bad value");
		if (take_copy(c, a, len, &v[i]))
			return -1;
	}
	*vals = v;
	return 0;
}

static int decode_slices(struct cursor *c, struct arena *a,
			 struct storage_read_cmd *out)
{
	uint64_t n;
	/* a slice takes at least three bytes */
	if (cursor_uvarint(c, &n) || n > cursor_left(c) / 3)
		return err_set(ERR_CORRUPT, "read command: bad slice count");
	/* Zero slices stay distinct from "no slices" (the whole
	 * partition): the array is non-NULL either way. */
	struct storage_slice *s =
		arena_alloc(a, (size_t)(n ? n : 1) * sizeof(*s));
	if (!s)
		return err_set(ERR_NOMEM, "read command");
	memset(s, 0, (size_t)(n ? n : 1) * sizeof(*s));
	for (uint64_t i = 0; i < n; i++) {
		uint8_t incl;
		if (cursor_u8(c, &incl) || incl > 3)
			return err_set(ERR_CORRUPT, "read command: bad slice");
		s[i].start_incl = incl & 1;
		s[i].end_incl = (incl >> 1) & 1;
		if (get_bound(c, a, &s[i].start, &s[i].start_count) ||
		    get_bound(c, a, &s[i].end, &s[i].end_count))
			return -1;
	}
	out->slices = s;
	out->slice_count = (size_t)n;
	return 0;
}

static int decode_columns(struct cursor *c, struct arena *a,
			  struct storage_read_cmd *out)
{
	uint64_t n;
	if (cursor_uvarint(c, &n) || n > 0xffff || n > cursor_left(c))
		return err_set(ERR_CORRUPT, "read command: bad column count");
	uint16_t *cols = arena_alloc(a, n ? (size_t)n * sizeof(*cols) : 1);
	if (!cols)
		return err_set(ERR_NOMEM, "read command");
	for (uint64_t i = 0; i < n; i++) {
		uint64_t col;
		if (cursor_uvarint(c, &col) || col > 0xffff)
			return err_set(ERR_CORRUPT, "read command: bad column");
		cols[i] = (uint16_t)col;
	}
	out->columns = cols;
	out->column_count = (size_t)n;
	return 0;
}

int storage_read_cmd_decode(const uint8_t *p, size_t len, struct arena *a,
			    struct storage_read_cmd *out)
{
	memset(out, 0, sizeof(*out));
	struct cursor c = cursor_make(p, len);
	uint8_t magic, version, flags;
	uint64_t klen, limit;
	struct slice key;
	if (cursor_u8(&c, &magic) || magic != READ_CMD_MAGIC)
		return err_set(ERR_CORRUPT, "read command: bad magic");
	if (cursor_u8(&c, &version) || version != READ_CMD_VERSION)
		return err_set(ERR_CORRUPT, "read command: unknown version");
	if (cursor_uvarint(&c, &klen) || klen > 0xffff)
		return err_set(ERR_CORRUPT, "read command: bad key");
	if (take_copy(&c, a, klen, &key))
		return -1;
	if (cursor_u8(&c, &flags) ||
	    (flags & ~(RC_REVERSE | RC_STATIC | RC_SLICES | RC_COLUMNS)) ||
	    cursor_uvarint(&c, &limit) || limit > UINT32_MAX)
		return err_set(ERR_CORRUPT, "read command: bad header");
	struct storage_read_cmd cmd = {
		.key = klen ? key.ptr : NULL,
		.key_len = (size_t)klen,
		.reverse = flags & RC_REVERSE,
		.with_static = flags & RC_STATIC,
		.limit = (uint32_t)limit,
	};
	if ((flags & RC_SLICES) && decode_slices(&c, a, &cmd))
		return -1;
	if ((flags & RC_COLUMNS) && decode_columns(&c, a, &cmd))
		return -1;
	if (cursor_left(&c) != 0)
		return err_set(ERR_CORRUPT, "read command: trailing bytes");
	*out = cmd;
	return 0;
}
