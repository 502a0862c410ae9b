/*
 * Repair in the node: the internode verbs and the `repair` admin command;
 * the store repair/ sees (this node's storage engine, scans on a dedicated
 * worker so validation never blocks the loop or the read workers, drawing
 * on compaction_throughput's budget together with compaction) is
 * node_repair_store.c's, repair_admin and netstats node_repair_admin.c's.
 *
 *   repair [--full] [--force-incremental] [-pr] [-st TOKEN -et TOKEN]
 *          [-dc NAME]... [-local] [-hosts A,B,...] [--preview]
 *          [-seq | -dcpar] [-j N] [--trace] [keyspace [tables...]]
 *
 *   Incremental unless --full (nodetool 4): participants mark their
 *   unrepaired data pending first (anticompaction on the repair worker),
 *   then repaired when every task succeeded (repair_incr.c). An
 *   incremental repair that would cover a TimeWindowCompactionStrategy
 *   table is refused, naming the tables and the reason, unless
 *   --force-incremental.
 *
 *   repair_admin list [--all]
 *                         the incremental sessions this node takes part in
 *                         (nodetool's layout), the sessions it coordinated
 *                         (the last 64) and what runs now
 *   repair_admin cancel --session ID [--force]
 *                         fails an incremental session
 *   repair_admin cleanup [--force]
 *                         settles data that ended sessions left pending
 *                         (sessions persisted in repair_sessions)
 *   repair_admin summarize-pending|summarize-repaired [ks[.table]]
 *                         SSTables per repair state
 *   repair_admin history [ks[.table]]
 *                         every (table, range) task of them, persisted in
 *                         <saved_caches_directory>/repair_history
 *   repair_admin cancel   fails the running session
 *   netstats              the running session's range, step and counts
 *   repair schedule status|pause|resume|run-now [ks[.table]]
 *                         scheduled repair (node_repair_sched.c)
 *
 * The ranges are this node's vnode ranges for each keyspace (those whose
 * primary replica it is with -pr), cut to (st, et] for a subrange, each
 * repaired among its natural replicas (only those of the -dc datacenters,
 * of this node's with -local, and among the -hosts when given). Every replica
 * must be alive. Keyspaces run one after another, one repair session each; the
 * command answers with progress frames as ranges finish and a summary at the
 * end (exit status 2 on failure).
 */
#define LOG_MODULE "repair"
#include "common/log.h"
#include "common/loopq.h"
#include "common/workers.h"
#include "node/admin.h"
#include "node/cql_cas.h"
#include "node/cql_service.h"
#include "node/members.h"
#include "node/node_internal.h"
#include "node/node_repair_internal.h"
#include "node/state_file.h"
#include "repair/repair_history.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

struct repair_cmd;

/* ---- the command --------------------------------------------------------- */

#define MAX_DCS             16
#define ADMIN_ARG_MAX_HOSTS 1024

struct repair_cmd {
	struct node_repair *nr;
	struct admin_reply *reply;
	bool pr, preview, subrange;
	bool full; /* --full; else incremental (nodetool 4's default) */
	bool force_incremental; /* --force-incremental: TWCS tables too */
	int64_t st, et;
	const char *dcs[MAX_DCS];
	size_t ndc;
	bool local; /* -local: this node's datacenter only */
	bool seq, dcpar, trace;
	uint32_t jobs;
	char options[REPAIR_HISTORY_OPTIONS_MAX]; /* as given, for history */
	struct inet_addr hosts[REPAIR_MAX_REPLICAS * 4]; /* -hosts */
	size_t nhosts;
	char **keyspaces;
	size_t nks, ki;
	char **tables; /* a filter for the one keyspace given; NULL: all */
	size_t ntables;
	char *args;     /* the strings above point into it */
	struct buf out; /* the summary so far */
	uint64_t sessions;
};

static void cmd_free(struct repair_cmd *c)
{
	if (c->nr->cmd == c)
		c->nr->cmd = NULL;
	for (size_t i = 0; c->keyspaces && i < c->nks; i++)
		free(c->keyspaces[i]);
	free(c->keyspaces);
	free(c->tables);
	free(c->args);
	buf_free(&c->out);
	free(c);
}

/* The non-wrapping pieces of (l, r]: 0 to 2. */
static size_t pieces(int64_t l, int64_t r, struct token_range out[2])
{
	size_t n = 0;
	if (l < r) {
		out[n++] = token_range_make(l, r);
		return n;
	}
	if (l != INT64_MAX)
		out[n++] = token_range_make(l, INT64_MAX);
	if (r != INT64_MIN)
		out[n++] = token_range_make(INT64_MIN, r);
	return n;
}

int node_repair_job_tables(struct node_repair_job *j,
			   const struct cql_keyspace *k,
			   bool (*wanted)(void *arg, const char *name),
			   void *arg)
{
	size_t nt = cql_keyspace_table_count(k);
	if (!nt)
		return 0;
	j->tables = calloc(nt, sizeof(*j->tables));
	j->names = calloc(nt, sizeof(*j->names));
	if (!j->tables || !j->names)
		return err_set(ERR_NOMEM, "repair tables");
	for (size_t i = 0; i < nt; i++) {
		const struct storage_table_meta *m =
			cql_table_meta(cql_keyspace_table_at(k, i));
		if (wanted && !wanted(arg, m->name))
			continue;
		struct repair_table *t = &j->tables[j->ntables];
		memcpy(t->id, m->id, 16);
		snprintf(j->names[j->ntables], sizeof(j->names[0]), "%s.%s",
			 cql_keyspace_meta(k)->name, m->name);
		t->name = j->names[j->ntables++];
	}
	return 0;
}

int node_repair_job_push(struct node_repair_job *j, int64_t l, int64_t r,
			 const struct inet_addr *reps, const char *const *dcs,
			 size_t nrep)
{
	if (j->nranges == j->cap) {
		size_t cap = j->cap ? j->cap * 2 : 64;
		struct repair_range *v = realloc(j->ranges, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "ranges");
		j->ranges = v;
		struct inet_addr *a = realloc(
			j->addrs, cap * REPAIR_MAX_REPLICAS * sizeof(*a));
		if (!a)
			return err_set(ERR_NOMEM, "ranges");
		j->addrs = a;
		const char **d =
			realloc(j->dcs, cap * REPAIR_MAX_REPLICAS * sizeof(*d));
		if (!d)
			return err_set(ERR_NOMEM, "ranges");
		j->dcs = d;
		j->cap = cap;
	}
	size_t at = j->nranges * REPAIR_MAX_REPLICAS;
	memcpy(&j->addrs[at], reps, nrep * sizeof(*reps));
	for (size_t i = 0; i < nrep; i++)
		j->dcs[at + i] = dcs ? dcs[i] : NULL;
	j->ranges[j->nranges++] =
		(struct repair_range){.start = l, .end = r, .nreplicas = nrep};
	return 0;
}

void node_repair_job_request(struct node_repair_job *j,
			     struct repair_request *q)
{
	for (size_t i = 0; i < j->nranges; i++) {
		size_t at = i * REPAIR_MAX_REPLICAS;
		j->ranges[i].replicas = &j->addrs[at];
		j->ranges[i].dcs = j->dcs[at] ? &j->dcs[at] : NULL;
	}
	q->tables = j->tables;
	q->ntables = j->ntables;
	q->ranges = j->ranges;
	q->nranges = j->nranges;
}

void node_repair_job_free(struct node_repair_job *j)
{
	free(j->tables);
	free(j->names);
	free(j->ranges);
	free(j->addrs);
	free(j->dcs);
	memset(j, 0, sizeof(*j));
}

static bool host_wanted(const struct repair_cmd *c, const struct inet_addr *a)
{
	if (!c->nhosts)
		return true;
	for (size_t i = 0; i < c->nhosts; i++)
		if (inet_addr_cmp(&c->hosts[i], a) == 0 ||
		    (c->hosts[i].port == 0 &&
		     memcmp(c->hosts[i].ip, a->ip, sizeof(a->ip)) == 0 &&
		     c->hosts[i].family == a->family))
			return true;
	return false;
}

static bool dc_wanted(const struct repair_cmd *c, const char *dc)
{
	if (c->local && strcmp(dc, c->nr->n->conf.dc) != 0)
		return false;
	if (!c->ndc)
		return true;
	for (size_t i = 0; i < c->ndc; i++)
		if (strcmp(c->dcs[i], dc) == 0)
			return true;
	return false;
}

/* This node's ranges of the keyspace with their replicas, as the options
 * say. -1 with a message in `err`. */
static int build_ranges(struct repair_cmd *c, const struct ring_strategy *s,
			struct node_repair_job *rs, struct buf *err)
{
	struct node *n = c->nr->n;
	struct ring *r = members_ring(n->members);
	int self = ring_endpoint_find(r, &n->conf.broadcast_address);
	if (self < 0) {
		admin_printf(err, "this node has no tokens yet\n");
		return -1;
	}
	for (size_t i = 0; i < ring_token_count(r); i++) {
		struct token_range tr = ring_range_at(r, i);
		struct ring_replicas rep;
		if (ring_replicas_for_token(r, s, tr.right, &rep)) {
			admin_printf(err, "%s\n", err_msg());
			return -1;
		}
		bool mine = false;
		for (size_t k = 0; k < rep.n_natural; k++)
			mine = mine || (int)rep.natural[k] == self;
		if (!mine || (c->pr && (int)rep.natural[0] != self))
			continue;
		struct inet_addr reps[REPAIR_MAX_REPLICAS];
		const char *dcs[REPAIR_MAX_REPLICAS];
		size_t nrep = 0;
		for (size_t k = 0; k < rep.n_natural; k++) {
			const struct ring_endpoint *ep =
				ring_endpoint_get(r, rep.natural[k]);
			if (!dc_wanted(c, ep->dc) ||
			    !host_wanted(c, &ep->addr) ||
			    nrep == REPAIR_MAX_REPLICAS)
				continue;
			if ((int)rep.natural[k] != self &&
			    !gossip_is_alive(n->gossip, &ep->addr)) {
				char a[INET_ADDR_STRLEN];
				admin_printf(err, "Endpoint not alive: %s\n",
					     inet_addr_format(&ep->addr, a,
							      sizeof(a)));
				return -1;
			}
			dcs[nrep] = ep->dc;
			reps[nrep++] = ep->addr;
		}
		if (nrep < 2)
			continue; /* nothing to compare */
		if (!c->subrange) {
			if (node_repair_job_push(rs, tr.left, tr.right, reps,
						 dcs, nrep)) {
				admin_printf(err, "%s\n", err_msg());
				return -1;
			}
			continue;
		}
		/* (st, et] within the vnode range: non-wrapping pieces */
		struct token_range a[2], b[2];
		size_t na = pieces(tr.left, tr.right, a);
		size_t nb = pieces(c->st, c->et, b);
		for (size_t x = 0; x < na; x++)
			for (size_t y = 0; y < nb; y++) {
				int64_t lo = a[x].left > b[y].left ? a[x].left
								   : b[y].left;
				int64_t hi = a[x].right < b[y].right
						     ? a[x].right
						     : b[y].right;
				if (lo < hi &&
				    node_repair_job_push(rs, lo, hi, reps, dcs,
							 nrep)) {
					admin_printf(err, "%s\n", err_msg());
					return -1;
				}
			}
	}
	return 0;
}

static void on_progress(void *arg, const char *line)
{
	struct repair_cmd *c = arg;
	char text[600];
	if (strncmp(line, "trace: ", 7) == 0) {
		snprintf(text, sizeof(text), "[trace] %s\n", line + 7);
		LOG_DEBUG("%s", line);
	} else {
		snprintf(text, sizeof(text), "[repair] %s\n", line);
		LOG_INFO("%s", line);
	}
	admin_reply_progress(c->reply, text);
}

static void run_next(struct repair_cmd *c);

void node_repair_uuid_str(const uint8_t x[16], char out[40])
{
	snprintf(out, 40,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x",
		 x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9],
		 x[10], x[11], x[12], x[13], x[14], x[15]);
}

int node_repair_uuid_parse(const char *s, uint8_t out[16])
{
	size_t n = 0;
	for (const char *p = s; *p; p++) {
		if (*p == '-')
			continue;
		int v;
		if (*p >= '0' && *p <= '9')
			v = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			v = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			v = *p - 'A' + 10;
		else
			return -1;
		if (n >= 32)
			return -1;
		if (n % 2 == 0)
			out[n / 2] = (uint8_t)(v << 4);
		else
			out[n / 2] |= (uint8_t)v;
		n++;
	}
	return n == 32 ? 0 : -1;
}

static void summary(struct repair_cmd *c, const char *ks,
		    const struct repair_summary *s)
{
	admin_printf(&c->out,
		     "Repair session %" PRIu64 " of %s %s in %.3f s%s\n"
		     "  ranges: %" PRIu64 ", mismatched ranges: %" PRIu64
		     ", rows hashed: %" PRIu64 ", rows mismatched: %" PRIu64
		     ", tree and hash bytes: %" PRIu64 " (node values %" PRIu64
		     ", mismatched leaves %" PRIu64 ")\n",
		     s->session, ks, s->ok ? "finished" : "FAILED",
		     (double)s->duration_us / 1e6,
		     c->preview ? " (preview)" : "", s->ranges,
		     s->mismatched_ranges, s->rows_hashed, s->rows_mismatched,
		     s->tree_bytes, s->hash_bytes, s->leaves_mismatched);
	admin_printf(&c->out,
		     "  partitions validated: %" PRIu64 " (all replicas)\n",
		     s->partitions);
	if (s->incremental) {
		char u[40];
		node_repair_uuid_str(s->uuid, u);
		admin_printf(&c->out,
			     "  incremental session %s: %" PRIu64
			     " SSTables marked pending, %" PRIu64 " %s%s\n",
			     u, s->marked, s->repaired,
			     s->partial ? "back to unrepaired (not every "
					  "replica took part)"
					: "marked repaired",
			     s->ok ? "" : " (pending data back to unrepaired)");
	}
	for (size_t i = 0; i < s->npeers; i++) {
		const struct repair_peer_stats *p = &s->peers[i];
		char a[INET_ADDR_STRLEN];
		admin_printf(&c->out,
			     "  %-22s %s %" PRIu64 " rows (%" PRIu64
			     " bytes), fetched %" PRIu64 " rows (%" PRIu64
			     " bytes)\n",
			     inet_addr_format(&p->addr, a, sizeof(a)),
			     c->preview ? "would stream" : "streamed",
			     p->rows_streamed, p->bytes_streamed,
			     p->rows_fetched, p->bytes_fetched);
	}
}

static void record(struct node_repair *nr, const char *ks, bool preview,
		   const struct repair_summary *s)
{
	struct repair_record *h = &nr->history[nr->nhistory++ % HISTORY];
	memset(h, 0, sizeof(*h));
	h->session = s->session;
	snprintf(h->keyspace, sizeof(h->keyspace), "%s", ks);
	h->duration_us = s->duration_us;
	h->started_s = env_wall_us(nr->n->env) / 1000000 -
		       (int64_t)(s->duration_us / 1000000);
	h->ok = s->ok;
	h->preview = preview;
	snprintf(h->error, sizeof(h->error), "%s", s->error);
	h->ranges = s->ranges;
	h->mismatched = s->mismatched_ranges;
	for (size_t i = 0; i < s->npeers; i++) {
		h->rows_streamed += s->peers[i].rows_streamed;
		h->bytes_streamed += s->peers[i].bytes_streamed;
	}
}

/* A task's end into the persisted history. */
static void on_task(void *arg, const struct repair_task_result *t)
{
	struct repair_cmd *c = arg;
	int64_t now = env_wall_us(c->nr->n->env);
	struct repair_history_entry e = {
		.session = t->session,
		.start = t->start,
		.end = t->end,
		.started_us = now - (int64_t)t->duration_us,
		.finished_us = now,
		.outcome = !t->ok       ? REPAIR_HISTORY_FAILED
			   : c->preview ? REPAIR_HISTORY_PREVIEW
					: REPAIR_HISTORY_OK,
		.mismatched_ranges = t->mismatched_ranges,
		.rows_streamed = t->rows_streamed,
		.bytes_streamed = t->bytes_streamed,
	};
	snprintf(e.table, sizeof(e.table), "%s", t->table);
	snprintf(e.options, sizeof(e.options), "%s", c->options);
	snprintf(e.error, sizeof(e.error), "%s", t->error);
	repair_history_add(c->nr->tasks, &e);
	c->nr->tasks_dirty = true;
}

static void history_save(struct node_repair *nr)
{
	struct buf b;
	buf_init(&b);
	if (repair_history_encode(nr->tasks, &b)) {
		LOG_WARN("cannot encode the repair history: %s", err_msg());
		buf_free(&b);
		return;
	}
	node_state_file_save(nr->tasks_file, b.data, b.len); /* takes it */
	nr->tasks_dirty = false;
}

static int parse_history(void *arg, const uint8_t *data, size_t len)
{
	return repair_history_load(((struct node_repair *)arg)->tasks, data,
				   len);
}

/* Reads the history (at start, before the loop runs). A corrupt file is
 * moved aside to repair_history.corrupt, with an error in the log; the
 * history starts empty. */
static void history_load(struct node_repair *nr)
{
	if (node_state_file_load(nr->tasks_file, HISTORY_MAX, parse_history, nr,
				 "starting an empty repair history") == 1)
		LOG_INFO("repair history: %zu tasks from %s",
			 repair_history_count(nr->tasks),
			 node_state_file_path(nr->tasks_file));
}

static void on_done(void *arg, const struct repair_summary *s)
{
	struct repair_cmd *c = arg;
	record(c->nr, c->keyspaces[c->ki], c->preview, s);
	history_save(c->nr);
	summary(c, c->keyspaces[c->ki], s);
	if (!s->ok) {
		LOG_WARN("repair session %" PRIu64 " failed: %s", s->session,
			 s->error);
		char e[400];
		snprintf(e, sizeof(e), "error: repair failed: %s\n", s->error);
		buf_put_u8(&c->out, 0);
		admin_reply_finish(c->reply, 2, (const char *)c->out.data, e);
		cmd_free(c);
		return;
	}
	c->ki++;
	run_next(c);
}

static bool table_wanted(void *arg, const char *name)
{
	const struct repair_cmd *c = arg;
	if (!c->ntables)
		return true;
	for (size_t i = 0; i < c->ntables; i++)
		if (strcmp(c->tables[i], name) == 0)
			return true;
	return false;
}

/* An incremental repair of a TimeWindowCompactionStrategy table is
 * refused unless --force-incremental: anticompaction splits each time
 * window's SSTable into repaired and unrepaired parts (which compact
 * apart, so the windows stop being one SSTable each), and TWCS data
 * normally expires by TTL, which a full repair serves as well. -1 with
 * the tables and the reason in `err` when refused. Checked for every
 * keyspace before the first session starts, so nothing runs halfway. */
static int twcs_refusal(const struct repair_cmd *c, struct buf *err)
{
	if (c->full || c->preview || c->force_incremental)
		return 0;
	const struct cql_schema *schema = cql_service_schema(c->nr->n->cql);
	char names[512] = "";
	size_t len = 0, count = 0;
	for (size_t ki = 0; ki < c->nks; ki++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace(schema, c->keyspaces[ki]);
		size_t nt = k ? cql_keyspace_table_count(k) : 0;
		for (size_t i = 0; i < nt; i++) {
			const struct storage_table_meta *m =
				cql_table_meta(cql_keyspace_table_at(k, i));
			if (m->options.compaction !=
				    STORAGE_COMPACTION_TIME_WINDOW ||
			    !table_wanted((void *)c, m->name))
				continue;
			if (len < sizeof(names))
				len += (size_t)snprintf(
					names + len, sizeof(names) - len,
					"%s%s.%s", count ? ", " : "",
					cql_keyspace_meta(k)->name, m->name);
			count++;
		}
	}
	if (!count)
		return 0;
	admin_printf(err,
		     "Incremental repair refused for "
		     "TimeWindowCompactionStrategy table%s %s: anticompaction "
		     "would split each time window's SSTables into repaired "
		     "and unrepaired ones, and TWCS data normally expires by "
		     "TTL; use --full (or --force-incremental to repair them "
		     "incrementally anyway)\n",
		     count > 1 ? "s" : "", names);
	return -1;
}

/* Starts the session of the next keyspace that has something to repair;
 * answers when none is left or one cannot start. */
static void run_next(struct repair_cmd *c)
{
	struct node *n = c->nr->n;
	const struct cql_schema *schema = cql_service_schema(n->cql);
	struct buf err = {0};
	for (; c->ki < c->nks; c->ki++) {
		const char *ks = c->keyspaces[c->ki];
		const struct cql_keyspace *k = cql_schema_keyspace(schema, ks);
		if (!k) {
			admin_printf(&err, "Keyspace '%s' does not exist\n",
				     ks);
			break;
		}
		struct node_repair_job j = {0};
		int rc = node_repair_job_tables(&j, k, table_wanted, c);
		size_t ntab = j.ntables;
		if (rc)
			admin_printf(&err, "%s\n", err_msg());
		else if (ntab)
			rc = build_ranges(c, cql_keyspace_strategy(k), &j,
					  &err);
		if (!rc && ntab && j.nranges) {
			char line[300];
			snprintf(line, sizeof(line),
				 "%s: %zu tables, %zu ranges", ks, ntab,
				 j.nranges);
			on_progress(c, line);
			struct repair_request q = {
				.preview = c->preview,
				.parallelism = c->seq     ? REPAIR_SEQUENTIAL
					       : c->dcpar ? REPAIR_DC_PARALLEL
							  : REPAIR_PARALLEL,
				.jobs = c->jobs,
				.trace = c->trace,
				.task_done = on_task,
				/* nodetool 4: incremental unless --full; a
				 * preview compares all the data (preview
				 * kind ALL) */
				.incremental = !c->full && !c->preview,
				.partial = c->ndc || c->local || c->nhosts};
			char hosts[REPAIR_MAX_REPLICAS * 4][INET_ADDR_STRLEN];
			const char *hp[REPAIR_MAX_REPLICAS * 4];
			for (size_t h = 0; h < c->nhosts; h++)
				hp[h] = inet_addr_format_host(&c->hosts[h],
							      hosts[h],
							      sizeof(hosts[h]));
			struct repair_asked asked = {
				.primary_range = c->pr,
				.subrange = c->subrange,
				.column_families =
					(const char *const *)c->tables,
				.ncolumn_families = c->ntables,
				.data_centers = c->dcs,
				.ndata_centers = c->ndc,
				.hosts = hp,
				.nhosts = c->nhosts};
			q.asked = &asked;
			node_repair_job_request(&j, &q);
			rc = repair_start(c->nr->repair, &q, on_progress,
					  on_done, c, NULL);
			if (rc)
				admin_printf(&err, "cannot start repair: %s\n",
					     err_msg());
		} else if (!rc) {
			admin_printf(&c->out,
				     "Nothing to repair for keyspace "
				     "%s\n",
				     ks);
		}
		bool started = !rc && ntab && j.nranges;
		node_repair_job_free(&j);
		if (rc)
			break;
		if (started) {
			buf_free(&err);
			return; /* on_done continues */
		}
	}
	buf_put_u8(&c->out, 0);
	buf_put_u8(&err, 0);
	int status = err.len > 1 ? 2 : 0;
	admin_reply_finish(c->reply, status, (const char *)c->out.data,
			   (const char *)err.data);
	buf_free(&err);
	cmd_free(c);
}

static const char usage_text[] =
	"repair [--full] [--force-incremental] [-pr] [-st TOKEN -et TOKEN] "
	"[-dc NAME]... [-local] "
	"[-hosts A,B,...] [--preview] [-seq | -dcpar] [-j N] [--trace] "
	"[keyspace [tables...]] | repair --paxos-only [keyspace [table]] | "
	"repair schedule "
	"status|pause|resume|run-now [keyspace[.table]]";

static int parse_token(const char *s, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return -1;
	*out = v;
	return 0;
}

/* "a,b,c" (addresses, with or without a port) into c->hosts. */
static int parse_hosts(struct repair_cmd *c, const char *list)
{
	char buf[ADMIN_ARG_MAX_HOSTS];
	snprintf(buf, sizeof(buf), "%s", list);
	char *save = NULL;
	for (char *h = strtok_r(buf, ",", &save); h;
	     h = strtok_r(NULL, ",", &save)) {
		if (c->nhosts == sizeof(c->hosts) / sizeof(c->hosts[0]))
			return -1;
		struct inet_addr a;
		if (inet_addr_parse(h, 0, &a))
			return -1;
		c->hosts[c->nhosts++] = a;
	}
	return 0;
}

/* Appends an option word (and its value) to c->options, for history. */
static void note_option(struct repair_cmd *c, const char *a, const char *v)
{
	size_t n = strlen(c->options);
	snprintf(c->options + n, sizeof(c->options) - n, "%s%s%s%s",
		 n ? " " : "", a, v ? " " : "", v ? v : "");
}

static bool takes_value(const char *a)
{
	static const char *const with[] = {
		"-st", "--start-token", "-et",    "--end-token",
		"-dc", "--in-dc",       "-hosts", "--in-hosts",
		"-j",  "--job-threads"};
	for (size_t i = 0; i < sizeof(with) / sizeof(with[0]); i++)
		if (strcmp(a, with[i]) == 0)
			return true;
	return false;
}

/* The options and names of `repair` into c (strings copied). -1: bad
 * usage, with a message in `err` when there is more to say. */
static int parse_args(struct repair_cmd *c, size_t argc,
		      const char *const *argv, struct buf *err)
{
	char *p = c->args;
	bool has_st = false, has_et = false;
	for (size_t i = 0; i < argc; i++) {
		const char *a = argv[i];
		bool more = i + 1 < argc;
		if (a[0] == '-')
			note_option(c, a,
				    more && takes_value(a) ? argv[i + 1]
							   : NULL);
		if (strcmp(a, "--full") == 0 || strcmp(a, "-full") == 0) {
			c->full = true;
		} else if (strcmp(a, "--force-incremental") == 0) {
			c->force_incremental = true;
		} else if (strcmp(a, "-pr") == 0 ||
			   strcmp(a, "--partitioner-range") == 0) {
			c->pr = true;
		} else if (strcmp(a, "--preview") == 0 ||
			   strcmp(a, "-prv") == 0) {
			c->preview = true;
		} else if ((strcmp(a, "-st") == 0 ||
			    strcmp(a, "--start-token") == 0) &&
			   more) {
			if (parse_token(argv[++i], &c->st))
				return -1;
			has_st = true;
		} else if ((strcmp(a, "-et") == 0 ||
			    strcmp(a, "--end-token") == 0) &&
			   more) {
			if (parse_token(argv[++i], &c->et))
				return -1;
			has_et = true;
		} else if ((strcmp(a, "-dc") == 0 ||
			    strcmp(a, "--in-dc") == 0) &&
			   more && c->ndc < MAX_DCS) {
			c->dcs[c->ndc++] = strcpy(p, argv[++i]);
			p += strlen(p) + 1;
		} else if (strcmp(a, "-local") == 0 ||
			   strcmp(a, "--in-local-dc") == 0) {
			c->local = true;
		} else if (strcmp(a, "-seq") == 0 ||
			   strcmp(a, "--sequential") == 0) {
			c->seq = true;
		} else if (strcmp(a, "-dcpar") == 0 ||
			   strcmp(a, "--dc-parallel") == 0) {
			c->dcpar = true;
		} else if (strcmp(a, "-tr") == 0 || strcmp(a, "--trace") == 0) {
			c->trace = true;
		} else if ((strcmp(a, "-j") == 0 ||
			    strcmp(a, "--job-threads") == 0) &&
			   more) {
			int64_t j;
			if (parse_token(argv[++i], &j))
				return -1;
			if (j > REPAIR_MAX_JOBS) {
				admin_printf(
					err,
					"Too many job threads. Max is %d\n",
					REPAIR_MAX_JOBS);
				return -1;
			}
			if (j < 1) {
				admin_printf(
					err,
					"Job threads must be at least 1\n");
				return -1;
			}
			c->jobs = (uint32_t)j;
		} else if ((strcmp(a, "-hosts") == 0 ||
			    strcmp(a, "--in-hosts") == 0) &&
			   more) {
			if (parse_hosts(c, argv[++i]))
				return -1;
		} else if (a[0] == '-') {
			return -1;
		} else if (!c->nks) {
			if (!(c->keyspaces[c->nks] = strdup(a)))
				return -1;
			c->nks++;
		} else {
			c->tables[c->ntables++] = strcpy(p, a);
			p += strlen(p) + 1;
		}
	}
	if (has_st != has_et)
		return -1;
	if (c->seq && c->dcpar) {
		admin_printf(err, "Cannot combine -seq and -dcpar options.\n");
		return -1;
	}
	if (c->ndc && c->nhosts) {
		admin_printf(err, "Cannot combine -dc and -hosts options.\n");
		return -1;
	}
	c->subrange = has_st;
	return 0;
}

/* ---- repair --paxos-only ------------------------------------------------ */

struct paxos_cmd {
	struct node_repair *nr;
	struct admin_reply *reply;
	struct prep_job *job;
	char what[300]; /* "keyspace ks table t" */
	uint64_t start_us;
};

static void paxos_done(void *arg, const struct node_cas_repair_counts *n)
{
	struct paxos_cmd *pc = arg;
	char out[600];
	snprintf(out, sizeof(out),
		 "Paxos repair of %s %s in %.3f s\n"
		 "  partitions scanned: %" PRIu64
		 ", unfinished proposals completed: %" PRIu64
		 ", failed: %" PRIu64 "\n",
		 pc->what, n->failed ? "FAILED" : "finished",
		 (double)(env_mono_us(pc->nr->n->env) - pc->start_us) / 1e6,
		 n->scanned, n->completed, n->failed);
	LOG_INFO("%.*s", (int)(strchr(out, '\n') - out), out);
	admin_reply_finish(pc->reply, n->failed ? 2 : 0, out,
			   n->failed
				   ? "error: some in-progress Paxos proposals "
				     "could not be completed\n"
				   : "");
	pc->nr->pcmd = NULL;
	free(pc);
}

/* repair --paxos-only [keyspace [table]]: finishes the in-progress Paxos
 * proposals this node holds (node_cas_paxos_repair). */
static int cmd_paxos_only(struct node_repair *nr, size_t argc,
			  const char *const *argv, struct buf *err)
{
	struct node *n = nr->n;
	const char *ks = NULL, *table = NULL;
	for (size_t i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--paxos-only") == 0 || strcmp(a, "--full") == 0)
			continue;
		if (a[0] == '-') {
			admin_printf(err,
				     "--paxos-only takes no option but a "
				     "keyspace and a table; got %s\n",
				     a);
			return 1;
		}
		if (!ks)
			ks = a;
		else if (!table)
			table = a;
		else {
			admin_printf(err, "usage: repair --paxos-only "
					  "[keyspace [table]]\n");
			return 1;
		}
	}
	if (!n->cql) {
		admin_printf(err, "no data path on this node\n");
		return 2;
	}
	const struct cql_schema *s = cql_service_schema(n->cql);
	if (ks && !cql_schema_keyspace(s, ks)) {
		admin_printf(err, "Keyspace [%s] does not exist.\n", ks);
		return 1;
	}
	if (table && !cql_schema_table(s, ks, table)) {
		admin_printf(err, "Unknown keyspace/cf pair (%s.%s)\n", ks,
			     table);
		return 1;
	}
	if (nr->pcmd) {
		admin_printf(
			err,
			"a paxos repair is already running on this node\n");
		return 2;
	}
	struct paxos_cmd *pc = calloc(1, sizeof(*pc));
	if (!pc) {
		admin_printf(err, "out of memory\n");
		return 2;
	}
	pc->nr = nr;
	pc->start_us = env_mono_us(n->env);
	if (!ks)
		snprintf(pc->what, sizeof(pc->what), "all keyspaces");
	else if (!table)
		snprintf(pc->what, sizeof(pc->what), "keyspace %s", ks);
	else
		snprintf(pc->what, sizeof(pc->what), "%s.%s", ks, table);
	if (!(pc->reply = admin_defer(n->admin))) {
		admin_printf(err, "%s\n", err_msg());
		free(pc);
		return 2;
	}
	nr->pcmd = pc;
	if (node_cas_paxos_repair(cql_service_cas(n->cql), ks, table,
				  paxos_done, pc, &pc->job) != 0) {
		admin_reply_finish(pc->reply, 2, "", "error: out of memory\n");
		nr->pcmd = NULL;
		free(pc);
	}
	return ADMIN_PENDING;
}

static bool has_arg(size_t argc, const char *const *argv, const char *a)
{
	for (size_t i = 0; i < argc; i++)
		if (strcmp(argv[i], a) == 0)
			return true;
	return false;
}

static int cmd_repair(void *arg, size_t argc, const char *const *argv,
		      struct buf *out, struct buf *err)
{
	struct node_repair *nr = arg;
	struct node *n = nr->n;
	if (argc >= 1 && strcmp(argv[0], "schedule") == 0)
		return node_repair_sched_cmd(nr->sched, argc - 1, argv + 1, out,
					     err);
	if (has_arg(argc, argv, "--paxos-only"))
		return cmd_paxos_only(nr, argc, argv, err);
	if (nr->cmd || (repair_running(nr->repair) &&
			!node_repair_sched_running(nr->sched))) {
		admin_printf(err, "a repair is already running on this node\n");
		return 2;
	}
	struct repair_cmd *c = calloc(1, sizeof(*c));
	size_t total = 0;
	for (size_t i = 0; i < argc; i++)
		total += strlen(argv[i]) + 1;
	if (!c || !(c->args = malloc(total + 1)) ||
	    !(c->keyspaces = calloc(argc + 1, sizeof(char *))) ||
	    !(c->tables = calloc(argc + 1, sizeof(char *)))) {
		if (c) {
			c->nr = nr;
			cmd_free(c);
		}
		admin_printf(err, "out of memory\n");
		return 2;
	}
	c->nr = nr;
	if (parse_args(c, argc, argv, err)) {
		if (err->len) {
			cmd_free(c);
			return 1;
		}
		goto bad;
	}
	/* a manual repair goes first: a scheduled segment is retried later */
	node_repair_sched_preempt(nr->sched);
	if (!n->cql) {
		admin_printf(err, "no data path on this node\n");
		cmd_free(c);
		return 2;
	}
	if (!c->nks) { /* every keyspace that is not a system one */
		const struct cql_schema *s = cql_service_schema(n->cql);
		size_t nk = cql_schema_keyspace_count(s);
		char **v = realloc(c->keyspaces, (nk + 1) * sizeof(*v));
		if (!v) {
			admin_printf(err, "out of memory\n");
			cmd_free(c);
			return 2;
		}
		c->keyspaces = v;
		for (size_t i = 0; i < nk; i++) {
			const struct cql_keyspace *k =
				cql_schema_keyspace_at(s, i);
			if (!cql_keyspace_is_system(k) &&
			    (c->keyspaces[c->nks] =
				     strdup(cql_keyspace_meta(k)->name)))
				c->nks++;
		}
	}
	if (twcs_refusal(c, err)) {
		cmd_free(c);
		return 2;
	}
	if (!(c->reply = admin_defer(n->admin))) {
		admin_printf(err, "%s\n", err_msg());
		cmd_free(c);
		return 2;
	}
	nr->cmd = c;
	run_next(c);
	return ADMIN_PENDING;
bad:
	admin_printf(err, "usage: %s\n", usage_text);
	cmd_free(c);
	return 1;
}

/* ---- life cycle ---------------------------------------------------------- */

static bool peer_alive(void *arg, const struct inet_addr *ep)
{
	struct node_repair *nr = arg;
	return nr->n->gossip && gossip_is_alive(nr->n->gossip, ep);
}

/* A peer's gossip generation: a new one means it restarted. */
static int64_t peer_incarnation(void *arg, const struct inet_addr *ep)
{
	struct node_repair *nr = arg;
	struct gossip_endpoint_info info;
	if (!nr->n->gossip || gossip_endpoint_find(nr->n->gossip, ep, &info))
		return 0;
	return info.generation;
}

/* Data left pending for sessions that ended (or, `unknown`, that this
 * node does not know): settled on the repair worker, per table, session
 * by session (storage_repair_set_state), as Cassandra's repair_admin
 * cleanup does. The sessions' verdicts are taken on the loop. */
struct verdict {
	uint8_t uuid[16];
	bool live;           /* neither finalized nor failed: left alone */
	int64_t repaired_at; /* else: what its pending data becomes */
};

struct release_job {
	struct work work;
	struct loopq_item item;
	struct storage *db;
	uint8_t (*ids)[16];
	size_t n;
	struct verdict *v;
	size_t nv;
	bool unknown;
	struct admin_reply *reply;
	struct loopq *q;
	/* found: distinct pending sessions of one table */
	uint8_t (*found)[16];
	size_t nfound, capfound;
	uint64_t repaired, unrepaired, kept, sessions;
};

static void release_seen(void *arg, const struct storage_sstable_info *s)
{
	struct release_job *j = arg;
	if (!s->pending)
		return;
	for (size_t i = 0; i < j->nfound; i++)
		if (!memcmp(j->found[i], s->pending_repair, 16))
			return;
	if (j->nfound == j->capfound) {
		size_t cap = j->capfound ? 2 * j->capfound : 8;
		void *x = realloc(j->found, cap * sizeof(*j->found));
		if (!x)
			return;
		j->found = x;
		j->capfound = cap;
	}
	memcpy(j->found[j->nfound++], s->pending_repair, 16);
}

static void release_run(struct work *w)
{
	struct release_job *j = (struct release_job *)w;
	for (size_t i = 0; i < j->n; i++) {
		j->nfound = 0;
		if (storage_sstables(j->db, j->ids[i], release_seen, j))
			continue;
		for (size_t f = 0; f < j->nfound; f++) {
			const struct verdict *v = NULL;
			for (size_t k = 0; k < j->nv && !v; k++)
				if (!memcmp(j->v[k].uuid, j->found[f], 16))
					v = &j->v[k];
			uint64_t c = 0;
			if ((v && v->live) || (!v && !j->unknown)) {
				j->kept++;
				continue;
			}
			int64_t ra = v ? v->repaired_at : 0;
			if (storage_repair_set_state(j->db, j->ids[i],
						     j->found[f], ra, &c))
				continue;
			j->sessions++;
			if (ra)
				j->repaired += c;
			else
				j->unrepaired += c;
		}
	}
	if (j->repaired || j->unrepaired)
		LOG_AT(LOG_LEVEL_INFO,
		       "incremental repair: SSTables left pending by %" PRIu64
		       " ended or unknown sessions settled: %" PRIu64
		       " repaired, %" PRIu64 " unrepaired",
		       j->sessions, j->repaired, j->unrepaired);
	loopq_post(j->q, &j->item);
}

static void release_done(struct loopq_item *it)
{
	struct release_job *j =
		(struct release_job *)((char *)it -
				       offsetof(struct release_job, item));
	if (j->reply) {
		char out[256];
		snprintf(out, sizeof(out),
			 "settled the pending data of %" PRIu64
			 " (table, session) pairs: %" PRIu64
			 " SSTables repaired, %" PRIu64 " unrepaired; %" PRIu64
			 " pairs of running or unknown sessions left "
			 "pending\n",
			 j->sessions, j->repaired, j->unrepaired, j->kept);
		admin_reply_finish(j->reply, 0, out, "");
	}
	free(j->found);
	free(j->v);
	free(j->ids);
	free(j);
}

static void verdict_of(void *arg, const struct repair_local_info *l)
{
	struct release_job *j = arg;
	struct verdict *v = &j->v[j->nv++];
	memcpy(v->uuid, l->uuid, 16);
	v->live = l->state != REPAIR_LOCAL_FINALIZED &&
		  l->state != REPAIR_LOCAL_FAILED;
	v->repaired_at =
		l->state == REPAIR_LOCAL_FINALIZED ? l->repaired_at : 0;
}

int node_repair_cleanup(struct node_repair *nr, bool unknown,
			struct admin_reply *reply)
{
	if (!nr->n->cql)
		return err_set(ERR_INVALID, "no data path on this node");
	const struct cql_schema *schema = cql_service_schema(nr->n->cql);
	struct release_job *j = calloc(1, sizeof(*j));
	size_t nks = schema ? cql_schema_keyspace_count(schema) : 0, cap = 0;
	for (size_t i = 0; i < nks; i++)
		cap += cql_keyspace_table_count(
			cql_schema_keyspace_at(schema, i));
	if (!j || !(j->ids = calloc(cap + 1, sizeof(*j->ids))) ||
	    !(j->v = calloc(REPAIR_MAX_LOCAL, sizeof(*j->v)))) {
		if (j)
			free(j->ids);
		free(j);
		return err_set(ERR_NOMEM, "repair cleanup");
	}
	for (size_t i = 0; i < nks; i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(schema, i);
		for (size_t t = 0; t < cql_keyspace_table_count(k); t++)
			memcpy(j->ids[j->n++],
			       cql_table_meta(cql_keyspace_table_at(k, t))->id,
			       16);
	}
	repair_local_list(nr->repair, verdict_of, j);
	j->db = nr->db;
	j->q = nr->q;
	j->unknown = unknown;
	j->reply = reply;
	j->item.fn = release_done;
	j->work.run = release_run;
	workers_submit(nr->workers, &j->work);
	return 0;
}

/* The participant sessions, persisted whenever one changes state (the
 * file's worker writes them; a crash before the write leaves an older
 * image, whose sessions then time out or whose data, unknown, is
 * unrepaired at start: never repaired wrongly). */
static void locals_changed(void *arg)
{
	struct node_repair *nr = arg;
	if (!nr->repair || !nr->locals_file)
		return;
	struct buf b;
	buf_init(&b);
	if (repair_locals_encode(nr->repair, &b)) {
		LOG_WARN("cannot encode the repair sessions: %s", err_msg());
		buf_free(&b);
		return;
	}
	node_state_file_save(nr->locals_file, b.data, b.len); /* takes it */
}

static int parse_locals(void *arg, const uint8_t *data, size_t len)
{
	return repair_locals_load(((struct node_repair *)arg)->repair, data,
				  len);
}

struct node_repair *node_repair_new(struct node *n)
{
	struct node_repair *nr = calloc(1, sizeof(*nr));
	if (!nr) {
		err_set(ERR_NOMEM, "repair");
		return NULL;
	}
	nr->n = n;
	nr->db = cql_service_storage(n->cql);
	nr->q = cql_service_loopq(n->cql);
	struct repair_options o;
	repair_options_default(&o);
	o.self = n->conf.broadcast_address;
	o.stream_throughput = n->conf.stream_throughput_outbound;
	o.is_alive = peer_alive;
	o.incarnation = peer_incarnation;
	o.alive_arg = nr;
	o.locals_changed = locals_changed;
	o.locals_arg = nr;
	char path[PATH_MAX], spath[PATH_MAX];
	snprintf(spath, sizeof(spath), "%s/" SESSIONS_FILE,
		 n->conf.saved_caches_directory);
	snprintf(path, sizeof(path), "%s/" HISTORY_FILE,
		 n->conf.saved_caches_directory);
	if (!(nr->tasks = repair_history_new(REPAIR_HISTORY_DEFAULT_MAX)) ||
	    !(nr->tasks_file = node_state_file_new(n->env, nr->q, path,
						   "repair-history")) ||
	    !(nr->locals_file = node_state_file_new(n->env, nr->q, spath,
						    "repair-sessions")) ||
	    !(nr->workers = workers_new_background(1, "repair")) ||
	    !(nr->repair =
		      repair_new(n->env, &o, &node_repair_store_ops, nr)) ||
	    !(nr->sched = node_repair_sched_new(n, nr->repair)) ||
	    admin_register(n->admin, "repair", usage_text, cmd_repair, nr) ||
	    admin_register(n->admin, "repair_admin", node_repair_admin_usage,
			   node_repair_cmd_admin, nr) ||
	    admin_register(n->admin, "netstats", "netstats",
			   node_repair_cmd_netstats, nr) ||
	    admin_register(n->admin, "getstreamthroughput",
			   "getstreamthroughput [-m]  the outbound stream "
			   "throttle",
			   node_repair_cmd_getstreamthroughput, nr) ||
	    admin_register(n->admin, "setstreamthroughput",
			   "setstreamthroughput [-m] <Mb/s>  set it (0: "
			   "unthrottled)",
			   node_repair_cmd_setstreamthroughput, nr)) {
		node_repair_delete(nr);
		return NULL;
	}
	history_load(nr);
	/* the previous run's sessions: those it cut short are finished or
	 * failed now; data pending for sessions it did not persist is
	 * unrepaired again (the coordinator failed them on our restart) */
	if (node_state_file_load(nr->locals_file, HISTORY_MAX, parse_locals, nr,
				 "starting with no repair sessions") == 1)
		LOG_INFO("repair sessions: loaded from %s",
			 node_state_file_path(nr->locals_file));
	node_repair_cleanup(nr, true, NULL);
	return nr;
}

void node_repair_receive(struct node_repair *nr, const struct inet_addr *from,
			 uint32_t verb, const uint8_t *msg, size_t len)
{
	repair_receive(nr->repair, from, verb, msg, len);
}

void node_repair_delete(struct node_repair *nr)
{
	if (!nr)
		return;
	/* A running segment is cancelled while its session exists. */
	node_repair_sched_delete(nr->sched);
	/* Scans stop early; their completions run while repair is alive. */
	atomic_store(&nr->stopping, true);
	workers_delete(nr->workers);
	if (nr->q)
		loopq_run_pending(nr->q);
	repair_delete(nr->repair);
	if (nr->cmd) {
		admin_reply_finish(nr->cmd->reply, 2, "",
				   "error: the node is shutting down\n");
		cmd_free(nr->cmd);
	}
	if (nr->pcmd) {
		if (nr->n->cql)
			node_cas_paxos_repair_cancel(
				cql_service_cas(nr->n->cql), nr->pcmd->job);
		admin_reply_finish(nr->pcmd->reply, 2, "",
				   "error: the node is shutting down\n");
		free(nr->pcmd);
		nr->pcmd = NULL;
	}
	if (nr->tasks_dirty)
		history_save(nr);
	node_state_file_delete(nr->tasks_file); /* writes the last state */
	node_state_file_delete(nr->locals_file);
	repair_history_delete(nr->tasks);
	free(nr);
}
