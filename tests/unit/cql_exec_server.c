/*
 * The CQL server with the real executor and schema registry, and a fixed
 * one-node view of the cluster, for driver tests (test_cql_exec_driver.py):
 * Cluster.connect(), system tables, DDL, prepared statements, errors.
 * With `--data DIR` user tables are served by the local data path over a
 * storage engine in DIR. Prints "PORT <n>" and runs until SIGTERM.
 */
#include "client/data_local.h"
#include "client/executor.h"
#include "common/env_real.h"
#include "common/err.h"
#include "common/loopq.h"

#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static struct event_base *base;
static int ids;
static struct storage *db;
static struct cql_schema *schema;

static void node_info(void *arg, struct cql_node_info *out)
{
	static const int64_t tokens[] = {-6148914691236517206LL, 0,
					 6148914691236517205LL};
	(void)arg;
	memset(out, 0, sizeof(*out));
	out->cluster_name = "Driver Test";
	out->dc = "dc1";
	out->rack = "rack1";
	for (int i = 0; i < 16; i++)
		out->host_id[i] = (uint8_t)(0x10 + i);
	out->host_id[6] = 0x40 | (out->host_id[6] & 0x0f);
	inet_addr_parse("127.0.0.1:7000", 0, &out->listen_address);
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

/* New tables get a home in the engine. */
static void schema_changed(void *arg, const struct cql_schema_event *e)
{
	const struct cql_schema_change *c = e->change;
	(void)arg;
	if (!db || strcmp(c->change, "CREATED") != 0 ||
	    strcmp(c->target, "TABLE") != 0)
		return;
	const struct cql_table *t =
		cql_schema_table(schema, c->keyspace, c->name);
	const struct cql_keyspace *k = cql_schema_keyspace(schema, c->keyspace);
	if (storage_table_add(db, cql_table_meta(t),
			      cql_keyspace_meta(k)->durable_writes) != 0)
		fprintf(stderr, "storage_table_add: %s\n", err_msg());
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
	struct loopq *q = loopq_new(base);
	struct cql_local *local = NULL;
	char data[1024], log[1024];
	if (argc == 3 && strcmp(argv[1], "--data") == 0) {
		struct storage_options o;
		snprintf(data, sizeof(data), "%s/data", argv[2]);
		snprintf(log, sizeof(log), "%s/commitlog", argv[2]);
		storage_options_default(&o);
		o.env = env;
		o.data_dir = data;
		o.commitlog_dir = log;
		o.post = cql_storage_post;
		o.post_arg = q;
		db = storage_new(&o);
		if (!db || storage_start(db) != 0 ||
		    !(local = cql_local_new(db, env, q, 2))) {
			fprintf(stderr, "storage: %s\n", err_msg());
			return 1;
		}
	}
	struct cql_exec_hooks hooks = {.node_info = node_info,
				       .new_table_id = new_table_id,
				       .schema_changed = schema_changed,
				       .data = local ? cql_local_data : NULL,
				       .arg = local};
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
	if (local)
		cql_local_stop(local);
	loopq_run_pending(q);
	if (db)
		storage_delete(db);
	loopq_delete(q);
	cql_local_delete(local);
	env_real_delete(env);
	cql_schema_delete(schema);
	event_base_free(base);
	return 0;
}
