/*
 * JSON for CQL: SELECT JSON, INSERT JSON, toJson() and fromJson(), with
 * Cassandra 4.1's encodings (each AbstractType's toJSONString and
 * fromJSONObject) and its messages.
 *
 * Two halves, no dependency:
 *
 *   - a small JSON parser (cql_json_parse) that reads text as Jackson's
 *     ObjectMapper.readValue(text, Object.class) does: strict RFC 8259
 *     values (no comments, no NaN, no single quotes, no leading zeros),
 *     numbers classified as Jackson does (Integer, Long, BigInteger,
 *     Double), and content after the first value ignored. Nesting is capped
 *     (CQL_JSON_MAX_DEPTH) so no input exhausts the stack;
 *   - per-type conversion between native-protocol value bytes and JSON
 *     (cql_json_format: toJSONString; cql_json_decode: fromJSONObject),
 *     over a small type description (struct cql_json_type) the caller
 *     builds from its column type, so a new type is one case in each.
 *
 * Output is Cassandra's: ", " between items, ": " after keys, text quoted
 * as Jackson's quoteAsString (\" \\ \b \f \n \r \t, other C0 controls as
 * \u00XX; nothing else escaped), float/double as Java's toString (123.0,
 * 1.0E10) with NaN and infinities as null, decimal as BigDecimal.toString,
 * blob "0x..", timestamp "yyyy-MM-dd HH:mm:ss.SSSZ" in UTC, inet as Java's
 * getHostAddress (IPv6 uncompressed), duration "1y2mo3d4h5m6s7ms8us9ns",
 * map keys that are not JSON strings wrapped in quotes.
 */
#ifndef CASSINI_CLIENT_CQL_JSON_H
#define CASSINI_CLIENT_CQL_JSON_H

#include "common/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct arena;

#define CQL_JSON_MAX_DEPTH 256

/* ---- parsed JSON ---------------------------------------------------------
 */

enum cql_json_kind {
	CQL_JSON_NULL,
	CQL_JSON_FALSE,
	CQL_JSON_TRUE,
	CQL_JSON_INT,   /* an integer: text as written (Integer/Long/BigInteger)
			 */
	CQL_JSON_FLOAT, /* a number with a fraction or exponent (Double) */
	CQL_JSON_STRING, /* text: the unescaped UTF-8 */
	CQL_JSON_ARRAY,  /* items: the elements */
	CQL_JSON_OBJECT, /* items: alternating key (a STRING), value */
};

struct cql_json {
	enum cql_json_kind kind;
	const char *text; /* STRING: unescaped; INT/FLOAT: as written */
	size_t len;
	struct cql_json *items;
	size_t count; /* ARRAY: elements; OBJECT: 2 x entries */
};

/*
 * Parses `len` bytes of `s` into a tree in `a`. 0 with *out, or -1 with
 * ERR_INVALID and Jackson's exception as Java prints it
 * ("com.fasterxml.jackson.core.JsonParseException: Unexpected character
 * ('x' (code 120)): ..."), which callers quote in Cassandra's messages.
 * Never reads past `len`.
 */
int cql_json_parse(const char *s, size_t len, struct arena *a,
		   const struct cql_json **out);

/* Jackson's quoteAsString: the escaped text without the quotes. */
int cql_json_quote(struct buf *out, const char *s, size_t n);

/* The Java class Jackson gives a parsed value ("Integer", "Long",
 * "BigInteger", "Double", "String", "Boolean", "ArrayList",
 * "LinkedHashMap"), for "but got a %s" messages. */
const char *cql_json_java_class(const struct cql_json *j);
/* The value as Java's toString prints it ([1, a], {k=v}, 1.0E10). */
int cql_json_java_text(const struct cql_json *j, struct buf *out);

/* Java's Double.toString / Float.toString (finite or not). */
void cql_json_java_double(double v, char *dst, size_t cap);
void cql_json_java_float(float v, char *dst, size_t cap);

/* ---- types ---------------------------------------------------------------
 */

/* Kinds are the native protocol's option ids; vector has none. */
enum {
	CQL_JSON_TYPE_CUSTOM = 0x0000,
	CQL_JSON_TYPE_COUNTER = 0x0005,
	CQL_JSON_TYPE_DURATION = 0x0015,
	CQL_JSON_TYPE_LIST = 0x0020,
	CQL_JSON_TYPE_MAP = 0x0021,
	CQL_JSON_TYPE_SET = 0x0022,
	CQL_JSON_TYPE_UDT = 0x0030,
	CQL_JSON_TYPE_TUPLE = 0x0031,
	CQL_JSON_TYPE_VECTOR = 0x0100,
};

/* A CQL type as the JSON code needs it. `sub` holds the parameters: a
 * list/set/vector element, a map's key and value, tuple or UDT fields
 * (`count` of them); `names` the UDT's field names (as declared, case
 * kept), `name` its name for messages, `dimension` a vector's size. */
struct cql_json_type {
	uint16_t kind;
	uint16_t count;
	const struct cql_json_type *sub;
	const char *const *names;
	const char *name;
	uint32_t dimension;
	/* the storage type it describes (its order, fixed length and
	 * canonical form), or NULL */
	const struct storage_type *st;
};

/* The description of a column type (the whole tree), allocated in `a`
 * (NULL with ERR_NOMEM); `t` must outlive it. The one place that knows
 * storage's type representation. */
struct storage_type;
const struct cql_json_type *cql_json_type_of(struct arena *a,
					     const struct storage_type *t);

/*
 * Appends the JSON text of a non-null value of `t` (bytes as the native
 * protocol serializes them; a collection's counts and lengths are 4
 * bytes) to `out`. An empty value of a fixed-width type is "\"\"", as
 * Cassandra prints it. -1 with ERR_INVALID when the bytes do not parse as
 * the type (a caller validates first), or ERR_NOMEM.
 */
int cql_json_format(const struct cql_json_type *t, const uint8_t *v, size_t len,
		    struct buf *out);

/*
 * Appends the serialized value of `t` that the parsed JSON `j` denotes
 * (fromJSONObject): 0, or 1 for JSON null (nothing appended), or -1 with
 * ERR_INVALID and the MarshalException's message ("Unable to make int
 * from 'x'", "Expected a list, but got a Integer: 1", "Invalid null
 * element in list"). Strings parse as each type's literal form, and a
 * string given for a collection, tuple or UDT is parsed as JSON first (map
 * keys). Set elements and map keys come sorted and without repeats (a
 * map keeps the last value), by the storage type's order (`st`; simple
 * kinds' order without it).
 */
int cql_json_decode(const struct cql_json_type *t, const struct cql_json *j,
		    struct arena *a, struct buf *out);

/*
 * fromJson(x) as a term for a column of `type` (INSERT values, UPDATE
 * SET, WHERE): x a string or a bind marker (its value in fn->binds). 0
 * with the value appended, 1 for null, -1 on error ("execution of
 * 'system.fromjson[text]' failed: ..."), 2 when `t` is not a call of
 * fromJson. toJson() there is refused ("toJson() may only be used within
 * the selection clause").
 */
struct cql_term;
struct cql_fn_ctx;
int cql_json_fn_term(const struct cql_term *t, const struct storage_type *type,
		     const struct cql_fn_ctx *fn, struct buf *out);

/* The JSON key of a result column or a UDT field: "name", or "\"Name\""
 * for a name that is not all lower case, as Cassandra writes it (with the
 * quotes). Appends the key with its quotes. */
int cql_json_key(struct buf *out, const char *name, size_t n);

/*
 * INSERT JSON's values map (Json.parseJson): `text` parsed as an object,
 * its keys matched to the `n` column names (quoted keys keep their case,
 * others are lower-cased); values[i] receives column i's JSON value, or
 * NULL when the map has no such key. -1 with ERR_INVALID and Cassandra's
 * message: "Got null for INSERT JSON values", "Could not decode JSON
 * string as a map: <exception>. (String was: <text>)", "JSON values map
 * contains unrecognized column: <key>".
 */
int cql_json_insert_values(const char *text, size_t len,
			   const char *const *names, size_t n, struct arena *a,
			   const struct cql_json **values);

#endif
