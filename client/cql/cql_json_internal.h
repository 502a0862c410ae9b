/*
 * What cql_json_format.c (value -> JSON) and cql_json_decode.c (JSON ->
 * value) share: big-endian reads and the fixed widths of simple types.
 */
#ifndef CASSINI_CLIENT_CQL_JSON_INTERNAL_H
#define CASSINI_CLIENT_CQL_JSON_INTERNAL_H

#include "client/cql/cql_json.h"
#include "storage/types.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline uint64_t cql_json_be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

static inline bool cql_json_is_fixed(uint16_t kind, size_t *width)
{
	switch (kind) {
	case STORAGE_TYPE_BOOLEAN:
		*width = 1;
		return true;
	case STORAGE_TYPE_INT:
	case STORAGE_TYPE_FLOAT:
	case STORAGE_TYPE_DATE:
		*width = 4;
		return true;
	case STORAGE_TYPE_BIGINT:
	case STORAGE_TYPE_DOUBLE:
	case STORAGE_TYPE_TIMESTAMP:
	case STORAGE_TYPE_TIME:
	case CQL_JSON_TYPE_COUNTER:
		*width = 8;
		return true;
	case STORAGE_TYPE_UUID:
	case STORAGE_TYPE_TIMEUUID:
		*width = 16;
		return true;
	}
	return false;
}

/* Whether vector elements of `t` are packed without lengths
 * (Cassandra's valueLengthIfFixed), and their width. */
static inline bool cql_json_vector_fixed(const struct cql_json_type *t,
					 size_t *width)
{
	if (t->st) {
		*width = storage_type_fixed_length(t->st);
		return *width > 0;
	}
	if (t->kind == STORAGE_TYPE_DATE || t->kind == STORAGE_TYPE_TIME)
		return false;
	return cql_json_is_fixed(t->kind, width);
}

/* The next [int len][bytes] of a collection, tuple or UDT (len < 0: null,
 * *ev NULL). 1 at the end of the bytes. */
#endif
