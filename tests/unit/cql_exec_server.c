/*
 * The CQL server with the real executor and schema registry, and a fixed
 * one-node view of the cluster, for driver tests (test_cql_exec_driver.py):
 * Cluster.connect(), system tables, DDL, prepared statements, errors.
 * Prints "PORT <n>" and runs until SIGTERM.
 */
#include "client/executor.h"
#include "common/err.h"

#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static struct event_base *base;
static int ids;

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

static void on_term(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	event_base_loopexit(base, NULL);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	struct cql_schema *schema = cql_schema_new();
	struct cql_exec_hooks hooks = {.node_info = node_info,
				       .new_table_id = new_table_id};
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
	cql_schema_delete(schema);
	event_base_free(base);
	return 0;
}
