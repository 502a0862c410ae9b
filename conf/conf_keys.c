/*
 * Every node.yaml key: name, type, default, range and one line of doc.
 * docs/configuration.md is this table in prose; keep the two together.
 * Defaults are text and go through the same parser as the file, so a default
 * can never be something the file could not say.
 */
#include "conf/conf_internal.h"

#include <float.h>
#include <stdint.h>

#define OFF(field) offsetof(struct conf, field)
#define KiB        1024.0
#define MiB        (1024.0 * 1024.0)
#define GiB        (1024.0 * 1024.0 * 1024.0)
#define HOUR_MS    (3600.0 * 1000.0)
#define DAY_MS     (24.0 * HOUR_MS)

static const struct conf_enum_name commitlog_sync_names[] = {
	{"periodic", CONF_COMMITLOG_SYNC_PERIODIC},
	{"batch", CONF_COMMITLOG_SYNC_BATCH},
	{"group", CONF_COMMITLOG_SYNC_GROUP},
	{NULL, 0}};
static const struct conf_enum_name commit_policy_names[] = {
	{"stop", CONF_POLICY_STOP},
	{"die", CONF_POLICY_DIE},
	{"stop_commit", CONF_POLICY_STOP_COMMIT},
	{"ignore", CONF_POLICY_IGNORE},
	{NULL, 0}};
static const struct conf_enum_name disk_policy_names[] = {
	{"stop", CONF_POLICY_STOP},
	{"die", CONF_POLICY_DIE},
	{"best_effort", CONF_POLICY_BEST_EFFORT},
	{"ignore", CONF_POLICY_IGNORE},
	{NULL, 0}};
/* storage's enum storage_disk_access */
static const struct conf_enum_name disk_access_names[] = {
	{"auto", 3},
	{"mmap", 0},
	{"mmap_index_only", 1},
	{"standard", 2},
	{NULL, 0}};
static const struct conf_enum_name snitch_names[] = {
	{"SimpleSnitch", CONF_SNITCH_SIMPLE},
	{"GossipingPropertyFileSnitch", CONF_SNITCH_GOSSIPING_PROPERTY_FILE},
	{NULL, 0}};
/* Cassandra takes the short names and the full class names. */
static const struct conf_enum_name authenticator_names[] = {
	{"AllowAllAuthenticator", CONF_AUTH_ALLOW_ALL},
	{"org.apache.cassandra.auth.AllowAllAuthenticator",
	 CONF_AUTH_ALLOW_ALL},
	{"PasswordAuthenticator", CONF_AUTH_PASSWORD},
	{"org.apache.cassandra.auth.PasswordAuthenticator", CONF_AUTH_PASSWORD},
	{NULL, 0}};
static const struct conf_enum_name internode_encryption_names[] = {
	{"none", CONF_INTERNODE_NONE},
	{"all", CONF_INTERNODE_ALL},
	{"dc", CONF_INTERNODE_DC},
	{"rack", CONF_INTERNODE_RACK},
	{NULL, 0}};
static const struct conf_enum_name store_type_names[] = {
	{"PEM", CONF_STORE_PEM},
	{"PKCS12", CONF_STORE_PKCS12},
	{"JKS", CONF_STORE_JKS},
	{NULL, 0}};
static const struct conf_enum_name authorizer_names[] = {
	{"AllowAllAuthorizer", CONF_AUTHZ_ALLOW_ALL},
	{"org.apache.cassandra.auth.AllowAllAuthorizer", CONF_AUTHZ_ALLOW_ALL},
	{"CassandraAuthorizer", CONF_AUTHZ_CASSANDRA},
	{"org.apache.cassandra.auth.CassandraAuthorizer", CONF_AUTHZ_CASSANDRA},
	{NULL, 0}};
static const struct conf_enum_name role_manager_names[] = {
	{"CassandraRoleManager", 0},
	{"org.apache.cassandra.auth.CassandraRoleManager", 0},
	{NULL, 0}};
/* Cassandra 4.1 also has gc_grace and repaired: refused (docs/lwt.md). */
static const struct conf_enum_name paxos_state_purging_names[] = {
	{"legacy", CONF_PAXOS_PURGING_LEGACY}, {NULL, 0}};
/* Values match enum log_level in common/log.h. */
static const struct conf_enum_name log_level_names[] = {
	{"error", 0}, {"warn", 1},  {"info", 2},
	{"debug", 3}, {"trace", 4}, {NULL, 0}};

const struct conf_key conf_keys[] = {
	/* identity and ring */
	{"cluster_name", CONF_T_STRING, OFF(cluster_name), "Test Cluster", 0, 0,
	 NULL,
	 "Name of the cluster; nodes with another name are refused, and "
	 "a data directory created for another cluster is refused."},
	{"partitioner", CONF_T_STRING, OFF(partitioner),
	 "org.apache.cassandra.dht.Murmur3Partitioner", 0, 0, NULL,
	 "Only Murmur3Partitioner is supported."},
	{"num_tokens", CONF_T_INT, OFF(num_tokens), "16", 1, 1536, NULL,
	 "Virtual nodes (tokens) this node owns."},
	{"initial_token", CONF_T_STRING, OFF(initial_token), "", 0, 0, NULL,
	 "Comma-separated tokens for the first start; their count must equal "
	 "num_tokens. Empty: allocate."},
	{"allocate_tokens_for_local_replication_factor", CONF_T_INT,
	 OFF(allocate_tokens_for_local_replication_factor), "3", 1, 32, NULL,
	 "Replication factor the token allocator balances for in this DC."},

	/* addresses and ports */
	{"listen_address", CONF_T_HOST, OFF(listen_address), "", 0, 0, NULL,
	 "Address internode traffic and gossip bind to. Numeric; not a "
	 "wildcard. Empty: listen_interface's address, else 127.0.0.1."},
	{"listen_interface", CONF_T_STRING, OFF(listen_interface), "", 0, 0,
	 NULL,
	 "Network interface whose address is the listen address (its first "
	 "IPv4 address, or IPv6 with listen_interface_prefer_ipv6). Not with "
	 "listen_address."},
	{"listen_interface_prefer_ipv6", CONF_T_BOOL,
	 OFF(listen_interface_prefer_ipv6), "false", 0, 0, NULL,
	 "Take listen_interface's first IPv6 address rather than its first "
	 "IPv4 one (either way the other family when it has only that)."},
	{"broadcast_address", CONF_T_HOST, OFF(broadcast_address), "", 0, 0,
	 NULL,
	 "Address other nodes are told and connect to (a public address "
	 "behind NAT). Not a wildcard. Empty: the listen address."},
	{"listen_on_broadcast_address", CONF_T_BOOL,
	 OFF(listen_on_broadcast_address), "false", 0, 0, NULL,
	 "Also accept internode connections on broadcast_address, when it "
	 "differs from the listen address and is an address of this host."},
	{"rpc_address", CONF_T_HOST, OFF(rpc_address), "", 0, 0, NULL,
	 "Address CQL clients connect to; may be a wildcard (0.0.0.0, ::) "
	 "with broadcast_rpc_address set. Empty: rpc_interface's address, "
	 "else the listen address."},
	{"rpc_interface", CONF_T_STRING, OFF(rpc_interface), "", 0, 0, NULL,
	 "Network interface whose address is the rpc address. Not with "
	 "rpc_address."},
	{"rpc_interface_prefer_ipv6", CONF_T_BOOL,
	 OFF(rpc_interface_prefer_ipv6), "false", 0, 0, NULL,
	 "Take rpc_interface's first IPv6 address rather than its first IPv4 "
	 "one."},
	{"broadcast_rpc_address", CONF_T_HOST, OFF(broadcast_rpc_address), "",
	 0, 0, NULL,
	 "Address clients are told (system.local, system.peers, events). Not "
	 "a wildcard; required when rpc_address is one. Empty: the rpc "
	 "address."},
	{"admin_address", CONF_T_HOST, OFF(admin_address), "", 0, 0, NULL,
	 "Address of the admin endpoint (cassini-tool). Empty: "
	 "listen_address when it is a loopback address, else 127.0.0.1 "
	 "(::1)."},
	{"storage_port", CONF_T_INT, OFF(storage_port), "7000", 1, 65535, NULL,
	 "Internode port."},
	{"native_transport_port", CONF_T_INT, OFF(native_transport_port),
	 "9042", 1, 65535, NULL, "CQL native protocol port."},
	{"admin_port", CONF_T_INT, OFF(admin_port), "7199", 1, 65535, NULL,
	 "Admin endpoint port (JMX's 7199 in Cassandra)."},
	{"metrics_address", CONF_T_HOST, OFF(metrics_address), "", 0, 0, NULL,
	 "Address of the Prometheus metrics endpoint. Not a wildcard. Empty: "
	 "admin_address."},
	{"metrics_port", CONF_T_INT, OFF(metrics_port), "0", 0, 65535, NULL,
	 "Port of the Prometheus metrics endpoint (GET /metrics, the text "
	 "exposition format). 0: off."},
	{"seed_provider", CONF_T_SEEDS, OFF(seed_list), "127.0.0.1:7000", 0, 0,
	 NULL,
	 "Cassandra's SimpleSeedProvider section: parameters: - seeds: "
	 "\"ip[:port],...\" (port defaults to storage_port)."},

	/* directories */
	{"data_file_directories", CONF_T_PATH_LIST, OFF(data_file_directories),
	 "data/data", 0, 0, NULL,
	 "Where SSTables live. Relative paths are "
	 "under the node home."},
	{"commitlog_directory", CONF_T_PATH, OFF(commitlog_directory),
	 "data/commitlog", 0, 0, NULL, "Commitlog segments."},
	{"hints_directory", CONF_T_PATH, OFF(hints_directory), "data/hints", 0,
	 0, NULL, "Hint files, one set per target host."},
	{"saved_caches_directory", CONF_T_PATH, OFF(saved_caches_directory),
	 "data/saved_caches", 0, 0, NULL,
	 "Node-local state (host id, tokens, "
	 "gossip generation)."},
	{"log_directory", CONF_T_PATH, OFF(log_directory), "logs", 0, 0, NULL,
	 "Where system.log is written."},
	{"log_level", CONF_T_ENUM, OFF(log_level), "info", 0, 0,
	 log_level_names, "error, warn, info, debug or trace."},

	/* commitlog and disks */
	{"commitlog_sync", CONF_T_ENUM, OFF(commitlog_sync), "periodic", 0, 0,
	 commitlog_sync_names,
	 "periodic: acknowledge after write(2), fsync every "
	 "commitlog_sync_period. batch: acknowledge after fsync. group: one "
	 "fsync per commitlog_sync_group_window covers every write in it."},
	{"commitlog_sync_period", CONF_T_DURATION,
	 OFF(commitlog_sync_period_ms), "10000ms", 1, DAY_MS, NULL,
	 "fsync interval in periodic mode."},
	{"commitlog_sync_group_window", CONF_T_DURATION,
	 OFF(commitlog_sync_group_window_ms), "1000ms", 0, 60000, NULL,
	 "Longest wait for the shared fsync in group mode."},
	{"commitlog_segment_size", CONF_T_SIZE, OFF(commitlog_segment_size),
	 "32MiB", 1 * MiB, 1 * GiB, NULL,
	 "Size of each preallocated segment; a mutation may be at most half."},
	{"commitlog_total_space", CONF_T_SIZE, OFF(commitlog_total_space),
	 "8192MiB", 2 * MiB, 1024 * GiB, NULL,
	 "Past this, the tables pinning the oldest segment are flushed."},
	{"commit_failure_policy", CONF_T_ENUM, OFF(commit_failure_policy),
	 "stop", 0, 0, commit_policy_names,
	 "On a commitlog error: stop (refuse to start, or stop writes), die, "
	 "stop_commit (stop writes, keep serving reads) or ignore."},
	{"disk_failure_policy", CONF_T_ENUM, OFF(disk_failure_policy), "stop",
	 0, 0, disk_policy_names,
	 "On a data-file error: stop, die, best_effort or ignore."},
	{"disk_access_mode", CONF_T_ENUM, OFF(disk_access_mode), "auto", 0, 0,
	 disk_access_names,
	 "How reads reach SSTables: mmap (Data.db and Index.db mapped), "
	 "mmap_index_only, standard (pread only); auto is mmap on 64-bit "
	 "builds, standard on 32-bit."},

	/* memtables, compaction, reads */
	{"memtable_heap_space", CONF_T_SIZE, OFF(memtable_heap_space), "128MiB",
	 1 * MiB, 64 * GiB, NULL,
	 "Memory all memtables may use, those waiting for a "
	 "flush too; past it writes wait for a flush to make room."},
	{"memtable_cleanup_threshold", CONF_T_DOUBLE,
	 OFF(memtable_cleanup_threshold), "0.33", 0.01, 1.0, NULL,
	 "Flush the largest memtable when memtables use this fraction of "
	 "memtable_heap_space."},
	{"memtable_flush_writers", CONF_T_INT, OFF(memtable_flush_writers), "2",
	 1, 16, NULL, "Threads that flush memtables."},
	{"concurrent_compactors", CONF_T_INT, OFF(concurrent_compactors), "2",
	 1, 16, NULL, "Threads that compact (and validate for repair)."},
	{"compaction_throughput", CONF_T_RATE, OFF(compaction_throughput),
	 "64MiB/s", 0, 64 * GiB, NULL,
	 "Shared by compaction and repair validation; 0 means unthrottled."},
	{"stream_throughput_outbound", CONF_T_RATE,
	 OFF(stream_throughput_outbound), "24MiB/s", 0, 64 * GiB, NULL,
	 "Rows this node streams out (repair, bootstrap, decommission, "
	 "rebuild); 0 means unthrottled."},
	{"tombstone_warn_threshold", CONF_T_INT, OFF(tombstone_warn_threshold),
	 "1000", 1, INT32_MAX, NULL,
	 "Tombstones one read may scan before a "
	 "warning is logged."},
	{"tombstone_failure_threshold", CONF_T_INT,
	 OFF(tombstone_failure_threshold), "100000", 1, INT32_MAX, NULL,
	 "Tombstones one read may scan before it fails."},
	{"replica_filtering_protection.cached_rows_warn_threshold", CONF_T_INT,
	 OFF(rfp_cached_rows_warn_threshold), "2000", 1, INT32_MAX, NULL,
	 "Rows an indexed read at a level above ONE may hold while it reads "
	 "what replicas disagree on, before a warning is logged and sent."},
	{"replica_filtering_protection.cached_rows_fail_threshold", CONF_T_INT,
	 OFF(rfp_cached_rows_fail_threshold), "32000", 1, INT32_MAX, NULL,
	 "Rows an indexed read at a level above ONE may hold while it reads "
	 "what replicas disagree on, before it fails (Overloaded)."},

	/* gossip and failure detection */
	{"phi_convict_threshold", CONF_T_DOUBLE, OFF(phi_convict_threshold),
	 "8", 5, 16, NULL,
	 "Failure-detector suspicion level that marks a peer "
	 "down."},
	{"gossip_interval", CONF_T_DURATION, OFF(gossip_interval_ms), "1000ms",
	 10, 60000, NULL,
	 "Gossip round interval (Cassandra fixes it at 1s; "
	 "tests shorten it)."},
	{"auto_bootstrap", CONF_T_BOOL, OFF(auto_bootstrap), "true", 0, 0, NULL,
	 "A new node that is not a seed streams the data it will replicate "
	 "before it serves."},
	{"ring_delay", CONF_T_DURATION, OFF(ring_delay_ms), "5000ms", 0, 600000,
	 NULL,
	 "How long a bootstrapping node lets its BOOT state spread before it "
	 "streams (Cassandra's cassandra.ring_delay_ms, 30s there)."},
	{"endpoint_snitch", CONF_T_ENUM, OFF(endpoint_snitch), "SimpleSnitch",
	 0, 0, snitch_names,
	 "SimpleSnitch (datacenter1/rack1) or GossipingPropertyFileSnitch "
	 "(dc and rack from rackdc.properties). The org.apache.cassandra."
	 "locator. prefix is accepted."},
	{"internode_max_message_size", CONF_T_SIZE,
	 OFF(internode_max_message_size), "64MiB", 4 * KiB, 1 * GiB, NULL,
	 "Largest internode message accepted; checked before allocating."},
	{"internode_tcp_connect_timeout", CONF_T_DURATION,
	 OFF(internode_tcp_connect_timeout_ms), "2000ms", 1, 600000, NULL,
	 "Connect timeout for internode connections."},

	/* coordinator */
	{"slow_query_log_timeout", CONF_T_DURATION,
	 OFF(slow_query_log_timeout_ms), "500ms", 0, HOUR_MS, NULL,
	 "SELECTs slower than this are logged (a WARN line every 5 s "
	 "naming each slow query, how often and how slow). 0: off."},
	{"read_request_timeout", CONF_T_DURATION, OFF(read_request_timeout_ms),
	 "5000ms", 1, HOUR_MS, NULL,
	 "How long the coordinator waits for reads."},
	{"write_request_timeout", CONF_T_DURATION,
	 OFF(write_request_timeout_ms), "2000ms", 1, HOUR_MS, NULL,
	 "How long the coordinator waits for writes, and a write for "
	 "memtable room."},
	{"range_request_timeout", CONF_T_DURATION,
	 OFF(range_request_timeout_ms), "10000ms", 1, HOUR_MS, NULL,
	 "How long the coordinator waits for token-range reads."},
	{"truncate_request_timeout", CONF_T_DURATION,
	 OFF(truncate_request_timeout_ms), "60000ms", 1, HOUR_MS, NULL,
	 "How long the coordinator waits for TRUNCATE."},
	{"cas_contention_timeout", CONF_T_DURATION,
	 OFF(cas_contention_timeout_ms), "1000ms", 1, HOUR_MS, NULL,
	 "How long a lightweight transaction retries (with randomised "
	 "backoff) after losing its Paxos round to other proposers on the "
	 "same partition."},
	{"paxos_repair_enabled", CONF_T_BOOL, OFF(paxos_repair_enabled), "true",
	 0, 0, NULL,
	 "Paxos repair of the ranges that move before bootstrap, "
	 "decommission and rebuild stream; false: none runs."},
	{"skip_paxos_repair_on_topology_change", CONF_T_BOOL,
	 OFF(skip_paxos_repair_on_topology_change), "false", 0, 0, NULL,
	 "Skip the paxos repair of moving ranges (unsafe for LWT)."},
	{"skip_paxos_repair_on_topology_change_keyspaces", CONF_T_LIST,
	 OFF(skip_paxos_repair_on_topology_change_keyspaces), "", 0, 0, NULL,
	 "Keyspaces whose moving ranges get no paxos repair."},
	{"paxos_state_purging", CONF_T_ENUM, OFF(paxos_state_purging), "legacy",
	 0, 0, paxos_state_purging_names,
	 "How system.paxos state is purged: legacy (committed state expires "
	 "after max(3h, the table's gc_grace_seconds)); gc_grace and "
	 "repaired are not supported."},
	{"batch_size_warn_threshold", CONF_T_SIZE,
	 OFF(batch_size_warn_threshold), "5KiB", 1, 1 * GiB, NULL,
	 "Batches larger than this log a warning."},
	{"batch_size_fail_threshold", CONF_T_SIZE,
	 OFF(batch_size_fail_threshold), "50KiB", 1, 1 * GiB, NULL,
	 "Batches larger than this are refused."},
	{"unlogged_batch_across_partitions_warn_threshold", CONF_T_INT,
	 OFF(unlogged_batch_across_partitions_warn_threshold), "10", 1,
	 INT32_MAX, NULL,
	 "Unlogged batches touching more partitions log a warning."},

	/* hints */
	{"hinted_handoff_enabled", CONF_T_BOOL, OFF(hinted_handoff_enabled),
	 "true", 0, 0, NULL, "Store hints for replicas that are down."},
	{"hinted_handoff_disabled_datacenters", CONF_T_LIST,
	 OFF(hinted_handoff_disabled_datacenters), "", 0, 0, NULL,
	 "Datacenters for which no hints are stored."},
	{"max_hint_window", CONF_T_DURATION, OFF(max_hint_window_ms), "3h", 0,
	 30 * DAY_MS, NULL, "No new hints for a node down longer than this."},
	{"hinted_handoff_throttle", CONF_T_SIZE, OFF(hinted_handoff_throttle),
	 "1024KiB", 1 * KiB, 1 * GiB, NULL,
	 "Hint delivery per second, divided among the nodes receiving hints."},
	{"max_hints_size_per_host", CONF_T_SIZE, OFF(max_hints_size_per_host),
	 "0MiB", 0, 1024 * GiB, NULL,
	 "Hint bytes kept per target; 0 means "
	 "unlimited."},
	{"max_hints_delivery_threads", CONF_T_INT,
	 OFF(max_hints_delivery_threads), "2", 1, 64, NULL,
	 "Concurrent hint deliveries."},

	/* client protocol */
	{"native_transport_max_frame_size", CONF_T_SIZE,
	 OFF(native_transport_max_frame_size), "16MiB", 1 * KiB, 256 * MiB,
	 NULL, "Largest CQL frame accepted; checked before allocating."},
	{"native_transport_max_concurrent_connections", CONF_T_INT,
	 OFF(native_transport_max_concurrent_connections), "-1", -1, INT32_MAX,
	 NULL, "Client connections allowed at once; -1 means unlimited."},
	{"native_transport_idle_timeout", CONF_T_DURATION,
	 OFF(native_transport_idle_timeout_ms), "0ms", 0, DAY_MS, NULL,
	 "Close client connections idle this long; 0 disables."},

	/* authentication and roles (docs/security.md) */
	{"client_encryption_options.enabled", CONF_T_BOOL,
	 OFF(client_encryption.enabled), "false", 0, 0, NULL,
	 "Clients speak TLS on native_transport_port."},
	{"client_encryption_options.optional", CONF_T_BOOL,
	 OFF(client_encryption.optional), "false", 0, 0, NULL,
	 "With enabled: plain clients are served too, on the same port (the "
	 "first byte tells a TLS handshake from a CQL frame)."},
	{"client_encryption_options.keystore", CONF_T_PATH,
	 OFF(client_encryption.keystore), "", 0, 0, NULL,
	 "PEM or PKCS#12 file with the node's private key and certificate "
	 "chain (Cassandra's PEMBasedSslContextFactory; JKS is not read)."},
	{"client_encryption_options.keystore_password", CONF_T_STRING,
	 OFF(client_encryption.keystore_password), "", 0, 0, NULL,
	 "Passphrase of an encrypted private key, or a PKCS#12 keystore's "
	 "password; empty: none."},
	{"client_encryption_options.truststore", CONF_T_PATH,
	 OFF(client_encryption.truststore), "", 0, 0, NULL,
	 "PEM (or PKCS#12) file of the CA certificates client certificates "
	 "must chain to (with require_client_auth)."},
	{"client_encryption_options.truststore_password", CONF_T_STRING,
	 OFF(client_encryption.truststore_password), "", 0, 0, NULL,
	 "Password of a PKCS#12 truststore; a PEM truststore has none."},
	{"client_encryption_options.require_client_auth", CONF_T_BOOL,
	 OFF(client_encryption.require_client_auth), "false", 0, 0, NULL,
	 "Clients must present a certificate signed by a truststore CA."},
	{"client_encryption_options.accepted_protocols", CONF_T_LIST,
	 OFF(client_encryption.accepted_protocols), "TLSv1.2,TLSv1.3", 0, 0,
	 NULL, "TLS versions served (TLSv1.2, TLSv1.3)."},
	{"client_encryption_options.cipher_suites", CONF_T_LIST,
	 OFF(client_encryption.cipher_suites), "", 0, 0, NULL,
	 "Cipher suites by IANA name (TLS_AES_128_GCM_SHA256, "
	 "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, ...); empty: OpenSSL's "
	 "defaults."},
	{"client_encryption_options.store_type", CONF_T_ENUM,
	 OFF(client_encryption.store_type), "PEM", 0, 0, store_type_names,
	 "Keystore format: PEM or PKCS12 (a keystore named .p12 or .pfx is "
	 "read as PKCS12 anyway); JKS is refused, naming the conversion."},
	{"jmx_encryption_options.enabled", CONF_T_BOOL,
	 OFF(jmx_encryption.enabled), "false", 0, 0, NULL,
	 "cassini-tool's admin_port speaks TLS (cassini-tool --ssl)."},
	{"jmx_encryption_options.keystore", CONF_T_PATH,
	 OFF(jmx_encryption.keystore), "", 0, 0, NULL,
	 "PEM or PKCS#12 file with the node's private key and certificate "
	 "chain shown to cassini-tool."},
	{"jmx_encryption_options.keystore_password", CONF_T_STRING,
	 OFF(jmx_encryption.keystore_password), "", 0, 0, NULL,
	 "Passphrase of an encrypted private key, or a PKCS#12 keystore's "
	 "password; empty: none."},
	{"jmx_encryption_options.truststore", CONF_T_PATH,
	 OFF(jmx_encryption.truststore), "", 0, 0, NULL,
	 "PEM (or PKCS#12) file of the CA certificates cassini-tool's "
	 "certificate must chain to (with require_client_auth)."},
	{"jmx_encryption_options.truststore_password", CONF_T_STRING,
	 OFF(jmx_encryption.truststore_password), "", 0, 0, NULL,
	 "Password of a PKCS#12 truststore; a PEM truststore has none."},
	{"jmx_encryption_options.require_client_auth", CONF_T_BOOL,
	 OFF(jmx_encryption.require_client_auth), "false", 0, 0, NULL,
	 "cassini-tool must present a certificate (--keystore) signed by a "
	 "truststore CA."},
	{"jmx_encryption_options.accepted_protocols", CONF_T_LIST,
	 OFF(jmx_encryption.accepted_protocols), "TLSv1.2,TLSv1.3", 0, 0, NULL,
	 "TLS versions served (TLSv1.2, TLSv1.3)."},
	{"jmx_encryption_options.cipher_suites", CONF_T_LIST,
	 OFF(jmx_encryption.cipher_suites), "", 0, 0, NULL,
	 "Cipher suites by IANA name (TLS_AES_128_GCM_SHA256, "
	 "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, ...); empty: OpenSSL's "
	 "defaults."},
	{"jmx_encryption_options.store_type", CONF_T_ENUM,
	 OFF(jmx_encryption.store_type), "PEM", 0, 0, store_type_names,
	 "Keystore format: PEM or PKCS12 (a keystore named .p12 or .pfx is "
	 "read as PKCS12 anyway); JKS is refused, naming the conversion."},
	{"server_encryption_options.internode_encryption", CONF_T_ENUM,
	 OFF(server_encryption.internode_encryption), "none", 0, 0,
	 internode_encryption_names,
	 "Which internode connections speak TLS: none, all, dc (those "
	 "to other datacenters) or rack (those to other racks or "
	 "datacenters). A plaintext connection that should be encrypted "
	 "is refused."},
	{"server_encryption_options.optional", CONF_T_BOOL,
	 OFF(server_encryption.optional), "false", 0, 0, NULL,
	 "Accept plaintext peers too, where encryption is required (for "
	 "enabling TLS on a running cluster one node at a time)."},
	{"server_encryption_options.keystore", CONF_T_PATH,
	 OFF(server_encryption.keystore), "", 0, 0, NULL,
	 "PEM or PKCS#12 file with this node's private key and certificate "
	 "chain, shown to peers both ways."},
	{"server_encryption_options.keystore_password", CONF_T_STRING,
	 OFF(server_encryption.keystore_password), "", 0, 0, NULL,
	 "Passphrase of an encrypted private key, or a PKCS#12 keystore's "
	 "password; empty: none."},
	{"server_encryption_options.truststore", CONF_T_PATH,
	 OFF(server_encryption.truststore), "", 0, 0, NULL,
	 "PEM (or PKCS#12) file of the CA certificates peers' certificates "
	 "must chain to (required with internode_encryption)."},
	{"server_encryption_options.truststore_password", CONF_T_STRING,
	 OFF(server_encryption.truststore_password), "", 0, 0, NULL,
	 "Password of a PKCS#12 truststore; a PEM truststore has none."},
	{"server_encryption_options.require_client_auth", CONF_T_BOOL,
	 OFF(server_encryption.require_client_auth), "false", 0, 0, NULL,
	 "Peers connecting to us must present a certificate from the "
	 "truststore (mutual TLS); set it on every real cluster."},
	{"server_encryption_options.require_endpoint_verification", CONF_T_BOOL,
	 OFF(server_encryption.require_endpoint_verification), "false", 0, 0,
	 NULL,
	 "A peer's certificate must name its address (an IP subjectAltName): "
	 "the one we connect to, and the one a connecting peer claims."},
	{"server_encryption_options.protocol", CONF_T_STRING,
	 OFF(server_encryption.protocol), "TLS", 0, 0, NULL,
	 "TLS (any accepted protocol), or one version (TLSv1.2, TLSv1.3) "
	 "used when accepted_protocols is empty."},
	{"server_encryption_options.accepted_protocols", CONF_T_LIST,
	 OFF(server_encryption.accepted_protocols), "", 0, 0, NULL,
	 "TLS versions spoken (TLSv1.2, TLSv1.3); empty: both."},
	{"server_encryption_options.cipher_suites", CONF_T_LIST,
	 OFF(server_encryption.cipher_suites), "", 0, 0, NULL,
	 "Cipher suites by IANA name; empty: OpenSSL's defaults."},
	{"server_encryption_options.store_type", CONF_T_ENUM,
	 OFF(server_encryption.store_type), "PEM", 0, 0, store_type_names,
	 "Keystore format: PEM or PKCS12 (a keystore named .p12 or .pfx is "
	 "read as PKCS12 anyway); JKS is refused, naming the conversion."},
	{"ssl_hot_reload_period", CONF_T_DURATION,
	 OFF(ssl_hot_reload_period_ms), "600s", 0, DAY_MS, NULL,
	 "How often the keystore and truststore files of both "
	 "encryption sections are checked; a changed one is read anew for "
	 "new connections (Cassandra checks every 600 s, not configurable); "
	 "0 disables."},
	{"authenticator", CONF_T_ENUM, OFF(authenticator),
	 "AllowAllAuthenticator", 0, 0, authenticator_names,
	 "AllowAllAuthenticator (no login) or PasswordAuthenticator (SASL "
	 "PLAIN against system_auth.roles)."},
	{"authorizer", CONF_T_ENUM, OFF(authorizer), "AllowAllAuthorizer", 0, 0,
	 authorizer_names,
	 "AllowAllAuthorizer (every logged-in role may do everything) or "
	 "CassandraAuthorizer (GRANT/REVOKE permissions in "
	 "system_auth.role_permissions, checked on every statement; needs "
	 "PasswordAuthenticator)."},
	{"permissions_validity", CONF_T_DURATION, OFF(permissions_validity_ms),
	 "2000ms", 0, DAY_MS, NULL,
	 "How long a user's cached permissions serve before they are read "
	 "again (the request waits for the read); 0 disables the cache."},
	{"permissions_update_interval", CONF_T_DURATION,
	 OFF(permissions_update_interval_ms), "2000ms", 0, DAY_MS, NULL,
	 "Cached permissions older than this are refreshed in the background "
	 "while still served (capped at permissions_validity)."},
	{"permissions_cache_max_entries", CONF_T_INT,
	 OFF(permissions_cache_max_entries), "1000", 1, INT32_MAX, NULL,
	 "Users whose permissions are cached at once."},
	{"roles_validity", CONF_T_DURATION, OFF(roles_validity_ms), "2000ms", 0,
	 DAY_MS, NULL,
	 "How long a user's cached roles (for permission checks) serve; the "
	 "cache entry holds roles and permissions, so the smaller validity "
	 "applies."},
	{"roles_update_interval", CONF_T_DURATION,
	 OFF(roles_update_interval_ms), "2000ms", 0, DAY_MS, NULL,
	 "Cached roles older than this are refreshed in the background."},
	{"credentials_validity", CONF_T_DURATION, OFF(credentials_validity_ms),
	 "2000ms", 0, DAY_MS, NULL,
	 "How long a role's cached credentials (its password hash and LOGIN) "
	 "serve logins before they are read again; 0 disables the cache. "
	 "The password is checked against them on every login."},
	{"credentials_update_interval", CONF_T_DURATION,
	 OFF(credentials_update_interval_ms), "2000ms", 0, DAY_MS, NULL,
	 "Cached credentials older than this still serve a login, then are "
	 "read again (capped at credentials_validity)."},
	{"credentials_cache_max_entries", CONF_T_INT,
	 OFF(credentials_cache_max_entries), "1000", 1, INT32_MAX, NULL,
	 "Roles whose credentials are cached at once."},
	{"role_manager", CONF_T_ENUM, OFF(role_manager), "CassandraRoleManager",
	 0, 0, role_manager_names,
	 "CassandraRoleManager: roles in system_auth.roles and "
	 "role_members."},
	{"auth_bcrypt_gensalt_log2_rounds", CONF_T_INT,
	 OFF(auth_bcrypt_gensalt_log2_rounds), "10", 4, 31, NULL,
	 "bcrypt cost of new password hashes: 2^n rounds."},
	{"superuser_setup_delay", CONF_T_DURATION,
	 OFF(superuser_setup_delay_ms), "10000ms", 0, HOUR_MS, NULL,
	 "Wait after start before creating the default superuser, so the "
	 "node sees its peers (Cassandra's -Dcassandra.superuser_setup_delay_"
	 "ms)."},

	/* repair */
	{"repair_session_space", CONF_T_SIZE, OFF(repair_session_space),
	 "64MiB", 1 * MiB, 16 * GiB, NULL,
	 "Memory for Merkle trees of one repair session, bounding their "
	 "depth."},

	/* scheduled repair: the repair_scheduler: section (docs/repair.md) */
	{"repair_scheduler.enabled", CONF_T_BOOL, OFF(repair_scheduler.enabled),
	 "false", 0, 0, NULL,
	 "Repair this node's primary ranges of every replicated table in "
	 "cycles, segment by segment."},
	{"repair_scheduler.intensity", CONF_T_DOUBLE,
	 OFF(repair_scheduler.intensity), "0.9", 0.001, 1, NULL,
	 "After a segment that took d, sleep d*(1-intensity)/intensity "
	 "(Reaper's intensity; 1 never sleeps)."},
	{"repair_scheduler.partitions_per_segment", CONF_T_INT,
	 OFF(repair_scheduler.partitions_per_segment), "1048576", 1,
	 1099511627776.0, NULL,
	 "Most estimated partitions in one segment (2^20: one Merkle leaf per "
	 "partition)."},
	{"repair_scheduler.bytes_per_segment", CONF_T_SIZE,
	 OFF(repair_scheduler.bytes_per_segment), "1GiB", 0, 1024 * GiB, NULL,
	 "Most estimated data bytes (SSTables and memtables, this node's "
	 "share) in one segment; 0: no byte budget."},
	{"repair_scheduler.segments_per_node", CONF_T_INT,
	 OFF(repair_scheduler.segments_per_node), "0", 0, 1000000, NULL,
	 "Segments this node's primary ranges are cut into at least, per "
	 "table (Reaper's segmentCountPerNode); 0: by partitions only."},
	{"repair_scheduler.segment_timeout", CONF_T_DURATION,
	 OFF(repair_scheduler.segment_timeout_ms), "30m", 1000, DAY_MS, NULL,
	 "A segment running longer is cancelled and counts as a failure."},
	{"repair_scheduler.segment_retries", CONF_T_INT,
	 OFF(repair_scheduler.segment_retries), "3", 1, 1000, NULL,
	 "Failed attempts of a segment before it is split in two."},
	{"repair_scheduler.retry_delay", CONF_T_DURATION,
	 OFF(repair_scheduler.retry_delay_ms), "30s", 0, DAY_MS, NULL,
	 "Wait before a failed segment is tried again."},
	{"repair_scheduler.windows", CONF_T_LIST, OFF(repair_scheduler.windows),
	 "", 0, 0, NULL,
	 "UTC time windows when segments may start, as \"HH:MM-HH:MM\" "
	 "(may cross midnight); empty: always."},
	{"repair_scheduler.gc_grace_fraction", CONF_T_DOUBLE,
	 OFF(repair_scheduler.gc_grace_fraction), "0.7", 0.01, 1, NULL,
	 "A table's cycle must finish within this fraction of its "
	 "gc_grace_seconds after the previous cycle started."},
	{"repair_scheduler.min_cycle_interval", CONF_T_DURATION,
	 OFF(repair_scheduler.min_cycle_interval_ms), "1d", 0, 365 * DAY_MS,
	 NULL,
	 "A table's next cycle starts no sooner than this after its last one "
	 "started."},
	{"repair_scheduler.check_interval", CONF_T_DURATION,
	 OFF(repair_scheduler.check_interval_ms), "30s", 10, HOUR_MS, NULL,
	 "How often the scheduler looks for work when idle or blocked."},
	{"repair_scheduler.initial_delay", CONF_T_DURATION,
	 OFF(repair_scheduler.initial_delay_ms), "5m", 0, DAY_MS, NULL,
	 "Wait after the node starts before the first segment."},
	{"repair_scheduler.tables", CONF_T_LIST, OFF(repair_scheduler.tables),
	 "", 0, 0, NULL,
	 "Per-table overrides, \"ks.table key=value ...\" with keys enabled, "
	 "intensity, segments_per_node, partitions_per_segment, "
	 "bytes_per_segment."},

	/* test clusters only */
	{"test_fault_injection", CONF_T_BOOL, OFF(test_fault_injection),
	 "false", 0, 0, NULL,
	 "Test clusters only: the admin commands netfault (delay, jitter, "
	 "loss, rate limit, flapping on internode links) and clockskew (an "
	 "offset on this node's wall clock) may act. Off: they are refused "
	 "and the transport has no fault layer."},
};

const size_t conf_keys_count = sizeof(conf_keys) / sizeof(conf_keys[0]);
