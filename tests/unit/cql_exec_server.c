/*
 * The CQL server with the real executor and schema registry, and a fixed
 * one-node view of the cluster, for driver tests (test_cql_exec_driver.py):
 * Cluster.connect(), system tables, DDL, prepared statements, errors.
 * With `--data DIR` user tables are served by the node's data path
 * (node/cql_data.c: the coordinator over a one-node ring) over a storage
 * engine in DIR. Prints "PORT <n>" and runs until SIGTERM.
 */
#include "client/exec/data_path.h"
#include "client/exec/executor.h"
#include "common/env_real.h"
#include "common/err.h"
#include "common/loopq.h"
#include "node/cql_data.h"
#include "ring/ring.h"

#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static struct event_base *base;
static int ids;
static struct storage *db;
static struct cql_schema *schema;
static struct ring *ring; /* this node alone, with node_info's tokens */
static struct env *the_env;

static const int64_t tokens[] = {-6148914691236517206LL, 0,
				 6148914691236517205LL};

static void node_info(void *arg, struct cql_node_info *out)
{
	(void)arg;
	memset(out, 0, sizeof(*out));
	out->cluster_name = "Driver Test";
	out->dc = "dc1";
	out->rack = "rack1";
	for (int i = 0; i < 16; i++)
		out->host_id[i] = (uint8_t)(0x10 + i);
	out->host_id[6] = 0x40 | (out->host_id[6] & 0x0f);
	inet_addr_parse("127.0.0.1:7000", 0, &out->listen_address);
	out->broadcast_address = out->listen_address;
	out->rpc_address = out->listen_address;
	out->gossip_generation = 1700000000;
	out->tokens = tokens;
	out->token_count = 3;
}

static void new_table_id(void *arg, uint8_t id[16])
{
	(void)arg;
	memset(id, 0, 16);
	be32_store(id + 12, (uint32_t)++ids);
	id[6] = 0x40;
	id[8] = 0x80;
}

/* New tables get a home in the engine; altered ones a new version;
 * dropped ones leave it. */
static void schema_changed(void *arg, const struct cql_schema_event *e)
{
	const struct cql_schema_change *c = e->change;
	(void)arg;
	for (size_t i = 0; db && i < c->dropped_count; i++)
		storage_table_drop(db, c->dropped[i]);
	if (!db || strcmp(c->target, "TABLE") != 0 ||
	    strcmp(c->change, "DROPPED") == 0)
		return;
	const struct cql_table *t =
		cql_schema_table(schema, c->keyspace, c->name);
	const struct cql_keyspace *k = cql_schema_keyspace(schema, c->keyspace);
	if (strcmp(c->change, "CREATED") == 0 &&
	    storage_table_add(db, cql_table_meta(t),
			      cql_keyspace_meta(k)->durable_writes) != 0)
		fprintf(stderr, "storage_table_add: %s\n", err_msg());
	if (strcmp(c->change, "UPDATED") == 0 &&
	    storage_table_update(db, cql_table_meta(t)) != 0)
		fprintf(stderr, "storage_table_update: %s\n", err_msg());
}

static int64_t now_us(void *arg)
{
	(void)arg;
	return env_wall_us(the_env);
}

static struct ring *the_ring(void *arg)
{
	(void)arg;
	return ring;
}

static bool alive(void *arg, const struct inet_addr *ep)
{
	(void)arg;
	(void)ep;
	return true;
}

static struct ring *one_node_ring(void)
{
	struct cql_node_info n;
	node_info(NULL, &n);
	struct ring_endpoint ep = {.addr = n.listen_address,
				   .dc = n.dc,
				   .rack = n.rack,
				   .status = RING_STATUS_NORMAL,
				   .tokens = tokens,
				   .num_tokens = 3};
	memcpy(ep.host_id, n.host_id, 16);
	struct ring_builder *b = ring_builder_new();
	struct ring *r = NULL;
	if (b && ring_builder_set_endpoint(b, &ep) == 0) {
		ring_builder_set_local(b, &n.listen_address);
		r = ring_builder_build(b);
	}
	ring_builder_delete(b);
	return r;
}

static void on_term(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	event_base_loopexit(base, NULL);
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	schema = cql_schema_new();
	struct env *env = env_real_new(base);
	the_env = env;
	struct loopq *q = loopq_new(base);
	struct cql_data *data = NULL;
	char dir_data[1024], log[1024];
	if (argc == 3 && strcmp(argv[1], "--data") == 0) {
		struct storage_options o;
		snprintf(dir_data, sizeof(dir_data), "%s/data", argv[2]);
		snprintf(log, sizeof(log), "%s/commitlog", argv[2]);
		storage_options_default(&o);
		o.env = env;
		o.data_dir = dir_data;
		o.commitlog_dir = log;
		o.post = cql_storage_post;
		o.post_arg = q;
		db = storage_new(&o);
		struct repl_options ro;
		repl_options_default(&ro);
		struct cql_data_hooks dh = {the_ring, alive, NULL};
		if (!db || storage_start(db) != 0 ||
		    !(ring = one_node_ring()) ||
		    !(data = cql_data_new(db, env, q, schema, &ro, NULL,
					  &dh))) {
			fprintf(stderr, "storage: %s\n", err_msg());
			return 1;
		}
	}
	struct cql_exec_hooks hooks = {.node_info = node_info,
				       .new_table_id = new_table_id,
				       .schema_changed = schema_changed,
				       .now_us = now_us,
				       .data = data ? cql_data_request : NULL,
				       .arg = data};
	struct cql_exec *exec = cql_exec_new(schema, &hooks);
	struct cql_server_config cfg;
	cql_server_config_defaults(&cfg);
	inet_addr_parse("127.0.0.1:0", 0, &cfg.address);
	struct cql_executor ex = {.execute = cql_exec_execute, .arg = exec};
	struct cql_server *server = cql_server_new(base, &cfg, &ex);
	if (!schema || !exec || !server) {
		fprintf(stderr, "%s\n", err_msg());
		return 1;
	}
	cql_exec_set_server(exec, server);
	printf("PORT %u\n", cql_server_address(server).port);
	fflush(stdout);
	struct event *term = evsignal_new(base, SIGTERM, on_term, NULL);
	evsignal_add(term, NULL);
	event_base_dispatch(base);
	event_free(term);
	cql_server_delete(server);
	cql_exec_delete(exec);
	if (data)
		cql_data_stop(data);
	loopq_run_pending(q);
	if (db)
		storage_delete(db);
	loopq_delete(q);
	cql_data_delete(data);
	if (ring)
		ring_unref(ring);
	env_real_delete(env);
	cql_schema_delete(schema);
	event_base_free(base);
	return 0;
}
