/* The slow query log (see slow_queries.h). */
#define LOG_MODULE "monitoring"
#include "node/slow_queries.h"

#include "common/env.h"
#include "common/err.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slow_entry {
	char text[NODE_SLOW_QUERIES_TEXT + 1];
	uint64_t count, total_us, min_us, max_us, rows;
};

struct node_slow_queries {
	struct env *env;
	struct env_timer *timer;
	uint64_t timeout_us;
	struct slow_entry e[NODE_SLOW_QUERIES_MAX];
	size_t n;
	uint64_t dropped; /* slow ones past the distinct-query cap */
};

static void tick(void *arg)
{
	struct node_slow_queries *q = arg;
	node_slow_queries_flush(q);
	env_timer_arm(q->env, q->timer, NODE_SLOW_QUERIES_INTERVAL_US);
}

struct node_slow_queries *node_slow_queries_new(struct env *env,
						uint64_t timeout_us)
{
	if (timeout_us == 0)
		return NULL;
	struct node_slow_queries *q = calloc(1, sizeof(*q));
	if (!q || !(q->timer = env_timer_new(env, tick, q))) {
		free(q);
		err_set(ERR_NOMEM, "cannot allocate the slow query log");
		return NULL;
	}
	q->env = env;
	q->timeout_us = timeout_us;
	env_timer_arm(env, q->timer, NODE_SLOW_QUERIES_INTERVAL_US);
	return q;
}

void node_slow_queries_delete(struct node_slow_queries *q)
{
	if (!q)
		return;
	env_timer_free(q->env, q->timer);
	free(q);
}

uint64_t node_slow_queries_timeout_us(const struct node_slow_queries *q)
{
	return q ? q->timeout_us : 0;
}

/* The text on one line: newlines and tabs of a formatted statement become
 * spaces, runs of spaces one. */
static void copy_text(char *dst, const char *src, size_t len)
{
	size_t o = 0;
	bool space = false;
	for (size_t i = 0; i < len && o < NODE_SLOW_QUERIES_TEXT; i++) {
		char c = src[i];
		if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
			space = o > 0;
			continue;
		}
		if (space && o < NODE_SLOW_QUERIES_TEXT)
			dst[o++] = ' ';
		space = false;
		if (o < NODE_SLOW_QUERIES_TEXT)
			dst[o++] = (unsigned char)c < 0x20 ? '?' : c;
	}
	dst[o] = '\0';
}

void node_slow_queries_note(struct node_slow_queries *q, const char *text,
			    size_t len, uint64_t elapsed_us, size_t rows)
{
	if (!q || elapsed_us <= q->timeout_us)
		return;
	char key[NODE_SLOW_QUERIES_TEXT + 1];
	copy_text(key, text ? text : "(a batch)", text ? len : 9);
	struct slow_entry *e = NULL;
	for (size_t i = 0; i < q->n && !e; i++)
		if (strcmp(q->e[i].text, key) == 0)
			e = &q->e[i];
	if (!e) {
		if (q->n == NODE_SLOW_QUERIES_MAX) {
			q->dropped++;
			return;
		}
		e = &q->e[q->n++];
		memset(e, 0, sizeof(*e)); /* a slot of an earlier report */
		memcpy(e->text, key, sizeof(key));
		e->min_us = UINT64_MAX;
	}
	e->count++;
	e->total_us += elapsed_us;
	e->rows += rows;
	if (elapsed_us < e->min_us)
		e->min_us = elapsed_us;
	if (elapsed_us > e->max_us)
		e->max_us = elapsed_us;
}

void node_slow_queries_flush(struct node_slow_queries *q)
{
	if (!q || (q->n == 0 && q->dropped == 0))
		return;
	uint64_t ops = q->dropped;
	for (size_t i = 0; i < q->n; i++)
		ops += q->e[i].count;
	/* Cassandra's message, one log line per query (a long report stays
	 * whole and each query can be grepped). */
	LOG_WARN("%" PRIu64 " operations were slow in the last %u msecs:", ops,
		 NODE_SLOW_QUERIES_INTERVAL_US / 1000);
	uint64_t t_ms = q->timeout_us / 1000;
	for (size_t i = 0; i < q->n; i++) {
		const struct slow_entry *e = &q->e[i];
		if (e->count == 1)
			LOG_WARN("<%s>, time %" PRIu64
				 " msec - slow timeout %" PRIu64
				 " msec, %" PRIu64 " rows",
				 e->text, e->max_us / 1000, t_ms, e->rows);
		else
			LOG_WARN("<%s>, was slow %" PRIu64
				 " times: avg/min/max %" PRIu64 "/%" PRIu64
				 "/%" PRIu64 " msec - slow timeout %" PRIu64
				 " msec, %" PRIu64 " rows avg",
				 e->text, e->count,
				 e->total_us / e->count / 1000,
				 e->min_us / 1000, e->max_us / 1000, t_ms,
				 e->rows / e->count);
	}
	if (q->dropped)
		LOG_WARN("... and %" PRIu64 " more slow operations of other "
			 "queries",
			 q->dropped);
	q->n = 0;
	q->dropped = 0;
}
