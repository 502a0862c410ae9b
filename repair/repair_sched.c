/*
 * The scheduled-repair state machine (see repair_sched.h): picks the next
 * segment by deadline, runs it as an exclusive repair session, sleeps by
 * intensity, retries and splits failing segments, starts and completes
 * cycles. The state file and the status text are repair_sched_io.c.
 *
 * Invariants: at most one segment runs (run_table != NULL) and then the
 * local repair session is ours; `timer` is armed whenever the scheduler
 * is started and no segment runs; a table's segments stay in token order
 * and a split replaces a segment by its two halves in place.
 */
#define LOG_MODULE "repair"
#include "repair/repair_sched_internal.h"
#include "repair/repair_text.h"

#include "common/err.h"
#include "common/log.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void repair_sched_options_default(struct repair_sched_options *o)
{
	memset(o, 0, sizeof(*o));
	o->intensity = 0.9;
	o->partitions_per_segment = 1u << 20;
	o->bytes_per_segment = 1ull << 30;
	o->segment_timeout_ms = 30 * 60 * 1000;
	o->segment_retries = 3;
	o->retry_delay_ms = 30 * 1000;
	o->gc_grace_fraction = 0.7;
	o->min_cycle_interval_ms = 24ull * 3600 * 1000;
	o->check_interval_ms = 30 * 1000;
	o->initial_delay_ms = 5 * 60 * 1000;
}

/* ---- pure helpers -------------------------------------------------------- */

static int parse_hhmm(const char *p, const char **end, uint16_t *out)
{
	if (p[0] < '0' || p[0] > '9' || p[1] < '0' || p[1] > '9' ||
	    p[2] != ':' || p[3] < '0' || p[3] > '9' || p[4] < '0' || p[4] > '9')
		return -1;
	int h = (p[0] - '0') * 10 + (p[1] - '0');
	int m = (p[3] - '0') * 10 + (p[4] - '0');
	if (h > 24 || m > 59 || (h == 24 && m != 0))
		return -1;
	*out = (uint16_t)(h * 60 + m);
	*end = p + 5;
	return 0;
}

int repair_sched_window_parse(const char *text, struct repair_sched_window *out)
{
	const char *p = text;
	uint16_t a, b;
	if (parse_hhmm(p, &p, &a) || *p++ != '-' || parse_hhmm(p, &p, &b) || *p)
		return err_set(ERR_CONFIG,
			       "'%s' is not a time window HH:MM-HH:MM", text);
	out->start = a % 1440;
	out->end = b % 1440;
	return 0;
}

bool repair_sched_windows_open(const struct repair_sched_window *w, size_t n,
			       int64_t wall_us)
{
	if (!n)
		return true;
	int64_t day_min = wall_us / 60000000 % 1440;
	if (day_min < 0)
		day_min += 1440;
	for (size_t i = 0; i < n; i++) {
		int64_t a = w[i].start, b = w[i].end;
		if (a == b)
			return true;
		if (a < b ? day_min >= a && day_min < b
			  : day_min >= a || day_min < b)
			return true;
	}
	return false;
}

int repair_sched_tuning_parse(const char *text, char *name, size_t cap,
			      struct repair_sched_tuning *out)
{
	*out = (struct repair_sched_tuning){
		.enabled = -1, .segments_per_node = -1, .incremental = -1};
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", text);
	char *save = NULL;
	char *tok = strtok_r(buf, " \t", &save);
	if (!tok || !strchr(tok, '.') || strchr(tok, '='))
		return err_set(
			ERR_CONFIG,
			"'%s': expected \"keyspace.table key=value ...\"",
			text);
	snprintf(name, cap, "%s", tok);
	while ((tok = strtok_r(NULL, " \t", &save))) {
		char *eq = strchr(tok, '=');
		if (!eq)
			return err_set(ERR_CONFIG, "'%s': expected key=value",
				       tok);
		*eq = '\0';
		const char *v = eq + 1;
		char *end;
		if (strcmp(tok, "enabled") == 0) {
			if (strcmp(v, "true") && strcmp(v, "false"))
				return err_set(ERR_CONFIG,
					       "enabled=%s: true or false", v);
			out->enabled = strcmp(v, "true") == 0;
		} else if (strcmp(tok, "incremental") == 0) {
			if (strcmp(v, "true") && strcmp(v, "false"))
				return err_set(ERR_CONFIG,
					       "incremental=%s: true or false",
					       v);
			out->incremental = strcmp(v, "true") == 0;
		} else if (strcmp(tok, "intensity") == 0) {
			double d = strtod(v, &end);
			if (*end || end == v || !(d > 0 && d <= 1))
				return err_set(ERR_CONFIG,
					       "intensity=%s: not in (0, 1]",
					       v);
			out->intensity = d;
		} else if (strcmp(tok, "bytes_per_segment") == 0) {
			unsigned long long n = strtoull(v, &end, 10);
			unsigned long long unit =
				!*end                     ? 1
				: strcmp(end, "KiB") == 0 ? 1ull << 10
				: strcmp(end, "MiB") == 0 ? 1ull << 20
				: strcmp(end, "GiB") == 0 ? 1ull << 30
							  : 0;
			if (end == v || v[0] == '-' || !unit || n < 1 ||
			    n > (1ull << 50) / unit)
				return err_set(ERR_CONFIG,
					       "bytes_per_segment=%s: a size "
					       "such as 512MiB",
					       v);
			out->bytes_per_segment = (int64_t)(n * unit);
		} else if (strcmp(tok, "segments_per_node") == 0 ||
			   strcmp(tok, "partitions_per_segment") == 0) {
			long long n = strtoll(v, &end, 10);
			bool pps = tok[0] == 'p';
			if (*end || end == v || n < (pps ? 1 : 0) ||
			    n > 1000000000000LL)
				return err_set(ERR_CONFIG,
					       "%s=%s: out of range", tok, v);
			if (pps)
				out->partitions_per_segment = n;
			else
				out->segments_per_node = n;
		} else {
			return err_set(ERR_CONFIG,
				       "unknown table setting '%s' (enabled, "
				       "incremental, intensity, "
				       "segments_per_node, "
				       "partitions_per_segment, "
				       "bytes_per_segment)",
				       tok);
		}
	}
	return 0;
}

int repair_sched_plan(const struct token_range_list *ranges,
		      const struct repair_sched_plan_in *in,
		      struct token_range_list *out)
{
	double total = 0;
	for (size_t i = 0; i < ranges->n; i++)
		total += token_range_fraction(ranges->v[i]);
	uint64_t per_segment = in->per_segment ? in->per_segment : 1;
	for (size_t i = 0; i < ranges->n; i++) {
		struct token_range r = ranges->v[i];
		double share = total > 0 ? token_range_fraction(r) / total : 1;
		uint64_t n = (uint64_t)ceil((double)in->partitions * share /
					    (double)per_segment);
		uint64_t m = (uint64_t)ceil(
			(double)in->segments_per_node * share - 1e-9);
		if (m > n)
			n = m;
		if (in->bytes_per_segment) {
			uint64_t b =
				(uint64_t)ceil((double)in->bytes * share /
					       (double)in->bytes_per_segment);
			if (b > n)
				n = b;
		}
		if (n < 1)
			n = 1;
		if (n > 1u << 20)
			n = 1u << 20;
		if (token_range_split(r, (size_t)n, out))
			return -1;
	}
	return 0;
}

int64_t repair_sched_deadline(int64_t last_start_us, int64_t first_seen_us,
			      int64_t gc_grace_seconds, double fraction)
{
	int64_t base = last_start_us ? last_start_us : first_seen_us;
	return base + (int64_t)((double)gc_grace_seconds * fraction * 1e6);
}

/* ---- tables -------------------------------------------------------------- */

struct sched_table *repair_sched_table_find(const struct repair_sched *s,
					    const char *name)
{
	for (size_t i = 0; i < s->ntables; i++)
		if (strcmp(s->tables[i]->name, name) == 0)
			return s->tables[i];
	return NULL;
}

static void table_tune(struct repair_sched *s, struct sched_table *t)
{
	struct repair_sched_tuning u = {
		.enabled = 1,
		.intensity = s->o.intensity,
		.segments_per_node = (int64_t)s->o.segments_per_node,
		.partitions_per_segment = (int64_t)s->o.partitions_per_segment,
		.bytes_per_segment = (int64_t)s->o.bytes_per_segment,
		.incremental = 0};
	for (size_t i = 0; i < s->o.ntunings; i++) {
		const struct repair_sched_tuning *x = &s->tunings[i];
		if (strcmp(s->tuning_names[i], t->name) != 0)
			continue;
		if (x->enabled >= 0)
			u.enabled = x->enabled;
		if (x->intensity > 0)
			u.intensity = x->intensity;
		if (x->segments_per_node >= 0)
			u.segments_per_node = x->segments_per_node;
		if (x->partitions_per_segment > 0)
			u.partitions_per_segment = x->partitions_per_segment;
		if (x->bytes_per_segment > 0)
			u.bytes_per_segment = x->bytes_per_segment;
		if (x->incremental >= 0)
			u.incremental = x->incremental;
	}
	t->tuning = u;
}

struct sched_table *repair_sched_table_add(struct repair_sched *s,
					   const char *name,
					   const uint8_t id[16])
{
	struct sched_table **v =
		realloc(s->tables, (s->ntables + 1) * sizeof(*v));
	if (!v) {
		err_set(ERR_NOMEM, "repair schedule");
		return NULL;
	}
	s->tables = v;
	struct sched_table *t = calloc(1, sizeof(*t));
	if (!t) {
		err_set(ERR_NOMEM, "repair schedule");
		return NULL;
	}
	snprintf(t->name, sizeof(t->name), "%s", name);
	memcpy(t->id, id, 16);
	t->gc_grace_seconds = 864000;
	t->first_seen_us = env_wall_us(s->env);
	table_tune(s, t);
	s->tables[s->ntables++] = t;
	return t;
}

int repair_sched_seg_push(struct sched_table *t, struct sched_seg g)
{
	if (t->nsegs == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct sched_seg *v = realloc(t->segs, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "repair schedule");
		t->segs = v;
		t->cap = cap;
	}
	t->segs[t->nsegs++] = g;
	return 0;
}

static size_t segs_done(const struct sched_table *t)
{
	size_t n = 0;
	for (size_t i = 0; i < t->nsegs; i++)
		n += t->segs[i].done;
	return n;
}

int64_t repair_sched_table_deadline(const struct repair_sched *s,
				    const struct sched_table *t)
{
	int64_t last = t->nhistory ? t->history[t->nhistory - 1].start_us : 0;
	return repair_sched_deadline(last, t->first_seen_us,
				     t->gc_grace_seconds,
				     s->o.gc_grace_fraction);
}

bool repair_sched_table_at_risk(const struct repair_sched *s,
				const struct sched_table *t, int64_t now_wall)
{
	int64_t deadline = repair_sched_table_deadline(s, t);
	size_t left = t->cycle_start_us ? t->nsegs - segs_done(t) : 0;
	if (!t->cycle_start_us && now_wall < deadline)
		return false; /* done for now; the next cycle starts in time */
	if (now_wall >= deadline)
		return true;
	return t->observed &&
	       (double)now_wall + (double)left * t->seg_us > (double)deadline;
}

/* Merges the node's current tables in: new ones are added, known ones
 * updated, missing ones kept (their state survives a schema that loads
 * late) but not scheduled. */
static void tables_refresh(struct repair_sched *s)
{
	struct repair_sched_table_info *v = NULL;
	size_t n = 0;
	if (s->ops->tables(s->arg, &v, &n)) {
		LOG_WARN("repair schedule: cannot list tables: %s", err_msg());
		return;
	}
	s->refreshed = true;
	for (size_t i = 0; i < s->ntables; i++)
		s->tables[i]->known = false;
	for (size_t i = 0; i < n; i++) {
		struct sched_table *t = repair_sched_table_find(s, v[i].name);
		if (t && memcmp(t->id, v[i].id, 16) != 0 && t != s->run_table) {
			/* dropped and created again: a new table */
			memcpy(t->id, v[i].id, 16);
			t->cycle_start_us = 0;
			t->nsegs = 0;
			t->nhistory = 0;
			t->first_seen_us = env_wall_us(s->env);
		}
		if (!t && !(t = repair_sched_table_add(s, v[i].name, v[i].id)))
			continue;
		t->known = true;
		t->gc_grace_seconds = v[i].gc_grace_seconds;
		t->time_window = v[i].time_window;
		double frac = 0;
		for (size_t k = 0; k < v[i].ranges.n; k++)
			frac += token_range_fraction(v[i].ranges.v[k]);
		t->density = frac > 0 ? (double)v[i].partitions / frac : 0;
		if (t->cycle_start_us || !t->tuning.enabled || !v[i].ranges.n)
			continue;
		int64_t now = env_wall_us(s->env);
		int64_t last =
			t->nhistory ? t->history[t->nhistory - 1].start_us : 0;
		bool due = !last ||
			   now - last >=
				   (int64_t)s->o.min_cycle_interval_ms * 1000;
		if (!due && !t->run_now)
			continue;
		struct token_range_list segs = {0};
		struct repair_sched_plan_in in = {
			.partitions = v[i].partitions,
			.bytes = v[i].bytes,
			.per_segment =
				(uint64_t)t->tuning.partitions_per_segment,
			.bytes_per_segment =
				(uint64_t)t->tuning.bytes_per_segment,
			.segments_per_node =
				(uint64_t)t->tuning.segments_per_node};
		if (repair_sched_plan(&v[i].ranges, &in, &segs)) {
			token_range_list_free(&segs);
			continue;
		}
		t->nsegs = 0;
		int rc = 0;
		for (size_t k = 0; !rc && k < segs.n; k++)
			rc = repair_sched_seg_push(
				t, (struct sched_seg){.start = segs.v[k].left,
						      .end = segs.v[k].right});
		token_range_list_free(&segs);
		if (rc) {
			t->nsegs = 0; /* out of memory: try at the next tick */
			continue;
		}
		t->cycle_start_us = now;
		t->failures = t->splits = 0;
		t->forced = t->run_now;
		t->run_now = false;
		LOG_INFO("repair schedule: %s: cycle started, %zu segments",
			 t->name, t->nsegs);
	}
	for (size_t i = 0; i < n; i++)
		token_range_list_free(&v[i].ranges);
	free(v);
}

/* ---- running segments ---------------------------------------------------- */

static void save(struct repair_sched *s)
{
	struct buf b = {0};
	if (repair_sched_encode(s, &b)) {
		LOG_WARN("repair schedule: cannot encode state: %s", err_msg());
		buf_free(&b);
		return;
	}
	s->ops->save(s->arg, b.data, b.len); /* takes the bytes */
}

static void arm(struct repair_sched *s, uint64_t delay_us)
{
	if (s->started && !s->run_table)
		env_timer_arm(s->env, s->timer, delay_us);
}

/* check_interval plus up to a half of it at random, so that nodes that
 * found each other's replicas busy do not retry in lockstep. */
static uint64_t later_us(struct repair_sched *s)
{
	uint64_t base = s->o.check_interval_ms * 1000;
	return base + env_random(s->env) % (base / 2 + 1);
}

static void cycle_complete(struct repair_sched *s, struct sched_table *t)
{
	struct sched_cycle c = {t->cycle_start_us, env_wall_us(s->env),
				t->nsegs, t->failures, t->splits};
	if (t->nhistory == REPAIR_SCHED_HISTORY) {
		memmove(t->history, t->history + 1,
			(REPAIR_SCHED_HISTORY - 1) * sizeof(c));
		t->nhistory--;
	}
	t->history[t->nhistory++] = c;
	t->cycles++;
	t->cycle_start_us = 0;
	t->forced = false;
	t->nsegs = 0;
	LOG_INFO("repair schedule: %s: cycle completed, %" PRIu64
		 " segments, %" PRIu64 " failed attempts, %" PRIu64
		 " splits in %.1f s",
		 t->name, c.segments, c.failures, c.splits,
		 (double)(c.end_us - c.start_us) / 1e6);
}

/* A failed attempt: retried later, split after segment_retries. */
static void seg_failed(struct repair_sched *s, struct sched_table *t, size_t i,
		       const char *why)
{
	struct sched_seg *g = &t->segs[i];
	t->failures++;
	g->failures++;
	g->not_before_us = env_mono_us(s->env) + s->o.retry_delay_ms * 1000;
	LOG_WARN("repair schedule: %s (%" PRId64 ",%" PRId64
		 "] failed (attempt %u): %s",
		 t->name, g->start, g->end, g->failures, why);
	if (g->failures < s->o.segment_retries ||
	    g->depth >= REPAIR_SCHED_MAX_SPLITS)
		return;
	struct token_range_list halves = {0};
	if (token_range_split(token_range_make(g->start, g->end), 2, &halves) ||
	    halves.n != 2 || repair_sched_seg_push(t, (struct sched_seg){0})) {
		token_range_list_free(&halves);
		return;
	}
	g = &t->segs[i]; /* the push may have moved the array */
	memmove(&t->segs[i + 2], &t->segs[i + 1],
		(t->nsegs - 2 - i) * sizeof(*g));
	struct sched_seg a = {.start = halves.v[0].left,
			      .end = halves.v[0].right,
			      .depth = g->depth + 1,
			      .not_before_us = g->not_before_us};
	struct sched_seg b = a;
	b.start = halves.v[1].left;
	b.end = halves.v[1].right;
	t->segs[i] = a;
	t->segs[i + 1] = b;
	t->splits++;
	token_range_list_free(&halves);
	LOG_INFO("repair schedule: %s: split a failing segment into (%" PRId64
		 ",%" PRId64 "] and (%" PRId64 ",%" PRId64 "]",
		 t->name, a.start, a.end, b.start, b.end);
}

static bool busy_error(const char *e)
{
	return strstr(e, "replica busy") || strstr(e, "overlapping repair");
}

static void on_segment_done(void *arg, const struct repair_summary *sum)
{
	struct repair_sched *s = arg;
	struct sched_table *t = s->run_table;
	size_t i = s->run_seg;
	uint64_t now = env_mono_us(s->env);
	uint64_t took = now - s->run_start_us;
	s->run_table = NULL;
	env_timer_cancel(s->env, s->timeout);
	if (s->ops->segment_done) {
		bool later = s->run_preempted ||
			     (!s->run_timed_out && busy_error(sum->error));
		s->ops->segment_done(s->arg, t->name, t->segs[i].start,
				     t->segs[i].end, s->run_start_us,
				     sum->ok            ? NULL
				     : s->run_timed_out ? "segment timeout"
							: sum->error,
				     !sum->ok && later);
	}
	uint64_t delay = 0;
	if (sum->ok) {
		t->segs[i].done = true;
		double i_ = t->tuning.intensity;
		uint64_t sleep = (uint64_t)((double)took * (1 - i_) / i_);
		s->sleep_until_us = now + sleep;
		double per = (double)(took + sleep);
		t->seg_us = t->observed ? 0.8 * t->seg_us + 0.2 * per : per;
		t->observed++;
		if (segs_done(t) == t->nsegs)
			cycle_complete(s, t);
		delay = sleep;
	} else if (s->run_preempted) {
		delay = later_us(s); /* not a failure */
	} else if (!s->run_timed_out && busy_error(sum->error)) {
		t->segs[i].not_before_us = now + later_us(s);
	} else {
		seg_failed(s, t, i,
			   s->run_timed_out ? "segment timeout" : sum->error);
	}
	s->run_preempted = s->run_timed_out = false;
	save(s);
	arm(s, delay);
}

static void on_timeout(void *arg)
{
	struct repair_sched *s = arg;
	if (!s->run_table)
		return;
	s->run_timed_out = true;
	repair_cancel(s->repair, "scheduled segment timed out");
}

/* Replicas of the segment; 0 when the segment must wait (-1 error). */
static int seg_replicas(struct repair_sched *s, const struct sched_table *t,
			const struct sched_seg *g, struct inet_addr *reps,
			size_t *nrep)
{
	if (s->ops->replicas(s->arg, t->id, g->end, reps, REPAIR_MAX_REPLICAS,
			     nrep))
		return -1;
	for (size_t k = 0; s->ops->is_alive && k < *nrep; k++)
		if (!s->ops->is_alive(s->arg, &reps[k]))
			return 0;
	return 1;
}

/* Tree depth for a segment: room for 4x its estimated partitions (one
 * per leaf once folded), at least 2^6 leaves; the estimate only bounds
 * the resolution, row-level sync stays exact. */
static uint32_t seg_depth(const struct sched_table *t,
			  const struct sched_seg *g)
{
	double est = t->density *
		     token_range_fraction(token_range_make(g->start, g->end));
	uint32_t d = 6;
	while (d < 20 && (double)(1u << d) < 4 * est)
		d++;
	return d;
}

/* The runnable table with the earliest deadline and its first runnable
 * segment; NULL when none. *wake: the soonest a postponed one may run. */
static struct sched_table *pick(struct repair_sched *s, size_t *seg,
				uint64_t *wake, bool windows_open)
{
	uint64_t now = env_mono_us(s->env);
	struct sched_table *best = NULL;
	int64_t best_deadline = 0;
	for (size_t i = 0; i < s->ntables; i++) {
		struct sched_table *t = s->tables[i];
		if (!t->known || t->paused || !t->tuning.enabled ||
		    !t->cycle_start_us || (!windows_open && !t->forced))
			continue;
		for (size_t k = 0; k < t->nsegs; k++) {
			struct sched_seg *g = &t->segs[k];
			if (g->done)
				continue;
			if (g->not_before_us > now) {
				if (g->not_before_us - now < *wake)
					*wake = g->not_before_us - now;
				continue;
			}
			int64_t d = repair_sched_table_deadline(s, t);
			if (!best || d < best_deadline) {
				best = t;
				best_deadline = d;
				*seg = k;
			}
			break;
		}
	}
	return best;
}

static void tick(void *arg)
{
	struct repair_sched *s = arg;
	if (s->run_table)
		return arm(s, later_us(s));
	tables_refresh(s); /* also when paused: status shows the tables */
	if (s->paused)
		return arm(s, later_us(s));
	uint64_t now = env_mono_us(s->env);
	bool forced = false;
	for (size_t i = 0; i < s->ntables; i++)
		forced = forced ||
			 (s->tables[i]->forced && s->tables[i]->cycle_start_us);
	if (s->sleep_until_us > now && !forced)
		return arm(s, s->sleep_until_us - now);
	bool open = repair_sched_windows_open(s->windows, s->o.nwindows,
					      env_wall_us(s->env));
	for (int tries = 0; tries < 64; tries++) {
		uint64_t wake = s->o.check_interval_ms * 1000;
		size_t i = 0;
		struct sched_table *t = pick(s, &i, &wake, open);
		if (!t)
			return arm(s, wake);
		struct sched_seg *g = &t->segs[i];
		struct inet_addr reps[REPAIR_MAX_REPLICAS];
		size_t nrep = 0;
		int ready = seg_replicas(s, t, g, reps, &nrep);
		if (ready > 0 && nrep < 2) {
			g->done = true; /* nothing to compare any more */
			if (segs_done(t) == t->nsegs)
				cycle_complete(s, t);
			save(s);
			continue;
		}
		if (ready <= 0) {
			g->not_before_us = now + later_us(s);
			continue;
		}
		struct repair_table rt = {.name = t->name};
		memcpy(rt.id, t->id, 16);
		struct repair_range rr = {.start = g->start,
					  .end = g->end,
					  .replicas = reps,
					  .nreplicas = nrep};
		static const struct repair_asked asked = {.subrange = true,
							  .scheduled = true};
		bool incremental = t->tuning.incremental == 1;
		if (incremental && t->time_window) {
			/* as the repair command refuses it without
			 * --force-incremental: full repairs instead */
			if (!t->twcs_noted)
				LOG_WARN(
					"repair schedule: %s: incremental=true "
					"refused for a "
					"TimeWindowCompactionStrategy table "
					"(anticompaction would split its time "
					"windows' SSTables, and its data "
					"normally expires by TTL); running "
					"full repairs instead",
					t->name);
			t->twcs_noted = true;
			incremental = false;
		} else {
			t->twcs_noted = false;
		}
		struct repair_request q = {.tables = &rt,
					   .ntables = 1,
					   .ranges = &rr,
					   .nranges = 1,
					   .asked = &asked,
					   .exclusive = true,
					   .incremental = incremental,
					   .max_depth = seg_depth(t, g)};
		s->run_table = t;
		s->run_seg = i;
		s->run_start_us = now;
		if (repair_start(s->repair, &q, NULL, on_segment_done, s,
				 NULL)) {
			s->run_table = NULL;
			/* a manual session runs here: not a failure */
			if (err_code() != ERR_EXISTS)
				LOG_WARN("repair schedule: %s: %s", t->name,
					 err_msg());
			return arm(s, later_us(s));
		}
		if (s->run_table == t) /* done may have run already */
			env_timer_arm(s->env, s->timeout,
				      s->o.segment_timeout_ms * 1000);
		return;
	}
	arm(s, later_us(s));
}

/* ---- life cycle and commands --------------------------------------------- */

struct repair_sched *repair_sched_new(struct env *env, struct repair *repair,
				      const struct repair_sched_options *o,
				      const struct repair_sched_ops *ops,
				      void *arg)
{
	struct repair_sched *s = calloc(1, sizeof(*s));
	if (!s) {
		err_set(ERR_NOMEM, "repair schedule");
		return NULL;
	}
	s->env = env;
	s->repair = repair;
	s->o = *o;
	s->ops = ops;
	s->arg = arg;
	s->windows = calloc(o->nwindows + 1, sizeof(*s->windows));
	s->tunings = calloc(o->ntunings + 1, sizeof(*s->tunings));
	s->tuning_names = calloc(o->ntunings + 1, sizeof(*s->tuning_names));
	s->timer = env_timer_new(env, tick, s);
	s->timeout = env_timer_new(env, on_timeout, s);
	if (!s->windows || !s->tunings || !s->tuning_names || !s->timer ||
	    !s->timeout) {
		err_set(ERR_NOMEM, "repair schedule");
		repair_sched_delete(s);
		return NULL;
	}
	if (o->nwindows)
		memcpy(s->windows, o->windows,
		       o->nwindows * sizeof(*s->windows));
	if (o->ntunings) {
		memcpy(s->tunings, o->tunings,
		       o->ntunings * sizeof(*s->tunings));
		memcpy(s->tuning_names, o->tuning_names,
		       o->ntunings * sizeof(*s->tuning_names));
	}
	s->o.windows = NULL;
	s->o.tunings = NULL;
	s->o.tuning_names = NULL;
	if (s->o.intensity <= 0 || s->o.intensity > 1)
		s->o.intensity = 1;
	if (!s->o.segment_retries)
		s->o.segment_retries = 1;
	if (!s->o.check_interval_ms)
		s->o.check_interval_ms = 1;
	return s;
}

void repair_sched_delete(struct repair_sched *s)
{
	if (!s)
		return;
	if (s->run_table) {
		s->run_preempted = true;
		repair_cancel(s->repair, "the repair scheduler stops");
	}
	if (s->timer)
		env_timer_free(s->env, s->timer);
	if (s->timeout)
		env_timer_free(s->env, s->timeout);
	for (size_t i = 0; i < s->ntables; i++) {
		free(s->tables[i]->segs);
		free(s->tables[i]);
	}
	free(s->tables);
	free(s->windows);
	free(s->tunings);
	free(s->tuning_names);
	free(s);
}

void repair_sched_start(struct repair_sched *s)
{
	s->started = true;
	for (size_t i = 0; i < s->ntables; i++)
		table_tune(s, s->tables[i]);
	arm(s, s->o.initial_delay_ms * 1000);
}

bool repair_sched_running(const struct repair_sched *s)
{
	return s->run_table != NULL;
}

int repair_sched_get_running(const struct repair_sched *s,
			     struct repair_sched_segment *out)
{
	memset(out, 0, sizeof(*out));
	if (!s->run_table)
		return 0;
	const struct sched_seg *g = &s->run_table->segs[s->run_seg];
	snprintf(out->name, sizeof(out->name), "%s", s->run_table->name);
	out->start = g->start;
	out->end = g->end;
	out->running_us = env_mono_us(s->env) - s->run_start_us;
	return 1;
}

void repair_sched_preempt(struct repair_sched *s)
{
	if (!s->run_table)
		return;
	s->run_preempted = true;
	repair_cancel(s->repair, "preempted by a manual repair");
}

int repair_sched_pause(struct repair_sched *s, const char *filter, bool pause)
{
	size_t matched = 0;
	if (!filter) {
		s->paused = pause;
		matched = 1;
	} else {
		for (size_t i = 0; i < s->ntables; i++)
			if (repair_text_name_match(filter,
						   s->tables[i]->name)) {
				s->tables[i]->paused = pause;
				matched++;
			}
	}
	if (!matched)
		return err_set(ERR_NOT_FOUND, "no scheduled table matches '%s'",
			       filter);
	if (pause && s->run_table && (!filter || s->run_table->paused)) {
		s->run_preempted = true;
		repair_cancel(s->repair, "paused");
	}
	save(s);
	if (!pause)
		arm(s, 0);
	return 0;
}

int repair_sched_run_now(struct repair_sched *s, const char *filter)
{
	tables_refresh(s); /* tables the schema just gained */
	int matched = 0;
	for (size_t i = 0; i < s->ntables; i++) {
		struct sched_table *t = s->tables[i];
		if (!t->known || !repair_text_name_match(filter, t->name))
			continue;
		matched++;
		if (t->cycle_start_us)
			t->forced = true;
		else
			t->run_now = true;
	}
	if (!matched)
		return err_set(ERR_NOT_FOUND, "no scheduled table matches '%s'",
			       filter ? filter : "");
	tables_refresh(s);
	save(s);
	s->sleep_until_us = 0;
	arm(s, 0);
	return matched;
}

size_t repair_sched_table_count(const struct repair_sched *s)
{
	return s->ntables;
}

void repair_sched_table_get(const struct repair_sched *s, size_t i,
			    struct repair_sched_table_status *out)
{
	const struct sched_table *t = s->tables[i];
	int64_t now = env_wall_us(s->env);
	*out = (struct repair_sched_table_status){
		.name = t->name,
		.segments = t->cycle_start_us ? t->nsegs : 0,
		.done = t->cycle_start_us ? segs_done(t) : 0,
		.cycle_start_us = t->cycle_start_us,
		.deadline_us = repair_sched_table_deadline(s, t),
		.cycles = t->cycles,
		.failures = t->failures,
		.splits = t->splits,
		.at_risk = t->tuning.enabled &&
			   repair_sched_table_at_risk(s, t, now),
		.paused = t->paused || s->paused,
		.enabled = t->tuning.enabled && t->known,
		.running = s->run_table == t,
	};
	if (t->nhistory) {
		out->last_start_us = t->history[t->nhistory - 1].start_us;
		out->last_end_us = t->history[t->nhistory - 1].end_us;
	}
}
