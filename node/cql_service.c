/* The node's CQL service (see cql_service.h). */
#define LOG_MODULE "node"
#include "node/cql_service.h"
#include "node/node_trace.h"

#include "client/auth/auth.h"
#include "client/exec/data_path.h"
#include "client/exec/executor.h"
#include "client/proto/server.h"
#include "client/proto/tls.h"
#include "client/schema/schema_log.h"
#include "common/err.h"
#include "common/log.h"
#include "common/loopq.h"
#include "common/murmur3.h"
#include "common/uuid.h"
#include "common/workers.h"
#include "node/cql_cas.h"
#include "node/cql_data.h"
#include "replication/hints.h"
#include "ring/ring.h"
#include "storage/storage.h"

#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cql_service {
	const struct conf *conf;
	struct event_base *base;
	struct env *env;
	struct loopq *q;
	struct workers *syncer;      /* fsyncs of the schema log */
	struct workers *maintenance; /* flushes asked by the admin (lazily) */
	struct ssl_ctx_st *tls;      /* client_encryption_options, or NULL */
	struct storage *db;
	struct cql_schema *schema;
	struct cql_schema_log *log;
	struct cql_data *data;
	struct cql_data_hooks data_hooks;
	struct cql_exec *exec;
	struct cql_auth *auth;
	struct cql_server *server;
	struct node_trace *trace; /* in front of auth and the executor */
	cql_service_node_info_fn node_info;
	struct ring *(*ring_fn)(void *arg);
	bool (*alive_fn)(void *arg, const struct inet_addr *ep);
	void *node_arg;
	struct work sync_work;
	bool sync_queued;
	cql_service_change_fn on_change;
	void *on_change_arg;
	/* Every applied schema record, in order, and their hashes. */
	struct buf records; /* u32 length + body, repeated */
	uint64_t *hashes;
	size_t hash_count, hash_cap;
	/* system_views' rows, rebuilt for each SELECT on one */
	size_t (*pools_fn)(void *arg, struct cql_thread_pool *out, size_t cap);
	int (*view_rows_fn)(void *arg, const char *table,
			    struct cql_view_rows *rows);
	struct cql_setting *settings;
	char *setting_text; /* the values, CQL_SETTING_MAX bytes each */
	struct cql_server_client *clients;
	size_t client_cap;
	struct cql_thread_pool pools[CQL_SERVICE_POOLS_MAX];
};

#define CQL_SETTING_MAX 512

static uint64_t record_hash(const uint8_t *body, size_t len)
{
	uint64_t h[2];
	murmur3_hash128(body, len, 0x5c4e, h);
	return h[0] ^ h[1];
}

static bool record_known(const struct cql_service *s, uint64_t h)
{
	for (size_t i = 0; i < s->hash_count; i++)
		if (s->hashes[i] == h)
			return true;
	return false;
}

static int record_remember(struct cql_service *s, const uint8_t *body,
			   size_t len)
{
	if (s->hash_count == s->hash_cap) {
		size_t cap = s->hash_cap ? s->hash_cap * 2 : 64;
		uint64_t *h = realloc(s->hashes, cap * sizeof(*h));
		if (!h)
			return err_set(ERR_NOMEM, "out of memory");
		s->hashes = h;
		s->hash_cap = cap;
	}
	if (buf_put_be32(&s->records, (uint32_t)len) != 0 ||
	    buf_append(&s->records, body, len) != 0)
		return -1;
	s->hashes[s->hash_count++] = record_hash(body, len);
	return 0;
}

static int replayed_record(void *arg, const uint8_t *body, size_t len)
{
	return record_remember(arg, body, len);
}

/* ---- executor hooks ------------------------------------------------------ */

static void hook_node_info(void *arg, struct cql_node_info *out)
{
	struct cql_service *s = arg;
	s->node_info(s->node_arg, out);
}

static int cmp_setting(const void *a, const void *b)
{
	return strcmp(((const struct cql_setting *)a)->name,
		      ((const struct cql_setting *)b)->name);
}

/* system_views: every node.yaml key with its effective value (sorted by
 * name, as the table's key orders them), the native connections, the
 * thread pools as tpstats shows them. */
static void hook_views(void *arg, struct cql_views_info *out)
{
	struct cql_service *s = arg;
	size_t nkeys = conf_key_count();
	if (!s->settings) {
		s->settings = calloc(nkeys ? nkeys : 1, sizeof(*s->settings));
		s->setting_text = malloc((nkeys ? nkeys : 1) * CQL_SETTING_MAX);
		if (!s->settings || !s->setting_text) {
			free(s->settings);
			free(s->setting_text);
			s->settings = NULL;
			s->setting_text = NULL;
		}
	}
	if (s->settings) {
		for (size_t i = 0; i < nkeys; i++) {
			s->settings[i].name = conf_key_doc_at(i)->name;
			s->settings[i].value = conf_value_text(
				s->conf, i,
				s->setting_text + i * CQL_SETTING_MAX,
				CQL_SETTING_MAX);
		}
		qsort(s->settings, nkeys, sizeof(*s->settings), cmp_setting);
		out->settings = s->settings;
		out->setting_count = nkeys;
	}
	if (s->server) {
		size_t n = cql_server_clients(s->server, s->clients,
					      s->client_cap);
		if (n > s->client_cap) {
			struct cql_server_client *p =
				realloc(s->clients, n * sizeof(*p));
			if (p) {
				s->clients = p;
				s->client_cap = n;
			}
			n = cql_server_clients(s->server, s->clients,
					       s->client_cap);
		}
		out->clients = s->clients;
		out->client_count = n < s->client_cap ? n : s->client_cap;
	}
	if (s->pools_fn) {
		size_t n = s->pools_fn(s->node_arg, s->pools,
				       CQL_SERVICE_POOLS_MAX);
		out->pools = s->pools;
		out->pool_count =
			n < CQL_SERVICE_POOLS_MAX ? n : CQL_SERVICE_POOLS_MAX;
	}
	out->table_rows = s->view_rows_fn;
	out->table_arg = s->node_arg;
}

static void hook_new_table_id(void *arg, uint8_t id[16])
{
	struct cql_service *s = arg;
	for (int i = 0; i < 16; i += 8)
		be64_store(id + i, env_random(s->env));
	id[6] = (uint8_t)((id[6] & 0x0f) | 0x40); /* random (v4) uuid */
	id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);
}

static int64_t hook_now_us(void *arg)
{
	struct cql_service *s = arg;
	return env_wall_us(s->env);
}

static void hook_role(void *arg, struct cql_request *req,
		      const struct cql_request_info *info,
		      const struct cql_role_stmt *r)
{
	struct cql_service *s = arg;
	cql_auth_role_statement(s->auth, req, info, r);
}

static int hook_authorize(void *arg, const struct cql_request_info *info,
			  uint32_t perm, const struct cql_resource *r,
			  char *msg, size_t cap)
{
	struct cql_service *s = arg;
	return cql_auth_authorize(s->auth, info, perm, r, msg, cap);
}

static bool hook_schema_applied(void *arg, struct cql_request *req,
				const struct cql_request_info *info,
				const struct cql_schema_change *c,
				const uint8_t *frame, size_t len)
{
	struct cql_service *s = arg;
	return cql_auth_schema_applied(s->auth, req, info, c, frame, len);
}

static void data_hook(void *arg, const struct cql_data_request *dr)
{
	struct cql_service *s = arg;
	cql_data_request(s->data, dr);
}

static void sync_run(struct work *w)
{
	struct cql_service *s =
		(struct cql_service *)((char *)w -
				       offsetof(struct cql_service, sync_work));
	if (cql_schema_log_sync(s->log) != 0)
		LOG_ERROR("schema log fsync failed: %s", err_msg());
	__atomic_store_n(&s->sync_queued, false, __ATOMIC_RELEASE);
}

static int schema_event(struct buf *b, uint8_t version, void *arg)
{
	const struct cql_schema_change *c = arg;
	return cql_encode_event_schema(b, version, c->change, c->target,
				       c->keyspace,
				       c->name[0] ? c->name : NULL);
}

/* An event to the registered clients; none before the native port opens
 * (the node has not joined the ring yet). */
static void broadcast(struct cql_service *s, const char *type,
		      cql_event_builder build, void *arg)
{
	if (s->server)
		cql_server_broadcast(s->server, type, build, arg);
}

struct node_event {
	bool topology; /* TOPOLOGY_CHANGE, else STATUS_CHANGE */
	const char *change;
	const struct inet_addr *native;
};

static int node_event(struct buf *b, uint8_t version, void *arg)
{
	const struct node_event *e = arg;
	return e->topology ? cql_encode_event_topology(b, version, e->change,
						       e->native)
			   : cql_encode_event_status(b, version, e->change,
						     e->native);
}

void cql_service_node_event(struct cql_service *s, bool topology,
			    const char *change, const struct inet_addr *native)
{
	struct node_event e = {topology, change, native};
	broadcast(s, topology ? "TOPOLOGY_CHANGE" : "STATUS_CHANGE", node_event,
		  &e);
}

/* ALTER TYPE: the tables whose columns name the type have new versions
 * (their columns' types with the new fields); the engine takes them. */
static void type_altered(struct cql_service *s,
			 const struct cql_schema_change *c)
{
	const struct cql_keyspace *k =
		cql_schema_keyspace(s->schema, c->keyspace);
	for (size_t i = 0; k && i < cql_keyspace_table_count(k); i++) {
		const struct cql_table *t = cql_keyspace_table_at(k, i);
		if (cql_table_uses_type(k, t, c->name) &&
		    storage_table_update(s->db, cql_table_meta(t)) != 0)
			LOG_ERROR("cannot update table %s.%s in the engine "
				  "after ALTER TYPE %s: %s",
				  c->keyspace, cql_table_meta(t)->name, c->name,
				  err_msg());
	}
}

/* Logs an applied change, opens a created table, drops what it removed
 * from the engine, and tells the node. */
static void schema_applied(struct cql_service *s,
			   const struct cql_schema_change *c,
			   const uint8_t *body, size_t len, bool local)
{
	/* DROP TABLE, DROP KEYSPACE, a table replaced by a raced CREATE:
	 * the engine forgets them (reads and writes in flight finish with
	 * what they hold; the SSTables stay on disk) */
	for (size_t i = 0; i < c->dropped_count; i++) {
		if (storage_table_drop(s->db, c->dropped[i]) != 0 &&
		    err_code() != ERR_NOT_FOUND)
			LOG_ERROR("cannot drop table %s.%s from the engine: %s",
				  c->keyspace, c->name, err_msg());
		if (s->data)
			cql_data_forget_table(s->data, c->dropped[i]);
	}
	if (cql_schema_log_append_record(s->log, body, len) != 0)
		LOG_ERROR("cannot log schema change (%s %s %s.%s): %s",
			  c->change, c->target, c->keyspace, c->name,
			  err_msg());
	else if (!__atomic_exchange_n(&s->sync_queued, true, __ATOMIC_ACQ_REL))
		workers_submit(s->syncer, &s->sync_work);
	if (record_remember(s, body, len) != 0)
		LOG_ERROR("cannot keep schema record: %s", err_msg());
	bool table = strcmp(c->target, "TABLE") == 0;
	if (table && (strcmp(c->change, "CREATED") == 0 || c->replaced)) {
		const struct cql_table *t =
			cql_schema_table(s->schema, c->keyspace, c->name);
		const struct cql_keyspace *k =
			cql_schema_keyspace(s->schema, c->keyspace);
		if (storage_table_add(s->db, cql_table_meta(t),
				      cql_keyspace_meta(k)->durable_writes) !=
		    0)
			LOG_ERROR("cannot open table %s.%s: %s", c->keyspace,
				  c->name, err_msg());
	} else if (table && strcmp(c->change, "UPDATED") == 0) {
		/* ALTER TABLE: the engine takes the new version (columns
		 * added or dropped, options); data written before stays
		 * readable. */
		const struct cql_table *t =
			cql_schema_table(s->schema, c->keyspace, c->name);
		if (!t || storage_table_update(s->db, cql_table_meta(t)) != 0)
			LOG_ERROR("cannot update table %s.%s in the engine: %s",
				  c->keyspace, c->name,
				  t ? err_msg() : "not in the schema");
	}
	if (strcmp(c->target, "TYPE") == 0 && strcmp(c->change, "UPDATED") == 0)
		type_altered(s, c);
	if (s->on_change)
		s->on_change(s->on_change_arg, body, len, local);
}

static void hook_schema_changed(void *arg, const struct cql_schema_event *e)
{
	struct cql_service *s = arg;
	struct buf body;
	buf_init(&body);
	if (cql_schema_record_encode(&body, e->keyspace, e->table_id, e->cql,
				     e->cql_len, e->time_us,
				     e->change->columns_before) != 0) {
		LOG_ERROR("cannot record schema change: %s", err_msg());
		buf_free(&body);
		return;
	}
	schema_applied(s, e->change, body.data, body.len, true);
	buf_free(&body);
}

/* What a peer's schema change did here, with what settled a race. */
static void log_peer_change(const struct cql_service *s,
			    const struct cql_schema_change *c)
{
	if (c->diverged)
		LOG_ERROR("schema: columns were added to %s.%s on two nodes at "
			  "once and are numbered differently on them; reads "
			  "and writes of the table are refused until it is "
			  "dropped and created again",
			  c->keyspace, c->name);
	if (c->replaced && c->name[0]) {
		char old[UUID_TEXT_LEN + 1], now[UUID_TEXT_LEN + 1];
		const struct cql_table *t =
			cql_schema_table(s->schema, c->keyspace, c->name);
		uuid_format(c->old_id, old);
		uuid_format(cql_table_meta(t)->id, now);
		LOG_WARN("schema: table %s.%s was created on two nodes at "
			 "once; every node keeps id %s (it sorts first) in "
			 "place of %s, whose writes here are no longer read",
			 c->keyspace, c->name, now, old);
	} else if (c->replaced) {
		const struct cql_keyspace *k =
			cql_schema_keyspace(s->schema, c->keyspace);
		LOG_WARN("schema: keyspace %s was created on two nodes at once "
			 "with other options; every node keeps the ones that "
			 "sort first: %s",
			 c->keyspace,
			 ring_strategy_describe(cql_keyspace_strategy(k)));
	} else {
		LOG_INFO("schema: %s %s %s%s%s (from a peer)", c->change,
			 c->target, c->keyspace, c->name[0] ? "." : "",
			 c->name);
	}
}

void cql_service_apply_record(struct cql_service *s, const uint8_t *record,
			      size_t len)
{
	if (record_known(s, record_hash(record, len)))
		return;
	struct cql_schema_change change;
	enum cql_schema_status st =
		cql_schema_record_apply(s->schema, record, len, &change);
	if (st != CQL_SCHEMA_OK) {
		/* Nothing to do here (IF NOT EXISTS, a CREATE that lost a
		 * race, options written later on another node), or not
		 * applicable (it raced a conflicting change): remember it so
		 * it is not retried forever. */
		if (st == CQL_SCHEMA_NOOP)
			LOG_INFO("schema: a change from a peer changes nothing "
				 "here (it exists, lost a race, or its options "
				 "were written later elsewhere)");
		else
			LOG_WARN("schema record from a peer does not apply: "
				 "%s",
				 err_msg());
		record_remember(s, record, len);
		return;
	}
	log_peer_change(s, &change);
	schema_applied(s, &change, record, len, false);
	if (s->exec)
		cql_exec_schema_changed(s->exec, &change);
	broadcast(s, "SCHEMA_CHANGE", schema_event, &change);
}

int cql_service_records(const struct cql_service *s, struct buf *out)
{
	return buf_append(
		out, s->records.data ? s->records.data : (const uint8_t *)"",
		s->records.len);
}

/* ---- lifecycle ----------------------------------------------------------- */

/* Every user table the replayed schema knows goes into the engine before it
 * replays the commitlog. */
static int register_tables(struct cql_service *s)
{
	for (size_t i = 0; i < cql_schema_keyspace_count(s->schema); i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(s->schema, i);
		if (!cql_keyspace_is_stored(k))
			continue;
		for (size_t j = 0; j < cql_keyspace_table_count(k); j++)
			if (storage_table_add(
				    s->db,
				    cql_table_meta(cql_keyspace_table_at(k, j)),
				    cql_keyspace_meta(k)->durable_writes) != 0)
				return -1;
	}
	return 0;
}

static int open_storage(struct cql_service *s, const struct conf *c)
{
	struct storage_options o;
	storage_options_from_conf(&o, c, s->env);
	o.post = cql_storage_post;
	o.post_arg = s->q;
	s->db = storage_new(&o);
	if (!s->db)
		return -1;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/schema.log",
		 c->saved_caches_directory);
	s->log = cql_schema_log_open(s->env, path);
	if (!s->log)
		return -1;
	long n = cql_schema_log_replay(s->log, s->schema, replayed_record, s);
	if (n < 0)
		return -1;
	if (n > 0)
		LOG_INFO("schema: replayed %ld statements from %s", n, path);
	if (register_tables(s) != 0 || node_cas_table_add(s->db) != 0 ||
	    storage_start(s->db) != 0)
		return -1;
	/* SSTables of expired data are dropped when they expire, not at the
	 * next flush (the timer is this loop's) */
	if (storage_droppable_watch_start(s->db) != 0)
		LOG_WARN("no wake-up of compaction for expired SSTables: %s",
			 err_msg());
	return 0;
}

struct ssl_ctx_st *
cql_service_tls_context(const struct conf_client_encryption *ce,
			const char *section)
{
	struct cql_tls_config tc = {
		.keystore = ce->keystore,
		.keystore_password = ce->keystore_password,
		.pkcs12 = ce->store_type == CONF_STORE_PKCS12,
		.truststore = ce->truststore,
		.truststore_password = ce->truststore_password,
		.require_client_auth = ce->require_client_auth,
		.protocols = (const char *const *)ce->accepted_protocols.items,
		.protocol_count = ce->accepted_protocols.count,
		.cipher_suites = (const char *const *)ce->cipher_suites.items,
		.cipher_count = ce->cipher_suites.count,
	};
	struct ssl_ctx_st *ctx = cql_tls_context_new(&tc);
	if (!ctx) {
		char why[512];
		snprintf(why, sizeof(why), "%s", err_msg());
		err_set(err_code(), "%s: %s", section, why);
	}
	return ctx;
}

void cql_service_set_tls(struct cql_service *s, struct ssl_ctx_st *ctx)
{
	cql_tls_context_free(s->tls); /* connections hold their own ref */
	s->tls = ctx;
	if (s->server)
		cql_server_set_tls(s->server, ctx);
}

/* client_encryption_options: the TLS context, or none; made first
 * thing, so broken options stop the node before it opens anything. */
static int load_tls(struct cql_service *s, const struct conf *c)
{
	const struct conf_client_encryption *ce = &c->client_encryption;
	if (!ce->enabled)
		return 0;
	s->tls = cql_service_tls_context(ce, "client_encryption_options");
	if (!s->tls)
		return -1;
	LOG_INFO("clients speak TLS%s (%s)",
		 ce->optional ? " or plain CQL" : "", ce->keystore);
	return 0;
}

static int open_server(struct cql_service *s, const struct conf *c,
		       struct event_base *base)
{
	struct cql_auth_config ac = {
		.password_authenticator =
			c->authenticator == CONF_AUTH_PASSWORD,
		.bcrypt_rounds = (int)c->auth_bcrypt_gensalt_log2_rounds,
		.superuser_setup_delay_ms = c->superuser_setup_delay_ms,
		.cassandra_authorizer = c->authorizer == CONF_AUTHZ_CASSANDRA,
		.permissions_validity_ms = c->permissions_validity_ms,
		.permissions_update_interval_ms =
			c->permissions_update_interval_ms,
		.roles_validity_ms = c->roles_validity_ms,
		.credentials_validity_ms = c->credentials_validity_ms,
		.credentials_update_interval_ms =
			c->credentials_update_interval_ms,
		.credentials_cache_max_entries =
			(uint64_t)c->credentials_cache_max_entries,
		.roles_update_interval_ms = c->roles_update_interval_ms,
		.permissions_cache_max_entries =
			(uint64_t)c->permissions_cache_max_entries,
		.query_timeout_ms =
			2 * (c->read_request_timeout_ms >
					     c->range_request_timeout_ms
				     ? c->read_request_timeout_ms
				     : c->range_request_timeout_ms) +
			1000,
	};
	s->auth = cql_auth_new(base, s->q, &ac);
	if (!s->auth)
		return -1;
	struct cql_exec_hooks hooks = {
		.node_info = hook_node_info,
		.data = data_hook,
		.schema_changed = hook_schema_changed,
		.new_table_id = hook_new_table_id,
		.now_us = hook_now_us,
		.role = hook_role,
		.views = hook_views,
		.arg = s,
	};
	if (c->authorizer == CONF_AUTHZ_CASSANDRA) {
		hooks.authorize = hook_authorize;
		hooks.schema_applied = hook_schema_applied;
	}
	s->exec = cql_exec_new(s->schema, &hooks);
	if (!s->exec)
		return -1;
	cql_auth_set_exec(s->auth, s->exec);
	cql_auth_set_schema(s->auth, s->schema);
	struct cql_server_config cfg;
	cql_server_config_defaults(&cfg);
	cfg.address = c->rpc_address;
	cfg.max_frame_size = (uint32_t)c->native_transport_max_frame_size;
	cfg.max_connections =
		(int)c->native_transport_max_concurrent_connections;
	cfg.idle_timeout_ms = c->native_transport_idle_timeout_ms;
	cfg.cql_version = CASSINI_CQL_VERSION;
	cfg.authenticator = cql_auth_authenticator(s->auth);
	cfg.tls = s->tls;
	cfg.tls_optional = c->client_encryption.optional;
	/* in front of the executor: each user's permissions cached */
	struct cql_executor auth_ex = {.execute = cql_auth_execute,
				       .arg = s->auth};
	/* and in front of that, the trace sessions */
	struct cql_executor writer = {.execute = cql_exec_execute,
				      .arg = s->exec};
	if (!s->trace)
		s->trace = node_trace_new(s->env, &writer, &auth_ex,
					  &c->broadcast_address);
	if (!s->trace)
		return -1;
	cql_data_set_tracer(s->data, s->trace);
	struct cql_executor ex = node_trace_executor(s->trace);
	s->server = cql_server_new(base, &cfg, &ex);
	if (!s->server)
		return -1;
	cql_exec_set_server(s->exec, s->server);
	cql_auth_start(s->auth);
	return 0;
}

static struct ring *data_ring(void *arg)
{
	struct cql_service *s = arg;
	return s->ring_fn(s->node_arg);
}

static bool data_alive(void *arg, const struct inet_addr *ep)
{
	struct cql_service *s = arg;
	return s->alive_fn(s->node_arg, ep);
}

struct cql_service *cql_service_new(const struct conf *c,
				    struct event_base *base, struct env *env,
				    const struct cql_service_hooks *h,
				    void *arg)
{
	struct cql_service *s = calloc(1, sizeof(*s));
	if (!s) {
		err_set(ERR_NOMEM, "cannot allocate the CQL service");
		return NULL;
	}
	s->env = env;
	s->node_info = h->node_info;
	s->ring_fn = h->ring;
	s->alive_fn = h->is_alive;
	s->pools_fn = h->thread_pools;
	s->view_rows_fn = h->view_rows;
	s->node_arg = arg;
	if (load_tls(s, c) != 0) {
		free(s);
		return NULL;
	}
	struct repl_options ro;
	repl_options_default(&ro);
	ro.self = c->broadcast_address;
	ro.read_timeout_ms = c->read_request_timeout_ms;
	ro.write_timeout_ms = c->write_request_timeout_ms;
	ro.range_timeout_ms = c->range_request_timeout_ms;
	ro.truncate_timeout_ms = c->truncate_request_timeout_ms;
	ro.tombstone_warn_threshold = (uint64_t)c->tombstone_warn_threshold;
	ro.rfp_warn_rows = (uint64_t)c->rfp_cached_rows_warn_threshold;
	ro.rfp_fail_rows = (uint64_t)c->rfp_cached_rows_fail_threshold;
	ro.cas_contention_timeout_ms = c->cas_contention_timeout_ms;
	char batchlog[PATH_MAX];
	snprintf(batchlog, sizeof(batchlog), "%s/batchlog",
		 c->data_file_directories.items[0]);
	ro.batchlog_dir = batchlog;
	char ballots[PATH_MAX];
	snprintf(ballots, sizeof(ballots), "%s/paxos_ballot_lease",
		 c->data_file_directories.items[0]);
	ro.paxos_ballot_file = ballots;
	struct cql_data_hooks dh = {data_ring, data_alive, s};
	struct hints_options ho;
	hints_options_from_conf(&ho, c, env);
	s->sync_work.run = sync_run;
	if (!(s->q = loopq_new(base)) ||
	    !(s->syncer = workers_new(1, "schemasync")) ||
	    !(s->schema = cql_schema_new()) || open_storage(s, c) != 0 ||
	    !(s->data = cql_data_new(s->db, env, s->q, s->schema, &ro, &ho,
				     &dh))) {
		err_prefix("cannot start the CQL service");
		cql_service_delete(s);
		return NULL;
	}
	cql_data_set_batch_limits(
		s->data, c->batch_size_warn_threshold,
		c->batch_size_fail_threshold,
		c->unlogged_batch_across_partitions_warn_threshold);
	cql_data_set_tombstone_failure_threshold(
		s->data, c->tombstone_failure_threshold);
	if (cql_data_set_slow_query_timeout(
		    s->data, c->slow_query_log_timeout_ms * 1000) != 0) {
		cql_service_delete(s);
		return NULL;
	}
	s->conf = c;
	s->base = base;
	return s;
}

int cql_service_serve(struct cql_service *s)
{
	if (s->server && cql_server_listening(s->server))
		return 0;
	if (s->server) {
		if (cql_server_listen(s->server) != 0)
			return err_prefix("cannot listen for CQL clients");
		char addr[INET_ADDR_STRLEN];
		LOG_INFO("CQL clients on %s again",
			 inet_addr_format(&s->conf->rpc_address, addr,
					  sizeof(addr)));
		return 0;
	}
	if (open_server(s, s->conf, s->base) != 0)
		return err_prefix("cannot listen for CQL clients");
	char addr[INET_ADDR_STRLEN];
	LOG_INFO("CQL clients on %s (protocol v3/v4, CQL %s, %s, %s)",
		 inet_addr_format(&s->conf->rpc_address, addr, sizeof(addr)),
		 CASSINI_CQL_VERSION,
		 s->conf->authenticator == CONF_AUTH_PASSWORD
			 ? "PasswordAuthenticator"
			 : "AllowAllAuthenticator",
		 s->conf->authorizer == CONF_AUTHZ_CASSANDRA
			 ? "CassandraAuthorizer"
			 : "AllowAllAuthorizer");
	return 0;
}

uint64_t cql_service_load_bytes(const struct cql_service *s)
{
	struct storage_stats st;
	return storage_stats(s->db, NULL, &st) == 0 ? st.sstable_bytes : 0;
}

const struct cql_schema *cql_service_schema(const struct cql_service *s)
{
	return s->schema;
}

bool cql_service_serving(const struct cql_service *s)
{
	return s->server && cql_server_listening(s->server);
}

bool cql_service_started(const struct cql_service *s)
{
	return s->server != NULL;
}

void cql_service_stop_serving(struct cql_service *s)
{
	if (s->server)
		cql_server_stop(s->server);
}

struct cql_flush {
	struct work work;
	struct workers *workers;
	struct loopq_item done_item;
	struct storage *db;
	struct loopq *q;
	size_t n;
	enum cql_maintenance what;
	/* listsnapshots': the table's while its snapshots are listed */
	const struct storage_table_meta *meta;
	int status;
	char msg[256];
	cql_service_done_fn done;
	void *arg;
	/* cleanup: table i keeps ranges[off[i] .. off[i + 1]) */
	size_t *off;
	struct storage_token_range *ranges;
	char tag[208];  /* snapshot's; clear's ("": every one) */
	unsigned flags; /* CQL_MAINTENANCE_GC_CELL, ... */
	struct buf out; /* listsnapshots' lines, built on the worker */
	uint8_t ids[][16];
};

static void snapshot_line(void *arg, const struct storage_snapshot_info *i)
{
	struct cql_flush *j = arg;
	const struct storage_table_meta *m = j->meta;
	char line[512];
	int n = snprintf(line, sizeof(line),
			 "%-20s %-20s %-24s %12" PRIu64 " %12" PRIu64 "\n",
			 i->tag, m->keyspace, m->name, i->true_bytes, i->bytes);
	if (n > 0)
		buf_append(&j->out, line,
			   (size_t)n < sizeof(line) ? (size_t)n
						    : sizeof(line) - 1);
}

/* Table i's keyspace joins j->out (once): the verify or scrub that
 * aborted on it. */
static int note_keyspace(struct cql_flush *j, size_t i)
{
	const struct storage_table_meta *m =
		storage_table_meta_acquire(j->db, j->ids[i]);
	char line[256];
	int len = m ? snprintf(line, sizeof(line), "%s\n", m->keyspace) : 0;
	storage_table_meta_unref(m);
	if (len <= 0 || (size_t)len >= sizeof(line))
		return 0;
	/* already named? (lines of j->out, not NUL-terminated) */
	for (size_t at = 0; at < j->out.len;) {
		const char *p = (const char *)j->out.data + at;
		const char *nl = memchr(p, '\n', j->out.len - at);
		size_t l = nl ? (size_t)(nl - p) + 1 : j->out.len - at;
		if (l == (size_t)len && memcmp(p, line, l) == 0)
			return 0;
		at += l;
	}
	return buf_append(&j->out, line, (size_t)len);
}

/* Table i verified; a corrupt one's keyspace joins j->out. */
static int verify_table(struct cql_flush *j, size_t i)
{
	size_t n, bad;
	if (storage_verify(j->db, j->ids[i], &n, &bad) == 0)
		return 0;
	if (err_code() != ERR_CORRUPT)
		return -1;
	err_clear();
	return note_keyspace(j, i);
}

/* Table i scrubbed after its snapshot (the tag's, unless ""): the
 * partitions it dropped are in the log (Cassandra's Scrubber lines); one
 * that aborted (a counter table's corrupt partition without
 * --skip-corrupted) has its keyspace in j->out. */
static int scrub_table(struct cql_flush *j, size_t i)
{
	if (j->tag[0] && storage_snapshot(j->db, j->ids[i], j->tag) != 0)
		return -1;
	uint64_t kept, dropped;
	if (storage_scrub(j->db, j->ids[i],
			  j->flags & CQL_MAINTENANCE_SKIP_CORRUPTED, &kept,
			  &dropped) == 0)
		return 0;
	if (err_code() != ERR_CORRUPT)
		return -1;
	LOG_WARN("scrub aborted: %s", err_msg());
	err_clear();
	return note_keyspace(j, i);
}

static int maintain(struct cql_flush *j, size_t i)
{
	switch (j->what) {
	case CQL_MAINTENANCE_COMPACT:
		return storage_compact(j->db, j->ids[i], true);
	case CQL_MAINTENANCE_CLEANUP: {
		uint64_t dropped = 0;
		int rc =
			storage_cleanup(j->db, j->ids[i], j->ranges + j->off[i],
					j->off[i + 1] - j->off[i], &dropped);
		const struct storage_table_meta *m =
			storage_table_meta_acquire(j->db, j->ids[i]);
		if (rc == 0 && m)
			LOG_INFO("cleanup of %s.%s: %" PRIu64 " partitions "
				 "this node does not replicate dropped",
				 m->keyspace, m->name, dropped);
		storage_table_meta_unref(m);
		return rc;
	}
	case CQL_MAINTENANCE_SNAPSHOT:
		return storage_snapshot(j->db, j->ids[i], j->tag);
	case CQL_MAINTENANCE_CLEAR_SNAPSHOT:
		return storage_snapshot_clear(j->db, j->ids[i],
					      j->tag[0] ? j->tag : NULL);
	case CQL_MAINTENANCE_LIST_SNAPSHOTS: {
		j->meta = storage_table_meta_acquire(j->db, j->ids[i]);
		int rc = j->meta ? storage_snapshot_list(j->db, j->ids[i],
							 snapshot_line, j)
				 : 0;
		storage_table_meta_unref(j->meta);
		j->meta = NULL;
		return rc;
	}
	case CQL_MAINTENANCE_VERIFY:
		return verify_table(j, i);
	case CQL_MAINTENANCE_GARBAGECOLLECT:
		return storage_garbagecollect(
			j->db, j->ids[i], j->flags & CQL_MAINTENANCE_GC_CELL);
	case CQL_MAINTENANCE_SCRUB:
		return scrub_table(j, i);
	case CQL_MAINTENANCE_FLUSH:
		break;
	}
	return storage_flush(j->db, j->n ? j->ids[i] : NULL);
}

static void flush_job_run(struct work *w)
{
	struct cql_flush *j = (struct cql_flush *)w;
	for (size_t i = 0; i < (j->n ? j->n : 1) && j->status == 0; i++)
		j->status = maintain(j, i);
	if (j->status)
		snprintf(j->msg, sizeof(j->msg), "%s", err_msg());
	loopq_post(j->q, &j->done_item);
}

static void flush_job_done(struct loopq_item *it)
{
	struct cql_flush *j =
		(struct cql_flush *)((char *)it -
				     offsetof(struct cql_flush, done_item));
	buf_put_u8(&j->out, 0);
	j->done(j->arg, j->status,
		j->status ? j->msg : (const char *)j->out.data);
	buf_free(&j->out);
	free(j);
}

struct cql_flush *
cql_service_flush_prepare(struct cql_service *s, const uint8_t (*table_ids)[16],
			  size_t n, enum cql_maintenance what,
			  const struct storage_token_range *ranges,
			  const size_t *range_off)
{
	if (!s->maintenance &&
	    !(s->maintenance = workers_new_background(1, "maintenance")))
		return NULL;
	bool cleanup = what == CQL_MAINTENANCE_CLEANUP;
	size_t nr = cleanup && n ? range_off[n] : 0,
	       head = sizeof(struct cql_flush) + n * 16,
	       offs = cleanup ? (n + 1) * sizeof(size_t) : 0;
	head = (head + 7) & ~(size_t)7; /* the offsets and ranges align */
	struct cql_flush *j = calloc(
		1, head + offs + nr * sizeof(struct storage_token_range));
	if (!j) {
		err_set(ERR_NOMEM, "flush");
		return NULL;
	}
	j->workers = s->maintenance;
	j->db = s->db;
	j->q = s->q;
	j->n = n;
	j->what = what;
	if (n)
		memcpy(j->ids, table_ids, n * sizeof(j->ids[0]));
	if (cleanup) {
		j->off = (size_t *)((char *)j + head);
		j->ranges =
			(struct storage_token_range *)((char *)j + head + offs);
		memcpy(j->off, range_off, offs);
		if (nr)
			memcpy(j->ranges, ranges, nr * sizeof(*ranges));
	}
	j->work.run = flush_job_run;
	j->done_item.fn = flush_job_done;
	return j;
}

struct workers *cql_service_maintenance(struct cql_service *s)
{
	if (!s->maintenance)
		s->maintenance = workers_new_background(1, "maintenance");
	return s->maintenance;
}

void cql_service_flush_set_flags(struct cql_flush *j, unsigned flags)
{
	j->flags = flags;
}

void cql_service_flush_set_tag(struct cql_flush *j, const char *tag)
{
	snprintf(j->tag, sizeof(j->tag), "%s", tag);
}

void cql_service_flush_start(struct cql_flush *j, cql_service_done_fn done,
			     void *arg)
{
	j->done = done;
	j->arg = arg;
	workers_submit(j->workers, &j->work);
}

void cql_service_delete(struct cql_service *s)
{
	if (!s)
		return;
	/* Order: no new requests; queued reads finish; their completions run
	 * while the engine their results came from is alive; the engine
	 * stops (its last write acks are queued); those run; then free. */
	cql_server_delete(s->server);
	if (s->data)
		cql_data_set_tracer(s->data, NULL);
	node_trace_delete(s->trace);
	cql_tls_context_free(s->tls);
	cql_auth_delete(s->auth); /* its workers use the executor */
	cql_exec_delete(s->exec);
	if (s->data)
		cql_data_stop(s->data);
	workers_delete(s->maintenance); /* finishes a flush under way */
	if (s->q)
		loopq_run_pending(s->q);
	if (s->db)
		storage_delete(s->db);
	if (s->q)
		loopq_delete(s->q);
	cql_data_delete(s->data);
	workers_delete(s->syncer);
	cql_schema_log_close(s->log);
	cql_schema_delete(s->schema);
	buf_free(&s->records);
	free(s->hashes);
	free(s->settings);
	free(s->setting_text);
	free(s->clients);
	free(s);
}

int cql_service_set_trace_probability(struct cql_service *s, double p)
{
	if (!s->trace)
		return err_set(ERR_INVALID, "the CQL server is not started");
	return node_trace_set_probability(s->trace, p);
}

double cql_service_trace_probability(const struct cql_service *s)
{
	return s->trace ? node_trace_probability(s->trace) : 0;
}

void cql_service_on_schema_change(struct cql_service *s,
				  cql_service_change_fn fn, void *arg)
{
	s->on_change = fn;
	s->on_change_arg = arg;
}

void cql_service_schema_version(const struct cql_service *s, uint8_t out[16])
{
	cql_schema_version(s->schema, out);
}

void cql_service_receive(struct cql_service *s, const struct inet_addr *from,
			 uint32_t verb, const uint8_t *msg, size_t len)
{
	cql_data_receive(s->data, from, verb, msg, len);
}

void cql_service_server_stats(const struct cql_service *s,
			      struct cql_server_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (s->server)
		cql_server_stats(s->server, out);
}

void cql_service_data_stats(const struct cql_service *s, struct repl_stats *out)
{
	cql_data_stats(s->data, out);
}

bool cql_service_table_latency(const struct cql_service *s,
			       const uint8_t id[16],
			       struct repl_table_latency *out)
{
	return cql_data_table_latency(s->data, id, out);
}

void cql_service_peer_event(struct cql_service *s, const uint8_t host_id[16],
			    int ev)
{
	cql_data_peer_event(s->data, host_id, (enum cql_data_peer_event)ev);
}

struct cql_auth *cql_service_auth(struct cql_service *s)
{
	return s->auth;
}

struct hints *cql_service_hints(struct cql_service *s)
{
	return cql_data_hints(s->data);
}

int cql_service_hand_over_hints(struct cql_service *s,
				const struct inet_addr *to,
				void (*done)(void *arg, bool ok), void *arg)
{
	return cql_data_hand_over_hints(s->data, to, done, arg);
}

struct node_cas *cql_service_cas(struct cql_service *s)
{
	return cql_data_cas(s->data);
}

void cql_service_hand_over_cancel(struct cql_service *s)
{
	cql_data_hand_over_cancel(s->data);
}

struct storage *cql_service_storage(const struct cql_service *s)
{
	return s->db;
}

struct loopq *cql_service_loopq(const struct cql_service *s)
{
	return s->q;
}
