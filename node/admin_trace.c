/*
 * The admin port's trace commands, nodetool's names and words:
 * `gettraceprobability` and `settraceprobability <0..1>` (the share of
 * statements traced without the client asking, node/node_trace.h). Not
 * saved: a restart starts at 0, as Cassandra's does.
 */
#include "common/buf.h"
#include "common/log.h"
#include "node/admin.h"
#include "node/cql_service.h"
#include "node/node_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Java's Double.toString for the values a probability takes: "0.0",
 * "0.5", "1.0", "0.001". */
static void format_probability(double p, char *out, size_t cap)
{
	snprintf(out, cap, "%.17g", p);
	/* the shortest text that reads back as p */
	for (int prec = 1; prec <= 17; prec++) {
		char t[40];
		snprintf(t, sizeof(t), "%.*g", prec, p);
		if (strtod(t, NULL) == p) {
			snprintf(out, cap, "%s", t);
			break;
		}
	}
	if (!strpbrk(out, ".e"))
		strncat(out, ".0", cap - strlen(out) - 1);
}

static int cmd_gettraceprobability(void *arg, size_t argc,
				   const char *const *argv, struct buf *out,
				   struct buf *err)
{
	(void)argv;
	struct node *n = arg;
	if (argc != 0) {
		admin_printf(err, "usage: gettraceprobability\n");
		return 1;
	}
	if (!n->cql) {
		admin_printf(err, "error: this node serves no data\n");
		return 2;
	}
	char p[40];
	format_probability(cql_service_trace_probability(n->cql), p, sizeof(p));
	admin_printf(out, "Current trace probability: %s\n", p);
	return 0;
}

static int cmd_settraceprobability(void *arg, size_t argc,
				   const char *const *argv, struct buf *out,
				   struct buf *err)
{
	(void)out;
	struct node *n = arg;
	if (argc != 1) {
		admin_printf(err, "settraceprobability requires a trace "
				  "probability\n");
		return 1;
	}
	char *end = NULL;
	errno = 0;
	double p = strtod(argv[0], &end);
	if (end == argv[0] || *end || errno) {
		admin_printf(err, "error: not a number: %s\n", argv[0]);
		return 1;
	}
	if (!(p >= 0 && p <= 1)) {
		admin_printf(err, "Trace probability must be between 0 and "
				  "1\n");
		return 1;
	}
	if (!n->cql || cql_service_set_trace_probability(n->cql, p) != 0) {
		admin_printf(err, "error: this node serves no clients\n");
		return 2;
	}
	LOG_INFO("trace probability set to %g", p);
	return 0;
}

int node_admin_register_trace(struct node *n)
{
	if (admin_register(n->admin, "gettraceprobability",
			   "gettraceprobability   the share of statements "
			   "traced unasked",
			   cmd_gettraceprobability, n) != 0)
		return -1;
	return admin_register(n->admin, "settraceprobability",
			      "settraceprobability <0..1>  set it (0: off)",
			      cmd_settraceprobability, n);
}
