/*
 * The hint store and dispatcher (see hints.h for the contract and
 * hints_internal.h for the record format).
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

struct hint_file {
	uint64_t seq;
	uint64_t size; /* sound bytes; readers stop here */
	uint64_t records;
	int64_t oldest_us;
	int64_t newest_us;
	uint64_t damage_hwm; /* damage below this was counted already */
	struct env_file *wf; /* open for appending, else NULL */
	struct hint_file *next;
};

struct hint_host;

/* One send awaiting its callback. */
struct hint_slot {
	struct hint_host *host;
	uint64_t epoch; /* the host's epoch when sent */
	uint64_t start;
	uint64_t end;
	bool done;
	bool ok;
};

struct hint_host {
	struct hints *h;
	uint8_t id[16];
	char idtext[37];
	struct hint_file *files; /* ascending seq */
	uint64_t file_count;
	uint64_t bytes;
	uint64_t records;
	int64_t down_since_us; /* 0 = not known down */
	bool removed;          /* left the ring; freed once unreferenced */

	/* delivery */
	bool delivering;
	bool failed;     /* stop sending; reset once outstanding is 0 */
	bool pumping;    /* inside host_pump: callbacks must not re-enter */
	bool want_start; /* a start came while the last attempt drained */
	struct hint_file *cur;
	struct hints_cursor pos;
	uint64_t acked_off; /* start of the first unacknowledged record */
	uint8_t *chunk;     /* file bytes [chunk_off, chunk_off + chunk_len) */
	uint64_t chunk_off;
	size_t chunk_len;
	bool read_busy;
	uint64_t epoch; /* bumped when the current file changes */
	struct hint_slot *ring;
	uint32_t head;        /* oldest slot */
	uint32_t count;       /* slots in use */
	uint32_t outstanding; /* sends awaiting a callback */
	uint32_t jobs;        /* offloaded reads referencing the host */
};

struct hints {
	struct hints_options o;
	struct env *env;
	char *dir;
	char **dcs; /* disabled datacenters */
	size_t dc_count;
	bool enabled;
	bool paused;
	bool closing;
	uint64_t max_window_ms;
	uint64_t throttle;

	struct hint_host **hosts;
	size_t host_count;
	size_t host_cap;
	size_t rr; /* round-robin start for pumping every host */
	uint64_t next_seq;
	struct buf scratch;

	double tokens; /* throttle bucket, bytes */
	uint64_t tokens_at;
	struct env_timer *throttle_timer;
	bool throttle_armed;
	struct env_timer *check_timer;

	bool state_dirty;
	bool state_busy;

	uint64_t refs; /* outstanding sends and offloaded jobs */
	struct hints_stats st;

	/* hints_hand_over: while ho_send is set, every send goes through
	 * it (to another node) instead of o.send (to the target). */
	hints_send_fn ho_send;
	void *ho_arg;
	hints_handed_fn ho_done;
	void *ho_done_arg;
	bool ho_failed;
};

static void host_pump(struct hint_host *x);
static void host_after(struct hint_host *x);

/* ---- names --------------------------------------------------------------- */

static void file_path(const struct hints *h, const struct hint_host *x,
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
static void host_maybe_free(struct hint_host *x)
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
static bool release(struct hints *h)
{
	h->refs--;
	if (h->closing && h->refs == 0) {
		hints_free(h);
		return true;
	}
	return false;
}

/* ---- offloaded jobs ------------------------------------------------------ */

static void offload(struct hints *h, void (*run)(void *), void (*done)(void *),
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
	release(h);
}

static void file_retire(struct hints *h, struct hint_file *f)
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
	offload(h, retire_run, retire_done, j);
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
	release(h);
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
	offload(h, state_run, state_done, j);
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
		file_path(h, x, d.v[i].seq, path, sizeof(path));
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

/* ---- throttle ------------------------------------------------------------ */

static double throttle_burst(const struct hints *h)
{
	return (double)h->throttle / 10.0;
}

/* Whether a send may go now (the bucket is not in debt). */
static bool throttle_ok(struct hints *h)
{
	if (h->throttle == 0)
		return true;
	uint64_t now = env_mono_us(h->env);
	double add = (double)(now - h->tokens_at) * (double)h->throttle / 1e6;
	h->tokens_at = now;
	h->tokens += add;
	if (h->tokens > throttle_burst(h))
		h->tokens = throttle_burst(h);
	return h->tokens > 0;
}

static void throttle_arm(struct hints *h)
{
	if (h->throttle_armed)
		return;
	double deficit = 1.0 - h->tokens;
	uint64_t delay = (uint64_t)(deficit * 1e6 / (double)h->throttle) + 1;
	if (delay < 1000)
		delay = 1000;
	h->throttle_armed = true;
	env_timer_arm(h->env, h->throttle_timer, delay);
}

static void pump_all(struct hints *h)
{
	size_t n = h->host_count;
	if (n == 0)
		return;
	size_t start = h->rr++ % n;
	for (size_t i = 0; i < n && i < h->host_count; i++) {
		struct hint_host *x = h->hosts[(start + i) % h->host_count];
		if (x->delivering)
			host_pump(x);
	}
}

static void on_throttle(void *arg)
{
	struct hints *h = arg;
	h->throttle_armed = false;
	pump_all(h);
}

/* ---- delivery ------------------------------------------------------------ */

static void host_damage(void *arg, enum hints_damage what, uint64_t off,
			uint64_t end)
{
	struct hint_host *x = arg;
	struct hint_file *f = x->cur;
	if (what == HINTS_DAMAGE_TORN || off < f->damage_hwm)
		return;
	f->damage_hwm = end;
	x->h->st.corrupt++;
	char path[PATH_MAX];
	file_path(x->h, x, f->seq, path, sizeof(path));
	LOG_WARN("%s: corrupt hint data at offset %" PRIu64 "..%" PRIu64
		 " skipped",
		 path, off, end);
}

static void host_fail(struct hint_host *x, bool count)
{
	if (!x->failed && count)
		x->h->st.send_failures++;
	x->failed = true;
}

/* Back to idle once every send has called back. */
static void host_reset(struct hint_host *x)
{
	x->count = 0;
	x->head = 0;
	x->failed = false;
	x->delivering = false;
	if (x->cur) {
		x->pos = (struct hints_cursor){.off = x->acked_off,
					       .good_end = x->acked_off};
	}
}

static bool host_start(struct hint_host *x);

/* A hand-over ends when no host is delivering and either a send failed
 * or no hint is left; a host with hints stored meanwhile starts again. */
static void hand_over_check(struct hints *h)
{
	if (!h->ho_send)
		return;
	bool left = false;
	for (size_t i = 0; i < h->host_count; i++) {
		struct hint_host *x = h->hosts[i];
		if (x->delivering)
			return;
		left |= x->files && !x->removed;
	}
	for (size_t i = 0; left && !h->ho_failed && i < h->host_count; i++)
		if (host_start(h->hosts[i]))
			return; /* its end checks again */
	hints_handed_fn done = h->ho_done;
	void *arg = h->ho_done_arg;
	bool ok = !left && !h->ho_failed;
	h->ho_send = NULL;
	h->ho_done = NULL;
	done(arg, ok);
}

static void host_after(struct hint_host *x)
{
	struct hints *h = x->h;
	if (x->failed && x->outstanding == 0 && !x->pumping) {
		host_reset(x);
		if (x->want_start) {
			x->want_start = false;
			host_start(x);
		} else {
			/* Retry soon rather than at the next periodic check:
			 * a target that just restarted drops the first sends
			 * while its data path starts. */
			uint64_t ms = h->o.check_interval_ms < 1000
					      ? h->o.check_interval_ms
					      : 1000;
			if (h->check_timer) /* NULL once closed */
				env_timer_arm(h->env, h->check_timer,
					      ms * 1000);
		}
	}
	if (!x->delivering && !x->pumping)
		hand_over_check(h);
	host_maybe_free(x);
}

static void host_clear_cur(struct hint_host *x)
{
	x->cur = NULL;
	x->epoch++;
	x->chunk_off = 0;
	x->chunk_len = 0;
	x->acked_off = 0;
	x->pos = (struct hints_cursor){0};
}

/* Every record of the current file is acknowledged: delete it. */
static void host_file_done(struct hint_host *x)
{
	struct hints *h = x->h;
	struct hint_file *f = x->cur;
	char path[PATH_MAX];
	file_path(h, x, f->seq, path, sizeof(path));
	if (env_unlink(h->env, path) != 0 && err_code() != ERR_NOT_FOUND)
		LOG_WARN("cannot delete a delivered hint file: %s", err_msg());
	struct hint_file **p = &x->files;
	while (*p != f)
		p = &(*p)->next;
	*p = f->next;
	x->file_count--;
	x->bytes -= f->size;
	x->records -= f->records;
	free(f);
	host_clear_cur(x);
}

/* Picks the oldest file; one still being written is finished first. */
static bool host_next_file(struct hint_host *x)
{
	if (!x->files)
		return false;
	host_clear_cur(x);
	x->cur = x->files;
	file_retire(x->h, x->cur);
	return true;
}

struct read_job {
	struct hint_host *x;
	struct env *env;
	uint64_t epoch;
	char path[PATH_MAX];
	uint64_t off;
	size_t want;
	size_t need; /* fewer bytes than this is an error */
	uint8_t *buf;
	size_t got;
	int status;
	char msg[ERR_MSG_MAX];
};

static void read_run(void *arg)
{
	struct read_job *j = arg;
	struct env_file *fp;
	j->status = -1;
	if (env_file_open(j->env, j->path, ENV_FILE_READ, &fp) != 0) {
		snprintf(j->msg, sizeof(j->msg), "%s", err_msg());
		return;
	}
	ssize_t got = env_file_pread(fp, j->buf, j->want, j->off);
	if (got < 0) {
		snprintf(j->msg, sizeof(j->msg), "%s", err_msg());
	} else if ((size_t)got < j->need) {
		snprintf(j->msg, sizeof(j->msg),
			 "short read: %zd bytes at offset %" PRIu64
			 ", expected %zu",
			 got, j->off, j->need);
	} else {
		j->got = (size_t)got;
		j->status = 0;
	}
	env_file_close(fp);
}

static void read_done(void *arg)
{
	struct read_job *j = arg;
	struct hint_host *x = j->x;
	struct hints *h = x->h;
	x->jobs--;
	x->read_busy = false;
	if (h->closing) {
		free(j->buf);
		free(j);
		release(h);
		return;
	}
	if (j->epoch == x->epoch && !x->removed) {
		if (j->status != 0) {
			LOG_WARN("cannot read hints from %s: %s", j->path,
				 j->msg);
			host_fail(x, true);
			free(j->buf);
		} else {
			free(x->chunk);
			x->chunk = j->buf;
			x->chunk_off = j->off;
			x->chunk_len = j->got;
		}
	} else {
		free(j->buf);
	}
	free(j);
	h->refs--;
	if (!x->pumping)
		host_pump(x);
}

/* Reads at least `need` bytes at the cursor. */
static void host_read(struct hint_host *x, size_t need)
{
	struct hints *h = x->h;
	uint64_t left = x->cur->size - x->pos.off;
	size_t want = need > h->o.read_chunk ? need : h->o.read_chunk;
	if (want > left)
		want = (size_t)left;
	struct read_job *j = calloc(1, sizeof(*j));
	uint8_t *b = malloc(want ? want : 1);
	if (!j || !b) {
		free(j);
		free(b);
		LOG_WARN("cannot read hints: out of memory");
		host_fail(x, true);
		return;
	}
	*j = (struct read_job){.x = x,
			       .env = h->env,
			       .epoch = x->epoch,
			       .off = x->pos.off,
			       .want = want,
			       .need = need < want ? need : want,
			       .buf = b};
	file_path(h, x, x->cur->seq, j->path, sizeof(j->path));
	x->read_busy = true;
	x->jobs++;
	offload(h, read_run, read_done, j);
}

static void on_sent(void *arg, int status)
{
	struct hint_slot *s = arg;
	struct hint_host *x = s->host;
	struct hints *h = x->h;
	x->outstanding--;
	if (release(h))
		return;
	if (h->closing)
		return;
	if (s->epoch != x->epoch) {
		/* The file was dropped meanwhile. */
		host_after(x);
		return;
	}
	s->done = true;
	s->ok = status == 0;
	if (status != 0) {
		host_fail(x, true);
		h->ho_failed |= h->ho_send != NULL;
	}
	uint32_t cap = h->o.max_in_flight;
	while (x->count > 0) {
		struct hint_slot *head = &x->ring[x->head];
		if (!head->done || !head->ok)
			break;
		x->acked_off = head->end;
		h->st.delivered++;
		x->head = (x->head + 1) % cap;
		x->count--;
	}
	if (!x->pumping)
		host_pump(x);
}

static bool host_may_send(const struct hint_host *x)
{
	const struct hints *h = x->h;
	return x->delivering && !x->failed && !x->removed &&
	       (!h->paused || h->ho_send) && !h->closing;
}

/* Sends what the window and the throttle allow. */
static void host_pump(struct hint_host *x)
{
	struct hints *h = x->h;
	uint32_t cap = h->o.max_in_flight;
	if (x->pumping)
		return;
	x->pumping = true;
	while (host_may_send(x)) {
		if (!x->cur && !host_next_file(x)) {
			x->delivering = false; /* all delivered */
			break;
		}
		if (x->count == cap)
			break;
		if (!throttle_ok(h)) {
			throttle_arm(h);
			break;
		}
		struct hints_record rec;
		size_t need = 0;
		enum hints_parse_result r = hints_parse_next(
			&x->pos, x->chunk, x->chunk_off, x->chunk_len,
			x->cur->size, &rec, &need, host_damage, x);
		if (r == HINTS_PARSE_NEED) {
			if (!x->read_busy)
				host_read(x, need);
			if (x->read_busy)
				break;
			continue;
		}
		if (r == HINTS_PARSE_END) {
			if (x->count > 0)
				break; /* wait for the acks */
			host_file_done(x);
			continue;
		}
		struct hint_slot *s = &x->ring[(x->head + x->count) % cap];
		*s = (struct hint_slot){.host = x,
					.epoch = x->epoch,
					.start = rec.off,
					.end = rec.end};
		x->count++;
		x->outstanding++;
		h->refs++;
		if (h->throttle)
			h->tokens -= (double)(rec.end - rec.off);
		hints_send_fn send = h->ho_send ? h->ho_send : h->o.send;
		void *send_arg = h->ho_send ? h->ho_arg : h->o.hook_arg;
		if (send(send_arg, x->id, rec.mutation, rec.len, rec.created_us,
			 on_sent, s) != 0) {
			x->outstanding--;
			h->refs--;
			s->done = true;
			host_fail(x, true);
			h->ho_failed |= h->ho_send != NULL;
		}
	}
	x->pumping = false;
	host_after(x);
}

/* Starts delivering to x unless it is busy, paused or has nothing. */
static bool host_start(struct hint_host *x)
{
	struct hints *h = x->h;
	if (x->removed || h->closing || !x->files)
		return false;
	if (x->delivering) {
		if (x->failed)
			x->want_start = true;
		return false;
	}
	if (h->paused && !h->ho_send)
		return false;
	if (!x->ring) {
		x->ring = calloc(h->o.max_in_flight, sizeof(*x->ring));
		if (!x->ring) {
			LOG_WARN("cannot deliver hints to %s: out of memory",
				 x->idtext);
			return false;
		}
	}
	x->delivering = true;
	x->failed = false;
	host_pump(x);
	return true;
}

/* Starts delivery to every host with hints that is alive and idle. */
static void start_eligible(struct hints *h)
{
	for (size_t i = 0; i < h->host_count; i++) {
		struct hint_host *x = h->hosts[i];
		if (x->delivering || !x->files || x->removed ||
		    x->down_since_us != 0)
			continue;
		if (h->o.alive && !h->o.alive(h->o.hook_arg, x->id))
			continue;
		host_start(x);
	}
}

static void on_check(void *arg)
{
	struct hints *h = arg;
	start_eligible(h);
	env_timer_arm(h->env, h->check_timer, h->o.check_interval_ms * 1000);
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
	h->throttle_timer = env_timer_new(h->env, on_throttle, h);
	h->check_timer = env_timer_new(h->env, on_check, h);
	if (!h->throttle_timer || !h->check_timer)
		goto nomem;
	h->tokens = throttle_burst(h);
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

int hints_hand_over(struct hints *h, hints_send_fn via, void *via_arg,
		    hints_handed_fn done, void *arg)
{
	if (h->ho_send)
		return err_set(ERR_EXISTS, "a hand-over is already running");
	if (h->closing)
		return err_set(ERR_CLOSED, "hints are closed");
	h->ho_send = via;
	h->ho_arg = via_arg;
	h->ho_done = done;
	h->ho_done_arg = arg;
	h->ho_failed = false;
	for (size_t i = 0; i < h->host_count && h->ho_send; i++)
		if (!h->hosts[i]->delivering)
			host_start(h->hosts[i]);
	hand_over_check(h);
	return 0;
}

void hints_hand_over_cancel(struct hints *h)
{
	h->ho_send = NULL;
	h->ho_done = NULL;
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
		file_retire(h, last);

	char path[PATH_MAX];
	struct hint_file *f = calloc(1, sizeof(*f));
	if (!f) {
		err_set(ERR_NOMEM, "hints: out of memory");
		return NULL;
	}
	f->seq = h->next_seq++;
	file_path(h, x, f->seq, path, sizeof(path));
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
			file_retire(h, f);
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
		host_fail(x, false);
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
	host_start(x);
}

/* Deletes every file of x; sends in flight finish as stale. */
static void host_drop(struct hint_host *x)
{
	struct hints *h = x->h;
	struct hint_file *f = x->files;
	while (f) {
		struct hint_file *next = f->next;
		char path[PATH_MAX];
		file_path(h, x, f->seq, path, sizeof(path));
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
	host_clear_cur(x);
	if (x->delivering)
		host_fail(x, false);
	host_after(x);
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
		pump_all(h);
		start_eligible(h);
	}
}

void hints_set_max_window(struct hints *h, uint64_t max_window_ms)
{
	h->max_window_ms = max_window_ms;
}

void hints_set_throttle(struct hints *h, uint64_t bytes_per_sec)
{
	h->throttle = bytes_per_sec;
	h->tokens = throttle_burst(h);
	h->tokens_at = env_mono_us(h->env);
	if (bytes_per_sec == 0)
		pump_all(h);
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
