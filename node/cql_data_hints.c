/* Hinted handoff hooks of the data path (see cql_data_internal.h). */
#define LOG_MODULE "node"
#include "node/cql_data_internal.h"

#include "common/log.h"

#include <stdlib.h>

/* ---- hinted handoff ------------------------------------------------------ */

int cql_data_hook_hint(void *arg, const uint8_t host_id[16], const char *dc,
		       const uint8_t *mutation, size_t len)
{
	struct cql_data *d = arg;
	int64_t now = env_wall_us(d->env);
	if (!d->hints)
		return -1;
	/* Handoff disabled or the target down past the window: the store
	 * refuses and counts it. A datacenter without hints: not stored. */
	if (hints_should_hint(d->hints, host_id, NULL, now) &&
	    !hints_should_hint(d->hints, host_id, dc, now))
		return -1;
	return hints_store(d->hints, host_id, mutation, len, now);
}

/* The address of a host id in the current ring, or NULL. */
static const struct inet_addr *host_addr(struct cql_data *d,
					 const uint8_t host_id[16])
{
	struct ring *r = d->hooks.ring(d->hooks.arg);
	int ep = ring_endpoint_find_host_id(r, host_id);
	return ep < 0 ? NULL : &ring_endpoint_get(r, (size_t)ep)->addr;
}

struct hint_send {
	hints_done_fn done;
	void *done_arg;
};

static void hint_sent(void *arg, int status)
{
	struct hint_send *hs = arg;
	hs->done(hs->done_arg, status);
	free(hs);
}

/* Whether a hint is dropped rather than delivered: written before its
 * table was last truncated here (a truncate reaches every node, so
 * delivering it would bring truncated data back to its target, and
 * Cassandra's Hint.apply drops those older than the table's
 * truncation), or holding a value invalid for its column's type (stored
 * before values were validated: every replica refuses it, and retrying
 * it would hold up the hints behind it forever). */
static bool hint_truncated(struct cql_data *d, const uint8_t *mutation,
			   size_t len, int64_t created_us)
{
	struct storage_mutation *m = storage_mutation_decode(mutation, len);
	if (!m)
		return false; /* the target refuses it */
	int64_t at = storage_truncated_at(d->db, storage_mutation_table_id(m));
	const struct storage_table_meta *t =
		storage_table_meta_acquire(d->db, storage_mutation_table_id(m));
	bool invalid = t && storage_mutation_validate(t, m) != 0;
	storage_table_meta_unref(t);
	if (invalid)
		LOG_WARN("dropping a hint: %s", err_msg());
	storage_mutation_delete(m);
	return invalid || (at != 0 && created_us <= at);
}

int cql_data_hints_send(void *arg, const uint8_t host_id[16],
			const uint8_t *mutation, size_t len, int64_t created_us,
			hints_done_fn done, void *done_arg)
{
	struct cql_data *d = arg;
	if (hint_truncated(d, mutation, len, created_us)) {
		done(done_arg, 0); /* delivered: nothing left to do */
		return 0;
	}
	const struct inet_addr *to = host_addr(d, host_id);
	struct hint_send *hs = to ? malloc(sizeof(*hs)) : NULL;
	if (!hs)
		return -1;
	*hs = (struct hint_send){done, done_arg};
	if (repl_deliver(d->repl, to, mutation, len, hint_sent, hs) != 0) {
		free(hs);
		return -1;
	}
	return 0;
}

/* A hint handed over by a node leaving the ring: kept as ours, with its
 * creation time (the truncate check and the window count from it). */
int cql_data_hook_take_hint(void *arg, const uint8_t host_id[16],
			    const uint8_t *mutation, size_t len,
			    int64_t created_us)
{
	struct cql_data *d = arg;
	if (!d->hints)
		return err_set(ERR_UNAVAILABLE, "hinted handoff is off here");
	return hints_store(d->hints, host_id, mutation, len, created_us);
}

static int hand_over_send(void *arg, const uint8_t host_id[16],
			  const uint8_t *mutation, size_t len,
			  int64_t created_us, hints_done_fn done,
			  void *done_arg)
{
	struct cql_data *d = arg;
	if (hint_truncated(d, mutation, len, created_us)) {
		done(done_arg, 0); /* nothing left to do */
		return 0;
	}
	struct hint_send *hs = malloc(sizeof(*hs));
	if (!hs)
		return -1;
	*hs = (struct hint_send){done, done_arg};
	if (repl_hand_over(d->repl, &d->hand_over_to, host_id, mutation, len,
			   created_us, hint_sent, hs) != 0) {
		free(hs);
		return -1;
	}
	return 0;
}

int cql_data_hand_over_hints(struct cql_data *d, const struct inet_addr *to,
			     hints_handed_fn done, void *arg)
{
	if (!d->hints) {
		done(arg, true);
		return 0;
	}
	d->hand_over_to = *to;
	return hints_hand_over(d->hints, hand_over_send, d, done, arg);
}

void cql_data_hand_over_cancel(struct cql_data *d)
{
	if (d->hints)
		hints_hand_over_cancel(d->hints);
}

bool cql_data_hints_alive(void *arg, const uint8_t host_id[16])
{
	struct cql_data *d = arg;
	const struct inet_addr *to = host_addr(d, host_id);
	return to && d->hooks.is_alive(d->hooks.arg, to);
}

void cql_data_peer_event(struct cql_data *d, const uint8_t host_id[16],
			 enum cql_data_peer_event ev)
{
	if (!d->hints)
		return;
	switch (ev) {
	case CQL_DATA_PEER_UP:
		hints_host_up(d->hints, host_id);
		break;
	case CQL_DATA_PEER_DOWN:
		hints_host_down(d->hints, host_id, env_wall_us(d->env));
		break;
	case CQL_DATA_PEER_REMOVED:
		hints_host_removed(d->hints, host_id);
		break;
	}
}
