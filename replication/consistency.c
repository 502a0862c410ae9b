/*
 * Consistency arithmetic: Cassandra's blockFor and the Unavailable check
 * (ConsistencyLevel.blockFor / blockForWrite and
 * ReplicaPlans.assureSufficientLiveReplicas).
 */
#include "replication/replication.h"

#include "common/err.h"

#include <stdio.h>
#include <string.h>

const char *repl_cl_name(int cl)
{
	switch (cl) {
	case REPL_CL_ANY:
		return "ANY";
	case REPL_CL_ONE:
		return "ONE";
	case REPL_CL_TWO:
		return "TWO";
	case REPL_CL_THREE:
		return "THREE";
	case REPL_CL_QUORUM:
		return "QUORUM";
	case REPL_CL_ALL:
		return "ALL";
	case REPL_CL_LOCAL_QUORUM:
		return "LOCAL_QUORUM";
	case REPL_CL_EACH_QUORUM:
		return "EACH_QUORUM";
	case REPL_CL_SERIAL:
		return "SERIAL";
	case REPL_CL_LOCAL_SERIAL:
		return "LOCAL_SERIAL";
	case REPL_CL_LOCAL_ONE:
		return "LOCAL_ONE";
	}
	return "UNKNOWN";
}

const char *repl_write_type_name(enum repl_write_type t)
{
	switch (t) {
	case REPL_WRITE_SIMPLE:
		return "SIMPLE";
	case REPL_WRITE_BATCH:
		return "BATCH";
	case REPL_WRITE_UNLOGGED_BATCH:
		return "UNLOGGED_BATCH";
	case REPL_WRITE_BATCH_LOG:
		return "BATCH_LOG";
	case REPL_WRITE_COUNTER:
		return "COUNTER";
	}
	return "SIMPLE";
}

static int total_rf(const struct ring_strategy *s)
{
	size_t ndc = ring_strategy_dc_count(s);
	if (ring_strategy_class(s) != RING_STRATEGY_NETWORK_TOPOLOGY)
		return ring_strategy_rf(s, NULL);
	int sum = 0;
	for (size_t i = 0; i < ndc; i++) {
		int rf;
		ring_strategy_dc_at(s, i, &rf);
		sum += rf;
	}
	return sum;
}

int repl_dc_quorum(const struct ring_strategy *s, const char *dc)
{
	int rf = ring_strategy_rf(s, dc);
	return rf > 0 ? rf / 2 + 1 : 0;
}

/* LOCAL_QUORUM's count: the local DC's quorum under NTS, else the quorum of
 * the single replication factor. */
static int local_quorum(const struct ring_strategy *s, const char *local_dc)
{
	if (ring_strategy_class(s) == RING_STRATEGY_NETWORK_TOPOLOGY)
		return repl_dc_quorum(s, local_dc);
	return total_rf(s) / 2 + 1;
}

int repl_block_for(int cl, const struct ring_strategy *s, const char *local_dc)
{
	switch (cl) {
	case REPL_CL_ANY:
	case REPL_CL_ONE:
	case REPL_CL_LOCAL_ONE:
		return 1;
	case REPL_CL_TWO:
		return 2;
	case REPL_CL_THREE:
		return 3;
	case REPL_CL_QUORUM:
		return total_rf(s) / 2 + 1;
	case REPL_CL_ALL:
		return total_rf(s);
	case REPL_CL_LOCAL_QUORUM:
		return local_quorum(s, local_dc);
	case REPL_CL_EACH_QUORUM:
		if (ring_strategy_class(s) == RING_STRATEGY_NETWORK_TOPOLOGY) {
			int sum = 0;
			for (size_t i = 0; i < ring_strategy_dc_count(s); i++) {
				int rf;
				const char *dc = ring_strategy_dc_at(s, i, &rf);
				sum += repl_dc_quorum(s, dc);
			}
			return sum;
		}
		return total_rf(s) / 2 + 1;
	}
	return err_set(ERR_INVALID,
		       "consistency level %s (0x%04x) cannot "
		       "be used here",
		       repl_cl_name(cl), (unsigned)cl);
}

static bool in_dc(const struct repl_live *r, const char *dc)
{
	return dc && r->dc && strcmp(r->dc, dc) == 0;
}

static int unavailable(struct repl_result *res, int cl, int required, int alive)
{
	memset(res, 0, sizeof(*res));
	res->outcome = REPL_UNAVAILABLE;
	res->cl = cl;
	res->required = required;
	res->alive = alive;
	snprintf(res->msg, sizeof(res->msg),
		 "Cannot achieve consistency level %s", repl_cl_name(cl));
	return -1;
}

int repl_check_live(int cl, const struct ring_strategy *s, const char *local_dc,
		    const struct repl_live *reps, size_t n, size_t n_pending,
		    struct repl_result *res)
{
	int block_for = repl_block_for(cl, s, local_dc);
	if (block_for < 0) {
		memset(res, 0, sizeof(*res));
		res->outcome = REPL_INVALID;
		res->cl = cl;
		snprintf(res->msg, sizeof(res->msg), "%s", err_msg());
		return -1;
	}
	int live = 0, local_live = 0, local_pending = 0;
	for (size_t i = 0; i < n; i++) {
		bool local = in_dc(&reps[i], local_dc);
		if (reps[i].alive) {
			live++;
			local_live += local;
		}
		if (i >= n - n_pending)
			local_pending += local;
	}
	switch (cl) {
	case REPL_CL_ANY:
		return 0;
	case REPL_CL_LOCAL_ONE:
		return local_live >= 1 + local_pending
			       ? 0
			       : unavailable(res, cl, 1 + local_pending,
					     local_live);
	case REPL_CL_LOCAL_QUORUM:
		block_for += local_pending;
		return local_live >= block_for
			       ? 0
			       : unavailable(res, cl, block_for, local_live);
	case REPL_CL_EACH_QUORUM:
		if (ring_strategy_class(s) == RING_STRATEGY_NETWORK_TOPOLOGY) {
			for (size_t d = 0; d < ring_strategy_dc_count(s); d++) {
				int rf;
				const char *dc = ring_strategy_dc_at(s, d, &rf);
				int need = repl_dc_quorum(s, dc), have = 0;
				for (size_t i = 0; i < n; i++) {
					if (!in_dc(&reps[i], dc))
						continue;
					have += reps[i].alive;
					need += i >= n - n_pending;
				}
				if (have < need)
					return unavailable(res, cl, need, have);
			}
			return 0;
		}
		break;
	default:
		break;
	}
	block_for += (int)n_pending;
	return live >= block_for ? 0 : unavailable(res, cl, block_for, live);
}
