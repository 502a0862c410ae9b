/*
 * libFuzzer target for ring/'s decoders of outside text: replication options
 * (as CQL hands them over) and initial_token lists, plus token ranges built
 * from the input to exercise the range arithmetic.
 *
 * Input: first byte picks the decoder; the rest is its text.
 *   0: lines "key=value" -> ring_strategy_new (then placement on a tiny ring)
 *   1: initial_token text -> ring_tokens_parse_initial
 *   2: 8-byte big-endian tokens, pairs -> normalize/intersect/subtract
 */
#include "common/err.h"
#include "ring/ring.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAXKV 32

static void fuzz_strategy(char *text)
{
	const char *k[MAXKV], *v[MAXKV];
	size_t n = 0;
	for (char *line = strtok(text, "\n"); line && n < MAXKV;
	     line = strtok(NULL, "\n")) {
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = 0;
		k[n] = line;
		v[n++] = eq + 1;
	}
	struct ring_strategy *s = ring_strategy_new(k, v, n, true);
	if (!s)
		return;
	struct ring_builder *b = ring_builder_new();
	int64_t t1[] = {-100, 100}, t2[] = {0};
	struct ring_endpoint e = {
		.dc = "dc1", .rack = "r1", .tokens = t1, .num_tokens = 2};
	e.addr.family = INET_V4;
	e.addr.ip[3] = 1;
	ring_builder_set_endpoint(b, &e);
	e.addr.ip[3] = 2;
	e.dc = "dc2";
	e.tokens = t2;
	e.num_tokens = 1;
	e.status = RING_STATUS_BOOT;
	ring_builder_set_endpoint(b, &e);
	ring_builder_set_local(b, &e.addr);
	struct ring *r = ring_builder_build(b);
	struct ring_replicas rep;
	if (r)
		ring_replicas_for_token(r, s, 5, &rep);
	ring_unref(r);
	ring_builder_delete(b);
	ring_strategy_delete(s);
}

static int64_t load64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (int64_t)v;
}

static void fuzz_ranges(const uint8_t *p, size_t n)
{
	struct token_range_list a = {0}, b = {0}, o = {0};
	for (size_t i = 0; i + 16 <= n && i < 16 * 64; i += 16) {
		struct token_range r =
			token_range_make(load64(p + i), load64(p + i + 8));
		token_range_list_push((i / 16) % 2 ? &b : &a, r);
	}
	token_ranges_intersect(&a, &b, &o);
	token_ranges_subtract(&a, &b, &o);
	if (a.n)
		token_range_split(a.v[0], 1 + (size_t)(n % 7), &o);
	token_ranges_normalize(&a);
	token_range_list_free(&a);
	token_range_list_free(&b);
	token_range_list_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 1 << 16)
		return 0;
	char *text = malloc(size);
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	switch (data[0] % 3) {
	case 0:
		fuzz_strategy(text);
		break;
	case 1: {
		int64_t toks[64];
		size_t n;
		ring_tokens_parse_initial(text, toks, 64, &n);
		break;
	}
	default:
		fuzz_ranges(data + 1, size - 1);
	}
	free(text);
	err_clear();
	return 0;
}
