/*
 * Scheduled repair in the node (repair/repair_sched.h does the work):
 * the tables and primary ranges it repairs, read from the schema and the
 * ring; its state file, <saved_caches_directory>/repair_schedule, read
 * once at start and written on a worker thread (node/state_file.h); and
 *
 *   repair schedule status|pause|resume|run-now [ks[.table]]
 *
 * (`cassini-tool repair schedule ...`). The scheduler object exists even
 * when repair_scheduler.enabled is false, so status can say so; it only
 * runs segments when enabled.
 */
#define LOG_MODULE "repair"
#include "client/schema/schema.h"
#include "common/err.h"
#include "common/log.h"
#include "common/loopq.h"
#include "gossip/gossip.h"
#include "node/admin.h"
#include "node/cql_service.h"
#include "node/members.h"
#include "node/node_internal.h"
#include "node/state_file.h"
#include "repair/repair_sched.h"
#include "ring/ring.h"

#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_FILE "repair_schedule"
#define STATE_MAX  (64u << 20)

struct node_repair_sched {
	struct node *n;
	struct repair_sched *sched;
	struct node_state_file *state;
};

/* ---- what to repair ------------------------------------------------------ */

/* The keyspace of a table id, or NULL. */
static const struct cql_keyspace *keyspace_of(const struct cql_schema *s,
					      const uint8_t id[16])
{
	for (size_t i = 0; i < cql_schema_keyspace_count(s); i++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(s, i);
		for (size_t j = 0; j < cql_keyspace_table_count(k); j++)
			if (!memcmp(cql_table_meta(cql_keyspace_table_at(k, j))
					    ->id,
				    id, 16))
				return k;
	}
	return NULL;
}

/* This node's primary ranges of the keyspace with at least two replicas,
 * and the fractions of the ring they and all its replicated ranges
 * cover. */
static int primary_ranges(struct node *n, const struct ring_strategy *st,
			  struct token_range_list *out, double *primary,
			  double *replicated)
{
	const struct ring *r = members_ring(n->members);
	int self = ring_endpoint_find(r, &n->conf.broadcast_address);
	*primary = *replicated = 0;
	if (self < 0)
		return 0; /* no tokens yet */
	for (size_t i = 0; i < ring_token_count(r); i++) {
		struct token_range tr = ring_range_at(r, i);
		struct ring_replicas rep;
		if (ring_replicas_for_token(r, st, tr.right, &rep))
			return -1;
		bool mine = false;
		for (size_t k = 0; k < rep.n_natural; k++)
			mine = mine || (int)rep.natural[k] == self;
		if (mine)
			*replicated += token_range_fraction(tr);
		if (!rep.n_natural || (int)rep.natural[0] != self ||
		    rep.n_natural < 2)
			continue;
		*primary += token_range_fraction(tr);
		if (token_range_list_push(out, tr))
			return -1;
	}
	return 0;
}

static int ops_tables(void *arg, struct repair_sched_table_info **out,
		      size_t *nout)
{
	struct node_repair_sched *ns = arg;
	struct node *n = ns->n;
	const struct cql_schema *s = cql_service_schema(n->cql);
	struct storage *db = cql_service_storage(n->cql);
	struct repair_sched_table_info *v = NULL;
	size_t count = 0, cap = 0;
	*out = NULL;
	*nout = 0;
	for (size_t i = 0; i < cql_schema_keyspace_count(s); i++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(s, i);
		if (cql_keyspace_is_system(k) ||
		    ring_strategy_class(cql_keyspace_strategy(k)) ==
			    RING_STRATEGY_LOCAL)
			continue;
		struct token_range_list ranges = {0};
		double prim, repl;
		if (primary_ranges(n, cql_keyspace_strategy(k), &ranges, &prim,
				   &repl)) {
			token_range_list_free(&ranges);
			goto fail;
		}
		for (size_t j = 0; ranges.n && j < cql_keyspace_table_count(k);
		     j++) {
			const struct storage_table_meta *m =
				cql_table_meta(cql_keyspace_table_at(k, j));
			if (count == cap) {
				cap = cap ? cap * 2 : 8;
				void *nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					token_range_list_free(&ranges);
					goto fail;
				}
				v = nv;
			}
			struct repair_sched_table_info *t = &v[count];
			memset(t, 0, sizeof(*t));
			snprintf(t->name, sizeof(t->name), "%s.%s",
				 cql_keyspace_meta(k)->name, m->name);
			memcpy(t->id, m->id, 16);
			t->gc_grace_seconds = m->options.gc_grace_seconds;
			t->time_window = m->options.compaction ==
					 STORAGE_COMPACTION_TIME_WINDOW;
			struct storage_stats ss;
			if (!storage_stats(db, m->id, &ss) && repl > 0) {
				t->partitions =
					(uint64_t)((double)ss
							   .estimated_partitions *
						   prim / repl);
				t->bytes =
					(uint64_t)((double)(ss.sstable_bytes +
							    ss.memtable_bytes) *
						   prim / repl);
			}
			count++;
			for (size_t r = 0; r < ranges.n; r++)
				if (token_range_list_push(&t->ranges,
							  ranges.v[r])) {
					token_range_list_free(&ranges);
					goto fail;
				}
		}
		token_range_list_free(&ranges);
	}
	*out = v;
	*nout = count;
	return 0;
fail:
	for (size_t i = 0; i < count; i++)
		token_range_list_free(&v[i].ranges);
	free(v);
	return err_set(ERR_NOMEM, "repair schedule tables");
}

static int ops_replicas(void *arg, const uint8_t table_id[16], int64_t token,
			struct inet_addr *out, size_t cap, size_t *nout)
{
	struct node_repair_sched *ns = arg;
	struct node *n = ns->n;
	*nout = 0;
	const struct cql_keyspace *k =
		keyspace_of(cql_service_schema(n->cql), table_id);
	if (!k)
		return 0; /* dropped: nothing to repair */
	const struct ring *r = members_ring(n->members);
	struct ring_replicas rep;
	if (ring_replicas_for_token(r, cql_keyspace_strategy(k), token, &rep))
		return -1;
	for (size_t i = 0; i < rep.n_natural && *nout < cap; i++)
		out[(*nout)++] = ring_endpoint_get(r, rep.natural[i])->addr;
	return 0;
}

static bool ops_alive(void *arg, const struct inet_addr *ep)
{
	struct node_repair_sched *ns = arg;
	return inet_addr_eq(ep, &ns->n->conf.broadcast_address) ||
	       (ns->n->gossip && gossip_is_alive(ns->n->gossip, ep));
}

/* ---- the state file ------------------------------------------------------ */

static void ops_save(void *arg, uint8_t *data, size_t len)
{
	struct node_repair_sched *ns = arg;
	node_state_file_save(ns->state, data, len);
}

static const struct repair_sched_ops sched_ops = {
	.tables = ops_tables,
	.replicas = ops_replicas,
	.is_alive = ops_alive,
	.save = ops_save,
};

static int parse_state(void *arg, const uint8_t *data, size_t len)
{
	return repair_sched_load(((struct node_repair_sched *)arg)->sched, data,
				 len);
}

/* Reads the state (at start, before the loop runs). A corrupt file is
 * moved aside to repair_schedule.corrupt, with an error in the log. */
static void state_load(struct node_repair_sched *ns)
{
	if (node_state_file_load(ns->state, STATE_MAX, parse_state, ns,
				 "starting a new schedule") == 1)
		LOG_INFO("repair schedule: resumed from %s (%zu tables)",
			 node_state_file_path(ns->state),
			 repair_sched_table_count(ns->sched));
}

/* ---- life cycle ---------------------------------------------------------- */

static int options_from_conf(const struct conf_repair_scheduler *c,
			     struct repair_sched_options *o,
			     struct repair_sched_window **w,
			     struct repair_sched_tuning **t,
			     char (**names)[REPAIR_SCHED_NAME_MAX])
{
	repair_sched_options_default(o);
	o->intensity = c->intensity;
	o->partitions_per_segment = (uint64_t)c->partitions_per_segment;
	o->bytes_per_segment = c->bytes_per_segment;
	o->segments_per_node = (uint64_t)c->segments_per_node;
	o->segment_timeout_ms = c->segment_timeout_ms;
	o->segment_retries = (uint32_t)c->segment_retries;
	o->retry_delay_ms = c->retry_delay_ms;
	o->gc_grace_fraction = c->gc_grace_fraction;
	o->min_cycle_interval_ms = c->min_cycle_interval_ms;
	o->check_interval_ms = c->check_interval_ms;
	o->initial_delay_ms = c->initial_delay_ms;
	*w = calloc(c->windows.count + 1, sizeof(**w));
	*t = calloc(c->tables.count + 1, sizeof(**t));
	*names = calloc(c->tables.count + 1, sizeof(**names));
	if (!*w || !*t || !*names)
		return err_set(ERR_NOMEM, "repair schedule");
	for (size_t i = 0; i < c->windows.count; i++)
		if (repair_sched_window_parse(c->windows.items[i], &(*w)[i]))
			return err_prefix(
				"node.yaml: repair_scheduler.windows");
	for (size_t i = 0; i < c->tables.count; i++)
		if (repair_sched_tuning_parse(c->tables.items[i], (*names)[i],
					      sizeof((*names)[i]), &(*t)[i]))
			return err_prefix("node.yaml: repair_scheduler.tables");
	o->windows = *w;
	o->nwindows = c->windows.count;
	o->tunings = *t;
	o->tuning_names = (const char(*)[REPAIR_SCHED_NAME_MAX]) * names;
	o->ntunings = c->tables.count;
	return 0;
}

int node_check_conf(const struct conf *conf)
{
	struct repair_sched_options o;
	struct repair_sched_window *w = NULL;
	struct repair_sched_tuning *t = NULL;
	char(*names)[REPAIR_SCHED_NAME_MAX] = NULL;
	int rc = options_from_conf(&conf->repair_scheduler, &o, &w, &t, &names);
	free(w);
	free(t);
	free(names);
	return rc;
}

struct node_repair_sched *node_repair_sched_new(struct node *n,
						struct repair *repair)
{
	struct node_repair_sched *ns = calloc(1, sizeof(*ns));
	if (!ns) {
		err_set(ERR_NOMEM, "repair schedule");
		return NULL;
	}
	ns->n = n;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" STATE_FILE,
		 n->conf.saved_caches_directory);
	struct repair_sched_options o;
	struct repair_sched_window *w = NULL;
	struct repair_sched_tuning *t = NULL;
	char(*names)[REPAIR_SCHED_NAME_MAX] = NULL;
	int rc = options_from_conf(&n->conf.repair_scheduler, &o, &w, &t,
				   &names);
	if (!rc && (!(ns->state = node_state_file_new(n->env,
						      cql_service_loopq(n->cql),
						      path, "repair-state")) ||
		    !(ns->sched = repair_sched_new(n->env, repair, &o,
						   &sched_ops, ns))))
		rc = -1;
	free(w);
	free(t);
	free(names);
	if (rc) {
		node_repair_sched_delete(ns);
		return NULL;
	}
	state_load(ns);
	if (n->conf.repair_scheduler.enabled)
		repair_sched_start(ns->sched);
	return ns;
}

void node_repair_sched_delete(struct node_repair_sched *ns)
{
	if (!ns)
		return;
	repair_sched_delete(ns->sched); /* may hand over a last state */
	node_state_file_delete(ns->state);
	free(ns);
}

bool node_repair_sched_running(struct node_repair_sched *ns)
{
	return ns && repair_sched_running(ns->sched);
}

bool node_repair_sched_describe_running(struct node_repair_sched *ns,
					struct buf *out)
{
	struct repair_sched_segment g;
	if (!ns || !repair_sched_get_running(ns->sched, &g))
		return false;
	admin_printf(out,
		     "Running: scheduled segment of %s (%" PRId64 ",%" PRId64
		     "], for %.1f s\n",
		     g.name, g.start, g.end, (double)g.running_us / 1e6);
	return true;
}

void node_repair_sched_preempt(struct node_repair_sched *ns)
{
	if (ns)
		repair_sched_preempt(ns->sched);
}

/* ---- repair schedule ... ------------------------------------------------- */

int node_repair_sched_cmd(struct node_repair_sched *ns, size_t argc,
			  const char *const *argv, struct buf *out,
			  struct buf *err)
{
	static const char usage[] =
		"usage: repair schedule status|pause|resume|run-now "
		"[keyspace[.table]]\n";
	if (argc < 1 || argc > 2) {
		admin_printf(err, "%s", usage);
		return 1;
	}
	const char *verb = argv[0];
	const char *filter = argc == 2 ? argv[1] : NULL;
	bool enabled = ns->n->conf.repair_scheduler.enabled;
	if (strcmp(verb, "status") == 0) {
		if (!enabled)
			admin_printf(out, "The repair scheduler is disabled "
					  "(repair_scheduler: enabled: false "
					  "in node.yaml).\n");
		struct buf b = {0};
		if (repair_sched_format_status(ns->sched, filter, &b)) {
			buf_free(&b);
			admin_printf(err, "%s\n", err_msg());
			return 2;
		}
		buf_append(out, b.data, b.len);
		buf_free(&b);
		return 0;
	}
	bool pause = strcmp(verb, "pause") == 0;
	if (pause || strcmp(verb, "resume") == 0) {
		if (repair_sched_pause(ns->sched, filter, pause)) {
			admin_printf(err, "%s\n", err_msg());
			return 2;
		}
		admin_printf(out, "%s %s\n", pause ? "Paused" : "Resumed",
			     filter ? filter : "the repair scheduler");
		return 0;
	}
	if (strcmp(verb, "run-now") == 0) {
		if (!enabled) {
			admin_printf(err, "the repair scheduler is disabled "
					  "(repair_scheduler: enabled: true in "
					  "node.yaml)\n");
			return 2;
		}
		int n = repair_sched_run_now(ns->sched, filter);
		if (n < 0) {
			admin_printf(err, "%s\n", err_msg());
			return 2;
		}
		admin_printf(out, "Running a cycle now for %d table%s\n", n,
			     n == 1 ? "" : "s");
		return 0;
	}
	admin_printf(err, "%s", usage);
	return 1;
}
