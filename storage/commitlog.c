/*
 * Commitlog segments, records, the syncer thread and replay. The format and
 * the rules are in commitlog_internal.h and docs/storage.md.
 */
#define LOG_MODULE "storage"
#include "storage/commitlog_internal.h"

#include "common/buf.h"
#include "common/crc.h"
#include "common/err.h"
#include "common/log.h"
#include "common/thread.h"
#include "conf/conf.h"

#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CL_MAGIC         "CSCL"
#define CL_VERSION       1
#define CL_HEADER        18
#define CL_REC_OVERHEAD  12
#define CL_TYPE_MUTATION 1
#define CL_TYPE_SYNC     2
#define CL_MARKER_LEN    (CL_REC_OVERHEAD + 1 + 8)
#define CL_FILL_CHUNK    (1u << 20)
/* batch/group: buffered bytes past which the syncer writes them out even
 * when nobody waits for a sync */
#define CL_PEND_MAX (1u << 20)

/* batch and group buffer appended records in memory (`pend`); the thread
 * that syncs writes them with one pwrite before its fdatasync, so a
 * write costs a memcpy under the lock, not a syscall. periodic writes
 * each record at once (its acknowledgement follows the write(2)), except
 * records appended with commitlog_append_deferred: those wait in `pend`
 * for commitlog_write_pending (one pwrite for a loop turn's writes, whose
 * acknowledgements follow it), and anything else that writes the active
 * segment writes them first, so the file never has a hole. */
struct segment {
	uint64_t id;
	char *path;
	struct env_file *f; /* NULL once closed */
	uint64_t written;   /* end of the appended data, `pend` included */
	uint64_t on_file;   /* end of the data handed to pwrite */
	struct buf pend;    /* the bytes [on_file, written) */
	bool sealed;        /* no more appends */
	struct segment *next;
};

struct waiter {
	struct clpos pos;
	storage_done_fn fn;
	void *arg;
	struct waiter *next;
};

/* A thread blocked in commitlog_wait_durable, on its own stack. The
 * thread ending a sync posts exactly the waiters it covered, and at most
 * one more to lead the next sync, so a group costs one wakeup per writer
 * and a woken writer does not take the lock again. */
enum { SW_WAITING, SW_DONE, SW_FAILED, SW_LEAD };
struct sync_waiter {
	struct clpos pos;
	sem_t sem;
	int state; /* written under the lock before the post */
	struct sync_waiter *next;
};

struct commitlog {
	struct commitlog_options o;
	char *dir;
	pthread_mutex_t mu;
	pthread_cond_t wake;       /* the syncer has work */
	pthread_cond_t progress;   /* a sync, a spare or a rollover completed */
	pthread_cond_t need_spare; /* the preparer has work */
	pthread_t thread, preparer;
	bool running, stop;

	struct segment *segs; /* by id; the active one is last */
	struct segment *active;
	struct segment *spare;
	bool preparing;   /* the preparer is creating the next spare */
	bool prep_failed; /* it failed: rollover creates one itself */
	bool rolling;     /* a writer is in rollover(): others wait */
	bool buffered;    /* batch/group: appends go to `pend` */
	uint64_t next_id;

	struct waiter *wait_head, *wait_tail;
	struct sync_waiter *sw_head; /* blocked synchronous writers */
	struct buf io; /* the active segment's bytes being written */
	uint64_t first_pending_us;
	bool syncing; /* a sync of the active segment runs */
	/* group commit of synchronous writers (commitlog_gather_until) */
	bool gathering;         /* a leader waits for the rest of its group */
	uint64_t pend_writes;   /* records in the active `pend` */
	uint64_t first_pend_us; /* when the first of them was appended */
	uint64_t group_seen;    /* writers around the last sync */
	uint64_t sync_end_us;   /* when the last sync ended */
	uint64_t sync_avg_us;   /* smoothed pwrite + fdatasync time */
	struct clpos synced;    /* everything before it is durable */
	size_t seals_pending;   /* rolled-over segments not yet sealed */
	uint64_t sync_requested, sync_done; /* generations for sync_now */
	uint64_t last_marker;               /* offset the last marker covers */
	struct commitlog_sync_stats st;

	bool failed;
	enum err_code fail_code;
	char fail_msg[256];
	struct buf scratch;
};

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Waits on `c` (CLOCK_MONOTONIC, as now_us) until `until_us` at most. */
static void cond_wait_until(pthread_cond_t *c, pthread_mutex_t *mu,
			    uint64_t until_us)
{
	struct timespec ts = {(time_t)(until_us / 1000000u),
			      (long)(until_us % 1000000u) * 1000};
	pthread_cond_timedwait(c, mu, &ts);
}

static char *segment_path(const char *dir, uint64_t id)
{
	size_t n = strlen(dir) + 48;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/CommitLog-%d-%" PRIu64 ".log", dir,
			 CL_VERSION, id);
	return p;
}

struct commitlog *commitlog_new(const struct commitlog_options *o)
{
	struct commitlog *cl = calloc(1, sizeof(*cl));
	if (!cl || !(cl->dir = strdup(o->dir))) {
		free(cl);
		err_set(ERR_NOMEM, "commitlog");
		return NULL;
	}
	cl->o = *o;
	cl->o.dir = cl->dir;
	if (cl->o.segment_size < 64 * 1024)
		cl->o.segment_size = 64 * 1024;
	pthread_mutex_init(&cl->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cl->wake, &ca);
	pthread_cond_init(&cl->progress, &ca);
	pthread_cond_init(&cl->need_spare, &ca);
	pthread_condattr_destroy(&ca);
	buf_init(&cl->scratch);
	buf_init(&cl->io);
	cl->buffered = o->sync_mode != CONF_COMMITLOG_SYNC_PERIODIC;
	cl->next_id = 1;
	if (env_mkdir_p(o->env, o->dir)) {
		commitlog_delete(cl);
		return NULL;
	}
	return cl;
}

/* ---- records ------------------------------------------------------------- */

/* Appends one record to `b`. */
static int record_put(struct buf *b, uint8_t type, const uint8_t *payload,
		      size_t len)
{
	uint8_t *p = buf_extend(b, CL_REC_OVERHEAD + 1 + len);
	if (!p)
		return -1;
	uint32_t blen = (uint32_t)(len + 1);
	be32_store(p, blen);
	be32_store(p + 4, crc32c_mask(crc32c(0, p, 4)));
	p[8] = type;
	memcpy(p + 9, payload, len);
	be32_store(p + 9 + len, crc32c_mask(crc32c(0, p + 8, blen)));
	return 0;
}

/* After damage at `bad`: is there a valid sync marker further on that
 * covers it? Then the damaged bytes had been synced: corruption. */
static bool marker_covers(const uint8_t *p, size_t len, uint64_t bad)
{
	const size_t mlen = CL_MARKER_LEN;
	for (uint64_t off = bad + 1; off + mlen <= len; off++) {
		if (be32_load(p + off) != 9 || p[off + 8] != CL_TYPE_SYNC)
			continue;
		if (crc32c_unmask(be32_load(p + off + 4)) !=
			    crc32c(0, p + off, 4) ||
		    crc32c_unmask(be32_load(p + off + 17)) !=
			    crc32c(0, p + off + 8, 9))
			continue;
		uint64_t x = be64_load(p + off + 9);
		if (x > bad && x <= off)
			return true;
	}
	return false;
}

int commitlog_scan_segment(const uint8_t *p, size_t len, bool last,
			   commitlog_replay_fn fn, void *arg,
			   struct commitlog_replay_stats *stats,
			   uint64_t *bad_offset)
{
	*bad_offset = 0;
	bool zero_header = len >= CL_HEADER;
	for (size_t i = 0; zero_header && i < CL_HEADER; i++)
		zero_header = p[i] == 0;
	if (last && (len == 0 || zero_header)) {
		stats->torn += len > 0;
		return 0;
	}
	if (len < CL_HEADER || memcmp(p, CL_MAGIC, 4) != 0 ||
	    be16_load(p + 4) != CL_VERSION ||
	    crc32c_unmask(be32_load(p + 14)) != crc32c(0, p, 14))
		return err_set(ERR_CORRUPT, "bad segment header");
	uint64_t seg = be64_load(p + 6);
	uint64_t durable = 0, off = CL_HEADER;
	while (off + 8 <= len) {
		uint32_t blen = be32_load(p + off);
		if (blen == 0) { /* preallocated zeros: end of data */
			if (off < durable || marker_covers(p, len, off)) {
				*bad_offset = off;
				return err_set(ERR_CORRUPT,
					       "zero length at "
					       "offset %" PRIu64
					       " in synced data",
					       off);
			}
			break;
		}
		const char *why = NULL;
		if (crc32c_unmask(be32_load(p + off + 4)) !=
		    crc32c(0, p + off, 4))
			why = "bad length checksum";
		else if (blen == 0 ||
			 (uint64_t)blen + CL_REC_OVERHEAD > len - off)
			why = "bad record length";
		else if (crc32c_unmask(be32_load(p + off + 8 + blen)) !=
			 crc32c(0, p + off + 8, blen))
			why = "bad record checksum";
		const uint8_t *body = p + off + 8;
		uint64_t end = off + CL_REC_OVERHEAD + blen;
		if (!why && body[0] == CL_TYPE_SYNC) {
			uint64_t x =
				blen == 9 ? be64_load(body + 1) : UINT64_MAX;
			if (x > off)
				why = "bad sync marker";
			else if (x > durable)
				durable = x;
		} else if (!why && body[0] == CL_TYPE_MUTATION) {
			struct clpos pos = {seg, end};
			if (fn && fn(arg, pos, body + 1, blen - 1)) {
				if (err_code() != ERR_CORRUPT)
					return -1;
				*bad_offset = off;
				return err_prefix("offset %" PRIu64, off);
			}
			stats->records++;
		} else if (!why) {
			why = "unknown record type";
		}
		if (why) {
			if (off >= durable && !marker_covers(p, len, off)) {
				stats->torn++;
				return 0;
			}
			*bad_offset = off;
			return err_set(ERR_CORRUPT,
				       "%s at offset %" PRIu64
				       " in synced data",
				       why, off);
		}
		off = end;
	}
	return 0;
}

/* ---- replay -------------------------------------------------------------- */

struct id_list {
	uint64_t *ids;
	size_t n, cap;
};

static int collect_segment(void *arg, const char *name)
{
	struct id_list *l = arg;
	unsigned long long id;
	int ver;
	char tail[8];
	if (sscanf(name, "CommitLog-%d-%llu%7s", &ver, &id, tail) != 3 ||
	    strcmp(tail, ".log") != 0 || ver != CL_VERSION)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		uint64_t *n = realloc(l->ids, cap * sizeof(*n));
		if (!n)
			return 1;
		l->ids = n;
		l->cap = cap;
	}
	l->ids[l->n++] = id;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static int segment_track(struct commitlog *cl, uint64_t id, char *path)
{
	struct segment *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(ERR_NOMEM, "segment");
	s->id = id;
	s->path = path;
	s->sealed = true;
	struct segment **pp = &cl->segs;
	while (*pp)
		pp = &(*pp)->next;
	*pp = s;
	return 0;
}

static bool policy_stops(int policy)
{
	return policy != CONF_POLICY_IGNORE &&
	       policy != CONF_POLICY_BEST_EFFORT;
}

static int replay_one(struct commitlog *cl, uint64_t id, bool last,
		      commitlog_replay_fn fn, void *arg,
		      struct commitlog_replay_stats *stats)
{
	char *path = segment_path(cl->dir, id);
	if (!path)
		return err_set(ERR_NOMEM, "segment path");
	uint8_t *data;
	size_t len;
	if (env_read_file(cl->o.env, path, (size_t)1 << 34, &data, &len)) {
		err_prefix("commitlog");
		free(path);
		return -1;
	}
	uint64_t bad;
	int rc = commitlog_scan_segment(data, len, last, fn, arg, stats, &bad);
	free(data);
	if (rc && err_code() == ERR_CORRUPT) {
		err_prefix("commitlog %s", path);
		if (policy_stops(cl->o.failure_policy)) {
			err_prefix("commit_failure_policy stop: refusing to "
				   "start");
			free(path);
			return -1;
		}
		LOG_AT(LOG_LEVEL_ERROR,
		       "%s (commit_failure_policy ignore: "
		       "skipping the rest of the segment)",
		       err_msg());
		stats->skipped++;
		rc = 0;
	}
	if (rc) {
		free(path);
		return -1;
	}
	return segment_track(cl, id, path);
}

int commitlog_replay(struct commitlog *cl, commitlog_replay_fn fn, void *arg,
		     struct commitlog_replay_stats *stats)
{
	memset(stats, 0, sizeof(*stats));
	struct id_list l = {0};
	if (env_list_dir(cl->o.env, cl->dir, collect_segment, &l)) {
		free(l.ids);
		return err_prefix("commitlog %s", cl->dir);
	}
	if (l.n)
		qsort(l.ids, l.n, sizeof(*l.ids), cmp_u64);
	int rc = 0;
	for (size_t i = 0; i < l.n && !rc; i++) {
		rc = replay_one(cl, l.ids[i], i + 1 == l.n, fn, arg, stats);
		if (l.ids[i] > stats->max_seg)
			stats->max_seg = l.ids[i];
	}
	if (l.n && l.ids[l.n - 1] >= cl->next_id)
		cl->next_id = l.ids[l.n - 1] + 1;
	free(l.ids);
	return rc;
}

/* ---- segments ------------------------------------------------------------ */

/* Writes a segment's whole extent: the header, then zeros, so that later
 * fdatasyncs overwrite written blocks and commit no extent metadata (on
 * ext4 a sync into fallocate'd, unwritten space costs about 2.7x one into
 * written space). */
static int segment_fill(struct commitlog *cl, struct env_file *f,
			const uint8_t *h)
{
	uint64_t size = cl->o.segment_size;
	size_t chunk = size < CL_FILL_CHUNK ? (size_t)size : CL_FILL_CHUNK;
	uint8_t *z = calloc(1, chunk);
	if (!z)
		return err_set(ERR_NOMEM, "segment fill");
	memcpy(z, h, CL_HEADER);
	int rc = 0;
	for (uint64_t off = 0; off < size && !rc; off += chunk) {
		size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
		rc = env_file_pwrite(f, z, n, off);
		if (off == 0)
			memset(z, 0, CL_HEADER);
	}
	free(z);
	return rc;
}

/* Creates, preallocates and syncs a segment with its header. Called
 * without the lock (the id is reserved by the caller). `fill` writes
 * zeros over the segment (batch and group, whose every write waits for a
 * sync); without it the space is only allocated (periodic, which syncs
 * rarely and would only double its writes; a rollover that found no
 * spare, which must be quick). */
static struct segment *segment_create(struct commitlog *cl, uint64_t id,
				      bool fill)
{
	struct segment *s = calloc(1, sizeof(*s));
	char *path = segment_path(cl->dir, id);
	if (!s || !path) {
		free(s);
		free(path);
		err_set(ERR_NOMEM, "segment");
		return NULL;
	}
	s->id = id;
	s->path = path;
	buf_init(&s->pend);
	uint8_t h[CL_HEADER];
	memcpy(h, CL_MAGIC, 4);
	be16_store(h + 4, CL_VERSION);
	be64_store(h + 6, id);
	be32_store(h + 14, crc32c_mask(crc32c(0, h, 14)));
	struct env *e = cl->o.env;
	if (env_file_open(e, path,
			  ENV_FILE_READ | ENV_FILE_WRITE | ENV_FILE_CREATE |
				  ENV_FILE_TRUNC,
			  &s->f) ||
	    env_file_allocate(s->f, 0, cl->o.segment_size) ||
	    (fill ? segment_fill(cl, s->f, h)
		  : env_file_pwrite(s->f, h, CL_HEADER, 0)) ||
	    env_file_sync(s->f) || env_sync_dir(e, cl->dir)) {
		err_prefix("commitlog segment");
		if (s->f)
			env_file_close(s->f);
		env_unlink(e, path);
		free(path);
		free(s);
		return NULL;
	}
	s->written = CL_HEADER;
	s->on_file = CL_HEADER;
	return s;
}

static void segment_free(struct segment *s)
{
	if (s->f)
		env_file_close(s->f);
	buf_free(&s->pend);
	free(s->path);
	free(s);
}

static void deliver(struct commitlog *cl, struct waiter *w, int status,
		    enum err_code code)
{
	while (w) {
		struct waiter *next = w->next;
		storage_post_done(cl->o.post, cl->o.post_arg, w->fn, w->arg,
				  status, code);
		free(w);
		w = next;
	}
}

/* Under the lock: detaches the waiters covered by (seg, off). */
static struct waiter *take_waiters(struct commitlog *cl, struct clpos upto)
{
	struct waiter *head = cl->wait_head, *last = NULL, *w = head;
	while (w && clpos_cmp(w->pos, upto) <= 0) {
		last = w;
		w = w->next;
	}
	if (!last)
		return NULL;
	last->next = NULL;
	cl->wait_head = w;
	if (!w)
		cl->wait_tail = NULL;
	return head;
}

/* Under the lock: a segment that takes no more appends has not been
 * sealed (written, synced, closed) yet. Until it is, no sync of the
 * active segment makes "everything before" durable: `synced` must not
 * pass it, so only the syncer's round (which seals first) advances. */
static bool seal_pending(const struct commitlog *cl)
{
	return cl->seals_pending > 0;
}

/* Under the lock, when no sync runs: detaches the synchronous waiters
 * that are durable (all of them once the log failed) and, when others
 * still wait on the active segment, one of those to lead the next sync.
 * post_sync_waiters() wakes them after the lock is dropped. */
static struct sync_waiter *release_sync_waiters(struct commitlog *cl)
{
	struct sync_waiter *out = NULL, **pp = &cl->sw_head, **lead = NULL;
	while (*pp) {
		struct sync_waiter *w = *pp;
		if (cl->failed || clpos_cmp(w->pos, cl->synced) <= 0) {
			*pp = w->next;
			w->state = cl->failed ? SW_FAILED : SW_DONE;
			w->next = out;
			out = w;
			continue;
		}
		if (!lead && w->pos.seg == cl->active->id)
			lead = pp;
		pp = &w->next;
	}
	if (lead && !cl->syncing && !cl->gathering && !seal_pending(cl)) {
		struct sync_waiter *w = *lead;
		*lead = w->next;
		w->state = SW_LEAD;
		w->next = out;
		out = w;
	}
	return out;
}

static void post_sync_waiters(struct sync_waiter *w)
{
	while (w) {
		struct sync_waiter *next = w->next; /* w dies with the post */
		sem_post(&w->sem);
		w = next;
	}
}

static void fail_log(struct commitlog *cl)
{
	if (!cl->failed) {
		cl->failed = true;
		cl->fail_code = err_code() ? err_code() : ERR_IO;
		snprintf(cl->fail_msg, sizeof(cl->fail_msg), "%s", err_msg());
		LOG_AT(LOG_LEVEL_ERROR, "commitlog stopped: %s", cl->fail_msg);
	}
}

/* Under the lock, by the thread that holds `syncing`: moves the active
 * segment's buffered bytes to cl->io and returns their file offset;
 * *writes is the number of records among them. */
static uint64_t take_pending(struct commitlog *cl, struct segment *a,
			     uint64_t *writes)
{
	struct buf t = cl->io;
	buf_clear(&t);
	cl->io = a->pend;
	a->pend = t;
	uint64_t off = a->on_file;
	a->on_file = a->written;
	*writes = cl->pend_writes;
	cl->pend_writes = 0;
	return off;
}

/* Under the lock, after a sync of the active segment that took `writes`
 * records and ran from `t0` to `t1`: what the next group's leader needs. */
static void note_sync(struct commitlog *cl, uint64_t writes, uint64_t t0,
		      uint64_t t1)
{
	uint64_t d = t1 - t0;
	cl->sync_avg_us = cl->sync_avg_us ? (3 * cl->sync_avg_us + d) / 4 : d;
	cl->sync_end_us = t1;
	cl->st.sync_us += d;
	cl->group_seen = writes + cl->pend_writes;
}

uint64_t commitlog_gather_until(const struct commitlog_gather *g)
{
	if (!g->pending || g->pending >= g->seen || !g->window_us)
		return 0;
	uint64_t start =
		g->oldest_us > g->last_end_us ? g->oldest_us : g->last_end_us;
	uint64_t until = start + g->sync_us;
	uint64_t cap = g->oldest_us + g->window_us;
	return until < cap ? until : cap;
}

/* Without the lock, by the holder of `syncing`: writes what
 * take_pending() detached, then syncs. */
static int write_and_sync(struct commitlog *cl, struct segment *a, uint64_t off)
{
	if (cl->io.len && env_file_pwrite(a->f, cl->io.data, cl->io.len, off))
		return -1;
	return env_file_sync(a->f);
}

/* periodic, under the lock: writes the deferred records `a` buffers. */
static int flush_pend(struct commitlog *cl, struct segment *a)
{
	if (cl->buffered || !a->pend.len)
		return 0;
	if (env_file_pwrite(a->f, a->pend.data, a->pend.len, a->on_file)) {
		fail_log(cl);
		return -1;
	}
	a->on_file += a->pend.len;
	buf_clear(&a->pend);
	return 0;
}

/* Under the lock: appends a sync marker to `a` if it is still active
 * (buffered: it reaches the file with the next sync's write). */
static void write_marker(struct commitlog *cl, struct segment *a,
			 uint64_t covered)
{
	uint8_t payload[8];
	if (a != cl->active || covered <= cl->last_marker ||
	    a->written + CL_MARKER_LEN > cl->o.segment_size)
		return;
	be64_store(payload, covered);
	if (cl->buffered) {
		if (record_put(&a->pend, CL_TYPE_SYNC, payload, 8)) {
			fail_log(cl);
			return;
		}
	} else {
		if (flush_pend(cl, a))
			return;
		buf_clear(&cl->scratch);
		if (record_put(&cl->scratch, CL_TYPE_SYNC, payload, 8) ||
		    env_file_pwrite(a->f, cl->scratch.data, cl->scratch.len,
				    a->written)) {
			fail_log(cl);
			return;
		}
		a->on_file += CL_MARKER_LEN;
	}
	a->written += CL_MARKER_LEN;
	cl->last_marker = covered;
}

/* Writes what a segment that takes no more appends still buffers, syncs
 * it, then closes its data with a sync marker covering all of it (synced
 * too), so that replay treats any damage in it as corruption rather than
 * a torn tail. Without the lock, by the holder of `syncing` (nobody else
 * touches a sealed segment). */
static int seal_segment(struct commitlog *cl, struct segment *s)
{
	uint8_t payload[8];
	struct buf rec;
	buf_init(&rec);
	int rc = 0;
	if (s->pend.len) {
		rc = env_file_pwrite(s->f, s->pend.data, s->pend.len,
				     s->on_file);
		s->on_file = s->written;
		buf_free(&s->pend);
		buf_init(&s->pend);
	}
	be64_store(payload, s->written);
	if (!rc)
		rc = env_file_sync(s->f);
	if (!rc && s->written + CL_MARKER_LEN <= cl->o.segment_size) {
		rc = record_put(&rec, CL_TYPE_SYNC, payload, 8) ||
		     env_file_pwrite(s->f, rec.data, rec.len, s->written) ||
		     env_file_sync(s->f);
	}
	buf_free(&rec);
	return rc ? -1 : 0;
}

static bool sync_due(struct commitlog *cl, uint64_t now, uint64_t *wait_us)
{
	*wait_us = UINT64_MAX;
	if (cl->sync_requested != cl->sync_done ||
	    cl->active->pend.len >= CL_PEND_MAX || seal_pending(cl))
		return true;
	if (!cl->wait_head)
		return false;
	if (cl->o.sync_mode == CONF_COMMITLOG_SYNC_BATCH)
		return true;
	uint64_t window = cl->o.window_ms * 1000;
	if (cl->o.sync_mode == CONF_COMMITLOG_SYNC_GROUP &&
	    now < cl->first_pending_us + window) {
		*wait_us = cl->first_pending_us + window - now;
		return false;
	}
	return true;
}

/* One round: sync sealed segments, then the active one; acknowledge.
 * Called with the lock held; drops it around disk work. A caller leading
 * its own sync (commitlog_wait_durable) excludes the round through
 * `syncing`. */
static void sync_round(struct commitlog *cl)
{
	if (cl->syncing) {
		pthread_cond_wait(&cl->progress, &cl->mu);
		return;
	}
	uint64_t gen = cl->sync_requested;
	struct segment *a = cl->active;
	/* periodic: deferred records reach the file under the lock, so that
	 * whoever acknowledges them knows they were written */
	(void)flush_pend(cl, a);
	uint64_t writes;
	uint64_t off = take_pending(cl, a, &writes);
	uint64_t upto = a->written;
	struct segment *sealed[16];
	size_t ns = 0;
	bool more = false; /* sealed segments left for the next round */
	for (struct segment *s = cl->segs; s; s = s->next)
		if (s->sealed && s->f) {
			if (ns == 16) {
				more = true;
				break;
			}
			sealed[ns++] = s;
		}
	cl->syncing = true;
	pthread_mutex_unlock(&cl->mu);

	int rc = 0;
	enum err_code code = ERR_NONE;
	for (size_t i = 0; i < ns && !rc; i++)
		rc = seal_segment(cl, sealed[i]);
	uint64_t t0 = now_us();
	if (!rc)
		rc = write_and_sync(cl, a, off);
	uint64_t t1 = now_us();
	if (rc)
		code = err_code();

	pthread_mutex_lock(&cl->mu);
	cl->syncing = false;
	cl->st.syncs += 1 + 2 * ns;
	if (!rc)
		note_sync(cl, writes, t0, t1);
	for (size_t i = 0; i < ns && !rc; i++) {
		env_file_close(sealed[i]->f);
		sealed[i]->f = NULL;
		cl->seals_pending--;
	}
	struct waiter *done;
	if (rc) {
		fail_log(cl);
		done = take_waiters(cl, (struct clpos){UINT64_MAX, UINT64_MAX});
	} else {
		/* with sealed segments left, durable ends with the last one
		 * sealed: the active segment's sync does not cover them */
		struct clpos p = {a->id, upto};
		if (more)
			p = (struct clpos){sealed[ns - 1]->id,
					   sealed[ns - 1]->written};
		if (clpos_cmp(p, cl->synced) > 0)
			cl->synced = p;
		write_marker(cl, a, upto);
		done = take_waiters(cl, p);
		if (cl->wait_head)
			cl->first_pending_us = now_us();
	}
	struct sync_waiter *sw = release_sync_waiters(cl);
	cl->sync_done = gen;
	pthread_cond_broadcast(&cl->progress);
	pthread_mutex_unlock(&cl->mu);
	post_sync_waiters(sw);
	deliver(cl, done, rc ? -1 : 0, rc ? code : ERR_NONE);
	pthread_mutex_lock(&cl->mu);
}

/* Under the lock: the calling thread syncs the active segment itself
 * (leader of a group commit) and acknowledges every waiter it covers.
 * Only when no seal is pending (seal_pending). */
static void lead_sync(struct commitlog *cl)
{
	struct segment *a = cl->active;
	uint64_t writes;
	uint64_t off = take_pending(cl, a, &writes);
	uint64_t upto = a->written;
	cl->syncing = true;
	pthread_mutex_unlock(&cl->mu);
	uint64_t t0 = now_us();
	int rc = write_and_sync(cl, a, off);
	uint64_t t1 = now_us();
	enum err_code code = rc ? err_code() : ERR_NONE;
	pthread_mutex_lock(&cl->mu);
	cl->syncing = false;
	cl->st.syncs++;
	if (!rc)
		note_sync(cl, writes, t0, t1);
	struct waiter *done;
	if (rc) {
		fail_log(cl);
		done = take_waiters(cl, (struct clpos){UINT64_MAX, UINT64_MAX});
	} else {
		struct clpos p = {a->id, upto};
		if (clpos_cmp(p, cl->synced) > 0)
			cl->synced = p;
		write_marker(cl, a, upto);
		done = take_waiters(cl, p);
	}
	struct sync_waiter *sw = release_sync_waiters(cl);
	pthread_cond_broadcast(&cl->progress);
	if (done || sw) {
		pthread_mutex_unlock(&cl->mu);
		post_sync_waiters(sw);
		deliver(cl, done, rc ? -1 : 0, code);
		pthread_mutex_lock(&cl->mu);
	}
}

static int fail_status(struct commitlog *cl)
{
	return err_set(cl->fail_code, "commitlog stopped: %s", cl->fail_msg);
}

int commitlog_wait_durable(struct commitlog *cl, struct clpos pos)
{
	struct sync_waiter me = {.pos = pos};
	bool have_sem = false, waited = false;
	pthread_mutex_lock(&cl->mu);
	while (!cl->failed && clpos_cmp(cl->synced, pos) < 0) {
		bool sealing = pos.seg != cl->active->id || seal_pending(cl);
		if (cl->syncing || cl->gathering || sealing) {
			/* someone else syncs or is about to, or a segment
			 * before the write's end still waits for the syncer
			 * to seal it: sleep until a sync covers the write or
			 * hands this thread the lead */
			if (!have_sem && sem_init(&me.sem, 0, 0) == 0)
				have_sem = true;
			if (!have_sem) {
				pthread_cond_wait(&cl->progress, &cl->mu);
				continue;
			}
			me.state = SW_WAITING;
			me.next = cl->sw_head;
			cl->sw_head = &me;
			if (sealing)
				pthread_cond_signal(&cl->wake);
			pthread_mutex_unlock(&cl->mu);
			while (sem_wait(&me.sem) != 0)
				;
			if (me.state != SW_LEAD) {
				/* fail_code and fail_msg never change once
				 * set; the post orders them before us */
				sem_destroy(&me.sem);
				return me.state == SW_FAILED ? fail_status(cl)
							     : 0;
			}
			pthread_mutex_lock(&cl->mu);
			continue;
		}
		if (cl->o.sync_mode == CONF_COMMITLOG_SYNC_GROUP) {
			/* the deadline depends only on state that holds
			 * until this thread syncs: each pass waits for the
			 * same one */
			uint64_t until = commitlog_gather_until(
				&(struct commitlog_gather){
					.pending = cl->pend_writes,
					.seen = cl->group_seen,
					.oldest_us = cl->first_pend_us,
					.last_end_us = cl->sync_end_us,
					.sync_us = cl->sync_avg_us,
					.window_us = cl->o.window_ms * 1000,
				});
			uint64_t t0 = now_us();
			if (until > t0) {
				/* appends wake us once the group is in */
				cl->st.gathers += !waited;
				waited = true;
				cl->gathering = true;
				cond_wait_until(&cl->progress, &cl->mu, until);
				cl->gathering = false;
				cl->st.gather_us += now_us() - t0;
				continue;
			}
		}
		lead_sync(cl);
	}
	/* a thread handed the lead whose write another sync covered meanwhile
	 * passes the lead on */
	struct sync_waiter *sw = cl->syncing ? NULL : release_sync_waiters(cl);
	int rc = cl->failed ? fail_status(cl) : 0;
	pthread_mutex_unlock(&cl->mu);
	post_sync_waiters(sw);
	if (have_sem)
		sem_destroy(&me.sem);
	return rc;
}

static void *syncer_main(void *arg)
{
	struct commitlog *cl = arg;
	uint64_t last_sync = now_us();
	thread_name_self("commitlog-sync");
	pthread_mutex_lock(&cl->mu);
	while (!cl->stop) {
		uint64_t now = now_us(), wait_us = UINT64_MAX;
		bool due = !cl->failed && sync_due(cl, now, &wait_us);
		if (!cl->failed &&
		    cl->o.sync_mode == CONF_COMMITLOG_SYNC_PERIODIC) {
			uint64_t period = cl->o.period_ms * 1000;
			if (now >= last_sync + period)
				due = true;
			else if (last_sync + period - now < wait_us)
				wait_us = last_sync + period - now;
		}
		if (cl->failed && cl->sync_requested != cl->sync_done) {
			cl->sync_done = cl->sync_requested;
			pthread_cond_broadcast(&cl->progress);
		}
		if (!due) {
			if (wait_us == UINT64_MAX) {
				pthread_cond_wait(&cl->wake, &cl->mu);
			} else {
				struct timespec ts;
				clock_gettime(CLOCK_MONOTONIC, &ts);
				uint64_t ns =
					(uint64_t)ts.tv_nsec + wait_us * 1000;
				ts.tv_sec += (time_t)(ns / 1000000000u);
				ts.tv_nsec = (long)(ns % 1000000000u);
				pthread_cond_timedwait(&cl->wake, &cl->mu, &ts);
			}
			continue;
		}
		sync_round(cl);
		last_sync = now_us();
	}
	pthread_mutex_unlock(&cl->mu);
	return NULL;
}

/* Under the lock: the active segment is half full and has no successor
 * yet. (An idle log thus writes no spare.) */
static bool spare_wanted(struct commitlog *cl)
{
	return !cl->spare && !cl->preparing && !cl->failed &&
	       !cl->prep_failed &&
	       cl->active->written >= cl->o.segment_size / 2;
}

/* Creates the next segment (zero-filled under batch and group) once the
 * active one is half full: the spare is ready before it is needed, off
 * every writer's and the syncer's path. */
static void *preparer_main(void *arg)
{
	struct commitlog *cl = arg;
	thread_name_self("commitlog-prep");
	pthread_mutex_lock(&cl->mu);
	while (!cl->stop) {
		if (!spare_wanted(cl)) {
			pthread_cond_wait(&cl->need_spare, &cl->mu);
			continue;
		}
		uint64_t id = cl->next_id++;
		cl->preparing = true;
		pthread_mutex_unlock(&cl->mu);
		struct segment *s = segment_create(cl, id, cl->buffered);
		if (!s)
			LOG_AT(LOG_LEVEL_WARN,
			       "cannot prepare a commitlog segment: %s",
			       err_msg());
		pthread_mutex_lock(&cl->mu);
		cl->preparing = false;
		if (s)
			cl->spare = s;
		else
			cl->prep_failed = true;
		pthread_cond_broadcast(&cl->progress);
	}
	pthread_mutex_unlock(&cl->mu);
	return NULL;
}

int commitlog_start(struct commitlog *cl, uint64_t min_id)
{
	if (min_id > cl->next_id)
		cl->next_id = min_id;
	struct segment *s = segment_create(cl, cl->next_id++, cl->buffered);
	if (!s)
		return -1;
	pthread_mutex_lock(&cl->mu);
	struct segment **pp = &cl->segs;
	while (*pp)
		pp = &(*pp)->next;
	*pp = s;
	cl->active = s;
	cl->last_marker = 0;
	cl->synced = (struct clpos){s->id, s->written};
	pthread_mutex_unlock(&cl->mu);
	if (pthread_create(&cl->thread, NULL, syncer_main, cl) != 0)
		return err_set(ERR_IO, "cannot start the commitlog syncer");
	cl->running = true;
	if (pthread_create(&cl->preparer, NULL, preparer_main, cl) != 0) {
		commitlog_sync_now(cl);
		pthread_mutex_lock(&cl->mu);
		cl->stop = true;
		pthread_cond_signal(&cl->wake);
		pthread_mutex_unlock(&cl->mu);
		pthread_join(cl->thread, NULL);
		cl->running = false;
		return err_set(ERR_IO, "cannot start the commitlog preparer");
	}
	return 0;
}

/* Under the lock: makes the spare the active segment. */
static int rollover(struct commitlog *cl)
{
	/* periodic: the sealed segment's deferred records, before sealing */
	if (flush_pend(cl, cl->active))
		return -1;
	while (!cl->spare && cl->preparing)
		pthread_cond_wait(&cl->progress, &cl->mu);
	if (!cl->spare) {
		/* The preparer failed (or is not running): allocate one
		 * here, quickly, without zero-filling it. */
		uint64_t id = cl->next_id++;
		pthread_mutex_unlock(&cl->mu);
		struct segment *s = segment_create(cl, id, false);
		pthread_mutex_lock(&cl->mu);
		if (!s)
			return -1;
		if (cl->spare) { /* raced with the preparer: keep order */
			env_unlink(cl->o.env, cl->spare->path);
			segment_free(cl->spare);
		}
		cl->spare = s;
	}
	struct segment *old = cl->active;
	old->sealed = true;
	cl->seals_pending++;
	cl->pend_writes = 0; /* the seal covers them */
	struct segment **pp = &cl->segs;
	while (*pp)
		pp = &(*pp)->next;
	*pp = cl->spare;
	cl->active = cl->spare;
	cl->spare = NULL;
	cl->prep_failed = false;
	cl->last_marker = 0;
	pthread_cond_signal(&cl->wake);
	return 0;
}

/* The bytes a mutation record of `len` takes; refused past half a segment. */
static int record_size(const struct commitlog *cl, size_t len, size_t *rec)
{
	*rec = CL_REC_OVERHEAD + 1 + len;
	if (*rec + CL_HEADER + CL_MARKER_LEN > cl->o.segment_size / 2)
		return err_set(ERR_INVALID,
			       "mutation of %zu bytes is larger "
			       "than half a commitlog segment",
			       len);
	return 0;
}

/* Under the lock, before an append of `rec` bytes: fails a stopped log,
 * rolls over a full segment. rollover() drops the lock while it waits
 * for (or creates) the next segment; one writer rolls over at a time,
 * and the others check again after it, so that segments become active
 * in id order and each is sealed once. (Two at once could seal a fresh
 * segment and make a lower id active after a higher one: `synced` and
 * every position comparison assume ids only grow.) */
static int make_room(struct commitlog *cl, size_t rec)
{
	for (;;) {
		if (cl->failed)
			return err_set(cl->fail_code, "commitlog stopped: %s",
				       cl->fail_msg);
		if (cl->active->written + rec + CL_MARKER_LEN <=
		    cl->o.segment_size)
			return 0;
		if (cl->rolling) {
			pthread_cond_wait(&cl->progress, &cl->mu);
			continue;
		}
		cl->rolling = true;
		int rc = rollover(cl);
		cl->rolling = false;
		pthread_cond_broadcast(&cl->progress);
		if (rc)
			return -1;
	}
}

int commitlog_append(struct commitlog *cl, const uint8_t *body, size_t len,
		     struct clpos *pos, storage_done_fn done, void *arg)
{
	size_t rec;
	if (record_size(cl, len, &rec))
		return -1;
	bool periodic = cl->o.sync_mode == CONF_COMMITLOG_SYNC_PERIODIC;
	struct waiter *w = NULL;
	if (!periodic && done && !(w = malloc(sizeof(*w))))
		return err_set(ERR_NOMEM, "commitlog waiter");
	pthread_mutex_lock(&cl->mu);
	int rc = make_room(cl, rec);
	struct segment *a = cl->active;
	if (!rc && cl->buffered) {
		rc = record_put(&a->pend, CL_TYPE_MUTATION, body, len);
		cl->st.writes += !rc;
	} else if (!rc && !(rc = flush_pend(cl, a))) {
		buf_clear(&cl->scratch);
		rc = record_put(&cl->scratch, CL_TYPE_MUTATION, body, len);
		if (!rc &&
		    env_file_pwrite(a->f, cl->scratch.data, rec, a->written)) {
			fail_log(cl);
			rc = -1;
		}
		if (!rc)
			a->on_file += rec;
	}
	if (rc) {
		pthread_mutex_unlock(&cl->mu);
		free(w);
		return -1;
	}
	if (cl->buffered) {
		if (cl->pend_writes++ == 0)
			cl->first_pend_us = now_us();
		if (cl->gathering && cl->pend_writes == cl->group_seen)
			pthread_cond_broadcast(&cl->progress);
	}
	a->written += rec;
	*pos = (struct clpos){a->id, a->written};
	if (w) {
		*w = (struct waiter){*pos, done, arg, NULL};
		if (!cl->wait_head) {
			cl->wait_head = w;
			cl->first_pending_us = now_us();
			pthread_cond_signal(&cl->wake);
		} else {
			cl->wait_tail->next = w;
		}
		cl->wait_tail = w;
	} else if (a->pend.len >= CL_PEND_MAX &&
		   a->pend.len - rec < CL_PEND_MAX) {
		pthread_cond_signal(&cl->wake);
	}
	if (spare_wanted(cl))
		pthread_cond_signal(&cl->need_spare);
	pthread_mutex_unlock(&cl->mu);
	if (periodic && done)
		done(arg, 0, ERR_NONE);
	return 0;
}

int commitlog_append_deferred(struct commitlog *cl, const uint8_t *body,
			      size_t len, struct clpos *pos)
{
	if (cl->buffered)
		return err_set(ERR_INVALID, "deferred appends are for periodic "
					    "commitlogs");
	size_t rec;
	if (record_size(cl, len, &rec))
		return -1;
	pthread_mutex_lock(&cl->mu);
	int rc = make_room(cl, rec);
	struct segment *a = cl->active;
	if (!rc)
		rc = record_put(&a->pend, CL_TYPE_MUTATION, body, len);
	if (!rc) {
		a->written += rec;
		*pos = (struct clpos){a->id, a->written};
	}
	if (!rc && spare_wanted(cl))
		pthread_cond_signal(&cl->need_spare);
	pthread_mutex_unlock(&cl->mu);
	return rc ? -1 : 0;
}

int commitlog_write_pending(struct commitlog *cl)
{
	pthread_mutex_lock(&cl->mu);
	int rc = 0;
	if (cl->failed)
		rc = err_set(cl->fail_code, "commitlog stopped: %s",
			     cl->fail_msg);
	else if (flush_pend(cl, cl->active))
		rc = err_set(cl->fail_code, "commitlog stopped: %s",
			     cl->fail_msg);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

struct clpos commitlog_position(struct commitlog *cl)
{
	pthread_mutex_lock(&cl->mu);
	struct clpos p =
		cl->active ? (struct clpos){cl->active->id, cl->active->written}
			   : (struct clpos){cl->next_id, 0};
	pthread_mutex_unlock(&cl->mu);
	return p;
}

int commitlog_sync_now(struct commitlog *cl)
{
	pthread_mutex_lock(&cl->mu);
	uint64_t gen = ++cl->sync_requested;
	pthread_cond_signal(&cl->wake);
	while (cl->running && !cl->failed && (int64_t)(cl->sync_done - gen) < 0)
		pthread_cond_wait(&cl->progress, &cl->mu);
	int rc = cl->failed ? err_set(cl->fail_code, "commitlog stopped: %s",
				      cl->fail_msg)
			    : 0;
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

void commitlog_discard_before(struct commitlog *cl, struct clpos pos)
{
	struct segment *gone = NULL;
	pthread_mutex_lock(&cl->mu);
	struct segment **pp = &cl->segs;
	while (*pp) {
		struct segment *s = *pp;
		if (s != cl->active && s->sealed && !s->f && s->id < pos.seg) {
			*pp = s->next;
			s->next = gone;
			gone = s;
		} else {
			pp = &s->next;
		}
	}
	pthread_mutex_unlock(&cl->mu);
	while (gone) {
		struct segment *next = gone->next;
		if (env_unlink(cl->o.env, gone->path))
			LOG_AT(LOG_LEVEL_WARN, "cannot remove %s: %s",
			       gone->path, err_msg());
		segment_free(gone);
		gone = next;
	}
}

uint64_t commitlog_segment_count(struct commitlog *cl)
{
	uint64_t n = 0;
	pthread_mutex_lock(&cl->mu);
	for (struct segment *s = cl->segs; s; s = s->next)
		n++;
	pthread_mutex_unlock(&cl->mu);
	return n;
}

void commitlog_sync_stats(struct commitlog *cl,
			  struct commitlog_sync_stats *out)
{
	pthread_mutex_lock(&cl->mu);
	*out = cl->st;
	pthread_mutex_unlock(&cl->mu);
}

bool commitlog_failed(struct commitlog *cl)
{
	pthread_mutex_lock(&cl->mu);
	bool f = cl->failed;
	pthread_mutex_unlock(&cl->mu);
	return f;
}

void commitlog_delete(struct commitlog *cl)
{
	if (!cl)
		return;
	if (cl->running) {
		commitlog_sync_now(cl);
		pthread_mutex_lock(&cl->mu);
		cl->stop = true;
		pthread_cond_signal(&cl->wake);
		pthread_cond_signal(&cl->need_spare);
		pthread_mutex_unlock(&cl->mu);
		pthread_join(cl->thread, NULL);
		pthread_join(cl->preparer, NULL);
	}
	struct waiter *w =
		take_waiters(cl, (struct clpos){UINT64_MAX, UINT64_MAX});
	deliver(cl, w, -1, ERR_CLOSED);
	while (cl->segs) {
		struct segment *s = cl->segs;
		cl->segs = s->next;
		/* the last sync's marker, written as an unbuffered log
		 * writes it: not synced */
		if (s->f && s->pend.len && !cl->failed)
			env_file_pwrite(s->f, s->pend.data, s->pend.len,
					s->on_file);
		segment_free(s);
	}
	if (cl->spare) {
		env_unlink(cl->o.env, cl->spare->path);
		segment_free(cl->spare);
	}
	buf_free(&cl->scratch);
	buf_free(&cl->io);
	pthread_mutex_destroy(&cl->mu);
	pthread_cond_destroy(&cl->wake);
	pthread_cond_destroy(&cl->progress);
	pthread_cond_destroy(&cl->need_spare);
	free(cl->dir);
	free(cl);
}
