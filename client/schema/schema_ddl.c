/*
 * DDL: CREATE/ALTER/DROP KEYSPACE and TABLE applied to the registry, with
 * Cassandra's checks and sentences. Every change builds the new objects
 * first and swaps them in only when all checks passed, so a refused
 * statement leaves the schema as it was; replaced objects are retired, not
 * freed (see schema.h).
 */
#include "client/schema/schema_internal.h"

#include "common/err.h"
#include "common/uuid.h"
#include "ring/ring.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NAME_MAX_LEN 48

static enum cql_schema_status fail(enum cql_schema_status st, const char *fmt,
				   ...) __attribute__((format(printf, 2, 3)));

static enum cql_schema_status fail(enum cql_schema_status st, const char *fmt,
				   ...)
{
	char msg[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	err_set(st == CQL_SCHEMA_NOMEM ? ERR_NOMEM : ERR_INVALID, "%s", msg);
	return st;
}

static enum cql_schema_status nomem(void)
{
	return fail(CQL_SCHEMA_NOMEM, "out of memory");
}

static bool valid_name(const char *n)
{
	size_t len = strlen(n);
	if (len == 0 || len > NAME_MAX_LEN)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)n[i]) && n[i] != '_')
			return false;
	return true;
}

static bool system_name(const char *ks)
{
	return strcmp(ks, "system") == 0 || strcmp(ks, "system_schema") == 0 ||
	       strcmp(ks, "system_auth") == 0 ||
	       strcmp(ks, "system_distributed") == 0 ||
	       strcmp(ks, "system_traces") == 0 ||
	       strcmp(ks, "system_virtual_schema") == 0 ||
	       strcmp(ks, "system_views") == 0;
}

/* A constant option value as text (Cassandra keeps options as strings). */
static int term_text(const struct cql_term *t, char *dst, size_t cap)
{
	switch (t->kind) {
	case CQL_TERM_STRING:
	case CQL_TERM_INTEGER:
	case CQL_TERM_FLOAT:
	case CQL_TERM_BOOLEAN:
	case CQL_TERM_UUID:
		if (t->len + 2 > cap)
			return -1;
		snprintf(dst, cap, "%s%.*s", t->negative ? "-" : "",
			 (int)t->len, t->text);
		return 0;
	default:
		return -1;
	}
}

/* ---- types --------------------------------------------------------------- */

static const struct {
	const char *name;
	uint16_t kind;
} simple_types[] = {
	{"ascii", STORAGE_TYPE_ASCII},
	{"bigint", STORAGE_TYPE_BIGINT},
	{"blob", STORAGE_TYPE_BLOB},
	{"boolean", STORAGE_TYPE_BOOLEAN},
	{"date", STORAGE_TYPE_DATE},
	{"decimal", STORAGE_TYPE_DECIMAL},
	{"double", STORAGE_TYPE_DOUBLE},
	{"float", STORAGE_TYPE_FLOAT},
	{"inet", STORAGE_TYPE_INET},
	{"int", STORAGE_TYPE_INT},
	{"smallint", STORAGE_TYPE_SMALLINT},
	{"text", STORAGE_TYPE_TEXT},
	{"varchar", STORAGE_TYPE_TEXT},
	{"time", STORAGE_TYPE_TIME},
	{"timestamp", STORAGE_TYPE_TIMESTAMP},
	{"timeuuid", STORAGE_TYPE_TIMEUUID},
	{"tinyint", STORAGE_TYPE_TINYINT},
	{"uuid", STORAGE_TYPE_UUID},
	{"varint", STORAGE_TYPE_VARINT},
};

static int simple_kind(const char *name)
{
	for (size_t i = 0; i < sizeof(simple_types) / sizeof(simple_types[0]);
	     i++)
		if (strcmp(simple_types[i].name, name) == 0)
			return simple_types[i].kind;
	return -1;
}

static enum cql_schema_status map_element(const struct cql_type_ast *t,
					  const char *ks, uint16_t *out)
{
	if (t->param_count || strcmp(t->name, "list") == 0 ||
	    strcmp(t->name, "set") == 0 || strcmp(t->name, "map") == 0)
		return fail(CQL_SCHEMA_UNSUPPORTED,
			    "Nested collections are not supported by Cassini "
			    "yet");
	int k = simple_kind(t->name);
	if (k < 0)
		return fail(CQL_SCHEMA_INVALID, "Unknown type %s.%s", ks,
			    t->name);
	*out = (uint16_t)k;
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status map_type(const struct cql_type_ast *t,
				       const char *ks, struct storage_type *out)
{
	enum cql_schema_status st;
	memset(out, 0, sizeof(*out));
	if (strcmp(t->name, "counter") == 0)
		return fail(CQL_SCHEMA_UNSUPPORTED,
			    "Counters are not supported by Cassini yet");
	if (strcmp(t->name, "duration") == 0 || strcmp(t->name, "tuple") == 0)
		return fail(CQL_SCHEMA_UNSUPPORTED,
			    "The %s type is not supported by Cassini yet",
			    t->name);
	bool list = strcmp(t->name, "list") == 0,
	     set = strcmp(t->name, "set") == 0,
	     map = strcmp(t->name, "map") == 0;
	if (list || set || map) {
		size_t want = map ? 2 : 1;
		if (t->param_count != want)
			return fail(CQL_SCHEMA_INVALID,
				    "%s takes %zu type parameter%s", t->name,
				    want, want > 1 ? "s" : "");
		out->kind = list  ? STORAGE_TYPE_LIST
			    : set ? STORAGE_TYPE_SET
				  : STORAGE_TYPE_MAP;
		out->frozen = t->frozen;
		if ((st = map_element(t->params[0], ks, &out->elem)) !=
		    CQL_SCHEMA_OK)
			return st;
		if (map && (st = map_element(t->params[1], ks, &out->value)) !=
				   CQL_SCHEMA_OK)
			return st;
		return CQL_SCHEMA_OK;
	}
	int k = simple_kind(t->name);
	if (k < 0)
		return fail(CQL_SCHEMA_INVALID, "Unknown type %s.%s", ks,
			    t->name);
	if (t->param_count)
		return fail(CQL_SCHEMA_INVALID, "Type %s takes no parameters",
			    t->name);
	if (t->frozen)
		return fail(
			CQL_SCHEMA_INVALID,
			"frozen<> is only allowed on collections, tuples, and "
			"user-defined types (got %s)",
			t->name);
	out->kind = (uint16_t)k;
	return CQL_SCHEMA_OK;
}

/* ---- table options ------------------------------------------------------- */

/* Cassandra keeps option values as strings (PropertyDefinitions): any
 * constant is one, a map is not. */
static enum cql_schema_status option_simple(const struct cql_option *o,
					    char *dst, size_t cap)
{
	if (o->value->kind == CQL_TERM_MAP || o->value->kind == CQL_TERM_SET ||
	    o->value->kind == CQL_TERM_LIST)
		return fail(CQL_SCHEMA_SYNTAX,
			    "Invalid value for property '%s'. It should be a "
			    "string",
			    o->name);
	if (term_text(o->value, dst, cap) != 0)
		return fail(CQL_SCHEMA_SYNTAX,
			    "Invalid value for property '%s'", o->name);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status option_map(const struct cql_option *o)
{
	if (o->value->kind == CQL_TERM_MAP)
		return CQL_SCHEMA_OK;
	return fail(CQL_SCHEMA_SYNTAX,
		    "Invalid value for property '%s'. It should be a map.",
		    o->name);
}

/* A double as Java's Double.toString prints it (1.23, 0.0, 1.0E-5). */
static void java_double(double d, char *dst, size_t cap)
{
	if (d != 0 && (fabs(d) < 1e-3 || fabs(d) >= 1e7)) {
		int p = 1;
		for (; p < 17; p++) {
			snprintf(dst, cap, "%.*e", p - 1, d);
			if (strtod(dst, NULL) == d)
				break;
		}
		char mant[32];
		int exp = 0;
		char *e = strchr(dst, 'e');
		if (!e)
			return;
		exp = atoi(e + 1);
		snprintf(mant, sizeof(mant), "%.*s", (int)(e - dst), dst);
		if (!strchr(mant, '.'))
			strcat(mant, ".0");
		snprintf(dst, cap, "%sE%d", mant, exp);
		return;
	}
	for (int p = 1; p < 17; p++) {
		snprintf(dst, cap, "%.*g", p, d);
		if (strtod(dst, NULL) == d)
			break;
	}
	if (!strchr(dst, '.') && !strchr(dst, 'e') && !strchr(dst, 'n') &&
	    strlen(dst) + 3 <= cap)
		strcat(dst, ".0");
}

static enum cql_schema_status option_double(const struct cql_option *o,
					    double *out)
{
	char text[64];
	enum cql_schema_status st = option_simple(o, text, sizeof(text));
	if (st != CQL_SCHEMA_OK)
		return st;
	char *end;
	*out = strtod(text, &end);
	if (end == text || *end)
		return fail(CQL_SCHEMA_SYNTAX,
			    "Invalid double value %s for '%s'", text, o->name);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status option_int(const struct cql_option *o, int64_t lo,
					 int64_t hi, int64_t *out)
{
	char text[32];
	char *end;
	enum cql_schema_status st = option_simple(o, text, sizeof(text));
	if (st != CQL_SCHEMA_OK)
		return st;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (end == text || *end || errno || v < INT32_MIN || v > INT32_MAX)
		return fail(CQL_SCHEMA_SYNTAX,
			    "Invalid integer value %s for '%s'", text, o->name);
	if (v < lo)
		return fail(CQL_SCHEMA_CONFIG,
			    "%s must be greater than or equal "
			    "to %lld (got %lld)",
			    o->name, (long long)lo, v);
	if (v > hi)
		return fail(CQL_SCHEMA_CONFIG,
			    "%s must be less than or equal to "
			    "%lld (got %lld)",
			    o->name, (long long)hi, v);
	*out = v;
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status option_string(const struct cql_option *o,
					    char *dst, size_t cap)
{
	enum cql_schema_status st = option_simple(o, dst, cap);
	if (st != CQL_SCHEMA_OK && o->value->kind != CQL_TERM_MAP)
		return fail(CQL_SCHEMA_CONFIG, "Value of %s is too long",
			    o->name);
	return st;
}

static bool class_is(const char *given, const char *pkg, const char *name)
{
	char full[160];
	snprintf(full, sizeof(full), "%s%s", pkg, name);
	return strcmp(given, name) == 0 || strcmp(given, full) == 0;
}

static enum cql_schema_status compaction_option(const struct cql_term *map,
						struct storage_table_options *o)
{
	static const char pkg[] = "org.apache.cassandra.db.compaction.";
	static const char *const common[] = {"enabled",
					     "tombstone_threshold",
					     "tombstone_compaction_interval",
					     "unchecked_tombstone_compaction",
					     "only_purge_repaired_tombstones",
					     "log_all",
					     "provide_overlapping_tombstones"};
	static const char *const stcs[] = {"bucket_high", "bucket_low",
					   "min_sstable_size"};
	static const char *const lcs[] = {"sstable_size_in_mb", "fanout_size",
					  "single_sstable_uplevel"};
	static const char *const twcs[] = {
		"compaction_window_unit", "compaction_window_size",
		"timestamp_resolution",
		"expired_sstable_check_frequency_seconds",
		"unsafe_aggressive_sstable_expiration"};
	char klass[128] = "", key[64], val[128];
	int64_t window_size = 1, unit = 86400;
	uint32_t min = 4, max = 32;
	double threshold = 0.2;
	int64_t interval = 86400;
	bool unchecked = false;
	int64_t sstable_mb = 160, fanout = 10;
	if (map->kind != CQL_TERM_MAP)
		return fail(CQL_SCHEMA_SYNTAX,
			    "Invalid value for property 'compaction'. It "
			    "should be a map.");
	for (size_t i = 0; i + 1 < map->count; i += 2)
		if (term_text(map->items[i], key, sizeof(key)) == 0 &&
		    strcmp(key, "class") == 0)
			term_text(map->items[i + 1], klass, sizeof(klass));
	if (!klass[0])
		return fail(CQL_SCHEMA_CONFIG,
			    "Missing sub-option 'class' for the "
			    "'compaction' option.");
	bool tw = class_is(klass, pkg, "TimeWindowCompactionStrategy");
	bool lv = class_is(klass, pkg, "LeveledCompactionStrategy");
	if (class_is(klass, pkg, "UnifiedCompactionStrategy") ||
	    class_is(klass, pkg, "DateTieredCompactionStrategy"))
		return fail(CQL_SCHEMA_UNSUPPORTED,
			    "%s is not supported by Cassini yet; use "
			    "SizeTieredCompactionStrategy, "
			    "LeveledCompactionStrategy or "
			    "TimeWindowCompactionStrategy",
			    klass);
	if (!tw && !lv && !class_is(klass, pkg, "SizeTieredCompactionStrategy"))
		return fail(CQL_SCHEMA_CONFIG,
			    "Unable to find compaction strategy class '%s'",
			    klass);
	for (size_t i = 0; i + 1 < map->count; i += 2) {
		if (term_text(map->items[i], key, sizeof(key)) != 0 ||
		    term_text(map->items[i + 1], val, sizeof(val)) != 0)
			return fail(CQL_SCHEMA_SYNTAX,
				    "Invalid compaction option");
		if (strcmp(key, "class") == 0)
			continue;
		bool known = false;
		for (size_t k = 0; k < sizeof(common) / sizeof(common[0]); k++)
			known |= strcmp(key, common[k]) == 0;
		for (size_t k = 0; !tw && k < sizeof(stcs) / sizeof(stcs[0]);
		     k++)
			known |= strcmp(key, stcs[k]) == 0;
		for (size_t k = 0; lv && k < sizeof(lcs) / sizeof(lcs[0]); k++)
			known |= strcmp(key, lcs[k]) == 0;
		for (size_t k = 0; tw && k < sizeof(twcs) / sizeof(twcs[0]);
		     k++)
			known |= strcmp(key, twcs[k]) == 0;
		if (strcmp(key, "min_threshold") == 0) {
			min = (uint32_t)strtoul(val, NULL, 10);
			known = true;
		} else if (strcmp(key, "max_threshold") == 0) {
			max = (uint32_t)strtoul(val, NULL, 10);
			known = true;
		} else if (strcmp(key, "compaction_window_size") == 0) {
			window_size = strtoll(val, NULL, 10);
			if (window_size < 1)
				return fail(
					CQL_SCHEMA_CONFIG,
					"%s must be greater than 0, but was "
					"%s",
					key, val);
		} else if (lv && (strcmp(key, "sstable_size_in_mb") == 0 ||
				  strcmp(key, "fanout_size") == 0)) {
			char *end;
			long long v = strtoll(val, &end, 10);
			if (end == val || *end)
				return fail(CQL_SCHEMA_CONFIG,
					    "%s is not a parsable int (base10) "
					    "for %s",
					    val, key);
			if (v < 1 || v > (1 << 20))
				return fail(CQL_SCHEMA_CONFIG,
					    "%s must be larger than 0, but was "
					    "%s",
					    key, val);
			if (key[0] == 's')
				sstable_mb = v;
			else
				fanout = v;
		} else if (lv && strcmp(key, "single_sstable_uplevel") == 0) {
			if (strcasecmp(val, "true") == 0)
				return fail(
					CQL_SCHEMA_UNSUPPORTED,
					"single_sstable_uplevel is not "
					"supported by Cassini yet (SSTables "
					"move up a level by compaction)");
			if (strcasecmp(val, "false") != 0)
				return fail(CQL_SCHEMA_CONFIG,
					    "'%s' should be either 'true' or "
					    "'false', not '%s'",
					    key, val);
		} else if (strcmp(key, "tombstone_threshold") == 0) {
			char *end;
			double v = strtod(val, &end);
			if (end == val || *end)
				return fail(CQL_SCHEMA_CONFIG,
					    "%s is not a parsable int (base10) "
					    "for %s",
					    val, key);
			if (v < 0)
				return fail(CQL_SCHEMA_CONFIG,
					    "%s must be greater than 0, but "
					    "was %f",
					    key, v);
			threshold = v;
		} else if (strcmp(key, "tombstone_compaction_interval") == 0) {
			char *end;
			long long v = strtoll(val, &end, 10);
			if (end == val || *end)
				return fail(CQL_SCHEMA_CONFIG,
					    "%s is not a parsable int (base10) "
					    "for %s",
					    val, key);
			if (v < 0)
				return fail(CQL_SCHEMA_CONFIG,
					    "%s must be greater than 0, but "
					    "was %lld",
					    key, v);
			interval = v;
		} else if (strcmp(key, "unchecked_tombstone_compaction") == 0) {
			if (strcasecmp(val, "true") != 0 &&
			    strcasecmp(val, "false") != 0)
				return fail(CQL_SCHEMA_CONFIG,
					    "'%s' should be either 'true' or "
					    "'false', not '%s'",
					    key, val);
			unchecked = strcasecmp(val, "true") == 0;
		} else if (strcmp(key, "compaction_window_unit") == 0) {
			unit = strcasecmp(val, "MINUTES") == 0 ? 60
			       : strcasecmp(val, "HOURS") == 0 ? 3600
			       : strcasecmp(val, "DAYS") == 0  ? 86400
							       : 0;
			if (!unit)
				return fail(CQL_SCHEMA_CONFIG,
					    "%s is not valid for %s", val, key);
		}
		if (!known)
			return fail(
				CQL_SCHEMA_CONFIG,
				"Properties specified [%s] are not understood "
				"by %s",
				key,
				tw   ? "TimeWindowCompactionStrategy"
				: lv ? "LeveledCompactionStrategy"
				     : "SizeTieredCompactionStrategy");
	}
	if (min < 2 || max < 2)
		return fail(
			CQL_SCHEMA_CONFIG,
			"Disabling compaction by setting compaction thresholds "
			"to 0 has been removed, set the compaction option "
			"'enabled' to false instead.");
	if (min > max)
		return fail(
			CQL_SCHEMA_CONFIG,
			"min_threshold cannot be greater than max_threshold");
	o->compaction = tw   ? STORAGE_COMPACTION_TIME_WINDOW
			: lv ? STORAGE_COMPACTION_LEVELED
			     : STORAGE_COMPACTION_SIZE_TIERED;
	o->sstable_size_bytes = (uint64_t)sstable_mb << 20;
	o->fanout_size = (uint32_t)fanout;
	o->min_threshold = min;
	o->max_threshold = max;
	o->compaction_window_seconds = window_size * unit;
	o->tombstone_threshold = threshold;
	o->tombstone_compaction_interval = interval;
	o->unchecked_tombstone_compaction = unchecked;
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status
compression_option(const struct cql_term *map, struct storage_table_options *o,
		   struct cql_table_options *co)
{
	static const char pkg[] = "org.apache.cassandra.io.compress.";
	char key[64], val[128];
	uint8_t algo = STORAGE_COMPRESSION_LZ4;
	uint32_t chunk = o->chunk_length;
	if (map->kind != CQL_TERM_MAP)
		return fail(CQL_SCHEMA_SYNTAX,
			    "Invalid value for property 'compression'. It "
			    "should be a map.");
	for (size_t i = 0; i + 1 < map->count; i += 2) {
		if (term_text(map->items[i], key, sizeof(key)) != 0 ||
		    term_text(map->items[i + 1], val, sizeof(val)) != 0)
			return fail(CQL_SCHEMA_SYNTAX,
				    "Invalid compression option");
		if (strcmp(key, "class") == 0 ||
		    strcmp(key, "sstable_compression") == 0) {
			if (class_is(val, pkg, "LZ4Compressor"))
				algo = STORAGE_COMPRESSION_LZ4;
			else if (class_is(val, pkg, "DeflateCompressor"))
				algo = STORAGE_COMPRESSION_DEFLATE;
			else if (val[0] == '\0')
				algo = STORAGE_COMPRESSION_NONE;
			else if (class_is(val, pkg, "SnappyCompressor") ||
				 class_is(val, pkg, "ZstdCompressor"))
				return fail(
					CQL_SCHEMA_UNSUPPORTED,
					"%s is not supported by Cassini yet; "
					"use LZ4Compressor or "
					"DeflateCompressor",
					val);
			else
				return fail(
					CQL_SCHEMA_CONFIG,
					"Could not create Compression for type "
					"%s",
					val);
		} else if (strcmp(key, "enabled") == 0) {
			if (strcasecmp(val, "false") == 0)
				algo = STORAGE_COMPRESSION_NONE;
		} else if (strcmp(key, "chunk_length_in_kb") == 0 ||
			   strcmp(key, "chunk_length_kb") == 0) {
			long kb = strtol(val, NULL, 10);
			if (kb <= 0 || (kb & (kb - 1)) || kb > 65536)
				return fail(
					CQL_SCHEMA_CONFIG,
					"chunk_length_in_kb must be a power of "
					"2");
			chunk = (uint32_t)kb * 1024;
		} else if (strcmp(key, "crc_check_chance") == 0) {
			co->crc_check_chance = strtod(val, NULL);
		} else {
			return fail(CQL_SCHEMA_CONFIG,
				    "Unknown compression options "
				    "%s",
				    key);
		}
	}
	o->compression = algo;
	o->chunk_length = chunk;
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status caching_option(const struct cql_term *map,
					     struct cql_table_options *co)
{
	char key[32], val[16];
	if (map->kind != CQL_TERM_MAP)
		return fail(CQL_SCHEMA_SYNTAX,
			    "Invalid value for property 'caching'. It should "
			    "be a map.");
	for (size_t i = 0; i + 1 < map->count; i += 2) {
		if (term_text(map->items[i], key, sizeof(key)) != 0 ||
		    term_text(map->items[i + 1], val, sizeof(val)) != 0)
			return fail(CQL_SCHEMA_CONFIG,
				    "Invalid caching option");
		bool numeric = val[0] != '\0';
		for (const char *c = val; *c; c++)
			numeric &= *c >= '0' && *c <= '9';
		if (strcmp(key, "keys") == 0) {
			if (strcasecmp(val, "ALL") != 0 &&
			    strcasecmp(val, "NONE") != 0)
				return fail(CQL_SCHEMA_CONFIG,
					    "Invalid value '%s' for caching "
					    "sub-option 'keys': only 'ALL' and "
					    "'NONE' are allowed",
					    val);
			snprintf(co->caching_keys, sizeof(co->caching_keys),
				 "%s", val);
		} else if (strcmp(key, "rows_per_partition") == 0) {
			if (strcasecmp(val, "ALL") != 0 &&
			    strcasecmp(val, "NONE") != 0 &&
			    (!numeric || strlen(val) > 10 ||
			     strtoll(val, NULL, 10) > INT32_MAX))
				return fail(CQL_SCHEMA_CONFIG,
					    "Invalid value '%s' for caching "
					    "sub-option 'rows_per_partition': "
					    "only 'ALL', 'NONE', and integer "
					    "values are allowed",
					    val);
			snprintf(co->caching_rows, sizeof(co->caching_rows),
				 "%s", val);
		} else {
			return fail(CQL_SCHEMA_CONFIG,
				    "Invalid caching sub-options [%s]: only "
				    "'keys' and 'rows_per_partition' are "
				    "allowed",
				    key);
		}
	}
	return CQL_SCHEMA_OK;
}

static bool valid_speculative_retry(const char *v)
{
	if (strcasecmp(v, "NONE") == 0 || strcasecmp(v, "ALWAYS") == 0)
		return true;
	char *end;
	double d = strtod(v, &end);
	if (end == v || d < 0)
		return false;
	return strcasecmp(end, "p") == 0 ||
	       strcasecmp(end, "percentile") == 0 || strcasecmp(end, "ms") == 0;
}

/* The WITH options of CREATE/ALTER TABLE. Each is written as a whole, and
 * an ALTER that raced another on a second node keeps, per option, the
 * value written last (cql_table.option_time). */
enum table_option_slot {
	OPT_DEFAULT_TIME_TO_LIVE,
	OPT_GC_GRACE_SECONDS,
	OPT_BLOOM_FILTER_FP_CHANCE,
	OPT_COMPACTION,
	OPT_COMPRESSION,
	OPT_CACHING,
	OPT_COMMENT,
	OPT_READ_REPAIR,
	OPT_SPECULATIVE_RETRY,
	OPT_ADDITIONAL_WRITE_POLICY,
	OPT_CRC_CHECK_CHANCE,
	OPT_MIN_INDEX_INTERVAL,
	OPT_MAX_INDEX_INTERVAL,
	OPT_MEMTABLE_FLUSH_PERIOD_IN_MS,
	OPT_CDC,
	OPT_EXTENSIONS,
	OPT_ID,
};
_Static_assert(OPT_ID + 1 == TABLE_OPTION_COUNT, "a slot per option");

static const char *const table_option_names[TABLE_OPTION_COUNT] = {
	[OPT_DEFAULT_TIME_TO_LIVE] = "default_time_to_live",
	[OPT_GC_GRACE_SECONDS] = "gc_grace_seconds",
	[OPT_BLOOM_FILTER_FP_CHANCE] = "bloom_filter_fp_chance",
	[OPT_COMPACTION] = "compaction",
	[OPT_COMPRESSION] = "compression",
	[OPT_CACHING] = "caching",
	[OPT_COMMENT] = "comment",
	[OPT_READ_REPAIR] = "read_repair",
	[OPT_SPECULATIVE_RETRY] = "speculative_retry",
	[OPT_ADDITIONAL_WRITE_POLICY] = "additional_write_policy",
	[OPT_CRC_CHECK_CHANCE] = "crc_check_chance",
	[OPT_MIN_INDEX_INTERVAL] = "min_index_interval",
	[OPT_MAX_INDEX_INTERVAL] = "max_index_interval",
	[OPT_MEMTABLE_FLUSH_PERIOD_IN_MS] = "memtable_flush_period_in_ms",
	[OPT_CDC] = "cdc",
	[OPT_EXTENSIONS] = "extensions",
	[OPT_ID] = "id",
};

/* The slot of an option name, or -1 (with the error) when unknown. */
static int table_option_slot(const char *name)
{
	for (int i = 0; i < TABLE_OPTION_COUNT; i++)
		if (strcmp(name, table_option_names[i]) == 0)
			return i;
	fail(CQL_SCHEMA_SYNTAX, "Unknown property '%s'", name);
	return -1;
}

/* One WITH option of CREATE/ALTER TABLE, of a known slot. */
static enum cql_schema_status table_option(const struct cql_option *opt,
					   enum table_option_slot slot,
					   struct storage_table_options *o,
					   struct cql_table_options *co,
					   uint8_t id[16], bool creating)
{
	const char *n = opt->name;
	int64_t v;
	enum cql_schema_status st;
	char text[64];
	switch (slot) {
	case OPT_DEFAULT_TIME_TO_LIVE:
		if ((st = option_int(opt, 0, 630720000, &v)) != CQL_SCHEMA_OK)
			return st;
		o->default_time_to_live = (int32_t)v;
		return CQL_SCHEMA_OK;
	case OPT_GC_GRACE_SECONDS:
		if ((st = option_int(opt, 0, INT32_MAX, &v)) != CQL_SCHEMA_OK)
			return st;
		o->gc_grace_seconds = v;
		return CQL_SCHEMA_OK;
	case OPT_BLOOM_FILTER_FP_CHANCE: {
		double d;
		if ((st = option_double(opt, &d)) != CQL_SCHEMA_OK)
			return st;
		/* BloomCalculations.minSupportedBloomFilterFpChance() */
		if (!(d > 6.71e-05 && d <= 1.0)) {
			java_double(d, text, sizeof(text));
			return fail(CQL_SCHEMA_CONFIG,
				    "bloom_filter_fp_chance must be larger "
				    "than 6.71E-5 and less than or equal to "
				    "1.0 (got %s)",
				    text);
		}
		o->bloom_filter_fp_chance = d;
		return CQL_SCHEMA_OK;
	}
	case OPT_COMPACTION:
		if ((st = option_map(opt)) != CQL_SCHEMA_OK)
			return st;
		return compaction_option(opt->value, o);
	case OPT_COMPRESSION:
		if ((st = option_map(opt)) != CQL_SCHEMA_OK)
			return st;
		return compression_option(opt->value, o, co);
	case OPT_CACHING:
		if ((st = option_map(opt)) != CQL_SCHEMA_OK)
			return st;
		return caching_option(opt->value, co);
	case OPT_COMMENT:
		return option_string(opt, co->comment, sizeof(co->comment));
	case OPT_READ_REPAIR:
		if ((st = option_string(opt, text, sizeof(text))) !=
		    CQL_SCHEMA_OK)
			return st;
		if (strcasecmp(text, "BLOCKING") != 0 &&
		    strcasecmp(text, "NONE") != 0)
			return fail(
				CQL_SCHEMA_CONFIG,
				"Invalid value '%s' for option 'read_repair' "
				"(BLOCKING or NONE)",
				text);
		co->read_repair_blocking = strcasecmp(text, "BLOCKING") == 0;
		return CQL_SCHEMA_OK;
	case OPT_SPECULATIVE_RETRY:
	case OPT_ADDITIONAL_WRITE_POLICY:
		if ((st = option_string(opt, text, sizeof(text))) !=
		    CQL_SCHEMA_OK)
			return st;
		if (!valid_speculative_retry(text) ||
		    strlen(text) >= sizeof(co->speculative_retry))
			return fail(CQL_SCHEMA_CONFIG,
				    "Invalid value %s for option '%s'", text,
				    n);
		if (slot == OPT_SPECULATIVE_RETRY)
			memcpy(co->speculative_retry, text, strlen(text) + 1);
		return CQL_SCHEMA_OK;
	case OPT_CRC_CHECK_CHANCE: {
		double d;
		if ((st = option_double(opt, &d)) != CQL_SCHEMA_OK)
			return st;
		if (!(d >= 0 && d <= 1.0)) {
			java_double(d, text, sizeof(text));
			return fail(CQL_SCHEMA_CONFIG,
				    "crc_check_chance must be larger than or "
				    "equal to 0 and smaller than or equal to "
				    "1.0 (got %s)",
				    text);
		}
		co->crc_check_chance = d;
		return CQL_SCHEMA_OK;
	}
	case OPT_MIN_INDEX_INTERVAL:
		if ((st = option_int(opt, 1, INT32_MAX, &v)) != CQL_SCHEMA_OK)
			return st;
		co->min_index_interval = (int32_t)v;
		return CQL_SCHEMA_OK;
	case OPT_MAX_INDEX_INTERVAL:
		if ((st = option_int(opt, 1, INT32_MAX, &v)) != CQL_SCHEMA_OK)
			return st;
		co->max_index_interval = (int32_t)v;
		return CQL_SCHEMA_OK;
	case OPT_MEMTABLE_FLUSH_PERIOD_IN_MS:
		if ((st = option_int(opt, 0, INT32_MAX, &v)) != CQL_SCHEMA_OK)
			return st;
		co->memtable_flush_period_in_ms = (int32_t)v;
		return CQL_SCHEMA_OK;
	case OPT_CDC:
		if ((st = option_simple(opt, text, sizeof(text))) !=
		    CQL_SCHEMA_OK)
			return st;
		/* PropertyDefinitions.getBoolean: 1, true or yes */
		if (strcasecmp(text, "true") == 0 ||
		    strcasecmp(text, "yes") == 0 || strcmp(text, "1") == 0)
			return fail(CQL_SCHEMA_UNSUPPORTED,
				    "Change data capture is not supported by "
				    "Cassini yet");
		return CQL_SCHEMA_OK;
	case OPT_EXTENSIONS:
		/* Accepted and ignored, as drivers round-trip it. */
		return CQL_SCHEMA_OK;
	case OPT_ID:
		if (!creating)
			return fail(CQL_SCHEMA_CONFIG,
				    "Cannot alter table id.");
		if (opt->value->kind != CQL_TERM_UUID ||
		    opt->value->len != UUID_TEXT_LEN ||
		    uuid_parse_n(opt->value->text, id) != 0)
			return fail(CQL_SCHEMA_SYNTAX, "Invalid value for id");
		return CQL_SCHEMA_OK;
	}
	return fail(CQL_SCHEMA_SYNTAX, "Unknown property '%s'", n);
}

/*
 * Applies the WITH options of a CREATE or ALTER TABLE to o and co.
 * `times` (NULL for a CREATE) are the times the table's options were last
 * written: an option written at `time_us` replaces one written at or
 * before it, and is only checked otherwise (a later ALTER of it ran on
 * another node and reached this one first). time_us 0 (a record from
 * before times were kept) always replaces. *applied counts the options
 * taken.
 */
static enum cql_schema_status
table_options(const struct cql_option *opts, size_t n,
	      struct storage_table_options *o, struct cql_table_options *co,
	      uint8_t id[16], int64_t *times, int64_t time_us, size_t *applied)
{
	*applied = 0;
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < i; j++)
			if (strcmp(opts[i].name, opts[j].name) == 0)
				return fail(CQL_SCHEMA_SYNTAX,
					    "Multiple definition for property "
					    "'%s'",
					    opts[i].name);
		int slot = table_option_slot(opts[i].name);
		if (slot < 0)
			return CQL_SCHEMA_SYNTAX;
		bool newer = !times || time_us == 0 || time_us >= times[slot];
		struct storage_table_options so = *o;
		struct cql_table_options sco = *co;
		enum cql_schema_status st = table_option(
			&opts[i], (enum table_option_slot)slot, newer ? o : &so,
			newer ? co : &sco, id, times == NULL);
		if (st != CQL_SCHEMA_OK)
			return st;
		if (newer && times && time_us)
			times[slot] = time_us;
		*applied += newer;
	}
	if (co->max_index_interval < co->min_index_interval)
		return fail(CQL_SCHEMA_CONFIG,
			    "max_index_interval must be greater than or equal "
			    "to min_index_interval (%d) (got %d)",
			    co->min_index_interval, co->max_index_interval);
	return CQL_SCHEMA_OK;
}

/* ---- keyspaces ----------------------------------------------------------- */

/*
 * Builds a keyspace object from CREATE/ALTER options. For an ALTER, `old`
 * is the keyspace's meta and `times` when its options were last written:
 * an option written at ks->time_us replaces one written at or before it
 * and is left out otherwise (a later ALTER of it ran on another node and
 * reached this one first; time 0 always replaces). CQL_SCHEMA_NOOP when
 * every option is left out.
 */
static enum cql_schema_status
keyspace_from(const struct cql_keyspace_stmt *ks, bool durable_default,
	      const struct storage_keyspace_meta *old, const int64_t *times,
	      struct cql_keyspace **out)
{
	const struct cql_term *repl = NULL;
	bool durable = durable_default;
	int64_t written[KEYSPACE_OPTION_COUNT] = {0};
	size_t taken = 0;
	if (times)
		memcpy(written, times, sizeof(written));
	for (size_t i = 0; i < ks->option_count; i++) {
		const struct cql_option *o = &ks->options[i];
		int slot = strcmp(o->name, "replication") == 0 ? KS_REPLICATION
			   : strcmp(o->name, "durable_writes") == 0
				   ? KS_DURABLE_WRITES
				   : -1;
		if (slot < 0)
			return fail(CQL_SCHEMA_SYNTAX, "Unknown property '%s'",
				    o->name);
		if (slot == KS_DURABLE_WRITES &&
		    o->value->kind != CQL_TERM_BOOLEAN)
			return fail(CQL_SCHEMA_SYNTAX,
				    "Invalid boolean value for "
				    "durable_writes");
		if (times && ks->time_us) {
			if (ks->time_us < times[slot])
				continue;
			written[slot] = ks->time_us;
		}
		taken++;
		if (slot == KS_REPLICATION)
			repl = o->value;
		else
			durable = strcmp(o->value->text, "true") == 0;
	}
	if (ks->option_count && !taken)
		return CQL_SCHEMA_NOOP;
	const char *keys[64], *values[64];
	char kbuf[64][64], vbuf[64][128];
	size_t n = 0;
	if (repl) {
		if (repl->kind != CQL_TERM_MAP || repl->count / 2 > 64)
			return fail(CQL_SCHEMA_SYNTAX,
				    "replication must be a map");
		for (size_t i = 0; i + 1 < repl->count; i += 2, n++) {
			if (term_text(repl->items[i], kbuf[n],
				      sizeof(kbuf[n])) != 0 ||
			    term_text(repl->items[i + 1], vbuf[n],
				      sizeof(vbuf[n])) != 0)
				return fail(CQL_SCHEMA_CONFIG,
					    "Invalid replication option");
			keys[n] = kbuf[n];
			values[n] = vbuf[n];
		}
	} else if (old) {
		for (size_t i = 0; i < old->replication_count && i < 64;
		     i++, n++) {
			keys[n] = old->replication_keys[i];
			values[n] = old->replication_values[i];
		}
		if (n < 64 && old->replication_class) {
			keys[n] = "class";
			values[n++] = old->replication_class;
		}
	} else {
		return fail(CQL_SCHEMA_CONFIG,
			    "Missing mandatory option 'replication'");
	}
	struct ring_strategy *strategy =
		ring_strategy_new(keys, values, n, false);
	if (!strategy) {
		if (err_code() == ERR_NOMEM)
			return nomem();
		/* AbstractReplicationStrategy names the keyspace */
		char why[ERR_MSG_MAX];
		snprintf(why, sizeof(why), "%s", err_msg());
		if (strncmp(why, "Unrecognized strategy option", 28) == 0)
			return fail(CQL_SCHEMA_CONFIG, "%s for keyspace %s",
				    why, ks->name);
		return fail(CQL_SCHEMA_CONFIG, "%s", why);
	}
	struct cql_keyspace *k = calloc(1, sizeof(*k));
	if (!k || !(k->meta = storage_keyspace_meta_new(ks->name, durable))) {
		free(k);
		ring_strategy_delete(strategy);
		return nomem();
	}
	k->strategy = strategy;
	memcpy(k->option_time, written, sizeof(written));
	for (size_t i = 0; i < n; i++) {
		const char *v = values[i];
		char full[160];
		if (strcmp(keys[i], "class") == 0 && !strchr(v, '.')) {
			snprintf(full, sizeof(full),
				 "org.apache.cassandra.locator.%s", v);
			v = full;
		}
		if (storage_keyspace_meta_set_replication(k->meta, keys[i],
							  v) != 0) {
			schema_keyspace_free(k);
			return nomem();
		}
	}
	*out = k;
	return CQL_SCHEMA_OK;
}

static void set_change(struct cql_schema_change *c, const char *change,
		       const char *target, const char *ks, const char *name)
{
	c->change = change;
	c->target = target;
	c->replaced = false;
	c->diverged = false;
	c->columns_before = -1;
	c->dropped = NULL;
	c->dropped_count = 0;
	snprintf(c->keyspace, sizeof(c->keyspace), "%s", ks);
	snprintf(c->name, sizeof(c->name), "%s", name ? name : "");
}

/* Puts k in old's place, with old's tables. Cannot fail. */
static void replace_keyspace(struct cql_schema *s, struct cql_keyspace *old,
			     struct cql_keyspace *k)
{
	k->tables = old->tables;
	k->table_count = old->table_count;
	k->table_cap = old->table_cap;
	memcpy(k->tables_digest, old->tables_digest, sizeof(k->tables_digest));
	old->tables = NULL;
	old->table_count = old->table_cap = 0;
	schema_keyspace_remove(s, old);
	schema_keyspace_insert(s, k); /* cannot fail: the slot was freed */
}

/* A CREATE KEYSPACE for a keyspace that exists, applied elsewhere first
 * (k is the statement's): the same keyspace, or a creation that raced on
 * two nodes with other options. Every node keeps the options that sort
 * first (replication as the schema version describes it, then
 * durable_writes), so all end with the same keyspace whatever order the
 * statements reach them in. */
static enum cql_schema_status settle_keyspace_race(struct cql_schema *s,
						   struct cql_keyspace *old,
						   struct cql_keyspace *k,
						   struct cql_schema_change *ch)
{
	int c = strcmp(ring_strategy_describe(k->strategy),
		       ring_strategy_describe(old->strategy));
	if (c == 0)
		c = (int)k->meta->durable_writes -
		    (int)old->meta->durable_writes;
	if (c >= 0) {
		schema_keyspace_free(k);
		return CQL_SCHEMA_NOOP;
	}
	if (schema_retire(s, RETIRED_KEYSPACE, old) != 0) {
		schema_keyspace_free(k);
		return nomem();
	}
	set_change(ch, "UPDATED", "KEYSPACE", k->meta->name, NULL);
	ch->replaced = true;
	replace_keyspace(s, old, k);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status
create_keyspace(struct cql_schema *s, const struct cql_keyspace_stmt *ks,
		enum schema_origin origin, struct cql_schema_change *change)
{
	if (!valid_name(ks->name))
		return fail(CQL_SCHEMA_INVALID,
			    "Keyspace name must not be empty, more than %d "
			    "characters long, or contain non-alphanumeric-"
			    "underscore characters (got \"%s\")",
			    NAME_MAX_LEN, ks->name);
	struct cql_keyspace *old = schema_keyspace_mut(s, ks->name);
	if (old && (origin != SCHEMA_REPLICATED || old->system)) {
		if (ks->if_not_exists)
			return CQL_SCHEMA_NOOP;
		err_set(ERR_EXISTS, "Cannot add existing keyspace \"%s\"",
			ks->name);
		return CQL_SCHEMA_ALREADY_EXISTS;
	}
	if (origin != SCHEMA_INTERNAL && system_name(ks->name))
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", ks->name);
	struct cql_keyspace *k;
	enum cql_schema_status st = keyspace_from(ks, true, NULL, NULL, &k);
	if (st != CQL_SCHEMA_OK)
		return st;
	if (old)
		return settle_keyspace_race(s, old, k, change);
	if (schema_keyspace_insert(s, k) != 0) {
		schema_keyspace_free(k);
		return nomem();
	}
	set_change(change, "CREATED", "KEYSPACE", ks->name, NULL);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status alter_keyspace(struct cql_schema *s,
					     const struct cql_keyspace_stmt *ks,
					     bool internal,
					     struct cql_schema_change *change)
{
	struct cql_keyspace *old = schema_keyspace_mut(s, ks->name);
	if (!old)
		return fail(CQL_SCHEMA_CONFIG,
			    "Cannot alter non existing "
			    "keyspace '%s'.",
			    ks->name);
	/* The replicated system keyspaces (system_auth, ...) take a new
	 * replication, as in Cassandra; the local ones are fixed. */
	if (!internal && old->system &&
	    !cql_keyspace_name_is_replicated_system(ks->name))
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", ks->name);
	struct cql_keyspace *k;
	enum cql_schema_status st = keyspace_from(
		ks, old->meta->durable_writes, old->meta, old->option_time, &k);
	if (st != CQL_SCHEMA_OK)
		return st;
	k->system = old->system;
	if (schema_retire(s, RETIRED_KEYSPACE, old) != 0) {
		schema_keyspace_free(k);
		return nomem();
	}
	/* The tables move to the new keyspace object. */
	replace_keyspace(s, old, k);
	set_change(change, "UPDATED", "KEYSPACE", ks->name, NULL);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status drop_keyspace(struct cql_schema *s,
					    const struct cql_keyspace_stmt *ks,
					    bool internal,
					    struct cql_schema_change *change)
{
	struct cql_keyspace *k = schema_keyspace_mut(s, ks->name);
	if (!k) {
		if (ks->if_exists)
			return CQL_SCHEMA_NOOP;
		return fail(CQL_SCHEMA_CONFIG,
			    "Cannot drop non existing keyspace '%s'.",
			    ks->name);
	}
	if (!internal && k->system)
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", ks->name);
	if (schema_reserve_dropped(s, k->table_count) != 0 ||
	    schema_retire(s, RETIRED_KEYSPACE, k) != 0)
		return nomem();
	schema_keyspace_remove(s, k);
	set_change(change, "DROPPED", "KEYSPACE", ks->name, NULL);
	for (size_t i = 0; i < k->table_count; i++)
		schema_note_dropped(s, change, k->tables[i]->meta->id);
	return CQL_SCHEMA_OK;
}

/* ---- tables -------------------------------------------------------------- */

static enum cql_schema_status resolve_table(struct cql_schema *s,
					    const struct cql_qname *q,
					    const char *current, bool internal,
					    struct cql_keyspace **ks)
{
	const char *name = q->keyspace ? q->keyspace : current;
	if (!name)
		return fail(
			CQL_SCHEMA_INVALID,
			"No keyspace has been specified. USE a keyspace, or "
			"explicitly specify keyspace.tablename");
	*ks = schema_keyspace_mut(s, name);
	if (!*ks)
		return fail(CQL_SCHEMA_INVALID, "Keyspace '%s' doesn't exist",
			    name);
	if (!internal && (*ks)->system)
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", name);
	return CQL_SCHEMA_OK;
}

static const struct cql_column_def *find_def(const struct cql_create_table *ct,
					     const char *name)
{
	for (size_t i = 0; i < ct->column_count; i++)
		if (strcmp(ct->columns[i].name, name) == 0)
			return &ct->columns[i];
	return NULL;
}

static bool in_list(const char *const *list, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

/* Checks keys, statics and clustering order of a CREATE TABLE. */
static enum cql_schema_status check_create(const struct cql_create_table *ct)
{
	for (size_t i = 0; i < ct->column_count; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(ct->columns[i].name, ct->columns[j].name) ==
			    0)
				return fail(
					CQL_SCHEMA_INVALID,
					"Multiple definition of identifier %s",
					ct->columns[i].name);
	size_t nkeys = ct->partition_key_count + ct->clustering_count;
	for (size_t i = 0; i < nkeys; i++) {
		const char *k =
			i < ct->partition_key_count
				? ct->partition_key[i]
				: ct->clustering[i - ct->partition_key_count];
		const struct cql_column_def *d = find_def(ct, k);
		if (!d)
			return fail(
				CQL_SCHEMA_INVALID,
				"Unknown definition %s referenced in PRIMARY "
				"KEY",
				k);
		if (d->is_static)
			return fail(CQL_SCHEMA_INVALID,
				    "Static column %s cannot be part of the "
				    "PRIMARY KEY",
				    k);
		for (size_t j = 0; j < i; j++) {
			const char *o =
				j < ct->partition_key_count
					? ct->partition_key[j]
					: ct->clustering
						  [j - ct->partition_key_count];
			if (strcmp(o, k) == 0)
				return fail(
					CQL_SCHEMA_INVALID,
					"Multiple definition of identifier %s",
					k);
		}
	}
	if (ct->partition_key_count > 16 || ct->clustering_count > 32)
		return fail(
			CQL_SCHEMA_UNSUPPORTED,
			"Tables with more than 16 partition key or 32 "
			"clustering columns are not supported by Cassini yet");
	for (size_t i = 0; i < ct->column_count; i++)
		if (ct->columns[i].is_static && ct->clustering_count == 0)
			return fail(CQL_SCHEMA_INVALID,
				    "Static columns are only useful (and thus "
				    "allowed) if the table has at least one "
				    "clustering column");
	for (size_t i = 0; i < ct->order_count; i++) {
		const char *c = ct->order[i].column;
		size_t pos = 0;
		while (pos < ct->clustering_count &&
		       strcmp(ct->clustering[pos], c) != 0)
			pos++;
		if (pos == ct->clustering_count)
			return fail(
				CQL_SCHEMA_INVALID,
				"Only clustering key columns can be defined "
				"in CLUSTERING ORDER directive");
		if (pos != i)
			return fail(
				CQL_SCHEMA_INVALID,
				"The order of columns in the CLUSTERING ORDER "
				"directive must be the one of the clustering "
				"key (%s must appear before %s)",
				ct->clustering[i < ct->clustering_count ? i
									: 0],
				c);
	}
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status add_column(struct storage_table_meta *m,
					 const struct cql_column_def *d,
					 enum storage_column_kind kind,
					 bool desc, const char *ks)
{
	struct storage_type type;
	enum cql_schema_status st = map_type(d->type, ks, &type);
	if (st != CQL_SCHEMA_OK)
		return st;
	if ((kind == STORAGE_COLUMN_PARTITION_KEY ||
	     kind == STORAGE_COLUMN_CLUSTERING) &&
	    storage_type_is_collection(type.kind) && !type.frozen)
		return fail(
			CQL_SCHEMA_INVALID,
			"Invalid non-frozen collection type for PRIMARY KEY "
			"component %s",
			d->name);
	if (storage_table_meta_add_column(m, d->name, kind, type, desc) < 0)
		return nomem();
	return CQL_SCHEMA_OK;
}

static struct cql_table *table_new(struct storage_table_meta *m)
{
	struct cql_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->meta = m;
	schema_table_options_default(&t->opts);
	return t;
}

/* A CREATE TABLE for a table that exists, applied elsewhere first (t is
 * the statement's table): the creation raced on two nodes, and every node
 * keeps the id that sorts first, so they all end with the same table
 * whatever order the two statements reach them in. */
static enum cql_schema_status
settle_table_race(struct cql_schema *s, struct cql_keyspace *ks,
		  struct cql_table *old, struct cql_table *t,
		  struct cql_schema_change *change)
{
	if (memcmp(old->meta->id, t->meta->id, 16) <= 0) {
		schema_table_free(t); /* ours wins, or it is the same table */
		return CQL_SCHEMA_NOOP;
	}
	if (schema_reserve_dropped(s, 1) != 0 ||
	    schema_retire(s, RETIRED_TABLE, old) != 0) {
		schema_table_free(t);
		return nomem();
	}
	set_change(change, "UPDATED", "TABLE", ks->meta->name, t->meta->name);
	change->replaced = true;
	memcpy(change->old_id, old->meta->id, 16);
	schema_note_dropped(s, change, old->meta->id);
	schema_table_remove(ks, old);
	schema_table_insert(ks, t); /* cannot fail: the slot was freed */
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status
create_table(struct cql_schema *s, const struct cql_create_table *ct,
	     const char *current, const uint8_t new_id[16],
	     enum schema_origin origin, struct cql_schema_change *change)
{
	struct cql_keyspace *ks;
	enum cql_schema_status st = resolve_table(
		s, &ct->table, current, origin == SCHEMA_INTERNAL, &ks);
	if (st != CQL_SCHEMA_OK)
		return st;
	if (!valid_name(ct->table.name))
		return fail(CQL_SCHEMA_INVALID,
			    "Table name must not be empty, more than %d "
			    "characters long, or contain non-alphanumeric-"
			    "underscore characters (got \"%s\")",
			    NAME_MAX_LEN, ct->table.name);
	struct cql_table *old = schema_table_mut(ks, ct->table.name);
	if (old && origin != SCHEMA_REPLICATED) {
		if (ct->if_not_exists)
			return CQL_SCHEMA_NOOP;
		err_set(ERR_EXISTS,
			"Cannot add already existing table \"%s\" to keyspace "
			"\"%s\"",
			ct->table.name, ks->meta->name);
		return CQL_SCHEMA_ALREADY_EXISTS;
	}
	if ((st = check_create(ct)) != CQL_SCHEMA_OK)
		return st;

	uint8_t id[16];
	memcpy(id, new_id, 16);
	struct storage_table_options topts;
	struct cql_table_options copts;
	storage_table_options_default(&topts);
	schema_table_options_default(&copts);
	size_t applied;
	if ((st = table_options(ct->options, ct->option_count, &topts, &copts,
				id, NULL, 0, &applied)) != CQL_SCHEMA_OK)
		return st;

	struct storage_table_meta *m =
		storage_table_meta_new(ks->meta->name, ct->table.name, id);
	if (!m)
		return nomem();
	const char *ksn = ks->meta->name;
	for (size_t i = 0; st == CQL_SCHEMA_OK && i < ct->partition_key_count;
	     i++)
		st = add_column(m, find_def(ct, ct->partition_key[i]),
				STORAGE_COLUMN_PARTITION_KEY, false, ksn);
	for (size_t i = 0; st == CQL_SCHEMA_OK && i < ct->clustering_count;
	     i++) {
		bool desc = i < ct->order_count && ct->order[i].descending;
		st = add_column(m, find_def(ct, ct->clustering[i]),
				STORAGE_COLUMN_CLUSTERING, desc, ksn);
	}
	for (size_t i = 0; st == CQL_SCHEMA_OK && i < ct->column_count; i++) {
		const struct cql_column_def *d = &ct->columns[i];
		if (in_list(ct->partition_key, ct->partition_key_count,
			    d->name) ||
		    in_list(ct->clustering, ct->clustering_count, d->name))
			continue;
		st = add_column(m, d,
				d->is_static ? STORAGE_COLUMN_STATIC
					     : STORAGE_COLUMN_REGULAR,
				false, ksn);
	}
	struct cql_table *t = st == CQL_SCHEMA_OK ? table_new(m) : NULL;
	if (st == CQL_SCHEMA_OK && !t)
		st = nomem();
	if (st != CQL_SCHEMA_OK) {
		storage_table_meta_delete(m);
		return st;
	}
	m->options = topts;
	t->opts = copts;
	if (old)
		return settle_table_race(s, ks, old, t, change);
	if (schema_table_insert(ks, t) != 0) {
		schema_table_free(t);
		return nomem();
	}
	set_change(change, "CREATED", "TABLE", ksn, ct->table.name);
	return CQL_SCHEMA_OK;
}

/* A copy of `old` with its own meta, for ALTER TABLE. */
static struct cql_table *table_copy(const struct cql_table *old)
{
	struct storage_table_meta *m = storage_table_meta_clone(old->meta);
	if (!m)
		return NULL;
	struct cql_table *t = table_new(m);
	if (!t) {
		storage_table_meta_delete(m);
		return NULL;
	}
	t->opts = old->opts;
	memcpy(t->option_time, old->option_time, sizeof(t->option_time));
	t->columns_diverged = old->columns_diverged;
	return t;
}

/* ADD of a name dropped before: Cassandra's checks, and the latest drop
 * time of that name, before which the new column's cells are ignored. */
static enum cql_schema_status readd_check(const struct storage_table_meta *m,
					  const struct cql_column_def *d,
					  const char *ks, int64_t *dropped_at)
{
	struct storage_type type;
	enum cql_schema_status st = map_type(d->type, ks, &type);
	if (st != CQL_SCHEMA_OK)
		return st;
	*dropped_at = INT64_MIN;
	const struct storage_column *last = NULL;
	for (size_t i = 0; i < m->column_count; i++) {
		const struct storage_column *c = &m->columns[i];
		if (!c->dropped || strcmp(c->name, d->name) != 0)
			continue;
		last = c;
		if (c->dropped_at > *dropped_at)
			*dropped_at = c->dropped_at;
	}
	if (!last)
		return CQL_SCHEMA_OK;
	char now[96], before[96];
	if (cql_type_text(&type, now, sizeof(now)) != 0 ||
	    cql_type_text(&last->type, before, sizeof(before)) != 0)
		return nomem();
	if (strcmp(now, before) != 0)
		return fail(CQL_SCHEMA_INVALID,
			    "Cannot re-add previously dropped column '%s' of "
			    "type %s, incompatible with previous type %s",
			    d->name, now, before);
	bool was_static = last->kind == STORAGE_COLUMN_STATIC;
	if (was_static != d->is_static)
		return fail(CQL_SCHEMA_INVALID,
			    "Cannot re-add previously dropped column '%s' of "
			    "kind %s, incompatible with previous kind %s",
			    d->name, d->is_static ? "STATIC" : "REGULAR",
			    was_static ? "STATIC" : "REGULAR");
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status alter_columns(struct cql_table *t,
					    const struct cql_alter_table *at,
					    const char *ks)
{
	struct storage_table_meta *m = t->meta;
	enum cql_schema_status st = CQL_SCHEMA_OK;
	if (at->kind == CQL_ALTER_ADD) {
		for (size_t i = 0; i < at->column_count; i++) {
			const struct cql_column_def *d = &at->columns[i];
			if (cql_table_column(t, d->name) >= 0)
				return fail(
					CQL_SCHEMA_INVALID,
					"Column with name '%s' already exists",
					d->name);
			if (d->is_static && m->ck_count == 0)
				return fail(CQL_SCHEMA_INVALID,
					    "Static columns are only useful "
					    "(and thus allowed) if the table "
					    "has at least one clustering "
					    "column");
			/* Cassandra's table validation, after the checks
			 * above (every Cassini table is a non-counter one) */
			if (strcmp(d->type->name, "counter") == 0)
				return fail(CQL_SCHEMA_CONFIG,
					    "%s.%s: Cannot have a counter "
					    "column (\"%s\") in a non counter "
					    "table",
					    ks, m->name, d->name);
			int64_t dropped_at;
			if ((st = readd_check(m, d, ks, &dropped_at)) !=
			    CQL_SCHEMA_OK)
				return st;
			size_t slot = m->column_count;
			st = add_column(m, d,
					d->is_static ? STORAGE_COLUMN_STATIC
						     : STORAGE_COLUMN_REGULAR,
					false, ks);
			if (st != CQL_SCHEMA_OK)
				return st;
			m->columns[slot].dropped_at = dropped_at;
		}
		return CQL_SCHEMA_OK;
	}
	if (at->kind == CQL_ALTER_DROP) {
		for (size_t i = 0; i < at->name_count; i++) {
			/* a set of names, as Cassandra's: repeats are one */
			if (in_list(at->names, i, at->names[i]))
				continue;
			int c = cql_table_column(t, at->names[i]);
			if (c < 0)
				return fail(CQL_SCHEMA_INVALID,
					    "Column %s was not found in table "
					    "'%s.%s'",
					    at->names[i], ks, m->name);
			uint8_t kind = m->columns[c].kind;
			if (kind == STORAGE_COLUMN_PARTITION_KEY ||
			    kind == STORAGE_COLUMN_CLUSTERING)
				return fail(CQL_SCHEMA_INVALID,
					    "Cannot drop PRIMARY KEY column %s",
					    at->names[i]);
			m->columns[c].dropped = true;
			/* 0 when the statement came without a time (a
			 * schema record of the first version): the slot is
			 * hidden all the same. */
			m->columns[c].dropped_at =
				at->has_timestamp ? at->timestamp : 0;
		}
		return CQL_SCHEMA_OK;
	}
	/* RENAME: pairs from, to; only key columns, as Cassandra. */
	for (size_t i = 0; i + 1 < at->name_count; i += 2) {
		int c = cql_table_column(t, at->names[i]);
		if (c < 0)
			return fail(CQL_SCHEMA_INVALID,
				    "Column %s was not found in table %s.%s",
				    at->names[i], ks, m->name);
		uint8_t kind = m->columns[c].kind;
		if (kind != STORAGE_COLUMN_PARTITION_KEY &&
		    kind != STORAGE_COLUMN_CLUSTERING)
			return fail(CQL_SCHEMA_INVALID,
				    "Cannot rename non PRIMARY KEY column %s",
				    at->names[i]);
		if (cql_table_column(t, at->names[i + 1]) >= 0)
			return fail(CQL_SCHEMA_INVALID,
				    "Cannot rename column %s to %s in keyspace "
				    "%s; another column of that name already "
				    "exist",
				    at->names[i], at->names[i + 1], ks);
		char *copy = strdup(at->names[i + 1]);
		if (!copy)
			return nomem();
		free(m->columns[c].name);
		m->columns[c].name = copy;
	}
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status alter_table(struct cql_schema *s,
					  const struct cql_alter_table *at,
					  const char *current, bool internal,
					  int columns_before,
					  struct cql_schema_change *change)
{
	struct cql_keyspace *ks;
	enum cql_schema_status st =
		resolve_table(s, &at->table, current, internal, &ks);
	if (st != CQL_SCHEMA_OK)
		return st;
	struct cql_table *old = schema_table_mut(ks, at->table.name);
	if (!old)
		return fail(CQL_SCHEMA_INVALID, "Table '%s.%s' doesn't exist",
			    ks->meta->name, at->table.name);
	struct cql_table *t = table_copy(old);
	if (!t)
		return nomem();
	if (at->kind == CQL_ALTER_WITH) {
		uint8_t id[16];
		size_t applied;
		memcpy(id, old->meta->id, 16);
		st = table_options(
			at->options, at->option_count, &t->meta->options,
			&t->opts, id, t->option_time,
			at->has_timestamp ? at->timestamp : 0, &applied);
		/* Every option was written later on another node. */
		if (st == CQL_SCHEMA_OK && applied == 0)
			st = CQL_SCHEMA_NOOP;
	} else {
		st = alter_columns(t, at, ks->meta->name);
	}
	if (st == CQL_SCHEMA_OK && schema_retire(s, RETIRED_TABLE, old) != 0)
		st = nomem();
	if (st != CQL_SCHEMA_OK) {
		schema_table_free(t);
		return st;
	}
	schema_table_remove(ks, old);
	schema_table_insert(ks, t); /* cannot fail: the slot was freed */
	set_change(change, "UPDATED", "TABLE", ks->meta->name, at->table.name);
	if (at->kind == CQL_ALTER_ADD)
		change->columns_before = (int)old->meta->column_count;
	/* The node that ran this ADD had another number of columns: an ADD
	 * of another column ran there at the same time, and the two nodes
	 * gave the new columns each other's numbers. */
	if (columns_before >= 0 &&
	    (size_t)columns_before != old->meta->column_count &&
	    !t->columns_diverged) {
		t->columns_diverged = true;
		change->diverged = true;
	}
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status
drop_table(struct cql_schema *s, const struct cql_qname *name, bool if_exists,
	   const char *current, bool internal, struct cql_schema_change *change)
{
	struct cql_keyspace *ks;
	enum cql_schema_status st =
		resolve_table(s, name, current, internal, &ks);
	if (st != CQL_SCHEMA_OK)
		return st == CQL_SCHEMA_INVALID && if_exists &&
				       !schema_keyspace_mut(
					       s, name->keyspace
							  ? name->keyspace
						  : current ? current
							    : "")
			       ? CQL_SCHEMA_NOOP
			       : st;
	struct cql_table *t = schema_table_mut(ks, name->name);
	if (!t) {
		if (if_exists)
			return CQL_SCHEMA_NOOP;
		return fail(CQL_SCHEMA_INVALID, "Table '%s.%s' doesn't exist",
			    ks->meta->name, name->name);
	}
	if (schema_reserve_dropped(s, 1) != 0 ||
	    schema_retire(s, RETIRED_TABLE, t) != 0)
		return nomem();
	schema_table_remove(ks, t);
	set_change(change, "DROPPED", "TABLE", ks->meta->name, name->name);
	schema_note_dropped(s, change, t->meta->id);
	return CQL_SCHEMA_OK;
}

enum cql_schema_status
schema_apply(struct cql_schema *s, const struct cql_stmt *stmt,
	     const char *current_keyspace, const uint8_t new_id[16],
	     enum schema_origin origin, int columns_before,
	     struct cql_schema_change *change)
{
	/* Every change to the registry after its system keyspaces comes
	 * through here. */
	bool internal = origin == SCHEMA_INTERNAL;
	enum cql_schema_status st;
	s->generation++;
	switch (stmt->kind) {
	case CQL_STMT_CREATE_KEYSPACE:
		st = create_keyspace(s, &stmt->u.keyspace, origin, change);
		break;
	case CQL_STMT_ALTER_KEYSPACE:
		st = alter_keyspace(s, &stmt->u.keyspace, internal, change);
		break;
	case CQL_STMT_DROP_KEYSPACE:
		st = drop_keyspace(s, &stmt->u.keyspace, internal, change);
		break;
	case CQL_STMT_CREATE_TABLE:
		st = create_table(s, &stmt->u.create_table, current_keyspace,
				  new_id, origin, change);
		break;
	case CQL_STMT_ALTER_TABLE:
		st = alter_table(s, &stmt->u.alter_table, current_keyspace,
				 internal, columns_before, change);
		break;
	case CQL_STMT_DROP_TABLE:
		st = drop_table(s, &stmt->u.drop_table.table,
				stmt->u.drop_table.if_exists, current_keyspace,
				internal, change);
		break;
	default:
		return fail(CQL_SCHEMA_INVALID, "not a schema statement");
	}
	/* what this change retired is used above until here; with no
	 * reader pinned it goes now (the err slot is the statement's) */
	schema_reclaim(s);
	return st;
}
