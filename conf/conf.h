/*
 * Node configuration: node.yaml (Cassandra's cassandra.yaml key names) and
 * rackdc.properties (cassandra-rackdc.properties: dc=, rack=).
 *
 * Every key is described once in conf_keys.c (type, default, range, doc);
 * docs/configuration.md documents the same table. Loading is strict: an
 * unknown key, a duplicate, a value of the wrong type or out of range is an
 * error naming the file, the line and the key. Durations take Cassandra's
 * units (`10000ms`, `10s`, `3h`), sizes `B/KiB/MiB/GiB`, rates `KiB/s`...;
 * the pre-4.1 names with a unit suffix (`max_hint_window_in_ms: 10800000`)
 * are accepted too, as Cassandra accepts them.
 *
 * A section (`repair_scheduler:`) is a mapping whose keys are in the table
 * as `section.key`.
 *
 * Relative paths are resolved against the node's home: the parent of the
 * configuration directory, as $CASSANDRA_HOME is for conf/.
 */
#ifndef CASSINI_CONF_CONF_H
#define CASSINI_CONF_CONF_H

#include "common/inet.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum conf_commitlog_sync {
	CONF_COMMITLOG_SYNC_PERIODIC = 0,
	CONF_COMMITLOG_SYNC_BATCH,
	CONF_COMMITLOG_SYNC_GROUP,
};

enum conf_failure_policy {
	CONF_POLICY_STOP = 0,
	CONF_POLICY_DIE,
	CONF_POLICY_STOP_COMMIT,
	CONF_POLICY_BEST_EFFORT,
	CONF_POLICY_IGNORE,
};

enum conf_snitch {
	CONF_SNITCH_SIMPLE = 0,
	CONF_SNITCH_GOSSIPING_PROPERTY_FILE,
};

/* server_encryption_options.internode_encryption */
enum conf_internode_encryption {
	CONF_INTERNODE_NONE = 0,
	CONF_INTERNODE_ALL,
	CONF_INTERNODE_DC,
	CONF_INTERNODE_RACK,
};

/* client_/server_encryption_options.store_type */
enum conf_store_type {
	CONF_STORE_PEM = 0,
	CONF_STORE_PKCS12,
	CONF_STORE_JKS, /* named to be refused with how to convert */
};

enum conf_authenticator {
	CONF_AUTH_ALLOW_ALL = 0,
	CONF_AUTH_PASSWORD,
};

enum conf_authorizer {
	CONF_AUTHZ_ALLOW_ALL = 0,
	CONF_AUTHZ_CASSANDRA,
};

struct conf_string_list {
	char **items;
	size_t count;
};

struct conf {
	/* identity and ring */
	char *cluster_name;
	char *partitioner;
	int64_t num_tokens;
	char *initial_token; /* comma-separated tokens, or NULL */
	int64_t allocate_tokens_for_local_replication_factor;

	/* addresses and ports (after conf_load every address is set, with
	 * its port; the interfaces are resolved into the addresses) */
	struct inet_addr listen_address; /* bind; port = storage_port */
	char *listen_interface;
	bool listen_interface_prefer_ipv6;
	/* What peers are told and connect to: this node's identity in
	 * gossip, handshakes and the ring. */
	struct inet_addr broadcast_address; /* port = storage_port */
	bool listen_on_broadcast_address;
	struct inet_addr rpc_address; /* bind; port = native_transport_port */
	char *rpc_interface;
	bool rpc_interface_prefer_ipv6;
	/* What clients are told: system.local, system.peers(_v2), events. */
	struct inet_addr broadcast_rpc_address;
	struct inet_addr admin_address;   /* port = admin_port */
	struct inet_addr metrics_address; /* port = metrics_port (0: off) */
	int64_t storage_port;
	int64_t native_transport_port;
	int64_t admin_port;
	int64_t metrics_port;
	char *seed_list;         /* seed_provider's seeds, as written */
	struct inet_addr *seeds; /* parsed seed_list */
	size_t seed_count;

	/* directories (absolute after loading) */
	struct conf_string_list data_file_directories;
	char *commitlog_directory;
	char *hints_directory;
	char *saved_caches_directory;
	char *log_directory;
	int64_t log_level; /* enum log_level */

	/* commitlog and disks */
	int64_t commitlog_sync; /* enum conf_commitlog_sync */
	uint64_t commitlog_sync_period_ms;
	uint64_t commitlog_sync_group_window_ms;
	uint64_t commitlog_segment_size;
	uint64_t commitlog_total_space;
	int64_t commit_failure_policy; /* enum conf_failure_policy */
	int64_t disk_failure_policy;   /* enum conf_failure_policy */
	int64_t disk_access_mode;      /* enum storage_disk_access */

	/* memtables, compaction, reads */
	uint64_t memtable_heap_space;
	double memtable_cleanup_threshold;
	int64_t memtable_flush_writers;
	int64_t concurrent_compactors;
	uint64_t compaction_throughput; /* bytes per second, 0 = unthrottled */
	uint64_t stream_throughput_outbound; /* bytes per second, 0: off */
	double bloom_filter_fp_chance;
	int64_t tombstone_warn_threshold;
	int64_t tombstone_failure_threshold;
	/* replica_filtering_protection: */
	int64_t rfp_cached_rows_warn_threshold;
	int64_t rfp_cached_rows_fail_threshold;

	/* gossip and failure detection */
	double phi_convict_threshold;
	uint64_t gossip_interval_ms;
	bool auto_bootstrap;
	uint64_t ring_delay_ms;
	int64_t endpoint_snitch; /* enum conf_snitch */
	uint64_t internode_max_message_size;
	uint64_t internode_tcp_connect_timeout_ms;

	/* coordinator */
	uint64_t read_request_timeout_ms;
	uint64_t slow_query_log_timeout_ms; /* 0: off */
	uint64_t write_request_timeout_ms;
	uint64_t range_request_timeout_ms;
	uint64_t truncate_request_timeout_ms;
	uint64_t cas_contention_timeout_ms;
	/* lightweight transactions (docs/lwt.md) */
	bool paxos_repair_enabled;
	bool skip_paxos_repair_on_topology_change;
	struct conf_string_list skip_paxos_repair_on_topology_change_keyspaces;
	int64_t paxos_state_purging; /* CONF_PAXOS_PURGING_LEGACY, the only one
				      */
	uint64_t batch_size_warn_threshold;
	uint64_t batch_size_fail_threshold;
	int64_t unlogged_batch_across_partitions_warn_threshold;

	/* hints */
	bool hinted_handoff_enabled;
	struct conf_string_list hinted_handoff_disabled_datacenters;
	uint64_t max_hint_window_ms;
	uint64_t hinted_handoff_throttle; /* bytes per second */
	uint64_t max_hints_size_per_host; /* 0 = unlimited */
	int64_t max_hints_delivery_threads;

	/* client protocol */
	uint64_t native_transport_max_frame_size;
	int64_t native_transport_max_concurrent_connections; /* -1 = unlimited
							      */
	uint64_t native_transport_idle_timeout_ms;           /* 0 = never */
	/* TLS for clients (Cassandra's client_encryption_options, PEM or
	 * PKCS#12) */
	struct conf_client_encryption {
		bool enabled;
		bool optional;  /* plain and TLS clients on the same port */
		char *keystore; /* private key and certificate chain */
		char *keystore_password;
		char *truststore; /* CAs client certificates chain to */
		char *truststore_password; /* PKCS#12 only: PEM has none */
		bool require_client_auth;
		struct conf_string_list accepted_protocols;
		struct conf_string_list cipher_suites;
		int64_t store_type; /* enum conf_store_type */
	} client_encryption;
	/* TLS on the admin port (Cassandra 5.0's jmx_encryption_options,
	 * the same keys as client_encryption_options but `optional`) */
	struct conf_client_encryption jmx_encryption;
	/* TLS between nodes (Cassandra's server_encryption_options, PEM or
	 * PKCS#12) */
	struct conf_server_encryption {
		int64_t internode_encryption; /* enum conf_internode_encryption
					       */
		bool optional; /* plaintext peers accepted too (rolling) */
		char *keystore;
		char *keystore_password;
		char *truststore;
		char *truststore_password; /* PKCS#12 only: PEM has none */
		bool require_client_auth;
		bool require_endpoint_verification;
		char *protocol; /* "TLS", or one version */
		struct conf_string_list accepted_protocols;
		struct conf_string_list cipher_suites;
		int64_t store_type; /* enum conf_store_type */
	} server_encryption;
	/* How often the two sections' keystore and truststore files are
	 * checked for new certificates (Cassandra's fixed 600 s); 0: never. */
	uint64_t ssl_hot_reload_period_ms;

	/* authentication and roles (docs/security.md) */
	int64_t authenticator; /* enum conf_authenticator */
	int64_t authorizer;    /* enum conf_authorizer */
	uint64_t permissions_validity_ms, permissions_update_interval_ms;
	int64_t permissions_cache_max_entries;
	uint64_t roles_validity_ms, roles_update_interval_ms;
	uint64_t credentials_validity_ms, credentials_update_interval_ms;
	int64_t credentials_cache_max_entries;
	int64_t role_manager; /* CassandraRoleManager only */
	int64_t auth_bcrypt_gensalt_log2_rounds;
	uint64_t superuser_setup_delay_ms;

	/* repair */
	uint64_t repair_session_space;
	struct conf_repair_scheduler {
		bool enabled;
		double intensity;
		int64_t partitions_per_segment;
		uint64_t bytes_per_segment;
		int64_t segments_per_node;
		uint64_t segment_timeout_ms;
		int64_t segment_retries;
		uint64_t retry_delay_ms;
		struct conf_string_list windows; /* "HH:MM-HH:MM", UTC */
		double gc_grace_fraction;
		uint64_t min_cycle_interval_ms;
		uint64_t check_interval_ms;
		uint64_t initial_delay_ms;
		struct conf_string_list tables; /* "ks.table key=value ..." */
	} repair_scheduler;

	/* test clusters */
	bool test_fault_injection;

	/* rackdc.properties */
	char *dc;
	char *rack;
	bool prefer_local;
	char *dc_suffix;

	/* where it came from */
	char *conf_dir;
	char *home_dir;
};

/* Fills every key with its default. The strings are owned by `c`. */
int conf_init_defaults(struct conf *c);
/* Whether the internode port sets up TLS: encryption on, or `none` with
 * `optional` and a keystore (TLS peers accepted while connecting out in
 * plaintext: the first step of enabling TLS on a running cluster). */
bool conf_internode_tls_set_up(const struct conf_server_encryption *se);
void conf_free(struct conf *c);

/*
 * Loads CONF_DIR/node.yaml and CONF_DIR/rackdc.properties into `c`.
 * On failure returns -1; err_msg() is one line naming file, line and key.
 */
int conf_load(struct conf *c, const char *conf_dir);

/*
 * Parses node.yaml text over the current values of `c` (defaults first).
 * `name` appears in error messages. Paths are left as written; conf_load
 * resolves them. Exposed for tests and the fuzzer.
 */
int conf_parse_yaml(struct conf *c, const char *name, const uint8_t *text,
		    size_t len);

/* Parses rackdc.properties text into `c`. */
int conf_parse_rackdc(struct conf *c, const char *name, const char *text,
		      size_t len);

/* Cassandra's unit forms; exposed for other parsers (CQL options, tools). */
int conf_parse_duration_ms(const char *text, uint64_t *out_ms);
int conf_parse_size(const char *text, uint64_t *out_bytes);
int conf_parse_rate(const char *text, uint64_t *out_bytes_per_sec);

/* Iteration over the documented key table, for docs and `--help-config`. */
struct conf_key_doc {
	const char *name;
	const char *type;
	const char *default_text;
	const char *range_text;
	const char *doc;
};
size_t conf_key_count(void);
const struct conf_key_doc *conf_key_doc_at(size_t index);
/* The effective value of key `index` (conf_key_doc_at's order) as text, in
 * the file's forms ("10s", "4MiB", "true", comma-separated lists), into
 * dst; NULL when the key has no value (an unset address or string). */
const char *conf_value_text(const struct conf *c, size_t index, char *dst,
			    size_t cap);

enum { CONF_PAXOS_PURGING_LEGACY = 0 };

#endif
