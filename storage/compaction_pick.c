/*
 * Choosing a compaction's inputs: size-tiered (with Cassandra's 50 MiB
 * floor), time-window, leveled, the single-SSTable tombstone compaction
 * when the strategy finds nothing, and fully expired SSTables before any
 * of them. Decisions only: nothing here reads or writes a file; the job
 * runs in compaction.c, its log in compaction_log.c.
 */
#include "storage/compaction_internal.h"

#include <stdlib.h>
#include <string.h>

#define STCS_BUCKET_LOW  0.5
#define STCS_BUCKET_HIGH 1.5
#define STCS_MIN_SIZE    (50ull << 20)
/* Leveled: levels 0..LCS_LEVELS-1 (Cassandra's 9); L0 SSTables past
 * which L0 compacts size-tiered first (its MAX_COMPACTING_L0). */
#define LCS_LEVELS 9
#define LCS_L0_MAX 32

/* ---- choosing inputs ----------------------------------------------------- */

static int cmp_size(const void *a, const void *b)
{
	const struct sstable *x = *(struct sstable *const *)a;
	const struct sstable *y = *(struct sstable *const *)b;
	return (x->disk_bytes > y->disk_bytes) -
	       (x->disk_bytes < y->disk_bytes);
}

/* Size-tiered: the smallest bucket of similar sizes with at least
 * min_threshold members, at most max_threshold of them. */
static size_t pick_stcs(struct sstable **cand, size_t n, uint32_t min_t,
			uint32_t max_t, struct sstable **out)
{
	if (n < min_t || n < 2)
		return 0;
	qsort(cand, n, sizeof(*cand), cmp_size);
	size_t start = 0;
	while (start < n) {
		double avg = (double)cand[start]->disk_bytes;
		size_t end = start + 1;
		while (end < n) {
			double sz = (double)cand[end]->disk_bytes;
			bool small = sz < STCS_MIN_SIZE && avg < STCS_MIN_SIZE;
			if (!small && (sz < avg * STCS_BUCKET_LOW ||
				       sz > avg * STCS_BUCKET_HIGH))
				break;
			avg = (avg * (double)(end - start) + sz) /
			      (double)(end - start + 1);
			end++;
		}
		if (end - start >= min_t) {
			size_t k = end - start < max_t ? end - start : max_t;
			memcpy(out, cand + start, k * sizeof(*out));
			return k;
		}
		start = end;
	}
	return 0;
}

/* Time-window: SSTables grouped by the window of their newest write;
 * the newest window compacts size-tiered, an older window with two or
 * more SSTables compacts into one. */
static size_t pick_twcs(struct sstable **cand, size_t n,
			const struct storage_table_options *o,
			struct sstable **out)
{
	int64_t w = o->compaction_window_seconds > 0
			    ? o->compaction_window_seconds * 1000000
			    : 86400 * 1000000LL;
	int64_t newest = INT64_MIN;
	for (size_t i = 0; i < n; i++)
		if (cand[i]->stats.max_ts / w > newest)
			newest = cand[i]->stats.max_ts / w;
	for (size_t i = 0; i < n; i++) {
		int64_t win = cand[i]->stats.max_ts / w;
		if (win == newest)
			continue;
		size_t k = 0;
		for (size_t j = 0; j < n && k < o->max_threshold; j++)
			if (cand[j]->stats.max_ts / w == win)
				out[k++] = cand[j];
		if (k >= 2)
			return k;
	}
	size_t k = 0;
	struct sstable **cur = calloc(n ? n : 1, sizeof(*cur));
	if (!cur)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (cand[i]->stats.max_ts / w == newest)
			cur[k++] = cand[i];
	k = pick_stcs(cur, k, o->min_threshold, o->max_threshold, out);
	free(cur);
	return k;
}

/* SSTables a compaction may take: not those best_effort excluded. */
static size_t usable(const struct version *v, struct sstable **out)
{
	size_t n = 0;
	for (size_t i = 0; i < v->count; i++)
		if (!atomic_load(&v->ssts[i]->excluded))
			out[n++] = v->ssts[i];
	return n;
}

/* Incremental repair keeps repaired, unrepaired and each pending session's
 * SSTables apart: a compaction takes SSTables of one state only. */
static bool same_repair_state(const struct sstable *a, const struct sstable *b)
{
	return (a->stats.repaired_at != 0) == (b->stats.repaired_at != 0) &&
	       !memcmp(a->stats.pending_repair, b->stats.pending_repair,
		       sizeof(a->stats.pending_repair));
}

size_t storage_compaction_repair_states(const struct version *v,
					struct sstable **out)
{
	size_t n = 0;
	for (size_t i = 0; i < v->count; i++) {
		struct sstable *s = v->ssts[i];
		if (atomic_load(&s->excluded))
			continue;
		size_t k = 0;
		while (k < n && !same_repair_state(out[k], s))
			k++;
		if (k == n)
			out[n++] = s;
	}
	return n;
}

/* Keeps in cand[0..n) those of cand[from]'s repair state, in order; the
 * others move to the tail. Returns how many were kept. */
static size_t repair_group(struct sstable **cand, size_t n, size_t from)
{
	struct sstable *ref = cand[from];
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (same_repair_state(cand[i], ref)) {
			struct sstable *s = cand[i];
			memmove(cand + k + 1, cand + k,
				(i - k) * sizeof(*cand));
			cand[k++] = s;
		}
	return k;
}

/* ---- tombstone compactions ---------------------------------------------- */

static bool overlaps(const struct sstable *a, const struct sstable *b)
{
	return a->stats.min_token <= b->stats.max_token &&
	       b->stats.min_token <= a->stats.max_token;
}

/* Estimated partitions of `s` within the token ranges of `ov`: the share
 * of its index blocks (summary entries) that start inside one. */
static double keys_in_ranges(const struct sstable *s, struct sstable **ov,
			     size_t nov)
{
	size_t in = 0;
	for (size_t i = 0; i < s->sum_count; i++)
		for (size_t k = 0; k < nov; k++)
			if (s->sum_token[i] >= ov[k]->stats.min_token &&
			    s->sum_token[i] <= ov[k]->stats.max_token) {
				in++;
				break;
			}
	return (double)s->stats.partition_count * (double)in /
	       (double)s->sum_count;
}

/* Cassandra's AbstractCompactionStrategy.worthDroppingTombstones: old
 * enough, droppable ratio over the threshold, and (unless unchecked) no
 * overlapping SSTable, or `s` fully expired against them, or enough of
 * its partitions outside their ranges. The estimate only chooses the job:
 * what the job may purge is decided per key (purge_limit). */
static bool worth_dropping_tombstones(struct sstable *s, struct sstable **cand,
				      size_t n,
				      const struct storage_table_options *o,
				      int64_t now, int64_t gc_before,
				      int64_t mt_min_ts)
{
	const struct sst_stats *st = &s->stats;
	if (!st->has_v2 ||
	    now < st->created_at + o->tombstone_compaction_interval)
		return false;
	double ratio = sst_droppable_ratio(st, gc_before);
	if (ratio <= o->tombstone_threshold)
		return false;
	if (o->unchecked_tombstone_compaction)
		return true;
	struct sstable **ov = calloc(n ? n : 1, sizeof(*ov));
	if (!ov)
		return false;
	size_t nov = 0;
	int64_t ov_min_ts = mt_min_ts;
	for (size_t i = 0; i < n; i++)
		if (cand[i] != s && overlaps(cand[i], s)) {
			ov[nov++] = cand[i];
			if (cand[i]->stats.min_ts < ov_min_ts)
				ov_min_ts = cand[i]->stats.min_ts;
		}
	bool worth;
	if (nov == 0)
		worth = true;
	else if (!st->has_live_no_ttl && st->max_ldt < gc_before &&
		 st->max_ts < ov_min_ts)
		worth = true; /* fully expired: nothing newer elsewhere */
	else if (s->sum_count < 2)
		worth = false;
	else {
		double keys = (double)st->partition_count;
		double rest = keys - keys_in_ranges(s, ov, nov);
		worth = keys > 0 &&
			rest / keys * ratio > o->tombstone_threshold;
	}
	free(ov);
	return worth;
}

/* The SSTable most worth a tombstone compaction, if any (1 or 0), of
 * those with a generation below `below`. */
static size_t pick_tombstone(struct sstable **cand, size_t n,
			     const struct storage_table_options *o, int64_t now,
			     int64_t mt_min_ts, uint64_t below,
			     struct sstable **out)
{
	int64_t gc_before = now - o->gc_grace_seconds;
	double best = -1;
	for (size_t i = 0; i < n; i++) {
		if (cand[i]->gen >= below ||
		    !worth_dropping_tombstones(cand[i], cand, n, o, now,
					       gc_before, mt_min_ts))
			continue;
		double r = sst_droppable_ratio(&cand[i]->stats, gc_before);
		if (r > best) {
			best = r;
			out[0] = cand[i];
		}
	}
	return best >= 0 ? 1 : 0;
}

/* ---- fully expired SSTables -------------------------------------------- */

/* Nothing but tombstones and expired cells, all past gc_grace, and no
 * incremental repair session holding it. */
static bool all_expired(const struct sstable *s, int64_t gc_before)
{
	const struct sst_stats *st = &s->stats;
	return st->has_v2 && !st->has_live_no_ttl && st->partition_count > 0 &&
	       st->max_ldt < gc_before && !sst_stats_pending(st);
}

/* Cassandra's CompactionController.getFullyExpiredSSTables: those of
 * cand[0..n) that hold nothing but tombstones and expired cells past
 * gc_grace, and whose newest write is older than the oldest write of the
 * memtables and of every overlapping SSTable not taken. Such an SSTable
 * shadows nothing and holds nothing live: a compaction of them together
 * purges every atom (purge_limit sees only SSTables older than none of
 * them) and its output, empty, is not kept, so they go whole (time-window
 * tables drop their old windows this way) before the strategy picks anything.
 * Taking fewer could keep another's purge back, so the set is shrunk to
 * a fixed point instead. Pending incremental-repair SSTables wait for
 * their session. */
static size_t pick_expired(struct sstable **cand, size_t n, int64_t gc_before,
			   int64_t mt_min_ts, struct sstable **out)
{
	bool *in = calloc(n ? n : 1, sizeof(*in));
	if (!in)
		return 0;
	for (size_t i = 0; i < n; i++)
		in[i] = all_expired(cand[i], gc_before) &&
			cand[i]->stats.max_ts < mt_min_ts;
	for (bool changed = true; changed;) {
		changed = false;
		for (size_t i = 0; i < n; i++)
			for (size_t j = 0; in[i] && j < n; j++)
				if (!in[j] && overlaps(cand[j], cand[i]) &&
				    cand[j]->stats.min_ts <=
					    cand[i]->stats.max_ts) {
					in[i] = false;
					changed = true;
				}
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (in[i])
			out[k++] = cand[i];
	free(in);
	return k;
}

/* ---- leveled ------------------------------------------------------------- */

static int cmp_min_token(const void *a, const void *b)
{
	const struct sstable *x = *(struct sstable *const *)a;
	const struct sstable *y = *(struct sstable *const *)b;
	return (x->stats.min_token > y->stats.min_token) -
	       (x->stats.min_token < y->stats.min_token);
}

/* The candidates of level `lv`, sorted by first token. */
static size_t level_of(struct sstable **cand, size_t n, uint32_t lv,
		       struct sstable **out, uint64_t *bytes)
{
	size_t k = 0;
	*bytes = 0;
	for (size_t i = 0; i < n; i++)
		if (cand[i]->stats.level == lv) {
			out[k++] = cand[i];
			*bytes += cand[i]->stats.data_size;
		}
	qsort(out, k, sizeof(*out), cmp_min_token);
	return k;
}

/* Adds to out[k..] the SSTables of level `lv` overlapping [lo, hi]. */
static size_t add_overlapping(struct sstable **cand, size_t n, uint32_t lv,
			      int64_t lo, int64_t hi, struct sstable **out,
			      size_t k)
{
	for (size_t i = 0; i < n; i++)
		if (cand[i]->stats.level == lv &&
		    cand[i]->stats.min_token <= hi &&
		    cand[i]->stats.max_token >= lo)
			out[k++] = cand[i];
	return k;
}

/* Cassandra's LeveledManifest, simplified: level n (>= 1) holds at most
 * fanout^n * sstable_size bytes of SSTables that do not overlap each
 * other. The first level over its size (highest first) compacts one
 * SSTable (round robin over the key space) with the ones of the next
 * level it overlaps; else L0 at min_threshold SSTables compacts with the
 * L1 ones it overlaps; L0 beyond LCS_L0_MAX (compaction behind) compacts
 * size-tiered within L0 first. Outputs are cut at sstable_size. */
static size_t pick_lcs(struct table *t, struct sstable **cand, size_t n,
		       const struct storage_table_options *o,
		       uint32_t *out_level, struct sstable **out)
{
	struct sstable **lv = calloc(n + 1, sizeof(*lv));
	if (!lv)
		return 0;
	uint64_t bytes;
	size_t k = 0, n0 = level_of(cand, n, 0, lv, &bytes);
	if (n0 > LCS_L0_MAX) {
		k = pick_stcs(lv, n0, o->min_threshold, o->max_threshold, out);
		*out_level = 0;
	}
	for (uint32_t l = LCS_LEVELS - 2; !k && l >= 1; l--) {
		size_t nl = level_of(cand, n, l, lv, &bytes);
		double limit = (double)o->sstable_size_bytes;
		for (uint32_t i = 0; i < l; i++)
			limit *= (double)o->fanout_size;
		if (nl == 0 || (double)bytes <= limit)
			continue;
		size_t pick = 0; /* the first after the last one compacted */
		while (pick < nl && lv[pick]->stats.min_token <= t->lcs_next[l])
			pick++;
		if (pick == nl)
			pick = 0;
		out[0] = lv[pick];
		t->lcs_next[l] = lv[pick]->stats.max_token;
		k = add_overlapping(cand, n, l + 1, lv[pick]->stats.min_token,
				    lv[pick]->stats.max_token, out, 1);
		*out_level = l + 1;
	}
	if (!k && n0 >= o->min_threshold && n0 >= 2) {
		level_of(cand, n, 0, lv, &bytes); /* lv held other levels */
		size_t take = n0 < LCS_L0_MAX ? n0 : LCS_L0_MAX;
		int64_t lo = INT64_MAX, hi = INT64_MIN;
		for (size_t i = 0; i < take; i++) {
			out[k++] = lv[i];
			if (lv[i]->stats.min_token < lo)
				lo = lv[i]->stats.min_token;
			if (lv[i]->stats.max_token > hi)
				hi = lv[i]->stats.max_token;
		}
		k = add_overlapping(cand, n, 1, lo, hi, out, k);
		*out_level = 1;
	}
	free(lv);
	return k;
}

size_t storage_compaction_pick_inputs(struct table *t, bool major, bool cleanup,
				      const struct sstable *state, int64_t now,
				      int64_t mt_min_ts, uint64_t tomb_below,
				      struct pick *p, struct sstable **out)
{
	*p = (struct pick){0};
	const struct version *v = t->version;
	const struct storage_table_options *o = &t->meta->options;
	p->leveled = o->compaction == STORAGE_COMPACTION_LEVELED;
	if (major || cleanup) {
		/* leveled: everything in one sorted run, at L1 */
		p->out_level = p->leveled ? 1 : 0;
		size_t n = usable(v, out), k = 0;
		for (size_t i = 0; i < n; i++)
			if (!state || same_repair_state(out[i], state))
				out[k++] = out[i];
		return k < (cleanup ? 1u : 2u) ? 0 : k;
	}
	struct sstable **cand = calloc(v->count + 1, sizeof(*cand));
	if (!cand)
		return 0;
	size_t total = usable(v, cand), left = total;
	size_t k = pick_expired(cand, total, now - o->gc_grace_seconds,
				mt_min_ts, out);
	if (k) {
		free(cand);
		return k;
	}
	struct sstable **grp = cand;
	while (left > 0 && k == 0) {
		/* one repair state at a time: grp[0..nc) share it */
		size_t nc = repair_group(grp, left, 0);
		k = o->compaction == STORAGE_COMPACTION_TIME_WINDOW
			    ? pick_twcs(grp, nc, o, out)
		    : p->leveled ? pick_lcs(t, grp, nc, o, &p->out_level, out)
				 : pick_stcs(grp, nc, o->min_threshold,
					     o->max_threshold, out);
		grp += nc;
		left -= nc;
	}
	if (k == 0) {
		/* one input: no mixing; the estimate sees every overlap */
		k = pick_tombstone(cand, total, o, now, mt_min_ts, tomb_below,
				   out);
		p->tombstone = k > 0;
		if (k)
			p->out_level = out[0]->stats.level;
	}
	free(cand);
	return k;
}

bool storage_engine_compaction_due(struct storage *db, struct table *t)
{
	if (t->compacting || t->truncating || t->dropped ||
	    !db->o.auto_compaction)
		return false;
	struct sstable **in = calloc(t->version->count + 1, sizeof(*in));
	if (!in)
		return false;
	/* the leveled picker moves its round-robin cursor: keep it */
	int64_t cursor[9];
	memcpy(cursor, t->lcs_next, sizeof(cursor));
	int64_t mt_min_ts = t->active->min_ts;
	for (size_t i = 0; i < t->flushing_count; i++)
		if (t->flushing[i]->min_ts < mt_min_ts)
			mt_min_ts = t->flushing[i]->min_ts;
	struct pick pk;
	size_t n = storage_compaction_pick_inputs(
		t, false, false, NULL, storage_engine_now_sec(db), mt_min_ts,
		UINT64_MAX, &pk, in);
	memcpy(t->lcs_next, cursor, sizeof(cursor));
	free(in);
	return n > 0;
}
