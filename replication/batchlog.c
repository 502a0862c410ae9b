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
 *
 * The index of kept batches lives on the loop; every file operation after
 * open (write and rename, read, unlink) runs through the offload hook on a
 * worker thread. A batch whose coordinator says "applied" while its store
 * is still under way is deleted as soon as the store finishes.
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

enum bl_state {
	BL_KEPT,     /* on disk */
	BL_STORING,  /* its file is being written */
	BL_REMOVING, /* removed while storing: unlink when the store ends */
};

struct bl_entry {
	uint8_t id[16];
	uint64_t stored_mono; /* 0 for entries found at open */
	enum bl_state state;
};

struct batchlog {
	struct env *env;
	char *dir;
	batchlog_offload_fn offload;
	void *offload_arg;
	struct bl_entry *v;
	size_t n, cap;
	uint64_t corrupt;
	uint64_t jobs; /* outstanding offloaded jobs */
};

/* One offloaded file operation. `run` touches only the job. */
struct bl_job {
	struct batchlog *b;
	uint8_t id[16];
	char path[PATH_MAX];
	struct buf data; /* the file image (store) or its bytes (read) */
	int status;
	enum err_code code;
	char why[256];
	batchlog_done_fn done;
	batchlog_read_fn read_done;
	void *arg;
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

static struct bl_entry *entry_find(struct batchlog *b, const uint8_t id[16])
{
	for (size_t i = 0; i < b->n; i++)
		if (memcmp(b->v[i].id, id, 16) == 0)
			return &b->v[i];
	return NULL;
}

static void entry_drop(struct batchlog *b, struct bl_entry *e)
{
	*e = b->v[--b->n];
}

static int entry_add(struct batchlog *b, const uint8_t id[16], uint64_t mono,
		     enum bl_state state)
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
	b->v[b->n].state = state;
	b->n++;
	return 0;
}

static int found(void *arg, const char *name)
{
	struct batchlog *b = arg;
	uint8_t id[16];
	if (hex_id(name, id) == 0)
		entry_add(b, id, 0, BL_KEPT);
	return 0;
}

struct batchlog *batchlog_open(struct env *env, const char *dir,
			       batchlog_offload_fn offload, void *offload_arg)
{
	struct batchlog *b = calloc(1, sizeof(*b));
	if (!b || !(b->dir = strdup(dir))) {
		free(b);
		err_set(ERR_NOMEM, "batchlog: out of memory");
		return NULL;
	}
	b->env = env;
	b->offload = offload;
	b->offload_arg = offload_arg;
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
	if (b->jobs) {
		/* A completion would find it freed: keep it (a leak at
		 * shutdown, never a use after free). */
		LOG_WARN("batchlog: closed with %llu file operations under way",
			 (unsigned long long)b->jobs);
		return;
	}
	free(b->v);
	free(b->dir);
	free(b);
}

static struct bl_job *job_new(struct batchlog *b, const uint8_t id[16])
{
	struct bl_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->b = b;
	memcpy(j->id, id, 16);
	path_of(b, id, j->path, sizeof(j->path));
	buf_init(&j->data);
	return j;
}

static void job_fail(struct bl_job *j, const char *what)
{
	j->status = -1;
	j->code = err_code();
	snprintf(j->why, sizeof(j->why), "%s: %s", what, err_msg());
}

static void job_free(struct bl_job *j)
{
	buf_free(&j->data);
	free(j);
}

static void offload(struct batchlog *b, void (*run)(void *),
		    void (*done)(void *), struct bl_job *j)
{
	b->jobs++;
	if (b->offload) {
		b->offload(b->offload_arg, run, done, j);
	} else {
		run(j);
		done(j);
	}
}

/* ---- remove -------------------------------------------------------------- */

static void unlink_run(void *arg)
{
	struct bl_job *j = arg;
	if (env_unlink(j->b->env, j->path) != 0)
		job_fail(j, "cannot delete a kept batch");
}

static void unlink_done(void *arg)
{
	struct bl_job *j = arg;
	j->b->jobs--;
	if (j->status)
		LOG_WARN("batchlog: %s", j->why);
	job_free(j);
}

static void unlink_file(struct batchlog *b, const uint8_t id[16])
{
	struct bl_job *j = job_new(b, id);
	if (!j) {
		LOG_WARN("batchlog: out of memory; a kept batch stays on disk "
			 "(replayed at the next start, harmlessly)");
		return;
	}
	offload(b, unlink_run, unlink_done, j);
}

void batchlog_remove(struct batchlog *b, const uint8_t id[16])
{
	struct bl_entry *e = entry_find(b, id);
	if (!e)
		return;
	if (e->state == BL_KEPT) {
		entry_drop(b, e);
		unlink_file(b, id);
	} else {
		e->state = BL_REMOVING;
	}
}

/* ---- store --------------------------------------------------------------- */

static void store_run(void *arg)
{
	struct bl_job *j = arg;
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", j->path);
	struct env_file *f = NULL;
	int rc = env_file_open(
		j->b->env, tmp,
		ENV_FILE_WRITE | ENV_FILE_CREATE | ENV_FILE_TRUNC, &f);
	if (!rc) {
		rc = env_file_append(f, j->data.data, j->data.len);
		if (env_file_close(f) != 0)
			rc = -1;
		if (!rc)
			rc = env_rename(j->b->env, tmp, j->path);
	}
	if (rc)
		job_fail(j, "batchlog: cannot store a batch");
}

static void store_done(void *arg)
{
	struct bl_job *j = arg;
	struct batchlog *b = j->b;
	b->jobs--;
	struct bl_entry *e = entry_find(b, j->id);
	if (j->status) {
		LOG_WARN("%s", j->why);
		if (e)
			entry_drop(b, e);
	} else if (e && e->state == BL_REMOVING) {
		entry_drop(b, e); /* applied meanwhile */
		unlink_file(b, j->id);
	} else if (e) {
		e->state = BL_KEPT;
		e->stored_mono = env_mono_us(b->env) | 1;
	}
	j->done(j->arg, j->status, j->status ? j->why : NULL);
	job_free(j);
}

void batchlog_store(struct batchlog *b, const uint8_t id[16],
		    int64_t created_us, const struct slice *muts, size_t n,
		    batchlog_done_fn done, void *arg)
{
	if (entry_find(b, id)) { /* a retry: the same batch */
		done(arg, 0, NULL);
		return;
	}
	struct bl_job *j = job_new(b, id);
	struct buf body;
	buf_init(&body);
	int rc = !j || buf_put_be64(&body, (uint64_t)created_us) ||
		 buf_put_be32(&body, (uint32_t)n);
	for (size_t i = 0; !rc && i < n; i++)
		rc = buf_put_be32(&body, (uint32_t)muts[i].len) ||
		     buf_append(&body, muts[i].ptr, muts[i].len);
	if (!rc)
		rc = buf_append(&j->data, BL_MAGIC, 4) ||
		     buf_put_be32(&j->data, (uint32_t)body.len) ||
		     buf_append(&j->data, body.data, body.len) ||
		     buf_put_be32(&j->data, crc32c(0, body.data, body.len)) ||
		     entry_add(b, id, 0, BL_STORING);
	buf_free(&body);
	if (rc) {
		if (j)
			job_free(j);
		done(arg, -1, "batchlog: out of memory");
		return;
	}
	j->done = done;
	j->arg = arg;
	offload(b, store_run, store_done, j);
}

/* ---- index --------------------------------------------------------------- */

size_t batchlog_due(struct batchlog *b, uint64_t stored_before,
		    uint8_t (*ids)[16], size_t cap)
{
	size_t k = 0;
	for (size_t i = 0; i < b->n && k < cap; i++)
		if (b->v[i].state == BL_KEPT &&
		    b->v[i].stored_mono < stored_before)
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

/* ---- read ---------------------------------------------------------------- */

static void read_run(void *arg)
{
	struct bl_job *j = arg;
	struct env_file *f;
	if (env_file_open(j->b->env, j->path, ENV_FILE_READ, &f) != 0) {
		job_fail(j, "batchlog: cannot read a kept batch");
		return;
	}
	int64_t size = env_file_size(f);
	uint8_t *p = size > 12 && size < (64 << 20)
			     ? buf_extend(&j->data, (size_t)size)
			     : NULL;
	ssize_t got = p ? env_file_pread(f, p, (size_t)size, 0) : -1;
	env_file_close(f);
	if (got != size || memcmp(p, BL_MAGIC, 4) != 0 ||
	    be32_load(p + 4) != (uint64_t)size - 12 ||
	    crc32c(0, p + 8, (size_t)size - 12) != be32_load(p + size - 4)) {
		err_set(ERR_CORRUPT, "%s is damaged", j->path);
		job_fail(j, "batchlog");
	}
}

static void read_done(void *arg)
{
	struct bl_job *j = arg;
	struct batchlog *b = j->b;
	b->jobs--;
	struct slice *v = NULL;
	uint32_t count = 0;
	uint64_t created = 0;
	if (!j->status) {
		struct cursor c =
			cursor_make(j->data.data + 8, j->data.len - 12);
		if (cursor_be64(&c, &created) || cursor_be32(&c, &count) ||
		    count > cursor_left(&c) / 4) {
			j->status = -1;
			j->code = ERR_CORRUPT;
		} else if (!(v = calloc(count ? count : 1, sizeof(*v)))) {
			j->status = -1;
			j->code = ERR_NOMEM;
		}
		for (uint32_t i = 0; v && i < count; i++) {
			uint32_t len;
			if (cursor_be32(&c, &len) ||
			    cursor_take(&c, len, &v[i])) {
				j->status = -1;
				j->code = ERR_CORRUPT;
				break;
			}
		}
	}
	bool corrupt = j->status && j->code == ERR_CORRUPT;
	if (corrupt) {
		b->corrupt++;
		LOG_WARN("batchlog: %s is damaged; dropping it", j->path);
	} else if (j->status) {
		LOG_WARN("%s", j->why[0] ? j->why : "batchlog: out of memory");
	}
	j->read_done(j->arg, j->status, corrupt, j->status ? NULL : v,
		     j->status ? 0 : count, (int64_t)created);
	free(v);
	job_free(j);
}

void batchlog_read(struct batchlog *b, const uint8_t id[16],
		   batchlog_read_fn done, void *arg)
{
	struct bl_job *j = job_new(b, id);
	if (!j) {
		done(arg, -1, false, NULL, 0, 0);
		return;
	}
	j->read_done = done;
	j->arg = arg;
	offload(b, read_run, read_done, j);
}
