/*
 * Paxos repair of ranges that move (paxos.h, "paxos repair of ranges that
 * move"): the coordinator's fan-out and the participants' answers, over
 * the env seam. What a participant does with its share is the node's
 * (paxos_cleanup_local_fn: node_cas's paxos repair restricted to the
 * ranges); this file only carries the request and the verdict.
 *
 * A coordinator job waits for every endpoint it asked; the first failure
 * (an endpoint's repair left rounds failed, or no answer in time) fails
 * the whole job, as one failed PaxosCleanup fails Cassandra's topology
 * change. Its own share runs through `local` directly, never as a message.
 */
#include "replication/paxos.h"

#include "common/err.h"
#include "common/zalloc.h"
#include "replication/paxos.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLEANUP_RANGES_MAX   (1u << 16)
#define CLEANUP_KEYSPACE_MAX 255

struct pc_job {
	struct pc_job *next;
	struct paxos_cleanup *pc;
	uint64_t id;
	struct inet_addr *eps;
	bool *answered;
	size_t n;
	struct paxos_cleanup_result res;
	uint64_t timeout_ms;
	paxos_cleanup_cb done;
	void *arg;
	struct env_timer *timer;
	bool finishing; /* the timer now ends it */
};

struct pc_serve {
	struct pc_serve *next;
	struct paxos_cleanup *pc;
	struct inet_addr from;
	uint64_t id;
	bool self; /* our own share of one of our jobs */
};

struct paxos_cleanup {
	struct env *env;
	struct inet_addr self;
	paxos_cleanup_local_fn local;
	void *local_arg;
	uint64_t next_id;
	struct pc_job *jobs;
	struct pc_serve *serves;
};

bool paxos_range_contains(const struct paxos_range *r, int64_t token)
{
	if (r->left < r->right)
		return token > r->left && token <= r->right;
	return token > r->left || token <= r->right; /* wraps (or whole) */
}

struct paxos_cleanup *paxos_cleanup_new(struct env *env,
					const struct inet_addr *self,
					paxos_cleanup_local_fn local,
					void *local_arg)
{
	struct paxos_cleanup *pc = calloc(1, sizeof(*pc));
	if (!pc) {
		err_set(ERR_NOMEM, "paxos cleanup");
		return NULL;
	}
	pc->env = env;
	pc->self = *self;
	pc->local = local;
	pc->local_arg = local_arg;
	pc->next_id = env_random(env) | 1;
	return pc;
}

static void job_free(struct pc_job *j)
{
	env_timer_free(j->pc->env, j->timer);
	free(j->eps);
	free(j->answered);
	free(j);
}

void paxos_cleanup_delete(struct paxos_cleanup *pc)
{
	if (!pc)
		return;
	while (pc->jobs) {
		struct pc_job *j = pc->jobs;
		pc->jobs = j->next;
		job_free(j);
	}
	while (pc->serves) {
		struct pc_serve *s = pc->serves;
		pc->serves = s->next;
		free(s);
	}
	free(pc);
}

static struct pc_job *job_find(struct paxos_cleanup *pc, uint64_t id)
{
	for (struct pc_job *j = pc->jobs; j; j = j->next)
		if (j->id == id)
			return j;
	return NULL;
}

static void job_fire(void *arg)
{
	struct pc_job *j = arg;
	struct paxos_cleanup *pc = j->pc;
	if (!j->finishing && j->res.status == 0) {
		/* the deadline: the first endpoint still silent is named */
		for (size_t i = 0; i < j->n; i++)
			if (!j->answered[i]) {
				char a[INET_ADDR_STRLEN];
				snprintf(j->res.error, sizeof(j->res.error),
					 "paxos repair on %s did not answer "
					 "within %llu ms",
					 inet_addr_format(&j->eps[i], a,
							  sizeof(a)),
					 (unsigned long long)j->timeout_ms);
				j->res.status = -1;
				break;
			}
	}
	for (struct pc_job **pp = &pc->jobs; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	struct paxos_cleanup_result res = j->res;
	paxos_cleanup_cb done = j->done;
	void *darg = j->arg;
	job_free(j);
	done(darg, &res);
}

/* One endpoint's verdict for job `id`. */
static void job_answer(struct paxos_cleanup *pc, uint64_t id,
		       const struct inet_addr *from, bool ok,
		       uint64_t completed, uint64_t failed, const char *error)
{
	struct pc_job *j = job_find(pc, id);
	if (!j || j->finishing)
		return;
	size_t i;
	for (i = 0; i < j->n; i++)
		if (!j->answered[i] && inet_addr_eq(&j->eps[i], from))
			break;
	if (i == j->n)
		return; /* not asked, or a duplicate */
	j->answered[i] = true;
	j->res.answered++;
	j->res.completed += completed;
	j->res.failed += failed;
	if (!ok && j->res.status == 0) {
		char a[INET_ADDR_STRLEN];
		j->res.status = -1;
		snprintf(j->res.error, sizeof(j->res.error),
			 "paxos repair on %s failed: %s",
			 inet_addr_format(from, a, sizeof(a)),
			 error && *error ? error : "rounds failed");
	}
	if (j->res.answered == j->n) {
		j->finishing = true;
		env_timer_arm(pc->env, j->timer, 0);
	}
}

/* ---- the participant ------------------------------------------------------
 */

static void serve_done(void *darg, int status, uint64_t completed,
		       uint64_t failed)
{
	struct pc_serve *s = darg;
	struct paxos_cleanup *pc = s->pc;
	for (struct pc_serve **pp = &pc->serves; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	bool ok = status == 0 && failed == 0;
	char error[96] = "";
	if (!ok)
		snprintf(error, sizeof(error),
			 "%llu of its unfinished proposals could not be "
			 "finished",
			 (unsigned long long)(failed ? failed : 1));
	if (s->self) {
		job_answer(pc, s->id, &pc->self, ok, completed, failed, error);
	} else {
		Cassini__Paxos__PaxosCleanupRsp r =
			CASSINI__PAXOS__PAXOS_CLEANUP_RSP__INIT;
		r.id = s->id;
		r.ok = ok;
		r.completed = completed;
		r.failed = failed;
		r.error = error;
		size_t n = protobuf_c_message_get_packed_size(&r.base);
		uint8_t *b = malloc(n ? n : 1);
		if (b) {
			protobuf_c_message_pack(&r.base, b);
			env_send(pc->env, &s->from, PAXOS_VERB_CLEANUP_RSP, b,
				 n);
			free(b);
		}
	}
	free(s);
}

static void serve(struct paxos_cleanup *pc, const struct inet_addr *from,
		  uint64_t id, bool self, const char *keyspace,
		  const struct paxos_range *r, size_t nr)
{
	struct pc_serve *s = zcalloc(1, sizeof(*s));
	if (!s) {
		if (self)
			job_answer(pc, id, from, false, 0, 0, "out of memory");
		return; /* a remote coordinator times out */
	}
	*s = (struct pc_serve){.pc = pc, .from = *from, .id = id, .self = self};
	s->next = pc->serves;
	pc->serves = s;
	if (!pc->local) {
		serve_done(s, -1, 0, 0);
		return;
	}
	pc->local(pc->local_arg, keyspace, r, nr, serve_done, s);
}

void paxos_cleanup_receive(struct paxos_cleanup *pc,
			   const struct inet_addr *from, uint32_t verb,
			   const uint8_t *msg, size_t len)
{
	if (verb == PAXOS_VERB_CLEANUP) {
		Cassini__Paxos__PaxosCleanupReq *q =
			cassini__paxos__paxos_cleanup_req__unpack(NULL, len,
								  msg);
		if (!q)
			return;
		size_t ks = q->keyspace ? strlen(q->keyspace) : 0;
		if (q->n_lefts == q->n_rights &&
		    q->n_lefts <= CLEANUP_RANGES_MAX && ks > 0 &&
		    ks <= CLEANUP_KEYSPACE_MAX) {
			struct paxos_range *r =
				calloc(q->n_lefts ? q->n_lefts : 1, sizeof(*r));
			if (r) {
				for (size_t i = 0; i < q->n_lefts; i++)
					r[i] = (struct paxos_range){
						q->lefts[i], q->rights[i]};
				serve(pc, from, q->id, false, q->keyspace, r,
				      q->n_lefts);
				free(r);
			}
		}
		cassini__paxos__paxos_cleanup_req__free_unpacked(q, NULL);
		return;
	}
	if (verb != PAXOS_VERB_CLEANUP_RSP)
		return;
	Cassini__Paxos__PaxosCleanupRsp *r =
		cassini__paxos__paxos_cleanup_rsp__unpack(NULL, len, msg);
	if (!r)
		return;
	job_answer(pc, r->id, from, r->ok, r->completed, r->failed, r->error);
	cassini__paxos__paxos_cleanup_rsp__free_unpacked(r, NULL);
}

/* ---- the coordinator ------------------------------------------------------
 */

int paxos_cleanup_start(struct paxos_cleanup *pc, const char *keyspace,
			const struct paxos_range *r, size_t nr,
			const struct inet_addr *eps, size_t ne,
			uint64_t timeout_ms, paxos_cleanup_cb done, void *arg)
{
	size_t ks = strlen(keyspace);
	if (ks == 0 || ks > CLEANUP_KEYSPACE_MAX || nr > CLEANUP_RANGES_MAX)
		return err_set(ERR_INVALID, "paxos cleanup: bad request");
	struct pc_job *j = calloc(1, sizeof(*j));
	int64_t *lefts = calloc(nr ? nr : 1, sizeof(*lefts));
	int64_t *rights = calloc(nr ? nr : 1, sizeof(*rights));
	if (!j || !lefts || !rights ||
	    !(j->eps = calloc(ne ? ne : 1, sizeof(*j->eps))) ||
	    !(j->answered = calloc(ne ? ne : 1, sizeof(*j->answered))) ||
	    !(j->timer = env_timer_new(pc->env, job_fire, j))) {
		if (j) {
			free(j->eps);
			free(j->answered);
			free(j);
		}
		free(lefts);
		free(rights);
		return err_set(ERR_NOMEM, "paxos cleanup");
	}
	j->pc = pc;
	j->id = pc->next_id++;
	j->n = ne;
	j->res.asked = ne;
	j->timeout_ms = timeout_ms;
	j->done = done;
	j->arg = arg;
	memcpy(j->eps, eps, ne * sizeof(*eps));
	j->next = pc->jobs;
	pc->jobs = j;
	for (size_t i = 0; i < nr; i++) {
		lefts[i] = r[i].left;
		rights[i] = r[i].right;
	}
	Cassini__Paxos__PaxosCleanupReq q =
		CASSINI__PAXOS__PAXOS_CLEANUP_REQ__INIT;
	q.id = j->id;
	q.keyspace = (char *)keyspace;
	q.n_lefts = q.n_rights = nr;
	q.lefts = lefts;
	q.rights = rights;
	size_t n = protobuf_c_message_get_packed_size(&q.base);
	uint8_t *b = malloc(n ? n : 1);
	if (b)
		protobuf_c_message_pack(&q.base, b);
	free(lefts);
	free(rights);
	env_timer_arm(pc->env, j->timer, timeout_ms * 1000);
	uint64_t id = j->id;
	bool mine = false;
	for (size_t i = 0; i < ne; i++) {
		if (inet_addr_eq(&eps[i], &pc->self)) {
			mine = true;
			continue;
		}
		if (b)
			env_send(pc->env, &eps[i], PAXOS_VERB_CLEANUP, b, n);
	}
	free(b);
	if (ne == 0) {
		j->finishing = true;
		env_timer_arm(pc->env, j->timer, 0);
	} else if (mine) {
		/* our share last: it may answer inline, even end the job */
		serve(pc, &pc->self, id, true, keyspace, r, nr);
	}
	return 0;
}

void paxos_cleanup_cancel(struct paxos_cleanup *pc, paxos_cleanup_cb done,
			  void *arg)
{
	for (struct pc_job **pp = &pc->jobs; *pp;) {
		struct pc_job *j = *pp;
		if (j->done == done && j->arg == arg) {
			*pp = j->next;
			job_free(j);
		} else {
			pp = &j->next;
		}
	}
}
