/*
 * Test driver for ring/: reads a topology and queries on stdin, prints what
 * the ring computes, one line per query. ring_oracle_test.py feeds the same
 * input to the DataStax driver (tests/unit/oracle_placement.py) and
 * compares.
 *
 * Input lines (fields separated by single spaces):
 *   local <addr>
 *   ep <addr> <dc> <rack> <NORMAL|BOOT|LEAVING> <t1,t2,...>
 *   strategy <key>=<value> ...        (replaces the strategy; may repeat)
 *   token <t>          -> "<t> <natural addrs...> | <pending addrs...>"
 *   key <hex>          -> "<token>"
 *   ckey <hex>,<hex>.. -> "<token>" of the compound key ("-" = empty part)
 *   ranges <addr>      -> "<l>:<r> ..." normalized natural ranges
 *   reset              forget the topology and strategy
 * Errors print "error <message>" and exit 1.
 */
#include "common/buf.h"
#include "common/err.h"
#include "common/murmur3.h"
#include "ring/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXF 64

static struct ring_builder *b;
static struct ring *r;
static struct ring_strategy *s;

static void die(const char *what)
{
	printf("error %s: %s\n", what, err_msg());
	exit(1);
}

static struct ring *cur(void)
{
	if (!r && !(r = ring_builder_build(b)))
		die("build");
	return r;
}

static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
	size_t n = strlen(h) / 2;
	if (n > cap)
		n = cap;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		sscanf(h + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
	return n;
}

static void print_eps(const uint32_t *v, size_t n)
{
	char a[INET_ADDR_STRLEN];
	for (size_t i = 0; i < n; i++)
		printf(" %s",
		       inet_addr_format_host(&ring_endpoint_get(r, v[i])->addr,
					     a, sizeof(a)));
}

static void cmd_ep(char *rest)
{
	char addr[64], dc[300], rack[300], st[16];
	static int64_t toks[RING_TOKENS_MAX];
	char *list = NULL;
	if (sscanf(rest, "%63s %299s %299s %15s", addr, dc, rack, st) != 4)
		die("ep line");
	list = strrchr(rest, ' ') + 1;
	struct ring_endpoint e = {0};
	if (inet_addr_parse_host(addr, &e.addr))
		die("addr");
	e.dc = dc;
	e.rack = rack;
	e.status = strcmp(st, "BOOT") == 0      ? RING_STATUS_BOOT
		   : strcmp(st, "LEAVING") == 0 ? RING_STATUS_LEAVING
						: RING_STATUS_NORMAL;
	if (ring_tokens_parse_initial(list, toks, RING_TOKENS_MAX,
				      &e.num_tokens))
		die("tokens");
	e.tokens = toks;
	memcpy(e.host_id, e.addr.ip, 16);
	if (ring_builder_set_endpoint(b, &e))
		die("set endpoint");
	ring_unref(r);
	r = NULL;
}

static void cmd_strategy(char *rest)
{
	const char *k[MAXF], *v[MAXF];
	size_t n = 0;
	for (char *tok = strtok(rest, " "); tok && n < MAXF;
	     tok = strtok(NULL, " ")) {
		char *eq = strchr(tok, '=');
		if (!eq)
			die("strategy pair");
		*eq = 0;
		k[n] = tok;
		v[n++] = eq + 1;
	}
	ring_strategy_delete(s);
	if (!(s = ring_strategy_new(k, v, n, true)))
		die("strategy");
}

int main(void)
{
	static char line[1 << 20];
	b = ring_builder_new();
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		char *sp = strchr(line, ' ');
		char *rest = sp ? sp + 1 : line + strlen(line);
		if (sp)
			*sp = 0;
		if (strcmp(line, "local") == 0) {
			struct inet_addr a;
			if (inet_addr_parse_host(rest, &a))
				die("addr");
			ring_builder_set_local(b, &a);
			ring_unref(r);
			r = NULL;
		} else if (strcmp(line, "reset") == 0) {
			ring_unref(r);
			r = NULL;
			ring_builder_delete(b);
			b = ring_builder_new();
			ring_strategy_delete(s);
			s = NULL;
		} else if (strcmp(line, "ep") == 0) {
			cmd_ep(rest);
		} else if (strcmp(line, "strategy") == 0) {
			cmd_strategy(rest);
		} else if (strcmp(line, "token") == 0) {
			int64_t t;
			struct ring_replicas rep;
			if (token_parse(rest, strlen(rest), &t))
				die("token");
			if (ring_replicas_for_token(cur(), s, t, &rep))
				die("replicas");
			printf("%lld", (long long)t);
			print_eps(rep.natural, rep.n_natural);
			printf(" |");
			print_eps(rep.pending, rep.n_pending);
			printf("\n");
		} else if (strcmp(line, "key") == 0) {
			static uint8_t k[1 << 18];
			size_t n = unhex(rest, k, sizeof(k));
			printf("%lld\n", (long long)murmur3_token(k, n));
		} else if (strcmp(line, "ckey") == 0) {
			static uint8_t k[1 << 18];
			struct slice parts[MAXF];
			size_t np = 0, used = 0;
			for (char *p = strtok(rest, ","); p && np < MAXF;
			     p = strtok(NULL, ",")) {
				size_t n = strcmp(p, "-") == 0
						   ? 0
						   : unhex(p, k + used,
							   sizeof(k) - used);
				parts[np++] = slice_make(k + used, n);
				used += n;
			}
			int64_t t;
			struct buf rk = {0};
			if (murmur3_compound_token(parts, np, &t) ||
			    murmur3_compound_key(&rk, parts, np))
				die("ckey");
			/* both paths must agree */
			if (murmur3_token(rk.data, rk.len) != t)
				die("compound token mismatch");
			buf_free(&rk);
			printf("%lld\n", (long long)t);
		} else if (strcmp(line, "ranges") == 0) {
			struct inet_addr a;
			struct token_range_list l = {0};
			if (inet_addr_parse_host(rest, &a))
				die("addr");
			int ep = ring_endpoint_find(cur(), &a);
			const struct ring_placement *p =
				ring_placement_get(cur(), s);
			if (ep < 0 || !p ||
			    ring_placement_ranges(p, (size_t)ep, false, false,
						  &l))
				die("ranges");
			for (size_t i = 0; i < l.n; i++)
				printf("%s%lld:%lld", i ? " " : "",
				       (long long)l.v[i].left,
				       (long long)l.v[i].right);
			printf("\n");
			token_range_list_free(&l);
		} else if (line[0]) {
			printf("error unknown command %s\n", line);
			return 1;
		}
		fflush(stdout);
	}
	ring_strategy_delete(s);
	ring_unref(r);
	ring_builder_delete(b);
	return 0;
}
