/*
 * Replication options as CQL gives them (string pairs) -> a strategy.
 *
 * Error texts are Cassandra's, so operators and tests see the same words:
 *   Missing mandatory replication strategy class
 *   Unable to find replication strategy class '<fully qualified name>'
 *   Unable to use given strategy class: LocalStrategy is reserved for
 *     internal use.
 *   SimpleStrategy requires a replication_factor strategy option.
 *   Unrecognized strategy option {<key>} passed to SimpleStrategy
 *   replication_factor is an option for SimpleStrategy, not
 *     NetworkTopologyStrategy
 *   Replication factor must be numeric; found <v>
 *   Replication factor must be non-negative; found <v>
 *   Transient replication is not enabled on this node  (for "3/1")
 * The keyspace name Cassandra appends to "Unrecognized strategy option" is
 * the caller's to add (err_prefix), as this layer does not know it.
 */
#include "ring/ring_internal.h"

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LOCATOR "org.apache.cassandra.locator."
#define RF_MAX  1000 /* far above any real DC; keeps arithmetic small */

void ring_strategy_delete(struct ring_strategy *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->ndc; i++)
		free(s->dcs[i]);
	free(s->dcs);
	free(s->dc_rf);
	free(s->describe);
	free(s);
}

/* Java's Integer.parseInt: optional sign, decimal digits, int range. */
static int parse_java_int(const char *v, long *out)
{
	const char *p = v;
	long x = 0;
	bool neg = false;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (!*p)
		return -1;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		x = x * 10 + (*p - '0');
		if (x > 2147483648L)
			return -1;
	}
	if (!neg && x > 2147483647L)
		return -1;
	*out = neg ? -x : x;
	return 0;
}

static int parse_rf(const char *v, int *rf)
{
	long x;
	if (strchr(v, '/')) {
		/* "<all>/<transient>": well-formed but transient replication
		 * is off, as in a default Cassandra. */
		return err_set(ERR_CONFIG,
			       "Transient replication is not enabled on this "
			       "node");
	}
	if (parse_java_int(v, &x))
		return err_set(ERR_CONFIG,
			       "Replication factor must be numeric; found %s",
			       v);
	if (x < 0)
		return err_set(ERR_CONFIG,
			       "Replication factor must be non-negative; found "
			       "%s",
			       v);
	if (x > RF_MAX)
		return err_set(ERR_CONFIG,
			       "Replication factor %ld is above the supported "
			       "maximum %d",
			       x, RF_MAX);
	*rf = (int)x;
	return 0;
}

static int resolve_class(const char *cls, bool allow_local,
			 enum ring_strategy_class *out)
{
	char full[512];
	if (strchr(cls, '.'))
		snprintf(full, sizeof(full), "%s", cls);
	else
		snprintf(full, sizeof(full), LOCATOR "%s", cls);
	if (strcmp(full, LOCATOR "SimpleStrategy") == 0)
		*out = RING_STRATEGY_SIMPLE;
	else if (strcmp(full, LOCATOR "NetworkTopologyStrategy") == 0)
		*out = RING_STRATEGY_NETWORK_TOPOLOGY;
	else if (strcmp(full, LOCATOR "LocalStrategy") == 0)
		*out = RING_STRATEGY_LOCAL;
	else
		return err_set(ERR_CONFIG,
			       "Unable to find replication strategy class '%s'",
			       full);
	if (*out == RING_STRATEGY_LOCAL && !allow_local)
		return err_set(ERR_CONFIG,
			       "Unable to use given strategy class: "
			       "LocalStrategy is reserved for internal use.");
	return 0;
}

static int dc_idx_cmp(const void *a, const void *b, void *ctx);

/* Sorted copy order for describe(). */
static int describe_nts(struct ring_strategy *s)
{
	size_t len = 64;
	for (size_t i = 0; i < s->ndc; i++)
		len += strlen(s->dcs[i]) + 16;
	size_t *ord = malloc((s->ndc ? s->ndc : 1) * sizeof(*ord));
	s->describe = malloc(len);
	if (!ord || !s->describe) {
		free(ord);
		return err_set(ERR_NOMEM, "strategy");
	}
	for (size_t i = 0; i < s->ndc; i++)
		ord[i] = i;
	qsort_r(ord, s->ndc, sizeof(*ord), dc_idx_cmp, s);
	size_t at =
		(size_t)snprintf(s->describe, len, "NetworkTopologyStrategy{");
	for (size_t i = 0; i < s->ndc; i++)
		at += (size_t)snprintf(s->describe + at, len - at, "%s%s:%d",
				       i ? "," : "", s->dcs[ord[i]],
				       s->dc_rf[ord[i]]);
	snprintf(s->describe + at, len - at, "}");
	free(ord);
	return 0;
}

static int dc_idx_cmp(const void *a, const void *b, void *ctx)
{
	const struct ring_strategy *s = ctx;
	return strcmp(s->dcs[*(const size_t *)a], s->dcs[*(const size_t *)b]);
}

static int add_dc(struct ring_strategy *s, const char *dc, const char *v)
{
	int rf;
	if (strcasecmp(dc, "replication_factor") == 0)
		return err_set(ERR_CONFIG,
			       "replication_factor is an option for "
			       "SimpleStrategy, not NetworkTopologyStrategy");
	if (parse_rf(v, &rf))
		return -1;
	for (size_t i = 0; i < s->ndc; i++)
		if (strcmp(s->dcs[i], dc) == 0)
			return err_set(ERR_CONFIG,
				       "Multiple definition for property %s",
				       dc);
	if (!(s->dcs[s->ndc] = strdup(dc)))
		return err_set(ERR_NOMEM, "strategy");
	s->dc_rf[s->ndc++] = rf;
	return 0;
}

struct ring_strategy *ring_strategy_new(const char *const *keys,
					const char *const *values, size_t n,
					bool allow_local)
{
	const char *cls = NULL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(keys[i], "class") == 0)
			cls = values[i];
	if (!cls) {
		err_set(ERR_CONFIG,
			"Missing mandatory replication strategy class");
		return NULL;
	}
	struct ring_strategy *s = calloc(1, sizeof(*s));
	if (!s) {
		err_set(ERR_NOMEM, "strategy");
		return NULL;
	}
	s->dcs = calloc(n ? n : 1, sizeof(char *));
	s->dc_rf = calloc(n ? n : 1, sizeof(int));
	if (!s->dcs || !s->dc_rf) {
		err_set(ERR_NOMEM, "strategy");
		goto fail;
	}
	if (resolve_class(cls, allow_local, &s->cls))
		goto fail;
	bool have_rf = false;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(keys[i], "class") == 0)
			continue;
		if (s->cls == RING_STRATEGY_NETWORK_TOPOLOGY) {
			if (add_dc(s, keys[i], values[i]))
				goto fail;
		} else if (s->cls == RING_STRATEGY_SIMPLE) {
			if (strcmp(keys[i], "replication_factor") != 0) {
				err_set(ERR_CONFIG,
					"Unrecognized strategy option {%s} "
					"passed to SimpleStrategy",
					keys[i]);
				goto fail;
			}
			if (parse_rf(values[i], &s->rf))
				goto fail;
			have_rf = true;
		}
		/* LocalStrategy ignores options, as Cassandra does. */
	}
	if (s->cls == RING_STRATEGY_SIMPLE && !have_rf) {
		err_set(ERR_CONFIG, "SimpleStrategy requires a "
				    "replication_factor strategy option.");
		goto fail;
	}
	if (s->cls == RING_STRATEGY_NETWORK_TOPOLOGY) {
		if (describe_nts(s))
			goto fail;
	} else {
		char buf[64];
		if (s->cls == RING_STRATEGY_SIMPLE)
			snprintf(buf, sizeof(buf), "SimpleStrategy{%d}", s->rf);
		else
			snprintf(buf, sizeof(buf), "LocalStrategy");
		if (!(s->describe = strdup(buf))) {
			err_set(ERR_NOMEM, "strategy");
			goto fail;
		}
	}
	return s;
fail:
	ring_strategy_delete(s);
	return NULL;
}

enum ring_strategy_class ring_strategy_class(const struct ring_strategy *s)
{
	return s->cls;
}

int ring_strategy_rf(const struct ring_strategy *s, const char *dc)
{
	if (s->cls == RING_STRATEGY_SIMPLE)
		return s->rf;
	if (s->cls == RING_STRATEGY_LOCAL)
		return 1;
	for (size_t i = 0; i < s->ndc; i++)
		if (dc && strcmp(s->dcs[i], dc) == 0)
			return s->dc_rf[i];
	return 0;
}

size_t ring_strategy_dc_count(const struct ring_strategy *s)
{
	return s->cls == RING_STRATEGY_NETWORK_TOPOLOGY ? s->ndc : 0;
}

const char *ring_strategy_dc_at(const struct ring_strategy *s, size_t i,
				int *rf)
{
	*rf = s->dc_rf[i];
	return s->dcs[i];
}

const char *ring_strategy_describe(const struct ring_strategy *s)
{
	return s->describe;
}
