/*
 * Blocking helpers over the asynchronous client: each submits one request
 * and runs the event loop until its callback has run. For tools that do one
 * thing at a time (schema setup, checks); never call them from a callback.
 */
#include "client/driver/cql_client_internal.h"

#include "common/err.h"

#include <event2/event.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

struct waiter {
	struct cql_client *client;
	bool done;
	int rc;
	enum err_code code;
	char message[256];
	struct cql_client_result *out;
};

void cql_client_result_free(struct cql_client_result *r)
{
	buf_free(&r->body);
	arena_destroy(&r->arena);
	memset(r, 0, sizeof(*r));
}

static void run_until(struct cql_client *c, struct waiter *w)
{
	while (!w->done)
		event_base_loop(cql_client_base(c), EVLOOP_ONCE);
	if (w->rc != 0)
		err_set(w->code, "%s", w->message);
}

/* Keeps the body and decodes it again into the result's own arena. */
static void keep(struct waiter *w, enum cql_client_status status,
		 const struct cql_client_response *resp, const char *message)
{
	struct cql_client_result *out = w->out;
	if (!out)
		return;
	cql_client_result_free(out);
	arena_create(&out->arena, 0);
	out->status = status;
	if (status != CQL_CLIENT_OK) {
		snprintf(out->message, sizeof(out->message), "%s", message);
		return;
	}
	struct cql_client_frame f = cql_client_current_frame(w->client);
	if (buf_append(&out->body, f.body.ptr, f.body.len) != 0 ||
	    cql_client_response_decode(f.opcode, f.flags, out->body.data,
				       out->body.len, &out->arena,
				       &out->resp) != 0) {
		out->status = CQL_CLIENT_BAD_RESPONSE;
		snprintf(out->message, sizeof(out->message), "%s", err_msg());
		return;
	}
	if (resp->opcode == CQL_OP_ERROR)
		snprintf(out->message, sizeof(out->message), "%.*s",
			 (int)resp->error_message.len,
			 (const char *)resp->error_message.ptr);
}

static void settle(struct waiter *w, enum cql_client_status status,
		   const struct cql_client_response *resp, const char *message)
{
	w->done = true;
	w->rc = 0;
	if (status != CQL_CLIENT_OK) {
		w->rc = -1;
		w->code = status == CQL_CLIENT_TIMEOUT        ? ERR_TIMEOUT
			  : status == CQL_CLIENT_BAD_RESPONSE ? ERR_PROTOCOL
							      : ERR_IO;
		snprintf(w->message, sizeof(w->message), "%s: %s",
			 cql_client_status_name(status),
			 message ? message : "");
	} else if (resp && resp->opcode == CQL_OP_ERROR) {
		w->rc = -1;
		w->code = ERR_INVALID;
		snprintf(w->message, sizeof(w->message), "%s: %.*s",
			 cql_client_error_name(resp->error_code),
			 (int)resp->error_message.len,
			 (const char *)resp->error_message.ptr);
	}
}

static void on_response(void *arg, enum cql_client_status status,
			const struct cql_client_response *resp,
			const char *message)
{
	struct waiter *w = arg;
	keep(w, status, resp, message);
	settle(w, status, resp, message);
}

static void on_connected(void *arg, int status, const char *message)
{
	struct waiter *w = arg;
	w->done = true;
	w->rc = status;
	w->code = ERR_IO;
	if (message)
		snprintf(w->message, sizeof(w->message), "%s", message);
}

int cql_client_connect_sync(struct cql_client *c)
{
	struct waiter w = {.client = c};
	cql_client_connect(c, on_connected, &w);
	run_until(c, &w);
	return w.rc;
}

int cql_client_query_sync(struct cql_client *c, const char *query,
			  uint16_t consistency, struct cql_client_result *out)
{
	struct waiter w = {.client = c, .out = out};
	cql_client_query(c, query, consistency, NULL, 0, on_response, &w);
	run_until(c, &w);
	return w.rc;
}

static void on_prepared(void *arg, struct cql_client_prepared *stmt,
			enum cql_client_status status,
			const struct cql_client_response *resp,
			const char *message)
{
	struct waiter *w = arg;
	settle(w, status, resp, message);
	if (w->rc == 0 && !stmt) {
		w->rc = -1;
		w->code = ERR_PROTOCOL;
		snprintf(w->message, sizeof(w->message), "%s",
			 message ? message : "not prepared");
	}
	if (w->out)
		w->out->prepared = stmt;
}

struct cql_client_prepared *cql_client_prepare_sync(struct cql_client *c,
						    const char *query)
{
	struct cql_client_result r = {0};
	struct waiter w = {.client = c, .out = &r};
	cql_client_prepare(c, query, on_prepared, &w);
	run_until(c, &w);
	return w.rc == 0 ? r.prepared : NULL;
}

int cql_client_execute_sync(struct cql_client *c,
			    const struct cql_client_prepared *p,
			    const struct cql_value *values, uint16_t nvalues,
			    uint16_t consistency, struct cql_client_result *out)
{
	struct waiter w = {.client = c, .out = out};
	cql_client_execute(c, p, values, nvalues, consistency, on_response, &w);
	run_until(c, &w);
	return w.rc;
}

static int column_of(const struct cql_client_rows *rows, const char *name)
{
	size_t n = strlen(name);
	for (int32_t i = 0; rows->columns && i < rows->column_count; i++)
		if (rows->columns[i].name.len == n &&
		    memcmp(rows->columns[i].name.ptr, name, n) == 0)
			return i;
	return -1;
}

/* schema_version of every row of a rows result, compared with `first`;
 * peers (rows with an rpc_address) the client cannot reach are skipped, as
 * drivers skip nodes that are down. */
static int versions_agree(const struct cql_client *c,
			  const struct cql_client_response *r,
			  struct buf *first)
{
	const struct cql_client_rows *rows = &r->rows;
	int col = column_of(rows, "schema_version");
	int addr = column_of(rows, "rpc_address");
	if (r->kind != CQL_RESULT_ROWS || col < 0)
		return 0;
	for (int32_t i = 0; i < rows->row_count; i++) {
		const struct cql_value *row =
			&rows->values[(size_t)i * (size_t)rows->column_count];
		const struct cql_value *v = &row[col];
		if (addr >= 0 && row[addr].len > 0 &&
		    !cql_client_peer_up(c, row[addr].ptr,
					(size_t)row[addr].len))
			continue;
		if (v->len < 0)
			return 0;
		if (first->len == 0 && first->data == NULL) {
			if (buf_append(first, v->ptr, (size_t)v->len) != 0)
				return 0;
			continue;
		}
		if (first->len != (size_t)v->len ||
		    memcmp(first->data, v->ptr, first->len) != 0)
			return 0;
	}
	return 1;
}

static int query_host_sync(struct cql_client *c, int host, const char *query,
			   struct cql_client_result *out)
{
	struct waiter w = {.client = c, .out = out};
	cql_client_query_host(c, host, query, CQL_CL_ONE, on_response, &w);
	run_until(c, &w);
	return w.rc;
}

/* Whether node `host` (-1: any) reports the version in `first` (or sets
 * it) for itself and for every peer up. Both reads go through that node:
 * its peers table leaves itself out, so its own version is only in its
 * system.local. */
static bool host_agrees(struct cql_client *c, int host, struct buf *first)
{
	struct cql_client_result local = {0}, peers = {0};
	bool agree = query_host_sync(c, host,
				     "SELECT schema_version FROM system.local",
				     &local) == 0 &&
		     query_host_sync(c, host,
				     "SELECT rpc_address, schema_version FROM "
				     "system.peers",
				     &peers) == 0 &&
		     versions_agree(c, &local.resp, first) &&
		     versions_agree(c, &peers.resp, first);
	cql_client_result_free(&local);
	cql_client_result_free(&peers);
	return agree;
}

int cql_client_wait_schema_agreement(struct cql_client *c, uint64_t timeout_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t deadline = (uint64_t)ts.tv_sec * 1000 +
			    (uint64_t)ts.tv_nsec / 1000000 + timeout_ms;
	for (;;) {
		/* Every node the client uses, as each sees the cluster: a
		 * request right after may go to any of them, and a prepare
		 * goes to all. */
		struct buf first = {0};
		bool agree = true, asked = false;
		for (size_t i = 0; agree && i < c->nhosts; i++)
			if (cql_client_host_ready(c, i)) {
				asked = true;
				agree = host_agrees(c, (int)i, &first);
			}
		if (!asked)
			agree = host_agrees(c, -1, &first);
		buf_free(&first);
		if (agree)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t now = (uint64_t)ts.tv_sec * 1000 +
			       (uint64_t)ts.tv_nsec / 1000000;
		if (now >= deadline)
			return err_set(ERR_TIMEOUT,
				       "no schema agreement within %llu ms",
				       (unsigned long long)timeout_ms);
		struct timespec nap = {0, 200 * 1000 * 1000};
		nanosleep(&nap, NULL);
	}
}
