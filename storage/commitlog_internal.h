/*
 * Commitlog: one log shared by every table, in preallocated segments.
 *
 * Segment file CommitLog-1-<id>.log (id increases for the life of the
 * data directory):
 *
 *   header  "CSCL" | be16 version (1) | be64 segment id | be32 masked crc32c
 *   records be32 length | be32 masked crc32c(length) | body |
 *           be32 masked crc32c(body)
 *   zeros   (preallocated; under batch and group written when the
 *            segment is created, so syncs overwrite written blocks; a
 *            zero length ends the segment's data)
 *
 * A body is a type byte and its payload: 1 = mutation (the mutation
 * encoding), 2 = sync marker (be64 offset: every byte of this segment below
 * it was fdatasync'ed before the marker was written).
 *
 * Replay reads the segments in id order. A bad record at or past the last
 * sync marker of its segment is an unsynced torn tail: replay of that
 * segment stops there and the discarded record is counted. A bad record
 * below a sync marker, a bad header (other than an all-zero header of the
 * newest segment, which crashed while being created), or a mutation that
 * does not decode is corruption: commit_failure_policy decides (stop:
 * refuse to start, naming the file and offset; ignore: skip the rest of the
 * segment).
 *
 * Sync: `periodic` acknowledges after write(2) and syncs every period;
 * `batch` acknowledges after the fdatasync that covers the write (writes
 * arriving during one sync share the next); `group` gathers the writes
 * for at most the window, then one fdatasync covers all of them (the
 * syncer thread, for asynchronous writes: the window after the first
 * pending write; a synchronous writer leading the sync: until the writers
 * of the last sync are back, bounded by a sync's duration and the
 * window).
 * batch and group buffer records in memory; the thread that syncs writes
 * them with one pwrite before its fdatasync. fdatasync runs on the log's
 * syncer thread or on a caller of commitlog_wait_durable (never an event
 * loop); a preparer thread writes the next segment once the active one is
 * half full. A failed fdatasync stops the log: every later write fails
 * (the kernel may have dropped the pages).
 */
#ifndef CASSINI_STORAGE_COMMITLOG_INTERNAL_H
#define CASSINI_STORAGE_COMMITLOG_INTERNAL_H

#include "common/env.h"
#include "storage/storage.h"

#include <stdbool.h>
#include <stdint.h>

/* An acknowledgement from a thread other than the caller's: through the
 * post hook to the caller's loop, or at once without one (tests). */
static inline void storage_post_done(storage_post_fn post, void *post_arg,
				     storage_done_fn fn, void *arg, int status,
				     enum err_code code)
{
	if (post)
		post(post_arg, fn, arg, status, code);
	else
		fn(arg, status, code);
}

struct clpos {
	uint64_t seg;
	uint64_t off;
};

static inline int clpos_cmp(struct clpos a, struct clpos b)
{
	if (a.seg != b.seg)
		return a.seg < b.seg ? -1 : 1;
	return (a.off > b.off) - (a.off < b.off);
}

struct commitlog_options {
	struct env *env;
	const char *dir;
	int sync_mode; /* enum conf_commitlog_sync */
	uint64_t period_ms;
	uint64_t window_ms;
	uint64_t segment_size;
	int failure_policy; /* enum conf_failure_policy */
	storage_post_fn post;
	void *post_arg;
};

struct commitlog;

struct commitlog_replay_stats {
	uint64_t records;
	uint64_t torn;    /* records discarded as torn tails */
	uint64_t skipped; /* records skipped under the ignore policy */
	uint64_t max_seg; /* highest segment id found */
};

/* Called for each valid mutation record; returning -1 aborts replay. */
typedef int (*commitlog_replay_fn)(void *arg, struct clpos pos,
				   const uint8_t *body, size_t len);

/* Opens the log directory; replays nothing yet. */
struct commitlog *commitlog_new(const struct commitlog_options *o);
/* Replays every segment found, in order. */
int commitlog_replay(struct commitlog *cl, commitlog_replay_fn fn, void *arg,
		     struct commitlog_replay_stats *stats);
/* Opens a fresh segment with an id above both every existing segment and
 * `min_id`, and starts the syncer. Existing segments stay until discarded. */
int commitlog_start(struct commitlog *cl, uint64_t min_id);
/* Appends one mutation record. *pos is where the record ends. For batch
 * and group `done` fires through the post hook after the covering
 * fdatasync; for periodic it fires before return. Thread-safe. */
int commitlog_append(struct commitlog *cl, const uint8_t *body, size_t len,
		     struct clpos *pos, storage_done_fn done, void *arg);

/* periodic only: appends a record without writing it yet (no system
 * call); commitlog_write_pending writes every record so appended, in one
 * pwrite, and whatever else writes the log writes them first. Acknowledge
 * such a record only after commitlog_write_pending returned 0 (the write(2)
 * that periodic promises). Thread-safe. */
int commitlog_append_deferred(struct commitlog *cl, const uint8_t *body,
			      size_t len, struct clpos *pos);
int commitlog_write_pending(struct commitlog *cl);

/* Blocks until every record before `pos` is durable; the calling thread
 * runs the fdatasync itself when no sync is in progress (group commit:
 * one sync covers everything appended meanwhile). In group mode it first
 * waits for the rest of the group (commitlog_gather_until). Not for
 * event-loop threads. */
int commitlog_wait_durable(struct commitlog *cl, struct clpos pos);

/* Group mode, synchronous writers: a writer about to lead a sync first
 * waits for the writers still coming, so that one fdatasync covers them
 * all rather than whoever happened to arrive during the previous sync.
 * The estimate of how many are coming is `seen`: the writes the last
 * sync covered plus those appended while it ran (each synchronous writer
 * has one write in flight). The wait ends as soon as `seen` writes are
 * pending, and at the latest one smoothed sync duration after the later
 * of the last sync's end and the oldest pending write (a longer wait
 * would cost more than it gathers), never past the window after the
 * oldest pending write. A lone writer (seen 1) never waits. */
struct commitlog_gather {
	uint64_t pending;     /* writes appended, not yet taken by a sync */
	uint64_t seen;        /* writers around the last sync */
	uint64_t oldest_us;   /* when the oldest pending write was appended */
	uint64_t last_end_us; /* when the last sync ended */
	uint64_t sync_us;     /* smoothed duration of pwrite + fdatasync */
	uint64_t window_us;   /* commitlog_sync_group_window */
};
/* The monotonic time (µs) until which the leader waits; 0: sync now. */
uint64_t commitlog_gather_until(const struct commitlog_gather *g);
/* The position the next record will start at. */
struct clpos commitlog_position(struct commitlog *cl);
/* Deletes every segment that ends before `pos` (all of its records were
 * flushed to SSTables). */
void commitlog_discard_before(struct commitlog *cl, struct clpos pos);
/* Forces a sync now and waits for it. */
int commitlog_sync_now(struct commitlog *cl);
uint64_t commitlog_segment_count(struct commitlog *cl);

/* batch and group: fdatasyncs that made writes durable (a sealed
 * segment's two count two) and the records appended; their ratio is the
 * writes one fdatasync covers. */
struct commitlog_sync_stats {
	uint64_t syncs;
	uint64_t writes;
	uint64_t sync_us; /* time in pwrite + fdatasync of the active segment */
	uint64_t gathers; /* leaders that waited for more writers */
	uint64_t gather_us; /* time they waited */
};
void commitlog_sync_stats(struct commitlog *cl,
			  struct commitlog_sync_stats *out);
bool commitlog_failed(struct commitlog *cl);
/* Stops the syncer (syncing what was written unless the log failed) and
 * frees the log. */
void commitlog_delete(struct commitlog *cl);

/* Decodes one segment image for the fuzzer: calls fn per valid record and
 * returns 0, or -1 at corruption. `last` tolerates a torn tail. */
int commitlog_scan_segment(const uint8_t *p, size_t len, bool last,
			   commitlog_replay_fn fn, void *arg,
			   struct commitlog_replay_stats *stats,
			   uint64_t *bad_offset);

#endif
