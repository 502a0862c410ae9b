/*
 * nodetool compactionstats: the compactions due or running on each table
 * and the progress of the running ones, in Cassandra 4.1's layout:
 *
 *   pending tasks: 2
 *   - ks.t: 2
 *
 *   id  compaction type  keyspace  table  completed  total  unit  progress
 *   ...
 *   Active compaction remaining time :   0h00m05s
 *
 * "pending" counts per table a compaction running and one a background
 * round would start now (Cassandra estimates its strategies' backlog).
 */
#include "common/ratelimit.h"
#include "common/uuid.h"
#include "node/admin.h"
#include "node/cql_service.h"
#include "node/node_internal.h"
#include "storage/storage.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COLS     8
#define MAX_ROWS 64

/* Cassandra's TableBuilder: columns padded to the widest cell, one
 * space between them. */
static void print_table(struct buf *out, char cells[][COLS][64], size_t rows)
{
	size_t w[COLS] = {0};
	for (size_t r = 0; r < rows; r++)
		for (int c = 0; c < COLS; c++)
			if (strlen(cells[r][c]) > w[c])
				w[c] = strlen(cells[r][c]);
	for (size_t r = 0; r < rows; r++) {
		for (int c = 0; c < COLS; c++)
			admin_printf(out, c + 1 < COLS ? "%-*s " : "%-*s",
				     (int)w[c], cells[r][c]);
		admin_printf(out, "\n");
	}
}

static int cmd_compactionstats(void *arg, size_t argc, const char *const *argv,
			       struct buf *out, struct buf *err)
{
	(void)argv;
	struct node *n = arg;
	if (argc != 0) {
		admin_printf(err, "usage: compactionstats\n");
		return 1;
	}
	if (!n->cql) {
		admin_printf(err, "error: this node serves no data\n");
		return 2;
	}
	struct storage *db = cql_service_storage(n->cql);
	const struct cql_schema *schema = cql_service_schema(n->cql);
	uint64_t pending = 0;
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			admin_printf(out, "pending tasks: %" PRIu64 "\n",
				     pending);
		for (size_t i = 0; i < cql_schema_keyspace_count(schema); i++) {
			const struct cql_keyspace *k =
				cql_schema_keyspace_at(schema, i);
			for (size_t j = 0; j < cql_keyspace_table_count(k);
			     j++) {
				const struct storage_table_meta *t =
					cql_table_meta(
						cql_keyspace_table_at(k, j));
				struct storage_stats st;
				if (storage_stats(db, t->id, &st) != 0 ||
				    !st.compactions_pending)
					continue;
				if (pass == 0)
					pending += st.compactions_pending;
				else
					admin_printf(out,
						     "- %s.%s: %" PRIu64 "\n",
						     t->keyspace, t->name,
						     st.compactions_pending);
			}
		}
	}
	admin_printf(out, "\n");
	struct storage_compaction_info c[MAX_ROWS];
	size_t got = storage_compactions_active(db, c, MAX_ROWS);
	if (got > MAX_ROWS)
		got = MAX_ROWS;
	if (got == 0)
		return 0;
	char(*cells)[COLS][64] = calloc(MAX_ROWS + 1, sizeof(*cells));
	if (!cells) {
		admin_printf(err, "error: out of memory\n");
		return 2;
	}
	static const char *const head[COLS] = {
		"id",        "compaction type", "keyspace", "table",
		"completed", "total",           "unit",     "progress"};
	for (int col = 0; col < COLS; col++)
		snprintf(cells[0][col], 64, "%s", head[col]);
	uint64_t remaining = 0;
	for (size_t i = 0; i < got; i++) {
		const struct storage_table_meta *t =
			node_table_by_id(n, c[i].table_id);
		char id[UUID_TEXT_LEN + 1];
		uuid_format(c[i].task_id, id);
		char(*row)[64] = cells[i + 1];
		snprintf(row[0], 64, "%s", id);
		snprintf(row[1], 64, "%s", c[i].kind);
		snprintf(row[2], 64, "%s", t ? t->keyspace : "*");
		snprintf(row[3], 64, "%s", t ? t->name : "*");
		snprintf(row[4], 64, "%" PRIu64, c[i].completed);
		snprintf(row[5], 64, "%" PRIu64, c[i].total);
		snprintf(row[6], 64, "bytes");
		snprintf(row[7], 64, "%.2f%%",
			 c[i].total ? 100.0 * (double)c[i].completed /
					      (double)c[i].total
				    : 100.0);
		remaining += c[i].total - c[i].completed;
	}
	print_table(out, cells, got + 1);
	free(cells);
	/* at compaction_throughput; n/a when unthrottled, as Cassandra */
	uint64_t rate = ratelimit_rate(storage_throughput_budget(db));
	if (rate == 0) {
		admin_printf(out,
			     "Active compaction remaining time :        n/a\n");
		return 0;
	}
	uint64_t s = remaining / rate;
	admin_printf(out,
		     "Active compaction remaining time : %4" PRIu64
		     "h%02" PRIu64 "m%02" PRIu64 "s\n",
		     s / 3600, s / 60 % 60, s % 60);
	return 0;
}

int node_admin_register_compaction(struct node *n)
{
	return admin_register(n->admin, "compactionstats",
			      "compactionstats       compactions pending and "
			      "running, with their progress",
			      cmd_compactionstats, n);
}
