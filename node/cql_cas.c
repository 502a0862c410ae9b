/* Lightweight transactions on the node (cql_cas.h). */
#define LOG_MODULE "node"
#include "node/cql_cas.h"

#include "client/exec/cas.h"
#include "client/exec/dml.h"
#include "client/schema/schema.h"
#include "common/err.h"
#include "common/log.h"
#include "common/murmur3.h"
#include "common/uuid.h"
#include "ring/ring.h"
#include "storage/types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTICIPANTS 64

/* system.paxos's id: fixed, so every restart finds its SSTables. */
static const uint8_t PAXOS_TABLE_ID[16] = {0xb7, 0xb7, 0xb7, 0x00, 0x50, 0x61,
					   0x78, 0x6f, 0x73, 0x00, 0x00, 0x00,
					   0x00, 0x00, 0x00, 0x1a};
enum { PAXOS_COL_ROW_KEY = 0, PAXOS_COL_CF_ID = 1, PAXOS_COL_STATE = 2 };

struct node_cas {
	struct env *env;
	struct paxos *px;
	const struct repl_store_ops *store;
	void *store_arg;
	struct cql_schema *schema;
	struct node_cas_hooks hooks;
	struct storage_table_meta *meta; /* system.paxos */
	struct inet_addr self;
	int64_t last_save_ts;
	struct cql_timeuuid_gen timeuuids;
	/* the ballot lease (node_cas_new) */
	char *lease_path;
	int64_t lease_us;   /* persisted */
	int64_t writing_us; /* being written; 0: no write under way */
	struct env_timer *lease_timer;
	bool lease_failed_logged;
	struct prep_job *repairs; /* paxos repairs under way */
	/* proxyhistograms' CAS Write / CAS Read (rounds that decided) */
	struct repl_latency write_lat, read_lat;
	struct paxos_cleanup *pcl; /* paxos repair of moving ranges */
};

static void prep_free(struct prep_job *j);
static void cleanup_local(void *arg, const char *keyspace,
			  const struct paxos_range *r, size_t n,
			  paxos_cleanup_local_done done, void *darg);

/* paxos_state_purging: legacy (Cassandra's SystemKeyspace
 * legacyPaxosTtlSec): a register with nothing in progress is saved with a
 * TTL of max(3 h, the table's gc_grace_seconds), counted from its newest
 * ballot at least; acceptors refuse ballots older than the shortest TTL. */
#define PAXOS_MIN_TTL_SEC     (3 * 3600)
#define PAXOS_PURGE_WINDOW_US ((int64_t)PAXOS_MIN_TTL_SEC * 1000000)

#define LEASE_AHEAD_US  (3600LL * 1000000)
#define LEASE_MARGIN_US (600LL * 1000000)
#define LEASE_CHECK_US  (10ULL * 1000000)

static struct storage_table_meta *paxos_meta_new(void)
{
	struct storage_table_meta *m =
		storage_table_meta_new("system", "paxos", PAXOS_TABLE_ID);
	const struct storage_type *blob =
		storage_type_simple(STORAGE_TYPE_BLOB);
	const struct storage_type *uuid =
		storage_type_simple(STORAGE_TYPE_UUID);
	if (!m ||
	    storage_table_meta_add_column(m, "row_key",
					  STORAGE_COLUMN_PARTITION_KEY, blob,
					  false) < 0 ||
	    storage_table_meta_add_column(m, "cf_id", STORAGE_COLUMN_CLUSTERING,
					  uuid, false) < 0 ||
	    storage_table_meta_add_column(m, "state", STORAGE_COLUMN_REGULAR,
					  blob, false) < 0) {
		storage_table_meta_delete(m);
		return NULL;
	}
	/* node-local: an expired register's tombstone shadows only older
	 * versions here, and compaction purges it only when no SSTable
	 * outside the compaction may hold one */
	m->options.gc_grace_seconds = 0;
	return m;
}

int node_cas_table_add(struct storage *db)
{
	struct storage_table_meta *m = paxos_meta_new();
	if (!m)
		return err_set(ERR_NOMEM, "system.paxos");
	int rc = storage_table_add(db, m, true);
	storage_table_meta_delete(m);
	return rc;
}

/* Paxos keys are table id (16 bytes) | the partition key. */
static int key_split(struct slice key, const uint8_t **table, struct slice *pk)
{
	if (key.len <= 16)
		return -1;
	*table = key.ptr;
	*pk = slice_make(key.ptr + 16, key.len - 16);
	return 0;
}

/* ---- the acceptor's store -------------------------------------------------
 */

struct sjob {
	struct node_cas *c;
	paxos_load_fn load;
	paxos_read_fn read;
	paxos_done_fn done;
	void *darg;
	uint8_t cf_id[16];
	struct storage_mutation *m; /* a write in flight */
};

static void loaded_frag(void *arg, int status, enum err_code code,
			struct storage_mutation **frags, size_t n, bool cut)
{
	struct sjob *j = arg;
	(void)code;
	(void)cut;
	struct paxos_state st;
	paxos_state_init(&st);
	int rc = status;
	if (rc == 0 && n > 0) {
		struct storage_read_cmd cmd = {0};
		struct storage_result *r = NULL;
		rc = storage_fragment_resolve(j->c->meta, frags[0], &cmd,
					      env_wall_us(j->c->env) / 1000000,
					      &r);
		for (size_t i = 0; rc == 0 && i < r->row_count; i++) {
			const struct storage_row_view *row = &r->rows[i];
			if (row->clustering_count != 1 ||
			    !slice_eq(row->clustering[0],
				      slice_make(j->cf_id, 16)))
				continue;
			for (size_t k = 0; k < row->cell_count; k++)
				if (row->cells[k].column == PAXOS_COL_STATE &&
				    paxos_state_decode(row->cells[k].value,
						       &st) != 0) {
					LOG_ERROR("system.paxos: %s",
						  err_msg());
					rc = -1;
				}
		}
		storage_result_delete(r);
	}
	for (size_t i = 0; i < n; i++)
		storage_mutation_delete(frags[i]);
	free(frags);
	j->load(j->darg, rc, &st);
	paxos_state_free(&st);
	free(j);
}

static void st_load(void *arg, struct slice key, paxos_load_fn done, void *darg)
{
	struct node_cas *c = arg;
	const uint8_t *table;
	struct slice pk;
	struct sjob *j = calloc(1, sizeof(*j));
	if (!j || key_split(key, &table, &pk) != 0) {
		free(j);
		done(darg, -1, NULL);
		return;
	}
	*j = (struct sjob){.c = c, .load = done, .darg = darg};
	memcpy(j->cf_id, table, 16);
	struct storage_read_cmd cmd = {.key = pk.ptr, .key_len = pk.len};
	c->store->read(c->store_arg, PAXOS_TABLE_ID, &cmd, loaded_frag, j);
}

static void write_done(void *arg, int status, enum err_code code)
{
	struct sjob *j = arg;
	(void)code;
	storage_mutation_delete(j->m);
	j->done(j->darg, status);
	free(j);
}

static void write_mutation(struct node_cas *c, struct storage_mutation *m,
			   paxos_done_fn done, void *darg)
{
	struct sjob *j = calloc(1, sizeof(*j));
	if (!j) {
		storage_mutation_delete(m);
		done(darg, -1);
		return;
	}
	*j = (struct sjob){.c = c, .done = done, .darg = darg, .m = m};
	if (c->store->apply(c->store_arg, m, write_done, j) != 0) {
		storage_mutation_delete(m);
		free(j);
		done(darg, -1);
	}
}

/* max(3 h, gc_grace_seconds of table `id`); 3 h for a table not known. */
static int32_t paxos_ttl_sec(struct node_cas *c, const uint8_t id[16])
{
	int64_t ttl = PAXOS_MIN_TTL_SEC;
	size_t nk = cql_schema_keyspace_count(c->schema);
	for (size_t i = 0; i < nk; i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(c->schema, i);
		size_t nt = cql_keyspace_table_count(k);
		for (size_t t = 0; t < nt; t++) {
			const struct storage_table_meta *m =
				cql_table_meta(cql_keyspace_table_at(k, t));
			if (memcmp(m->id, id, 16) != 0)
				continue;
			if (m->options.gc_grace_seconds > ttl)
				ttl = m->options.gc_grace_seconds;
			return ttl > INT32_MAX ? INT32_MAX : (int32_t)ttl;
		}
	}
	return (int32_t)ttl;
}

static void st_save(void *arg, struct slice key, const struct paxos_state *st,
		    paxos_done_fn done, void *darg)
{
	struct node_cas *c = arg;
	const uint8_t *table;
	struct slice pk;
	struct buf enc = {0};
	struct storage_mutation *m = NULL;
	if (key_split(key, &table, &pk) != 0 ||
	    paxos_state_encode(st, &enc) != 0 ||
	    !(m = storage_mutation_new(c->meta, pk.ptr, pk.len)))
		goto fail;
	/* Each save of a partition's registers must win over the last one,
	 * whatever the clock does: above the wall clock, the last save, and
	 * every ballot the state holds (they only grow). */
	int64_t ts = env_wall_us(c->env);
	if (ts <= c->last_save_ts)
		ts = c->last_save_ts + 1;
	if (ts <= st->promised.us)
		ts = st->promised.us + 1;
	if (ts <= st->accepted.us)
		ts = st->accepted.us + 1;
	if (ts <= st->committed.us)
		ts = st->committed.us + 1;
	c->last_save_ts = ts;
	/* Purging (legacy): nothing in progress, the register expires; its
	 * expiry counts from `ts` (rounded up to the second), above every
	 * ballot it holds, so once it
	 * is gone every ballot it held is older than the acceptor's purge
	 * window (PAXOS_PURGE_WINDOW_US <= ttl) and none below them can be
	 * promised or accepted again. An unfinished proposal never expires:
	 * only a later save (its commit, or a newer one) gives a TTL. */
	int32_t ttl = 0;
	if (paxos_ballot_is_none(&st->accepted) ||
	    paxos_ballot_cmp(&st->accepted, &st->committed) <= 0)
		ttl = paxos_ttl_sec(c, table);
	struct slice ck = slice_make(table, 16);
	if (storage_mutation_set_row(m, &ck, 1) != 0 ||
	    storage_mutation_put(m, PAXOS_COL_STATE, NULL, 0, enc.data, enc.len,
				 ts, ttl, ts / 1000000 + 1) != 0)
		goto fail;
	buf_free(&enc);
	write_mutation(c, m, done, darg);
	return;
fail:
	buf_free(&enc);
	storage_mutation_delete(m);
	done(darg, -1);
}

static void read_frag(void *arg, int status, enum err_code code,
		      struct storage_mutation **frags, size_t n, bool cut)
{
	struct sjob *j = arg;
	(void)code;
	(void)cut;
	struct buf b = {0};
	int rc = status;
	if (rc == 0 && n > 0)
		rc = storage_mutation_encode(frags[0], &b);
	for (size_t i = 0; i < n; i++)
		storage_mutation_delete(frags[i]);
	free(frags);
	j->read(j->darg, rc, buf_slice(&b));
	buf_free(&b);
	free(j);
}

static void st_read(void *arg, struct slice key, paxos_read_fn done, void *darg)
{
	struct node_cas *c = arg;
	const uint8_t *table;
	struct slice pk;
	struct sjob *j = calloc(1, sizeof(*j));
	if (!j || key_split(key, &table, &pk) != 0) {
		free(j);
		done(darg, -1, slice_make(NULL, 0));
		return;
	}
	*j = (struct sjob){.c = c, .read = done, .darg = darg};
	struct storage_read_cmd cmd = {
		.key = pk.ptr, .key_len = pk.len, .with_static = true};
	c->store->read(c->store_arg, table, &cmd, read_frag, j);
}

static void st_apply(void *arg, struct slice key, const struct paxos_ballot *b,
		     struct slice update, paxos_done_fn done, void *darg)
{
	struct node_cas *c = arg;
	(void)key;
	(void)b; /* the update carries the ballot's time already */
	struct storage_mutation *m =
		storage_mutation_decode(update.ptr, update.len);
	if (!m) {
		LOG_WARN("paxos commit: undecodable update: %s", err_msg());
		done(darg, -1);
		return;
	}
	write_mutation(c, m, done, darg);
}

static const struct paxos_store_ops store_ops = {
	.load = st_load,
	.save = st_save,
	.read = st_read,
	.apply = st_apply,
};

/* ---- the ballot lease ------------------------------------------------------
 */

struct lease_job {
	struct node_cas *c;
	int64_t us;
	int status;
};

static int lease_write(struct env *env, const char *path, int64_t us)
{
	char text[32];
	int n = snprintf(text, sizeof(text), "%lld\n", (long long)us);
	return env_write_file_atomic(env, path, text, (size_t)n);
}

static void lease_run(void *arg)
{
	struct lease_job *j = arg;
	j->status = lease_write(j->c->env, j->c->lease_path, j->us);
}

static void lease_done(void *arg)
{
	struct lease_job *j = arg;
	struct node_cas *c = j->c;
	if (j->status == 0)
		c->lease_us = j->us;
	else if (!c->lease_failed_logged) {
		c->lease_failed_logged = true;
		LOG_ERROR("cannot write the paxos ballot lease %s",
			  c->lease_path);
	}
	c->writing_us = 0;
	free(j);
}

static void lease_tick(void *arg)
{
	struct node_cas *c = arg;
	env_timer_arm(c->env, c->lease_timer, LEASE_CHECK_US);
	int64_t top = paxos_last_ballot_us(c->px);
	int64_t now = env_wall_us(c->env);
	if (now > top)
		top = now;
	if (c->writing_us || top + LEASE_MARGIN_US < c->lease_us ||
	    !c->hooks.offload)
		return;
	struct lease_job *j = calloc(1, sizeof(*j));
	if (!j)
		return;
	*j = (struct lease_job){.c = c, .us = top + LEASE_AHEAD_US};
	c->writing_us = j->us;
	c->hooks.offload(c->hooks.arg, lease_run, lease_done, j);
}

/* Startup: the floor from the file, then the file an hour ahead. */
static int lease_open(struct node_cas *c, const char *path, int64_t *floor)
{
	*floor = 0;
	if (!(c->lease_path = strdup(path)))
		return err_set(ERR_NOMEM, "paxos lease");
	uint8_t *data = NULL;
	size_t len = 0;
	if (env_exists(c->env, path) == 1) {
		if (env_read_file(c->env, path, 64, &data, &len) != 0)
			return -1;
		char *end;
		long long v = strtoll((const char *)data, &end, 10);
		free(data);
		if (end == (const char *)data || v < 0)
			return err_set(ERR_CORRUPT, "%s: not a ballot lease",
				       path);
		*floor = v;
	}
	int64_t now = env_wall_us(c->env);
	int64_t base = now > *floor ? now : *floor;
	if (lease_write(c->env, path, base + LEASE_AHEAD_US) != 0)
		return -1;
	c->lease_us = base + LEASE_AHEAD_US;
	return 0;
}

struct node_cas *node_cas_new(struct env *env, const struct inet_addr *self,
			      const char *ballot_file,
			      const struct paxos_options *po,
			      const struct repl_store_ops *store,
			      void *store_arg, struct cql_schema *schema,
			      const struct node_cas_hooks *hooks)
{
	struct node_cas *c = calloc(1, sizeof(*c));
	if (!c) {
		err_set(ERR_NOMEM, "paxos");
		return NULL;
	}
	c->env = env;
	c->store = store;
	c->store_arg = store_arg;
	c->schema = schema;
	c->hooks = *hooks;
	c->self = *self;
	cql_timeuuid_gen_init(&c->timeuuids, env_random(env));
	struct paxos_options o = *po;
	o.self = *self;
	int64_t floor = 0;
	if (ballot_file && lease_open(c, ballot_file, &floor) != 0) {
		node_cas_delete(c);
		return NULL;
	}
	if (floor > o.ballot_floor_us)
		o.ballot_floor_us = floor;
	if (!o.purge_window_us)
		o.purge_window_us = PAXOS_PURGE_WINDOW_US;
	if (!(c->meta = paxos_meta_new()) ||
	    !(c->px = paxos_new(env, &o, &store_ops, c)) ||
	    !(c->pcl = paxos_cleanup_new(env, self, cleanup_local, c))) {
		node_cas_delete(c);
		return NULL;
	}
	if (ballot_file) {
		if (!(c->lease_timer = env_timer_new(env, lease_tick, c))) {
			node_cas_delete(c);
			return NULL;
		}
		env_timer_arm(env, c->lease_timer, LEASE_CHECK_US);
	}
	return c;
}

void node_cas_delete(struct node_cas *c)
{
	if (!c)
		return;
	env_timer_free(c->env, c->lease_timer);
	paxos_delete(c->px); /* the repairs' rounds end unanswered */
	paxos_cleanup_delete(c->pcl);
	while (c->repairs)
		prep_free(c->repairs);
	storage_table_meta_delete(c->meta);
	free(c->lease_path);
	free(c);
}

void node_cas_receive(struct node_cas *c, const struct inet_addr *from,
		      uint32_t verb, const uint8_t *msg, size_t len)
{
	if (verb == PAXOS_VERB_CLEANUP || verb == PAXOS_VERB_CLEANUP_RSP) {
		paxos_cleanup_receive(c->pcl, from, verb, msg, len);
		return;
	}
	paxos_receive(c->px, from, verb, msg, len);
}

void node_cas_stats(const struct node_cas *c, struct paxos_stats *out)
{
	paxos_get_stats(c->px, out);
}

void node_cas_latencies(const struct node_cas *c, struct repl_latency *write,
			struct repl_latency *read)
{
	*write = c->write_lat;
	*read = c->read_lat;
}

/* ---- the proposer's request -----------------------------------------------
 */

struct cas_op {
	struct node_cas *c;
	struct cql_request *req;
	uint8_t version;
	int16_t stream;
	struct cql_schema_pin pin;
	const struct storage_table_meta *meta; /* the user table's */
	struct cql_cas *cas; /* NULL: a serial read's prepare */
	int serial_cl, commit_cl;
	struct storage_result *cur; /* what decide() saw */
	void (*read_done)(void *arg, int status);
	void *read_arg;
	bool wait_self; /* paxos repair: our own promise must be seen */
	uint64_t start_us;
	/* the statement's trace session (valid until the reply), or NULL */
	struct cql_trace *trace;
};

static void op_free(struct cas_op *op)
{
	storage_result_delete(op->cur);
	cql_cas_delete(op->cas);
	cql_schema_unpin(op->c->schema, &op->pin);
	free(op);
}

static void reply_error(struct cql_request *req, uint8_t version,
			int16_t stream, uint32_t code, const char *msg)
{
	if (!req)
		return; /* paxos repair: nobody to answer */
	struct buf b = {0};
	cql_encode_error(&b, version, stream, code, msg);
	cql_request_reply(req, b.data, b.len);
	buf_free(&b);
}

static struct storage_mutation *frag_decode(struct slice s)
{
	return s.len ? storage_mutation_decode(s.ptr, s.len) : NULL;
}

static int cas_merge(void *arg, const struct slice *reads, size_t n,
		     struct buf *out)
{
	struct cas_op *op = arg;
	struct storage_mutation *f[MAX_PARTICIPANTS];
	size_t k = 0;
	int rc = 0;
	for (size_t i = 0; i < n && i < MAX_PARTICIPANTS; i++) {
		struct storage_mutation *m = frag_decode(reads[i]);
		if (reads[i].len && !m) {
			rc = -1;
			break;
		}
		if (m)
			f[k++] = m;
	}
	if (rc == 0 && k > 0) {
		struct storage_mutation *merged =
			storage_fragment_merge(op->meta, f, k);
		rc = merged ? storage_mutation_encode(merged, out) : -1;
		storage_mutation_delete(merged);
	}
	for (size_t i = 0; i < k; i++)
		storage_mutation_delete(f[i]);
	return rc;
}

static int resolve_current(struct cas_op *op, struct slice current)
{
	storage_result_delete(op->cur);
	op->cur = NULL;
	if (!current.len)
		return 0;
	struct storage_mutation *m = frag_decode(current);
	if (!m)
		return -1;
	struct storage_read_cmd cmd = {.with_static = true};
	int rc = storage_fragment_resolve(
		op->meta, m, &cmd, env_wall_us(op->c->env) / 1000000, &op->cur);
	storage_mutation_delete(m);
	return rc;
}

static int cas_decide(void *arg, const struct paxos_ballot *ballot,
		      struct slice current, struct buf *update)
{
	struct cas_op *op = arg;
	if (!op->cas)
		return 0; /* a serial read: nothing to write */
	struct cql_request_info ti = {.trace = op->trace};
	cql_trace_event(&ti, "Reading existing values for CAS precondition");
	if (resolve_current(op, current) != 0)
		return -1;
	bool applied;
	if (cql_cas_eval(op->cas, op->cur, &applied) != 0)
		return -1;
	if (!applied) {
		cql_trace_event(
			&ti, "CAS precondition does not match current values");
		return 0;
	}
	if (op->trace) {
		uint8_t id[16];
		char text[UUID_TEXT_LEN + 1];
		paxos_ballot_to_uuid(ballot, id);
		uuid_format(id, text);
		cql_trace_event(&ti,
				"CAS precondition is met; proposing "
				"client-requested updates for %s",
				text);
	}
	const struct storage_mutation *w = cql_cas_mutation(op->cas);
	struct buf enc = {0};
	if (storage_mutation_encode(w, &enc) != 0)
		return -1;
	struct storage_mutation *m = storage_mutation_decode(enc.data, enc.len);
	buf_free(&enc);
	if (!m)
		return -1;
	storage_mutation_shift_timestamps(m, ballot->us);
	int rc = storage_mutation_encode(m, update);
	storage_mutation_delete(m);
	return rc < 0 ? -1 : 1;
}

static void cas_done(void *arg, struct paxos_result *res)
{
	struct cas_op *op = arg;
	struct buf b = {0};
	char msg[256];
	if (res->outcome == PAXOS_OK && (op->cas || op->req))
		repl_lat_add(op->cas ? &op->c->write_lat : &op->c->read_lat,
			     env_mono_us(op->c->env) - op->start_us);
	switch (res->outcome) {
	case PAXOS_OK:
		if (!op->cas) {
			buf_free(&res->current);
			op->read_done(op->read_arg, 0);
			op_free(op);
			return;
		}
		if (!res->applied &&
		    resolve_current(op, buf_slice(&res->current)) != 0) {
			cql_encode_error(&b, op->version, op->stream,
					 CQL_ERR_SERVER,
					 "cannot read the current row");
			break;
		}
		if (cql_cas_encode(op->cas, res->applied ? NULL : op->cur,
				   res->applied, op->version, op->stream,
				   &b) != 0)
			cql_encode_error(&b, op->version, op->stream,
					 CQL_ERR_SERVER, err_msg());
		break;
	case PAXOS_READ_TIMEOUT:
		snprintf(msg, sizeof(msg),
			 "Operation timed out - received only %d responses.",
			 res->received);
		cql_encode_read_timeout(&b, op->version, op->stream, msg,
					(uint16_t)op->serial_cl, res->received,
					res->block_for, false);
		break;
	case PAXOS_WRITE_TIMEOUT: {
		bool commit = res->phase == PAXOS_PHASE_COMMIT;
		if (res->proposal_partial)
			snprintf(msg, sizeof(msg),
				 "CAS operation result is unknown - proposal "
				 "accepted by %d but not a quorum.",
				 res->received);
		else
			snprintf(msg, sizeof(msg),
				 "Operation timed out - received only %d "
				 "responses.",
				 res->received);
		if (res->proposal_partial && !commit)
			/* v5: CAS_WRITE_UNKNOWN; v3/v4: WriteTimeout CAS */
			cql_encode_cas_write_unknown(
				&b, op->version, op->stream, msg,
				(uint16_t)op->serial_cl, res->received,
				res->block_for);
		else
			cql_encode_write_timeout(
				&b, op->version, op->stream, msg,
				(uint16_t)(commit ? op->commit_cl
						  : op->serial_cl),
				res->received, res->block_for,
				commit ? "SIMPLE" : "CAS");
		break;
	}
	case PAXOS_FAILED:
	default:
		cql_encode_error(&b, op->version, op->stream, CQL_ERR_SERVER,
				 "the conditional write failed");
		break;
	}
	buf_free(&res->current);
	if (op->req)
		cql_request_reply(op->req, b.data, b.len);
	if (!op->cas)
		op->read_done(op->read_arg, -1);
	buf_free(&b);
	op_free(op);
}

/* The Paxos participants of a partition at `serial_cl`: their addresses
 * (alive ones), how many promises are needed, or -1 with the reply sent. */
static int participants(struct node_cas *c, struct cas_op *op,
			const struct ring_strategy *s, int64_t token,
			struct inet_addr *out, size_t *n, int *needed)
{
	struct ring *ring = c->hooks.ring(c->hooks.arg);
	struct ring_replicas reps;
	if (!ring || ring_replicas_for_token(ring, s, token, &reps) != 0) {
		reply_error(op->req, op->version, op->stream, CQL_ERR_SERVER,
			    "cannot place the partition");
		return -1;
	}
	int local = ring_local_endpoint(ring);
	const char *ldc =
		local >= 0 ? ring_endpoint_get(ring, (size_t)local)->dc : NULL;
	bool local_only = op->serial_cl == REPL_CL_LOCAL_SERIAL;
	int natural = 0, pending = 0, alive = 0;
	*n = 0;
	for (size_t i = 0; i < reps.n_natural + reps.n_pending; i++) {
		bool is_pending = i >= reps.n_natural;
		uint32_t ep = is_pending ? reps.pending[i - reps.n_natural]
					 : reps.natural[i];
		const struct ring_endpoint *e = ring_endpoint_get(ring, ep);
		if (local_only && ldc && strcmp(e->dc, ldc) != 0)
			continue;
		if (is_pending)
			pending++;
		else
			natural++;
		bool up = (int)ep == local ||
			  c->hooks.is_alive(c->hooks.arg, &e->addr);
		if (up && *n < MAX_PARTICIPANTS) {
			out[(*n)++] = e->addr;
			alive++;
		}
	}
	*needed = natural / 2 + 1 + pending;
	if (natural == 0 || alive < *needed) {
		struct buf b = {0};
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "Cannot achieve consistency level %s",
			 repl_cl_name(op->serial_cl));
		cql_encode_unavailable(&b, op->version, op->stream, msg,
				       (uint16_t)op->serial_cl,
				       natural ? *needed : 1, alive);
		if (op->req)
			cql_request_reply(op->req, b.data, b.len);
		buf_free(&b);
		return -1;
	}
	return 0;
}

static const struct ring_strategy *
strategy_of(struct node_cas *c, const struct storage_table_meta *m)
{
	const struct cql_keyspace *k =
		cql_schema_keyspace(c->schema, m->keyspace);
	return k ? cql_keyspace_strategy(k) : NULL;
}

static int serial_of(uint16_t cl)
{
	return cl == REPL_CL_LOCAL_SERIAL ? REPL_CL_LOCAL_SERIAL
					  : REPL_CL_SERIAL;
}

static uint64_t rand_of(void *arg)
{
	return env_random(arg);
}

static void start(struct node_cas *c, struct cas_op *op,
		  const struct ring_strategy *s, struct slice pk, int64_t token,
		  int commit_bf)
{
	struct inet_addr reps[MAX_PARTICIPANTS];
	size_t n;
	int needed;
	if (participants(c, op, s, token, reps, &n, &needed) != 0) {
		if (!op->cas)
			op->read_done(op->read_arg, -1);
		op_free(op);
		return;
	}
	struct buf key = {0};
	if (buf_append(&key, op->meta->id, 16) != 0 ||
	    buf_append(&key, pk.ptr, pk.len) != 0) {
		buf_free(&key);
		reply_error(op->req, op->version, op->stream, CQL_ERR_SERVER,
			    "out of memory");
		if (!op->cas)
			op->read_done(op->read_arg, -1);
		op_free(op);
		return;
	}
	struct paxos_request rq = {
		.key = buf_slice(&key),
		.replicas = reps,
		.n = n,
		.needed = needed,
		.commit_block_for = commit_bf,
		.is_read = op->cas == NULL,
		.wait_self = op->wait_self,
		.merge = cas_merge,
		.decide = cas_decide,
		.decide_arg = op,
		.trace_session = op->trace ? op->trace->id : NULL,
	};
	op->start_us = env_mono_us(c->env);
	paxos_cas(c->px, &rq, cas_done, op);
	buf_free(&key);
}

void node_cas_write(struct node_cas *c, const struct cql_data_request *dr)
{
	uint8_t version = dr->info->version;
	int16_t stream = dr->info->stream;
	int cl = dr->params->consistency;
	if (cl == REPL_CL_SERIAL || cl == REPL_CL_LOCAL_SERIAL) {
		reply_error(dr->req, version, stream, CQL_ERR_INVALID,
			    cl == REPL_CL_SERIAL
				    ? "SERIAL is not supported as conditional "
				      "update commit consistency. Use ANY if "
				      "you mean \"make sure it is accepted but "
				      "I don't care how many replicas commit "
				      "it for non-SERIAL reads\""
				    : "LOCAL_SERIAL is not supported as "
				      "conditional update commit consistency. "
				      "Use ANY if you mean \"make sure it is "
				      "accepted but I don't care how many "
				      "replicas commit it for non-SERIAL "
				      "reads\"");
		return;
	}
	struct cas_op *op = calloc(1, sizeof(*op));
	if (!op) {
		reply_error(dr->req, version, stream, CQL_ERR_SERVER,
			    "out of memory");
		return;
	}
	op->c = c;
	op->req = dr->req;
	op->version = version;
	op->stream = stream;
	op->trace = dr->info->trace;
	cql_schema_pin(c->schema, &op->pin);
	int64_t now = env_wall_us(c->env);
	struct cql_fn_ctx fn = {.now_us = now,
				.timeuuids = &c->timeuuids,
				.random = rand_of,
				.random_arg = c->env};
	struct cql_write_ctx ctx = {.now_sec = now / 1000000, .fn = &fn};
	op->cas = cql_cas_new(dr, &ctx);
	if (!op->cas) {
		reply_error(dr->req, version, stream,
			    err_code() == ERR_NOMEM ? CQL_ERR_SERVER
						    : CQL_ERR_INVALID,
			    err_msg());
		op_free(op);
		return;
	}
	op->meta = cql_table_meta(cql_cas_table(op->cas));
	op->serial_cl = serial_of(dr->params->serial_consistency);
	op->commit_cl = cl;
	const struct ring_strategy *s = strategy_of(c, op->meta);
	if (!s) {
		reply_error(dr->req, version, stream, CQL_ERR_INVALID,
			    "the keyspace was dropped");
		op_free(op);
		return;
	}
	struct ring *ring = c->hooks.ring(c->hooks.arg);
	int ldc_ep = ring ? ring_local_endpoint(ring) : -1;
	const char *ldc = ldc_ep >= 0
				  ? ring_endpoint_get(ring, (size_t)ldc_ep)->dc
				  : NULL;
	int commit_bf = cl == REPL_CL_ANY ? 0 : repl_block_for(cl, s, ldc);
	if (commit_bf < 0) {
		reply_error(dr->req, version, stream, CQL_ERR_INVALID,
			    "invalid consistency level for the commit");
		op_free(op);
		return;
	}
	const struct storage_mutation *m = cql_cas_mutation(op->cas);
	start(c, op, s, storage_mutation_key(m), storage_mutation_token(m),
	      commit_bf);
}

static void serial_prepare(struct node_cas *c, const struct cql_table *t,
			   struct slice pk, int serial_cl,
			   struct cql_request *req, uint8_t version,
			   int16_t stream, bool wait_self,
			   void (*done)(void *arg, int status), void *arg)
{
	struct cas_op *op = calloc(1, sizeof(*op));
	if (!op) {
		reply_error(req, version, stream, CQL_ERR_SERVER,
			    "out of memory");
		done(arg, -1);
		return;
	}
	op->c = c;
	op->req = req;
	op->version = version;
	op->stream = stream;
	op->read_done = done;
	op->read_arg = arg;
	op->wait_self = wait_self;
	cql_schema_pin(c->schema, &op->pin);
	op->meta = cql_table_meta(t);
	op->serial_cl = serial_of((uint16_t)serial_cl);
	const struct ring_strategy *s = strategy_of(c, op->meta);
	if (!s) {
		reply_error(req, version, stream, CQL_ERR_INVALID,
			    "the keyspace was dropped");
		done(arg, -1);
		op_free(op);
		return;
	}
	int64_t token = murmur3_token(pk.ptr, pk.len);
	start(c, op, s, pk, token, 0);
}

void node_cas_serial_prepare(struct node_cas *c, const struct cql_table *t,
			     struct slice pk, int serial_cl,
			     struct cql_request *req, uint8_t version,
			     int16_t stream,
			     void (*done)(void *arg, int status), void *arg)
{
	serial_prepare(c, t, pk, serial_cl, req, version, stream, false, done,
		       arg);
}

/* ---- paxos repair ----------------------------------------------------------
 */

#define REPAIR_PAGE     64 /* system.paxos partitions per scan */
#define REPAIR_PARALLEL 8  /* completions in flight */

struct prep_item {
	const struct cql_table *t; /* in the job's pinned schema */
	struct buf pk;
};

struct prep_job {
	struct node_cas *c;
	char *ks, *table;           /* the filter; NULL: all */
	struct paxos_range *ranges; /* and the tokens; NULL: all */
	size_t nranges;
	struct cql_schema_pin pin;
	struct prep_item *items; /* the current page's unfinished ones */
	size_t n, next, running;
	int64_t from;   /* the next scan starts above this token */
	bool last_page; /* the scan reached the end of the ring */
	bool scanning;
	bool pumping; /* prep_pump is on the stack */
	struct node_cas_repair_counts counts;
	node_cas_repair_fn done; /* NULL: cancelled */
	void *arg;
	struct prep_job *next_job;
};

static void prep_scan(struct prep_job *j);

static void prep_items_free(struct prep_job *j)
{
	for (size_t i = 0; i < j->n; i++)
		buf_free(&j->items[i].pk);
	free(j->items);
	j->items = NULL;
	j->n = j->next = 0;
}

static void prep_free(struct prep_job *j)
{
	for (struct prep_job **pp = &j->c->repairs; *pp; pp = &(*pp)->next_job)
		if (*pp == j) {
			*pp = j->next_job;
			break;
		}
	prep_items_free(j);
	cql_schema_unpin(j->c->schema, &j->pin);
	free(j->ks);
	free(j->table);
	free(j->ranges);
	free(j);
}

static void prep_finish(struct prep_job *j)
{
	if (j->done)
		j->done(j->arg, &j->counts);
	prep_free(j);
}

/* The user table of a system.paxos row, when the filter takes it. */
static const struct cql_table *prep_table(struct prep_job *j,
					  const uint8_t id[16])
{
	size_t nk = cql_schema_keyspace_count(j->c->schema);
	for (size_t i = 0; i < nk; i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(j->c->schema, i);
		if (j->ks && strcmp(cql_keyspace_meta(k)->name, j->ks) != 0)
			continue;
		size_t nt = cql_keyspace_table_count(k);
		for (size_t t = 0; t < nt; t++) {
			const struct cql_table *tb =
				cql_keyspace_table_at(k, t);
			const struct storage_table_meta *m = cql_table_meta(tb);
			if (memcmp(m->id, id, 16) != 0)
				continue;
			if (j->table && strcmp(m->name, j->table) != 0)
				return NULL;
			return tb;
		}
	}
	return NULL;
}

static void prep_pump(struct prep_job *j);

static void prep_one_done(void *arg, int status)
{
	struct prep_job *j = arg;
	j->running--;
	if (status == 0)
		j->counts.completed++;
	else
		j->counts.failed++;
	prep_pump(j);
}

/* Runs the page's completions, REPAIR_PARALLEL at a time; then the next
 * page, or the end. */
static void prep_pump(struct prep_job *j)
{
	if (j->pumping)
		return; /* a completion ran inline: the loop below goes on */
	j->pumping = true;
	for (;;) {
		while (j->next < j->n && j->running < REPAIR_PARALLEL) {
			struct prep_item *it = &j->items[j->next++];
			j->running++;
			/* The SERIAL read's round: it re-proposes and
			 * commits the newest accepted value its promisers
			 * report, and proposes nothing of its own. Our own
			 * promise must be among them: a quorum of the
			 * others' may not hold the proposal we accepted. */
			serial_prepare(j->c, it->t, buf_slice(&it->pk),
				       REPL_CL_SERIAL, NULL, 0, 0, true,
				       prep_one_done, j);
		}
		if (j->running || j->scanning)
			break;
		if (!j->done) /* cancelled: no more rounds */
			j->next = j->n;
		if (j->next < j->n)
			break;
		prep_items_free(j);
		if (j->last_page || !j->done) {
			prep_finish(j);
			return;
		}
		prep_scan(j);
	}
	j->pumping = false;
}

/* One system.paxos partition: its rows whose accepted proposal is newer
 * than their commit become items. */
static void prep_partition(struct prep_job *j, struct storage_mutation *f)
{
	struct storage_read_cmd cmd = {0};
	struct storage_result *r = NULL;
	if (storage_fragment_resolve(j->c->meta, f, &cmd,
				     env_wall_us(j->c->env) / 1000000,
				     &r) != 0) {
		j->counts.failed++;
		return;
	}
	struct slice pk = storage_mutation_key(f);
	if (j->ranges) {
		int64_t token = storage_mutation_token(f);
		bool in = false;
		for (size_t i = 0; i < j->nranges && !in; i++)
			in = paxos_range_contains(&j->ranges[i], token);
		if (!in) {
			storage_result_delete(r);
			return;
		}
	}
	for (size_t i = 0; i < r->row_count; i++) {
		const struct storage_row_view *row = &r->rows[i];
		if (row->clustering_count != 1 || row->clustering[0].len != 16)
			continue;
		const struct cql_table *t =
			prep_table(j, row->clustering[0].ptr);
		if (!t)
			continue;
		for (size_t k = 0; k < row->cell_count; k++) {
			if (row->cells[k].column != PAXOS_COL_STATE)
				continue;
			j->counts.scanned++;
			struct paxos_state st;
			if (paxos_state_decode(row->cells[k].value, &st) != 0) {
				LOG_ERROR("system.paxos: %s", err_msg());
				j->counts.failed++;
				continue;
			}
			bool unfinished = !paxos_ballot_is_none(&st.accepted) &&
					  paxos_ballot_cmp(&st.accepted,
							   &st.committed) > 0;
			paxos_state_free(&st);
			if (!unfinished)
				continue;
			struct prep_item *v = realloc(
				j->items, (j->n + 1) * sizeof(*j->items));
			if (!v) {
				j->counts.failed++;
				continue;
			}
			j->items = v;
			j->items[j->n] = (struct prep_item){.t = t};
			if (buf_append(&j->items[j->n].pk, pk.ptr, pk.len) !=
			    0) {
				buf_free(&j->items[j->n].pk);
				j->counts.failed++;
				continue;
			}
			j->n++;
		}
	}
	storage_result_delete(r);
}

static void prep_scanned(void *arg, int status, enum err_code code,
			 struct storage_mutation **frags, size_t n, bool cut)
{
	struct prep_job *j = arg;
	(void)code;
	j->scanning = false;
	if (status != 0) {
		LOG_ERROR("paxos repair: cannot scan system.paxos");
		j->counts.failed++;
		j->last_page = true;
	} else {
		for (size_t i = 0; i < n; i++) {
			prep_partition(j, frags[i]);
			j->from = storage_mutation_token(frags[i]);
		}
		/* Paged by token: partitions sharing the last token of a
		 * full page with the next one are not seen (murmur3
		 * collisions). */
		if (!cut || n == 0 || j->from == INT64_MAX)
			j->last_page = true;
	}
	for (size_t i = 0; i < n; i++)
		storage_mutation_delete(frags[i]);
	free(frags);
	prep_pump(j);
}

static void prep_scan(struct prep_job *j)
{
	struct storage_read_cmd cmd = {0};
	j->scanning = true;
	j->c->store->scan(j->c->store_arg, PAXOS_TABLE_ID, j->from, INT64_MAX,
			  &cmd, REPAIR_PAGE, prep_scanned, j);
}

static int paxos_repair_in(struct node_cas *c, const char *keyspace,
			   const char *table, const struct paxos_range *ranges,
			   size_t nranges, node_cas_repair_fn done, void *arg,
			   struct prep_job **handle)
{
	struct prep_job *j = calloc(1, sizeof(*j));
	if (!j || (keyspace && !(j->ks = strdup(keyspace))) ||
	    (table && !(j->table = strdup(table))) ||
	    (ranges &&
	     !(j->ranges = calloc(nranges ? nranges : 1, sizeof(*ranges))))) {
		if (j) {
			free(j->ks);
			free(j->table);
			free(j);
		}
		return err_set(ERR_NOMEM, "paxos repair");
	}
	if (ranges) {
		memcpy(j->ranges, ranges, nranges * sizeof(*ranges));
		j->nranges = nranges;
	}
	j->c = c;
	j->done = done;
	j->arg = arg;
	j->from = INT64_MIN;
	cql_schema_pin(c->schema, &j->pin);
	j->next_job = c->repairs;
	c->repairs = j;
	if (handle)
		*handle = j;
	prep_scan(j);
	return 0;
}

int node_cas_paxos_repair(struct node_cas *c, const char *keyspace,
			  const char *table, node_cas_repair_fn done, void *arg,
			  struct prep_job **handle)
{
	return paxos_repair_in(c, keyspace, table, NULL, 0, done, arg, handle);
}

/* ---- paxos repair of moving ranges ----------------------------------------
 */

struct cleanup_share {
	paxos_cleanup_local_done done;
	void *darg;
};

static void cleanup_share_done(void *arg,
			       const struct node_cas_repair_counts *n)
{
	struct cleanup_share *s = arg;
	LOG_INFO("paxos repair of moving ranges: %llu unfinished proposals "
		 "completed, %llu failed (%llu registers scanned)",
		 (unsigned long long)n->completed,
		 (unsigned long long)n->failed, (unsigned long long)n->scanned);
	s->done(s->darg, 0, n->completed, n->failed);
	free(s);
}

/* This node's share of a moving range's paxos repair (paxos_cleanup):
 * `repair --paxos-only keyspace` restricted to the ranges. */
static void cleanup_local(void *arg, const char *keyspace,
			  const struct paxos_range *r, size_t n,
			  paxos_cleanup_local_done done, void *darg)
{
	struct node_cas *c = arg;
	if (n == 0) { /* no range: nothing (NULL ranges would be all) */
		done(darg, 0, 0, 0);
		return;
	}
	struct cleanup_share *s = calloc(1, sizeof(*s));
	if (!s) {
		done(darg, -1, 0, 0);
		return;
	}
	*s = (struct cleanup_share){.done = done, .darg = darg};
	if (paxos_repair_in(c, keyspace, NULL, r, n, cleanup_share_done, s,
			    NULL) != 0) {
		free(s);
		done(darg, -1, 0, 0);
	}
}

int node_cas_paxos_cleanup(struct node_cas *c, const char *keyspace,
			   const struct paxos_range *r, size_t nr,
			   const struct inet_addr *eps, size_t ne,
			   uint64_t timeout_ms, paxos_cleanup_cb done,
			   void *arg)
{
	return paxos_cleanup_start(c->pcl, keyspace, r, nr, eps, ne, timeout_ms,
				   done, arg);
}

void node_cas_paxos_cleanup_cancel(struct node_cas *c, paxos_cleanup_cb done,
				   void *arg)
{
	paxos_cleanup_cancel(c->pcl, done, arg);
}

void node_cas_paxos_repair_cancel(struct node_cas *c, struct prep_job *j)
{
	for (struct prep_job *k = c->repairs; k; k = k->next_job)
		if (k == j) {
			j->done = NULL; /* the rounds under way end it */
			return;
		}
}

void node_cas_test_propose_self_only(struct node_cas *c, bool on)
{
	paxos_test_propose_self_only(c->px, on);
}
