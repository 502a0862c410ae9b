/*
 * Saved peers (Cassandra's system.peers): the ring's other members as this
 * node last saw them, in saved_caches_directory/peers. Loaded into gossip
 * at start (gossip_add_saved_endpoint: DOWN, generation 0, replaced by
 * each peer's own news), so a restarted node knows who replicates what
 * from its first request instead of taking itself for the whole ring
 * until gossip arrives. Rewritten (on the state file's worker) a gossip
 * round after the ring's membership changes.
 *
 * Format (text): a `peer=<address:port>` line opens each peer, then one
 * `<STATE NAME>=<value>` line per gossip state kept (STATUS_WITH_PORT,
 * TOKENS, DC, RACK, HOST_ID, NATIVE_ADDRESS_AND_PORT, RELEASE_VERSION,
 * INTERNAL_ADDRESS_AND_PORT).
 * Lines starting with '#' and states of unknown names are skipped; a peer
 * without tokens, status, dc, rack and host id is dropped. A file that
 * does not parse is moved aside (peers.corrupt) and the node starts from
 * gossip alone.
 */
#define LOG_MODULE "node"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "gossip/gossip.h"
#include "node/admin.h"
#include "node/cql_service.h"
#include "node/node_internal.h"
#include "node/state_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PEERS_FILE "peers"
#define PEERS_MAX  (64u << 20)

struct node_peers {
	struct node *n;
	struct node_state_file *file;
	struct env_timer *timer;
	bool armed;
};

static const enum gossip_app_state kept[] = {
	GOSSIP_STATE_STATUS_WITH_PORT,
	GOSSIP_STATE_TOKENS,
	GOSSIP_STATE_DC,
	GOSSIP_STATE_RACK,
	GOSSIP_STATE_HOST_ID,
	GOSSIP_STATE_NATIVE_ADDRESS_AND_PORT,
	GOSSIP_STATE_RELEASE_VERSION,
	GOSSIP_STATE_INTERNAL_ADDRESS_AND_PORT,
};
#define NKEPT (sizeof(kept) / sizeof(kept[0]))

static const enum gossip_app_state required[] = {
	GOSSIP_STATE_STATUS_WITH_PORT, GOSSIP_STATE_TOKENS, GOSSIP_STATE_DC,
	GOSSIP_STATE_RACK, GOSSIP_STATE_HOST_ID};

static bool complete(const char *const st[GOSSIP_STATE_COUNT])
{
	for (size_t k = 0; k < sizeof(required) / sizeof(required[0]); k++)
		if (!st[required[k]] || !*st[required[k]])
			return false;
	return true;
}

/* A ring member worth saving: has what the ring needs, has not left. */
static bool member(const struct gossip_endpoint_info *info)
{
	if (info->is_self || !complete(info->states))
		return false;
	enum gossip_status s = info->status;
	return s == GOSSIP_STATUS_NORMAL || s == GOSSIP_STATUS_SHUTDOWN ||
	       s == GOSSIP_STATUS_LEAVING || s == GOSSIP_STATUS_BOOT;
}

static int render(struct node *n, struct buf *b)
{
	int rc = admin_printf(b, "# Peers as this node last saw them: read at "
				 "start, rewritten as the ring changes.\n");
	for (size_t i = 0; i < gossip_endpoint_count(n->gossip) && !rc; i++) {
		struct gossip_endpoint_info info;
		if (gossip_endpoint_at(n->gossip, i, &info) != 0 ||
		    !member(&info))
			continue;
		bool clean = true;
		for (size_t k = 0; k < NKEPT && clean; k++)
			clean = !info.states[kept[k]] ||
				!strchr(info.states[kept[k]], '\n');
		if (!clean)
			continue;
		char a[INET_ADDR_STRLEN];
		rc = admin_printf(b, "peer=%s\n",
				  inet_addr_format(&info.addr, a, sizeof(a)));
		for (size_t k = 0; k < NKEPT && !rc; k++)
			if (info.states[kept[k]])
				rc = admin_printf(
					b, "%s=%s\n",
					gossip_app_state_name(kept[k]),
					info.states[kept[k]]);
	}
	return rc;
}

static void save(void *arg)
{
	struct node_peers *p = arg;
	p->armed = false;
	struct buf b;
	buf_init(&b);
	if (render(p->n, &b) != 0) {
		LOG_WARN("cannot save the peers: %s", err_msg());
		buf_free(&b);
		return;
	}
	node_state_file_save(p->file, b.data, b.len); /* takes it */
}

static void changed(struct node_peers *p)
{
	if (p->armed)
		return;
	p->armed = true;
	env_timer_arm(p->n->env, p->timer,
		      p->n->conf.gossip_interval_ms * 1000u);
}

static void on_join(void *arg, const struct inet_addr *ep)
{
	(void)ep;
	changed(arg);
}

static void on_change(void *arg, const struct inet_addr *ep,
		      enum gossip_app_state key, const char *value)
{
	(void)ep;
	(void)value;
	for (size_t k = 0; k < NKEPT; k++)
		if (kept[k] == key)
			changed(arg);
}

/* ---- loading ------------------------------------------------------------- */

struct pending_peer {
	struct inet_addr addr;
	bool open;
	char *st[GOSSIP_STATE_COUNT];
};

static void pending_clear(struct pending_peer *pp)
{
	for (int k = 0; k < GOSSIP_STATE_COUNT; k++) {
		free(pp->st[k]);
		pp->st[k] = NULL;
	}
	pp->open = false;
}

static int state_key(const char *name, size_t len)
{
	for (int k = 0; k < GOSSIP_STATE_COUNT; k++) {
		const char *s = gossip_app_state_name((enum gossip_app_state)k);
		if (strlen(s) == len && memcmp(s, name, len) == 0)
			return k;
	}
	return -1;
}

/* Hands the peer read so far to gossip; *added counts it. */
static void flush(struct node *n, struct pending_peer *pp, size_t *added)
{
	if (!pp->open)
		return;
	char a[INET_ADDR_STRLEN];
	inet_addr_format(&pp->addr, a, sizeof(a));
	if (!complete((const char *const *)pp->st))
		LOG_WARN("saved peer %s lacks tokens, status, dc, rack or host "
			 "id: skipped",
			 a);
	else if (inet_addr_eq(&pp->addr, &n->conf.broadcast_address))
		LOG_WARN("saved peer %s is this node: skipped", a);
	else if (gossip_add_saved_endpoint(n->gossip, &pp->addr,
					   (const char *const *)pp->st) != 0)
		LOG_WARN("saved peer %s: %s", a, err_msg());
	else
		(*added)++;
	pending_clear(pp);
}

/* Parses the file into gossip; -1 with err set when it does not parse
 * (the peers before the bad line are kept: each was whole). */
static int parse(struct node *n, char *text, size_t *added)
{
	struct pending_peer pp = {0};
	int rc = 0;
	size_t line_no = 0;
	for (char *line = text, *next; line && !rc; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		line_no++;
		if (!*line || *line == '#')
			continue;
		char *eq = strchr(line, '=');
		if (!eq) {
			rc = err_set(ERR_CORRUPT, "line %zu: no '='", line_no);
			break;
		}
		if ((size_t)(eq - line) == 4 && memcmp(line, "peer", 4) == 0) {
			flush(n, &pp, added);
			if (inet_addr_parse(eq + 1, 7000, &pp.addr) != 0) {
				rc = err_set(ERR_CORRUPT,
					     "line %zu: bad address '%s'",
					     line_no, eq + 1);
				break;
			}
			pp.open = true;
			continue;
		}
		if (!pp.open) {
			rc = err_set(ERR_CORRUPT,
				     "line %zu: a state before "
				     "any peer= line",
				     line_no);
			break;
		}
		int k = state_key(line, (size_t)(eq - line));
		if (k < 0)
			continue; /* a state this version does not keep */
		free(pp.st[k]);
		if (!(pp.st[k] = strdup(eq + 1)))
			rc = err_set(ERR_NOMEM, "saved peers");
	}
	if (!rc)
		flush(n, &pp, added);
	pending_clear(&pp);
	return rc;
}

struct load_ctx {
	struct node *n;
	size_t added;
};

static int parse_file(void *arg, const uint8_t *data, size_t len)
{
	struct load_ctx *l = arg;
	if (memchr(data, '\0', len))
		return err_set(ERR_CORRUPT, "binary data");
	char *text = malloc(len + 1);
	if (!text)
		return err_set(ERR_NOMEM, "saved peers");
	memcpy(text, data, len);
	text[len] = '\0';
	int rc = parse(l->n, text, &l->added);
	free(text);
	return rc;
}

static void load(struct node_peers *p)
{
	struct load_ctx l = {p->n, 0};
	node_state_file_load(p->file, PEERS_MAX, parse_file, &l,
			     "starting from gossip alone");
	if (l.added)
		LOG_INFO("%zu peers loaded from %s (down until heard from)",
			 l.added, node_state_file_path(p->file));
}

/* ---- life cycle ---------------------------------------------------------- */

struct node_peers *node_peers_new(struct node *n)
{
	struct node_peers *p = calloc(1, sizeof(*p));
	if (!p) {
		err_set(ERR_NOMEM, "saved peers");
		return NULL;
	}
	p->n = n;
	char path[4096];
	snprintf(path, sizeof(path), "%s/" PEERS_FILE,
		 n->conf.saved_caches_directory);
	if (!(p->file = node_state_file_new(n->env, cql_service_loopq(n->cql),
					    path, "peers-state")) ||
	    !(p->timer = env_timer_new(n->env, save, p))) {
		node_peers_delete(p);
		return NULL;
	}
	load(p);
	struct gossip_listener l = {.on_join = on_join,
				    .on_change = on_change,
				    .on_remove = on_join};
	if (gossip_subscribe(n->gossip, &l, p) != 0) {
		node_peers_delete(p);
		return NULL;
	}
	return p;
}

void node_peers_delete(struct node_peers *p)
{
	if (!p)
		return;
	if (p->timer) {
		if (p->armed && p->n->gossip)
			save(p); /* the last change, written below */
		env_timer_free(p->n->env, p->timer);
	}
	node_state_file_delete(p->file);
	free(p);
}
