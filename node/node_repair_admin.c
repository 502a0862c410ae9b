/*
 * repair_admin (list, cancel, summarize-pending|repaired, history) and
 * netstats (see node_repair.c).
 */
#define LOG_MODULE "repair"
#include "node/node_repair_internal.h"

#include "node/admin.h"
#include "node/cql_service.h"
#include "node/node_internal.h"
#include "repair/repair_history.h"

#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- repair_admin -------------------------------------------------------- */

const char node_repair_admin_usage[] =
	"repair_admin list [--all] | cancel [--session ID [--force]] | "
	"cleanup [--force] | "
	"history [keyspace[.table]] | summarize-pending [keyspace[.table]] | "
	"summarize-repaired [keyspace[.table]]";

/* nodetool repair_admin list: the incremental sessions this node takes
 * part in, in its layout (columns padded to their widest value, joined by
 * " | "). */
struct local_rows {
	struct node_repair *nr;
	bool all;
	char (*cell)[6][64];
	size_t n, cap;
};

static void local_row(void *arg, const struct repair_local_info *l)
{
	struct local_rows *t = arg;
	if (!t->all && (l->state == REPAIR_LOCAL_FINALIZED ||
			l->state == REPAIR_LOCAL_FAILED))
		return;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		void *v = realloc(t->cell, cap * sizeof(*t->cell));
		if (!v)
			return;
		t->cell = v;
		t->cap = cap;
	}
	char(*r)[64] = t->cell[t->n++];
	char u[40], a[INET_ADDR_STRLEN];
	node_repair_uuid_str(l->uuid, u);
	int64_t now = env_wall_us(t->nr->n->env) / 1000;
	snprintf(r[0], 64, "%s", u);
	snprintf(r[1], 64, "%s", repair_local_state_name(l->state));
	snprintf(r[2], 64, "%" PRId64 " (s)", (now - l->updated_ms) / 1000);
	snprintf(r[3], 64, "%s",
		 inet_addr_format(&l->coordinator, a, sizeof(a)));
	snprintf(r[4], 64, "%zu", l->ntables);
	snprintf(r[5], 64, "%zu", l->nranges);
}

static void list_local(struct node_repair *nr, bool all, struct buf *out)
{
	struct local_rows t = {.nr = nr, .all = all};
	static const char *const head[6] = {
		"id",          "state",  "last activity",
		"coordinator", "tables", "ranges"};
	repair_local_list(nr->repair, local_row, &t);
	if (!t.n) {
		admin_printf(out, "no sessions\n");
		free(t.cell);
		return;
	}
	int w[6];
	for (int k = 0; k < 6; k++) {
		w[k] = (int)strlen(head[k]);
		for (size_t i = 0; i < t.n; i++)
			if ((int)strlen(t.cell[i][k]) > w[k])
				w[k] = (int)strlen(t.cell[i][k]);
	}
	for (size_t i = 0; i <= t.n; i++)
		for (int k = 0; k < 6; k++)
			admin_printf(out, "%-*s%s", k == 5 ? 0 : w[k],
				     i ? t.cell[i - 1][k] : head[k],
				     k == 5 ? "\n" : " | ");
	free(t.cell);
}

/* summarize-pending / summarize-repaired: per table, its SSTables and
 * bytes by repair state. */
static int summarize(struct node_repair *nr, const char *filter, bool pending,
		     struct buf *out, struct buf *err)
{
	struct node *n = nr->n;
	if (!n->cql) {
		admin_printf(err, "no data path on this node\n");
		return 2;
	}
	const struct cql_schema *schema = cql_service_schema(n->cql);
	admin_printf(out, "%-40s %10s %14s %10s %14s\n", "table",
		     pending ? "pending" : "repaired", "bytes", "unrepaired",
		     "bytes");
	size_t nks = cql_schema_keyspace_count(schema);
	for (size_t i = 0; i < nks; i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(schema, i);
		const char *ks = cql_keyspace_meta(k)->name;
		for (size_t t = 0; t < cql_keyspace_table_count(k); t++) {
			const struct storage_table_meta *m =
				cql_table_meta(cql_keyspace_table_at(k, t));
			char name[200];
			snprintf(name, sizeof(name), "%s.%s", ks, m->name);
			if (filter && strcmp(filter, ks) != 0 &&
			    strcmp(filter, name) != 0)
				continue;
			if (!filter && strncmp(ks, "system", 6) == 0)
				continue;
			struct storage_repair_counts c;
			if (storage_repair_counts(nr->db, m->id, &c))
				continue;
			admin_printf(out,
				     "%-40s %10" PRIu64 " %14" PRIu64
				     " %10" PRIu64 " %14" PRIu64 "\n",
				     name, pending ? c.pending : c.repaired,
				     pending ? c.pending_bytes
					     : c.repaired_bytes,
				     c.unrepaired, c.unrepaired_bytes);
		}
	}
	return 0;
}

static int cancel_session(struct node_repair *nr, const char *id, bool force,
			  struct buf *out, struct buf *err)
{
	uint8_t u[16];
	if (node_repair_uuid_parse(id, u)) {
		admin_printf(err, "Invalid session id: %s\n", id);
		return 1;
	}
	struct repair_status st;
	if (repair_get_status(nr->repair, &st)) {
		uint8_t mine[16];
		repair_session_uuid(&nr->n->conf.broadcast_address, st.session,
				    mine);
		if (!memcmp(mine, u, 16)) {
			repair_cancel(nr->repair, "by repair_admin cancel");
			admin_printf(out, "cancelled incremental session %s\n",
				     id);
			return 0;
		}
	}
	uint8_t self[16];
	repair_session_uuid(&nr->n->conf.broadcast_address, 0, self);
	bool coordinator = !memcmp(self + 8, u + 8, 8);
	if (!coordinator && !force) {
		admin_printf(err,
			     "Cancelling a session from a node other than its "
			     "coordinator needs --force\n");
		return 1;
	}
	if (repair_local_fail(nr->repair, u)) {
		admin_printf(err, "%s\n", err_msg());
		return 2;
	}
	admin_printf(out, "cancelled incremental session %s\n", id);
	return 0;
}

int node_repair_cmd_admin(void *arg, size_t argc, const char *const *argv,
			  struct buf *out, struct buf *err)
{
	struct node_repair *nr = arg;
	if (argc >= 3 && strcmp(argv[0], "cancel") == 0 &&
	    (strcmp(argv[1], "--session") == 0 || strcmp(argv[1], "-s") == 0)) {
		bool force = argc == 4 && (strcmp(argv[3], "--force") == 0 ||
					   strcmp(argv[3], "-f") == 0);
		if (argc > 4 || (argc == 4 && !force)) {
			admin_printf(err, "usage: %s\n",
				     node_repair_admin_usage);
			return 1;
		}
		return cancel_session(nr, argv[2], force, out, err);
	}
	if (argc >= 1 && argc <= 2 &&
	    (strcmp(argv[0], "summarize-pending") == 0 ||
	     strcmp(argv[0], "summarize-repaired") == 0))
		return summarize(nr, argc == 2 ? argv[1] : NULL,
				 strcmp(argv[0], "summarize-pending") == 0, out,
				 err);
	if (argc >= 1 && argc <= 2 && strcmp(argv[0], "cleanup") == 0) {
		bool force = argc == 2 && (strcmp(argv[1], "--force") == 0 ||
					   strcmp(argv[1], "-f") == 0);
		if (argc == 2 && !force) {
			admin_printf(err, "usage: %s\n",
				     node_repair_admin_usage);
			return 1;
		}
		struct admin_reply *rep = admin_defer(nr->n->admin);
		if (!rep) {
			admin_printf(err, "%s\n", err_msg());
			return 2;
		}
		if (node_repair_cleanup(nr, force, rep)) {
			char e[300];
			snprintf(e, sizeof(e), "error: %s\n", err_msg());
			admin_reply_finish(rep, 2, "", e);
		}
		return ADMIN_PENDING;
	}
	if (argc == 1 && strcmp(argv[0], "cancel") == 0) {
		if (repair_cancel(nr->repair, "by repair_admin cancel")) {
			admin_printf(err, "%s\n", err_msg());
			return 2;
		}
		admin_printf(out, "cancelled the running repair session\n");
		return 0;
	}
	if (argc >= 1 && argc <= 2 && strcmp(argv[0], "history") == 0) {
		if (repair_history_format(nr->tasks, argc == 2 ? argv[1] : NULL,
					  out)) {
			admin_printf(err, "%s\n", err_msg());
			return 2;
		}
		return 0;
	}
	bool all = argc == 2 && (strcmp(argv[1], "--all") == 0 ||
				 strcmp(argv[1], "-a") == 0);
	if ((argc != 1 && !all) || strcmp(argv[0], "list") != 0) {
		admin_printf(err, "usage: %s\n", node_repair_admin_usage);
		return 1;
	}
	list_local(nr, all, out);
	admin_printf(out, "\nSessions coordinated by this node:\n");
	admin_printf(out, "%-13s %-20s %-20s %9s %-8s %7s %10s %9s %12s  %s\n",
		     "session", "keyspace", "started (UTC)", "seconds",
		     "outcome", "ranges", "mismatched", "rows", "bytes",
		     "error");
	size_t first = nr->nhistory > HISTORY ? nr->nhistory - HISTORY : 0;
	for (size_t i = first; i < nr->nhistory; i++) {
		const struct repair_record *h = &nr->history[i % HISTORY];
		char when[32];
		time_t t = (time_t)h->started_s;
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		admin_printf(out,
			     "%-13" PRIu64 " %-20s %-20s %9.3f %-8s %7" PRIu64
			     " %10" PRIu64 " %9" PRIu64 " %12" PRIu64 "  %s\n",
			     h->session, h->keyspace, when,
			     (double)h->duration_us / 1e6,
			     h->ok ? (h->preview ? "preview" : "ok") : "failed",
			     h->ranges, h->mismatched, h->rows_streamed,
			     h->bytes_streamed, h->error);
	}
	bool scheduled = node_repair_sched_describe_running(nr->sched, out);
	struct repair_status st;
	if (!scheduled && repair_get_status(nr->repair, &st))
		admin_printf(out,
			     "Running: repair session %" PRIu64
			     ": %zu of %zu tasks done, %zu running; %s, %s\n",
			     st.session, st.task, st.tasks, st.running,
			     st.table, st.phase);
	return 0;
}

/* ---- netstats ------------------------------------------------------------ */

int node_repair_cmd_netstats(void *arg, size_t argc, const char *const *argv,
			     struct buf *out, struct buf *err)
{
	(void)argv;
	struct node_repair *nr = arg;
	if (argc) {
		admin_printf(err, "usage: netstats\n");
		return 1;
	}
	struct repair_status st;
	struct repair_stream_stats ss;
	repair_stream_stats(nr->repair, &ss);
	admin_printf(out, "Mode: NORMAL\n");
	bool streaming = repair_get_status(nr->repair, &st);
	if (!streaming)
		admin_printf(out, "Not sending any streams.\n");
	/* Cassini's own line: what stream_throughput_outbound held back */
	admin_printf(out,
		     "Stream throttle: %" PRIu64 " bytes sent, %" PRIu64
		     " waits, %.3f s waited\n",
		     ss.bytes, ss.waits, (double)ss.waited_us / 1e6);
	if (!streaming)
		return 0;
	admin_printf(out,
		     "Repair session %" PRIu64
		     ": %s, range %zu of %zu, %s (%zu tasks running)\n",
		     st.session, st.table, st.task + 1, st.tasks, st.phase,
		     st.running);
	for (size_t i = 0; i < st.npeers; i++) {
		const struct repair_peer_stats *p = &st.peers[i];
		char a[INET_ADDR_STRLEN];
		admin_printf(out,
			     "    %s: sent %" PRIu64 " rows (%" PRIu64
			     " bytes), received %" PRIu64 " rows (%" PRIu64
			     " bytes)\n",
			     inet_addr_format(&p->addr, a, sizeof(a)),
			     p->rows_streamed, p->bytes_streamed,
			     p->rows_fetched, p->bytes_fetched);
	}
	return 0;
}

int node_repair_start(struct node_repair *nr, const struct repair_request *q,
		      void (*done)(void *arg, const struct repair_summary *s),
		      void *arg)
{
	node_repair_sched_preempt(nr->sched);
	return repair_start(nr->repair, q, NULL, done, arg, NULL);
}

/* ---- getstreamthroughput / setstreamthroughput --------------------------- */

/* nodetool 4.1's units: megabits (10^6 bits) by default, MiB/s with -m. */
#define MEGABIT_BYTES 125000u

/* A double as Java's Double.toString prints a small one ("24.0", "1.5"). */
static void java_double(double v, char *out, size_t n)
{
	for (int p = 1; p <= 17; p++) {
		snprintf(out, n, "%.*f", p, v);
		if (strtod(out, NULL) == v)
			break;
	}
	/* trailing zeros after the first decimal go */
	size_t l = strlen(out);
	while (l > 2 && out[l - 1] == '0' && out[l - 2] != '.')
		out[--l] = 0;
}

static int stream_flags(size_t argc, const char *const *argv, bool *mib,
			size_t *first, struct buf *err, const char *synopsis)
{
	bool entire = false;
	*mib = false;
	size_t i = 0;
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--mib"))
			*mib = true;
		else if (!strcmp(argv[i], "-e") ||
			 !strcmp(argv[i], "--entire-sstable-throughput"))
			entire = true;
		else
			return admin_usage_error(err, synopsis);
	}
	*first = i;
	if (entire && *mib) {
		admin_printf(err, "error: You cannot use -e and -m at the same "
				  "time\n");
		return 1;
	}
	if (entire) {
		/* entire_sstable_stream_throughput_outbound: Cassini streams
		 * rows, never whole SSTables */
		admin_printf(err, "error: Cassini does not stream entire "
				  "SSTables (no "
				  "entire_sstable_stream_throughput_outbound); "
				  "its streams are throttled by "
				  "stream_throughput_outbound\n");
		return 1;
	}
	return 0;
}

int node_repair_cmd_getstreamthroughput(void *arg, size_t argc,
					const char *const *argv,
					struct buf *out, struct buf *err)
{
	struct node_repair *nr = arg;
	static const char synopsis[] = "getstreamthroughput [-m]";
	bool mib;
	size_t first;
	int rc = stream_flags(argc, argv, &mib, &first, err, synopsis);
	if (rc)
		return rc;
	if (first != argc)
		return admin_usage_error(err, synopsis);
	uint64_t rate = repair_stream_throughput(nr->repair);
	if (!rate) {
		admin_printf(out, "Current stream throughput: unlimited\n");
	} else if (mib) {
		char v[40];
		java_double((double)rate / (1u << 20), v, sizeof(v));
		admin_printf(out, "Current stream throughput: %s MiB/s\n", v);
	} else {
		uint64_t mbit = (rate + MEGABIT_BYTES / 2) / MEGABIT_BYTES;
		if (mbit)
			admin_printf(out,
				     "Current stream throughput: %" PRIu64
				     " Mb/s\n",
				     mbit);
		else /* under half a megabit: nodetool's int says 0 */
			admin_printf(out, "Current stream throughput: "
					  "unlimited\n");
	}
	return 0;
}

int node_repair_cmd_setstreamthroughput(void *arg, size_t argc,
					const char *const *argv,
					struct buf *out, struct buf *err)
{
	(void)out;
	struct node_repair *nr = arg;
	static const char synopsis[] =
		"setstreamthroughput [-m] <value_in_mb> (megabits per second, "
		"with -m MiB/s; 0 disables throttling)";
	bool mib;
	size_t first;
	int rc = stream_flags(argc, argv, &mib, &first, err, synopsis);
	if (rc)
		return rc;
	char *end = NULL;
	unsigned long long v = 0;
	if (first + 1 == argc && argv[first][0] >= '0' &&
	    argv[first][0] <= '9') {
		errno = 0;
		v = strtoull(argv[first], &end, 10);
	}
	if (first + 1 != argc || !end || *end || errno || v > INT32_MAX)
		return admin_usage_error(err, synopsis);
	uint64_t bytes = mib ? (uint64_t)v << 20 : (uint64_t)v * MEGABIT_BYTES;
	repair_set_stream_throughput(nr->repair, bytes);
	LOG_INFO("stream throughput set to %llu %s%s", v,
		 mib ? "MiB/s" : "Mb/s", v ? "" : " (unthrottled)");
	return 0;
}
