/*
 * The scheduler's state file and its status text.
 *
 * State file (text, version 1; written whole, atomically, after every
 * change; the node keeps it as <saved_caches_directory>/repair_schedule):
 *
 *   cassini repair schedule 1
 *   paused 0|1
 *   table NAME ID(32 hex) GC_GRACE FIRST_SEEN CYCLE_START PAUSED FORCED
 *         CYCLES FAILURES SPLITS SEG_US OBSERVED
 *   seg START END DONE FAILURES DEPTH          (the table's current cycle)
 *   cycle START END SEGMENTS FAILURES SPLITS   (its completed cycles)
 *   ...
 *   crc32c HEX8                     (8 hex digits, of every byte before it)
 *
 * NAME is "ks.table" with bytes <= ' ', '%' and DEL written as %XX.
 * Times are wall-clock microseconds; tokens are (START, END]. A file
 * whose checksum, header or any line does not parse is refused whole
 * (ERR_CORRUPT): a scheduler never runs on half a state.
 */
#include "repair/repair_sched_internal.h"
#include "repair/repair_text.h"

#include "common/err.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADER "cassini repair schedule 1\n"

#define WHAT "repair schedule"

static void hex16(const uint8_t id[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

int repair_sched_encode(const struct repair_sched *s, struct buf *out)
{
	size_t at = out->len;
	int rc = repair_text_put(out, WHAT, HEADER "paused %d\n", s->paused);
	for (size_t i = 0; !rc && i < s->ntables; i++) {
		const struct sched_table *t = s->tables[i];
		char id[33], name[3 * REPAIR_SCHED_NAME_MAX];
		hex16(t->id, id);
		repair_text_escape(t->name, name, sizeof(name));
		rc = repair_text_put(
			out, WHAT,
			"table %s %s %" PRId64 " %" PRId64 " %" PRId64
			" %d %d %" PRIu64 " %" PRIu64 " %" PRIu64
			" %.0f %" PRIu64 "\n",
			name, id, t->gc_grace_seconds, t->first_seen_us,
			t->cycle_start_us, t->paused, t->forced, t->cycles,
			t->failures, t->splits, t->seg_us, t->observed);
		for (size_t k = 0; !rc && t->cycle_start_us && k < t->nsegs;
		     k++) {
			const struct sched_seg *g = &t->segs[k];
			rc = repair_text_put(out, WHAT,
					     "seg %" PRId64 " %" PRId64
					     " %d %u %u\n",
					     g->start, g->end, g->done,
					     g->failures, g->depth);
		}
		for (size_t k = 0; !rc && k < t->nhistory; k++) {
			const struct sched_cycle *c = &t->history[k];
			rc = repair_text_put(
				out, WHAT,
				"cycle %" PRId64 " %" PRId64 " %" PRIu64
				" %" PRIu64 " %" PRIu64 "\n",
				c->start_us, c->end_us, c->segments,
				c->failures, c->splits);
		}
	}
	if (!rc)
		rc = repair_text_seal(out, at, WHAT);
	return rc;
}

static int corrupt(size_t line, const char *what)
{
	return err_set(ERR_CORRUPT, "repair schedule state: line %zu: %s", line,
		       what);
}

static int parse_id(const char *hex, uint8_t id[16])
{
	if (strlen(hex) != 32)
		return -1;
	for (int i = 0; i < 16; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		id[i] = (uint8_t)v;
	}
	return 0;
}

/* One line (NUL-terminated, no newline) into the tables being built. */
static int parse_line(struct repair_sched *s, char *l, size_t no,
		      struct sched_table **cur, bool *paused)
{
	int n = 0;
	if (strcmp(l, "paused 0") == 0 || strcmp(l, "paused 1") == 0) {
		*paused = l[7] == '1';
		return 0;
	}
	char name[3 * REPAIR_SCHED_NAME_MAX], id[40];
	int64_t gc, first, start;
	int p, f;
	uint64_t cycles, fails, splits, observed;
	double seg_us;
	if (strncmp(l, "table ", 6) == 0) {
		if (sscanf(l,
			   "table %479s %39s %" SCNd64 " %" SCNd64 " %" SCNd64
			   " %d %d %" SCNu64 " %" SCNu64 " %" SCNu64
			   " %lf %" SCNu64 "%n",
			   name, id, &gc, &first, &start, &p, &f, &cycles,
			   &fails, &splits, &seg_us, &observed, &n) != 12 ||
		    l[n])
			return corrupt(no, "bad table line");
		uint8_t bin[16];
		if (repair_text_unescape(name) ||
		    strlen(name) >= REPAIR_SCHED_NAME_MAX ||
		    parse_id(id, bin) || repair_sched_table_find(s, name))
			return corrupt(no, "bad or repeated table");
		struct sched_table *t = repair_sched_table_add(s, name, bin);
		if (!t)
			return -1;
		t->gc_grace_seconds = gc;
		t->first_seen_us = first;
		t->cycle_start_us = start;
		t->paused = p;
		t->forced = f;
		t->cycles = cycles;
		t->failures = fails;
		t->splits = splits;
		t->seg_us = seg_us;
		t->observed = observed;
		*cur = t;
		return 0;
	}
	if (!*cur)
		return corrupt(no, "a segment or cycle before any table");
	struct sched_table *t = *cur;
	int64_t a, b;
	unsigned fa, de;
	int done;
	if (strncmp(l, "seg ", 4) == 0) {
		if (sscanf(l, "seg %" SCNd64 " %" SCNd64 " %d %u %u%n", &a, &b,
			   &done, &fa, &de, &n) != 5 ||
		    l[n] || !t->cycle_start_us)
			return corrupt(no, "bad segment line");
		return repair_sched_seg_push(
			t, (struct sched_seg){a, b, done != 0, fa, de, 0});
	}
	uint64_t segs;
	if (strncmp(l, "cycle ", 6) == 0) {
		if (sscanf(l,
			   "cycle %" SCNd64 " %" SCNd64 " %" SCNu64 " %" SCNu64
			   " %" SCNu64 "%n",
			   &a, &b, &segs, &fails, &splits, &n) != 5 ||
		    l[n] || t->nhistory == REPAIR_SCHED_HISTORY)
			return corrupt(no, "bad cycle line");
		t->history[t->nhistory++] =
			(struct sched_cycle){a, b, segs, fails, splits};
		return 0;
	}
	return corrupt(no, "unknown line");
}

static void tables_clear(struct repair_sched *s)
{
	for (size_t i = 0; i < s->ntables; i++) {
		free(s->tables[i]->segs);
		free(s->tables[i]);
	}
	free(s->tables);
	s->tables = NULL;
	s->ntables = 0;
}

int repair_sched_load(struct repair_sched *s, const uint8_t *data, size_t len)
{
	const char *text = (const char *)data;
	size_t last;
	if (repair_text_check(data, len, HEADER, "repair schedule state",
			      &last))
		return -1;
	/* parse into a fresh table list; swap in only when all of it is good
	 */
	struct sched_table **old = s->tables;
	size_t nold = s->ntables;
	s->tables = NULL;
	s->ntables = 0;
	char *copy = malloc(last + 1);
	if (!copy) {
		s->tables = old;
		s->ntables = nold;
		return err_set(ERR_NOMEM, "repair schedule state");
	}
	memcpy(copy, text, last);
	copy[last] = '\0';
	struct sched_table *cur = NULL;
	bool paused = false;
	int rc = 0;
	size_t no = 1;
	char *save = NULL;
	char *line = strtok_r(copy + sizeof(HEADER) - 1, "\n", &save);
	for (; !rc && line; line = strtok_r(NULL, "\n", &save))
		rc = parse_line(s, line, ++no, &cur, &paused);
	free(copy);
	if (rc) {
		tables_clear(s);
		s->tables = old;
		s->ntables = nold;
		return -1;
	}
	struct sched_table **fresh = s->tables;
	size_t nfresh = s->ntables;
	s->tables = old;
	s->ntables = nold;
	tables_clear(s);
	s->tables = fresh;
	s->ntables = nfresh;
	s->paused = paused;
	return 0;
}

/* ---- status -------------------------------------------------------------- */

int repair_sched_format_status(const struct repair_sched *s, const char *filter,
			       struct buf *out)
{
	int rc = repair_text_put(
		out, WHAT,
		"Scheduled repair: %s; intensity %g; windows (UTC): ",
		s->paused ? "PAUSED" : "active", s->o.intensity);
	for (size_t i = 0; !rc && i < s->o.nwindows; i++)
		rc = repair_text_put(
			out, WHAT, "%s%02u:%02u-%02u:%02u", i ? ", " : "",
			s->windows[i].start / 60, s->windows[i].start % 60,
			s->windows[i].end / 60, s->windows[i].end % 60);
	if (!rc)
		rc = repair_text_put(out, WHAT, "%s\n\n",
				     s->o.nwindows ? "" : "always");
	if (!rc)
		rc = repair_text_put(out, WHAT,
				     "%-28s %-9s %-16s %-19s %-19s %-19s %-7s "
				     "%-7s %s\n",
				     "Table", "State", "Segments",
				     "Cycle started", "Last completed",
				     "Next deadline", "At risk", "Cycles",
				     "Failed/splits");
	size_t shown = 0;
	for (size_t i = 0; !rc && i < s->ntables; i++) {
		struct repair_sched_table_status st;
		repair_sched_table_get(s, i, &st);
		if (!repair_text_name_match(filter, st.name))
			continue;
		shown++;
		char seg[32], cs[24], lc[24], dl[24];
		if (st.segments)
			snprintf(seg, sizeof(seg), "%zu/%zu (%.0f%%)", st.done,
				 st.segments,
				 100.0 * (double)st.done / (double)st.segments);
		else
			snprintf(seg, sizeof(seg), "idle");
		repair_text_time(st.cycle_start_us, cs, sizeof(cs));
		repair_text_time(st.last_end_us, lc, sizeof(lc));
		repair_text_time(st.deadline_us, dl, sizeof(dl));
		const char *state = !s->refreshed          ? "starting"
				    : !s->tables[i]->known ? "dropped"
				    : !st.enabled          ? "disabled"
				    : st.paused            ? "paused"
				    : st.running           ? "running"
				    : st.segments          ? "active"
							   : "waiting";
		rc = repair_text_put(out, WHAT,
				     "%-28s %-9s %-16s %-19s %-19s %-19s %-7s "
				     "%-7" PRIu64 " %" PRIu64 "/%" PRIu64 "\n",
				     st.name, state, seg, cs, lc, dl,
				     st.at_risk ? "YES" : "no", st.cycles,
				     st.failures, st.splits);
	}
	if (!rc && !shown)
		rc = repair_text_put(out, WHAT, "(no table to repair%s%s)\n",
				     filter ? " matches " : "",
				     filter ? filter : "");
	if (!rc && s->run_table) {
		const struct sched_seg *g = &s->run_table->segs[s->run_seg];
		rc = repair_text_put(
			out, WHAT,
			"\nRunning: %s (%" PRId64 ",%" PRId64 "], for %.1f s\n",
			s->run_table->name, g->start, g->end,
			(double)(env_mono_us(s->env) - s->run_start_us) / 1e6);
	}
	/* one table named: its completed cycles too */
	const struct sched_table *t =
		filter && strchr(filter, '.')
			? repair_sched_table_find(s, filter)
			: NULL;
	if (!rc && t)
		rc = repair_text_put(out, WHAT,
				     "\nCompleted cycles of %s (newest last):\n"
				     "%-19s %-19s %10s %9s %7s %7s\n",
				     t->name, "Started", "Ended", "Seconds",
				     "Segments", "Failed", "Splits");
	for (size_t i = 0; !rc && t && i < t->nhistory; i++) {
		const struct sched_cycle *c = &t->history[i];
		char a[24], b[24];
		repair_text_time(c->start_us, a, sizeof(a));
		repair_text_time(c->end_us, b, sizeof(b));
		rc = repair_text_put(out, WHAT,
				     "%-19s %-19s %10.1f %9" PRIu64 " %7" PRIu64
				     " %7" PRIu64 "\n",
				     a, b,
				     (double)(c->end_us - c->start_us) / 1e6,
				     c->segments, c->failures, c->splits);
	}
	return rc;
}
