/*
 * The slow query log (slow_query_log_timeout, Cassandra's MonitoringTask):
 * SELECTs that took longer than the timeout are gathered by their text
 * and reported every NODE_SLOW_QUERIES_INTERVAL_US as Cassandra words it,
 * a WARN line for the report and one per query, e.g.
 *
 *   4 operations were slow in the last 5000 msecs:
 *   <SELECT * FROM ks.t WHERE k = ?>, was slow 3 times: avg/min/max
 *   612/540/701 msec - slow timeout 500 msec, 1 rows avg
 *   <SELECT * FROM ks.t>, time 900 msec - slow timeout 500 msec, 40 rows
 *
 * At most NODE_SLOW_QUERIES_MAX distinct queries per report (the rest are
 * counted); texts are cut at NODE_SLOW_QUERIES_TEXT bytes. On the loop.
 */
#ifndef CASSINI_NODE_SLOW_QUERIES_H
#define CASSINI_NODE_SLOW_QUERIES_H

#include <stddef.h>
#include <stdint.h>

#define NODE_SLOW_QUERIES_INTERVAL_US 5000000u
#define NODE_SLOW_QUERIES_MAX         32
#define NODE_SLOW_QUERIES_TEXT        512

struct env;
struct node_slow_queries;

/* timeout_us 0: off (returns NULL without error). NULL with err set when
 * out of memory. */
struct node_slow_queries *node_slow_queries_new(struct env *env,
						uint64_t timeout_us);
void node_slow_queries_delete(struct node_slow_queries *q);
/* Reports what is gathered now (also called by the timer). */
void node_slow_queries_flush(struct node_slow_queries *q);
/* A read of `text` that took `elapsed_us` and returned `rows`: kept when
 * slower than the timeout. q may be NULL (off). */
void node_slow_queries_note(struct node_slow_queries *q, const char *text,
			    size_t len, uint64_t elapsed_us, size_t rows);
uint64_t node_slow_queries_timeout_us(const struct node_slow_queries *q);

#endif
