/*
 * Virtual system tables: the rows of system.local, system.peers,
 * system.peers_v2 and system_schema.* computed on demand from the schema
 * registry and the node's view of the cluster, never stored.
 *
 * Drivers read these on every connect (see ../shared/notes/client-protocol.md
 * §3): columns they need must be present and non-null, system_schema.tables
 * reports flags {'compound'}, release_version parses as 4.0.x, and every
 * up peer reports the same schema_version once schemas agree.
 *
 * A SELECT on one of them is evaluated here: projection (with * in
 * Cassandra's column order), WHERE equalities and IN on any column (with
 * literals or bound values), LIMIT; the answer is a RESULT Rows frame.
 */
#ifndef CASSINI_CLIENT_SYSTEM_TABLES_H
#define CASSINI_CLIENT_SYSTEM_TABLES_H

#include "client/cql/cql_ast.h"
#include "client/proto/proto.h"
#include "client/proto/server.h"
#include "client/schema/schema.h"
#include "common/buf.h"
#include "common/inet.h"

#include <stdint.h>

#define CASSINI_RELEASE_VERSION "4.0.11"
#define CASSINI_CQL_VERSION     "3.4.5"

struct cql_peer_info {
	struct inet_addr address;        /* broadcast address, storage port */
	struct inet_addr native_address; /* broadcast rpc address, port */
	struct inet_addr preferred;      /* connected to instead of address
					    (prefer_local); INET_NONE: none */
	uint8_t host_id[16];
	const char *dc;
	const char *rack;
	const char *release_version;
	uint8_t schema_version[16];
	const int64_t *tokens;
	size_t token_count;
};

/* What the node knows about itself and its peers, borrowed for one call. */
struct cql_node_info {
	const char *cluster_name;
	const char *snitch; /* e.g. "SimpleSnitch"; NULL: SimpleSnitch */
	const char *dc;
	const char *rack;
	uint8_t host_id[16];
	struct inet_addr listen_address;    /* what internode traffic binds */
	struct inet_addr broadcast_address; /* what peers are told */
	struct inet_addr rpc_address;       /* broadcast_rpc_address */
	int32_t gossip_generation;
	const int64_t *tokens;
	size_t token_count;
	const struct cql_peer_info *peers; /* never the local node */
	size_t peer_count;
	/* Other members known at all (joining ones too, which are not peers
	 * rows until they have tokens). */
	size_t other_members;
};

/* What system_views shows: the node's own view, borrowed for one call. */
struct cql_setting {
	const char *name;
	const char *value; /* NULL: not set */
};

struct cql_thread_pool {
	const char *name;
	int32_t active_tasks;
	int32_t active_tasks_limit;
	int32_t pending_tasks;
	int64_t completed_tasks;
	int64_t blocked_tasks;
	int64_t blocked_tasks_all_time;
};

struct cql_view_rows;

struct cql_views_info {
	const struct cql_setting *settings; /* system_views.settings */
	size_t setting_count;
	const struct cql_server_client *clients; /* system_views.clients */
	size_t client_count;
	const struct cql_thread_pool *pools; /* system_views.thread_pools */
	size_t pool_count;
	/* The other system_views tables (gossip_info, pending_hints,
	 * disk_usage, ...) and system."IndexInfo": called once per SELECT on
	 * one, with `table` its name, to add its rows through the cql_view_*
	 * builder below. NULL: they are empty. 0, or -1 with err set. */
	int (*table_rows)(void *arg, const char *table,
			  struct cql_view_rows *rows);
	void *table_arg;
};

/*
 * Building a node-made view's rows: cql_view_row starts a row, then each
 * call sets one column by name (a column never set is null; a NULL text
 * is null). Rows may come in any order: they are sorted by primary key
 * (each key column's type order) before the query sees them. 0, or -1
 * with ERR_NOMEM, or ERR_INVALID for a column the table does not have.
 */
int cql_view_row(struct cql_view_rows *b);
int cql_view_text(struct cql_view_rows *b, const char *column, const char *v);
int cql_view_int(struct cql_view_rows *b, const char *column, int32_t v);
int cql_view_bigint(struct cql_view_rows *b, const char *column, int64_t v);
int cql_view_timestamp(struct cql_view_rows *b, const char *column, int64_t ms);
int cql_view_double(struct cql_view_rows *b, const char *column, double v);
int cql_view_bool(struct cql_view_rows *b, const char *column, bool v);
int cql_view_inet(struct cql_view_rows *b, const char *column,
		  const struct inet_addr *a);
int cql_view_uuid(struct cql_view_rows *b, const char *column,
		  const uint8_t id[16]);
/* A value already in its native-protocol form (a frozen collection). */
int cql_view_bytes(struct cql_view_rows *b, const char *column, const void *v,
		   size_t len);

/* The comment of a virtual table, as Cassandra 4.1 gives it ("" when it
 * has none). */
const char *cql_view_comment(const char *ks, const char *table);

/* True for the keyspaces of the views registry (cql_schema_new_views):
 * system_views and system_virtual_schema. */
bool cql_system_keyspace_is_view(const char *keyspace);

/* True for the keyspaces served here (system, system_schema, and the
 * virtual keyspaces). */
bool cql_system_keyspace_is_virtual(const char *keyspace);

/*
 * Evaluates a SELECT on a virtual table and appends a whole RESULT frame
 * (Rows, or an ERROR) to `out`. `binds` are the statement's bound values
 * (may be NULL when there are none). `views` is the views registry and
 * `vi` the data of system_views (NULL: its tables are empty). Returns 0,
 * or -1 when nothing could be appended (ERR_NOMEM).
 */
int cql_system_select(const struct cql_schema *schema,
		      const struct cql_schema *views,
		      const struct cql_views_info *vi,
		      const struct cql_node_info *node,
		      const struct cql_select *select, const char *keyspace,
		      const struct cql_value *binds, size_t bind_count,
		      uint8_t version, int16_t stream, struct buf *out);

/* The result columns of a SELECT on a system table (for the PREPARED
 * result's metadata, which drivers such as gocql use in place of each
 * reply's), allocated in `a`. 0, or -1 with ERR_INVALID / ERR_NOMEM. */
struct arena;
struct cql_column_spec;
int cql_system_select_specs(struct arena *a, const struct cql_schema *schema,
			    const struct cql_schema *views,
			    const struct cql_select *q, const char *keyspace,
			    struct cql_column_spec **specs, size_t *n);

#endif
