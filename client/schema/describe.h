/*
 * DESCRIBE / DESC, served by the node as Cassandra 4.0 does (CASSANDRA-14825)
 * so that cqlsh 4.x, which sends the statement to the server, works.
 *
 * Element forms (DESCRIBE [FULL] SCHEMA, [ONLY] KEYSPACE [ks], TABLE [ks.]t,
 * and DESCRIBE x / x.y, which names a keyspace or a table) answer Rows of
 * keyspace_name, type, name, create_statement; listings (KEYSPACES, TABLES,
 * TYPES, FUNCTIONS, AGGREGATES) the first three of those; CLUSTER answers
 * cluster, partitioner, snitch and, under USE of a non-system keyspace,
 * range_ownership (each range's end token -> its replicas, from the ring
 * the node info describes). A keyspace's user types come after it, each
 * after the types it names (as the python driver's export_as_string).
 * Cassini has no functions, aggregates, indexes or views: their listings
 * are empty and naming one answers Cassandra's "not found" Invalid. Rows are
 * paged as Cassandra pages them: by row offset, with the schema version in the
 * paging state (a page asked for after a schema change is Invalid).
 *
 * The CREATE text follows Cassandra's KeyspaceMetadata / TableMetadata
 * toCqlString: names quoted only when needed, columns in Cassandra's create
 * order (partition key, clustering, static, then regular; within a kind
 * simple columns before non-frozen collections, each by name), the
 * clustering order, then every table option in alphabetical order.
 */
#ifndef CASSINI_CLIENT_DESCRIBE_H
#define CASSINI_CLIENT_DESCRIBE_H

#include "client/cql/cql_ast.h"
#include "client/proto/proto.h"
#include "client/schema/schema.h"
#include "client/schema/system_tables.h"
#include "common/buf.h"

#include <stdbool.h>
#include <stdint.h>

/* The CQL name as Cassandra prints it: bare when it is a lower-case word
 * that is not reserved, else "double-quoted" with " doubled. */
int cql_describe_name(const char *name, struct buf *out);

/* "CREATE KEYSPACE ... WITH replication = {...}  AND durable_writes = ...;" */
int cql_describe_keyspace_text(const struct cql_keyspace *k, struct buf *out);

/* "CREATE TABLE ks.t (...) WITH ...;" Without `internals` dropped columns
 * are left out; with it the table's ID comes first and, as Cassandra
 * renders them, each dropped name is a column of the CREATE followed by
 * "ALTER TABLE ks.t DROP c USING TIMESTAMP <drop time>;" (and "ALTER TABLE
 * ks.t ADD c <type>;" when the name was added again). */
int cql_describe_table_text(const struct cql_table *t, bool internals,
			    struct buf *out);

/* "CREATE TYPE ks.t (\n    f type,\n    ...\n);" as Cassandra's
 * UserType.toCqlString and the python driver's export_as_string. */
int cql_describe_type_text(const struct cql_user_type *t, struct buf *out);

/* "CREATE CUSTOM INDEX name ON ks.t (target) USING 'class' [WITH OPTIONS =
 * {...}];" as Cassandra's IndexMetadata.toCqlString and the python
 * driver's IndexMetadata.as_cql_query write it. */
struct cql_index;
int cql_describe_index_text(const struct cql_table *t,
			    const struct cql_index *ix, struct buf *out);

/*
 * Answers a DESCRIBE statement: appends a whole RESULT Rows frame, or an
 * ERROR frame, to `out`. `keyspace` is the connection's USE keyspace (may
 * be NULL); `params` give the page size and paging state (may be NULL: one
 * page). `views` is the virtual keyspaces' registry (cql_schema_new_views;
 * may be NULL): their keyspaces and tables are described as Cassandra
 * describes virtual ones, inside a comment. Returns 0, or -1 when nothing
 * could be appended (ERR_NOMEM).
 */
int cql_describe(const struct cql_schema *schema,
		 const struct cql_schema *views,
		 const struct cql_node_info *node, const struct cql_describe *d,
		 const char *keyspace, const struct cql_query_params *params,
		 uint8_t version, int16_t stream, struct buf *out);

#endif
