/*
 * CQL value types: the type tree, validation and Cassandra's orders.
 *
 * A type is a tree of immutable `struct storage_type` nodes: a simple type
 * (int, text, duration, counter, ...) is a leaf; list<E>, set<E> and
 * vector<E, N> have one child, map<K, V> two, tuple<T1..Tn> and a
 * user-defined type n (a UDT also names its keyspace, type and fields).
 * Collections and UDTs are frozen (one cell) or not (one cell per element
 * or field); tuples and vectors are always frozen. Nested non-frozen
 * collections are refused by DDL, never represented.
 *
 * Ownership. Nodes come in three origins:
 *   - static: storage_type_simple(kind) returns a process-wide constant
 *     leaf for each simple kind; never freed, references are no-ops;
 *   - counted: storage_type_new_*() allocate a node holding one reference
 *     (the caller's) and a reference to each child; the node, its child
 *     array and its strings are one allocation, freed with the last
 *     storage_type_unref (any thread, atomic count);
 *   - literal: a node the caller builds in its own memory (a compound
 *     literal, STORAGE_TYPE_COLLECTION below) for the duration of a call;
 *     it is never referenced, only read.
 * Whoever keeps a type beyond the call that lent it calls
 * storage_type_hold, which references a counted or static node and deep
 * copies a literal one into counted nodes. A table meta holds each
 * column's type this way (storage_table_meta_add_column), so clones share
 * type nodes and each version drops its own references: no type outlives
 * the metas (and memtables, SSTables, reads) that hold it.
 *
 * UDTs: a schema resolves a UDT name into a node built with
 * storage_type_new_udt (keyspace, name, field names and types); the node
 * is a snapshot of the type's definition. ALTER TYPE builds new nodes and
 * new table meta versions; old versions keep the old nodes.
 *
 * Values are bytes serialized as in the native protocol (int: 4 bytes
 * big-endian, text: UTF-8, uuid: 16 bytes; a collection: [int n] then n
 * [int length][bytes] elements, two per map entry; a tuple or frozen UDT:
 * [int length][bytes] per component, -1 for null, trailing components may
 * be missing; duration: three signed vints (months, days, nanoseconds); a
 * vector: its N elements packed when the element type has a fixed length,
 * else each prefixed by an unsigned vint length, no count). Storage never
 * interprets a value except to validate it and to order clustering keys
 * and collection paths, following Cassandra's comparators:
 *
 *   tinyint..bigint, timestamp, time, varint   signed numeric order
 *   float, double                               Float.compare/Double.compare
 *                                               (-0.0 < 0.0, NaN last)
 *   decimal                                     numeric (123E1 == 1230)
 *   date                                        unsigned 32-bit
 *   timeuuid                                    embedded time, then signed
 *                                               bytes of the low half
 *   uuid                                        version, then time for v1,
 *                                               else unsigned bytes
 *   ascii, text, blob, inet, boolean, duration  unsigned bytes
 *   frozen list/set                             element by element with
 *                                               the element's order, then
 *                                               the shorter first
 *   frozen map                                  entry by entry: key, then
 *                                               value; then the shorter
 *   tuple, frozen UDT                           component by component, a
 *                                               null before a value; then
 *                                               the one with more non-null
 *                                               components after
 *   vector                                      element by element
 *
 * An empty value sorts before every non-empty value, as in Cassandra.
 * Frozen sets and maps, at any depth, are stored in a canonical form
 * (elements, keys, sorted by their order and without repeats:
 * storage_value_normalize), so equal values have equal bytes.
 *
 * Validation is Cassandra's (AbstractType.validate and the serializers'
 * messages): fixed widths (int 4 or 0 bytes, smallint exactly 2, date 4,
 * time 8, ...), uuid 16 or 0 bytes and timeuuid version 1, inet 0/4/16,
 * decimal 0 or at least 4, ascii bytes 0..127, text by Cassandra's UTF-8
 * state machine (which accepts C0 80, surrogates and F5..F7 leads: not
 * RFC 3629), varint and blob anything; durations' three parts of one sign.
 */
#ifndef CASSINI_STORAGE_TYPES_H
#define CASSINI_STORAGE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Numbering follows the native protocol's option ids, except vector,
 * which the protocol sends as a custom type (an id of our own). */
enum storage_type_kind {
	STORAGE_TYPE_ASCII = 0x0001,
	STORAGE_TYPE_BIGINT = 0x0002,
	STORAGE_TYPE_BLOB = 0x0003,
	STORAGE_TYPE_BOOLEAN = 0x0004,
	STORAGE_TYPE_COUNTER = 0x0005,
	STORAGE_TYPE_DECIMAL = 0x0006,
	STORAGE_TYPE_DOUBLE = 0x0007,
	STORAGE_TYPE_FLOAT = 0x0008,
	STORAGE_TYPE_INT = 0x0009,
	STORAGE_TYPE_TIMESTAMP = 0x000B,
	STORAGE_TYPE_UUID = 0x000C,
	STORAGE_TYPE_TEXT = 0x000D,
	STORAGE_TYPE_VARINT = 0x000E,
	STORAGE_TYPE_TIMEUUID = 0x000F,
	STORAGE_TYPE_INET = 0x0010,
	STORAGE_TYPE_DATE = 0x0011,
	STORAGE_TYPE_TIME = 0x0012,
	STORAGE_TYPE_SMALLINT = 0x0013,
	STORAGE_TYPE_TINYINT = 0x0014,
	STORAGE_TYPE_DURATION = 0x0015,
	STORAGE_TYPE_LIST = 0x0020,
	STORAGE_TYPE_MAP = 0x0021,
	STORAGE_TYPE_SET = 0x0022,
	STORAGE_TYPE_UDT = 0x0030,
	STORAGE_TYPE_TUPLE = 0x0031,
	STORAGE_TYPE_VECTOR = 0x0100, /* not a protocol id */
};

/* The most children a type node may have (tuple components, UDT fields). */
#define STORAGE_TYPE_MAX_CHILDREN 1024
/* The deepest a type tree may nest. */
#define STORAGE_TYPE_MAX_DEPTH 32
/* The largest vector dimension. */
#define STORAGE_TYPE_MAX_DIMENSION 65536

/* A type node. Read its fields; build counted ones with storage_type_new_*
 * and literal ones only for the length of a call. */
struct storage_type {
	uint16_t kind; /* enum storage_type_kind */
	/* Collections and UDTs: one cell (true) or one per element/field.
	 * Tuples and vectors: always true. Simple types: false. */
	bool frozen;
	uint8_t origin; /* enum storage_type_origin; literal when 0 */
	/* Children: list/set/vector 1 (the element), map 2 (key, value),
	 * tuple and UDT n (components, fields). */
	uint16_t count;
	const struct storage_type *const *sub;
	uint32_t dimension; /* vector */
	/* UDT only: where it is defined and its field names (count). */
	const char *keyspace;
	const char *name;
	const char *const *field_names;
};

enum storage_type_origin {
	STORAGE_TYPE_LITERAL = 0,
	STORAGE_TYPE_STATIC = 1,
	STORAGE_TYPE_COUNTED = 2,
};

/* A literal collection node for the enclosing block:
 * STORAGE_TYPE_COLLECTION(STORAGE_TYPE_LIST, true, elem) or
 * (STORAGE_TYPE_MAP, frozen, key, value). Children must outlive it. */
#define STORAGE_TYPE_COLLECTION(k, fr, ...)                                    \
	((struct storage_type){                                                \
		.kind = (k),                                                   \
		.frozen = (fr),                                                \
		.count = (uint16_t)(sizeof((const struct storage_type *[]){    \
					    __VA_ARGS__}) /                    \
				    sizeof(const struct storage_type *)),      \
		.sub = (const struct storage_type *const[]){__VA_ARGS__}})

/* Whether `kind` is a simple kind (a leaf: int..duration, counter). */
bool storage_type_kind_valid(uint16_t kind);
/* list, set or map. */
bool storage_type_is_collection(uint16_t kind);
/* A collection or UDT stored as one cell per element or field. */
bool storage_type_is_multicell(const struct storage_type *t);
/* Stable lower-case CQL name ("int", "timeuuid", "list", "tuple",
 * "vector", "duration"...), or NULL. */
const char *storage_type_kind_name(uint16_t kind);

/* The static leaf of a simple kind, or NULL for other kinds. */
const struct storage_type *storage_type_simple(uint16_t kind);
/* Counted nodes holding one reference, or NULL (ERR_NOMEM, or ERR_INVALID
 * for a wrong shape). Each takes its own reference to the children (the
 * caller keeps its own); children may be of any origin (literal ones are
 * copied). */
struct storage_type *
storage_type_new_collection(uint16_t kind, bool frozen,
			    const struct storage_type *elem,
			    const struct storage_type *value);
struct storage_type *
storage_type_new_tuple(const struct storage_type *const *components, size_t n);
struct storage_type *storage_type_new_udt(
	const char *keyspace, const char *name, const char *const *field_names,
	const struct storage_type *const *fields, size_t n, bool frozen);
struct storage_type *storage_type_new_vector(const struct storage_type *elem,
					     uint32_t dimension);
/* `t` with its top node frozen or not (children shared): a counted node,
 * or `t` itself held when it already is so. NULL on ERR_NOMEM. */
const struct storage_type *
storage_type_with_frozen(const struct storage_type *t, bool frozen);
/* A node the caller may keep: `t` referenced when static or counted, a
 * counted deep copy when literal. NULL on ERR_NOMEM (or too deep). */
const struct storage_type *storage_type_hold(const struct storage_type *t);
/* Drops a reference taken by hold/new_*; NULL and static nodes are
 * ignored. Must not be given a literal node. */
void storage_type_unref(const struct storage_type *t);

/* Multi-cell types (storage_type_is_multicell): the type of a cell's
 * path (list: timeuuid, set: the element, map: the key, UDT: smallint,
 * the field's position), and of a cell's value (list: the element, map:
 * the value, UDT: the field the path names, NULL when the path names none;
 * set: NULL, its cells hold no value). */
const struct storage_type *storage_type_path_type(const struct storage_type *t);
const struct storage_type *
storage_type_cell_value_type(const struct storage_type *t, const uint8_t *path,
			     size_t path_len);

/* Same type: kinds, frozenness, children, dimension, UDT names. */
bool storage_type_equal(const struct storage_type *a,
			const struct storage_type *b);
/* Whether `kind` occurs anywhere in the tree (e.g. duration in a key). */
bool storage_type_contains(const struct storage_type *t, uint16_t kind);
/* The length every value of `t` has (Cassandra's valueLengthIfFixed:
 * bigint 8, int 4, float 4, double 8, boolean 1, uuid/timeuuid 16,
 * timestamp 8, a vector of such N times that), or 0 when variable. */
size_t storage_type_fixed_length(const struct storage_type *t);

/* The CQL text of a type, as system_schema.columns and DESCRIBE show it:
 * "int", "frozen<list<text>>", "map<text, frozen<set<int>>>",
 * "frozen<tuple<int, text>>", "vector<float, 3>", "frozen<address>" (a
 * UDT by its name, quoted when it needs quotes). Top-level frozen is
 * written for frozen collections, UDTs and tuples; nested ones are
 * written as they are (a tuple always frozen). Appends; -1 on ERR_NOMEM. */
struct buf;
int storage_type_format(const struct storage_type *t, struct buf *out);

/* 0 when the bytes are a valid value of the simple type; else -1 with
 * ERR_INVALID and Cassandra's message ("Expected 4 or 0 byte int (3)"). */
int storage_type_validate(uint16_t kind, const uint8_t *v, size_t len);
/* storage_type_validate for any type: a collection's framing (count,
 * lengths, nothing after the last element) and every element, a tuple's
 * and UDT's components, a vector's dimension and elements. */
int storage_value_validate(const struct storage_type *t, const uint8_t *v,
			   size_t len);
/* A serialized collection of type `t` (list, set or map); null elements
 * (negative lengths) are refused unless `allow_null` (the list of an
 * IN ?). */
int storage_elements_validate(const struct storage_type *t, const uint8_t *v,
			      size_t len, bool allow_null);
/* Cassandra's UTF-8 check (the text validator's). */
bool storage_utf8_valid(const uint8_t *s, size_t n);

/* Cassandra's order for values of a simple type. Returns <0, 0, >0. Never
 * fails: values of the wrong width compare as unsigned bytes after a
 * length tiebreak. */
int storage_value_cmp(uint16_t kind, const uint8_t *a, size_t alen,
		      const uint8_t *b, size_t blen);
/* The order of values of type `t`: storage_value_cmp for simple types,
 * element-wise for frozen collections, tuples, UDTs and vectors. Never
 * fails (malformed values compare as bytes, after well-formed ones). */
int storage_type_cmp(const struct storage_type *t, const uint8_t *a,
		     size_t alen, const uint8_t *b, size_t blen);

/* Appends the canonical form of a valid value of `t` to `out`: a set's
 * elements and a map's keys sorted by their order, repeats dropped (a set
 * keeps the first, a map the first key with the last value), recursively
 * inside collections, tuples, UDTs and vectors; other types as they are.
 * -1 with ERR_INVALID for a malformed value. */
int storage_value_normalize(const struct storage_type *t, const uint8_t *v,
			    size_t len, struct buf *out);

/* Cassandra's variable-length integers (VIntCoding): the first byte's
 * leading one bits count the bytes after it, big-endian; signed ones
 * zig-zag encoded. Reads return the bytes used, or 0 when `len` is too
 * short. */
size_t storage_uvint_read(const uint8_t *p, size_t len, uint64_t *out);
size_t storage_vint_read(const uint8_t *p, size_t len, int64_t *out);
int storage_uvint_put(struct buf *out, uint64_t v);
int storage_vint_put(struct buf *out, int64_t v);

/* A duration value's parts. */
struct storage_duration {
	int32_t months;
	int32_t days;
	int64_t nanos;
};
/* Decodes a valid duration (storage_value_validate); -1 otherwise. */
int storage_duration_decode(const uint8_t *v, size_t len,
			    struct storage_duration *out);
int storage_duration_encode(const struct storage_duration *d, struct buf *out);

#endif
