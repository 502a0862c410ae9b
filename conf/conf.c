/*
 * node.yaml and rackdc.properties loading.
 *
 * The YAML document is loaded whole with libyaml (it is small) and walked
 * key by key against conf_keys[]. Each value is parsed by its key's type and
 * range-checked; the first problem stops loading with one line:
 *
 *   conf/node.yaml:12: num_tokens: 0 is out of range (1 to 1536)
 *
 * Cross-key rules (initial_token count, thresholds, addresses) are checked
 * after all keys are read, and also name the file and key.
 */
#include "conf/conf_internal.h"

#include "common/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#define CONF_FILE_MAX (1024 * 1024)

/* ---- unit forms ---------------------------------------------------------- */

/* value = number * mul / div (div > 1 only for sub-millisecond units). */
struct unit {
	const char *suffix;
	uint64_t mul;
	uint64_t div;
};

static int parse_with_units(const char *text, const struct unit *units,
			    const char *what, const char *accepted,
			    uint64_t *out)
{
	char *end;
	if (*text < '0' || *text > '9')
		return err_set(ERR_INVALID,
			       "invalid %s '%s': expected a non-negative "
			       "integer followed by one of %s",
			       what, text, accepted);
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno == ERANGE)
		return err_set(ERR_INVALID, "invalid %s '%s': too large", what,
			       text);
	for (const struct unit *u = units; u->suffix; u++) {
		if (strcmp(end, u->suffix) != 0)
			continue;
		if (v > UINT64_MAX / u->mul)
			return err_set(ERR_INVALID,
				       "invalid %s '%s': too large", what,
				       text);
		*out = v * u->mul / u->div;
		return 0;
	}
	return err_set(ERR_INVALID, "invalid %s '%s': unit must be one of %s",
		       what, text, accepted);
}

int conf_parse_duration_ms(const char *text, uint64_t *out_ms)
{
	static const struct unit units[] = {
		{"ms", 1, 1},      {"s", 1000, 1},     {"m", 60000, 1},
		{"h", 3600000, 1}, {"d", 86400000, 1}, {"us", 1, 1000},
		{"µs", 1, 1000},   {"ns", 1, 1000000}, {NULL, 0, 0},
	};
	uint64_t ms;
	if (parse_with_units(text, units, "duration", "d, h, m, s, ms, us, ns",
			     &ms) != 0)
		return -1;
	*out_ms = ms;
	return 0;
}

int conf_parse_size(const char *text, uint64_t *out_bytes)
{
	static const struct unit units[] = {
		{"B", 1, 1},
		{"KiB", 1024, 1},
		{"MiB", 1024 * 1024, 1},
		{"GiB", 1024ull * 1024 * 1024, 1},
		{NULL, 0, 0},
	};
	return parse_with_units(text, units, "size", "B, KiB, MiB, GiB",
				out_bytes);
}

int conf_parse_rate(const char *text, uint64_t *out_bytes_per_sec)
{
	static const struct unit units[] = {
		{"B/s", 1, 1},
		{"KiB/s", 1024, 1},
		{"MiB/s", 1024 * 1024, 1},
		{"GiB/s", 1024ull * 1024 * 1024, 1},
		{NULL, 0, 0},
	};
	return parse_with_units(text, units, "rate", "B/s, KiB/s, MiB/s, GiB/s",
				out_bytes_per_sec);
}

/* ---- helpers ------------------------------------------------------------- */

static void *field(struct conf *c, const struct conf_key *k)
{
	return (char *)c + k->offset;
}

static void list_free(struct conf_string_list *l)
{
	for (size_t i = 0; i < l->count; i++)
		free(l->items[i]);
	free(l->items);
	l->items = NULL;
	l->count = 0;
}

static int list_push(struct conf_string_list *l, const char *s, size_t n)
{
	char **items = realloc(l->items, (l->count + 1) * sizeof(*items));
	if (!items)
		return err_set(ERR_NOMEM, "out of memory");
	l->items = items;
	char *copy = strndup(s, n);
	if (!copy)
		return err_set(ERR_NOMEM, "out of memory");
	l->items[l->count++] = copy;
	return 0;
}

static void trim(const char **s, size_t *n)
{
	while (*n && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*n)--;
	}
	while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
		(*n)--;
}

/* Splits "a, b,c" into the list (empty items are dropped). */
static int list_set_csv(struct conf_string_list *l, const char *text)
{
	struct conf_string_list fresh = {0};
	const char *p = text;
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		const char *item = p;
		trim(&item, &n);
		if (n && list_push(&fresh, item, n) != 0) {
			list_free(&fresh);
			return -1;
		}
		p += comma ? (size_t)(comma - p) + 1 : strlen(p);
	}
	list_free(l);
	*l = fresh;
	return 0;
}

static int set_string(char **dst, const char *text)
{
	char *copy = NULL;
	if (text[0] != '\0') {
		copy = strdup(text);
		if (!copy)
			return err_set(ERR_NOMEM, "out of memory");
	}
	free(*dst);
	*dst = copy;
	return 0;
}

static int check_range(const struct conf_key *k, double v, const char *text)
{
	if (v >= k->min && v <= k->max)
		return 0;
	if (k->type == CONF_T_INT)
		return err_set(ERR_CONFIG, "%s is out of range (%.0f to %.0f)",
			       text, k->min, k->max);
	if (k->type == CONF_T_DURATION)
		return err_set(ERR_CONFIG,
			       "%s is out of range (%.0fms to %.0fms)", text,
			       k->min, k->max);
	if (k->type == CONF_T_SIZE || k->type == CONF_T_RATE)
		return err_set(ERR_CONFIG,
			       "%s is out of range (%.0f to %.0f bytes%s)",
			       text, k->min, k->max,
			       k->type == CONF_T_RATE ? " per second" : "");
	return err_set(ERR_CONFIG, "%s is out of range (%g to %g)", text,
		       k->min, k->max);
}

static int parse_bool(const char *text, bool *out)
{
	if (strcasecmp(text, "true") == 0) {
		*out = true;
		return 0;
	}
	if (strcasecmp(text, "false") == 0) {
		*out = false;
		return 0;
	}
	return err_set(ERR_CONFIG, "'%s' is not a boolean (true or false)",
		       text);
}

static int parse_int(const char *text, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (end == text || *end != '\0' || errno == ERANGE)
		return err_set(ERR_CONFIG, "'%s' is not an integer", text);
	*out = v;
	return 0;
}

static int parse_double(const char *text, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(text, &end);
	if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v))
		return err_set(ERR_CONFIG, "'%s' is not a number", text);
	*out = v;
	return 0;
}

static int parse_enum(const struct conf_key *k, const char *text, int64_t *out)
{
	static const char prefix[] = "org.apache.cassandra.locator.";
	const char *name = text;
	if (strncmp(name, prefix, sizeof(prefix) - 1) == 0)
		name += sizeof(prefix) - 1;
	for (const struct conf_enum_name *e = k->enum_names; e->name; e++) {
		if (strcasecmp(name, e->name) == 0) {
			*out = e->value;
			return 0;
		}
	}
	char accepted[256] = "";
	size_t n = 0;
	for (const struct conf_enum_name *e = k->enum_names; e->name; e++)
		n += (size_t)snprintf(accepted + n, sizeof(accepted) - n,
				      "%s%s", n ? ", " : "", e->name);
	return err_set(ERR_CONFIG, "'%s' is not one of: %s", text, accepted);
}

/* Parses a scalar `text` into key `k`. An empty text sets the default. */
static int set_scalar(struct conf *c, const struct conf_key *k,
		      const char *text)
{
	void *f = field(c, k);
	uint64_t u = 0;
	int64_t i = 0;
	double d = 0;

	if (text[0] == '\0' && k->default_text[0] != '\0' &&
	    k->type != CONF_T_STRING && k->type != CONF_T_PATH &&
	    k->type != CONF_T_HOST)
		text = k->default_text;
	switch (k->type) {
	case CONF_T_STRING:
	case CONF_T_PATH:
		return set_string((char **)f, text);
	case CONF_T_BOOL:
		return parse_bool(text, (bool *)f);
	case CONF_T_INT:
		if (parse_int(text, &i) != 0 ||
		    check_range(k, (double)i, text) != 0)
			return -1;
		*(int64_t *)f = i;
		return 0;
	case CONF_T_DOUBLE:
		if (parse_double(text, &d) != 0 || check_range(k, d, text) != 0)
			return -1;
		*(double *)f = d;
		return 0;
	case CONF_T_DURATION:
		if (conf_parse_duration_ms(text, &u) != 0)
			return err_set(ERR_CONFIG, "%s", err_msg());
		if (check_range(k, (double)u, text) != 0)
			return -1;
		*(uint64_t *)f = u;
		return 0;
	case CONF_T_SIZE:
		if (conf_parse_size(text, &u) != 0)
			return err_set(ERR_CONFIG, "%s", err_msg());
		if (check_range(k, (double)u, text) != 0)
			return -1;
		*(uint64_t *)f = u;
		return 0;
	case CONF_T_RATE:
		if (conf_parse_rate(text, &u) != 0)
			return err_set(ERR_CONFIG, "%s", err_msg());
		if (check_range(k, (double)u, text) != 0)
			return -1;
		*(uint64_t *)f = u;
		return 0;
	case CONF_T_ENUM:
		return parse_enum(k, text, (int64_t *)f);
	case CONF_T_LIST:
	case CONF_T_PATH_LIST:
		return list_set_csv((struct conf_string_list *)f, text);
	case CONF_T_HOST: {
		struct inet_addr *a = f;
		if (text[0] == '\0') {
			memset(a, 0, sizeof(*a));
			return 0;
		}
		if (inet_addr_parse_host(text, a) != 0)
			return err_set(ERR_CONFIG, "%s", err_msg());
		return 0;
	}
	case CONF_T_SEEDS:
		return set_string((char **)f, text);
	}
	return err_set(ERR_CONFIG, "internal: unknown key type");
}

/* Levenshtein distance, for "did you mean". */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 64 || lb > 64)
		return SIZE_MAX;
	size_t prev[65], cur[65];
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
			size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
			cur[j] = sub < del ? (sub < ins ? sub : ins)
					   : (del < ins ? del : ins);
		}
		memcpy(prev, cur, sizeof(prev));
	}
	return prev[lb];
}

static const struct conf_key *key_find(const char *name)
{
	for (size_t i = 0; i < conf_keys_count; i++)
		if (strcmp(conf_keys[i].name, name) == 0)
			return &conf_keys[i];
	return NULL;
}

static const char *key_suggest(const char *name)
{
	const char *best = NULL;
	size_t best_d = 4;
	for (size_t i = 0; i < conf_keys_count; i++) {
		size_t d = edit_distance(name, conf_keys[i].name);
		if (d < best_d) {
			best_d = d;
			best = conf_keys[i].name;
		}
	}
	return best;
}

/*
 * Pre-4.1 names: `max_hint_window_in_ms: 10800000` is `max_hint_window:
 * 10800000ms`. Returns the key and writes the value in the new form.
 */
static const struct conf_key *legacy_key(const char *name, const char *value,
					 char *out, size_t cap)
{
	static const struct {
		const char *suffix;
		enum conf_type type;
		const char *unit;
	} legacy[] = {
		{"_in_ms", CONF_T_DURATION, "ms"},
		{"_in_s", CONF_T_DURATION, "s"},
		{"_in_kb", CONF_T_SIZE, "KiB"},
		{"_in_mb", CONF_T_SIZE, "MiB"},
		{"_in_kb", CONF_T_RATE, "KiB/s"},
		{"_mb_per_sec", CONF_T_RATE, "MiB/s"},
		{"_in_mb_per_sec", CONF_T_RATE, "MiB/s"},
	};
	size_t n = strlen(name);
	for (size_t i = 0; i < sizeof(legacy) / sizeof(legacy[0]); i++) {
		size_t sl = strlen(legacy[i].suffix);
		char base[128];
		if (n <= sl || n - sl >= sizeof(base) ||
		    strcmp(name + n - sl, legacy[i].suffix) != 0)
			continue;
		memcpy(base, name, n - sl);
		base[n - sl] = '\0';
		const struct conf_key *k = key_find(base);
		if (!k || k->type != legacy[i].type)
			continue;
		snprintf(out, cap, "%s%s", value, legacy[i].unit);
		return k;
	}
	return NULL;
}

/* ---- YAML walk ----------------------------------------------------------- */

struct walk {
	struct conf *c;
	yaml_document_t *doc;
	const char *file;
	/* keys seen so far, to refuse duplicates */
	const struct conf_key *seen[256];
	size_t seen_count;
};

static int fail_at(struct walk *w, yaml_node_t *node, const char *key)
{
	unsigned line = node ? (unsigned)node->start_mark.line + 1 : 0;
	if (key)
		return err_set(ERR_CONFIG, "%s:%u: %s: %s", w->file, line, key,
			       err_msg());
	return err_set(ERR_CONFIG, "%s:%u: %s", w->file, line, err_msg());
}

static const char *scalar(yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

static bool scalar_is_null(yaml_node_t *n)
{
	const char *s = scalar(n);
	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0;
}

static int walk_list(struct walk *w, const struct conf_key *k, yaml_node_t *seq)
{
	struct conf_string_list fresh = {0};
	for (yaml_node_item_t *it = seq->data.sequence.items.start;
	     it < seq->data.sequence.items.top; it++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *it);
		if (!item || item->type != YAML_SCALAR_NODE) {
			list_free(&fresh);
			err_set(ERR_CONFIG, "list items must be plain values");
			return fail_at(w, item ? item : seq, k->name);
		}
		const char *s = scalar(item);
		if (s[0] == '\0' || list_push(&fresh, s, strlen(s)) != 0) {
			list_free(&fresh);
			if (s[0] == '\0')
				err_set(ERR_CONFIG, "empty list item");
			return fail_at(w, item, k->name);
		}
	}
	struct conf_string_list *dst = field(w->c, k);
	list_free(dst);
	*dst = fresh;
	return 0;
}

/* Mapping lookup of a single scalar-keyed entry; refuses unknown keys. */
static int seeds_parameters(struct walk *w, yaml_node_t *params,
			    const char **seeds, yaml_node_t **at)
{
	if (params->type != YAML_SEQUENCE_NODE) {
		err_set(ERR_CONFIG, "parameters must be a list");
		return fail_at(w, params, "seed_provider");
	}
	for (yaml_node_item_t *it = params->data.sequence.items.start;
	     it < params->data.sequence.items.top; it++) {
		yaml_node_t *m = yaml_document_get_node(w->doc, *it);
		if (!m || m->type != YAML_MAPPING_NODE) {
			err_set(ERR_CONFIG,
				"parameters items must be mappings");
			return fail_at(w, m ? m : params, "seed_provider");
		}
		for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
		     p < m->data.mapping.pairs.top; p++) {
			yaml_node_t *kn =
				yaml_document_get_node(w->doc, p->key);
			yaml_node_t *vn =
				yaml_document_get_node(w->doc, p->value);
			if (!kn || !vn || kn->type != YAML_SCALAR_NODE ||
			    vn->type != YAML_SCALAR_NODE ||
			    strcmp(scalar(kn), "seeds") != 0) {
				err_set(ERR_CONFIG,
					"unknown parameter '%s' (expected "
					"seeds)",
					kn && kn->type == YAML_SCALAR_NODE
						? scalar(kn)
						: "?");
				return fail_at(w, kn ? kn : m, "seed_provider");
			}
			*seeds = scalar(vn);
			*at = vn;
		}
	}
	return 0;
}

static int walk_seeds(struct walk *w, const struct conf_key *k, yaml_node_t *v)
{
	const char *seeds = NULL;
	yaml_node_t *at = v;
	if (v->type != YAML_SEQUENCE_NODE ||
	    v->data.sequence.items.top - v->data.sequence.items.start != 1) {
		err_set(ERR_CONFIG, "expected a list with one provider "
				    "(class_name, parameters)");
		return fail_at(w, v, k->name);
	}
	yaml_node_t *m =
		yaml_document_get_node(w->doc, *v->data.sequence.items.start);
	if (!m || m->type != YAML_MAPPING_NODE) {
		err_set(ERR_CONFIG, "expected class_name and parameters");
		return fail_at(w, m ? m : v, k->name);
	}
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
	     p < m->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(w->doc, p->key);
		yaml_node_t *vn = yaml_document_get_node(w->doc, p->value);
		if (!kn || !vn || kn->type != YAML_SCALAR_NODE) {
			err_set(ERR_CONFIG, "bad entry");
			return fail_at(w, m, k->name);
		}
		const char *name = scalar(kn);
		if (strcmp(name, "class_name") == 0) {
			const char *cls =
				vn->type == YAML_SCALAR_NODE ? scalar(vn) : "";
			if (strcmp(cls, "org.apache.cassandra.locator."
					"SimpleSeedProvider") != 0 &&
			    strcmp(cls, "SimpleSeedProvider") != 0) {
				err_set(ERR_CONFIG,
					"unsupported class_name '%s' (only "
					"org.apache.cassandra.locator."
					"SimpleSeedProvider)",
					cls);
				return fail_at(w, vn, k->name);
			}
		} else if (strcmp(name, "parameters") == 0) {
			if (seeds_parameters(w, vn, &seeds, &at) != 0)
				return -1;
		} else {
			err_set(ERR_CONFIG,
				"unknown key '%s' (expected class_name, "
				"parameters)",
				name);
			return fail_at(w, kn, k->name);
		}
	}
	if (!seeds || seeds[0] == '\0') {
		err_set(ERR_CONFIG, "no seeds given");
		return fail_at(w, at, k->name);
	}
	if (set_string(field(w->c, k), seeds) != 0)
		return fail_at(w, at, k->name);
	return 0;
}

static int walk_pair(struct walk *w, const char *prefix, yaml_node_t *kn,
		     yaml_node_t *vn);

/* Whether some key is `name.something`: `name` is a section. */
static bool is_section(const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < conf_keys_count; i++)
		if (strncmp(conf_keys[i].name, name, n) == 0 &&
		    conf_keys[i].name[n] == '.')
			return true;
	return false;
}

/* A section's mapping: each of its keys is `section.key` in the table. */
static int walk_section(struct walk *w, const char *section, yaml_node_t *vn)
{
	char prefix[200];
	snprintf(prefix, sizeof(prefix), "%.64s.", section);
	if (vn->type == YAML_SCALAR_NODE && scalar_is_null(vn))
		return 0; /* an empty section: every key keeps its default */
	if (vn->type != YAML_MAPPING_NODE) {
		err_set(ERR_CONFIG, "expected a mapping of keys");
		return fail_at(w, vn, section);
	}
	for (yaml_node_pair_t *p = vn->data.mapping.pairs.start;
	     p < vn->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
		if (!k || !v || k->type != YAML_SCALAR_NODE) {
			err_set(ERR_CONFIG, "keys must be plain names");
			return fail_at(w, k ? k : vn, section);
		}
		if (walk_pair(w, prefix, k, v) != 0)
			return -1;
	}
	return 0;
}

static int walk_pair(struct walk *w, const char *prefix, yaml_node_t *kn,
		     yaml_node_t *vn)
{
	char legacy_value[256];
	char full[300];
	snprintf(full, sizeof(full), "%s%s", prefix, scalar(kn));
	const char *name = full;
	/* dotted names exist only inside their section */
	const struct conf_key *k =
		prefix[0] || !strchr(name, '.') ? key_find(name) : NULL;
	const char *text = NULL;

	if (!k && !prefix[0] && is_section(name))
		return walk_section(w, name, vn);

	if (!k && vn->type == YAML_SCALAR_NODE && !scalar_is_null(vn)) {
		k = legacy_key(name, scalar(vn), legacy_value,
			       sizeof(legacy_value));
		if (k)
			text = legacy_value;
	}
	if (!k) {
		const char *hint = key_suggest(name);
		if (hint)
			err_set(ERR_CONFIG,
				"unknown key '%s' (did you mean '%s'?)", name,
				hint);
		else
			err_set(ERR_CONFIG, "unknown key '%s'", name);
		return fail_at(w, kn, NULL);
	}
	for (size_t i = 0; i < w->seen_count; i++) {
		if (w->seen[i] == k) {
			err_set(ERR_CONFIG, "given more than once");
			return fail_at(w, kn, k->name);
		}
	}
	if (w->seen_count < sizeof(w->seen) / sizeof(w->seen[0]))
		w->seen[w->seen_count++] = k;

	if (k->type == CONF_T_SEEDS)
		return walk_seeds(w, k, vn);
	if ((k->type == CONF_T_LIST || k->type == CONF_T_PATH_LIST) &&
	    vn->type == YAML_SEQUENCE_NODE)
		return walk_list(w, k, vn);
	if (vn->type != YAML_SCALAR_NODE) {
		err_set(ERR_CONFIG, "expected a single value");
		return fail_at(w, vn, k->name);
	}
	if (!text)
		text = scalar_is_null(vn) ? "" : scalar(vn);
	if (set_scalar(w->c, k, text) != 0)
		return fail_at(w, vn, k->name);
	return 0;
}

int conf_parse_yaml(struct conf *c, const char *name, const uint8_t *text,
		    size_t len)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	struct walk w = {.c = c, .doc = &doc, .file = name};
	int rc = 0;

	if (!yaml_parser_initialize(&parser))
		return err_set(ERR_NOMEM, "%s: cannot initialise YAML parser",
			       name);
	yaml_parser_set_input_string(&parser, text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = err_set(ERR_CONFIG, "%s:%zu: invalid YAML: %s", name,
			     parser.problem_mark.line + 1,
			     parser.problem ? parser.problem : "parse error");
		yaml_parser_delete(&parser);
		return rc;
	}
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (!root) {
		/* An empty file: every key keeps its default. */
	} else if (root->type == YAML_SCALAR_NODE && scalar_is_null(root)) {
		/* Only comments. */
	} else if (root->type != YAML_MAPPING_NODE) {
		err_set(ERR_CONFIG, "the top level must be a mapping of keys");
		rc = fail_at(&w, root, NULL);
	} else {
		for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
		     rc == 0 && p < root->data.mapping.pairs.top; p++) {
			yaml_node_t *kn = yaml_document_get_node(&doc, p->key);
			yaml_node_t *vn =
				yaml_document_get_node(&doc, p->value);
			if (!kn || !vn || kn->type != YAML_SCALAR_NODE) {
				err_set(ERR_CONFIG, "keys must be plain names");
				rc = fail_at(&w, kn ? kn : root, NULL);
				break;
			}
			rc = walk_pair(&w, "", kn, vn);
		}
	}
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return rc;
}

/* ---- rackdc.properties --------------------------------------------------- */

int conf_parse_rackdc(struct conf *c, const char *name, const char *text,
		      size_t len)
{
	const char *p = text, *end = text + len;
	unsigned line = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *s = p;
		size_t n = (size_t)(eol - p);
		line++;
		p = nl ? nl + 1 : end;
		if (n && s[n - 1] == '\r')
			n--;
		trim(&s, &n);
		if (n == 0 || s[0] == '#' || s[0] == '!')
			continue;
		const char *eq = memchr(s, '=', n);
		if (!eq)
			return err_set(ERR_CONFIG, "%s:%u: expected key=value",
				       name, line);
		const char *k = s, *v = eq + 1;
		size_t kn = (size_t)(eq - s), vn = n - kn - 1;
		trim(&k, &kn);
		trim(&v, &vn);
		char value[256], key[64];
		if (kn >= sizeof(key) || vn >= sizeof(value))
			return err_set(ERR_CONFIG, "%s:%u: line too long", name,
				       line);
		memcpy(key, k, kn);
		key[kn] = '\0';
		memcpy(value, v, vn);
		value[vn] = '\0';
		int rc;
		if (strcmp(key, "dc") == 0 || strcmp(key, "rack") == 0) {
			if (vn == 0)
				return err_set(ERR_CONFIG,
					       "%s:%u: %s: empty value", name,
					       line, key);
			rc = set_string(key[0] == 'd' ? &c->dc : &c->rack,
					value);
		} else if (strcmp(key, "prefer_local") == 0) {
			rc = parse_bool(value, &c->prefer_local);
		} else if (strcmp(key, "dc_suffix") == 0) {
			rc = set_string(&c->dc_suffix, value);
		} else {
			return err_set(ERR_CONFIG,
				       "%s:%u: unknown key '%s' (expected dc, "
				       "rack, prefer_local or dc_suffix)",
				       name, line, key);
		}
		if (rc != 0)
			return err_set(ERR_CONFIG, "%s:%u: %s: %s", name, line,
				       key, err_msg());
	}
	return 0;
}

/* ---- defaults, cross-key checks, loading --------------------------------- */

bool conf_internode_tls_set_up(const struct conf_server_encryption *se)
{
	return se->internode_encryption != CONF_INTERNODE_NONE ||
	       (se->optional && se->keystore && se->keystore[0]);
}

int conf_init_defaults(struct conf *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < conf_keys_count; i++) {
		if (set_scalar(c, &conf_keys[i], conf_keys[i].default_text) !=
		    0) {
			err_prefix("internal default of %s", conf_keys[i].name);
			conf_free(c);
			return -1;
		}
	}
	if (set_string(&c->dc, "datacenter1") != 0 ||
	    set_string(&c->rack, "rack1") != 0) {
		conf_free(c);
		return -1;
	}
	return 0;
}

void conf_free(struct conf *c)
{
	for (size_t i = 0; i < conf_keys_count; i++) {
		const struct conf_key *k = &conf_keys[i];
		void *f = field(c, k);
		switch (k->type) {
		case CONF_T_STRING:
		case CONF_T_PATH:
		case CONF_T_SEEDS:
			free(*(char **)f);
			*(char **)f = NULL;
			break;
		case CONF_T_LIST:
		case CONF_T_PATH_LIST:
			list_free(f);
			break;
		default:
			break;
		}
	}
	free(c->seeds);
	free(c->dc);
	free(c->rack);
	free(c->dc_suffix);
	free(c->conf_dir);
	free(c->home_dir);
	memset(c, 0, sizeof(*c));
}

static int resolve_path(char **path, const char *home)
{
	if (!*path || (*path)[0] == '/')
		return 0;
	size_t n = strlen(home) + strlen(*path) + 2;
	char *abs = malloc(n);
	if (!abs)
		return err_set(ERR_NOMEM, "out of memory");
	snprintf(abs, n, "%s/%s", home, *path);
	free(*path);
	*path = abs;
	return 0;
}

static int parse_seeds(struct conf *c, const char *file)
{
	struct conf_string_list l = {0};
	if (list_set_csv(&l, c->seed_list ? c->seed_list : "") != 0)
		return -1;
	struct inet_addr *seeds = calloc(l.count ? l.count : 1, sizeof(*seeds));
	if (!seeds) {
		list_free(&l);
		return err_set(ERR_NOMEM, "out of memory");
	}
	for (size_t i = 0; i < l.count; i++) {
		if (inet_addr_parse(l.items[i], (uint16_t)c->storage_port,
				    &seeds[i]) != 0) {
			err_set(ERR_CONFIG, "%s: seed_provider: %s", file,
				err_msg());
			free(seeds);
			list_free(&l);
			return -1;
		}
	}
	free(c->seeds);
	c->seeds = seeds;
	c->seed_count = l.count;
	list_free(&l);
	if (c->seed_count == 0)
		return err_set(ERR_CONFIG, "%s: seed_provider: no seeds given",
			       file);
	return 0;
}

static int check_tokens(struct conf *c, const char *file)
{
	if (!c->initial_token)
		return 0;
	struct conf_string_list l = {0};
	if (list_set_csv(&l, c->initial_token) != 0)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < l.count && rc == 0; i++) {
		char *end;
		errno = 0;
		(void)strtoll(l.items[i], &end, 10);
		if (*end != '\0' || errno == ERANGE)
			rc = err_set(ERR_CONFIG,
				     "%s: initial_token: '%s' is not a Murmur3 "
				     "token (a signed 64-bit integer)",
				     file, l.items[i]);
	}
	if (rc == 0 && (int64_t)l.count != c->num_tokens)
		rc = err_set(
			ERR_CONFIG,
			"%s: initial_token: %zu tokens given but num_tokens "
			"is %lld",
			file, l.count, (long long)c->num_tokens);
	list_free(&l);
	return rc;
}

/* Skipped when choosing an interface's address: an IPv6 link-local
 * address is usable only with its interface named, which an address
 * alone (gossip, seeds, the handshake) cannot carry. */
static bool is_link_local(const struct inet_addr *a)
{
	return a->family == INET_V6 && a->ip[0] == 0xfe &&
	       (a->ip[1] & 0xc0) == 0x80;
}

/* Cassandra's getNetworkInterfaceAddress: the interface's first address
 * of the preferred family, else its first address. */
static int interface_address(const char *file, const char *key,
			     const char *name, bool prefer_v6,
			     struct inet_addr *out)
{
	struct ifaddrs *list;
	if (getifaddrs(&list) != 0)
		return err_set(ERR_CONFIG, "%s: %s: cannot list interfaces: %s",
			       file, key, strerror(errno));
	bool found = false;
	struct inet_addr first = {0}, preferred = {0};
	for (struct ifaddrs *i = list; i; i = i->ifa_next) {
		if (strcmp(i->ifa_name, name) != 0)
			continue;
		found = true;
		struct inet_addr a;
		if (!i->ifa_addr ||
		    (i->ifa_addr->sa_family != AF_INET &&
		     i->ifa_addr->sa_family != AF_INET6) ||
		    inet_addr_from_sockaddr(
			    i->ifa_addr,
			    i->ifa_addr->sa_family == AF_INET
				    ? sizeof(struct sockaddr_in)
				    : sizeof(struct sockaddr_in6),
			    &a) != 0 ||
		    is_link_local(&a))
			continue;
		a.port = 0;
		if (first.family == INET_NONE)
			first = a;
		if (preferred.family == INET_NONE &&
		    a.family == (prefer_v6 ? INET_V6 : INET_V4))
			preferred = a;
	}
	freeifaddrs(list);
	if (!found)
		return err_set(
			ERR_CONFIG,
			"%s: %s: Configured %s \"%s\" could not be found", file,
			key, key, name);
	if (first.family == INET_NONE)
		return err_set(
			ERR_CONFIG,
			"%s: %s: Configured %s \"%s\" was found, but had "
			"no addresses",
			file, key, key, name);
	*out = preferred.family != INET_NONE ? preferred : first;
	return 0;
}

static const char *host_text(const struct inet_addr *a, char *buf)
{
	return inet_addr_format_host(a, buf, INET_ADDR_STRLEN);
}

/* Cassandra's applyAddressConfig, with its messages: the listen and rpc
 * addresses from the address or the interface, the broadcast addresses
 * defaulting to them, and no wildcard where others must connect. */
static int resolve_addresses(struct conf *c, const char *file)
{
	char a[INET_ADDR_STRLEN];
	if (c->listen_address.family != INET_NONE && c->listen_interface)
		return err_set(ERR_CONFIG,
			       "%s: listen_interface: Set listen_address OR "
			       "listen_interface, not both",
			       file);
	if (c->listen_interface) {
		if (interface_address(file, "listen_interface",
				      c->listen_interface,
				      c->listen_interface_prefer_ipv6,
				      &c->listen_address) != 0)
			return -1;
	} else if (c->listen_address.family == INET_NONE) {
		inet_addr_parse_host("127.0.0.1", &c->listen_address);
	}
	if (inet_addr_is_wildcard(&c->listen_address))
		return err_set(ERR_CONFIG,
			       "%s: listen_address: listen_address cannot be a "
			       "wildcard address (%s)!",
			       file, host_text(&c->listen_address, a));
	if (inet_addr_is_wildcard(&c->broadcast_address))
		return err_set(
			ERR_CONFIG,
			"%s: broadcast_address: broadcast_address cannot "
			"be a wildcard address (%s)!",
			file, host_text(&c->broadcast_address, a));
	if (c->broadcast_address.family == INET_NONE)
		c->broadcast_address = c->listen_address;

	if (c->rpc_address.family != INET_NONE && c->rpc_interface)
		return err_set(ERR_CONFIG,
			       "%s: rpc_interface: Set rpc_address OR "
			       "rpc_interface, not both",
			       file);
	if (c->rpc_interface) {
		if (interface_address(file, "rpc_interface", c->rpc_interface,
				      c->rpc_interface_prefer_ipv6,
				      &c->rpc_address) != 0)
			return -1;
	} else if (c->rpc_address.family == INET_NONE) {
		c->rpc_address = c->listen_address;
	}
	if (inet_addr_is_wildcard(&c->broadcast_rpc_address))
		return err_set(
			ERR_CONFIG,
			"%s: broadcast_rpc_address: broadcast_rpc_address "
			"cannot be a wildcard address (%s)!",
			file, host_text(&c->broadcast_rpc_address, a));
	if (c->broadcast_rpc_address.family == INET_NONE) {
		if (inet_addr_is_wildcard(&c->rpc_address))
			return err_set(
				ERR_CONFIG,
				"%s: broadcast_rpc_address: If rpc_address is "
				"set to a wildcard address (%s), then you must "
				"set broadcast_rpc_address to a value other "
				"than %s",
				file, host_text(&c->rpc_address, a), a);
		c->broadcast_rpc_address = c->rpc_address;
	}
	/* Cassandra's LOCAL_JMX: the admin endpoint answers only on this
	 * host unless admin_address says otherwise; on a loopback listen
	 * address (test clusters, one per 127.0.x.y) it shares that. */
	if (c->admin_address.family == INET_NONE) {
		if (inet_addr_is_loopback(&c->listen_address))
			c->admin_address = c->listen_address;
		else
			inet_addr_parse_host(c->listen_address.family == INET_V6
						     ? "::1"
						     : "127.0.0.1",
					     &c->admin_address);
	}
	if (c->metrics_address.family == INET_NONE)
		c->metrics_address = c->admin_address;
	if (c->metrics_port != 0 && inet_addr_is_wildcard(&c->metrics_address))
		return err_set(ERR_CONFIG,
			       "%s: metrics_address: metrics_address cannot be "
			       "a wildcard address (%s)!",
			       file, host_text(&c->metrics_address, a));
	c->listen_address.port = (uint16_t)c->storage_port;
	c->broadcast_address.port = (uint16_t)c->storage_port;
	c->rpc_address.port = (uint16_t)c->native_transport_port;
	c->broadcast_rpc_address.port = (uint16_t)c->native_transport_port;
	c->admin_address.port = (uint16_t)c->admin_port;
	c->metrics_address.port = (uint16_t)c->metrics_port;
	return 0;
}

/* Rules that involve more than one key. */
static int conf_validate(struct conf *c, const char *file)
{
	const char *part = c->partitioner ? c->partitioner : "";
	if (strcmp(part, "org.apache.cassandra.dht.Murmur3Partitioner") != 0 &&
	    strcmp(part, "Murmur3Partitioner") != 0)
		return err_set(ERR_CONFIG,
			       "%s: partitioner: '%s' is not supported (only "
			       "org.apache.cassandra.dht.Murmur3Partitioner)",
			       file, part);
	if (!c->cluster_name)
		return err_set(ERR_CONFIG,
			       "%s: cluster_name: must not be empty", file);
	if (resolve_addresses(c, file) != 0)
		return -1;
	if (c->authorizer == CONF_AUTHZ_CASSANDRA &&
	    c->authenticator == CONF_AUTH_ALLOW_ALL)
		return err_set(ERR_CONFIG,
			       "%s: authorizer: AllowAllAuthenticator can't be "
			       "used with CassandraAuthorizer",
			       file);
	if (c->data_file_directories.count == 0)
		return err_set(ERR_CONFIG,
			       "%s: data_file_directories: at least one "
			       "directory is needed",
			       file);
	if (c->batch_size_fail_threshold < c->batch_size_warn_threshold)
		return err_set(
			ERR_CONFIG,
			"%s: batch_size_fail_threshold: must not be below "
			"batch_size_warn_threshold",
			file);
	if (c->tombstone_failure_threshold < c->tombstone_warn_threshold)
		return err_set(ERR_CONFIG,
			       "%s: tombstone_failure_threshold: must not be "
			       "below tombstone_warn_threshold",
			       file);
	if (c->rfp_cached_rows_fail_threshold <
	    c->rfp_cached_rows_warn_threshold)
		return err_set(ERR_CONFIG,
			       "%s: replica_filtering_protection."
			       "cached_rows_fail_threshold: must not be below "
			       "cached_rows_warn_threshold",
			       file);
	const char *jks = c->client_encryption.store_type == CONF_STORE_JKS
				  ? "client_encryption_options"
			  : c->server_encryption.store_type == CONF_STORE_JKS
				  ? "server_encryption_options"
			  : c->jmx_encryption.store_type == CONF_STORE_JKS
				  ? "jmx_encryption_options"
				  : NULL;
	if (jks)
		return err_set(ERR_CONFIG,
			       "%s: %s.store_type: JKS keystores are not read; "
			       "use PKCS12 (store_type: PKCS12, converted with "
			       "keytool -importkeystore -deststoretype PKCS12) "
			       "or PEM (openssl pkcs12 -nodes)",
			       file, jks);
	if (parse_seeds(c, file) != 0 || check_tokens(c, file) != 0)
		return -1;
	return 0;
}

static int read_text(const char *path, char **out, size_t *len, bool *missing)
{
	FILE *f = fopen(path, "rb");
	*missing = false;
	if (!f) {
		if (errno == ENOENT) {
			*missing = true;
			return err_set(ERR_CONFIG, "%s: no such file", path);
		}
		return err_set(ERR_CONFIG, "%s: %s", path, strerror(errno));
	}
	char *buf = malloc(CONF_FILE_MAX + 1);
	if (!buf) {
		fclose(f);
		return err_set(ERR_NOMEM, "out of memory");
	}
	size_t n = fread(buf, 1, CONF_FILE_MAX + 1, f);
	int bad = ferror(f);
	fclose(f);
	if (bad || n > CONF_FILE_MAX) {
		free(buf);
		return err_set(ERR_CONFIG, "%s: %s", path,
			       bad ? "read error" : "larger than 1 MiB");
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

static char *home_of(const char *conf_dir)
{
	char abs[PATH_MAX];
	if (!realpath(conf_dir, abs))
		return NULL;
	char *slash = strrchr(abs, '/');
	if (slash == abs)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	return strdup(abs);
}

int conf_load(struct conf *c, const char *conf_dir)
{
	char path[PATH_MAX];
	char *text = NULL;
	size_t len;
	bool missing;

	if (conf_init_defaults(c) != 0)
		return -1;
	c->conf_dir = strdup(conf_dir);
	c->home_dir = home_of(conf_dir);
	if (!c->conf_dir || !c->home_dir) {
		int rc = err_set(ERR_CONFIG,
				 "%s: cannot open configuration "
				 "directory",
				 conf_dir);
		conf_free(c);
		return rc;
	}

	snprintf(path, sizeof(path), "%s/node.yaml", conf_dir);
	if (read_text(path, &text, &len, &missing) != 0)
		goto fail;
	if (conf_parse_yaml(c, path, (const uint8_t *)text, len) != 0)
		goto fail;
	free(text);
	text = NULL;

	snprintf(path, sizeof(path), "%s/rackdc.properties", conf_dir);
	if (read_text(path, &text, &len, &missing) == 0) {
		if (conf_parse_rackdc(c, path, text, len) != 0)
			goto fail;
		free(text);
		text = NULL;
	} else if (!missing ||
		   c->endpoint_snitch == CONF_SNITCH_GOSSIPING_PROPERTY_FILE) {
		if (missing)
			err_set(ERR_CONFIG,
				"%s: GossipingPropertyFileSnitch needs this "
				"file "
				"(dc=..., rack=...)",
				path);
		goto fail;
	}
	if (c->endpoint_snitch == CONF_SNITCH_SIMPLE) {
		/* SimpleSnitch ignores the file, as Cassandra does. */
		if (set_string(&c->dc, "datacenter1") != 0 ||
		    set_string(&c->rack, "rack1") != 0)
			goto fail;
	} else if (c->dc_suffix) {
		size_t n = strlen(c->dc) + strlen(c->dc_suffix) + 1;
		char *dc = malloc(n);
		if (!dc) {
			err_set(ERR_NOMEM, "out of memory");
			goto fail;
		}
		snprintf(dc, n, "%s%s", c->dc, c->dc_suffix);
		free(c->dc);
		c->dc = dc;
	}

	snprintf(path, sizeof(path), "%s/node.yaml", conf_dir);
	if (conf_validate(c, path) != 0)
		goto fail;
	for (size_t i = 0; i < c->data_file_directories.count; i++)
		if (resolve_path(&c->data_file_directories.items[i],
				 c->home_dir) != 0)
			goto fail;
	if (resolve_path(&c->commitlog_directory, c->home_dir) != 0 ||
	    resolve_path(&c->hints_directory, c->home_dir) != 0 ||
	    resolve_path(&c->saved_caches_directory, c->home_dir) != 0 ||
	    resolve_path(&c->log_directory, c->home_dir) != 0)
		goto fail;
	return 0;
fail:
	free(text);
	conf_free(c);
	return -1;
}

/* ---- documentation table ------------------------------------------------- */

/* 1073741824 -> "1GiB", 5120 -> "5KiB", 1000 -> "1000B". */
static void fmt_size(char *dst, size_t cap, double v)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	uint64_t n = (uint64_t)v;
	while (u < 4 && n >= 1024 && n % 1024 == 0) {
		n /= 1024;
		u++;
	}
	snprintf(dst, cap, "%llu%s", (unsigned long long)n, units[u]);
}

/* 10800000 -> "3h", 60000 -> "1m", 1500 -> "1500ms". */
static void fmt_duration(char *dst, size_t cap, double v)
{
	static const struct {
		const char *unit;
		uint64_t ms;
	} units[] = {
		{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};
	uint64_t n = (uint64_t)v;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (n >= units[i].ms && n % units[i].ms == 0) {
			snprintf(dst, cap, "%llu%s",
				 (unsigned long long)(n / units[i].ms),
				 units[i].unit);
			return;
		}
	}
	snprintf(dst, cap, "%llums", (unsigned long long)n);
}

size_t conf_key_count(void)
{
	return conf_keys_count;
}

const struct conf_key_doc *conf_key_doc_at(size_t index)
{
	static _Thread_local struct conf_key_doc doc;
	static _Thread_local char range[96];
	static const char *const type_names[] = {
		[CONF_T_STRING] = "string",
		[CONF_T_PATH] = "path",
		[CONF_T_BOOL] = "boolean",
		[CONF_T_INT] = "integer",
		[CONF_T_DOUBLE] = "number",
		[CONF_T_DURATION] = "duration",
		[CONF_T_SIZE] = "size",
		[CONF_T_RATE] = "rate",
		[CONF_T_ENUM] = "enum",
		[CONF_T_LIST] = "list",
		[CONF_T_PATH_LIST] = "path list",
		[CONF_T_HOST] = "address",
		[CONF_T_SEEDS] = "seed_provider",
	};
	if (index >= conf_keys_count)
		return NULL;
	const struct conf_key *k = &conf_keys[index];
	range[0] = '\0';
	switch (k->type) {
	case CONF_T_INT:
		snprintf(range, sizeof(range), "%.0f to %.0f", k->min, k->max);
		break;
	case CONF_T_DOUBLE:
		snprintf(range, sizeof(range), "%g to %g", k->min, k->max);
		break;
	case CONF_T_DURATION:
	case CONF_T_SIZE:
	case CONF_T_RATE: {
		char lo[32], hi[32];
		if (k->type == CONF_T_DURATION) {
			fmt_duration(lo, sizeof(lo), k->min);
			fmt_duration(hi, sizeof(hi), k->max);
		} else {
			fmt_size(lo, sizeof(lo), k->min);
			fmt_size(hi, sizeof(hi), k->max);
		}
		snprintf(range, sizeof(range), "%s to %s%s", lo, hi,
			 k->type == CONF_T_RATE ? " per second" : "");
		break;
	}
	case CONF_T_ENUM: {
		size_t n = 0;
		for (const struct conf_enum_name *e = k->enum_names;
		     e->name && n < sizeof(range); e++)
			n += (size_t)snprintf(range + n, sizeof(range) - n,
					      "%s%s", n ? ", " : "", e->name);
		break;
	}
	default:
		break;
	}
	doc.name = k->name;
	doc.type = type_names[k->type];
	doc.default_text = k->default_text;
	doc.range_text = range;
	doc.doc = k->doc;
	return &doc;
}

const char *conf_value_text(const struct conf *c, size_t index, char *dst,
			    size_t cap)
{
	if (index >= conf_keys_count || cap == 0)
		return NULL;
	const struct conf_key *k = &conf_keys[index];
	const void *p = (const char *)c + k->offset;
	dst[0] = '\0';
	switch (k->type) {
	case CONF_T_STRING:
	case CONF_T_PATH:
	case CONF_T_SEEDS: {
		const char *s = *(char *const *)p;
		if (!s)
			return NULL;
		snprintf(dst, cap, "%s", s);
		break;
	}
	case CONF_T_BOOL:
		snprintf(dst, cap, "%s", *(const bool *)p ? "true" : "false");
		break;
	case CONF_T_INT:
		snprintf(dst, cap, "%lld", (long long)*(const int64_t *)p);
		break;
	case CONF_T_DOUBLE:
		snprintf(dst, cap, "%g", *(const double *)p);
		break;
	case CONF_T_DURATION:
		fmt_duration(dst, cap, (double)*(const uint64_t *)p);
		break;
	case CONF_T_SIZE:
		fmt_size(dst, cap, (double)*(const uint64_t *)p);
		break;
	case CONF_T_RATE: {
		char size[48];
		fmt_size(size, sizeof(size), (double)*(const uint64_t *)p);
		snprintf(dst, cap, "%s/s", size);
		break;
	}
	case CONF_T_ENUM: {
		int64_t v = *(const int64_t *)p;
		for (const struct conf_enum_name *e = k->enum_names; e->name;
		     e++)
			if (e->value == v) {
				snprintf(dst, cap, "%s", e->name);
				break;
			}
		break;
	}
	case CONF_T_LIST:
	case CONF_T_PATH_LIST: {
		const struct conf_string_list *l = p;
		size_t used = 0;
		for (size_t i = 0; i < l->count && used + 1 < cap; i++) {
			int n = snprintf(dst + used, cap - used, "%s%s",
					 i ? "," : "", l->items[i]);
			if (n < 0)
				break;
			used += (size_t)n;
		}
		break;
	}
	case CONF_T_HOST: {
		const struct inet_addr *a = p;
		if (a->family == INET_NONE)
			return NULL;
		if (!inet_ntop(a->family == INET_V6 ? AF_INET6 : AF_INET, a->ip,
			       dst, (socklen_t)cap))
			return NULL;
		break;
	}
	}
	return dst;
}
