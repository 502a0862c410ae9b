/*
 * The manual repair history and its state file (repair_history.h).
 */
#include "repair/repair_history.h"

#include "common/err.h"
#include "repair/repair_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADER "cassini repair history 1\n"
#define WHAT   "repair history"

struct repair_history {
	struct repair_history_entry *v; /* a ring of `max` */
	size_t max, first, n;
};

struct repair_history *repair_history_new(size_t max)
{
	struct repair_history *h = calloc(1, sizeof(*h));
	if (h && max)
		h->v = calloc(max, sizeof(*h->v));
	if (!h || !h->v) {
		free(h);
		err_set(ERR_NOMEM, WHAT);
		return NULL;
	}
	h->max = max;
	return h;
}

void repair_history_delete(struct repair_history *h)
{
	if (!h)
		return;
	free(h->v);
	free(h);
}

void repair_history_add(struct repair_history *h,
			const struct repair_history_entry *e)
{
	if (h->n == h->max) {
		h->v[h->first] = *e;
		h->first = (h->first + 1) % h->max;
		return;
	}
	h->v[(h->first + h->n++) % h->max] = *e;
}

size_t repair_history_count(const struct repair_history *h)
{
	return h->n;
}

const struct repair_history_entry *
repair_history_at(const struct repair_history *h, size_t i)
{
	return &h->v[(h->first + i) % h->max];
}

static const char *outcome_name(enum repair_history_outcome o)
{
	switch (o) {
	case REPAIR_HISTORY_OK:
		return "ok";
	case REPAIR_HISTORY_PREVIEW:
		return "preview";
	default:
		return "failed";
	}
}

/* One word: escaped, "-" when empty. */
static void word(const char *in, char *out, size_t cap)
{
	if (!*in)
		snprintf(out, cap, "-");
	else
		repair_text_escape(in, out, cap);
}

int repair_history_encode(const struct repair_history *h, struct buf *out)
{
	size_t at = out->len;
	int rc = repair_text_put(out, WHAT, HEADER);
	for (size_t i = 0; !rc && i < h->n; i++) {
		const struct repair_history_entry *e = repair_history_at(h, i);
		char table[3 * REPAIR_HISTORY_NAME_MAX];
		char opts[3 * REPAIR_HISTORY_OPTIONS_MAX];
		char error[3 * REPAIR_HISTORY_ERROR_MAX];
		word(e->table, table, sizeof(table));
		word(e->options, opts, sizeof(opts));
		word(e->error, error, sizeof(error));
		rc = repair_text_put(out, WHAT,
				     "task %" PRIu64 " %s %" PRId64 " %" PRId64
				     " %" PRId64 " %" PRId64 " %s %" PRIu64
				     " %" PRIu64 " %" PRIu64 " %s %s\n",
				     e->session, table, e->start, e->end,
				     e->started_us, e->finished_us,
				     outcome_name(e->outcome),
				     e->mismatched_ranges, e->rows_streamed,
				     e->bytes_streamed, opts, error);
	}
	if (!rc)
		rc = repair_text_seal(out, at, WHAT);
	return rc;
}

/* A word back into `out` (cap bytes): -1 when malformed or too long. */
static int unword(char *in, char *out, size_t cap)
{
	if (strcmp(in, "-") == 0) {
		out[0] = '\0';
		return 0;
	}
	if (repair_text_unescape(in) || strlen(in) >= cap)
		return -1;
	memcpy(out, in, strlen(in) + 1);
	return 0;
}

static int parse_line(char *l, size_t no, struct repair_history_entry *e)
{
	char table[3 * REPAIR_HISTORY_NAME_MAX];
	char opts[3 * REPAIR_HISTORY_OPTIONS_MAX];
	char error[3 * REPAIR_HISTORY_ERROR_MAX];
	char outcome[16];
	int n = 0;
	memset(e, 0, sizeof(*e));
	if (strlen(l) >
		    3 * (REPAIR_HISTORY_NAME_MAX + REPAIR_HISTORY_ERROR_MAX +
			 REPAIR_HISTORY_OPTIONS_MAX) ||
	    sscanf(l,
		   "task %" SCNu64 " %479s %" SCNd64 " %" SCNd64 " %" SCNd64
		   " %" SCNd64 " %15s %" SCNu64 " %" SCNu64 " %" SCNu64
		   " %287s %767s%n",
		   &e->session, table, &e->start, &e->end, &e->started_us,
		   &e->finished_us, outcome, &e->mismatched_ranges,
		   &e->rows_streamed, &e->bytes_streamed, opts, error,
		   &n) != 12 ||
	    l[n])
		return err_set(ERR_CORRUPT, WHAT ": line %zu: bad task line",
			       no);
	if (strcmp(outcome, "ok") == 0)
		e->outcome = REPAIR_HISTORY_OK;
	else if (strcmp(outcome, "failed") == 0)
		e->outcome = REPAIR_HISTORY_FAILED;
	else if (strcmp(outcome, "preview") == 0)
		e->outcome = REPAIR_HISTORY_PREVIEW;
	else
		return err_set(ERR_CORRUPT, WHAT ": line %zu: bad outcome", no);
	if (unword(table, e->table, sizeof(e->table)) || !e->table[0] ||
	    unword(opts, e->options, sizeof(e->options)) ||
	    unword(error, e->error, sizeof(e->error)))
		return err_set(ERR_CORRUPT, WHAT ": line %zu: bad word", no);
	return 0;
}

int repair_history_load(struct repair_history *h, const uint8_t *data,
			size_t len)
{
	size_t body;
	if (repair_text_check(data, len, HEADER, WHAT, &body))
		return -1;
	struct repair_history *fresh = repair_history_new(h->max);
	char *copy = malloc(body + 1);
	if (!fresh || !copy) {
		repair_history_delete(fresh);
		free(copy);
		return err_set(ERR_NOMEM, WHAT);
	}
	memcpy(copy, data, body);
	copy[body] = '\0';
	int rc = 0;
	size_t no = 1;
	char *save = NULL;
	char *line = strtok_r(copy + sizeof(HEADER) - 1, "\n", &save);
	for (; !rc && line; line = strtok_r(NULL, "\n", &save)) {
		struct repair_history_entry e;
		rc = parse_line(line, ++no, &e);
		if (!rc)
			repair_history_add(fresh, &e);
	}
	free(copy);
	if (rc) {
		repair_history_delete(fresh);
		return -1;
	}
	/* swap the rings: all of the file or nothing */
	struct repair_history old = *h;
	*h = *fresh;
	*fresh = old;
	repair_history_delete(fresh);
	return 0;
}

int repair_history_format(const struct repair_history *h, const char *filter,
			  struct buf *out)
{
	int rc = repair_text_put(out, WHAT,
				 "%-24s %-43s %13s %-19s %8s %-7s %10s %8s "
				 "%10s  %-14s %s\n",
				 "Table", "Range", "Session", "Started (UTC)",
				 "Seconds", "Outcome", "Mismatched", "Rows",
				 "Bytes", "Options", "Error");
	size_t shown = 0;
	for (size_t i = 0; !rc && i < h->n; i++) {
		const struct repair_history_entry *e = repair_history_at(h, i);
		if (!repair_text_name_match(filter, e->table))
			continue;
		shown++;
		char range[48], when[24];
		snprintf(range, sizeof(range), "(%" PRId64 ",%" PRId64 "]",
			 e->start, e->end);
		repair_text_time(e->started_us, when, sizeof(when));
		rc = repair_text_put(
			out, WHAT,
			"%-24s %-43s %13" PRIu64 " %-19s %8.3f %-7s %10" PRIu64
			" %8" PRIu64 " %10" PRIu64 "  %-*s%s%s\n",
			e->table, range, e->session, when,
			(double)(e->finished_us - e->started_us) / 1e6,
			outcome_name(e->outcome), e->mismatched_ranges,
			e->rows_streamed, e->bytes_streamed,
			e->error[0] ? 14 : 0, e->options[0] ? e->options : "-",
			e->error[0] ? " " : "", e->error);
	}
	if (!rc && !shown)
		rc = repair_text_put(out, WHAT, "(no repair history%s%s)\n",
				     filter ? " of " : "",
				     filter ? filter : "");
	return rc;
}
