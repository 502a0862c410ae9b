/*
 * The CQL client: hosts and their connection pools, routing, requests,
 * prepared statements, topology discovery and the client's life cycle.
 * Connections themselves (sockets, streams, backlog) are in
 * cql_client_conn.c.
 *
 * Each host has `connections_per_host` connections; a request goes to the
 * ready connection with the fewest requests in flight on its host (the
 * primary replica of its token when known, else any host).
 *
 * Failures never call back from inside the call that submitted the request
 * (a closed-loop load generator would recurse): they are queued and
 * delivered from a zero-delay event. Connection failures fail every request
 * in flight on it and retry the connection after a second. A 100 ms tick
 * times out requests (the stream stays taken until its late response
 * arrives, so a late answer cannot be taken for a new request's).
 */
#include "client/driver/cql_client_internal.h"

#include "client/proto/tls.h"
#include "common/err.h"
#include "common/murmur3.h"

#include <event2/event.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cql_client_config_defaults(struct cql_client_config *c)
{
	memset(c, 0, sizeof(*c));
	c->connections_per_host = 1;
	c->max_streams_per_connection = 1024;
	c->connect_timeout_ms = 5000;
	c->request_timeout_ms = 12000;
	c->max_frame_size = 256u << 20;
	c->token_aware = true;
	c->discover_peers = true;
}

const char *cql_client_status_name(enum cql_client_status s)
{
	switch (s) {
	case CQL_CLIENT_OK:
		return "OK";
	case CQL_CLIENT_TIMEOUT:
		return "ClientTimeout";
	case CQL_CLIENT_CONNECTION:
		return "ConnectionClosed";
	case CQL_CLIENT_NO_HOST:
		return "NoHostAvailable";
	case CQL_CLIENT_BAD_RESPONSE:
		return "BadResponse";
	}
	return "Unknown";
}

/* ---- hosts and routing --------------------------------------------------- */

static int find_host(const struct cql_client *c, const struct inet_addr *a)
{
	for (size_t i = 0; i < c->nhosts; i++)
		if (inet_addr_eq(&c->hosts[i]->addr, a))
			return (int)i;
	return -1;
}

bool cql_client_host_ready(const struct cql_client *c, size_t host)
{
	const struct cql_host *h = host < c->nhosts ? c->hosts[host] : NULL;
	for (int k = 0; h && k < h->nconns; k++)
		if (h->conns[k].state == CQL_CONN_READY)
			return true;
	return false;
}

bool cql_client_peer_up(const struct cql_client *c, const uint8_t *ip,
			size_t len)
{
	for (size_t i = 0; i < c->nhosts; i++) {
		const struct cql_host *h = c->hosts[i];
		size_t n = h->addr.family == INET_V4 ? 4 : 16;
		if (n == len && memcmp(h->addr.ip, ip, n) == 0 &&
		    cql_client_host_ready(c, i))
			return true;
	}
	return false;
}

/* Adds (not yet started) a host, or returns the known one's index. */
static int add_host(struct cql_client *c, const struct inet_addr *a,
		    const char *name)
{
	int i = find_host(c, a);
	if (i >= 0)
		return i;
	if (c->nhosts >= CQL_CLIENT_HOSTS_MAX)
		return err_set(ERR_NOMEM, "more than %d hosts",
			       CQL_CLIENT_HOSTS_MAX);
	struct cql_host **hv = realloc(c->hosts, (c->nhosts + 1) * sizeof(*hv));
	if (!hv)
		return err_set(ERR_NOMEM, "hosts");
	c->hosts = hv;
	struct cql_host *h = calloc(1, sizeof(*h));
	int n = c->cfg.connections_per_host;
	if (h)
		h->conns = calloc((size_t)n, sizeof(*h->conns));
	if (!h || !h->conns) {
		free(h);
		return err_set(ERR_NOMEM, "hosts");
	}
	h->addr = *a;
	if (name)
		snprintf(h->name, sizeof(h->name), "%s", name);
	for (int k = 0; k < n; k++) {
		h->nconns++;
		if (cql_conn_init(&h->conns[k], c, h) != 0) {
			/* Freed with the client: count it as a host. */
			c->hosts[c->nhosts++] = h;
			return -1;
		}
	}
	c->hosts[c->nhosts++] = h;
	return (int)(c->nhosts - 1);
}

static void host_start(struct cql_host *h)
{
	if (h->started)
		return;
	h->started = true;
	for (int i = 0; i < h->nconns; i++)
		cql_conn_start(&h->conns[i]);
}

/* The ready connection of `h` with the fewest requests in flight. */
static struct cql_conn *host_pick(struct cql_host *h)
{
	struct cql_conn *best = NULL;
	for (int j = 0; j < h->nconns; j++) {
		struct cql_conn *k =
			&h->conns[(h->rr + (unsigned)j) % (unsigned)h->nconns];
		if (k->state != CQL_CONN_READY)
			continue;
		if (!best || k->inflight < best->inflight)
			best = k;
		if (best->inflight == 0)
			break;
	}
	if (best)
		h->rr++;
	return best;
}

/* A connection for a request preferring `host` (-1: any). When nothing is
 * ready but something is starting, a starting connection (backlog). */
static struct cql_conn *pick_conn(struct cql_client *c, int host)
{
	struct cql_conn *k;
	if (host >= 0 && (k = host_pick(c->hosts[host])) != NULL)
		return k;
	for (size_t i = 0; i < c->nhosts; i++) {
		struct cql_host *h = c->hosts[(c->host_rr + i) % c->nhosts];
		if ((k = host_pick(h)) != NULL) {
			c->host_rr++;
			return k;
		}
	}
	for (size_t i = 0; i < c->nhosts; i++)
		for (int j = 0; j < c->hosts[i]->nconns; j++) {
			k = &c->hosts[i]->conns[j];
			if (k->state == CQL_CONN_CONNECTING ||
			    k->state == CQL_CONN_STARTUP)
				return k;
		}
	return NULL;
}

static int token_cmp(const void *a, const void *b)
{
	const struct cql_token_entry *x = a, *y = b;
	return x->token < y->token ? -1 : x->token > y->token;
}

int cql_client_host_for_token(const struct cql_client *c, int64_t token)
{
	size_t lo = 0, hi = c->ntokens;
	if (!c->ntokens)
		return -1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->tokens[mid].token < token)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int)c->tokens[lo == c->ntokens ? 0 : lo].host;
}

struct inet_addr cql_client_host_address(const struct cql_client *c,
					 size_t host)
{
	return c->hosts[host]->addr;
}

struct event_base *cql_client_base(const struct cql_client *c)
{
	return c->base;
}

struct cql_client_frame cql_client_current_frame(const struct cql_client *c)
{
	return (struct cql_client_frame){c->cur_opcode, c->cur_flags,
					 c->cur_body};
}

size_t cql_client_host_count(const struct cql_client *c)
{
	return c->nhosts;
}

size_t cql_client_ready_connections(const struct cql_client *c)
{
	size_t n = 0;
	for (size_t i = 0; i < c->nhosts; i++)
		for (int j = 0; j < c->hosts[i]->nconns; j++)
			n += c->hosts[i]->conns[j].state == CQL_CONN_READY;
	return n;
}

/* ---- requests ------------------------------------------------------------ */

static void submit(struct cql_client *c, int host, cql_client_cb cb, void *arg,
		   const struct cql_client_prepared *stmt)
{
	struct cql_conn *k = c->closing ? NULL : pick_conn(c, host);
	if (c->closing) {
		cql_client_defer_fail(c, cb, arg, CQL_CLIENT_CONNECTION,
				      "client closed");
		return;
	}
	if (!k) {
		cql_client_defer_fail(
			c, cb, arg, CQL_CLIENT_NO_HOST,
			c->last_error[0] ? c->last_error
					 : "no host has a ready connection");
		return;
	}
	struct cql_req req = {cb, arg, stmt, false};
	cql_conn_submit(k, c->scratch.data, c->scratch.len, &req, false);
}

static void submit_query(struct cql_client *c, int host, const char *query,
			 uint16_t consistency, const struct cql_value *values,
			 uint16_t nvalues, cql_client_cb cb, void *arg)
{
	buf_clear(&c->scratch);
	if (cql_client_encode_query(&c->scratch, 0, query, consistency, values,
				    nvalues) != 0) {
		cql_client_defer_fail(c, cb, arg, CQL_CLIENT_BAD_RESPONSE,
				      err_msg());
		return;
	}
	submit(c, host, cb, arg, NULL);
}

void cql_client_query(struct cql_client *c, const char *query,
		      uint16_t consistency, const struct cql_value *values,
		      uint16_t nvalues, cql_client_cb cb, void *arg)
{
	submit_query(c, -1, query, consistency, values, nvalues, cb, arg);
}

void cql_client_query_host(struct cql_client *c, int host, const char *query,
			   uint16_t consistency, cql_client_cb cb, void *arg)
{
	submit_query(c, host, query, consistency, NULL, 0, cb, arg);
}

int32_t cql_client_prepared_bind_count(const struct cql_client_prepared *p)
{
	return p->bind_count;
}

bool cql_client_routing_token(const struct cql_client_prepared *p,
			      const struct cql_value *values, uint16_t nvalues,
			      int64_t *token)
{
	struct slice parts[16];
	if (p->pk_count <= 0 || p->pk_count > 16)
		return false;
	for (int32_t i = 0; i < p->pk_count; i++) {
		uint16_t ix = p->pk_indexes[i];
		if (ix >= nvalues || values[ix].len < 0)
			return false;
		parts[i] = slice_make(values[ix].ptr, (size_t)values[ix].len);
	}
	if (p->pk_count == 1) {
		*token = murmur3_token(parts[0].ptr, parts[0].len);
		return true;
	}
	return murmur3_compound_token(parts, (size_t)p->pk_count, token) == 0;
}

void cql_client_execute(struct cql_client *c,
			const struct cql_client_prepared *p,
			const struct cql_value *values, uint16_t nvalues,
			uint16_t consistency, cql_client_cb cb, void *arg)
{
	int host = -1;
	int64_t token;
	if (c->cfg.token_aware && c->ntokens &&
	    cql_client_routing_token(p, values, nvalues, &token))
		host = cql_client_host_for_token(c, token);
	buf_clear(&c->scratch);
	if (cql_client_encode_execute(&c->scratch, 0, p->id, p->id_len,
				      consistency, values, nvalues) != 0) {
		cql_client_defer_fail(c, cb, arg, CQL_CLIENT_BAD_RESPONSE,
				      err_msg());
		return;
	}
	submit(c, host, cb, arg, p);
}

/* ---- prepare on every host ----------------------------------------------- */

struct prepare_op {
	struct cql_client *client;
	cql_client_prepared_cb done;
	void *arg;
	int waiting;
	struct cql_client_prepared *stmt;
	bool failed;
	char query[]; /* kept for re-preparing */
};

static struct cql_client_prepared *
prepared_new(const struct cql_client_prepared_meta *m, const char *query)
{
	struct cql_client_prepared *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->id = malloc(m->id.len);
	p->query = strdup(query);
	p->pk_indexes = calloc((size_t)m->pk_count + 1, sizeof(uint16_t));
	if (!p->id || !p->pk_indexes || !p->query) {
		free(p->query);
		free(p->id);
		free(p->pk_indexes);
		free(p);
		return NULL;
	}
	memcpy(p->id, m->id.ptr, m->id.len);
	p->id_len = (uint16_t)m->id.len;
	p->bind_count = m->bind_count;
	p->pk_count = m->pk_count;
	memcpy(p->pk_indexes, m->pk_indexes,
	       (size_t)m->pk_count * sizeof(uint16_t));
	return p;
}

static void on_prepared(void *arg, enum cql_client_status status,
			const struct cql_client_response *resp,
			const char *message)
{
	struct prepare_op *op = arg;
	struct cql_client *c = op->client;
	op->waiting--;
	bool ok = status == CQL_CLIENT_OK && resp->opcode == CQL_OP_RESULT &&
		  resp->kind == CQL_RESULT_PREPARED;
	if (ok && !op->stmt) {
		op->stmt = prepared_new(&resp->prepared, op->query);
		if (op->stmt) {
			op->stmt->next = c->prepared;
			c->prepared = op->stmt;
		} else {
			ok = false;
			message = "out of memory";
			status = CQL_CLIENT_BAD_RESPONSE;
			resp = NULL;
		}
	}
	if (!ok && !op->failed) {
		op->failed = true;
		op->done(op->arg, NULL,
			 status == CQL_CLIENT_OK && resp &&
					 resp->opcode != CQL_OP_ERROR
				 ? CQL_CLIENT_BAD_RESPONSE
				 : status,
			 resp, message ? message : "not a PREPARED result");
	}
	if (op->waiting == 0) {
		if (!op->failed)
			op->done(op->arg, op->stmt, CQL_CLIENT_OK, NULL, NULL);
		free(op);
	}
}

void cql_client_prepare(struct cql_client *c, const char *query,
			cql_client_prepared_cb done, void *arg)
{
	size_t qlen = strlen(query);
	struct prepare_op *op = calloc(1, sizeof(*op) + qlen + 1);
	if (!op) {
		done(arg, NULL, CQL_CLIENT_NO_HOST, NULL, "out of memory");
		return;
	}
	memcpy(op->query, query, qlen + 1);
	op->client = c;
	op->done = done;
	op->arg = arg;
	/* One PREPARE per host with a ready connection; at least one. */
	op->waiting = 1; /* held while submitting */
	int sent = 0;
	for (size_t i = 0; i < c->nhosts; i++) {
		struct cql_conn *k = host_pick(c->hosts[i]);
		if (!k)
			continue;
		buf_clear(&c->scratch);
		if (cql_client_encode_prepare(&c->scratch, 0, query) != 0)
			break;
		op->waiting++;
		sent++;
		struct cql_req req = {on_prepared, op, NULL, false};
		cql_conn_submit(k, c->scratch.data, c->scratch.len, &req,
				false);
	}
	if (!sent) {
		buf_clear(&c->scratch);
		if (cql_client_encode_prepare(&c->scratch, 0, query) == 0) {
			op->waiting++;
			submit(c, -1, on_prepared, op, NULL);
		}
	}
	/* Drop the hold; nothing has completed synchronously. */
	op->waiting--;
	if (op->waiting == 0) {
		done(arg, NULL, CQL_CLIENT_BAD_RESPONSE, NULL, err_msg());
		free(op);
	}
}

/* ---- topology ------------------------------------------------------------ */

/* Column index by name in a rows result, or -1. */
static int column_index(const struct cql_client_rows *r, const char *name)
{
	size_t n = strlen(name);
	for (int32_t i = 0; r->columns && i < r->column_count; i++)
		if (r->columns[i].name.len == n &&
		    memcmp(r->columns[i].name.ptr, name, n) == 0)
			return i;
	return -1;
}

/* Appends the tokens of a set<text> to the token map for `host`. */
static int add_tokens(struct cql_client *c, const struct cql_value *v,
		      uint32_t host)
{
	struct cursor cur;
	int32_t n;
	if (v->len < 0)
		return 0;
	cur = cursor_make(v->ptr, (size_t)v->len);
	if (cql_read_int(&cur, &n) != 0 || n < 0 ||
	    (size_t)n * 4 > cursor_left(&cur) ||
	    c->ntokens + n > CQL_CLIENT_TOKENS_MAX)
		return err_set(ERR_PROTOCOL, "bad tokens set");
	struct cql_token_entry *t =
		realloc(c->tokens, (c->ntokens + (size_t)n + 1) * sizeof(*t));
	if (!t)
		return err_set(ERR_NOMEM, "token map");
	c->tokens = t;
	for (int32_t i = 0; i < n; i++) {
		struct cql_value e;
		char text[32];
		if (cql_read_value(&cur, false, &e) != 0 || e.len <= 0 ||
		    e.len >= (int32_t)sizeof(text))
			return err_set(ERR_PROTOCOL, "bad token");
		memcpy(text, e.ptr, (size_t)e.len);
		text[e.len] = 0;
		char *end;
		errno = 0;
		long long tok = strtoll(text, &end, 10);
		if (errno || *end)
			return err_set(ERR_PROTOCOL, "bad token '%s'", text);
		c->tokens[c->ntokens++] =
			(struct cql_token_entry){(int64_t)tok, host};
	}
	return 0;
}

static int read_inet(const struct cql_value *v, uint16_t port,
		     struct inet_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->port = port;
	if (v->len == 4) {
		out->family = INET_V4;
	} else if (v->len == 16) {
		out->family = INET_V6;
	} else {
		return -1;
	}
	memcpy(out->ip, v->ptr, (size_t)v->len);
	return 0;
}

struct topo_arg {
	struct cql_client *client;
	int host; /* the host asked */
	bool peers;
	bool v2; /* system.peers_v2 (native ports); else system.peers */
};

static void on_topology(void *arg, enum cql_client_status status,
			const struct cql_client_response *resp,
			const char *message);

static void ask(struct cql_client *c, struct topo_arg *t)
{
	const char *q = !t->peers ? "SELECT * FROM system.local"
			: t->v2   ? "SELECT * FROM system.peers_v2"
				  : "SELECT * FROM system.peers";
	submit_query(c, t->host, q, CQL_CL_ONE, NULL, 0, on_topology, t);
}

/* The native address of row i of system.peers(_v2): native_address (v2)
 * or rpc_address, with peer when that is a wildcard; the port from
 * native_port (v2), else the asked host's. 0 or -1. */
static int peer_address(const struct cql_client *c, const struct topo_arg *t,
			const struct cql_client_rows *r, int32_t i,
			struct inet_addr *a)
{
	uint16_t port = c->hosts[t->host]->addr.port;
	int col = column_index(r, t->v2 ? "native_address" : "rpc_address");
	int pcol = t->v2 ? column_index(r, "native_port") : -1;
	int peer = column_index(r, "peer");
	int64_t p;
	if (pcol >= 0 &&
	    cql_client_value_int(cql_client_rows_cell(r, i, pcol), &p) == 0 &&
	    p > 0 && p <= UINT16_MAX)
		port = (uint16_t)p;
	if (col >= 0 &&
	    read_inet(cql_client_rows_cell(r, i, col), port, a) == 0 &&
	    !inet_addr_is_wildcard(a))
		return 0;
	if (peer >= 0 &&
	    read_inet(cql_client_rows_cell(r, i, peer), port, a) == 0)
		return 0;
	return -1;
}

static void on_topology(void *arg, enum cql_client_status status,
			const struct cql_client_response *resp,
			const char *message)
{
	struct topo_arg *t = arg;
	struct cql_client *c = t->client;
	(void)message;
	if (t->v2 && status == CQL_CLIENT_OK && resp->opcode == CQL_OP_ERROR) {
		/* A server without peers_v2 (Cassandra 3): ask system.peers. */
		t->v2 = false;
		ask(c, t);
		return;
	}
	if (status == CQL_CLIENT_OK && resp->opcode == CQL_OP_RESULT &&
	    resp->kind == CQL_RESULT_ROWS) {
		const struct cql_client_rows *r = &resp->rows;
		int tok = column_index(r, "tokens");
		for (int32_t i = 0; tok >= 0 && i < r->row_count; i++) {
			int h = t->host;
			if (t->peers) {
				struct inet_addr a;
				if (peer_address(c, t, r, i, &a) != 0)
					continue;
				if (!c->cfg.discover_peers &&
				    find_host(c, &a) < 0)
					continue;
				h = add_host(c, &a, NULL);
				if (h < 0)
					continue;
				host_start(c->hosts[h]);
			}
			add_tokens(c, cql_client_rows_cell(r, i, tok),
				   (uint32_t)h);
		}
	}
	free(t);
	if (--c->topology_waiting == 0) {
		qsort(c->tokens, c->ntokens, sizeof(*c->tokens), token_cmp);
		c->topology_done = true;
		cql_client_connect_progress(c);
	}
}

static void ask_topology(struct cql_client *c, int host)
{
	c->topology_asked = true;
	c->topology_waiting = 2;
	for (int i = 0; i < 2; i++) {
		struct topo_arg *t = calloc(1, sizeof(*t));
		if (!t) {
			c->topology_waiting--;
			continue;
		}
		t->client = c;
		t->host = host;
		t->peers = i == 1;
		t->v2 = t->peers;
		ask(c, t);
	}
	if (c->topology_waiting == 0) {
		c->topology_done = true;
		cql_client_connect_progress(c);
	}
}

/* Called when a connection settles or the topology arrives. */
void cql_client_connect_progress(struct cql_client *c)
{
	if (!c->done)
		return;
	if (!c->topology_asked) {
		for (size_t i = 0; i < c->nhosts; i++)
			for (int j = 0; j < c->hosts[i]->nconns; j++)
				if (c->hosts[i]->conns[j].state ==
				    CQL_CONN_READY) {
					ask_topology(c, (int)i);
					return;
				}
	}
	for (size_t i = 0; i < c->nhosts; i++)
		for (int j = 0; j < c->hosts[i]->nconns; j++)
			if (c->hosts[i]->started &&
			    !c->hosts[i]->conns[j].settled)
				return;
	if (c->topology_asked && !c->topology_done)
		return;
	cql_client_done_cb done = c->done;
	c->done = NULL;
	if (cql_client_ready_connections(c) > 0)
		done(c->done_arg, 0, NULL);
	else
		done(c->done_arg, -1,
		     c->last_error[0] ? c->last_error : "no connection");
}

void cql_client_connect(struct cql_client *c, cql_client_done_cb done,
			void *arg)
{
	c->done = done;
	c->done_arg = arg;
	for (size_t i = 0; i < c->nhosts; i++)
		host_start(c->hosts[i]);
	/* Settles later, from connection callbacks. */
}

/* ---- life cycle ---------------------------------------------------------- */

struct cql_client *cql_client_new(struct event_base *base,
				  const struct cql_client_config *config)
{
	if (config->contact_count == 0)
		return err_set(ERR_INVALID, "no contact points"), NULL;
	if (config->connections_per_host < 1 ||
	    config->connections_per_host > 4096)
		return err_set(ERR_INVALID,
			       "connections_per_host out of range"),
		       NULL;
	if (config->max_streams_per_connection < 1 ||
	    config->max_streams_per_connection > 32768)
		return err_set(ERR_INVALID,
			       "max_streams_per_connection out of range"),
		       NULL;
	struct cql_client *c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(ERR_NOMEM, "client"), NULL;
	c->base = base;
	c->cfg = *config;
	c->cfg.contact_points = NULL;
	c->cfg.contact_names = NULL;
	c->cfg.username = c->cfg.password = NULL;
	if (config->username &&
	    (!(c->cfg.username = strdup(config->username)) ||
	     !(c->cfg.password =
		       strdup(config->password ? config->password : "")))) {
		free((char *)c->cfg.username);
		free(c);
		return err_set(ERR_NOMEM, "client"), NULL;
	}
	c->tick = event_new(base, -1, EV_PERSIST, cql_client_on_tick, c);
	c->defer_ev = event_new(base, -1, 0, cql_client_on_defer, c);
	c->flush_ev = event_new(base, -1, 0, cql_client_on_flush, c);
	if (!c->tick || !c->defer_ev || !c->flush_ev) {
		cql_client_delete(c);
		return err_set(ERR_NOMEM, "client events"), NULL;
	}
	struct timeval tv = {0, CQL_CLIENT_TICK_MS * 1000};
	event_add(c->tick, &tv);
	for (size_t i = 0; i < config->contact_count; i++) {
		if (add_host(c, &config->contact_points[i],
			     config->contact_names ? config->contact_names[i]
						   : NULL) < 0) {
			cql_client_delete(c);
			return NULL;
		}
	}
	return c;
}

int cql_client_resolve(const char *text, uint16_t default_port,
		       struct inet_addr *out, char *name, size_t cap)
{
	if (cap)
		name[0] = 0;
	if (inet_addr_parse(text, default_port, out) == 0)
		return 0;
	const char *colon = strchr(text, ':');
	if (text[0] == '[' || (colon && strchr(colon + 1, ':')))
		return -1; /* an IPv6 form: inet_addr_parse said why */
	size_t n = colon ? (size_t)(colon - text) : strlen(text);
	char host[256];
	if (n == 0 || n >= sizeof(host) || n >= cap)
		return err_set(ERR_INVALID, "bad host name in '%s'", text);
	memcpy(host, text, n);
	host[n] = 0;
	uint16_t port = default_port;
	if (colon) {
		char *end;
		long v = strtol(colon + 1, &end, 10);
		if (!colon[1] || *end || v < 1 || v > 65535)
			return err_set(ERR_INVALID, "bad port in '%s'", text);
		port = (uint16_t)v;
	}
	if (inet_addr_resolve(host, out) != 0)
		return -1;
	out->port = port;
	memcpy(name, host, n + 1);
	return 0;
}

struct ssl_ctx_st *cql_client_tls_new(const char *truststore,
				      const char *keystore,
				      const char *keystore_password)
{
	struct cql_tls_config tc = {
		.client = true,
		.truststore = truststore,
		.keystore = keystore,
		.keystore_password = keystore_password,
	};
	return cql_tls_context_new(&tc);
}

void cql_client_tls_free(struct ssl_ctx_st *ctx)
{
	cql_tls_context_free(ctx);
}

void cql_client_delete(struct cql_client *c)
{
	if (!c)
		return;
	c->closing = true;
	/* Callbacks may submit again; those fail too, until nothing is left. */
	for (bool any = true; any;) {
		any = false;
		for (size_t i = 0; i < c->nhosts; i++) {
			struct cql_host *h = c->hosts[i];
			for (int j = 0; j < h->nconns; j++) {
				struct cql_conn *k = &h->conns[j];
				if (k->state != CQL_CONN_DOWN || k->backlog ||
				    k->inflight) {
					cql_conn_fail(k, "client closed");
					any = true;
				}
			}
		}
		if (c->deferred) {
			cql_client_on_defer(-1, 0, c);
			any = true;
		}
	}
	for (size_t i = 0; i < c->nhosts; i++) {
		struct cql_host *h = c->hosts[i];
		for (int j = 0; j < h->nconns; j++) {
			struct cql_conn *k = &h->conns[j];
			if (k->retry)
				event_free(k->retry);
			for (int f = 0;
			     k->frames && f < c->cfg.max_streams_per_connection;
			     f++)
				buf_free(&k->frames[f]);
			free(k->frames);
			free(k->slots);
			free(k->free_ids);
			buf_free(&k->in);
			buf_free(&k->plain);
			buf_free(&k->out);
			arena_destroy(&k->arena);
		}
		free(h->conns);
		free(h);
	}
	free((char *)c->cfg.username);
	if (c->cfg.password)
		explicit_bzero((char *)c->cfg.password,
			       strlen(c->cfg.password));
	free((char *)c->cfg.password);
	c->cfg.username = c->cfg.password = NULL;
	free(c->hosts);
	while (c->prepared) {
		struct cql_client_prepared *p = c->prepared;
		c->prepared = p->next;
		free(p->id);
		free(p->pk_indexes);
		free(p->query);
		free(p);
	}
	free(c->tokens);
	if (c->tick)
		event_free(c->tick);
	if (c->defer_ev)
		event_free(c->defer_ev);
	if (c->flush_ev)
		event_free(c->flush_ev);
	buf_free(&c->scratch);
	free(c);
}
