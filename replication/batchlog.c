/*
 * The batchlog store: logged batches this node keeps for other
 * coordinators (repl_internal.h). One file per batch in the batchlog
 * directory, named by the batch id:
 *
 *   <uuid hex>.batch   "CBL1" | be32 body length | body | be32 crc32c(body)
 *   body               be64 created wall us | be32 count |
 *                      count * (be32 length | encoded mutation)
 *
 * Written as a temporary file renamed into place (no fsync: like the
 * commitlog under `periodic`, a crash may lose the last ones); removed
 * when the coordinator says the batch was applied, or after a replay.
 * A file that fails its checksum is logged, counted and deleted.
 */
#define LOG_MODULE "batchlog"
#include "replication/repl_internal.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/log.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BL_MAGIC "CBL1"

struct bl_entry {
	uint8_t id[16];
	uint64_t stored_mono; /* 0 for entries found at open */
};

struct batchlog {
	struct env *env;
	char *dir;
	struct bl_entry *v;
	size_t n, cap;
	uint64_t corrupt;
};

static void path_of(const struct batchlog *b, const uint8_t id[16], char *out,
		    size_t cap)
{
	char hex[33];
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	snprintf(out, cap, "%s/%s.batch", b->dir, hex);
}

static int hex_id(const char *name, uint8_t id[16])
{
	size_t len = strlen(name);
	if (len != 38 || strcmp(name + 32, ".batch") != 0)
		return -1;
	for (int i = 0; i < 16; i++) {
		unsigned v;
		if (sscanf(name + 2 * i, "%2x", &v) != 1)
			return -1;
		id[i] = (uint8_t)v;
	}
	return 0;
}

static int entry_add(struct batchlog *b, const uint8_t id[16], uint64_t mono)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 16;
		struct bl_entry *v = realloc(b->v, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "batchlog: out of memory");
		b->v = v;
		b->cap = cap;
	}
	memcpy(b->v[b->n].id, id, 16);
	b->v[b->n].stored_mono = mono;
	b->n++;
	return 0;
}

static int found(void *arg, const char *name)
{
	struct batchlog *b = arg;
	uint8_t id[16];
	if (hex_id(name, id) == 0)
		entry_add(b, id, 0);
	return 0;
}

struct batchlog *batchlog_open(struct env *env, const char *dir)
{
	struct batchlog *b = calloc(1, sizeof(*b));
	if (!b || !(b->dir = strdup(dir))) {
		free(b);
		err_set(ERR_NOMEM, "batchlog: out of memory");
		return NULL;
	}
	b->env = env;
	if (env_mkdir_p(env, dir) != 0 ||
	    env_list_dir(env, dir, found, b) != 0) {
		err_prefix("batchlog %s", dir);
		batchlog_close(b);
		return NULL;
	}
	if (b->n)
		LOG_INFO("batchlog: %zu batches to replay from %s", b->n, dir);
	return b;
}

void batchlog_close(struct batchlog *b)
{
	if (!b)
		return;
	free(b->v);
	free(b->dir);
	free(b);
}

int batchlog_store(struct batchlog *b, const uint8_t id[16], int64_t created_us,
		   const struct slice *muts, size_t n)
{
	struct buf body;
	buf_init(&body);
	int rc = buf_put_be64(&body, (uint64_t)created_us) ||
		 buf_put_be32(&body, (uint32_t)n);
	for (size_t i = 0; !rc && i < n; i++)
		rc = buf_put_be32(&body, (uint32_t)muts[i].len) ||
		     buf_append(&body, muts[i].ptr, muts[i].len);
	struct buf file;
	buf_init(&file);
	if (!rc)
		rc = buf_append(&file, BL_MAGIC, 4) ||
		     buf_put_be32(&file, (uint32_t)body.len) ||
		     buf_append(&file, body.data, body.len) ||
		     buf_put_be32(&file, crc32c(0, body.data, body.len));
	buf_free(&body);
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	path_of(b, id, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	struct env_file *f = NULL;
	if (!rc)
		rc = env_file_open(
			b->env, tmp,
			ENV_FILE_WRITE | ENV_FILE_CREATE | ENV_FILE_TRUNC, &f);
	if (!rc) {
		rc = env_file_append(f, file.data, file.len);
		if (env_file_close(f) != 0)
			rc = -1;
		if (!rc)
			rc = env_rename(b->env, tmp, path);
	}
	buf_free(&file);
	if (rc)
		return err_prefix("batchlog: cannot store a batch");
	return entry_add(b, id, env_mono_us(b->env) | 1);
}

void batchlog_remove(struct batchlog *b, const uint8_t id[16])
{
	for (size_t i = 0; i < b->n; i++)
		if (memcmp(b->v[i].id, id, 16) == 0) {
			char path[PATH_MAX];
			path_of(b, id, path, sizeof(path));
			env_unlink(b->env, path);
			b->v[i] = b->v[--b->n];
			return;
		}
}

size_t batchlog_due(struct batchlog *b, uint64_t stored_before,
		    uint8_t (*ids)[16], size_t cap)
{
	size_t k = 0;
	for (size_t i = 0; i < b->n && k < cap; i++)
		if (b->v[i].stored_mono < stored_before)
			memcpy(ids[k++], b->v[i].id, 16);
	return k;
}

size_t batchlog_count(const struct batchlog *b)
{
	return b->n;
}

uint64_t batchlog_corrupt(const struct batchlog *b)
{
	return b->corrupt;
}

int batchlog_read(struct batchlog *b, const uint8_t id[16], struct buf *out,
		  struct slice **muts, size_t *n, int64_t *created_us)
{
	char path[PATH_MAX];
	path_of(b, id, path, sizeof(path));
	struct env_file *f;
	if (env_file_open(b->env, path, ENV_FILE_READ, &f) != 0)
		return -1;
	int64_t size = env_file_size(f);
	uint8_t *p = size > 12 && size < (64 << 20)
			     ? buf_extend(out, (size_t)size)
			     : NULL;
	ssize_t got = p ? env_file_pread(f, p, (size_t)size, 0) : -1;
	env_file_close(f);
	*muts = NULL;
	*n = 0;
	if (got != size || memcmp(p, BL_MAGIC, 4) != 0 ||
	    be32_load(p + 4) != (uint64_t)size - 12 ||
	    crc32c(0, p + 8, (size_t)size - 12) != be32_load(p + size - 4)) {
		b->corrupt++;
		LOG_WARN("batchlog: %s is damaged; dropping it", path);
		return err_set(ERR_CORRUPT, "batchlog: %s is damaged", path);
	}
	struct cursor c = cursor_make(p + 8, (size_t)size - 12);
	uint64_t created;
	uint32_t count;
	if (cursor_be64(&c, &created) || cursor_be32(&c, &count) ||
	    count > cursor_left(&c) / 4)
		goto corrupt;
	struct slice *v = calloc(count ? count : 1, sizeof(*v));
	if (!v)
		return err_set(ERR_NOMEM, "batchlog: out of memory");
	for (uint32_t i = 0; i < count; i++) {
		uint32_t len;
		if (cursor_be32(&c, &len) || cursor_take(&c, len, &v[i])) {
			free(v);
			goto corrupt;
		}
	}
	*muts = v;
	*n = count;
	*created_us = (int64_t)created;
	return 0;
corrupt:
	b->corrupt++;
	LOG_WARN("batchlog: %s is damaged; dropping it", path);
	return err_set(ERR_CORRUPT, "batchlog: %s is damaged", path);
}
