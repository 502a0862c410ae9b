/*
 * cassini-tool generatetokens: tokens for a DC planned in advance, as
 * Cassandra's tools/bin/generatetokens (CASSANDRA-16205). Offline: it talks
 * to no node.
 *
 *   cassini-tool generatetokens -n NODES [-t TOKENS] [--rf RF]
 *                [--racks N1,N2,...] [--seed S] [--tries K]
 *
 * Nodes go round robin over the racks in the order they are to start
 * (Cassandra's order: rack1, rack2, ..., skipping racks that are full).
 * Each node's line is its initial_token; the table after them gives the
 * balance the DC has as each node joins (docs/operations.md).
 */
#include "node/tools/tool_tokens.h"

#include "common/err.h"
#include "ring/ring.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_TOKENS 16
#define DEFAULT_RF     3
#define DEFAULT_TRIES  4
#define SMALL_DC       16 /* more nodes: one try unless told (see usage) */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cassini-tool generatetokens -n NODES [-t TOKENS] "
		"[--rf RF]\n"
		"                    [--racks N1,N2,...] [--seed S] "
		"[--tries K]\n"
		"\n"
		"Tokens for a datacenter whose nodes start one at a time in "
		"a known order:\n"
		"each node's line is its initial_token. Nodes go round robin "
		"over the racks\n"
		"(--racks: nodes per rack, adding up to NODES; default one "
		"rack). Defaults:\n"
		"-t %d, --rf %d, --seed 1, --tries %d up to %d nodes, 1 "
		"above (growths tried,\n"
		"the most even kept; a growth of 48 nodes takes about 45 s).\n",
		DEFAULT_TOKENS, DEFAULT_RF, DEFAULT_TRIES, SMALL_DC);
}

/* A progress line on a terminal: a large plan takes minutes. */
struct progress {
	size_t nodes;
	unsigned tries;
	bool shown;
};

static void show_progress(void *arg, unsigned try_, size_t joined)
{
	struct progress *p = arg;
	fprintf(stderr, "\rplanning: try %u of %u, node %zu of %zu ", try_,
		p->tries, joined, p->nodes);
	p->shown = true;
}

/* A whole decimal number in [lo, hi], or -1 with a message. */
static long number(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr,
			"cassini-tool generatetokens: %s must be a number "
			"from %ld to %ld, not '%s'\n",
			opt, lo, hi, s);
		return -1;
	}
	return v;
}

/* Parses "2,2,1,1" into counts[]; returns how many racks, or 0. */
static size_t parse_racks(const char *s, size_t *counts, size_t cap)
{
	size_t n = 0;
	while (*s) {
		char *end;
		errno = 0;
		long v = strtol(s, &end, 10);
		if (errno || end == s || v < 1 || v > RING_PLAN_NODES_MAX ||
		    (*end && (*end != ',' || !end[1])) || n == cap) {
			fprintf(stderr,
				"cassini-tool generatetokens: --racks wants "
				"node counts per rack, each at least 1, "
				"separated by commas (as 2,2,1,1)\n");
			return 0;
		}
		counts[n++] = (size_t)v;
		s = *end ? end + 1 : end;
	}
	if (!n)
		fprintf(stderr,
			"cassini-tool generatetokens: --racks is empty\n");
	return n;
}

/* "2+2+1+1": the nodes per rack once the first `upto` nodes joined. */
static void layout(const size_t *rack_of, size_t upto, size_t nracks, char *out,
		   size_t cap)
{
	size_t have[RING_PLAN_NODES_MAX] = {0}, len = 0;
	for (size_t i = 0; i < upto; i++)
		have[rack_of[i]]++;
	out[0] = 0;
	for (size_t r = 0; r < nracks && len < cap; r++) {
		if (!have[r])
			continue;
		len += (size_t)snprintf(out + len, cap - len, "%s%zu",
					len ? "+" : "", have[r]);
	}
}

static void print_plan(const size_t *rack_of, char (*names)[16], size_t nodes,
		       size_t nracks, int rf, size_t ntok, int64_t *tokens,
		       const double *spread)
{
	for (size_t i = 0; i < nodes; i++) {
		printf("node%zu %s:", i + 1, names[rack_of[i]]);
		/* ascending, as Cassandra prints them */
		int64_t *t = tokens + i * ntok;
		for (size_t a = 1; a < ntok; a++)
			for (size_t b = a; b > 0 && t[b - 1] > t[b]; b--) {
				int64_t x = t[b];
				t[b] = t[b - 1];
				t[b - 1] = x;
			}
		for (size_t k = 0; k < ntok; k++)
			printf("%s%lld", k ? "," : " ", (long long)t[k]);
		printf("\n");
	}
	printf("\nBalance as the nodes join (max/min - 1 of replicated "
	       "ownership, RF %d):\n",
	       rf);
	printf("%5s  %-16s %7s\n", "nodes", "racks", "spread");
	size_t count[RING_PLAN_NODES_MAX] = {0};
	for (size_t i = 0; i < nodes; i++) {
		char lay[64];
		bool eq;
		count[rack_of[i]]++;
		layout(rack_of, i + 1, nracks, lay, sizeof(lay));
		double fl = ring_balance_floor(count, nracks, rf, &eq);
		printf("%5zu  %-16s %6.1f%%", i + 1, lay, 100 * spread[i]);
		if (eq)
			printf("  (%d unequal racks: at least %.1f%% whatever "
			       "the tokens)",
			       rf, 100 * fl);
		else if (fl > 0.10)
			printf("  (at least %.1f%% whatever the tokens)",
			       100 * fl);
		printf("\n");
	}
}

int tool_generatetokens(int argc, char **argv)
{
	long nodes = 0, ntok = DEFAULT_TOKENS, rf = DEFAULT_RF;
	long seed = 1, tries = 0; /* 0: by size */
	const char *racks_arg = NULL;
	for (int i = 0; i < argc; i++) {
		const char *o = argv[i];
		if (strcmp(o, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (i + 1 == argc) {
			usage(stderr);
			return 1;
		}
		const char *v = argv[++i];
		if (strcmp(o, "-n") == 0 || strcmp(o, "--nodes") == 0)
			nodes = number("--nodes", v, 1, RING_PLAN_NODES_MAX);
		else if (strcmp(o, "-t") == 0 || strcmp(o, "--tokens") == 0)
			ntok = number("--tokens", v, 1, RING_TOKENS_MAX);
		else if (strcmp(o, "--rf") == 0)
			rf = number("--rf", v, 1, 32);
		else if (strcmp(o, "--seed") == 0)
			seed = number("--seed", v, 0, 1L << 31);
		else if (strcmp(o, "--tries") == 0)
			tries = number("--tries", v, 1, 100);
		else if (strcmp(o, "--racks") == 0)
			racks_arg = v;
		else {
			fprintf(stderr,
				"cassini-tool generatetokens: unknown option "
				"'%s'\n",
				o);
			usage(stderr);
			return 1;
		}
		if (nodes < 0 || ntok < 0 || rf < 0 || seed < 0 || tries < 0)
			return 1;
	}
	if (!nodes) {
		fprintf(stderr, "cassini-tool generatetokens: -n NODES is "
				"required\n");
		return 1;
	}
	size_t counts[RING_PLAN_NODES_MAX], nracks = 1;
	counts[0] = (size_t)nodes;
	if (racks_arg) {
		nracks = parse_racks(racks_arg, counts, RING_PLAN_NODES_MAX);
		if (!nracks)
			return 1;
		size_t sum = 0;
		for (size_t r = 0; r < nracks; r++)
			sum += counts[r];
		if (sum != (size_t)nodes) {
			fprintf(stderr,
				"cassini-tool generatetokens: --racks adds up "
				"to %zu nodes, not %ld\n",
				sum, nodes);
			return 1;
		}
	}
	/* round robin over the racks that still have nodes to start */
	size_t rack_of[RING_PLAN_NODES_MAX], left[RING_PLAN_NODES_MAX];
	static char names[RING_PLAN_NODES_MAX][16];
	const char *by_node[RING_PLAN_NODES_MAX];
	memcpy(left, counts, nracks * sizeof(*left));
	for (size_t r = 0, i = 0; i < (size_t)nodes; r = (r + 1) % nracks) {
		if (!left[r])
			continue;
		left[r]--;
		rack_of[i++] = r;
	}
	for (size_t r = 0; r < nracks; r++)
		snprintf(names[r], sizeof(names[r]), "rack%zu", r + 1);
	int rc = 1;
	int64_t *tokens =
		malloc((size_t)nodes * (size_t)ntok * sizeof(*tokens));
	double *spread = malloc((size_t)nodes * sizeof(*spread));
	if (!tokens || !spread) {
		fprintf(stderr, "cassini-tool generatetokens: out of memory\n");
		goto out;
	}
	for (size_t i = 0; i < (size_t)nodes; i++)
		by_node[i] = names[rack_of[i]];
	printf("Tokens for %ld nodes with %ld tokens each, RF %ld, %zu "
	       "rack%s; start the nodes in this order, each with its line "
	       "as initial_token:\n",
	       nodes, ntok, rf, nracks, nracks == 1 ? "" : "s");
	fflush(stdout);
	if (!tries)
		tries = nodes <= SMALL_DC ? DEFAULT_TRIES : 1;
	struct progress pg = {.nodes = (size_t)nodes, .tries = (unsigned)tries};
	struct ring_plan_progress pr = {.each = show_progress, .arg = &pg};
	int planned = ring_tokens_plan(
		by_node, (size_t)nodes, (int)rf, (size_t)ntok, (uint64_t)seed,
		(unsigned)tries, isatty(STDERR_FILENO) ? &pr : NULL, tokens,
		spread);
	if (pg.shown)
		fprintf(stderr, "\r%40s\r", "");
	if (planned != 0) {
		fprintf(stderr, "cassini-tool generatetokens: %s\n", err_msg());
		goto out;
	}
	print_plan(rack_of, names, (size_t)nodes, nracks, (int)rf, (size_t)ntok,
		   tokens, spread);
	rc = 0;
out:
	free(tokens);
	free(spread);
	return rc;
}
