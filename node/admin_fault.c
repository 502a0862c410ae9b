/*
 * Fault injection for test clusters: `netfault` (WAN links: delay, jitter,
 * loss, rate, flapping, on the internode messages this node sends to chosen
 * peers; node/netfault.h) and `clockskew` (an offset on this node's wall
 * clock through the env seam), `indexbuildfault hold|release` (while
 * held an index build waits before its first SSTable: tests see an index
 * building), `compactionfault hold|release` (while held a major
 * compaction waits before its merge: tests see the tool wait). They act
 * only
 * when node.yaml says
 * `test_fault_injection: true`; otherwise they answer why not, exit 1.
 * `scripts/cluster link` and `clockskew` drive them on every node concerned.
 */
#define LOG_MODULE "admin"
#include "common/env_real.h"
#include "common/err.h"
#include "common/log.h"
#include "conf/conf.h"
#include "node/admin.h"
#include "node/cql_cas.h"
#include "node/cql_service.h"
#include "node/node_internal.h"
#include "node/transport.h"
#include "storage/storage.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TARGETS 256

#define NETFAULT_USAGE                                                         \
	"netfault set ADDR[,ADDR...] [--delay D] [--jitter J] [--loss P%] "    \
	"[--rate R] [--flap DOWN/PERIOD] | netfault clear [ADDR[,ADDR...]] "   \
	"| netfault status"
#define CLOCKSKEW_USAGE "clockskew set [-]OFFSET | clockskew clear | clockskew"

static bool refuse_unless_enabled(struct node *n, struct buf *err)
{
	if (n->conf.test_fault_injection)
		return false;
	admin_printf(err, "fault injection is off on this node (it is for test "
			  "clusters: set test_fault_injection: true in "
			  "node.yaml)\n");
	return true;
}

/* "a,b:7001,c" into addresses (the storage port by default). */
static int parse_targets(struct node *n, const char *text,
			 struct inet_addr *out, size_t *count)
{
	*count = 0;
	char *copy = strdup(text);
	if (!copy)
		return err_set(ERR_NOMEM, "addresses");
	int rc = 0;
	char *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (*count == MAX_TARGETS) {
			rc = err_set(ERR_INVALID, "at most %d addresses",
				     MAX_TARGETS);
			break;
		}
		if (inet_addr_parse(tok, (uint16_t)n->conf.storage_port,
				    &out[*count]) != 0) {
			rc = err_set(ERR_INVALID, "'%s': %s", tok, err_msg());
			break;
		}
		(*count)++;
	}
	free(copy);
	if (rc == 0 && *count == 0)
		rc = err_set(ERR_INVALID, "no address in '%s'", text);
	return rc;
}

static int cmd_netfault(void *arg, size_t argc, const char *const *argv,
			struct buf *out, struct buf *err)
{
	struct node *n = arg;
	if (refuse_unless_enabled(n, err))
		return 1;
	struct inet_addr targets[MAX_TARGETS];
	size_t count = 0;
	if (argc == 0 || strcmp(argv[0], "status") == 0) {
		if (transport_fault_describe(n->transport, out) != 0) {
			admin_printf(err, "%s\n", err_msg());
			return 1;
		}
		if (out->len == 0)
			admin_printf(out, "no faulty links\n");
		return 0;
	}
	if (strcmp(argv[0], "set") == 0 && argc >= 2) {
		struct netfault_link l;
		if (parse_targets(n, argv[1], targets, &count) != 0 ||
		    netfault_parse(argc - 2, argv + 2, &l) != 0) {
			admin_printf(err, "netfault: %s\nusage: %s\n",
				     err_msg(), NETFAULT_USAGE);
			return 1;
		}
		for (size_t i = 0; i < count; i++)
			if (transport_fault_set(n->transport, &targets[i],
						&l) != 0) {
				admin_printf(err, "netfault: %s\n", err_msg());
				return 1;
			}
		LOG_WARN("test fault injection: links to %s set (delay %" PRIu64
			 " us, jitter %" PRIu64
			 " us, loss %u ppm, rate %" PRIu64
			 " bit/s, flap %" PRIu64 "/%" PRIu64 " us)",
			 argv[1], l.delay_us, l.jitter_us, l.loss_ppm,
			 l.rate_bps, l.flap_down_us, l.flap_period_us);
		admin_printf(out, "%zu links set\n", count);
		return 0;
	}
	if (strcmp(argv[0], "clear") == 0 && argc <= 2) {
		int gone = 0;
		if (argc == 2) {
			if (parse_targets(n, argv[1], targets, &count) != 0) {
				admin_printf(err, "netfault: %s\n", err_msg());
				return 1;
			}
			for (size_t i = 0; i < count; i++)
				gone += transport_fault_clear(n->transport,
							      &targets[i]);
		} else {
			gone = transport_fault_clear(n->transport, NULL);
		}
		LOG_WARN("test fault injection: %d links cleared", gone);
		admin_printf(out, "%d links cleared\n", gone);
		return 0;
	}
	admin_printf(err, "usage: %s\n", NETFAULT_USAGE);
	return 1;
}

static void print_offset(struct buf *out, int64_t us)
{
	admin_printf(out, "wall clock offset: %+.3f s\n", (double)us / 1e6);
}

static int cmd_clockskew(void *arg, size_t argc, const char *const *argv,
			 struct buf *out, struct buf *err)
{
	struct node *n = arg;
	if (refuse_unless_enabled(n, err))
		return 1;
	if (argc == 0 || (argc == 1 && strcmp(argv[0], "status") == 0)) {
		print_offset(out, env_real_wall_offset(n->env));
		return 0;
	}
	int64_t us;
	if (argc == 1 && strcmp(argv[0], "clear") == 0) {
		us = 0;
	} else if (argc == 2 && strcmp(argv[0], "set") == 0) {
		const char *v = argv[1];
		bool neg = *v == '-';
		uint64_t ms;
		if (*v == '-' || *v == '+')
			v++;
		if (conf_parse_duration_ms(v, &ms) != 0) {
			admin_printf(err, "clockskew: '%s': %s\n", argv[1],
				     err_msg());
			return 1;
		}
		if (ms > 365ull * 86400 * 1000) {
			admin_printf(err, "clockskew: '%s': at most a year\n",
				     argv[1]);
			return 1;
		}
		us = (neg ? -1 : 1) * (int64_t)ms * 1000;
	} else {
		admin_printf(err, "usage: %s\n", CLOCKSKEW_USAGE);
		return 1;
	}
	env_real_set_wall_offset(n->env, us);
	LOG_WARN("test fault injection: wall clock offset %+.3f s",
		 (double)us / 1e6);
	print_offset(out, us);
	return 0;
}

#define PAXOSFAULT_USAGE "paxosfault propose-self-only on|off"

/* paxos_test_propose_self_only: this node's own LWT proposals reach only
 * itself, so each is left accepted by one replica and unfinished. */
static int cmd_paxosfault(void *arg, size_t argc, const char *const *argv,
			  struct buf *out, struct buf *err)
{
	struct node *n = arg;
	if (refuse_unless_enabled(n, err))
		return 1;
	if (argc != 2 || strcmp(argv[0], "propose-self-only") != 0 ||
	    (strcmp(argv[1], "on") != 0 && strcmp(argv[1], "off") != 0)) {
		admin_printf(err, "usage: " PAXOSFAULT_USAGE "\n");
		return 1;
	}
	if (!n->cql) {
		admin_printf(err, "no data path on this node\n");
		return 2;
	}
	bool on = strcmp(argv[1], "on") == 0;
	node_cas_test_propose_self_only(cql_service_cas(n->cql), on);
	LOG_WARN("test fault injection: paxos proposals to self only %s",
		 on ? "on" : "off");
	admin_printf(out, "propose-self-only %s\n", on ? "on" : "off");
	return 0;
}

#define INDEXBUILDFAULT_USAGE "indexbuildfault hold|release|fail|ok"

/* While held an index build waits before its first SSTable, so a test
 * sees an index building (queries refused, sai_column_indexes,
 * compactionstats) for as long as it needs; `fail` makes builds fail (an
 * I/O error at their first SSTable) until `ok`. */
static int cmd_indexbuildfault(void *arg, size_t argc, const char *const *argv,
			       struct buf *out, struct buf *err)
{
	struct node *n = arg;
	if (refuse_unless_enabled(n, err))
		return 1;
	if (argc != 1 ||
	    (strcmp(argv[0], "hold") != 0 && strcmp(argv[0], "release") != 0 &&
	     strcmp(argv[0], "fail") != 0 && strcmp(argv[0], "ok") != 0)) {
		admin_printf(err, "usage: " INDEXBUILDFAULT_USAGE "\n");
		return 1;
	}
	if (!n->cql) {
		admin_printf(err, "no data path on this node\n");
		return 2;
	}
	if (strcmp(argv[0], "fail") == 0 || strcmp(argv[0], "ok") == 0) {
		bool fail = strcmp(argv[0], "fail") == 0;
		storage_index_builds_fail(cql_service_storage(n->cql), fail);
		LOG_WARN("test fault injection: index builds %s",
			 fail ? "fail" : "no longer fail");
		admin_printf(out, "index builds %s\n",
			     fail ? "fail" : "no longer fail");
		return 0;
	}
	bool hold = strcmp(argv[0], "hold") == 0;
	storage_index_builds_hold(cql_service_storage(n->cql), hold);
	LOG_WARN("test fault injection: index builds %s",
		 hold ? "held" : "released");
	admin_printf(out, "index builds %s\n", hold ? "held" : "released");
	return 0;
}

#define COMPACTIONFAULT_USAGE "compactionfault hold|release"

/* While held a major compaction (cassini-tool compact) waits before its
 * merge, so a test sees the tool wait for a compaction as long as it
 * needs. */
static int cmd_compactionfault(void *arg, size_t argc, const char *const *argv,
			       struct buf *out, struct buf *err)
{
	struct node *n = arg;
	if (refuse_unless_enabled(n, err))
		return 1;
	if (argc != 1 ||
	    (strcmp(argv[0], "hold") != 0 && strcmp(argv[0], "release") != 0)) {
		admin_printf(err, "usage: " COMPACTIONFAULT_USAGE "\n");
		return 1;
	}
	if (!n->cql) {
		admin_printf(err, "no data path on this node\n");
		return 2;
	}
	bool hold = strcmp(argv[0], "hold") == 0;
	storage_compactions_hold(cql_service_storage(n->cql), hold);
	LOG_WARN("test fault injection: major compactions %s",
		 hold ? "held" : "released");
	admin_printf(out, "major compactions %s\n", hold ? "held" : "released");
	return 0;
}

int node_admin_register_faults(struct node *n)
{
	if (n->conf.test_fault_injection &&
	    transport_enable_faults(n->transport) != 0)
		return -1;
	if (admin_register(n->admin, "netfault",
			   NETFAULT_USAGE "  (test clusters) WAN faults on "
					  "internode links from this node",
			   cmd_netfault, n) != 0 ||
	    admin_register(n->admin, "clockskew",
			   CLOCKSKEW_USAGE "  (test clusters) offset this "
					   "node's wall clock",
			   cmd_clockskew, n) != 0 ||
	    admin_register(n->admin, "paxosfault",
			   PAXOSFAULT_USAGE "  (test clusters) leave this "
					    "node's LWT proposals unfinished",
			   cmd_paxosfault, n) != 0 ||
	    admin_register(n->admin, "indexbuildfault",
			   INDEXBUILDFAULT_USAGE "  (test clusters) hold "
						 "index builds back",
			   cmd_indexbuildfault, n) != 0 ||
	    admin_register(n->admin, "compactionfault",
			   COMPACTIONFAULT_USAGE "  (test clusters) hold "
						 "major compactions back",
			   cmd_compactionfault, n) != 0)
		return -1;
	return 0;
}
