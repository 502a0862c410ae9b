/*
 * system_views.repairs and repair_sessions (Cassandra 5.0's
 * LocalRepairTables RepairTable and SessionTable) from the states repair/
 * keeps of the last REPAIR_MAX_STATES sessions this node coordinated
 * (repair_state_list): manual and scheduled, full and incremental; the
 * streaming sessions of bootstrap, decommission and rebuild are not
 * repairs and are not listed.
 *
 * Cassini runs one session per repair (Cassandra one per common range,
 * each with a job per table): a repairs row has the one session in
 * `sessions`, and its session row covers every range. Columns not
 * backed (null): repair_sessions.jobs (tasks are not registered as
 * Cassandra's jobs: there is no repair_jobs table), success_message
 * (Cassandra's is null too but for a skipped repair) and
 * state_skipped_timestamp (no repair here is skipped: one with nothing to
 * repair never starts). options_pull_repair, options_force_repair,
 * options_optimise_streams and options_ignore_unreplicated_keyspaces are
 * false: Cassini has none of those options.
 */
#include "common/buf.h"
#include "common/err.h"
#include "common/inet.h"
#include "node/cql_service.h"
#include "node/node_internal.h"
#include "node/node_repair_internal.h"
#include "repair/repair.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const step_cols[REPAIR_STEP_COUNT] = {
	"state_setup_timestamp",         "state_start_timestamp",
	"state_prepare_start_timestamp", "state_prepare_complete_timestamp",
	"state_repair_start_timestamp",  "state_repair_complete_timestamp",
};

static const char *const step_names[REPAIR_STEP_COUNT] = {
	"setup",        "start",           "prepare_start", "prepare_complete",
	"repair_start", "repair_complete",
};

/* Cassandra's Range.toString and InetAddressAndPort.toString. */
static void range_text(int64_t l, int64_t r, char out[48])
{
	snprintf(out, 48, "(%" PRId64 ",%" PRId64 "]", l, r);
}

#define ADDR_TEXT (INET_ADDR_STRLEN + 8)

static void addr_text(const struct inet_addr *a, char out[ADDR_TEXT])
{
	char h[INET_ADDR_STRLEN];
	inet_addr_format_host(a, h, sizeof(h));
	snprintf(out, ADDR_TEXT, "/%.*s:%u", INET_ADDR_STRLEN - 1, h,
		 (unsigned)a->port);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A frozen list<text> (or, with `set`, set<text>: sorted, no repeats) of
 * items[0..n) into `out`. */
static int encode_texts(struct buf *out, const char **items, size_t n, bool set)
{
	if (set && n > 1) {
		qsort(items, n, sizeof(*items), cmp_str);
		size_t k = 1;
		for (size_t i = 1; i < n; i++)
			if (strcmp(items[i], items[k - 1]) != 0)
				items[k++] = items[i];
		n = k;
	}
	int rc = buf_put_be32(out, (uint32_t)n);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		size_t len = strlen(items[i]);
		rc = buf_put_be32(out, (uint32_t)len) ||
		     buf_append(out, items[i], len);
	}
	return rc ? -1 : 0;
}

static int put_texts(struct cql_view_rows *b, const char *col,
		     const char *const *items, size_t n, bool set)
{
	const char **v = calloc(n + 1, sizeof(*v));
	if (!v)
		return err_set(ERR_NOMEM, "repairs view");
	for (size_t i = 0; i < n; i++)
		v[i] = items[i] ? items[i] : "";
	struct buf out;
	buf_init(&out);
	int rc = encode_texts(&out, v, n, set);
	if (rc == 0)
		rc = cql_view_bytes(b, col, out.data, out.len);
	buf_free(&out);
	free(v);
	return rc;
}

/* `participants`: every replica, as Cassandra prints an endpoint. */
static int put_participants(struct cql_view_rows *b,
			    const struct repair_state_info *s)
{
	char(*ps)[ADDR_TEXT] = calloc(s->nparticipants + 1, sizeof(*ps));
	const char **pv = calloc(s->nparticipants + 1, sizeof(*pv));
	int rc = ps && pv ? 0 : err_set(ERR_NOMEM, "repairs view");
	for (size_t i = 0; rc == 0 && i < s->nparticipants; i++) {
		addr_text(&s->participants[i], ps[i]);
		pv[i] = ps[i];
	}
	rc = rc || put_texts(b, "participants", pv, s->nparticipants, false);
	free(ps);
	free(pv);
	return rc ? -1 : 0;
}

/* Every range of the state as text (ranges[i] in out + 48 * i). */
static char *ranges_text(const struct repair_state_info *s)
{
	char *t = malloc(48 * (s->nranges + 1));
	for (size_t i = 0; t && i < s->nranges; i++)
		range_text(s->ranges[i].start, s->ranges[i].end, t + 48 * i);
	return t;
}

static bool same_replicas(const struct repair_range *a,
			  const struct repair_range *b)
{
	if (a->nreplicas != b->nreplicas)
		return false;
	for (size_t i = 0; i < a->nreplicas; i++) {
		bool found = false;
		for (size_t k = 0; k < b->nreplicas && !found; k++)
			found = inet_addr_eq(&a->replicas[i], &b->replicas[k]);
		if (!found)
			return false;
	}
	return true;
}

/* `ranges` and `unfiltered_ranges`: a list per common range (the ranges
 * of one replica set, in the order they first appear). */
static int put_common_ranges(struct cql_view_rows *b,
			     const struct repair_state_info *s,
			     const char *text)
{
	size_t n = s->nranges;
	size_t *group = calloc(n + 1, sizeof(*group));
	const char **items = calloc(n + 1, sizeof(*items));
	struct buf out, inner;
	buf_init(&out);
	buf_init(&inner);
	int rc = group && items ? 0 : err_set(ERR_NOMEM, "repairs view");
	size_t ngroups = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		size_t g = 0;
		while (g < i && !(group[g] < ngroups &&
				  same_replicas(&s->ranges[g], &s->ranges[i])))
			g++;
		group[i] = g < i ? group[g] : ngroups++;
	}
	rc = rc || buf_put_be32(&out, (uint32_t)ngroups);
	for (size_t g = 0; rc == 0 && g < ngroups; g++) {
		size_t k = 0;
		for (size_t i = 0; i < n; i++)
			if (group[i] == g)
				items[k++] = text + 48 * i;
		buf_clear(&inner);
		rc = encode_texts(&inner, items, k, false) ||
		     buf_put_be32(&out, (uint32_t)inner.len) ||
		     buf_append(&out, inner.data, inner.len);
	}
	if (rc == 0)
		rc = cql_view_bytes(b, "ranges", out.data, out.len) ||
		     cql_view_bytes(b, "unfiltered_ranges", out.data, out.len);
	buf_free(&out);
	buf_free(&inner);
	free(group);
	free(items);
	return rc ? -1 : 0;
}

/* The columns both tables share (Cassandra's stdColumnsWithStatus). */
static int std_columns(struct cql_view_rows *b,
		       const struct repair_state_info *s, const uint8_t id[16],
		       const char *step)
{
	/* Cassandra's addState: the result, else the step, in lower case */
	const char *status = step ? step : "init";
	if (s->result == REPAIR_RESULT_SUCCESS)
		status = "success";
	else if (s->result == REPAIR_RESULT_FAILURE)
		status = "failure";
	int rc = cql_view_row(b) || cql_view_uuid(b, "id", id) ||
		 cql_view_timestamp(b, "last_updated_at", s->updated_ms) ||
		 cql_view_bool(b, "completed",
			       s->result != REPAIR_RESULT_NONE) ||
		 cql_view_bigint(b, "duration_millis",
				 (int64_t)s->duration_ms) ||
		 cql_view_timestamp(b, "state_init_timestamp", s->init_ms) ||
		 cql_view_text(b, "status", status);
	if (rc == 0 && s->result == REPAIR_RESULT_SUCCESS)
		rc = cql_view_timestamp(b, "state_success_timestamp",
					s->updated_ms);
	if (rc == 0 && s->result == REPAIR_RESULT_FAILURE)
		rc = cql_view_timestamp(b, "state_failure_timestamp",
					s->updated_ms) ||
		     cql_view_text(b, "failure_cause", s->error);
	return rc ? -1 : 0;
}

/* The keyspace of the session's tables ("ks.table"). */
static void keyspace_of(const struct repair_state_info *s, char *ks, size_t cap)
{
	const char *t = s->ntables ? s->tables[0] : "";
	const char *dot = strchr(t, '.');
	size_t n = dot ? (size_t)(dot - t) : strlen(t);
	if (n >= cap)
		n = cap - 1;
	memcpy(ks, t, n);
	ks[n] = 0;
}

struct view_ctx {
	struct node *n;
	const struct repair *r;
	struct cql_view_rows *b;
	bool sessions;
	int rc;
};

static int repair_row(struct view_ctx *c, const struct repair_state_info *s,
		      const char *ks, const char *text, int last_step)
{
	struct cql_view_rows *b = c->b;
	uint8_t id[16], sid[16];
	repair_state_timeuuid(c->r, s->session, s->init_ms, 0, id);
	repair_state_timeuuid(c->r, s->session, s->init_ms, 1, sid);
	const char *type = s->preview       ? "preview full"
			   : s->incremental ? "incremental"
					    : "full";
	const char *par = s->parallelism == REPAIR_SEQUENTIAL ? "SEQUENTIAL"
			  : s->parallelism == REPAIR_DC_PARALLEL
				  ? "DATACENTER_AWARE"
				  : "PARALLEL";
	uint8_t set[4 + 4 + 16];
	be32_store(set, 1);
	be32_store(set + 4, 16);
	memcpy(set + 8, sid, 16);
	const char **rs = calloc(s->nranges + 1, sizeof(*rs));
	if (!rs)
		return err_set(ERR_NOMEM, "repairs view");
	for (size_t i = 0; i < s->nranges; i++)
		rs[i] = text + 48 * i;
	/* the short names of the tables, as Cassandra lists them */
	const char **names = calloc(s->ntables + 1, sizeof(*names));
	for (size_t i = 0; names && i < s->ntables; i++) {
		const char *dot = strchr(s->tables[i], '.');
		names[i] = dot ? dot + 1 : s->tables[i];
	}
	int rc = names ? 0 : err_set(ERR_NOMEM, "repairs view");
	rc = rc ||
	     std_columns(b, s, id,
			 last_step >= 0 ? step_names[last_step] : NULL) ||
	     cql_view_int(b, "command_id", (int32_t)s->command) ||
	     cql_view_text(b, "keyspace_name", ks) ||
	     cql_view_text(b, "type", type) ||
	     cql_view_bytes(b, "sessions", set, sizeof(set)) ||
	     cql_view_text(b, "options_parallelism", par) ||
	     cql_view_bool(b, "options_primary_range",
			   s->asked.primary_range) ||
	     cql_view_bool(b, "options_incremental", s->incremental) ||
	     cql_view_bool(b, "options_trace", s->trace) ||
	     cql_view_int(b, "options_job_threads", (int32_t)s->jobs) ||
	     cql_view_bool(b, "options_subrange_repair", s->asked.subrange) ||
	     cql_view_bool(b, "options_pull_repair", false) ||
	     cql_view_bool(b, "options_force_repair", false) ||
	     cql_view_text(b, "options_preview_kind",
			   s->preview ? "ALL" : "NONE") ||
	     cql_view_bool(b, "options_optimise_streams", false) ||
	     cql_view_bool(b, "options_ignore_unreplicated_keyspaces", false) ||
	     put_texts(b, "options_column_families", s->asked.column_families,
		       s->asked.ncolumn_families, true) ||
	     put_texts(b, "options_data_centers", s->asked.data_centers,
		       s->asked.ndata_centers, true) ||
	     put_texts(b, "options_hosts", s->asked.hosts, s->asked.nhosts,
		       true) ||
	     put_texts(b, "options_ranges", rs, s->nranges, true) ||
	     put_texts(b, "table_names", names, s->ntables, false) ||
	     put_common_ranges(b, s, text);
	free(rs);
	free(names);
	return rc ? -1 : 0;
}

static int session_row(struct view_ctx *c, const struct repair_state_info *s,
		       const char *ks, const char *text)
{
	struct cql_view_rows *b = c->b;
	uint8_t id[16], rid[16];
	repair_state_timeuuid(c->r, s->session, s->init_ms, 1, id);
	repair_state_timeuuid(c->r, s->session, s->init_ms, 0, rid);
	/* SessionState: START with the repair's, JOBS_START when its tasks
	 * start */
	int64_t started = s->steps_ms[REPAIR_STEP_START];
	int64_t jobs = s->steps_ms[REPAIR_STEP_REPAIR_START];
	const char **rs = calloc(s->nranges + 1, sizeof(*rs));
	const char **names = calloc(s->ntables + 1, sizeof(*names));
	int rc = rs && names ? 0 : err_set(ERR_NOMEM, "repairs view");
	for (size_t i = 0; rs && i < s->nranges; i++)
		rs[i] = text + 48 * i;
	for (size_t i = 0; names && i < s->ntables; i++) {
		const char *dot = strchr(s->tables[i], '.');
		names[i] = dot ? dot + 1 : s->tables[i];
	}
	rc = rc ||
	     std_columns(b, s, id,
			 jobs      ? "jobs_start"
			 : started ? "start"
				   : NULL) ||
	     cql_view_uuid(b, "repair_id", rid) ||
	     cql_view_text(b, "keyspace_name", ks) ||
	     put_texts(b, "table_names", names, s->ntables, false) ||
	     put_texts(b, "ranges", rs, s->nranges, false);
	if (rc == 0 && started)
		rc = cql_view_timestamp(b, "state_start_timestamp", started);
	if (rc == 0 && jobs)
		rc = cql_view_timestamp(b, "state_jobs_start_timestamp", jobs);
	rc = rc || put_participants(b, s);
	free(rs);
	free(names);
	return rc ? -1 : 0;
}

static void each_state(void *arg, const struct repair_state_info *s)
{
	struct view_ctx *c = arg;
	if (c->rc)
		return;
	char ks[128];
	keyspace_of(s, ks, sizeof(ks));
	char *text = ranges_text(s);
	if (!text) {
		c->rc = err_set(ERR_NOMEM, "repairs view");
		return;
	}
	int last = -1;
	for (int k = 0; k < REPAIR_STEP_COUNT; k++)
		if (s->steps_ms[k])
			last = k;
	int rc = c->sessions ? session_row(c, s, ks, text)
			     : repair_row(c, s, ks, text, last);
	for (int k = 0; rc == 0 && !c->sessions && k < REPAIR_STEP_COUNT; k++)
		if (s->steps_ms[k])
			rc = cql_view_timestamp(c->b, step_cols[k],
						s->steps_ms[k]);
	if (rc == 0 && !c->sessions)
		rc = put_participants(c->b, s);
	free(text);
	c->rc = rc;
}

int node_view_repairs(struct node *n, struct cql_view_rows *b, bool sessions)
{
	if (!n->repair || !n->repair->repair)
		return 0;
	struct view_ctx c = {
		.n = n, .r = n->repair->repair, .b = b, .sessions = sessions};
	repair_state_list(n->repair->repair, each_state, &c);
	return c.rc ? -1 : 0;
}
