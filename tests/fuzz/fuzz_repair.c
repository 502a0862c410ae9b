/* libFuzzer: repair's wire form and its handlers. The first byte picks a
 * decoder (Merkle tree, request, response, node list) or a verb (VALIDATE
 * .. TREE_RSP) fed to a live repair
 * object over a simulated env: a participant with a small in-memory store
 * (so scans find rows), and the coordinator of a session waiting for a
 * peer that never answers, so fuzzed answers from that peer reach every
 * step of the session. */
#include "common/log.h"
#include "repair/merkle.h"
#include "repair/repair.h"
#include "repair/repair_internal.h"
#include "tests/sim/sim.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sim *sim;
static struct repair *r;
static struct storage_table_meta *meta;
static struct storage_mutation *parts[8];
static size_t nparts;
static struct inet_addr self, peer;
static bool running;

static void noop(void *arg, int status, enum err_code code)
{
	(void)arg;
	(void)status;
	(void)code;
}

static int mem_apply(void *s, const struct storage_mutation *m,
		     storage_done_fn done, void *arg)
{
	(void)s;
	(void)m;
	done(arg, 0, ERR_NONE);
	return 0;
}

static void mem_scan(void *s, const uint8_t id[16], int64_t start, int64_t end,
		     repair_scan_each_fn each, storage_done_fn done, void *arg)
{
	(void)s;
	(void)id;
	for (size_t i = 0; i < nparts; i++) {
		int64_t t = storage_mutation_token(parts[i]);
		if (t > start && t <= end && each(arg, parts[i])) {
			done(arg, -1, ERR_NOMEM);
			return;
		}
	}
	done(arg, 0, ERR_NONE);
}

static const struct storage_table_meta *mem_meta(void *s, const uint8_t id[16])
{
	(void)s;
	return memcmp(id, meta->id, 16) ? NULL : storage_table_meta_ref(meta);
}

static const struct repair_store_ops ops = {
	.apply = mem_apply, .scan = mem_scan, .meta = mem_meta};

static void on_done(void *arg, const struct repair_summary *s)
{
	(void)arg;
	(void)s;
	running = false;
}

static void start_session(void)
{
	struct inet_addr reps[2] = {self, peer};
	struct repair_table t = {.name = "ks.t"};
	memcpy(t.id, meta->id, 16);
	struct repair_range rg = {.start = INT64_MIN,
				  .end = INT64_MIN,
				  .replicas = reps,
				  .nreplicas = 2};
	struct repair_request q = {
		.tables = &t, .ntables = 1, .ranges = &rg, .nranges = 1};
	running = repair_start(r, &q, NULL, on_done, NULL, NULL) == 0;
}

static void setup(void)
{
	inet_addr_parse("127.0.0.1", 7000, &self);
	inet_addr_parse("127.0.0.2", 7000, &peer);
	log_set_level(LOG_LEVEL_ERROR);
	sim = sim_new(1, 1760000000000000LL);
	struct env *e = sim_env_new(sim, &self);
	uint8_t id[16] = {0}; /* all zero: easy for the fuzzer to hit */
	meta = storage_table_meta_new("ks", "t", id);
	struct storage_type text = {.kind = STORAGE_TYPE_TEXT};
	storage_table_meta_add_column(meta, "k", STORAGE_COLUMN_PARTITION_KEY,
				      &text, false);
	storage_table_meta_add_column(meta, "v", STORAGE_COLUMN_REGULAR, &text,
				      false);
	for (int i = 0; i < 8; i++) {
		char k[2] = {(char)('a' + i), 0};
		struct storage_mutation *m =
			storage_mutation_new(meta, (uint8_t *)k, 1);
		storage_mutation_put(m, 1, NULL, 0, (uint8_t *)"v", 1, i + 1, 0,
				     1760000000);
		if (i == 3)
			storage_mutation_delete_partition(m, 100, 1760000000);
		parts[nparts++] = m;
	}
	struct repair_options o;
	repair_options_default(&o);
	o.self = self;
	o.validate_timeout_ms = 50;
	o.request_timeout_ms = 50;
	o.session_space = 1 << 16;
	r = repair_new(e, &o, &ops, NULL);
	(void)noop;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!r)
		setup();
	if (!running)
		start_session();
	if (size < 2)
		return 0;
	struct repair_msg m;
	switch (data[0] % 5) {
	case 0: {
		struct merkle_tree *t = merkle_decode(data + 1, size - 1);
		merkle_delete(t);
		break;
	}
	case 1:
		repair_msg_unpack_request(data + 1, size - 1, &m);
		repair_msg_free(&m);
		break;
	case 2:
		repair_msg_unpack_response(data + 1, size - 1, &m);
		repair_msg_free(&m);
		break;
	case 3:
		repair_receive(r, data[1] & 1 ? &peer : &self,
			       REPAIR_VERB_FIRST +
				       data[1] % (REPAIR_VERB_LAST -
						  REPAIR_VERB_FIRST + 1),
			       data + 2, size - 2);
		break;
	default: {
		uint32_t *v;
		size_t n;
		if (repair_nodes_decode(data + 2, size - 2, data[1] % 24, &v,
					&n) == 0) {
			for (size_t i = 1; i < n; i++)
				if (v[i] <= v[i - 1])
					__builtin_trap();
			free(v);
		}
		break;
	}
	}
	sim_run_for(sim, 20000);
	return 0;
}
