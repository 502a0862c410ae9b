/*
 * DDL, table options: the WITH options of CREATE and ALTER TABLE
 * (compaction, compression, caching, speculative_retry, ...) checked
 * with Cassandra's sentences and applied to a table's options.
 */
#include "client/schema/schema_ddl_internal.h"

#include "common/uuid.h"
#include "ring/ring.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

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
enum cql_schema_status schema_table_options(const struct cql_option *opts,
					    size_t n,
					    struct storage_table_options *o,
					    struct cql_table_options *co,
					    uint8_t id[16], int64_t *times,
					    int64_t time_us, size_t *applied)
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
