/*
 * Virtual system tables: row generation and SELECT evaluation.
 *
 * Rows are built per query in an arena (they are small: one row per
 * keyspace, table, column or node) as arrays of serialized cells indexed by
 * the table's column numbers, then filtered, projected and encoded.
 */
#include "client/schema/system_tables.h"

#include "client/cql/cql_values.h"
#include "common/arena.h"
#include "common/err.h"
#include "ring/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cell {
	const uint8_t *ptr;
	int32_t len; /* -1: null */
};

struct rows {
	struct arena *a;
	const struct cql_table *table;
	size_t ncols;
	struct cell **rows;
	size_t count, cap;
};

/* ---- building rows ------------------------------------------------------- */

static struct cell *row_new(struct rows *r)
{
	if (r->count == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		struct cell **p = arena_alloc(r->a, cap * sizeof(*p));
		if (!p)
			return NULL;
		if (r->count)
			memcpy(p, r->rows, r->count * sizeof(*p));
		r->rows = p;
		r->cap = cap;
	}
	struct cell *row = arena_alloc(r->a, r->ncols * sizeof(*row));
	if (!row)
		return NULL;
	for (size_t i = 0; i < r->ncols; i++)
		row[i] = (struct cell){NULL, -1};
	r->rows[r->count++] = row;
	return row;
}

static int put(struct rows *r, struct cell *row, const char *column,
	       const void *p, size_t len)
{
	int c = cql_table_column(r->table, column);
	if (c < 0)
		return err_set(ERR_INVALID, "internal: no column %s", column);
	uint8_t *copy = arena_memdup(r->a, p, len);
	if (!copy)
		return -1;
	row[c] = (struct cell){copy, (int32_t)len};
	return 0;
}

static int put_text(struct rows *r, struct cell *row, const char *column,
		    const char *s)
{
	return s ? put(r, row, column, s, strlen(s)) : 0;
}

static int put_int(struct rows *r, struct cell *row, const char *column,
		   int32_t v)
{
	uint8_t b[4];
	be32_store(b, (uint32_t)v);
	return put(r, row, column, b, 4);
}

static int put_bool(struct rows *r, struct cell *row, const char *column,
		    bool v)
{
	uint8_t b = v ? 1 : 0;
	return put(r, row, column, &b, 1);
}

static int put_double(struct rows *r, struct cell *row, const char *column,
		      double v)
{
	uint64_t bits;
	uint8_t b[8];
	memcpy(&bits, &v, 8);
	be64_store(b, bits);
	return put(r, row, column, b, 8);
}

static int put_inet(struct rows *r, struct cell *row, const char *column,
		    const struct inet_addr *a)
{
	if (a->family == INET_NONE)
		return 0;
	return put(r, row, column, a->ip, a->family == INET_V6 ? 16 : 4);
}

/* A frozen map<text, text> / set<text> from sorted string pairs: n, then
 * [int len][bytes] per element (and value). */
static int put_text_collection(struct rows *r, struct cell *row,
			       const char *column, const char *const *keys,
			       const char *const *values, size_t n)
{
	/* Sort indexes by key bytes (insertion sort: n is tiny). */
	size_t order[64];
	if (n > 64)
		n = 64;
	for (size_t i = 0; i < n; i++) {
		size_t j = i;
		while (j > 0 && strcmp(keys[order[j - 1]], keys[i]) > 0) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	struct buf b;
	buf_init(&b);
	int rc = buf_put_be32(&b, (uint32_t)n);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const char *k = keys[order[i]];
		rc = buf_put_be32(&b, (uint32_t)strlen(k)) ||
		     buf_append(&b, k, strlen(k));
		if (rc == 0 && values) {
			const char *v = values[order[i]];
			rc = buf_put_be32(&b, (uint32_t)strlen(v)) ||
			     buf_append(&b, v, strlen(v));
		}
	}
	if (rc == 0)
		rc = put(r, row, column, b.data ? b.data : (const uint8_t *)"",
			 b.len);
	buf_free(&b);
	return rc ? -1 : 0;
}

/* A frozen list<text> in the given order. */
static int put_text_list(struct rows *r, struct cell *row, const char *column,
			 const char *const *items, size_t n)
{
	struct buf b;
	buf_init(&b);
	int rc = buf_put_be32(&b, (uint32_t)n);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = buf_put_be32(&b, (uint32_t)strlen(items[i])) ||
		     buf_append(&b, items[i], strlen(items[i]));
	if (rc == 0)
		rc = put(r, row, column, b.data ? b.data : (const uint8_t *)"",
			 b.len);
	buf_free(&b);
	return rc ? -1 : 0;
}

static int put_tokens(struct rows *r, struct cell *row, const int64_t *tokens,
		      size_t n)
{
	char **texts = arena_alloc(r->a, (n ? n : 1) * sizeof(*texts));
	if (!texts)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char t[24];
		snprintf(t, sizeof(t), "%lld", (long long)tokens[i]);
		if (!(texts[i] = arena_strdup(r->a, t)))
			return -1;
	}
	return put_text_collection(r, row, "tokens", (const char *const *)texts,
				   NULL, n);
}

/* ---- generators ---------------------------------------------------------- */

/* The keyspace and table a query restricts system_schema rows to (WHERE
 * keyspace_name = ... [AND table_name = ...], what drivers send when
 * they refresh one table after a schema change): the generators then
 * build only those rows instead of every table's, and apply_where still
 * filters. */
struct scope {
	const char *ks, *table; /* NULL: any */
	bool none;              /* a restriction no name can meet */
	char ks_buf[64], table_buf[64];
};

/* The keyspaces a generator walks: all, or the one in scope. */
static size_t scope_first(const struct cql_schema *s, const struct scope *sc,
			  size_t *end)
{
	*end = cql_schema_keyspace_count(s);
	if (sc->none) {
		*end = 0;
		return 0;
	}
	if (!sc->ks)
		return 0;
	for (size_t i = 0; i < *end; i++)
		if (strcmp(cql_keyspace_meta(cql_schema_keyspace_at(s, i))
				   ->name,
			   sc->ks) == 0) {
			*end = i + 1;
			return i;
		}
	*end = 0;
	return 0;
}

/* The tables of `k` a generator walks: n of them, every one, or only the
 * one in scope (looked up, not searched for). */
struct scope_tables {
	const struct cql_keyspace *k;
	const struct cql_table *only;
	size_t n;
};

static struct scope_tables scope_tables(const struct cql_schema *s,
					const struct cql_keyspace *k,
					const struct scope *sc)
{
	struct scope_tables st = {k, NULL, cql_keyspace_table_count(k)};
	if (sc->table) {
		st.only = cql_schema_table(s, cql_keyspace_meta(k)->name,
					   sc->table);
		st.n = st.only ? 1 : 0;
	}
	return st;
}

static const struct cql_table *scope_table_at(const struct scope_tables *st,
					      size_t j)
{
	return st->only ? st->only : cql_keyspace_table_at(st->k, j);
}

/* system_schema.types: a row per user type, its fields in order. */
static int gen_types(struct rows *r, const struct cql_schema *s,
		     const struct scope *sc)
{
	size_t end, i = scope_first(s, sc, &end);
	for (; i < end; i++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(s, i);
		for (size_t j = 0; j < cql_keyspace_type_count(k); j++) {
			const struct cql_user_type *t =
				cql_keyspace_type_at(k, j);
			size_t n = cql_user_type_field_count(t);
			const char **names =
				arena_alloc(r->a, (n ? n : 1) * sizeof(char *));
			const char **types =
				arena_alloc(r->a, (n ? n : 1) * sizeof(char *));
			if (!names || !types)
				return -1;
			for (size_t f = 0; f < n; f++) {
				names[f] = cql_user_type_field_name(t, f);
				types[f] = cql_user_type_field_type(t, f);
			}
			struct cell *row = row_new(r);
			if (!row ||
			    put_text(r, row, "keyspace_name",
				     cql_keyspace_meta(k)->name) ||
			    put_text(r, row, "type_name",
				     cql_user_type_name(t)) ||
			    put_text_list(r, row, "field_names", names, n) ||
			    put_text_list(r, row, "field_types", types, n))
				return -1;
		}
	}
	return 0;
}

static int gen_keyspaces(struct rows *r, const struct cql_schema *s,
			 const struct scope *sc)
{
	size_t end, i = scope_first(s, sc, &end);
	for (; i < end; i++) {
		const struct storage_keyspace_meta *k =
			cql_keyspace_meta(cql_schema_keyspace_at(s, i));
		const char *keys[66], *values[66];
		size_t n = 0;
		keys[n] = "class";
		values[n++] = k->replication_class ? k->replication_class : "";
		for (size_t j = 0; j < k->replication_count && n < 64;
		     j++, n++) {
			keys[n] = k->replication_keys[j];
			values[n] = k->replication_values[j];
		}
		struct cell *row = row_new(r);
		if (!row || put_text(r, row, "keyspace_name", k->name) ||
		    put_bool(r, row, "durable_writes", k->durable_writes) ||
		    put_text_collection(r, row, "replication", keys, values, n))
			return -1;
	}
	return 0;
}

static int put_table_options(struct rows *r, struct cell *row,
			     const struct cql_table *t)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	const struct storage_table_options *o = &m->options;
	const struct cql_table_options *co = cql_table_options(t);
	char chunk[16];
	snprintf(chunk, sizeof(chunk), "%u", o->chunk_length / 1024);
	struct cql_compaction_map cm;
	cql_compaction_map(o, &cm);
	/* Disabled compression is {'enabled': 'false'}, as Cassandra's
	 * CompressionParams.asMap() has it. */
	bool cz = o->compression != STORAGE_COMPRESSION_NONE;
	const char *cz_keys[] = {cz ? "chunk_length_in_kb" : "enabled",
				 "class"};
	const char *cz_values[] = {
		cz ? chunk : "false",
		o->compression == STORAGE_COMPRESSION_DEFLATE
			? "org.apache.cassandra.io.compress.DeflateCompressor"
			: "org.apache.cassandra.io.compress.LZ4Compressor"};
	const char *cache_keys[] = {"keys", "rows_per_partition"};
	const char *cache_values[] = {co->caching_keys, co->caching_rows};
	const char *flags[] = {"compound"};
	return put_double(r, row, "bloom_filter_fp_chance",
			  o->bloom_filter_fp_chance) ||
	       put_text_collection(r, row, "caching", cache_keys, cache_values,
				   2) ||
	       put_bool(r, row, "cdc", false) ||
	       put_text(r, row, "comment", co->comment) ||
	       put_text_collection(r, row, "compaction", cm.keys, cm.values,
				   cm.count) ||
	       put_text_collection(r, row, "compression", cz_keys, cz_values,
				   cz ? 2 : 1) ||
	       put_double(r, row, "crc_check_chance", co->crc_check_chance) ||
	       put_double(r, row, "dclocal_read_repair_chance", 0.0) ||
	       put_int(r, row, "default_time_to_live",
		       o->default_time_to_live) ||
	       put_text_collection(r, row, "extensions", NULL, NULL, 0) ||
	       put_text_collection(r, row, "flags", flags, NULL, 1) ||
	       put_int(r, row, "gc_grace_seconds",
		       (int32_t)o->gc_grace_seconds) ||
	       put(r, row, "id", m->id, 16) ||
	       put_int(r, row, "max_index_interval", co->max_index_interval) ||
	       put_int(r, row, "memtable_flush_period_in_ms",
		       co->memtable_flush_period_in_ms) ||
	       put_int(r, row, "min_index_interval", co->min_index_interval) ||
	       put_text(r, row, "read_repair",
			co->read_repair_blocking ? "BLOCKING" : "NONE") ||
	       put_double(r, row, "read_repair_chance", 0.0) ||
	       put_text(r, row, "speculative_retry", co->speculative_retry) ||
	       put_text(r, row, "additional_write_policy", "99p");
}

static int gen_tables(struct rows *r, const struct cql_schema *s,
		      const struct scope *sc)
{
	size_t end, i = scope_first(s, sc, &end);
	for (; i < end; i++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(s, i);
		struct scope_tables st = scope_tables(s, k, sc);
		for (size_t j = 0; j < st.n; j++) {
			const struct cql_table *t = scope_table_at(&st, j);
			struct cell *row = row_new(r);
			if (!row ||
			    put_text(r, row, "keyspace_name",
				     cql_keyspace_meta(k)->name) ||
			    put_text(r, row, "table_name",
				     cql_table_meta(t)->name) ||
			    put_table_options(r, row, t))
				return -1;
		}
	}
	return 0;
}

static const char *const kind_names[] = {"partition_key", "clustering",
					 "regular", "static"};

static int column_row(struct rows *r, const char *ks, const char *table,
		      const struct storage_column *c, bool dropped)
{
	char type[1024];
	if (cql_type_text(c->type, type, sizeof(type)) != 0)
		return -1;
	struct cell *row = row_new(r);
	if (!row || put_text(r, row, "keyspace_name", ks) ||
	    put_text(r, row, "table_name", table) ||
	    put_text(r, row, "column_name", c->name) ||
	    put_text(r, row, "kind", kind_names[c->kind & 3]) ||
	    put_text(r, row, "type", type))
		return -1;
	if (dropped) {
		/* timestamp: milliseconds; the drop time is in micros */
		uint8_t b[8];
		int64_t ms = c->dropped_at > 0 ? c->dropped_at / 1000 : 0;
		be64_store(b, (uint64_t)ms);
		return put(r, row, "dropped_time", b, 8);
	}
	bool key = c->kind == STORAGE_COLUMN_PARTITION_KEY ||
		   c->kind == STORAGE_COLUMN_CLUSTERING;
	return put_text(r, row, "clustering_order",
			c->kind != STORAGE_COLUMN_CLUSTERING ? "none"
			: c->desc                            ? "desc"
							     : "asc") ||
	       put(r, row, "column_name_bytes", c->name, strlen(c->name)) ||
	       put_int(r, row, "position", key ? c->position : -1);
}

/* A dropped column with a later drop of the same name: dropped_columns
 * has one row per name, the latest (as Cassandra's). */
static bool superseded_drop(const struct storage_table_meta *m, size_t c)
{
	for (size_t i = c + 1; i < m->column_count; i++)
		if (m->columns[i].dropped &&
		    strcmp(m->columns[i].name, m->columns[c].name) == 0)
			return true;
	return false;
}

static int gen_columns(struct rows *r, const struct cql_schema *s, bool dropped,
		       const struct scope *sc)
{
	size_t end, i = scope_first(s, sc, &end);
	for (; i < end; i++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(s, i);
		struct scope_tables st = scope_tables(s, k, sc);
		for (size_t j = 0; j < st.n; j++) {
			const struct cql_table *t = scope_table_at(&st, j);
			const struct storage_table_meta *m = cql_table_meta(t);
			/* Rows sorted by column name, as the clustering says.
			 */
			size_t order[512], n = 0;
			for (size_t c = 0; c < m->column_count && n < 512;
			     c++) {
				if (cql_table_column_dropped(t, c) != dropped)
					continue;
				if (dropped && superseded_drop(m, c))
					continue;
				size_t p = n++;
				while (p > 0 &&
				       strcmp(m->columns[order[p - 1]].name,
					      m->columns[c].name) > 0) {
					order[p] = order[p - 1];
					p--;
				}
				order[p] = c;
			}
			for (size_t c = 0; c < n; c++)
				if (column_row(r, m->keyspace, m->name,
					       &m->columns[order[c]],
					       dropped) != 0)
					return -1;
		}
	}
	return 0;
}

/* system_schema.indexes: a row per index, by table and index name, kind
 * CUSTOM with the SAI class (Cassandra 5.0 with default_secondary_index:
 * sai). */
static int gen_indexes(struct rows *r, const struct cql_schema *s,
		       const struct scope *sc)
{
	size_t end, i = scope_first(s, sc, &end);
	for (; i < end; i++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(s, i);
		struct scope_tables st = scope_tables(s, k, sc);
		for (size_t j = 0; j < st.n; j++) {
			const struct cql_table *t = scope_table_at(&st, j);
			size_t n = cql_table_index_count(t), order[64], m = 0;
			for (size_t x = 0; x < n && m < 64; x++) {
				size_t p = m++;
				while (p > 0 &&
				       strcmp(cql_table_index_at(t,
								 order[p - 1])
						      ->name,
					      cql_table_index_at(t, x)->name) >
					       0) {
					order[p] = order[p - 1];
					p--;
				}
				order[p] = x;
			}
			for (size_t x = 0; x < m; x++) {
				const struct cql_index *ix =
					cql_table_index_at(t, order[x]);
				char target[200];
				const char *keys[CQL_INDEX_OPTION_MAX + 2],
					*values[CQL_INDEX_OPTION_MAX + 2];
				size_t no = 0;
				if (cql_index_target_text(t, ix, target,
							  sizeof(target)) != 0)
					return -1;
				keys[no] = "class_name";
				values[no++] = CQL_SAI_CLASS;
				keys[no] = "target";
				values[no++] = target;
				for (size_t o = 0; o < ix->option_count; o++) {
					keys[no] = ix->option_keys[o];
					values[no++] = ix->option_values[o];
				}
				struct cell *row = row_new(r);
				if (!row ||
				    put_text(r, row, "keyspace_name",
					     cql_keyspace_meta(k)->name) ||
				    put_text(r, row, "table_name",
					     cql_table_meta(t)->name) ||
				    put_text(r, row, "index_name", ix->name) ||
				    put_text(r, row, "kind", "CUSTOM") ||
				    put_text_collection(r, row, "options", keys,
							values, no))
					return -1;
			}
		}
	}
	return 0;
}

static int gen_local(struct rows *r, const struct cql_schema *s,
		     const struct cql_node_info *n)
{
	uint8_t version[16];
	cql_schema_version(s, version);
	struct cell *row = row_new(r);
	return !row || put_text(r, row, "key", "local") ||
			       put_text(r, row, "bootstrapped", "COMPLETED") ||
			       put_inet(r, row, "broadcast_address",
					&n->broadcast_address) ||
			       put_int(r, row, "broadcast_port",
				       n->broadcast_address.port) ||
			       put_text(r, row, "cluster_name",
					n->cluster_name) ||
			       put_text(r, row, "cql_version",
					CASSINI_CQL_VERSION) ||
			       put_text(r, row, "data_center", n->dc) ||
			       put_int(r, row, "gossip_generation",
				       n->gossip_generation) ||
			       put(r, row, "host_id", n->host_id, 16) ||
			       put_inet(r, row, "listen_address",
					&n->listen_address) ||
			       put_int(r, row, "listen_port",
				       n->listen_address.port) ||
			       put_text(r, row, "native_protocol_version",
					"4") ||
			       put_text(r, row, "partitioner",
					"org.apache.cassandra.dht."
					"Murmur3Partitioner") ||
			       put_text(r, row, "rack", n->rack) ||
			       put_text(r, row, "release_version",
					CASSINI_RELEASE_VERSION) ||
			       put_inet(r, row, "rpc_address",
					&n->rpc_address) ||
			       put_int(r, row, "rpc_port",
				       n->rpc_address.port) ||
			       put(r, row, "schema_version", version, 16) ||
			       put_tokens(r, row, n->tokens, n->token_count)
		       ? -1
		       : 0;
}

static int gen_peers(struct rows *r, const struct cql_node_info *n, bool v2)
{
	for (size_t i = 0; i < n->peer_count; i++) {
		const struct cql_peer_info *p = &n->peers[i];
		struct cell *row = row_new(r);
		int rc = !row || put_inet(r, row, "peer", &p->address) ||
			 put_text(r, row, "data_center", p->dc) ||
			 put(r, row, "host_id", p->host_id, 16) ||
			 put_text(r, row, "rack", p->rack) ||
			 put_text(r, row, "release_version",
				  p->release_version
					  ? p->release_version
					  : CASSINI_RELEASE_VERSION) ||
			 put(r, row, "schema_version", p->schema_version, 16) ||
			 put_tokens(r, row, p->tokens, p->token_count);
		if (!rc)
			rc = put_inet(r, row, "preferred_ip", &p->preferred);
		if (!rc && v2 && p->preferred.family != INET_NONE)
			rc = put_int(r, row, "preferred_port",
				     p->preferred.port);
		if (!rc && v2)
			rc = put_int(r, row, "peer_port", p->address.port) ||
			     put_inet(r, row, "native_address",
				      &p->native_address) ||
			     put_int(r, row, "native_port",
				     p->native_address.port);
		else if (!rc)
			rc = put_inet(r, row, "rpc_address",
				      &p->native_address);
		if (rc)
			return -1;
	}
	return 0;
}

static int put_bigint(struct rows *r, struct cell *row, const char *column,
		      int64_t v)
{
	uint8_t b[8];
	be64_store(b, (uint64_t)v);
	return put(r, row, column, b, 8);
}

/* system_virtual_schema.keyspaces and .tables, from the views registry
 * (columns are gen_columns' over it). */
static int gen_vkeyspaces(struct rows *r, const struct cql_schema *v,
			  const struct scope *sc)
{
	size_t end, i = scope_first(v, sc, &end);
	for (; i < end; i++) {
		struct cell *row = row_new(r);
		if (!row ||
		    put_text(r, row, "keyspace_name",
			     cql_keyspace_meta(cql_schema_keyspace_at(v, i))
				     ->name))
			return -1;
	}
	return 0;
}

const char *cql_view_comment(const char *ks, const char *table)
{
	static const struct {
		const char *ks, *table, *comment;
	} comments[] = {
		{"system_views", "settings", "current settings"},
		{"system_views", "clients", "currently connected clients"},
		{"system_views", "thread_pools", ""},
		{"system_views", "gossip_info",
		 "lists the gossip information for the cluster"},
		{"system_views", "pending_hints",
		 "Pending hints that this node has for other nodes"},
		{"system_views", "disk_usage", ""},
		{"system_views", "caches", "system caches"},
		{"system_views", "rows_per_read", ""},
		{"system_views", "tombstones_per_read", ""},
		{"system_views", "max_partition_size", ""},
		{"system_views", "local_read_latency", ""},
		{"system_views", "local_write_latency", ""},
		{"system_views", "coordinator_read_latency", ""},
		{"system_views", "coordinator_scan_latency", ""},
		{"system_views", "coordinator_write_latency", ""},
		{"system_views", "sstable_tasks", "current sstable tasks"},
		{"system_views", "internode_inbound", ""},
		{"system_views", "internode_outbound", ""},
		{"system_views", "repairs", "Repair summary"},
		{"system_views", "repair_sessions", "Repair session"},
		{"system_views", "local_scan_latency", ""},
		{"system_views", "sai_column_indexes",
		 "Storage-attached column index metadata"},
		{"system_virtual_schema", "keyspaces",
		 "virtual keyspace definitions"},
		{"system_virtual_schema", "tables",
		 "virtual table definitions"},
		{"system_virtual_schema", "columns",
		 "virtual column definitions"},
	};
	for (size_t i = 0; i < sizeof(comments) / sizeof(comments[0]); i++)
		if (strcmp(comments[i].ks, ks) == 0 &&
		    strcmp(comments[i].table, table) == 0)
			return comments[i].comment;
	return "";
}

static int gen_vtables(struct rows *r, const struct cql_schema *v,
		       const struct scope *sc)
{
	size_t end, i = scope_first(v, sc, &end);
	for (; i < end; i++) {
		struct scope_tables st =
			scope_tables(v, cql_schema_keyspace_at(v, i), sc);
		for (size_t j = 0; j < st.n; j++) {
			const struct storage_table_meta *m =
				cql_table_meta(scope_table_at(&st, j));
			struct cell *row = row_new(r);
			if (!row ||
			    put_text(r, row, "keyspace_name", m->keyspace) ||
			    put_text(r, row, "table_name", m->name) ||
			    put_text(r, row, "comment",
				     cql_view_comment(m->keyspace, m->name)))
				return -1;
		}
	}
	return 0;
}

static int gen_settings(struct rows *r, const struct cql_views_info *vi)
{
	for (size_t i = 0; i < vi->setting_count; i++) {
		struct cell *row = row_new(r);
		if (!row || put_text(r, row, "name", vi->settings[i].name) ||
		    put_text(r, row, "value", vi->settings[i].value))
			return -1;
	}
	return 0;
}

static int gen_clients(struct rows *r, const struct cql_views_info *vi)
{
	for (size_t i = 0; i < vi->client_count; i++) {
		const struct cql_server_client *c = &vi->clients[i];
		char host[64];
		struct cell *row = row_new(r);
		if (!row || put_inet(r, row, "address", &c->address) ||
		    put_int(r, row, "port", c->address.port) ||
		    put_text(r, row, "connection_stage", c->stage) ||
		    put_text(r, row, "driver_name", c->driver_name) ||
		    put_text(r, row, "driver_version", c->driver_version) ||
		    put_text(r, row, "username", c->user) ||
		    put_bigint(r, row, "request_count",
			       (int64_t)c->request_count) ||
		    put_bool(r, row, "ssl_enabled", c->ssl) ||
		    put_text(r, row, "ssl_protocol", c->ssl_protocol) ||
		    put_text(r, row, "ssl_cipher_suite", c->ssl_cipher_suite))
			return -1;
		/* InetSocketAddress.getHostString(): the address as text (no
		 * reverse lookup) */
		if (inet_addr_format_host(&c->address, host, sizeof(host)) &&
		    put_text(r, row, "hostname", host) != 0)
			return -1;
		if (c->version &&
		    put_int(r, row, "protocol_version", c->version) != 0)
			return -1;
	}
	return 0;
}

static int gen_thread_pools(struct rows *r, const struct cql_views_info *vi)
{
	for (size_t i = 0; i < vi->pool_count; i++) {
		const struct cql_thread_pool *p = &vi->pools[i];
		struct cell *row = row_new(r);
		if (!row || put_text(r, row, "name", p->name) ||
		    put_int(r, row, "active_tasks", p->active_tasks) ||
		    put_int(r, row, "active_tasks_limit",
			    p->active_tasks_limit) ||
		    put_int(r, row, "pending_tasks", p->pending_tasks) ||
		    put_bigint(r, row, "completed_tasks", p->completed_tasks) ||
		    put_bigint(r, row, "blocked_tasks", p->blocked_tasks) ||
		    put_bigint(r, row, "blocked_tasks_all_time",
			       p->blocked_tasks_all_time))
			return -1;
	}
	return 0;
}

/* ---- node-made views ------------------------------------------------------
 */

struct cql_view_rows {
	struct rows *r;
	struct cell *row; /* the row being set; NULL before the first */
};

int cql_view_row(struct cql_view_rows *b)
{
	b->row = row_new(b->r);
	return b->row ? 0 : -1;
}

static int view_put(struct cql_view_rows *b, const char *column, const void *p,
		    size_t len)
{
	if (!b->row)
		return err_set(ERR_INVALID, "internal: no row started");
	return put(b->r, b->row, column, p, len);
}

int cql_view_text(struct cql_view_rows *b, const char *column, const char *v)
{
	return v ? view_put(b, column, v, strlen(v)) : 0;
}

int cql_view_int(struct cql_view_rows *b, const char *column, int32_t v)
{
	uint8_t x[4];
	be32_store(x, (uint32_t)v);
	return view_put(b, column, x, 4);
}

int cql_view_bigint(struct cql_view_rows *b, const char *column, int64_t v)
{
	uint8_t x[8];
	be64_store(x, (uint64_t)v);
	return view_put(b, column, x, 8);
}

int cql_view_timestamp(struct cql_view_rows *b, const char *column, int64_t ms)
{
	return cql_view_bigint(b, column, ms);
}

int cql_view_bool(struct cql_view_rows *b, const char *column, bool v)
{
	uint8_t x = v ? 1 : 0;
	return view_put(b, column, &x, 1);
}

int cql_view_double(struct cql_view_rows *b, const char *column, double v)
{
	uint64_t bits;
	memcpy(&bits, &v, 8);
	return cql_view_bigint(b, column, (int64_t)bits);
}

int cql_view_inet(struct cql_view_rows *b, const char *column,
		  const struct inet_addr *a)
{
	if (!b->row)
		return err_set(ERR_INVALID, "internal: no row started");
	return put_inet(b->r, b->row, column, a);
}

int cql_view_uuid(struct cql_view_rows *b, const char *column,
		  const uint8_t id[16])
{
	return view_put(b, column, id, 16);
}

int cql_view_bytes(struct cql_view_rows *b, const char *column, const void *v,
		   size_t len)
{
	return view_put(b, column, len ? v : "", len);
}

/* Primary-key order: the key columns by their type's comparator, as a
 * virtual table's LocalPartitioner orders partitions. */
static int key_cmp(const struct storage_table_meta *m, const struct cell *a,
		   const struct cell *b)
{
	for (int part = 0; part < 2; part++) {
		const uint16_t *cols = part ? m->ck : m->pk;
		size_t n = part ? m->ck_count : m->pk_count;
		for (size_t i = 0; i < n; i++) {
			const struct cell *x = &a[cols[i]], *y = &b[cols[i]];
			if (x->len < 0 || y->len < 0) {
				if ((x->len < 0) != (y->len < 0))
					return x->len < 0 ? -1 : 1;
				continue;
			}
			int c = storage_type_cmp(m->columns[cols[i]].type,
						 x->ptr, (size_t)x->len, y->ptr,
						 (size_t)y->len);
			if (c)
				return c;
		}
	}
	return 0;
}

static void sort_rows(struct rows *r)
{
	const struct storage_table_meta *m = cql_table_meta(r->table);
	/* insertion sort: a node's views hold tens to a few thousand rows */
	for (size_t i = 1; i < r->count; i++) {
		struct cell *row = r->rows[i];
		size_t j = i;
		while (j > 0 && key_cmp(m, r->rows[j - 1], row) > 0) {
			r->rows[j] = r->rows[j - 1];
			j--;
		}
		r->rows[j] = row;
	}
}

/* Rows of a virtual keyspace's table; sorted by key as Cassandra's
 * (settings and thread_pools by name: the node gives them sorted). */
static int generate_view(struct rows *r, const struct cql_schema *v,
			 const struct cql_views_info *vi, const char *ks,
			 const char *table, const struct scope *sc)
{
	if (strcmp(ks, "system_virtual_schema") == 0) {
		if (strcmp(table, "keyspaces") == 0)
			return gen_vkeyspaces(r, v, sc);
		if (strcmp(table, "tables") == 0)
			return gen_vtables(r, v, sc);
		return gen_columns(r, v, false, sc);
	}
	if (!vi)
		return 0;
	if (strcmp(table, "settings") == 0)
		return gen_settings(r, vi);
	if (strcmp(table, "clients") == 0)
		return gen_clients(r, vi);
	if (strcmp(table, "thread_pools") == 0)
		return gen_thread_pools(r, vi);
	if (!vi->table_rows)
		return 0;
	struct cql_view_rows b = {.r = r};
	if (vi->table_rows(vi->table_arg, table, &b) != 0)
		return -1;
	sort_rows(r);
	return 0;
}

static int generate(struct rows *r, const struct cql_schema *s,
		    const struct cql_node_info *n,
		    const struct cql_views_info *vi, const char *ks,
		    const char *table, const struct scope *sc)
{
	if (strcmp(ks, "system") == 0 && strcmp(table, "IndexInfo") == 0) {
		/* the node's index build states */
		if (!vi || !vi->table_rows)
			return 0;
		struct cql_view_rows b = {.r = r};
		if (vi->table_rows(vi->table_arg, table, &b) != 0)
			return -1;
		sort_rows(r);
		return 0;
	}
	if (strcmp(ks, "system_schema") == 0) {
		if (strcmp(table, "keyspaces") == 0)
			return gen_keyspaces(r, s, sc);
		if (strcmp(table, "tables") == 0)
			return gen_tables(r, s, sc);
		if (strcmp(table, "columns") == 0)
			return gen_columns(r, s, false, sc);
		if (strcmp(table, "dropped_columns") == 0)
			return gen_columns(r, s, true, sc);
		if (strcmp(table, "types") == 0)
			return gen_types(r, s, sc);
		if (strcmp(table, "indexes") == 0)
			return gen_indexes(r, s, sc);
		return 0; /* functions, aggregates, ...: empty */
	}
	if (strcmp(table, "local") == 0)
		return gen_local(r, s, n);
	if (strcmp(table, "peers") == 0)
		return gen_peers(r, n, false);
	if (strcmp(table, "peers_v2") == 0)
		return gen_peers(r, n, true);
	return 0;
}

/* ---- SELECT -------------------------------------------------------------- */

bool cql_system_keyspace_is_view(const char *ks)
{
	return strcmp(ks, "system_views") == 0 ||
	       strcmp(ks, "system_virtual_schema") == 0;
}

bool cql_system_keyspace_is_virtual(const char *ks)
{
	return strcmp(ks, "system") == 0 || strcmp(ks, "system_schema") == 0 ||
	       cql_system_keyspace_is_view(ks);
}

/* A system table: in the views registry for the virtual keyspaces. */
static const struct cql_table *system_table(const struct cql_schema *schema,
					    const struct cql_schema *views,
					    const char *ks, const char *name)
{
	if (!ks)
		return NULL;
	if (cql_system_keyspace_is_view(ks))
		return views ? cql_schema_table(views, ks, name) : NULL;
	return cql_schema_table(schema, ks, name);
}

struct sel_col {
	int column;
	const char *name;
};

static int select_error(struct buf *out, uint8_t version, int16_t stream,
			uint32_t code, const char *msg)
{
	return cql_encode_error(out, version, stream, code, msg);
}

/* The value a relation compares with, serialized for column `c`. */
static int relation_value(struct arena *a, const struct cql_term *t,
			  const struct storage_column *c,
			  const struct cql_value *binds, size_t nbinds,
			  struct cell *out)
{
	if (t->kind == CQL_TERM_BIND) {
		if ((size_t)t->bind_index >= nbinds)
			return err_set(ERR_INVALID,
				       "There were %zu markers(?) in "
				       "CQL but %zu bound variables",
				       (size_t)t->bind_index + 1, nbinds);
		const struct cql_value *v = &binds[t->bind_index];
		*out = (struct cell){v->ptr, v->len < 0 ? -1 : v->len};
		return 0;
	}
	struct buf b;
	struct cql_timeuuid_gen g;
	struct cql_fn_ctx fn = {.timeuuids = &g};
	cql_timeuuid_gen_init(&g, 0);
	buf_init(&b);
	int rc = cql_term_serialize(t, c->type, c->name, &fn, NULL, &b);
	if (rc < 0) {
		buf_free(&b);
		return -1;
	}
	out->len = rc == 1 ? -1 : (int32_t)b.len;
	out->ptr =
		arena_memdup(a, b.data ? b.data : (const uint8_t *)"", b.len);
	buf_free(&b);
	return out->ptr || out->len <= 0 ? 0 : -1;
}

static bool cell_eq(const struct cell *a, const struct cell *b)
{
	if (a->len < 0 || b->len < 0)
		return false;
	return a->len == b->len && memcmp(a->ptr, b->ptr, (size_t)a->len) == 0;
}

/* The text an equality relation on `column` compares with, into buf
 * (cap bytes); 0 when there is none to use (absent, IN, not text), 1 when
 * found, -1 when no name can equal it (null, too long). */
static int eq_text(const struct cql_select *q, const char *column,
		   const struct cql_value *binds, size_t nbinds, char *buf,
		   size_t cap)
{
	for (size_t i = 0; i < q->where_count; i++) {
		const struct cql_relation *rel = &q->where[i];
		if (rel->kind != CQL_REL_COLUMN || rel->op != CQL_OP_EQ ||
		    strcmp(rel->columns[0], column) != 0)
			continue;
		const struct cql_term *t = rel->value;
		const void *p;
		size_t len;
		if (t->kind == CQL_TERM_STRING) {
			p = t->text;
			len = t->len;
		} else if (t->kind == CQL_TERM_BIND &&
			   (size_t)t->bind_index < nbinds) {
			const struct cql_value *v = &binds[t->bind_index];
			if (v->len < 0)
				return -1;
			p = v->ptr;
			len = (size_t)v->len;
		} else {
			return 0;
		}
		if (len >= cap)
			return -1;
		memcpy(buf, p, len);
		buf[len] = 0;
		return 1;
	}
	return 0;
}

static void scope_of(const struct cql_select *q, const struct cql_value *binds,
		     size_t nbinds, struct scope *sc)
{
	memset(sc, 0, sizeof(*sc));
	int k = eq_text(q, "keyspace_name", binds, nbinds, sc->ks_buf,
			sizeof(sc->ks_buf));
	int t = eq_text(q, "table_name", binds, nbinds, sc->table_buf,
			sizeof(sc->table_buf));
	sc->none = k < 0 || t < 0;
	sc->ks = k > 0 ? sc->ks_buf : NULL;
	sc->table = t > 0 ? sc->table_buf : NULL;
}

/* Filters r->rows in place by the WHERE clause. */
static int apply_where(struct rows *r, const struct cql_select *q,
		       const struct cql_value *binds, size_t nbinds)
{
	const struct storage_table_meta *m = cql_table_meta(r->table);
	for (size_t i = 0; i < q->where_count; i++) {
		const struct cql_relation *rel = &q->where[i];
		if (rel->kind != CQL_REL_COLUMN ||
		    (rel->op != CQL_OP_EQ && rel->op != CQL_OP_IN))
			return err_set(ERR_INVALID,
				       "Only = and IN relations are supported "
				       "on system tables");
		int c = cql_table_column(r->table, rel->columns[0]);
		if (c < 0)
			return err_set(
				ERR_INVALID,
				"Undefined column name %s in table %s.%s",
				rel->columns[0], m->keyspace, m->name);
		const struct cql_term *const *vals =
			(const struct cql_term *const *)&rel->value;
		size_t nvals = 1;
		if (rel->op == CQL_OP_IN) {
			if (rel->value->kind != CQL_TERM_TUPLE)
				return err_set(ERR_INVALID,
					       "IN with a bound list is not "
					       "supported on system tables");
			vals = (const struct cql_term *const *)
				       rel->value->items;
			nvals = rel->value->count;
		}
		struct cell *want =
			arena_alloc(r->a, (nvals ? nvals : 1) * sizeof(*want));
		if (!want)
			return -1;
		for (size_t v = 0; v < nvals; v++)
			if (relation_value(r->a, vals[v], &m->columns[c], binds,
					   nbinds, &want[v]) != 0)
				return -1;
		size_t kept = 0;
		for (size_t row = 0; row < r->count; row++) {
			bool match = false;
			for (size_t v = 0; v < nvals && !match; v++)
				match = cell_eq(&r->rows[row][c], &want[v]);
			if (match)
				r->rows[kept++] = r->rows[row];
		}
		r->count = kept;
	}
	return 0;
}

/* Columns of SELECT *: partition key, clustering, then the rest by name. */
static size_t star_columns(struct arena *a, const struct cql_table *t,
			   struct sel_col **out)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	struct sel_col *cols =
		arena_alloc(a, (m->column_count + 1) * sizeof(*cols));
	size_t n = 0;
	if (!cols)
		return 0;
	for (size_t i = 0; i < m->pk_count; i++)
		cols[n++] =
			(struct sel_col){m->pk[i], m->columns[m->pk[i]].name};
	for (size_t i = 0; i < m->ck_count; i++)
		cols[n++] =
			(struct sel_col){m->ck[i], m->columns[m->ck[i]].name};
	size_t first = n;
	for (size_t c = 0; c < m->column_count; c++) {
		uint8_t kind = m->columns[c].kind;
		if (kind == STORAGE_COLUMN_PARTITION_KEY ||
		    kind == STORAGE_COLUMN_CLUSTERING ||
		    cql_table_column_dropped(t, c))
			continue;
		size_t p = n++;
		while (p > first &&
		       strcmp(cols[p - 1].name, m->columns[c].name) > 0) {
			cols[p] = cols[p - 1];
			p--;
		}
		cols[p] = (struct sel_col){(int)c, m->columns[c].name};
	}
	*out = cols;
	return n;
}

/* The columns a SELECT on system table `t` returns, in order. */
static int select_columns(struct arena *a, const struct cql_table *t,
			  const struct cql_select *q, const char *ks,
			  struct sel_col **out, size_t *nout)
{
	size_t ncols = 0;
	struct sel_col *cols = NULL;
	if (q->star) {
		ncols = star_columns(a, t, &cols);
		if (!cols)
			return err_set(ERR_NOMEM, "out of memory");
		*out = cols;
		*nout = ncols;
		return 0;
	}
	cols = arena_alloc(a, (q->selector_count + 1) * sizeof(*cols));
	if (!cols)
		return err_set(ERR_NOMEM, "out of memory");
	for (size_t i = 0; i < q->selector_count; i++) {
		const struct cql_selector *s = &q->selectors[i];
		if (s->kind != CQL_SEL_COLUMN)
			return err_set(ERR_INVALID,
				       "Only column selections are "
				       "supported on system tables");
		int c = cql_table_column(t, s->name);
		if (c < 0)
			return err_set(ERR_INVALID,
				       "Undefined column name %s in table "
				       "%s.%s",
				       s->name, ks, q->table.name);
		cols[ncols++] =
			(struct sel_col){c, s->alias ? s->alias : s->name};
	}
	*out = cols;
	*nout = ncols;
	return 0;
}

static struct cql_column_spec *specs_of(struct arena *a,
					const struct cql_table *t,
					const struct sel_col *cols,
					size_t ncols)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	struct cql_column_spec *specs =
		arena_alloc(a, (ncols ? ncols : 1) * sizeof(*specs));
	for (size_t i = 0; specs && i < ncols; i++) {
		specs[i].keyspace = m->keyspace;
		specs[i].table = m->name;
		specs[i].name = cols[i].name;
		if (!(specs[i].type = cql_type_option_of(
			      a, m->columns[cols[i].column].type)))
			return NULL;
	}
	return specs;
}

int cql_system_select_specs(struct arena *a, const struct cql_schema *schema,
			    const struct cql_schema *views,
			    const struct cql_select *q, const char *keyspace,
			    struct cql_column_spec **specs, size_t *n)
{
	const char *ks = q->table.keyspace ? q->table.keyspace : keyspace;
	const struct cql_table *t =
		system_table(schema, views, ks, q->table.name);
	struct sel_col *cols = NULL;
	size_t ncols = 0;
	if (!t)
		return err_set(ERR_INVALID, "unconfigured table %s",
			       q->table.name);
	if (select_columns(a, t, q, ks, &cols, &ncols) != 0)
		return -1;
	*specs = specs_of(a, t, cols, ncols);
	*n = ncols;
	return *specs ? 0 : err_set(ERR_NOMEM, "out of memory");
}

static int encode_rows(struct buf *out, struct rows *r,
		       const struct sel_col *cols, size_t ncols, size_t limit,
		       uint8_t version, int16_t stream)
{
	struct cql_column_spec *specs = specs_of(r->a, r->table, cols, ncols);
	if (!specs)
		return -1;
	size_t n = r->count < limit ? r->count : limit;
	long start = cql_frame_begin(out, version, 0, stream, CQL_OP_RESULT);
	if (start < 0)
		return -1;
	int rc = cql_write_int(out, CQL_RESULT_ROWS) ||
		 cql_write_rows_metadata(out, specs, ncols, NULL, false) ||
		 cql_write_int(out, (int32_t)n);
	for (size_t i = 0; rc == 0 && i < n; i++)
		for (size_t c = 0; rc == 0 && c < ncols; c++) {
			const struct cell *cell = &r->rows[i][cols[c].column];
			rc = cql_write_bytes(out, cell->ptr, cell->len);
		}
	if (rc) {
		out->len = (size_t)start;
		return -1;
	}
	cql_frame_end(out, start);
	return 0;
}

int cql_system_select(const struct cql_schema *schema,
		      const struct cql_schema *views,
		      const struct cql_views_info *vi,
		      const struct cql_node_info *node,
		      const struct cql_select *q, const char *keyspace,
		      const struct cql_value *binds, size_t bind_count,
		      uint8_t version, int16_t stream, struct buf *out)
{
	char msg[256];
	const char *ks = q->table.keyspace ? q->table.keyspace : keyspace;
	const struct cql_table *t =
		system_table(schema, views, ks, q->table.name);
	if (!t) {
		snprintf(msg, sizeof(msg), "unconfigured table %s",
			 q->table.name);
		return select_error(out, version, stream, CQL_ERR_INVALID, msg);
	}
	struct arena a;
	arena_create(&a, 0);
	struct rows r = {
		.a = &a, .table = t, .ncols = cql_table_meta(t)->column_count};
	struct sel_col *cols = NULL;
	size_t ncols = 0;
	size_t limit = SIZE_MAX;
	struct scope sc;
	scope_of(q, binds, bind_count, &sc);
	int rc = cql_system_keyspace_is_view(ks)
			 ? generate_view(&r, views, vi, ks, q->table.name, &sc)
			 : generate(&r, schema, node, vi, ks, q->table.name,
				    &sc);
	if (rc == 0)
		rc = apply_where(&r, q, binds, bind_count);
	if (rc == 0)
		rc = select_columns(&a, t, q, ks, &cols, &ncols);
	if (rc == 0 && q->limit) {
		if (q->limit->kind == CQL_TERM_INTEGER && !q->limit->negative)
			limit = strtoull(q->limit->text, NULL, 10);
		else if (q->limit->kind == CQL_TERM_BIND &&
			 (size_t)q->limit->bind_index < bind_count &&
			 binds[q->limit->bind_index].len == 4)
			limit = be32_load(binds[q->limit->bind_index].ptr);
		if (limit == 0)
			rc = err_set(ERR_INVALID,
				     "LIMIT must be strictly positive");
	}
	if (rc == 0)
		rc = encode_rows(out, &r, cols, ncols, limit, version, stream);
	else if (err_code() != ERR_NOMEM) {
		snprintf(msg, sizeof(msg), "%s", err_msg());
		rc = select_error(out, version, stream, CQL_ERR_INVALID, msg);
	}
	arena_destroy(&a);
	return rc;
}
