/*
 * The repair suites' simulated cluster (repair_cluster.h).
 */
#include "tests/sim/repair_cluster.h"

#include "common/err.h"
#include "tests/lib/testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t g_seed;

/* ---- in-memory store ----------------------------------------------------- */

static int mem_apply(void *s, const struct storage_mutation *m,
		     storage_done_fn done, void *arg)
{
	struct mnode *n = s;
	mem_store_apply(&n->store, m);
	done(arg, 0, ERR_NONE);
	return 0;
}

static void mem_scan(void *s, const uint8_t table_id[16], int64_t start,
		     int64_t end, repair_scan_each_fn each,
		     storage_done_fn done, void *arg)
{
	struct mnode *n = s;
	(void)table_id;
	ck_assert_int_lt(start, end);
	if (mem_store_scan(&n->store, start, end, each, arg) != 0) {
		done(arg, -1, err_code());
		return;
	}
	done(arg, 0, ERR_NONE);
}

static const struct storage_table_meta *mem_meta(void *s,
						 const uint8_t table_id[16])
{
	struct mnode *n = s;
	return memcmp(table_id, n->c->meta->id, 16)
		       ? NULL
		       : storage_table_meta_ref(n->c->meta);
}

/* Moves the partitions of `src` whose token `pick` accepts into `dst`;
 * returns how many. */
static uint64_t move_parts(struct mem_store *src, struct mem_store *dst,
			   const struct storage_token_range *r, size_t n)
{
	uint64_t moved = 0;
	size_t keep = 0;
	for (size_t i = 0; i < src->nparts; i++) {
		int64_t t = storage_mutation_token(src->parts[i]);
		bool in = !r;
		for (size_t k = 0; r && k < n; k++)
			in = in || (t > r[k].left && t <= r[k].right);
		if (!in) {
			src->parts[keep++] = src->parts[i];
			continue;
		}
		mem_store_apply(dst, src->parts[i]);
		storage_mutation_delete(src->parts[i]);
		moved++;
	}
	src->nparts = keep;
	return moved;
}

static void mem_prepare(void *s, const uint8_t table_id[16],
			const struct storage_token_range *r, size_t n,
			const uint8_t session[16], uint64_t *marked,
			storage_done_fn done, void *arg)
{
	struct mnode *m = s;
	(void)table_id;
	m->pend.meta = m->rep.meta = m->store.meta;
	memcpy(m->pend_uuid, session, 16);
	*marked = move_parts(&m->store, &m->pend, r, n);
	done(arg, 0, ERR_NONE);
}

static void mem_finish(void *s, const uint8_t table_id[16],
		       const uint8_t session[16], int64_t repaired_at,
		       uint64_t *count, storage_done_fn done, void *arg)
{
	struct mnode *m = s;
	(void)table_id;
	*count = 0;
	if (m->finish_failures > 0) {
		m->finish_failures--;
		err_set(ERR_IO, "injected: repair state");
		done(arg, -1, ERR_IO);
		return;
	}
	if (!memcmp(m->pend_uuid, session, 16))
		*count = move_parts(&m->pend, repaired_at ? &m->rep : &m->store,
				    NULL, 0);
	done(arg, 0, ERR_NONE);
}

static void mem_scan_pending(void *s, const uint8_t table_id[16],
			     const uint8_t session[16], int64_t start,
			     int64_t end, repair_scan_each_fn each,
			     storage_done_fn done, void *arg)
{
	struct mnode *n = s;
	(void)table_id;
	ck_assert_int_lt(start, end);
	ck_assert(!memcmp(n->pend_uuid, session, 16));
	if (mem_store_scan(&n->pend, start, end, each, arg) != 0) {
		done(arg, -1, err_code());
		return;
	}
	done(arg, 0, ERR_NONE);
}

static void mem_apply_pending(void *s, const uint8_t table_id[16],
			      const uint8_t session[16],
			      struct storage_mutation **m, size_t n,
			      storage_done_fn done, void *arg)
{
	struct mnode *x = s;
	(void)table_id;
	ck_assert(!memcmp(x->pend_uuid, session, 16));
	for (size_t i = 0; i < n; i++) {
		mem_store_apply(&x->pend, m[i]);
		storage_mutation_delete(m[i]);
	}
	free(m);
	done(arg, 0, ERR_NONE);
}

static const struct repair_store_ops mem_ops = {
	.apply = mem_apply,
	.scan = mem_scan,
	.meta = mem_meta,
	.prepare = mem_prepare,
	.finish = mem_finish,
	.scan_pending = mem_scan_pending,
	.apply_pending = mem_apply_pending,
};

/* ---- the cluster --------------------------------------------------------- */

void deliver(void *arg, const struct inet_addr *from, uint32_t verb,
	     const uint8_t *msg, size_t len)
{
	struct mnode *n = arg;
	repair_receive(n->repair, from, verb, msg, len);
}

static bool hook_alive(void *arg, const struct inet_addr *ep)
{
	struct mnode *n = arg;
	for (int i = 0; i < NNODES; i++)
		if (inet_addr_eq(&n->c->nodes[i].addr, ep))
			return !n->c->down[i];
	return false;
}

static int64_t hook_incarnation(void *arg, const struct inet_addr *ep)
{
	struct mnode *n = arg;
	for (int i = 0; i < NNODES; i++)
		if (inet_addr_eq(&n->c->nodes[i].addr, ep))
			return n->c->gen[i];
	return 0;
}

static void hook_locals_changed(void *arg)
{
	struct mnode *n = arg;
	buf_clear(&n->saved);
	ck_assert_int_eq(repair_locals_encode(n->repair, &n->saved), 0);
	n->saves++;
}

void start_repair(struct cluster *c, int i)
{
	struct mnode *m = &c->nodes[i];
	struct repair_options o;
	repair_options_default(&o);
	o.self = m->addr;
	o.validate_timeout_ms = 5000;
	o.request_timeout_ms = 5000;
	o.message_bytes = 4096; /* several APPLY messages */
	o.is_alive = hook_alive;
	o.incarnation = hook_incarnation;
	o.alive_arg = m;
	o.locals_changed = hook_locals_changed;
	o.locals_arg = m;
	o.local_timeout_ms = c->local_timeout_ms;
	o.local_check_ms = 1000;
	m->repair = NULL;
	struct repair *r = repair_new(m->env, &o, &mem_ops, m);
	ck_assert_ptr_nonnull(r);
	if (m->saved.len) {
		struct buf b = m->saved; /* load may persist again */
		buf_init(&m->saved);
		m->repair = r;
		ck_assert_int_eq(repair_locals_load(r, b.data, b.len), 0);
		buf_free(&b);
	}
	m->repair = r;
}

struct cluster *cluster_new(void)
{
	struct cluster *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	c->sim = sim_new(g_seed, 1700000000000000LL);
	uint8_t id[16] = {0x4e, 0x9a};
	c->meta = mem_store_table_new(id);
	for (int i = 0; i < NNODES; i++) {
		struct mnode *m = &c->nodes[i];
		m->c = c;
		m->store.meta = c->meta;
		m->addr = sim_node_addr(i);
		m->env = sim_env_new(c->sim, &m->addr);
		env_set_receiver(m->env, deliver, m);
		start_repair(c, i);
	}
	return c;
}

void cluster_delete(struct cluster *c)
{
	for (int i = 0; i < NNODES; i++) {
		repair_delete(c->nodes[i].repair);
		mem_store_clear(&c->nodes[i].store);
		mem_store_clear(&c->nodes[i].pend);
		mem_store_clear(&c->nodes[i].rep);
		buf_free(&c->nodes[i].saved);
	}
	sim_delete(c->sim);
	storage_table_meta_delete(c->meta);
	free(c);
}

/* ---- writes -------------------------------------------------------------- */

void key_of(int k, char *buf, size_t cap)
{
	snprintf(buf, cap, "key%05d", k);
}

struct storage_mutation *mut(struct cluster *c, int k)
{
	char key[32];
	key_of(k, key, sizeof(key));
	struct storage_mutation *m =
		storage_mutation_new(c->meta, (uint8_t *)key, strlen(key));
	ck_assert_ptr_nonnull(m);
	return m;
}

void set_ck(struct storage_mutation *m, int ck)
{
	uint8_t b[4];
	be32_store(b, (uint32_t)ck);
	struct slice s = slice_make(b, 4);
	ck_assert_int_eq(storage_mutation_set_row(m, &s, 1), 0);
}

static void noop_done(void *arg, int status, enum err_code code)
{
	(void)arg;
	ck_assert_int_eq(status, 0);
	(void)code;
}

size_t apply_on(struct cluster *c, int mask, struct storage_mutation *m)
{
	struct buf e;
	buf_init(&e);
	ck_assert_int_eq(storage_mutation_encode(m, &e), 0);
	size_t len = e.len;
	buf_free(&e);
	for (int i = 0; i < NNODES; i++)
		if (mask & (1 << i))
			ck_assert_int_eq(
				mem_apply(&c->nodes[i], m, noop_done, NULL), 0);
	storage_mutation_delete(m);
	return len;
}

size_t put_row(struct cluster *c, int mask, int k, int ck, int64_t ts)
{
	struct storage_mutation *m = mut(c, k);
	set_ck(m, ck);
	char v[100];
	memset(v, 'a' + (int)(ts % 26), sizeof(v));
	ck_assert_int_eq(storage_mutation_put_marker(m, ts, 0, 1700000000), 0);
	ck_assert_int_eq(storage_mutation_put(m, 2, NULL, 0, (uint8_t *)v,
					      sizeof(v), ts, 0, 1700000000),
			 0);
	return apply_on(c, mask, m);
}

size_t delete_row(struct cluster *c, int mask, int k, int ck, int64_t ts)
{
	struct storage_mutation *m = mut(c, k);
	set_ck(m, ck);
	ck_assert_int_eq(storage_mutation_delete_row(m, ts, 1700000000), 0);
	return apply_on(c, mask, m);
}

size_t delete_partition(struct cluster *c, int mask, int k, int64_t ts)
{
	struct storage_mutation *m = mut(c, k);
	ck_assert_int_eq(storage_mutation_delete_partition(m, ts, 1700000000),
			 0);
	return apply_on(c, mask, m);
}

void load(struct cluster *c)
{
	for (int k = 0; k < NKEYS; k++)
		for (int ck = 0; ck < NROWS; ck++)
			put_row(c, ON_ALL, k, ck, 1000);
}

/* ---- checks -------------------------------------------------------------- */

bool part_equal(struct cluster *c, int k)
{
	char key[32];
	key_of(k, key, sizeof(key));
	struct slice ks = slice_make(key, strlen(key));
	uint8_t d0[16] = {0};
	for (int i = 0; i < NNODES; i++) {
		struct storage_mutation **p =
			mem_store_find(&c->nodes[i].store, ks);
		uint8_t d[16] = {0};
		if (p)
			storage_mutation_digest(*p, d);
		if (i == 0)
			memcpy(d0, d, 16);
		else if (memcmp(d, d0, 16))
			return false;
	}
	return true;
}

int unequal_parts(struct cluster *c)
{
	int n = 0;
	for (int k = 0; k < NKEYS; k++)
		n += !part_equal(c, k);
	return n;
}

uint64_t data_bytes(struct mnode *n)
{
	uint64_t b = 0;
	for (size_t i = 0; i < n->store.nparts; i++) {
		struct buf e;
		buf_init(&e);
		ck_assert_int_eq(storage_mutation_encode(n->store.parts[i], &e),
				 0);
		b += e.len;
		buf_free(&e);
	}
	return b;
}

/* ---- running a session --------------------------------------------------- */

void on_progress(void *arg, const char *line)
{
	struct cluster *c = arg;
	c->progress_lines++;
	(void)line;
}

void on_done(void *arg, const struct repair_summary *s)
{
	struct cluster *c = arg;
	ck_assert(!c->done);
	c->done = true;
	c->sum = *s;
	ck_assert_uint_eq(s->npeers, NNODES);
	memcpy(c->peers, s->peers, NNODES * sizeof(*c->peers));
	c->sum.peers = c->peers;
}

bool is_done(void *arg)
{
	return ((struct cluster *)arg)->done;
}

int start(struct cluster *c, int64_t st, int64_t et, bool preview)
{
	struct inet_addr reps[NNODES];
	for (int i = 0; i < NNODES; i++)
		reps[i] = c->nodes[i].addr;
	struct repair_table t = {.name = "ks.t"};
	memcpy(t.id, c->meta->id, 16);
	struct repair_range r = {
		.start = st, .end = et, .replicas = reps, .nreplicas = NNODES};
	struct repair_request q = {.tables = &t,
				   .ntables = 1,
				   .ranges = &r,
				   .nranges = 1,
				   .preview = preview,
				   .incremental = c->incremental,
				   .partial = c->partial};
	c->done = false;
	return repair_start(c->nodes[0].repair, &q, on_progress, on_done, c,
			    &c->session);
}

void run(struct cluster *c, int64_t st, int64_t et, bool preview)
{
	ck_assert_int_eq(start(c, st, et, preview), 0);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
}

uint64_t streamed(struct cluster *c, int i)
{
	for (size_t k = 0; k < c->sum.npeers; k++)
		if (inet_addr_eq(&c->peers[k].addr, &c->nodes[i].addr))
			return c->peers[k].rows_streamed;
	ck_abort_msg("no stats for node %d", i);
	return 0;
}

uint64_t streamed_bytes(struct cluster *c)
{
	uint64_t b = 0;
	for (size_t k = 0; k < c->sum.npeers; k++)
		b += c->peers[k].bytes_streamed;
	return b;
}

uint64_t diverge(struct cluster *c)
{
	uint64_t b = 0;
	for (int k = 10; k < 20; k++)
		b += put_row(c, 1 | 2, k, NROWS + 1, 2000);
	for (int k = 30; k < 35; k++)
		b += put_row(c, 1 | 4, k, 2, 2000);
	for (int k = 50; k < 54; k++)
		b += 2 * delete_row(c, 1, k, 3, 2000);
	b += 2 * delete_partition(c, 2, 70, 2000);
	return b;
}

static void other_done(void *arg, const struct repair_summary *s)
{
	struct other *o = arg;
	o->done = true;
	o->ok = s->ok;
	for (size_t k = 0; k < s->npeers; k++)
		for (int i = 0; i < NNODES; i++)
			if (s->peers[k].addr.ip[3] == i + 1)
				o->fetched[i] = s->peers[k].rows_fetched;
	snprintf(o->error, sizeof(o->error), "%s", s->error);
}

bool other_is_done(void *arg)
{
	return ((struct other *)arg)->done;
}

void start_other(struct cluster *c, int from, int64_t st, int64_t et,
		 struct other *o)
{
	struct inet_addr reps[NNODES];
	for (int i = 0; i < NNODES; i++)
		reps[i] = c->nodes[i].addr;
	struct repair_table t = {.name = "ks.t"};
	memcpy(t.id, c->meta->id, 16);
	struct repair_range r = {
		.start = st, .end = et, .replicas = reps, .nreplicas = NNODES};
	struct repair_request q = {
		.tables = &t, .ntables = 1, .ranges = &r, .nranges = 1};
	memset(o, 0, sizeof(*o));
	ck_assert_int_eq(repair_start(c->nodes[from].repair, &q, NULL,
				      other_done, o, NULL),
			 0);
}

void restart_node(struct cluster *c, int i)
{
	struct mnode *m = &c->nodes[i];
	repair_delete(m->repair);
	sim_env_kill(c->sim, m->env);
	m->env = sim_env_new(c->sim, &m->addr);
	env_set_receiver(m->env, deliver, m);
	c->gen[i]++;
	start_repair(c, i);
}
