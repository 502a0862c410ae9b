/*
 * CQL value types, their validation and their orders.
 *
 * Values are bytes serialized as in the native protocol (int: 4 bytes
 * big-endian, text: UTF-8, uuid: 16 bytes, a collection: [int n] then
 * n [int length][bytes] elements, two per map entry). The storage engine
 * never interprets a value except to validate it (every mutation it
 * applies, whoever sent it) and to order clustering keys and collection
 * paths, following Cassandra's per-type comparators:
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
 *   ascii, text, blob, inet, boolean            unsigned bytes
 *   frozen list/set                             element by element with
 *                                               the element's order, then
 *                                               the shorter first
 *   frozen map                                  entry by entry: key, then
 *                                               value; then the shorter
 *
 * An empty value sorts before every non-empty value, as in Cassandra.
 * Frozen sets and maps are stored in a canonical form (elements, keys,
 * sorted by their order and without repeats: storage_value_normalize), so
 * equal collections have equal bytes (and tokens, as partition keys).
 *
 * Validation is Cassandra's (AbstractType.validate and the serializers'
 * messages): fixed widths (int 4 or 0 bytes, smallint exactly 2, date 4,
 * time 8, ...), uuid 16 or 0 bytes and timeuuid version 1, inet 0/4/16,
 * decimal 0 or at least 4, ascii bytes 0..127, text by Cassandra's UTF-8
 * state machine (which accepts C0 80, surrogates and F5..F7 leads: not
 * RFC 3629), varint and blob anything.
 */
#ifndef CASSINI_STORAGE_TYPES_H
#define CASSINI_STORAGE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Numbering follows the native protocol's option ids. */
enum storage_type_kind {
	STORAGE_TYPE_ASCII = 0x0001,
	STORAGE_TYPE_BIGINT = 0x0002,
	STORAGE_TYPE_BLOB = 0x0003,
	STORAGE_TYPE_BOOLEAN = 0x0004,
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
	STORAGE_TYPE_LIST = 0x0020,
	STORAGE_TYPE_MAP = 0x0021,
	STORAGE_TYPE_SET = 0x0022,
};

/* A column type. For collections `elem` is the list/set element type or
 * the map key type and `value` the map value type; both are simple types.
 * `frozen` collections are single cells; non-frozen ones store one cell
 * per element, keyed by a path (set element, map key, or a timeuuid for
 * list positions). */
struct storage_type {
	uint16_t kind;  /* enum storage_type_kind */
	uint16_t elem;  /* for collections */
	uint16_t value; /* for maps */
	bool frozen;
};

bool storage_type_kind_valid(uint16_t kind);
bool storage_type_is_collection(uint16_t kind);
/* Stable lower-case CQL name ("int", "timeuuid", "list"...), or NULL. */
const char *storage_type_kind_name(uint16_t kind);
/* 0 when the bytes are a valid value of the simple type; else -1 with
 * ERR_INVALID and Cassandra's message ("Expected 4 or 0 byte int (3)"). */
int storage_type_validate(uint16_t kind, const uint8_t *v, size_t len);
/* storage_type_validate for any type: a collection's framing (count,
 * lengths, nothing after the last element) and every element. */
int storage_value_validate(const struct storage_type *t, const uint8_t *v,
			   size_t len);
/* A serialized collection of `kind` whose elements (map keys) are `elem`
 * and map values `value`; null elements (negative lengths) are refused
 * unless `allow_null` (the list of an IN ?). */
int storage_elements_validate(uint16_t kind, uint16_t elem, uint16_t value,
			      const uint8_t *v, size_t len, bool allow_null);
/* Cassandra's UTF-8 check (the text validator's). */
bool storage_utf8_valid(const uint8_t *s, size_t n);

/* Cassandra's order for values of a simple type. Returns <0, 0, >0. Never
 * fails: values of the wrong width compare as unsigned bytes after a
 * length tiebreak. */
int storage_value_cmp(uint16_t kind, const uint8_t *a, size_t alen,
		      const uint8_t *b, size_t blen);
/* The order of values of type `t`: storage_value_cmp for simple types,
 * element-wise for (frozen) collections. Never fails. */
int storage_type_cmp(const struct storage_type *t, const uint8_t *a,
		     size_t alen, const uint8_t *b, size_t blen);

/* Appends the canonical form of a valid value of `t` to `out`: a set's
 * elements and a map's keys sorted by their order, repeats dropped (a set
 * keeps the first, a map the first key with the last value); other types
 * as they are. -1 with ERR_INVALID for a malformed collection. */
struct buf;
int storage_value_normalize(const struct storage_type *t, const uint8_t *v,
			    size_t len, struct buf *out);

#endif
