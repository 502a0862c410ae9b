/*
 * dml.c's private pieces shared with dml_where.c: the values a statement
 * resolves, the restrictions on its key columns, and the build state.
 */
#ifndef CASSINI_CLIENT_EXEC_DML_INTERNAL_H
#define CASSINI_CLIENT_EXEC_DML_INTERNAL_H

#include "client/exec/dml.h"

#include "common/arena.h"
#include "common/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_TTL     630720000 /* 20 years, Cassandra's cap */
#define MAX_KEYS    4096  /* partitions or rows one statement may expand to */
#define MAX_KEY_LEN 65535 /* a partition key, a clustering component */
#define UNSET       (-2)

struct val {
	const uint8_t *ptr;
	int32_t len; /* -1 null, -2 unset */
};

/* A restriction on one key column. */
struct restr {
	bool eq; /* = or IN: vals */
	struct val *vals;
	size_t n;
	bool has_lo, lo_incl, has_hi, hi_incl; /* slices (DELETE only) */
	struct val lo, hi;
};

struct build {
	const struct cql_table *t;
	const struct storage_table_meta *m;
	const struct cql_value *binds;
	size_t nbinds;
	const struct cql_write_ctx *ctx;
	struct arena a;
	int64_t ts;
	int32_t ttl;
	struct cql_mutations *out;
};

/* A term's value for `column`: a literal serialized for its type, or the
 * bound value as it came. */
int cql_dml_resolve(struct build *b, const struct cql_term *t,
		    const struct storage_type *type, const char *column,
		    struct val *out);

/* ---- dml_where.c: the WHERE clause and the keys it expands to ---------- */

bool cql_dml_where_names_clustering(const struct build *b,
				    const struct cql_relation *rels, size_t n);
int cql_dml_restrict_where(struct build *b, const struct cql_relation *rels,
			   size_t n, struct restr *rs, bool allow_slice);
int cql_dml_key_value_ok(const struct storage_column *col, struct val v);
int cql_dml_partition_keys(struct build *b, struct restr *rs, struct buf *keys,
			   size_t **offsets, size_t *nkeys);
int cql_dml_clusterings(struct build *b, struct restr *rs, struct slice **rows,
			size_t *nrows);

#endif
