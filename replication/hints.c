/*
 * The hint store (see hints.h for the contract, hints_deliver.c for the
 * dispatcher and hints_internal.h for the record format).
 *
 * State per target host: its files in sequence order (the last one may be
 * open for appending), the time it was first seen down, and a delivery
 * state machine:
 *
 *   idle --start--> delivering --all files acked--> idle
 *                      | a send fails, the host goes down, its hints
 *                      v are dropped
 *                   failed --outstanding sends all called back--> idle
 *                      (the next start resumes at the first unacked record)
 *
 * Delivery works on one file at a time: parse records out of the current
 * chunk, send each (keeping at most max_in_flight unacknowledged), read the
 * next chunk when the parser needs bytes, delete the file when its last
 * record is acknowledged. In-flight sends live in a ring of slots; the ring
 * is only reset once every outstanding send has called back, so a late
 * callback never lands in a reused slot.
 *
 * Memory stays live while sends or offloaded jobs are outstanding (refs):
 * hints_close marks the store closing and the last callback frees it.
 */
#include "replication/hints.h"

#include "common/buf.h"
#include "common/env.h"
#include "common/err.h"
#include "common/uuid.h"
#include "conf/conf.h"
#include "replication/hints_internal.h"

#define LOG_MODULE "hints"
#include "common/log.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_NAME "hints.state"
#define STATE_MAX  (4u << 20)

#include "replication/hints_store_internal.h"

/* ---- names --------------------------------------------------------------- */

void hints_file_path(const struct hints *h, const struct hint_host *x,
		     uint64_t seq, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s-%" PRIu64 ".hints", h->dir, x->idtext, seq);
}

/* ---- hosts --------------------------------------------------------------- */

static struct hint_host *host_find(struct hints *h, const uint8_t id[16])
{
	for (size_t i = 0; i < h->host_count; i++) {
		struct hint_host *x = h->hosts[i];
		if (!x->removed && memcmp(x->id, id, 16) == 0)
			return x;
	}
	return NULL;
}

static struct hint_host *host_get(struct hints *h, const uint8_t id[16])
{
	struct hint_host *x = host_find(h, id);
	if (x)
		return x;
	if (h->host_count == h->host_cap) {
		size_t cap = h->host_cap ? h->host_cap * 2 : 8;
		struct hint_host **n = realloc(h->hosts, cap * sizeof(*n));
		if (!n) {
			err_set(ERR_NOMEM, "hints: cannot grow the host table");
			return NULL;
		}
		h->hosts = n;
		h->host_cap = cap;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		err_set(ERR_NOMEM, "hints: cannot allocate a host");
		return NULL;
	}
	x->h = h;
	memcpy(x->id, id, 16);
	uuid_format(id, x->idtext);
	h->hosts[h->host_count++] = x;
	return x;
}

static void host_free(struct hint_host *x)
{
	struct hint_file *f = x->files;
	while (f) {
		struct hint_file *next = f->next;
		if (f->wf)
			env_file_close(f->wf);
		free(f);
		f = next;
	}
	free(x->chunk);
	free(x->ring);
	free(x);
}

/* Frees a removed host once nothing refers to it. */
void hints_host_maybe_free(struct hint_host *x)
{
	struct hints *h = x->h;
	if (!x->removed || x->outstanding || x->jobs || h->closing)
		return;
	for (size_t i = 0; i < h->host_count; i++) {
		if (h->hosts[i] == x) {
			h->hosts[i] = h->hosts[--h->host_count];
			break;
		}
	}
	host_free(x);
}

static void hints_free(struct hints *h)
{
	for (size_t i = 0; i < h->host_count; i++)
		host_free(h->hosts[i]);
	free(h->hosts);
	for (size_t i = 0; i < h->dc_count; i++)
		free(h->dcs[i]);
	free(h->dcs);
	buf_free(&h->scratch);
	free(h->dir);
	free(h);
}

/* Drops a reference; the last one after hints_close frees the store.
 * Returns true when it did (the caller must not touch h again). */
bool hints_release(struct hints *h)
{
	h->refs--;
	if (h->closing && h->refs == 0) {
		hints_free(h);
		return true;
	}
	return false;
}

/* ---- offloaded jobs ------------------------------------------------------ */

void hints_offload(struct hints *h, void (*run)(void *), void (*done)(void *),
		   void *job)
{
	h->refs++;
	if (h->o.offload) {
		h->o.offload(h->o.offload_arg, run, done, job);
	} else {
		run(job);
		done(job);
	}
}

/* Finishing a file for writing: fsync and close, off the loop. */
struct retire_job {
	struct hints *h;
	struct env_file *wf;
	int status;
	char msg[ERR_MSG_MAX];
};

static void retire_run(void *arg)
{
	struct retire_job *j = arg;
	j->status = env_file_sync(j->wf);
	if (j->status != 0)
		snprintf(j->msg, sizeof(j->msg), "%s", err_msg());
	if (env_file_close(j->wf) != 0 && j->status == 0) {
		j->status = -1;
		snprintf(j->msg, sizeof(j->msg), "%s", err_msg());
	}
}

static void retire_done(void *arg)
{
	struct retire_job *j = arg;
	struct hints *h = j->h;
	if (j->status != 0)
		LOG_WARN("cannot sync a finished hint file: %s", j->msg);
	free(j);
	hints_release(h);
}

void hints_file_retire(struct hints *h, struct hint_file *f)
{
	if (!f->wf)
		return;
	struct retire_job *j = calloc(1, sizeof(*j));
	if (!j) {
		/* Cannot defer: close without the sync (the data is written;
		 * only its durability is at stake). */
		env_file_close(f->wf);
		f->wf = NULL;
		return;
	}
	j->h = h;
	j->wf = f->wf;
	f->wf = NULL;
	hints_offload(h, retire_run, retire_done, j);
}

/* ---- the state file: when each host went down -----------------------------
 */

static char *state_path(const struct hints *h, char *out, size_t cap)
{
	snprintf(out, cap, "%s/" STATE_NAME, h->dir);
	return out;
}

static int state_render(struct hints *h, struct buf *out)
{
	static const char head[] = "# cassini hints state 1\n";
	if (buf_append(out, head, sizeof(head) - 1) != 0)
		return -1;
	for (size_t i = 0; i < h->host_count; i++) {
		struct hint_host *x = h->hosts[i];
		if (x->removed || x->down_since_us == 0)
			continue;
		char line[80];
		int n = snprintf(line, sizeof(line), "%s %" PRId64 "\n",
				 x->idtext, x->down_since_us);
		if (buf_append(out, line, (size_t)n) != 0)
			return -1;
	}
	return 0;
}

struct state_job {
	struct hints *h;
	struct env *env;
	char path[PATH_MAX];
	uint8_t *data;
	size_t len;
	int status;
	char msg[ERR_MSG_MAX];
};

static void state_run(void *arg)
{
	struct state_job *j = arg;
	j->status = env_write_file_atomic(j->env, j->path, j->data, j->len);
	if (j->status != 0)
		snprintf(j->msg, sizeof(j->msg), "%s", err_msg());
}

static void state_write(struct hints *h);

static int state_write_sync(struct hints *h)
{
	struct buf b = {0};
	char path[PATH_MAX];
	int rc = state_render(h, &b);
	if (rc == 0)
		rc = env_write_file_atomic(h->env,
					   state_path(h, path, sizeof(path)),
					   b.data, b.len);
	buf_free(&b);
	if (rc == 0)
		h->state_dirty = false;
	return rc;
}

static void state_done(void *arg)
{
	struct state_job *j = arg;
	struct hints *h = j->h;
	if (j->status != 0) {
		LOG_WARN("cannot write the hint state: %s", j->msg);
		h->state_dirty = true;
	}
	free(j->data);
	free(j);
	h->state_busy = false;
	if (h->closing) {
		if (h->state_dirty && state_write_sync(h) != 0)
			LOG_WARN("cannot write the hint state: %s", err_msg());
	} else if (h->state_dirty) {
		state_write(h);
	}
	hints_release(h);
}

/* Persists the down times, off the loop; one write at a time. */
static void state_write(struct hints *h)
{
	h->state_dirty = true;
	if (h->state_busy || h->closing)
		return;
	struct state_job *j = calloc(1, sizeof(*j));
	struct buf b = {0};
	if (!j || state_render(h, &b) != 0) {
		LOG_WARN("cannot write the hint state: out of memory");
		free(j);
		buf_free(&b);
		return;
	}
	j->h = h;
	j->env = h->env;
	state_path(h, j->path, sizeof(j->path));
	j->data = buf_steal(&b, &j->len);
	h->state_dirty = false;
	h->state_busy = true;
	hints_offload(h, state_run, state_done, j);
}

static int state_load(struct hints *h)
{
	char path[PATH_MAX];
	uint8_t *data;
	size_t len;
	state_path(h, path, sizeof(path));
	int ex = env_exists(h->env, path);
	if (ex <= 0)
		return ex;
	if (env_read_file(h->env, path, STATE_MAX, &data, &len) != 0)
		return -1;
	char *line = (char *)data;
	int lineno = 0;
	while (line && *line) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		lineno++;
		uint8_t id[16];
		char *end;
		if (line[0] == '#' || line[0] == '\0') {
			/* comment */
		} else if (strlen(line) < 38 || line[36] != ' ' ||
			   uuid_parse_n(line, id) != 0) {
			LOG_WARN("%s:%d: bad line ignored", path, lineno);
		} else {
			long long v = strtoll(line + 37, &end, 10);
			struct hint_host *x;
			if (*end != '\0' || v <= 0) {
				LOG_WARN("%s:%d: bad time ignored", path,
					 lineno);
			} else if (!(x = host_get(h, id))) {
				free(data);
				return -1;
			} else {
				x->down_since_us = v;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	free(data);
	return 0;
}

/* ---- scanning existing files at open ------------------------------------- */

struct scan_ctx {
	struct hints *h;
	const char *path;
	uint64_t torn_off;
	bool torn;
};

static void scan_damage(void *arg, enum hints_damage what, uint64_t off,
			uint64_t end)
{
	struct scan_ctx *s = arg;
	switch (what) {
	case HINTS_DAMAGE_HEADER:
		s->h->st.corrupt++;
		LOG_WARN("%s: bad file header at offset 0; reading on",
			 s->path);
		break;
	case HINTS_DAMAGE_RECORD:
		s->h->st.corrupt++;
		LOG_WARN("%s: corrupt hint at offset %" PRIu64 " (%" PRIu64
			 " bytes) skipped",
			 s->path, off, end - off);
		break;
	case HINTS_DAMAGE_REGION:
		s->h->st.corrupt++;
		LOG_WARN("%s: corrupt bytes at offset %" PRIu64 "..%" PRIu64
			 " skipped",
			 s->path, off, end);
		break;
	case HINTS_DAMAGE_TORN:
		s->torn = true;
		s->torn_off = off;
		break;
	}
}

/* Reads one file, counting its records; truncates a torn tail. Returns the
 * file (NULL when it held nothing and was deleted, or on error with err
 * set: *failed). */
static struct hint_file *scan_file(struct hints *h, const char *path,
				   uint64_t seq, bool *failed)
{
	struct env_file *fp;
	*failed = false;
	if (env_file_open(h->env, path, ENV_FILE_READ | ENV_FILE_WRITE, &fp) !=
	    0) {
		*failed = true;
		return NULL;
	}
	int64_t size = env_file_size(fp);
	struct hint_file *f = calloc(1, sizeof(*f));
	if (size < 0 || !f) {
		if (!f)
			err_set(ERR_NOMEM, "hints: out of memory");
		goto fail;
	}
	f->seq = seq;
	struct scan_ctx sc = {.h = h, .path = path};
	struct hints_scan scan;
	if (hints_file_scan(fp, (uint64_t)size, scan_damage, &sc, &scan) != 0)
		goto fail;
	f->records = scan.records;
	f->oldest_us = scan.oldest_us;
	f->newest_us = scan.newest_us;
	f->size = scan.good_end;
	f->damage_hwm = (uint64_t)size;
	if (f->records == 0) {
		LOG_INFO("%s: no hints in it; deleted", path);
		env_file_close(fp);
		env_unlink(h->env, path);
		free(f);
		return NULL;
	}
	if (f->size < (uint64_t)size) {
		LOG_INFO("%s: %" PRIu64 " bytes after the last sound hint "
			 "(offset %" PRIu64 ") cut off",
			 path, (uint64_t)size - f->size, f->size);
		if (env_file_truncate(fp, f->size) != 0)
			LOG_WARN("%s", err_msg());
	}
	env_file_close(fp);
	return f;
fail:
	*failed = true;
	free(f);
	env_file_close(fp);
	return NULL;
}

struct dir_entry {
	uint8_t id[16];
	uint64_t seq;
};

struct dir_list {
	struct hints *h;
	struct dir_entry *v;
	size_t n;
	size_t cap;
	bool nomem;
};

static int dir_collect(void *arg, const char *name)
{
	struct dir_list *d = arg;
	struct dir_entry e;
	if (!hints_file_name_parse(name, e.id, &e.seq)) {
		size_t n = strlen(name);
		if (n > 4 && strcmp(name + n - 4, ".tmp") == 0) {
			char path[PATH_MAX];
			snprintf(path, sizeof(path), "%s/%s", d->h->dir, name);
			env_unlink(d->h->env, path);
		}
		return 0;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		struct dir_entry *v = realloc(d->v, cap * sizeof(*v));
		if (!v) {
			d->nomem = true;
			return 1;
		}
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n++] = e;
	return 0;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct dir_entry *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void host_add_file(struct hint_host *x, struct hint_file *f)
{
	struct hint_file **p = &x->files;
	while (*p)
		p = &(*p)->next;
	*p = f;
	x->file_count++;
	x->bytes += f->size;
	x->records += f->records;
}

static int scan_dir(struct hints *h)
{
	struct dir_list d = {.h = h};
	if (env_list_dir(h->env, h->dir, dir_collect, &d) != 0) {
		free(d.v);
		return -1;
	}
	if (d.nomem) {
		free(d.v);
		return err_set(ERR_NOMEM, "hints: too many files");
	}
	if (d.n > 1)
		qsort(d.v, d.n, sizeof(*d.v), entry_cmp);
	for (size_t i = 0; i < d.n; i++) {
		struct hint_host *x = host_get(h, d.v[i].id);
		char path[PATH_MAX];
		bool failed;
		if (!x) {
			free(d.v);
			return -1;
		}
		hints_file_path(h, x, d.v[i].seq, path, sizeof(path));
		if (d.v[i].seq >= h->next_seq)
			h->next_seq = d.v[i].seq + 1;
		struct hint_file *f = scan_file(h, path, d.v[i].seq, &failed);
		if (failed) {
			/* One unreadable file must not stop the node. */
			LOG_ERROR("%s: skipped: %s", path, err_msg());
			continue;
		}
		if (f)
			host_add_file(x, f);
	}
	free(d.v);
	return 0;
}

/* ---- lifecycle ----------------------------------------------------------- */

void hints_options_default(struct hints_options *o)
{
	*o = (struct hints_options){
		.enabled = true,
		.max_window_ms = 3ull * 3600 * 1000,
		.max_size_per_host = 0,
		.throttle = 1024 * 1024,
		.max_file_size = 128ull << 20,
		.max_in_flight = 128,
		.check_interval_ms = 10000,
		.read_chunk = 128u << 10,
	};
}

void hints_options_from_conf(struct hints_options *o, const struct conf *c,
			     struct env *env)
{
	hints_options_default(o);
	o->env = env;
	o->dir = c->hints_directory;
	o->enabled = c->hinted_handoff_enabled;
	o->disabled_dcs = (const char *const *)
				  c->hinted_handoff_disabled_datacenters.items;
	o->disabled_dc_count = c->hinted_handoff_disabled_datacenters.count;
	o->max_window_ms = c->max_hint_window_ms;
	o->max_size_per_host = c->max_hints_size_per_host;
	o->throttle = c->hinted_handoff_throttle;
}

struct hints *hints_open(const struct hints_options *o)
{
	if (!o->env || !o->dir || !o->send || o->max_in_flight == 0 ||
	    o->read_chunk == 0 || o->check_interval_ms == 0) {
		err_set(ERR_INVALID,
			"hints: env, dir, send, max_in_flight, read_chunk "
			"and check_interval_ms are required");
		return NULL;
	}
	struct hints *h = calloc(1, sizeof(*h));
	if (!h) {
		err_set(ERR_NOMEM, "hints: out of memory");
		return NULL;
	}
	h->o = *o;
	h->env = o->env;
	h->enabled = o->enabled;
	h->max_window_ms = o->max_window_ms;
	h->throttle = o->throttle;
	h->next_seq = 1;
	h->dir = strdup(o->dir);
	if (!h->dir)
		goto nomem;
	h->o.dir = h->dir;
	for (size_t i = 0; i < o->disabled_dc_count; i++)
		if (hints_set_dc_enabled(h, o->disabled_dcs[i], false) != 0)
			goto fail;
	h->o.disabled_dcs = NULL;
	h->o.disabled_dc_count = 0;
	if (env_mkdir_p(h->env, h->dir) != 0 || state_load(h) != 0 ||
	    scan_dir(h) != 0) {
		err_prefix("hints %s", h->dir);
		goto fail;
	}
	h->throttle_timer = env_timer_new(h->env, hints_on_throttle, h);
	h->check_timer = env_timer_new(h->env, hints_on_check, h);
	if (!h->throttle_timer || !h->check_timer)
		goto nomem;
	h->tokens = hints_throttle_burst(h);
	h->tokens_at = env_mono_us(h->env);
	env_timer_arm(h->env, h->check_timer, o->check_interval_ms * 1000);
	uint64_t files = 0, records = 0;
	for (size_t i = 0; i < h->host_count; i++) {
		files += h->hosts[i]->file_count;
		records += h->hosts[i]->records;
	}
	LOG_INFO("%" PRIu64 " hints in %" PRIu64 " files in %s", records, files,
		 h->dir);
	return h;
nomem:
	err_set(ERR_NOMEM, "hints: out of memory");
fail:
	if (h->throttle_timer)
		env_timer_free(h->env, h->throttle_timer);
	if (h->check_timer)
		env_timer_free(h->env, h->check_timer);
	hints_free(h);
	return NULL;
}

void hints_close(struct hints *h)
{
	if (!h)
		return;
	h->closing = true;
	env_timer_free(h->env, h->throttle_timer);
	env_timer_free(h->env, h->check_timer);
	h->throttle_timer = h->check_timer = NULL;
	for (size_t i = 0; i < h->host_count; i++) {
		for (struct hint_file *f = h->hosts[i]->files; f; f = f->next) {
			if (!f->wf)
				continue;
			if (env_file_sync(f->wf) != 0)
				LOG_WARN("%s", err_msg());
			env_file_close(f->wf);
			f->wf = NULL;
		}
	}
	if (h->state_dirty && !h->state_busy && state_write_sync(h) != 0)
		LOG_WARN("cannot write the hint state: %s", err_msg());
	if (h->refs == 0)
		hints_free(h);
}

/* ---- storing ------------------------------------------------------------- */

static bool dc_disabled(const struct hints *h, const char *dc)
{
	if (!dc)
		return false;
	for (size_t i = 0; i < h->dc_count; i++)
		if (strcmp(h->dcs[i], dc) == 0)
			return true;
	return false;
}

static bool in_window(const struct hints *h, const struct hint_host *x,
		      int64_t now_us)
{
	if (!x || x->down_since_us == 0)
		return true;
	return now_us - x->down_since_us <= (int64_t)(h->max_window_ms * 1000);
}

bool hints_should_hint(struct hints *h, const uint8_t host_id[16],
		       const char *dc, int64_t now_us)
{
	return h->enabled && !dc_disabled(h, dc) &&
	       in_window(h, host_find(h, host_id), now_us);
}

/* The file to append `need` bytes to, creating one if needed. */
static struct hint_file *host_writer(struct hints *h, struct hint_host *x,
				     size_t need)
{
	struct hint_file *last = x->files;
	while (last && last->next)
		last = last->next;
	if (last && last->wf && last != x->cur &&
	    last->size + need <= h->o.max_file_size)
		return last;
	if (last)
		hints_file_retire(h, last);

	char path[PATH_MAX];
	struct hint_file *f = calloc(1, sizeof(*f));
	if (!f) {
		err_set(ERR_NOMEM, "hints: out of memory");
		return NULL;
	}
	f->seq = h->next_seq++;
	hints_file_path(h, x, f->seq, path, sizeof(path));
	if (env_file_open(h->env, path,
			  ENV_FILE_WRITE | ENV_FILE_CREATE | ENV_FILE_EXCL,
			  &f->wf) != 0) {
		free(f);
		return NULL;
	}
	buf_clear(&h->scratch);
	if (hints_header_encode(&h->scratch) != 0 ||
	    env_file_append(f->wf, h->scratch.data, h->scratch.len) != 0) {
		env_file_close(f->wf);
		env_unlink(h->env, path);
		free(f);
		return NULL;
	}
	f->size = HINTS_HEADER_SIZE;
	host_add_file(x, f);
	return f;
}

int hints_store(struct hints *h, const uint8_t host_id[16],
		const uint8_t *mutation, size_t len, int64_t created_us)
{
	if (!h->enabled) {
		h->st.dropped_disabled++;
		return err_set(ERR_UNAVAILABLE, "hinted handoff is disabled");
	}
	if (len == 0 || len > HINTS_MAX_MUTATION)
		return err_set(ERR_INVALID, "hint of %zu bytes", len);
	struct hint_host *x = host_find(h, host_id);
	if (!in_window(h, x, env_wall_us(h->env))) {
		h->st.dropped_window++;
		return err_set(ERR_UNAVAILABLE,
			       "%s has been down longer than max_hint_window",
			       x->idtext);
	}
	if (!x && !(x = host_get(h, host_id)))
		return -1;
	size_t rec = HINTS_RECORD_OVERHEAD + len;
	uint64_t cap = h->o.max_size_per_host;
	if (cap && x->bytes + rec > cap) {
		h->st.dropped_size++;
		return err_set(ERR_OVERLOADED,
			       "hints for %s exceed max_hints_size_per_host",
			       x->idtext);
	}
	struct hint_file *f = host_writer(h, x, rec);
	if (!f)
		return -1;
	buf_clear(&h->scratch);
	if (hints_record_encode(&h->scratch, created_us, mutation, len) != 0)
		return -1;
	if (env_file_append(f->wf, h->scratch.data, h->scratch.len) != 0) {
		/* Take back a partial write, or stop appending to a file
		 * whose end we no longer know (readers stop at f->size). */
		char msg[ERR_MSG_MAX];
		enum err_code code = err_code();
		snprintf(msg, sizeof(msg), "%s", err_msg());
		if (env_file_truncate(f->wf, f->size) != 0)
			hints_file_retire(h, f);
		return err_set(code, "%s", msg);
	}
	if (f->records == 0 || created_us < f->oldest_us)
		f->oldest_us = created_us;
	if (f->records == 0 || created_us > f->newest_us)
		f->newest_us = created_us;
	f->size += rec;
	f->records++;
	f->damage_hwm = f->size;
	x->bytes += rec;
	x->records++;
	h->st.stored++;
	return 0;
}

/* ---- membership ---------------------------------------------------------- */

void hints_host_down(struct hints *h, const uint8_t host_id[16],
		     int64_t since_us)
{
	struct hint_host *x = host_get(h, host_id);
	if (!x) {
		LOG_WARN("cannot track a down host: %s", err_msg());
		return;
	}
	if (x->delivering)
		hints_host_fail(x, false);
	if (x->down_since_us == 0) {
		x->down_since_us = since_us > 0 ? since_us : 1;
		state_write(h);
	}
}

void hints_host_up(struct hints *h, const uint8_t host_id[16])
{
	struct hint_host *x = host_find(h, host_id);
	if (!x)
		return;
	if (x->down_since_us != 0) {
		x->down_since_us = 0;
		state_write(h);
	}
	hints_host_start(x);
}

/* Deletes every file of x; sends in flight finish as stale. */
static void host_drop(struct hint_host *x)
{
	struct hints *h = x->h;
	struct hint_file *f = x->files;
	while (f) {
		struct hint_file *next = f->next;
		char path[PATH_MAX];
		hints_file_path(h, x, f->seq, path, sizeof(path));
		if (f->wf)
			env_file_close(f->wf);
		if (env_unlink(h->env, path) != 0 &&
		    err_code() != ERR_NOT_FOUND)
			LOG_WARN("%s", err_msg());
		free(f);
		f = next;
	}
	x->files = NULL;
	x->file_count = 0;
	x->bytes = 0;
	x->records = 0;
	hints_host_clear_cur(x);
	if (x->delivering)
		hints_host_fail(x, false);
	hints_host_after(x);
}

void hints_host_removed(struct hints *h, const uint8_t host_id[16])
{
	struct hint_host *x = host_find(h, host_id);
	if (!x)
		return;
	x->removed = true; /* before the drop, so it is freed at the end */
	bool had_state = x->down_since_us != 0;
	x->down_since_us = 0;
	if (had_state)
		state_write(h);
	host_drop(x);
}

/* ---- operator controls --------------------------------------------------- */

void hints_set_enabled(struct hints *h, bool enabled)
{
	h->enabled = enabled;
}

void hints_set_paused(struct hints *h, bool paused)
{
	h->paused = paused;
	if (!paused) {
		hints_pump_all(h);
		hints_start_eligible(h);
	}
}

void hints_set_max_window(struct hints *h, uint64_t max_window_ms)
{
	h->max_window_ms = max_window_ms;
}

void hints_set_throttle(struct hints *h, uint64_t bytes_per_sec)
{
	h->throttle = bytes_per_sec;
	h->tokens = hints_throttle_burst(h);
	h->tokens_at = env_mono_us(h->env);
	if (bytes_per_sec == 0)
		hints_pump_all(h);
}

int hints_set_dc_enabled(struct hints *h, const char *dc, bool enabled)
{
	for (size_t i = 0; i < h->dc_count; i++) {
		if (strcmp(h->dcs[i], dc) != 0)
			continue;
		if (enabled) {
			free(h->dcs[i]);
			h->dcs[i] = h->dcs[--h->dc_count];
		}
		return 0;
	}
	if (enabled)
		return 0;
	char **n = realloc(h->dcs, (h->dc_count + 1) * sizeof(*n));
	if (!n)
		return err_set(ERR_NOMEM, "hints: out of memory");
	h->dcs = n;
	if (!(h->dcs[h->dc_count] = strdup(dc)))
		return err_set(ERR_NOMEM, "hints: out of memory");
	h->dc_count++;
	return 0;
}

void hints_truncate_all(struct hints *h)
{
	for (size_t i = h->host_count; i-- > 0;)
		host_drop(h->hosts[i]);
}

/* ---- stats --------------------------------------------------------------- */

void hints_get_stats(struct hints *h, struct hints_stats *out)
{
	*out = h->st;
	out->hosts = 0;
	out->in_flight = 0;
	for (size_t i = 0; i < h->host_count; i++) {
		if (h->hosts[i]->files)
			out->hosts++;
		out->in_flight += h->hosts[i]->outstanding;
	}
}

size_t hints_list_pending(struct hints *h, struct hints_host_stats *out,
			  size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < h->host_count; i++) {
		struct hint_host *x = h->hosts[i];
		if (!x->files)
			continue;
		if (n < cap) {
			struct hints_host_stats *s = &out[n];
			*s = (struct hints_host_stats){
				.files = x->file_count,
				.bytes = x->bytes,
				.records = x->records,
				.down_since_us = x->down_since_us,
				.delivering = x->delivering,
			};
			memcpy(s->host_id, x->id, 16);
			bool first = true;
			for (struct hint_file *f = x->files; f; f = f->next) {
				if (f->records == 0)
					continue;
				if (first || f->oldest_us < s->oldest_us)
					s->oldest_us = f->oldest_us;
				if (first || f->newest_us > s->newest_us)
					s->newest_us = f->newest_us;
				first = false;
			}
		}
		n++;
	}
	return n;
}
