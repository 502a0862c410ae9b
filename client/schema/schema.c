/*
 * The schema registry: sorted keyspaces and tables, lookups, the schema
 * version, and the built-in system keyspaces.
 *
 * System tables are declared below as CQL and created through the same DDL
 * path as user tables, so their definitions read like Cassandra's and are
 * validated the same way. Their ids are derived from their names, so every
 * node agrees on them (and on the schema version) without talking.
 */
#include "client/schema/schema_internal.h"

#include "client/cql/cql_parse.h"
#include "client/cql/cql_values.h"
#include "client/proto/proto.h"
#include "common/arena.h"
#include "common/err.h"
#include "common/murmur3.h"
#include "ring/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	const char *klass;
	const char *rf; /* NULL for LocalStrategy */
} system_keyspaces[] = {
	{"system", "LocalStrategy", NULL},
	{"system_schema", "LocalStrategy", NULL},
	{"system_auth", "SimpleStrategy", "1"},
	{"system_distributed", "SimpleStrategy", "3"},
	{"system_traces", "SimpleStrategy", "2"},
};

/* The tables drivers and cqlsh read, with Cassandra 4.0's columns. */
static const char *const system_tables[] = {
	"CREATE TABLE system.local (key text PRIMARY KEY, bootstrapped text, "
	"broadcast_address inet, broadcast_port int, cluster_name text, "
	"cql_version text, data_center text, gossip_generation int, "
	"host_id uuid, listen_address inet, listen_port int, "
	"native_protocol_version text, partitioner text, rack text, "
	"release_version text, rpc_address inet, rpc_port int, "
	"schema_version uuid, tokens set<text>, truncated_at map<uuid, blob>)",

	/* Cassandra 4.0+'s BuiltIndexes: table_name holds the keyspace;
	 * a row per index built on this node (value null) */
	"CREATE TABLE system.\"IndexInfo\" (table_name text, index_name text, "
	"value blob, PRIMARY KEY ((table_name), index_name))",

	"CREATE TABLE system.peers (peer inet PRIMARY KEY, data_center text, "
	"host_id uuid, preferred_ip inet, rack text, release_version text, "
	"rpc_address inet, schema_version uuid, tokens set<text>)",

	"CREATE TABLE system.peers_v2 (peer inet, peer_port int, "
	"data_center text, host_id uuid, preferred_ip inet, preferred_port "
	"int, "
	"rack text, release_version text, native_address inet, native_port "
	"int, "
	"schema_version uuid, tokens set<text>, "
	"PRIMARY KEY ((peer), peer_port))",

	"CREATE TABLE system_schema.keyspaces (keyspace_name text PRIMARY KEY, "
	"durable_writes boolean, replication frozen<map<text, text>>)",

	"CREATE TABLE system_schema.tables (keyspace_name text, table_name "
	"text, "
	"additional_write_policy text, bloom_filter_fp_chance double, "
	"caching frozen<map<text, text>>, cdc boolean, comment text, "
	"compaction frozen<map<text, text>>, compression frozen<map<text, "
	"text>>, "
	"crc_check_chance double, dclocal_read_repair_chance double, "
	"default_time_to_live int, extensions frozen<map<text, blob>>, "
	"flags frozen<set<text>>, gc_grace_seconds int, id uuid, "
	"max_index_interval int, memtable_flush_period_in_ms int, "
	"min_index_interval int, read_repair text, read_repair_chance double, "
	"speculative_retry text, PRIMARY KEY ((keyspace_name), table_name))",

	"CREATE TABLE system_schema.columns (keyspace_name text, "
	"table_name text, column_name text, clustering_order text, "
	"column_name_bytes blob, kind text, position int, type text, "
	"PRIMARY KEY ((keyspace_name), table_name, column_name))",

	"CREATE TABLE system_schema.dropped_columns (keyspace_name text, "
	"table_name text, column_name text, dropped_time timestamp, kind text, "
	"type text, PRIMARY KEY ((keyspace_name), table_name, column_name))",

	"CREATE TABLE system_schema.triggers (keyspace_name text, "
	"table_name text, trigger_name text, options frozen<map<text, text>>, "
	"PRIMARY KEY ((keyspace_name), table_name, trigger_name))",

	/* Cassandra 4's columns: drivers (gocql) select the options too. */
	"CREATE TABLE system_schema.views (keyspace_name text, view_name text, "
	"additional_write_policy text, base_table_id uuid, "
	"base_table_name text, bloom_filter_fp_chance double, "
	"caching frozen<map<text, text>>, cdc boolean, comment text, "
	"compaction frozen<map<text, text>>, "
	"compression frozen<map<text, text>>, crc_check_chance double, "
	"dclocal_read_repair_chance double, default_time_to_live int, "
	"extensions frozen<map<text, blob>>, gc_grace_seconds int, id uuid, "
	"include_all_columns boolean, max_index_interval int, "
	"memtable_flush_period_in_ms int, min_index_interval int, "
	"read_repair text, read_repair_chance double, speculative_retry text, "
	"where_clause text, PRIMARY KEY ((keyspace_name), view_name))",

	"CREATE TABLE system_schema.types (keyspace_name text, type_name text, "
	"field_names frozen<list<text>>, field_types frozen<list<text>>, "
	"PRIMARY KEY ((keyspace_name), type_name))",

	"CREATE TABLE system_schema.functions (keyspace_name text, "
	"function_name text, argument_types frozen<list<text>>, "
	"argument_names frozen<list<text>>, body text, "
	"called_on_null_input boolean, language text, return_type text, "
	"PRIMARY KEY ((keyspace_name), function_name, argument_types))",

	"CREATE TABLE system_schema.aggregates (keyspace_name text, "
	"aggregate_name text, argument_types frozen<list<text>>, "
	"final_func text, initcond text, return_type text, state_func text, "
	"state_type text, "
	"PRIMARY KEY ((keyspace_name), aggregate_name, argument_types))",

	/* Cassandra's auth tables (AuthKeyspace): real replicated tables,
	 * stored and streamed like a user keyspace's. */
	"CREATE TABLE system_auth.roles (role text PRIMARY KEY, "
	"can_login boolean, is_superuser boolean, member_of set<text>, "
	"salted_hash text)",

	"CREATE TABLE system_auth.role_members (role text, member text, "
	"PRIMARY KEY ((role), member))",

	/* CassandraAuthorizer's, with its reverse index (the typo in the
	 * name is Cassandra's) */
	"CREATE TABLE system_auth.role_permissions (role text, "
	"resource text, permissions set<text>, "
	"PRIMARY KEY ((role), resource))",

	"CREATE TABLE system_auth.resource_role_permissons_index "
	"(resource text, role text, PRIMARY KEY ((resource), role))",

	/* Cassandra 4.1's TraceKeyspace: written by node/node_trace.c with
	 * the trace TTL on every cell */
	"CREATE TABLE system_traces.sessions (session_id uuid PRIMARY KEY, "
	"client inet, command text, coordinator inet, coordinator_port int, "
	"duration int, parameters map<text, text>, request text, "
	"started_at timestamp)",

	"CREATE TABLE system_traces.events (session_id uuid, "
	"event_id timeuuid, activity text, source inet, source_elapsed int, "
	"source_port int, thread text, "
	"PRIMARY KEY ((session_id), event_id))",

	"CREATE TABLE system_schema.indexes (keyspace_name text, "
	"table_name text, index_name text, kind text, "
	"options frozen<map<text, text>>, "
	"PRIMARY KEY ((keyspace_name), table_name, index_name))",
};

/* The virtual keyspaces (Cassandra 4.0+): their tables' rows are computed
 * by system_tables.c from the node's view, never stored. Cassandra 4.1's
 * columns and types (db/virtual/ in its source). */
static const char *const view_keyspaces[] = {"system_views",
					     "system_virtual_schema"};

static const char *const view_tables[] = {
	"CREATE TABLE system_virtual_schema.keyspaces (keyspace_name text "
	"PRIMARY KEY)",

	"CREATE TABLE system_virtual_schema.tables (keyspace_name text, "
	"table_name text, comment text, "
	"PRIMARY KEY ((keyspace_name), table_name))",

	"CREATE TABLE system_virtual_schema.columns (keyspace_name text, "
	"table_name text, column_name text, clustering_order text, "
	"column_name_bytes blob, kind text, position int, type text, "
	"PRIMARY KEY ((keyspace_name), table_name, column_name))",

	"CREATE TABLE system_views.settings (name text PRIMARY KEY, "
	"value text)",

	"CREATE TABLE system_views.clients (address inet, port int, "
	"client_options map<text, text>, connection_stage text, "
	"driver_name text, driver_version text, hostname text, "
	"protocol_version int, request_count bigint, ssl_cipher_suite text, "
	"ssl_enabled boolean, ssl_protocol text, username text, "
	"PRIMARY KEY ((address), port))",

	"CREATE TABLE system_views.thread_pools (name text PRIMARY KEY, "
	"active_tasks int, active_tasks_limit int, blocked_tasks bigint, "
	"blocked_tasks_all_time bigint, completed_tasks bigint, "
	"pending_tasks int)",

	/* Cassandra 4.1's GossipInfoTable: a text and a version column per
	 * application state (TOKENS only its version); the states Cassini
	 * does not gossip stay null. */
	"CREATE TABLE system_views.gossip_info (address inet, port int, "
	"hostname text, generation int, heartbeat int, status text, "
	"load text, \"schema\" text, dc text, rack text, release_version "
	"text, removal_coordinator text, internal_ip text, rpc_address "
	"text, x_11_padding text, severity text, net_version text, "
	"host_id text, rpc_ready text, internal_address_and_port text, "
	"native_address_and_port text, status_with_port text, "
	"sstable_versions text, disk_usage text, x1 text, x2 text, x3 "
	"text, x4 text, x5 text, x6 text, x7 text, x8 text, x9 text, "
	"x10 text, status_version int, load_version int, schema_version "
	"int, dc_version int, rack_version int, release_version_version "
	"int, removal_coordinator_version int, internal_ip_version int, "
	"rpc_address_version int, x_11_padding_version int, "
	"severity_version int, net_version_version int, host_id_version "
	"int, rpc_ready_version int, internal_address_and_port_version "
	"int, native_address_and_port_version int, "
	"status_with_port_version int, sstable_versions_version int, "
	"disk_usage_version int, x1_version int, x2_version int, "
	"x3_version int, x4_version int, x5_version int, x6_version "
	"int, x7_version int, x8_version int, x9_version int, "
	"x10_version int, tokens_version int, PRIMARY KEY ((address), "
	"port))",

	"CREATE TABLE system_views.pending_hints (host_id uuid PRIMARY KEY, "
	"address inet, port int, rack text, dc text, status text, files int, "
	"total_size bigint, corrupted_files int, "
	"total_corrupted_files_size bigint, newest timestamp, "
	"oldest timestamp)",

	"CREATE TABLE system_views.internode_inbound (address inet, port int, "
	"dc text, rack text, using_bytes bigint, using_reserve_bytes bigint, "
	"corrupt_frames_recovered bigint, corrupt_frames_unrecovered bigint, "
	"error_bytes bigint, error_count bigint, expired_bytes bigint, "
	"expired_count bigint, scheduled_bytes bigint, scheduled_count "
	"bigint, processed_bytes bigint, processed_count bigint, "
	"received_bytes bigint, received_count bigint, throttled_count "
	"bigint, throttled_nanos bigint, PRIMARY KEY ((address, port), dc, "
	"rack))",

	"CREATE TABLE system_views.internode_outbound (address inet, port "
	"int, dc text, rack text, using_bytes bigint, using_reserve_bytes "
	"bigint, pending_count bigint, pending_bytes bigint, sent_count "
	"bigint, sent_bytes bigint, expired_count bigint, expired_bytes "
	"bigint, error_count bigint, error_bytes bigint, overload_count "
	"bigint, overload_bytes bigint, active_connections bigint, "
	"connection_attempts bigint, successful_connection_attempts bigint, "
	"PRIMARY KEY ((address, port), dc, rack))",

	"CREATE TABLE system_views.sstable_tasks (keyspace_name text, "
	"table_name text, task_id uuid, completion_ratio double, kind text, "
	"progress bigint, total bigint, unit text, "
	"PRIMARY KEY ((keyspace_name), table_name, task_id))",

	/* Cassandra 5.0's ColumnIndexesSystemView */
	"CREATE TABLE system_views.sai_column_indexes (keyspace_name text, "
	"index_name text, table_name text, column_name text, "
	"is_queryable boolean, is_building boolean, is_string boolean, "
	"analyzer text, PRIMARY KEY ((keyspace_name), index_name))",

	"CREATE TABLE system_views.disk_usage (keyspace_name text, "
	"table_name text, mebibytes bigint, "
	"PRIMARY KEY ((keyspace_name, table_name)))",

	"CREATE TABLE system_views.caches (name text PRIMARY KEY, "
	"capacity_bytes bigint, entry_count int, hit_count bigint, "
	"hit_ratio double, recent_hit_rate_per_second bigint, "
	"recent_request_rate_per_second bigint, request_count bigint, "
	"size_bytes bigint)",

	"CREATE TABLE system_views.max_partition_size (keyspace_name text, "
	"table_name text, mebibytes bigint, "
	"PRIMARY KEY ((keyspace_name, table_name)))",

	"CREATE TABLE system_views.rows_per_read (keyspace_name text, "
	"table_name text, count bigint, max double, p50th double, "
	"p99th double, PRIMARY KEY ((keyspace_name, table_name)))",

	"CREATE TABLE system_views.tombstones_per_read (keyspace_name text, "
	"table_name text, count bigint, max double, p50th double, "
	"p99th double, PRIMARY KEY ((keyspace_name, table_name)))",

	"CREATE TABLE system_views.local_read_latency (keyspace_name text, "
	"table_name text, count bigint, max_ms double, p50th_ms double, "
	"p99th_ms double, per_second double, "
	"PRIMARY KEY ((keyspace_name, table_name)))",

	"CREATE TABLE system_views.local_write_latency (keyspace_name text, "
	"table_name text, count bigint, max_ms double, p50th_ms double, "
	"p99th_ms double, per_second double, "
	"PRIMARY KEY ((keyspace_name, table_name)))",

	/* Cassandra 5.0's LocalRepairTables (RepairTable, SessionTable) */
	"CREATE TABLE system_views.repairs ("
	"id timeuuid, last_updated_at timestamp, completed boolean, "
	"duration_millis bigint, failure_cause text, success_message text, "
	"state_init_timestamp timestamp, state_success_timestamp timestamp, "
	"state_skipped_timestamp timestamp, state_failure_timestamp "
	"timestamp, status text, "
	"command_id int, keyspace_name text, type text, "
	"sessions frozen<set<timeuuid>>, options_parallelism text, "
	"options_primary_range boolean, options_incremental boolean, "
	"options_trace boolean, options_job_threads int, "
	"options_subrange_repair boolean, options_pull_repair boolean, "
	"options_force_repair boolean, options_preview_kind text, "
	"options_optimise_streams boolean, "
	"options_ignore_unreplicated_keyspaces boolean, "
	"options_column_families frozen<set<text>>, "
	"options_data_centers frozen<set<text>>, "
	"options_hosts frozen<set<text>>, options_ranges frozen<set<text>>, "
	"table_names frozen<list<text>>, ranges frozen<list<list<text>>>, "
	"unfiltered_ranges frozen<list<list<text>>>, "
	"participants frozen<list<text>>, state_setup_timestamp timestamp, "
	"state_start_timestamp timestamp, "
	"state_prepare_start_timestamp timestamp, "
	"state_prepare_complete_timestamp timestamp, "
	"state_repair_start_timestamp timestamp, "
	"state_repair_complete_timestamp timestamp, PRIMARY KEY ((id)))",

	"CREATE TABLE system_views.repair_sessions ("
	"id timeuuid, last_updated_at timestamp, completed boolean, "
	"duration_millis bigint, failure_cause text, success_message text, "
	"state_init_timestamp timestamp, state_success_timestamp timestamp, "
	"state_skipped_timestamp timestamp, state_failure_timestamp "
	"timestamp, status text, "
	"repair_id timeuuid, keyspace_name text, "
	"table_names frozen<list<text>>, ranges frozen<list<text>>, "
	"participants frozen<list<text>>, jobs frozen<set<uuid>>, "
	"state_start_timestamp timestamp, "
	"state_jobs_start_timestamp timestamp, PRIMARY KEY ((id)))",

	"CREATE TABLE system_views.local_scan_latency (keyspace_name text, "
	"table_name text, count bigint, max_ms double, p50th_ms double, "
	"p99th_ms double, per_second double, "
	"PRIMARY KEY ((keyspace_name, table_name)))",

	"CREATE TABLE system_views.coordinator_read_latency (keyspace_name "
	"text, table_name text, count bigint, max_ms double, p50th_ms double, "
	"p99th_ms double, per_second double, "
	"PRIMARY KEY ((keyspace_name, table_name)))",

	"CREATE TABLE system_views.coordinator_scan_latency (keyspace_name "
	"text, table_name text, count bigint, max_ms double, p50th_ms double, "
	"p99th_ms double, per_second double, "
	"PRIMARY KEY ((keyspace_name, table_name)))",

	"CREATE TABLE system_views.coordinator_write_latency (keyspace_name "
	"text, table_name text, count bigint, max_ms double, p50th_ms double, "
	"p99th_ms double, per_second double, "
	"PRIMARY KEY ((keyspace_name, table_name)))",
};

/* ---- small sorted arrays ------------------------------------------------- */

static int grow(void **items, size_t *cap, size_t count, size_t size)
{
	if (count < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 8;
	void *p = realloc(*items, ncap * size);
	if (!p)
		return err_set(ERR_NOMEM, "out of memory");
	*items = p;
	*cap = ncap;
	return 0;
}

/* Arrays of pointers kept sorted by a name that name_of reads from a slot;
 * bytes are moved with memmove, so one helper serves every element type. */
typedef const char *(*name_of_fn)(const void *slot);

static size_t sorted_pos(const void *items, size_t count, size_t size,
			 name_of_fn name_of, const char *name, bool *found)
{
	size_t lo = 0, hi = count;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(name_of((const char *)items + mid * size), name);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static int sorted_insert(void **items, size_t *cap, size_t *count, size_t size,
			 size_t at, const void *elem)
{
	if (grow(items, cap, *count, size) != 0)
		return -1;
	char *b = *items;
	memmove(b + (at + 1) * size, b + at * size, (*count - at) * size);
	memcpy(b + at * size, elem, size);
	(*count)++;
	return 0;
}

static void sorted_remove(void *items, size_t *count, size_t size, size_t at)
{
	char *b = items;
	memmove(b + at * size, b + (at + 1) * size, (*count - at - 1) * size);
	(*count)--;
}

static const char *ks_name(const void *slot)
{
	return (*(struct cql_keyspace *const *)slot)->meta->name;
}

static const char *table_name(const void *slot)
{
	return (*(struct cql_table *const *)slot)->meta->name;
}

static size_t ks_pos(const struct cql_schema *s, const char *name, bool *found)
{
	return sorted_pos(s->keyspaces, s->count, sizeof(*s->keyspaces),
			  ks_name, name, found);
}

static size_t table_pos(const struct cql_keyspace *k, const char *name,
			bool *found)
{
	return sorted_pos(k->tables, k->table_count, sizeof(*k->tables),
			  table_name, name, found);
}

struct cql_keyspace *schema_keyspace_mut(struct cql_schema *s, const char *name)
{
	bool found;
	size_t i = ks_pos(s, name, &found);
	return found ? s->keyspaces[i] : NULL;
}

uint64_t cql_schema_generation(const struct cql_schema *s)
{
	return s->generation;
}

int schema_keyspace_insert(struct cql_schema *s, struct cql_keyspace *k)
{
	bool found;
	size_t i = ks_pos(s, k->meta->name, &found);
	if (found)
		return err_set(ERR_EXISTS, "keyspace exists");
	return sorted_insert((void **)&s->keyspaces, &s->cap, &s->count,
			     sizeof(*s->keyspaces), i, &k);
}

void schema_keyspace_remove(struct cql_schema *s, struct cql_keyspace *k)
{
	bool found;
	size_t i = ks_pos(s, k->meta->name, &found);
	if (found)
		sorted_remove(s->keyspaces, &s->count, sizeof(*s->keyspaces),
			      i);
}

struct cql_table *schema_table_mut(struct cql_keyspace *k, const char *name)
{
	bool found;
	size_t i = table_pos(k, name, &found);
	return found ? k->tables[i] : NULL;
}

static void table_digest(struct cql_table *t);

static const char *type_name(const void *slot)
{
	return (*(struct cql_user_type *const *)slot)->name;
}

static size_t type_pos(const struct cql_keyspace *k, const char *name,
		       bool *found)
{
	return sorted_pos(k->types, k->type_count, sizeof(*k->types), type_name,
			  name, found);
}

struct cql_user_type *schema_type_mut(struct cql_keyspace *k, const char *name)
{
	bool found;
	size_t i = type_pos(k, name, &found);
	return found ? k->types[i] : NULL;
}

int schema_type_insert(struct cql_keyspace *k, struct cql_user_type *t)
{
	bool found;
	size_t i = type_pos(k, t->name, &found);
	if (found)
		return err_set(ERR_EXISTS, "type exists");
	if (sorted_insert((void **)&k->types, &k->type_cap, &k->type_count,
			  sizeof(*k->types), i, &t) != 0)
		return -1;
	k->types_digest[0] += t->digest[0];
	k->types_digest[1] += t->digest[1];
	return 0;
}

void schema_type_remove(struct cql_keyspace *k, struct cql_user_type *t)
{
	bool found;
	size_t i = type_pos(k, t->name, &found);
	if (found && k->types[i] == t) {
		sorted_remove(k->types, &k->type_count, sizeof(*k->types), i);
		k->types_digest[0] -= t->digest[0];
		k->types_digest[1] -= t->digest[1];
	}
}

void schema_types_move(struct cql_keyspace *k, struct cql_keyspace *old)
{
	k->types = old->types;
	k->type_count = old->type_count;
	k->type_cap = old->type_cap;
	memcpy(k->types_digest, old->types_digest, sizeof(k->types_digest));
	old->types = NULL;
	old->type_count = old->type_cap = 0;
}

int schema_table_insert(struct cql_keyspace *k, struct cql_table *t)
{
	bool found;
	size_t i = table_pos(k, t->meta->name, &found);
	if (found)
		return err_set(ERR_EXISTS, "table exists");
	if (sorted_insert((void **)&k->tables, &k->table_cap, &k->table_count,
			  sizeof(*k->tables), i, &t) != 0)
		return -1;
	table_digest(t);
	k->tables_digest[0] += t->digest[0];
	k->tables_digest[1] += t->digest[1];
	return 0;
}

void schema_table_remove(struct cql_keyspace *k, struct cql_table *t)
{
	bool found;
	size_t i = table_pos(k, t->meta->name, &found);
	if (found && k->tables[i] == t) {
		sorted_remove(k->tables, &k->table_count, sizeof(*k->tables),
			      i);
		k->tables_digest[0] -= t->digest[0];
		k->tables_digest[1] -= t->digest[1];
	}
}

int schema_retire(struct cql_schema *s, enum retired_kind kind, void *ptr)
{
	if (s->retired_head > 0 && s->retired_count == s->retired_cap) {
		/* the freed front makes room */
		memmove(s->retired, s->retired + s->retired_head,
			(s->retired_count - s->retired_head) *
				sizeof(*s->retired));
		s->retired_count -= s->retired_head;
		s->retired_head = 0;
	}
	if (grow((void **)&s->retired, &s->retired_cap, s->retired_count,
		 sizeof(*s->retired)) != 0)
		return -1;
	s->retired[s->retired_count++] =
		(struct retired){kind, ptr, s->generation};
	return 0;
}

int schema_reserve_retired(struct cql_schema *s, size_t n)
{
	if (s->retired_count + n <= s->retired_cap)
		return 0;
	size_t cap = s->retired_cap ? s->retired_cap : 16;
	while (cap < s->retired_count + n)
		cap *= 2;
	struct retired *r = realloc(s->retired, cap * sizeof(*r));
	if (!r)
		return err_set(ERR_NOMEM, "out of memory");
	s->retired = r;
	s->retired_cap = cap;
	return 0;
}

static void retired_free(struct retired *r)
{
	if (r->kind == RETIRED_TABLE)
		schema_table_free(r->ptr);
	else if (r->kind == RETIRED_TYPE)
		schema_type_free(r->ptr);
	else
		schema_keyspace_free(r->ptr);
}

void schema_reclaim(struct cql_schema *s)
{
	/* An object retired by the change of generation g was reachable by
	 * lookups before g only; a pin taken at generation p may have looked
	 * it up if p < g. Pins are oldest first. */
	uint64_t oldest = s->pins ? s->pins->generation : UINT64_MAX;
	while (s->retired_head < s->retired_count &&
	       s->retired[s->retired_head].generation <= oldest)
		retired_free(&s->retired[s->retired_head++]);
	if (s->retired_head == s->retired_count)
		s->retired_head = s->retired_count = 0;
	/* a long-emptied array goes back too */
	if (s->retired_count == 0 && s->retired_cap > 64) {
		free(s->retired);
		s->retired = NULL;
		s->retired_cap = 0;
	}
}

int schema_reserve_dropped(struct cql_schema *s, size_t n)
{
	if (n <= s->dropped_cap)
		return 0;
	uint8_t(*p)[16] = realloc(s->dropped, n * sizeof(*p));
	if (!p)
		return err_set(ERR_NOMEM, "out of memory");
	s->dropped = p;
	s->dropped_cap = n;
	return 0;
}

void schema_note_dropped(struct cql_schema *s, struct cql_schema_change *c,
			 const uint8_t id[16])
{
	/* reserved before: cannot overflow */
	memcpy(s->dropped[c->dropped_count++], id, 16);
	c->dropped = (const uint8_t(*)[16])s->dropped;
}

void cql_schema_pin(struct cql_schema *s, struct cql_schema_pin *p)
{
	p->generation = s->generation;
	p->next = NULL;
	p->prev = s->pins_tail;
	if (s->pins_tail)
		s->pins_tail->next = p;
	else
		s->pins = p;
	s->pins_tail = p;
	s->pin_count++;
}

void cql_schema_unpin(struct cql_schema *s, struct cql_schema_pin *p)
{
	bool oldest = p == s->pins;
	if (p->prev)
		p->prev->next = p->next;
	else
		s->pins = p->next;
	if (p->next)
		p->next->prev = p->prev;
	else
		s->pins_tail = p->prev;
	p->prev = p->next = NULL;
	s->pin_count--;
	if (oldest)
		schema_reclaim(s);
}

void cql_schema_retained(const struct cql_schema *s,
			 struct cql_schema_retained *out)
{
	out->objects = s->retired_count - s->retired_head;
	out->pins = s->pin_count;
	out->oldest_pin = s->pins ? s->pins->generation : 0;
}

void schema_table_free(struct cql_table *t)
{
	if (!t)
		return;
	storage_table_meta_delete(t->meta);
	free(t->indexes);
	free(t);
}

void schema_keyspace_free(struct cql_keyspace *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->table_count; i++)
		schema_table_free(k->tables[i]);
	free(k->tables);
	for (size_t i = 0; i < k->type_count; i++)
		schema_type_free(k->types[i]);
	free(k->types);
	storage_keyspace_meta_delete(k->meta);
	ring_strategy_delete(k->strategy);
	free(k);
}

void schema_table_options_default(struct cql_table_options *o)
{
	memset(o, 0, sizeof(*o));
	o->read_repair_blocking = true;
	snprintf(o->speculative_retry, sizeof(o->speculative_retry), "99p");
	snprintf(o->caching_keys, sizeof(o->caching_keys), "ALL");
	snprintf(o->caching_rows, sizeof(o->caching_rows), "NONE");
	o->crc_check_chance = 1.0;
	o->min_index_interval = 128;
	o->max_index_interval = 2048;
}

/* ---- construction -------------------------------------------------------- */

static struct cql_keyspace *system_keyspace(const char *name, const char *klass,
					    const char *rf)
{
	struct cql_keyspace *k = calloc(1, sizeof(*k));
	if (!k) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	const char *keys[] = {"class", "replication_factor"};
	const char *values[] = {klass, rf};
	/* system_schema.keyspaces shows the full class name, as for user
	 * keyspaces and as Cassandra does */
	char full[96];
	snprintf(full, sizeof(full), "org.apache.cassandra.locator.%s", klass);
	k->system = true;
	k->meta = storage_keyspace_meta_new(name, true);
	k->strategy = ring_strategy_new(keys, values, rf ? 2 : 1, true);
	if (!k->meta || !k->strategy ||
	    storage_keyspace_meta_set_replication(k->meta, "class", full) !=
		    0 ||
	    (rf && storage_keyspace_meta_set_replication(
			   k->meta, "replication_factor", rf) != 0)) {
		schema_keyspace_free(k);
		return NULL;
	}
	return k;
}

/* Name-based ids, so every node gives a system table the same one. */
static void name_id(const char *ks, const char *table, uint8_t id[16])
{
	char text[160];
	uint64_t h[2];
	int n = snprintf(text, sizeof(text), "%s.%s", ks, table);
	murmur3_hash128(text, (size_t)n, 0, h);
	be64_store(id, h[0]);
	be64_store(id + 8, h[1]);
	id[6] = (uint8_t)((id[6] & 0x0f) | 0x30); /* version 3: name-based */
	id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);
}

static int create_tables(struct cql_schema *s, const char *const *tables,
			 size_t count)
{
	for (size_t i = 0; i < count; i++) {
		struct arena a;
		int binds;
		struct cql_schema_change change;
		arena_create(&a, 0);
		struct cql_stmt *st = cql_parse(
			&a, tables[i], strlen(tables[i]), &binds, NULL);
		enum cql_schema_status rc = CQL_SCHEMA_INVALID;
		if (st) {
			uint8_t id[16];
			name_id(st->u.create_table.table.keyspace,
				st->u.create_table.table.name, id);
			rc = schema_apply(s, st, NULL, id, SCHEMA_INTERNAL, -1,
					  &change);
		}
		arena_destroy(&a);
		if (rc != CQL_SCHEMA_OK)
			return err_prefix("system table %zu", i);
	}
	return 0;
}

struct cql_schema *cql_schema_new(void)
{
	struct cql_schema *s = calloc(1, sizeof(*s));
	if (!s) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	for (size_t i = 0;
	     i < sizeof(system_keyspaces) / sizeof(system_keyspaces[0]); i++) {
		struct cql_keyspace *k = system_keyspace(
			system_keyspaces[i].name, system_keyspaces[i].klass,
			system_keyspaces[i].rf);
		if (!k || schema_keyspace_insert(s, k) != 0) {
			schema_keyspace_free(k);
			cql_schema_delete(s);
			return NULL;
		}
	}
	if (create_tables(s, system_tables,
			  sizeof(system_tables) / sizeof(system_tables[0])) !=
	    0) {
		cql_schema_delete(s);
		return NULL;
	}
	return s;
}

struct cql_schema *cql_schema_new_views(void)
{
	struct cql_schema *s = calloc(1, sizeof(*s));
	if (!s) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	for (size_t i = 0;
	     i < sizeof(view_keyspaces) / sizeof(view_keyspaces[0]); i++) {
		struct cql_keyspace *k = system_keyspace(view_keyspaces[i],
							 "LocalStrategy", NULL);
		if (!k || schema_keyspace_insert(s, k) != 0) {
			schema_keyspace_free(k);
			cql_schema_delete(s);
			return NULL;
		}
	}
	if (create_tables(s, view_tables,
			  sizeof(view_tables) / sizeof(view_tables[0])) != 0) {
		cql_schema_delete(s);
		return NULL;
	}
	return s;
}

void cql_schema_delete(struct cql_schema *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->count; i++)
		schema_keyspace_free(s->keyspaces[i]);
	/* pins still held belong to readers that are gone too */
	for (size_t i = s->retired_head; i < s->retired_count; i++)
		retired_free(&s->retired[i]);
	free(s->retired);
	free(s->dropped);
	free(s->keyspaces);
	free(s);
}

enum cql_schema_status cql_schema_apply(struct cql_schema *s,
					const struct cql_stmt *stmt,
					const char *current_keyspace,
					const uint8_t new_id[16],
					struct cql_schema_change *change)
{
	return schema_apply(s, stmt, current_keyspace, new_id, SCHEMA_CLIENT,
			    -1, change);
}

enum cql_schema_status
cql_schema_apply_replicated(struct cql_schema *s, const struct cql_stmt *stmt,
			    const char *current_keyspace,
			    const uint8_t new_id[16], int columns_before,
			    struct cql_schema_change *change)
{
	return schema_apply(s, stmt, current_keyspace, new_id,
			    SCHEMA_REPLICATED, columns_before, change);
}

/* ---- queries ------------------------------------------------------------- */

const struct cql_keyspace *cql_schema_keyspace(const struct cql_schema *s,
					       const char *name)
{
	return schema_keyspace_mut((struct cql_schema *)s, name);
}

const struct cql_table *cql_schema_table(const struct cql_schema *s,
					 const char *keyspace,
					 const char *table)
{
	struct cql_keyspace *k =
		schema_keyspace_mut((struct cql_schema *)s, keyspace);
	return k ? schema_table_mut(k, table) : NULL;
}

size_t cql_schema_keyspace_count(const struct cql_schema *s)
{
	return s->count;
}

const struct cql_keyspace *cql_schema_keyspace_at(const struct cql_schema *s,
						  size_t i)
{
	return i < s->count ? s->keyspaces[i] : NULL;
}

const struct storage_keyspace_meta *
cql_keyspace_meta(const struct cql_keyspace *k)
{
	return k->meta;
}

const struct ring_strategy *cql_keyspace_strategy(const struct cql_keyspace *k)
{
	return k->strategy;
}

bool cql_keyspace_is_system(const struct cql_keyspace *k)
{
	return k->system;
}

bool cql_keyspace_name_is_replicated_system(const char *name)
{
	return strcmp(name, "system_auth") == 0 ||
	       strcmp(name, "system_distributed") == 0 ||
	       strcmp(name, "system_traces") == 0;
}

bool cql_keyspace_is_stored(const struct cql_keyspace *k)
{
	return !k->system ||
	       cql_keyspace_name_is_replicated_system(k->meta->name);
}

size_t cql_keyspace_table_count(const struct cql_keyspace *k)
{
	return k->table_count;
}

const struct cql_table *cql_keyspace_table_at(const struct cql_keyspace *k,
					      size_t i)
{
	return i < k->table_count ? k->tables[i] : NULL;
}

const struct storage_table_meta *cql_table_meta(const struct cql_table *t)
{
	return t->meta;
}

bool cql_table_columns_diverged(const struct cql_table *t)
{
	return t->columns_diverged;
}

const struct cql_table_options *cql_table_options(const struct cql_table *t)
{
	return &t->opts;
}

bool cql_table_column_dropped(const struct cql_table *t, size_t column)
{
	return column < t->meta->column_count &&
	       t->meta->columns[column].dropped;
}

int cql_table_column(const struct cql_table *t, const char *name)
{
	for (size_t i = 0; i < t->meta->column_count; i++)
		if (!t->meta->columns[i].dropped &&
		    strcmp(t->meta->columns[i].name, name) == 0)
			return (int)i;
	return -1;
}

int cql_type_text(const struct storage_type *t, char *dst, size_t cap)
{
	struct buf b;
	buf_init(&b);
	if (storage_type_format(t, &b) != 0)
		return -1;
	int rc = 0;
	if (b.len >= cap)
		rc = err_set(ERR_INVALID, "type text too long");
	else {
		memcpy(dst, b.data, b.len);
		dst[b.len] = '\0';
	}
	buf_free(&b);
	return rc;
}

/* ---- version ------------------------------------------------------------- */

static int describe_table(struct buf *b, const struct cql_table *t)
{
	const struct storage_table_meta *m = t->meta;
	const struct storage_table_options *o = &m->options;
	char line[512];
	int n = snprintf(
		line, sizeof(line),
		"table %s id=%02x%02x%02x%02x ttl=%d gc=%lld comp=%u/%u/%u"
		" cz=%u/%u bf=%g rr=%d sr=%s cm=%s\n",
		m->name, m->id[0], m->id[1], m->id[14], m->id[15],
		o->default_time_to_live, (long long)o->gc_grace_seconds,
		o->compaction, o->min_threshold, o->max_threshold,
		o->compression, o->chunk_length, o->bloom_filter_fp_chance,
		t->opts.read_repair_blocking, t->opts.speculative_retry,
		t->opts.comment);
	if (buf_append(b, line,
		       (size_t)(n < (int)sizeof(line)
					? n
					: (int)sizeof(line) - 1)) != 0)
		return -1;
	for (size_t i = 0; i < m->column_count; i++) {
		const struct storage_column *c = &m->columns[i];
		char type[96];
		if (cql_type_text(c->type, type, sizeof(type)) != 0)
			snprintf(type, sizeof(type), "?");
		n = snprintf(line, sizeof(line), " col %s %u %u %d %s%s %lld\n",
			     c->name, c->kind, c->position, c->desc, type,
			     c->dropped ? " dropped" : "",
			     (long long)c->dropped_at);
		if (buf_append(b, line,
			       (size_t)(n < (int)sizeof(line)
						? n
						: (int)sizeof(line) - 1)) != 0)
			return -1;
	}
	return 0;
}

bool cql_schema_stmt_timed(const struct cql_stmt *s)
{
	if (s->kind == CQL_STMT_ALTER_KEYSPACE)
		return true;
	if (s->kind != CQL_STMT_ALTER_TABLE)
		return false;
	const struct cql_alter_table *at = &s->u.alter_table;
	return at->kind == CQL_ALTER_WITH ||
	       (at->kind == CQL_ALTER_DROP && !at->has_timestamp);
}

void cql_schema_stmt_set_time(struct cql_stmt *s, int64_t time_us)
{
	if (s->kind == CQL_STMT_ALTER_KEYSPACE) {
		s->u.keyspace.time_us = time_us;
	} else {
		s->u.alter_table.has_timestamp = true;
		s->u.alter_table.timestamp = time_us;
	}
}

static void compute_version(const struct cql_schema *s, uint8_t out[16]);

void cql_schema_version(const struct cql_schema *s, uint8_t out[16])
{
	/* the cache is the only state a lookup changes (loop thread only) */
	struct cql_schema *w = (struct cql_schema *)s;
	if (!w->version_known || w->version_gen != s->generation) {
		compute_version(s, w->version);
		w->version_gen = s->generation;
		w->version_known = true;
	}
	memcpy(out, w->version, 16);
}

/* A table's share of the version: a hash of the text describe_table
 * writes (name, id, options, every column). */
static void table_digest(struct cql_table *t)
{
	struct buf b;
	buf_init(&b);
	describe_table(&b, t);
	murmur3_hash128(b.data ? b.data : (const uint8_t *)"", b.len, 0,
			t->digest);
	buf_free(&b);
}

/* The version hashes a line per keyspace and the sum of its tables'
 * digests (kept up to date as tables come and go): a schema change costs
 * a line per keyspace, not the text of every column of every table (60%
 * of a DDL's CPU at 2000 tables). Every node computes it the same way,
 * so equal schemas still give equal versions. */
static void compute_version(const struct cql_schema *s, uint8_t out[16])
{
	struct buf b;
	uint64_t h[2] = {0, 0};
	buf_init(&b);
	for (size_t i = 0; i < s->count; i++) {
		const struct cql_keyspace *k = s->keyspaces[i];
		char line[400];
		/* the types part only when it has some: a schema without
		 * types keeps the version it always had */
		int n = snprintf(line, sizeof(line),
				 "keyspace %s %d %s tables %zu %016llx%016llx",
				 k->meta->name, k->meta->durable_writes,
				 ring_strategy_describe(k->strategy),
				 k->table_count,
				 (unsigned long long)k->tables_digest[0],
				 (unsigned long long)k->tables_digest[1]);
		if (n >= 0 && n < (int)sizeof(line) && k->type_count)
			n += snprintf(line + n, sizeof(line) - (size_t)n,
				      " types %zu %016llx%016llx",
				      k->type_count,
				      (unsigned long long)k->types_digest[0],
				      (unsigned long long)k->types_digest[1]);
		if (n >= 0 && n < (int)sizeof(line) - 1)
			line[n++] = '\n';
		buf_append(&b, line,
			   (size_t)(n < (int)sizeof(line)
					    ? n
					    : (int)sizeof(line) - 1));
	}
	murmur3_hash128(b.data ? b.data : (const uint8_t *)"", b.len, 0, h);
	buf_free(&b);
	be64_store(out, h[0]);
	be64_store(out + 8, h[1]);
	out[6] = (uint8_t)((out[6] & 0x0f) | 0x30);
	out[8] = (uint8_t)((out[8] & 0x3f) | 0x80);
}

/* Cassandra's marshal class of a type, as a custom type option names a
 * vector: "org.apache.cassandra.db.marshal.VectorType(
 * org.apache.cassandra.db.marshal.FloatType, 3)". */
static int marshal_class(const struct storage_type *t, struct buf *b)
{
	static const char pre[] = "org.apache.cassandra.db.marshal.";
	const char *n;
	switch (t->kind) {
	case STORAGE_TYPE_ASCII:
		n = "AsciiType";
		break;
	case STORAGE_TYPE_BIGINT:
		n = "LongType";
		break;
	case STORAGE_TYPE_BLOB:
		n = "BytesType";
		break;
	case STORAGE_TYPE_BOOLEAN:
		n = "BooleanType";
		break;
	case STORAGE_TYPE_COUNTER:
		n = "CounterColumnType";
		break;
	case STORAGE_TYPE_DECIMAL:
		n = "DecimalType";
		break;
	case STORAGE_TYPE_DOUBLE:
		n = "DoubleType";
		break;
	case STORAGE_TYPE_FLOAT:
		n = "FloatType";
		break;
	case STORAGE_TYPE_INT:
		n = "Int32Type";
		break;
	case STORAGE_TYPE_TIMESTAMP:
		n = "TimestampType";
		break;
	case STORAGE_TYPE_UUID:
		n = "UUIDType";
		break;
	case STORAGE_TYPE_TEXT:
		n = "UTF8Type";
		break;
	case STORAGE_TYPE_VARINT:
		n = "IntegerType";
		break;
	case STORAGE_TYPE_TIMEUUID:
		n = "TimeUUIDType";
		break;
	case STORAGE_TYPE_INET:
		n = "InetAddressType";
		break;
	case STORAGE_TYPE_DATE:
		n = "SimpleDateType";
		break;
	case STORAGE_TYPE_TIME:
		n = "TimeType";
		break;
	case STORAGE_TYPE_SMALLINT:
		n = "ShortType";
		break;
	case STORAGE_TYPE_TINYINT:
		n = "ByteType";
		break;
	case STORAGE_TYPE_DURATION:
		n = "DurationType";
		break;
	case STORAGE_TYPE_LIST:
		n = "ListType";
		break;
	case STORAGE_TYPE_SET:
		n = "SetType";
		break;
	case STORAGE_TYPE_MAP:
		n = "MapType";
		break;
	case STORAGE_TYPE_TUPLE:
		n = "TupleType";
		break;
	case STORAGE_TYPE_UDT:
		n = "UserType";
		break;
	case STORAGE_TYPE_VECTOR:
		n = "VectorType";
		break;
	default:
		n = "BytesType";
	}
	bool frozen = t->frozen && t->kind != STORAGE_TYPE_TUPLE &&
		      t->kind != STORAGE_TYPE_VECTOR;
	if (frozen && (buf_append(b, pre, sizeof(pre) - 1) ||
		       buf_append(b, "FrozenType(", 11)))
		return -1;
	if (buf_append(b, pre, sizeof(pre) - 1) || buf_append(b, n, strlen(n)))
		return -1;
	if (t->count && t->kind != STORAGE_TYPE_UDT) {
		if (buf_append(b, "(", 1))
			return -1;
		for (size_t i = 0; i < t->count; i++)
			if ((i && buf_append(b, ",", 1)) ||
			    marshal_class(t->sub[i], b))
				return -1;
		if (t->kind == STORAGE_TYPE_VECTOR) {
			char d[16];
			int k = snprintf(d, sizeof(d), " , %u", t->dimension);
			if (buf_append(b, d, (size_t)k))
				return -1;
		}
		if (buf_append(b, ")", 1))
			return -1;
	}
	if (frozen && buf_append(b, ")", 1))
		return -1;
	return 0;
}

struct cql_type_option *cql_type_option_of(struct arena *a,
					   const struct storage_type *t)
{
	struct cql_type_option *o = arena_alloc(a, sizeof(*o));
	if (!o)
		return NULL;
	memset(o, 0, sizeof(*o));
	o->id = t->kind;
	if (t->kind == STORAGE_TYPE_VECTOR) {
		struct buf b;
		buf_init(&b);
		char *cls = NULL;
		if (marshal_class(t, &b) == 0 && buf_put_u8(&b, 0) == 0 &&
		    (cls = arena_alloc(a, b.len)))
			memcpy(cls, b.data, b.len);
		buf_free(&b);
		if (!cls)
			return NULL;
		o->id = CQL_TYPE_CUSTOM;
		o->custom_class = cls;
		return o;
	}
	if (!t->count)
		return o;
	const struct cql_type_option **subs =
		arena_alloc(a, t->count * sizeof(*subs));
	if (!subs)
		return NULL;
	for (size_t i = 0; i < t->count; i++)
		if (!(subs[i] = cql_type_option_of(a, t->sub[i])))
			return NULL;
	o->count = t->count;
	o->subs = subs;
	o->sub[0] = subs[0];
	o->sub[1] = t->count > 1 ? subs[1] : NULL;
	o->keyspace = t->keyspace;
	o->name = t->name;
	o->field_names = t->field_names;
	return o;
}

struct cql_type_option *
cql_type_option_list_of(struct arena *a, const struct cql_type_option *elem)
{
	struct cql_type_option *o = arena_alloc(a, sizeof(*o));
	if (!o)
		return NULL;
	memset(o, 0, sizeof(*o));
	o->id = CQL_TYPE_LIST;
	o->sub[0] = elem;
	return o;
}

/* One key component as a literal of its column's type. */
static struct cql_term key_term(uint16_t kind, const char *text, size_t len)
{
	struct cql_term t = {.kind = CQL_TERM_STRING, .text = text, .len = len};
	switch (kind) {
	case STORAGE_TYPE_BIGINT:
	case STORAGE_TYPE_INT:
	case STORAGE_TYPE_SMALLINT:
	case STORAGE_TYPE_TINYINT:
	case STORAGE_TYPE_VARINT:
	case STORAGE_TYPE_DECIMAL:
	case STORAGE_TYPE_DOUBLE:
	case STORAGE_TYPE_FLOAT:
		if (len && text[0] == '-') {
			t.negative = true;
			t.text++;
			t.len--;
		}
		t.kind = CQL_TERM_INTEGER;
		for (size_t i = 0; i < t.len; i++)
			if (t.text[i] < '0' || t.text[i] > '9')
				t.kind = CQL_TERM_FLOAT;
		break;
	case STORAGE_TYPE_BOOLEAN:
		t.kind = CQL_TERM_BOOLEAN;
		break;
	case STORAGE_TYPE_UUID:
	case STORAGE_TYPE_TIMEUUID:
		t.kind = CQL_TERM_UUID;
		break;
	case STORAGE_TYPE_BLOB:
		t.kind = CQL_TERM_BLOB;
		if (len >= 2 && text[0] == '0' &&
		    (text[1] == 'x' || text[1] == 'X')) {
			t.text += 2;
			t.len -= 2;
		}
		break;
	default: /* text, ascii, inet, date, time, timestamp */
		break;
	}
	return t;
}

int cql_table_key_from_text(const struct cql_table *t, const char *text,
			    struct buf *out)
{
	const struct storage_table_meta *m = t->meta;
	struct slice parts[16] = {{0}};
	struct buf vals[16];
	const char *p = text;
	int rc = 0;
	size_t n = 0;
	for (; n < m->pk_count && rc == 0; n++) {
		const struct storage_column *c = &m->columns[m->pk[n]];
		bool last = n + 1 == m->pk_count;
		const char *end = last ? p + strlen(p) : strchr(p, ':');
		buf_init(&vals[n]);
		if (!end) {
			rc = err_set(ERR_INVALID,
				     "the key has %zu of the %zu parts of the "
				     "partition key (separate them with ':')",
				     n + 1, m->pk_count);
			n++;
			break;
		}
		struct cql_term term =
			key_term(c->type->kind, p, (size_t)(end - p));
		if (c->type->count)
			rc = err_set(ERR_UNSUPPORTED,
				     "collection partition keys "
				     "cannot be given as text");
		else if (cql_term_serialize(&term, c->type, c->name, NULL, NULL,
					    &vals[n]) != 0)
			rc = -1;
		parts[n] = slice_make(vals[n].data, vals[n].len);
		p = end + (last ? 0 : 1);
	}
	if (rc == 0)
		rc = m->pk_count == 1
			     ? buf_append(out, parts[0].ptr, parts[0].len)
			     : murmur3_compound_key(out, parts, m->pk_count);
	for (size_t i = 0; i < n; i++)
		buf_free(&vals[i]);
	return rc;
}

static void compaction_put(struct cql_compaction_map *m, const char *key,
			   const char *value)
{
	m->keys[m->count] = key;
	m->values[m->count++] = value;
}

void cql_compaction_map(const struct storage_table_options *o,
			struct cql_compaction_map *m)
{
	bool tw = o->compaction == STORAGE_COMPACTION_TIME_WINDOW;
	bool lv = o->compaction == STORAGE_COMPACTION_LEVELED;
	m->count = 0;
	compaction_put(m, "class",
		       tw   ? "org.apache.cassandra.db.compaction."
			      "TimeWindowCompactionStrategy"
		       : lv ? "org.apache.cassandra.db.compaction."
			      "LeveledCompactionStrategy"
			    : "org.apache.cassandra.db.compaction."
			      "SizeTieredCompactionStrategy");
	snprintf(m->max, sizeof(m->max), "%u", o->max_threshold);
	snprintf(m->min, sizeof(m->min), "%u", o->min_threshold);
	compaction_put(m, "max_threshold", m->max);
	compaction_put(m, "min_threshold", m->min);
	if (tw) {
		snprintf(m->window, sizeof(m->window), "%lld",
			 (long long)(o->compaction_window_seconds / 60));
		compaction_put(m, "compaction_window_size", m->window);
		compaction_put(m, "compaction_window_unit", "MINUTES");
	}
	/* Cassandra lists only the sub-options given: those off their
	 * defaults */
	if (o->tombstone_threshold != 0.2) {
		snprintf(m->threshold, sizeof(m->threshold), "%g",
			 o->tombstone_threshold);
		compaction_put(m, "tombstone_threshold", m->threshold);
	}
	if (o->tombstone_compaction_interval != 86400) {
		snprintf(m->interval, sizeof(m->interval), "%lld",
			 (long long)o->tombstone_compaction_interval);
		compaction_put(m, "tombstone_compaction_interval", m->interval);
	}
	if (o->unchecked_tombstone_compaction)
		compaction_put(m, "unchecked_tombstone_compaction", "true");
	if (lv && o->sstable_size_bytes != (160ull << 20)) {
		snprintf(m->sstable_size, sizeof(m->sstable_size), "%llu",
			 (unsigned long long)(o->sstable_size_bytes >> 20));
		compaction_put(m, "sstable_size_in_mb", m->sstable_size);
	}
	if (lv && o->fanout_size != 10) {
		snprintf(m->fanout, sizeof(m->fanout), "%u", o->fanout_size);
		compaction_put(m, "fanout_size", m->fanout);
	}
}
