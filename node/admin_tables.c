/*
 * The admin commands that work on tables, in nodetool's shapes: flush,
 * compact, cleanup, verify, snapshot / clearsnapshot / listsnapshots,
 * tablestats, rebuild_index and drain. Each runs on the maintenance worker
 * (cql_service_flush_prepare) and answers when it is done.
 */
#define LOG_MODULE "admin"
#include "common/log.h"
#include "node/admin.h"
#include "node/cql_service.h"
#include "node/members.h"
#include "node/node_internal.h"
#include "storage/storage.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const maintenance_names[] = {
	"flush",    "compact",        "cleanup",
	"snapshot", "clearsnapshot",  "listsnapshots",
	"verify",   "garbagecollect", "scrub"};

/* A deferred maintenance command's answer. */
struct maintenance_reply {
	struct admin_reply *r;
	enum cql_maintenance what;
	char ok[600]; /* stdout on success (listsnapshots: its lines) */
};

static void maintenance_done(void *arg, int status, const char *msg)
{
	struct maintenance_reply *m = arg;
	const char *name = maintenance_names[m->what];
	if (status != 0) {
		char text[400];
		snprintf(text, sizeof(text), "error: %s failed: %s\n", name,
			 msg);
		LOG_WARN("%s failed: %s", name, msg);
		admin_reply_finish(m->r, 2, "", text);
	} else if ((m->what == CQL_MAINTENANCE_VERIFY ||
		    m->what == CQL_MAINTENANCE_SCRUB) &&
		   *msg) {
		/* nodetool's line per keyspace; the SSTables and what failed
		 * are in the node's log */
		const char *verb = m->what == CQL_MAINTENANCE_SCRUB
					   ? "scrubbing"
					   : "verifying";
		struct buf out = {0};
		for (const char *p = msg; *p;) {
			const char *nl = strchr(p, '\n');
			int l = nl ? (int)(nl - p) : (int)strlen(p);
			admin_printf(&out,
				     "Aborted %s at least one table in "
				     "keyspace %.*s, check server logs for "
				     "more information.\n",
				     verb, l, p);
			p += l + (nl != NULL);
		}
		buf_put_u8(&out, 0);
		admin_reply_finish(m->r, 2, (const char *)out.data, "");
		buf_free(&out);
	} else if (m->what == CQL_MAINTENANCE_LIST_SNAPSHOTS) {
		struct buf out = {0};
		if (*msg)
			admin_printf(&out,
				     "Snapshot Details: \n%-20s %-20s %-24s "
				     "%12s %12s\n%s",
				     "Snapshot name", "Keyspace name",
				     "Column family name", "True size",
				     "Size on disk", msg);
		else
			admin_printf(&out, "There are no snapshots\n");
		buf_put_u8(&out, 0);
		admin_reply_finish(m->r, 0, (const char *)out.data, "");
		buf_free(&out);
	} else {
		admin_reply_finish(m->r, 0, m->ok, "");
	}
	free(m);
}

/* Queues a flush of `n` tables (0: all), or another maintenance of each
 * (`tag`: a snapshot's), and answers `ok` when it is done. */
static int maintenance_deferred(struct node *n, const uint8_t (*ids)[16],
				size_t nt, enum cql_maintenance what,
				const struct storage_token_range *ranges,
				const size_t *range_off, const char *tag,
				const char *ok, unsigned flags, struct buf *err)
{
	struct cql_flush *f = cql_service_flush_prepare(n->cql, ids, nt, what,
							ranges, range_off);
	struct maintenance_reply *m = f ? calloc(1, sizeof(*m)) : NULL;
	if (m)
		m->r = admin_defer(n->admin);
	if (!m || !m->r) {
		admin_printf(err, "error: %s\n", err_msg());
		free(m);
		free(f);
		return 2;
	}
	m->what = what;
	snprintf(m->ok, sizeof(m->ok), "%s", ok ? ok : "");
	if (tag)
		cql_service_flush_set_tag(f, tag);
	cql_service_flush_set_flags(f, flags);
	cql_service_flush_start(f, maintenance_done, m);
	return ADMIN_PENDING;
}

/* The tables `[keyspace [tables...]]` names (no keyspace: every table of
 * the keyspaces that are not the system ones), or -1 with err written.
 * *out is malloc'd (NULL when there are none); the metas are the
 * schema's, valid until it changes. */
static int tables_named(struct node *n, size_t argc, const char *const *argv,
			const struct storage_table_meta ***out, size_t *count,
			struct buf *err)
{
	const struct cql_schema *schema = cql_service_schema(n->cql);
	*out = NULL;
	*count = 0;
	if (argc > 0 && !cql_schema_keyspace(schema, argv[0])) {
		admin_printf(err, "error: Keyspace [%s] does not exist.\n",
			     argv[0]);
		return -1;
	}
	for (size_t a = 1; a < argc; a++)
		if (!cql_schema_table(schema, argv[0], argv[a])) {
			admin_printf(err,
				     "error: Unknown table %s in keyspace %s\n",
				     argv[a], argv[0]);
			return -1;
		}
	size_t cap = 0;
	for (size_t i = 0; i < cql_schema_keyspace_count(schema); i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(schema, i);
		if (argc ? strcmp(cql_keyspace_meta(k)->name, argv[0]) != 0
			 : cql_keyspace_is_system(k))
			continue;
		for (size_t j = 0; j < cql_keyspace_table_count(k); j++) {
			const struct storage_table_meta *t =
				cql_table_meta(cql_keyspace_table_at(k, j));
			bool wanted = argc <= 1;
			for (size_t a = 1; a < argc && !wanted; a++)
				wanted = strcmp(argv[a], t->name) == 0;
			if (!wanted)
				continue;
			if (*count == cap) {
				cap = cap ? 2 * cap : 16;
				const struct storage_table_meta **more =
					realloc(*out, cap * sizeof(**out));
				if (!more) {
					free(*out);
					*out = NULL;
					admin_printf(err,
						     "error: out of memory\n");
					return -1;
				}
				*out = more;
			}
			(*out)[(*count)++] = t;
		}
	}
	return 0;
}

int node_owned_ranges(struct node *n, const struct storage_table_meta *t,
		      struct storage_token_range **keep, size_t *nkeep,
		      size_t *cap, struct buf *err)
{
	const struct cql_keyspace *k =
		cql_schema_keyspace(cql_service_schema(n->cql), t->keyspace);
	struct ring *r = members_ring(n->members);
	int self = ring_endpoint_find(r, &n->conf.broadcast_address);
	const struct ring_placement *p =
		k ? ring_placement_get(r, cql_keyspace_strategy(k)) : NULL;
	struct token_range_list l = {0};
	if (self < 0 || !p ||
	    ring_placement_ranges(p, (size_t)self, false, false, &l)) {
		admin_printf(err, "error: %s\n",
			     self < 0 ? "this node has no tokens" : err_msg());
		token_range_list_free(&l);
		return -1;
	}
	for (size_t i = 0; i < l.n; i++) {
		if (*nkeep == *cap) {
			size_t c = *cap ? 2 * *cap : 64;
			struct storage_token_range *more =
				realloc(*keep, c * sizeof(*more));
			if (!more) {
				token_range_list_free(&l);
				admin_printf(err, "error: out of memory\n");
				return -1;
			}
			*keep = more;
			*cap = c;
		}
		int64_t right = l.v[i].right == RING_TOKEN_MIN ? RING_TOKEN_MAX
							       : l.v[i].right;
		(*keep)[(*nkeep)++] =
			(struct storage_token_range){l.v[i].left, right};
	}
	token_range_list_free(&l);
	return 0;
}

/* nodetool flush / compact / cleanup / snapshot ... [keyspace
 * [tables...]]; `tag` and `ok` as maintenance_deferred's. */
static int maintain_tables_flags(void *arg, size_t argc,
				 const char *const *argv, struct buf *out,
				 struct buf *err, enum cql_maintenance what,
				 const char *tag, const char *ok,
				 unsigned flags)
{
	struct node *n = arg;
	if (!n->cql) {
		admin_printf(err, "error: this node serves no data\n");
		return 2;
	}
	/* only safe with the ring settled (Cassandra's rule): while a node
	 * joins or leaves, ranges this node still owes are not its own */
	if (what == CQL_MAINTENANCE_CLEANUP &&
	    members_moving(n->members, NULL)) {
		admin_printf(err,
			     "error: Node is involved in cluster membership "
			     "changes. Not safe to run cleanup.\n");
		return 2;
	}
	if (argc == 0 && what == CQL_MAINTENANCE_FLUSH)
		return maintenance_deferred(n, NULL, 0, what, NULL, NULL, NULL,
					    NULL, 0, err);
	const struct storage_table_meta **tables;
	size_t m;
	if (tables_named(n, argc, argv, &tables, &m, err) != 0)
		return 2;
	uint8_t(*ids)[16] = m ? calloc(m, sizeof(*ids)) : NULL;
	size_t *off = calloc(m + 1, sizeof(*off));
	struct storage_token_range *keep = NULL;
	size_t nkeep = 0, cap = 0;
	int rc = 0;
	if ((m && !ids) || !off) {
		admin_printf(err, "error: out of memory\n");
		rc = 2;
	}
	for (size_t i = 0; !rc && i < m; i++) {
		memcpy(ids[i], tables[i]->id, 16);
		if (what == CQL_MAINTENANCE_CLEANUP &&
		    node_owned_ranges(n, tables[i], &keep, &nkeep, &cap, err))
			rc = 2;
		off[i + 1] = nkeep;
	}
	if (!rc && m)
		rc = maintenance_deferred(n, (const uint8_t(*)[16])ids, m, what,
					  keep, off, tag, ok, flags, err);
	else if (!rc) /* no table: nothing to do */
		admin_printf(out, "%s",
			     what == CQL_MAINTENANCE_LIST_SNAPSHOTS
				     ? "There are no snapshots\n"
			     : ok ? ok
				  : "");
	free(keep);
	free(off);
	free(ids);
	free(tables);
	return rc;
}

static int maintain_tables(void *arg, size_t argc, const char *const *argv,
			   struct buf *out, struct buf *err,
			   enum cql_maintenance what, const char *tag,
			   const char *ok)
{
	return maintain_tables_flags(arg, argc, argv, out, err, what, tag, ok,
				     0);
}

/* nodetool flush [keyspace [tables...]]: memtables to SSTables. */
static int cmd_flush(void *arg, size_t argc, const char *const *argv,
		     struct buf *out, struct buf *err)
{
	return maintain_tables(arg, argc, argv, out, err, CQL_MAINTENANCE_FLUSH,
			       NULL, NULL);
}

/* nodetool compact [keyspace [tables...]]: a major compaction of each
 * table (its SSTables merged into one, purgeable tombstones dropped). */
static int cmd_compact(void *arg, size_t argc, const char *const *argv,
		       struct buf *out, struct buf *err)
{
	return maintain_tables(arg, argc, argv, out, err,
			       CQL_MAINTENANCE_COMPACT, NULL, NULL);
}

/* nodetool cleanup [keyspace [tables...]]: each table without the
 * partitions this node no longer replicates (after nodes joined). */
static int cmd_cleanup(void *arg, size_t argc, const char *const *argv,
		       struct buf *out, struct buf *err)
{
	return maintain_tables(arg, argc, argv, out, err,
			       CQL_MAINTENANCE_CLEANUP, NULL, NULL);
}

/* nodetool verify [-e] [-f] [-q] [keyspace [tables...]]: every checksum
 * of each live SSTable of the tables (as sstableverify offline). Nothing
 * is printed when all are sound; a keyspace with a corrupt SSTable gets
 * nodetool's "Aborted verifying ..." line (exit 2), the SSTables and what
 * failed are in the log. Verify never changes anything here, so it needs
 * no -f (nodetool 4.1 refuses without it since its verify may mark
 * SSTables unrepaired or stop the node); -e and -q are accepted, and the
 * check is always the full one. */
static int cmd_verify(void *arg, size_t argc, const char *const *argv,
		      struct buf *out, struct buf *err)
{
	size_t first = 0;
	for (; first < argc && argv[first][0] == '-'; first++) {
		const char *o = argv[first];
		if (strcmp(o, "-e") && strcmp(o, "--extended-verify") &&
		    strcmp(o, "-f") && strcmp(o, "--force") &&
		    strcmp(o, "-q") && strcmp(o, "--quick")) {
			admin_printf(err,
				     "error: verify %s is not supported by "
				     "Cassini (its verify only reads: no "
				     "repair status, token or version "
				     "checks)\n",
				     o);
			return 1;
		}
	}
	return maintain_tables(arg, argc - first, argv + first, out, err,
			       CQL_MAINTENANCE_VERIFY, NULL, NULL);
}

/* A -j/--jobs value (accepted: one table at a time here). */
static bool jobs_arg(size_t argc, const char *const *argv, size_t *i)
{
	if (strcmp(argv[*i], "-j") && strcmp(argv[*i], "--jobs"))
		return false;
	if (*i + 1 >= argc)
		return false;
	char *end;
	long v = strtol(argv[*i + 1], &end, 10);
	if (*end || v < 0)
		return false;
	(*i)++;
	return true;
}

/* nodetool garbagecollect [-g ROW|CELL] [-j N] [keyspace [tables...]]:
 * each SSTable rewritten alone without the data other SSTables' deletions
 * shadow (CELL: also cells overwritten elsewhere) and its purgeable
 * tombstones. */
static int cmd_garbagecollect(void *arg, size_t argc, const char *const *argv,
			      struct buf *out, struct buf *err)
{
	static const char synopsis[] =
		"garbagecollect [-g ROW|CELL] [-j jobs] [keyspace [tables...]]";
	unsigned flags = 0;
	size_t i = 0;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if ((!strcmp(argv[i], "-g") ||
		     !strcmp(argv[i], "--granularity")) &&
		    i + 1 < argc) {
			const char *g = argv[++i];
			if (!strcmp(g, "CELL"))
				flags = CQL_MAINTENANCE_GC_CELL;
			else if (!strcmp(g, "ROW"))
				flags = 0;
			else {
				admin_printf(err,
					     "error: No enum constant "
					     "org.apache.cassandra.schema."
					     "CompactionParams.TombstoneOption."
					     "%s\n",
					     g);
				return 1;
			}
		} else if (!jobs_arg(argc, argv, &i)) {
			return admin_usage_error(err, synopsis);
		}
	}
	return maintain_tables_flags(arg, argc - i, argv + i, out, err,
				     CQL_MAINTENANCE_GARBAGECOLLECT, NULL, NULL,
				     flags);
}

/* nodetool scrub [-ns] [-s] [-n] [-j N] [keyspace [tables...]]: a
 * pre-scrub-<ms> snapshot of each table (unless --no-snapshot), then each
 * SSTable rewritten without the partitions that fail their checksum or
 * do not decode. */
static int cmd_scrub(void *arg, size_t argc, const char *const *argv,
		     struct buf *out, struct buf *err)
{
	struct node *n = arg;
	static const char synopsis[] =
		"scrub [-ns] [-s] [-n] [-j jobs] [keyspace [tables...]]";
	bool snapshot = true;
	unsigned flags = 0;
	size_t i = 0;
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *o = argv[i];
		if (!strcmp(o, "-ns") || !strcmp(o, "--no-snapshot"))
			snapshot = false;
		else if (!strcmp(o, "-s") || !strcmp(o, "--skip-corrupted"))
			flags |= CQL_MAINTENANCE_SKIP_CORRUPTED;
		else if (!strcmp(o, "-n") || !strcmp(o, "--no-validate"))
			; /* every block is checked as it is read anyway */
		else if (!strcmp(o, "-r") ||
			 !strcmp(o, "--reinsert-overflowed-ttl")) {
			admin_printf(err,
				     "error: scrub %s is not supported by "
				     "Cassini (its expiration times do "
				     "not overflow)\n",
				     o);
			return 1;
		} else if (!jobs_arg(argc, argv, &i)) {
			return admin_usage_error(err, synopsis);
		}
	}
	char tag[64] = "";
	if (snapshot)
		snprintf(tag, sizeof(tag), "pre-scrub-%lld",
			 (long long)(env_wall_us(n->env) / 1000));
	return maintain_tables_flags(arg, argc - i, argv + i, out, err,
				     CQL_MAINTENANCE_SCRUB, tag, NULL, flags);
}

/* [-t TAG | --all] then [keyspace [tables...]]: *tag (NULL without -t),
 * *all, and the index of the first positional argument; -1 on a bad
 * option. */
static int snapshot_args(size_t argc, const char *const *argv, const char **tag,
			 bool *all, size_t *first)
{
	*tag = NULL;
	*all = false;
	size_t i = 0;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--all") == 0)
			*all = true;
		else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			*tag = argv[++i];
		else if (strcmp(argv[i], "--") != 0)
			return -1;
	}
	*first = i;
	return 0;
}

/* nodetool snapshot [-t TAG] [keyspace [tables...]]: after a flush, each
 * table's SSTables hard-linked into its snapshots/TAG directory (TAG: the
 * time in milliseconds by default). */
static int cmd_snapshot(void *arg, size_t argc, const char *const *argv,
			struct buf *out, struct buf *err)
{
	struct node *n = arg;
	const char *tag;
	bool all;
	size_t first;
	char stamp[32], ok[512];
	if (snapshot_args(argc, argv, &tag, &all, &first) || all) {
		admin_printf(err, "usage: snapshot [-t tag] [keyspace "
				  "[tables...]]\n");
		return 1;
	}
	if (!tag) {
		snprintf(stamp, sizeof(stamp), "%lld",
			 (long long)(env_wall_us(n->env) / 1000));
		tag = stamp;
	}
	snprintf(ok, sizeof(ok),
		 "Requested creating snapshot(s) for [%s] with snapshot name "
		 "[%s]\nSnapshot directory: %s\n",
		 first < argc ? argv[first] : "all keyspaces", tag, tag);
	return maintain_tables(arg, argc - first, argv + first, out, err,
			       CQL_MAINTENANCE_SNAPSHOT, tag, ok);
}

/* nodetool clearsnapshot (-t TAG | --all) [keyspace [tables...]]. */
static int cmd_clearsnapshot(void *arg, size_t argc, const char *const *argv,
			     struct buf *out, struct buf *err)
{
	const char *tag;
	bool all;
	size_t first;
	if (snapshot_args(argc, argv, &tag, &all, &first) || all == !!tag) {
		admin_printf(err, "Specify snapshot name or --all: "
				  "clearsnapshot (-t tag | --all) [keyspace "
				  "[tables...]]\n");
		return 1;
	}
	char ok[512];
	snprintf(ok, sizeof(ok),
		 "Requested clearing snapshot(s) for [%s] with [%s]\n",
		 first < argc ? argv[first] : "all keyspaces",
		 tag ? tag : "all snapshots");
	return maintain_tables(arg, argc - first, argv + first, out, err,
			       CQL_MAINTENANCE_CLEAR_SNAPSHOT, tag ? tag : "",
			       ok);
}

/* nodetool listsnapshots: every snapshot of every table outside the
 * system keyspaces, with its size on disk and its true size (the files
 * the table no longer has). */
static int cmd_listsnapshots(void *arg, size_t argc, const char *const *argv,
			     struct buf *out, struct buf *err)
{
	(void)argv;
	if (argc) {
		admin_printf(err, "usage: listsnapshots\n");
		return 1;
	}
	return maintain_tables(arg, 0, NULL, out, err,
			       CQL_MAINTENANCE_LIST_SNAPSHOTS, NULL, NULL);
}

/* nodetool tablestats [keyspace [tables...]]: what the engine holds for
 * each table, under nodetool's names. */
static int cmd_tablestats(void *arg, size_t argc, const char *const *argv,
			  struct buf *out, struct buf *err)
{
	struct node *n = arg;
	if (!n->cql) {
		admin_printf(err, "error: this node serves no data\n");
		return 2;
	}
	const struct storage_table_meta **tables;
	size_t m;
	if (tables_named(n, argc, argv, &tables, &m, err) != 0)
		return 2;
	struct storage *db = cql_service_storage(n->cql);
	admin_printf(out, "Total number of tables: %zu\n", m);
	const char *keyspace = NULL;
	for (size_t i = 0; i < m; i++) {
		const struct storage_table_meta *t = tables[i];
		struct storage_stats st;
		if (storage_stats(db, t->id, &st) != 0)
			continue;
		if (!keyspace || strcmp(keyspace, t->keyspace) != 0) {
			keyspace = t->keyspace;
			admin_printf(out, "----------------\nKeyspace : %s\n",
				     keyspace);
		}
		admin_printf(out, "\t\tTable: %s\n", t->name);
		const struct {
			const char *name;
			uint64_t value;
		} rows[] = {
			{"Local read count", st.local_reads},
			{"Local write count", st.local_writes},
			{"SSTable count", st.sstable_count},
			{"Space used (live)", st.sstable_bytes},
			{"Number of partitions (estimate)",
			 st.estimated_partitions},
			{"Memtable data size", st.memtable_data_bytes},
			{"Memtable off heap memory used", st.memtable_bytes},
			{"Memtable switch count", st.flushes},
			{"Compactions completed", st.compactions},
			{"Tombstone compactions completed",
			 st.tombstone_compactions},
			{"Reads past tombstone_warn_threshold",
			 st.tombstone_warnings},
			{"Reads aborted past tombstone_failure_threshold",
			 st.tombstone_failures},
			{"SSTables left out as corrupt", st.sstables_excluded},
		};
		for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
			admin_printf(out, "\t\t%s: %" PRIu64 "\n", rows[r].name,
				     rows[r].value);
		admin_printf(out, "\t\tDroppable tombstone ratio: %.5f\n",
			     (double)st.droppable_tombstones_ppm / 1e6);
		/* Cassini's line (nodetool 5.0 has none per index): the
		 * SSTables' SAI components of each index */
		for (size_t x = 0; x < t->index_count; x++) {
			uint64_t ib = 0;
			if (storage_index_disk_bytes(
				    db, t->id, t->indexes[x].name, &ib) == 0)
				admin_printf(out,
					     "\t\tSAI index %s disk space used "
					     "(bytes): %" PRIu64 "\n",
					     t->indexes[x].name, ib);
		}
		admin_printf(out, "\n");
	}
	admin_printf(out, "----------------\n");
	free(tables);
	return 0;
}

/* nodetool drain: stop serving clients, leave gossip (peers mark us DN at
 * once), flush every memtable; answers when the data is in SSTables, so a
 * restart replays nothing. The process keeps running until stopped. */
static int cmd_drain(void *arg, size_t argc, const char *const *argv,
		     struct buf *out, struct buf *err)
{
	(void)argc;
	(void)argv;
	(void)out;
	struct node *n = arg;
	if (n->cql)
		cql_service_stop_serving(n->cql);
	if (!n->drained) {
		LOG_INFO("draining: native transport closed, shutdown "
			 "announced to peers, gossip off; flushing");
		gossip_announce_shutdown(n->gossip);
		n->drained = true;
	}
	return n->cql ? maintenance_deferred(n, NULL, 0, CQL_MAINTENANCE_FLUSH,
					     NULL, NULL, NULL, NULL, 0, err)
		      : 0;
}

/* rebuild_index: waits (as nodetool's blocks) until every named index
 * is built again, polling the build states. */
struct rebuild_wait {
	struct node *n;
	struct admin_reply *r;
	struct env_timer *timer;
	uint8_t table_id[16];
	size_t count;
	char names[16][128];
};

static void rebuild_poll(void *arg)
{
	struct rebuild_wait *w = arg;
	struct storage *db = cql_service_storage(w->n->cql);
	struct storage_index_build_info bi[64];
	size_t nb = storage_index_builds(db, bi, 64);
	for (size_t i = 0; i < w->count; i++) {
		int st = storage_index_state(db, w->table_id, w->names[i]);
		if (st != STORAGE_INDEX_BUILDING)
			continue; /* built, or dropped meanwhile */
		for (size_t k = 0; k < nb && k < 64; k++) {
			if (memcmp(bi[k].table_id, w->table_id, 16) != 0 ||
			    strcmp(bi[k].index, w->names[i]) != 0 ||
			    !bi[k].failed)
				continue;
			char text[300];
			snprintf(text, sizeof(text),
				 "error: rebuild of index %s failed: see the "
				 "node's log\n",
				 w->names[i]);
			admin_reply_finish(w->r, 2, "", text);
			env_timer_free(w->n->env, w->timer);
			free(w);
			return;
		}
		env_timer_arm(w->n->env, w->timer, 100 * 1000);
		return;
	}
	admin_reply_finish(w->r, 0, "", "");
	env_timer_free(w->n->env, w->timer);
	free(w);
}

static int cmd_rebuild_index(void *arg, size_t argc, const char *const *argv,
			     struct buf *out, struct buf *err)
{
	(void)out;
	struct node *n = arg;
	if (argc < 3) {
		admin_printf(err,
			     "rebuild_index requires ks, cf and idx args\n");
		return 1;
	}
	const struct storage_table_meta **ts = NULL;
	size_t nt = 0;
	if (tables_named(n, 2, argv, &ts, &nt, err))
		return 2;
	const struct storage_table_meta *t = nt ? ts[0] : NULL;
	free(ts);
	if (!t) {
		admin_printf(err, "error: Unknown keyspace/cf pair (%s.%s)\n",
			     argv[0], argv[1]);
		return 2;
	}
	struct rebuild_wait *w = calloc(1, sizeof(*w));
	if (!w) {
		admin_printf(err, "error: out of memory\n");
		return 2;
	}
	w->n = n;
	memcpy(w->table_id, t->id, 16);
	struct storage *db = cql_service_storage(n->cql);
	for (size_t i = 2; i < argc; i++) {
		if (!storage_table_meta_index(t, argv[i]) ||
		    w->count == sizeof(w->names) / sizeof(w->names[0]))
			continue;
		if (storage_index_rebuild(db, t->id, argv[i])) {
			admin_printf(err, "error: %s\n", err_msg());
			free(w);
			return 2;
		}
		snprintf(w->names[w->count++], sizeof(w->names[0]), "%s",
			 argv[i]);
	}
	if (!w->count) {
		/* Cassandra's SecondaryIndexManager logs it and is done */
		struct buf list = {0};
		for (size_t i = 2; i < argc; i++)
			admin_printf(&list, "%s%s", i > 2 ? "," : "", argv[i]);
		buf_put_u8(&list, 0);
		LOG_INFO("No defined indexes with the supplied names: %s",
			 (const char *)list.data);
		buf_free(&list);
		free(w);
		return 0;
	}
	LOG_INFO("rebuild_index %s.%s: %zu index(es) queued", t->keyspace,
		 t->name, w->count);
	w->timer = env_timer_new(n->env, rebuild_poll, w);
	w->r = w->timer ? admin_defer(n->admin) : NULL;
	if (!w->r) {
		if (w->timer)
			env_timer_free(n->env, w->timer);
		free(w);
		admin_printf(err, "error: out of memory\n");
		return 2;
	}
	env_timer_arm(n->env, w->timer, 100 * 1000);
	return ADMIN_PENDING;
}

int node_admin_register_tables(struct node *n)
{
	static const struct {
		const char *name, *usage;
		admin_command_fn fn;
	} cmds[] = {
		{"flush", "flush [ks [tables]]   write memtables to SSTables",
		 cmd_flush},
		{"compact",
		 "compact [ks [tables]] merge each table's SSTables into one "
		 "(a major compaction)",
		 cmd_compact},
		{"cleanup",
		 "cleanup [ks [tables]] drop the partitions this node no "
		 "longer replicates",
		 cmd_cleanup},
		{"verify",
		 "verify [-e] [-f] [ks [tables]] check every checksum of each "
		 "table's SSTables",
		 cmd_verify},
		{"garbagecollect",
		 "garbagecollect [-g ROW|CELL] [ks [tables]] rewrite each "
		 "SSTable without the data deletions elsewhere shadow",
		 cmd_garbagecollect},
		{"scrub",
		 "scrub [-ns] [-s] [ks [tables]] snapshot, then rewrite each "
		 "SSTable without its corrupt partitions",
		 cmd_scrub},
		{"snapshot",
		 "snapshot [-t tag] [ks [tables]] hard-link each table's "
		 "SSTables into snapshots/<tag> after a flush",
		 cmd_snapshot},
		{"clearsnapshot",
		 "clearsnapshot (-t tag | --all) [ks [tables]] delete "
		 "snapshots",
		 cmd_clearsnapshot},
		{"listsnapshots", "listsnapshots every snapshot with its sizes",
		 cmd_listsnapshots},
		{"tablestats",
		 "tablestats [ks [tables]]  SSTables, space used, partitions "
		 "and memtables per table",
		 cmd_tablestats},
		{"rebuild_index",
		 "rebuild_index ks table idx [idx...] build the indexes "
		 "again over the table's data, and wait",
		 cmd_rebuild_index},
		{"drain",
		 "drain                 stop serving clients, announce "
		 "shutdown, stop gossiping, flush every memtable",
		 cmd_drain},
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (admin_register(n->admin, cmds[i].name, cmds[i].usage,
				   cmds[i].fn, n) != 0)
			return -1;
	return 0;
}
