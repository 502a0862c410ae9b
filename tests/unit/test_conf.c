/* conf/: node.yaml and rackdc.properties, defaults, units, strict errors. */
#include "common/err.h"
#include "conf/conf.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A home directory with conf/node.yaml (and rackdc.properties when given). */
struct home {
	char dir[512];
	char conf[600];
};

static void home_make(struct home *h, const char *yaml, const char *rackdc)
{
	char path[700];
	snprintf(h->dir, sizeof(h->dir), "%s", test_tmpdir("conf"));
	snprintf(h->conf, sizeof(h->conf), "%s/conf", h->dir);
	ck_assert_int_eq(mkdir(h->conf, 0755), 0);
	snprintf(path, sizeof(path), "%s/node.yaml", h->conf);
	FILE *f = fopen(path, "w");
	fputs(yaml, f);
	fclose(f);
	if (rackdc) {
		snprintf(path, sizeof(path), "%s/rackdc.properties", h->conf);
		f = fopen(path, "w");
		fputs(rackdc, f);
		fclose(f);
	}
}

/* Loads and expects failure; returns the message for inspection. */
static const char *load_fails(const char *yaml, const char *rackdc)
{
	static char msg[ERR_MSG_MAX];
	struct home h;
	struct conf c;
	home_make(&h, yaml, rackdc);
	ck_assert_msg(conf_load(&c, h.conf) == -1, "accepted:\n%s", yaml);
	ck_assert_int_eq(err_code(), ERR_CONFIG);
	snprintf(msg, sizeof(msg), "%s", err_msg());
	test_tmpdir_remove(h.dir);
	return msg;
}

START_TEST(defaults_match_cassandra)
{
	struct conf c;
	ck_assert_int_eq(conf_init_defaults(&c), 0);
	ck_assert_str_eq(c.cluster_name, "Test Cluster");
	ck_assert_int_eq(c.num_tokens, 16);
	ck_assert_int_eq(c.allocate_tokens_for_local_replication_factor, 3);
	ck_assert_int_eq(c.storage_port, 7000);
	ck_assert_int_eq(c.native_transport_port, 9042);
	ck_assert_int_eq(c.admin_port, 7199);
	ck_assert_int_eq(c.commitlog_sync, CONF_COMMITLOG_SYNC_PERIODIC);
	ck_assert_uint_eq(c.commitlog_sync_period_ms, 10000);
	ck_assert_uint_eq(c.commitlog_segment_size, 32u << 20);
	ck_assert_uint_eq(c.max_hint_window_ms, 3 * 3600 * 1000);
	ck_assert_uint_eq(c.read_request_timeout_ms, 5000);
	ck_assert_uint_eq(c.write_request_timeout_ms, 2000);
	ck_assert_uint_eq(c.range_request_timeout_ms, 10000);
	ck_assert_double_eq(c.phi_convict_threshold, 8.0);
	ck_assert(c.hinted_handoff_enabled);
	ck_assert_uint_eq(c.hinted_handoff_throttle, 1024 * 1024);
	ck_assert_uint_eq(c.batch_size_warn_threshold, 5 * 1024);
	ck_assert_uint_eq(c.batch_size_fail_threshold, 50 * 1024);
	ck_assert_uint_eq(c.native_transport_max_frame_size, 16u << 20);
	ck_assert_uint_eq(c.compaction_throughput, 64u << 20);
	ck_assert_int_eq(c.tombstone_failure_threshold, 100000);
	ck_assert_int_eq(c.rfp_cached_rows_warn_threshold, 2000);
	ck_assert_int_eq(c.rfp_cached_rows_fail_threshold, 32000);
	ck_assert_ptr_null(c.initial_token);
	ck_assert_uint_eq(c.data_file_directories.count, 1);
	ck_assert_str_eq(c.dc, "datacenter1");
	conf_free(&c);
}
END_TEST

static const char full_yaml[] =
	"# a Cassandra-style config\n"
	"cluster_name: 'Prod Cluster'\n"
	"num_tokens: 8\n"
	"initial_token:\n"
	"listen_address: 127.0.0.2\n"
	"storage_port: 7100\n"
	"seed_provider:\n"
	"  - class_name: org.apache.cassandra.locator.SimpleSeedProvider\n"
	"    parameters:\n"
	"      - seeds: \"127.0.0.1:7100, 127.0.0.3\"\n"
	"data_file_directories:\n"
	"  - /var/lib/cassini/data\n"
	"  - more/data\n"
	"commitlog_sync: group\n"
	"commitlog_sync_group_window: 15ms\n"
	"max_hint_window: 1h\n"
	"hinted_handoff_disabled_datacenters:\n"
	"  - dc2\n"
	"  - dc3\n"
	"compaction_throughput: 16MiB/s\n"
	"commitlog_segment_size: 8MiB\n"
	"phi_convict_threshold: 12\n"
	"endpoint_snitch: org.apache.cassandra.locator."
	"GossipingPropertyFileSnitch\n"
	"read_request_timeout_in_ms: 7000\n"
	"hinted_handoff_enabled: false\n";

START_TEST(full_config_loads_with_units_lists_and_seeds)
{
	struct home h;
	struct conf c;
	char expect[800];
	home_make(&h, full_yaml, "# comment\ndc=dc1\nrack = rack2\n");
	ck_assert_msg(conf_load(&c, h.conf) == 0, "%s", err_msg());
	ck_assert_str_eq(c.cluster_name, "Prod Cluster");
	ck_assert_int_eq(c.num_tokens, 8);
	ck_assert_ptr_null(c.initial_token);
	char buf[INET_ADDR_STRLEN];
	ck_assert_str_eq(inet_addr_format(&c.listen_address, buf, sizeof(buf)),
			 "127.0.0.2:7100");
	/* rpc and admin default to the listen address with their own ports. */
	ck_assert_str_eq(inet_addr_format(&c.rpc_address, buf, sizeof(buf)),
			 "127.0.0.2:9042");
	ck_assert_str_eq(inet_addr_format(&c.admin_address, buf, sizeof(buf)),
			 "127.0.0.2:7199");
	ck_assert_uint_eq(c.seed_count, 2);
	ck_assert_str_eq(inet_addr_format(&c.seeds[1], buf, sizeof(buf)),
			 "127.0.0.3:7100");
	ck_assert_uint_eq(c.data_file_directories.count, 2);
	ck_assert_str_eq(c.data_file_directories.items[0],
			 "/var/lib/cassini/data");
	snprintf(expect, sizeof(expect), "%s/more/data", c.home_dir);
	ck_assert_str_eq(c.data_file_directories.items[1], expect);
	snprintf(expect, sizeof(expect), "%s/data/commitlog", c.home_dir);
	ck_assert_str_eq(c.commitlog_directory, expect);
	ck_assert_int_eq(c.commitlog_sync, CONF_COMMITLOG_SYNC_GROUP);
	ck_assert_uint_eq(c.commitlog_sync_group_window_ms, 15);
	ck_assert_uint_eq(c.max_hint_window_ms, 3600 * 1000);
	ck_assert_uint_eq(c.hinted_handoff_disabled_datacenters.count, 2);
	ck_assert_str_eq(c.hinted_handoff_disabled_datacenters.items[1], "dc3");
	ck_assert_uint_eq(c.compaction_throughput, 16u << 20);
	ck_assert_uint_eq(c.commitlog_segment_size, 8u << 20);
	ck_assert_double_eq(c.phi_convict_threshold, 12.0);
	ck_assert_int_eq(c.endpoint_snitch,
			 CONF_SNITCH_GOSSIPING_PROPERTY_FILE);
	ck_assert_uint_eq(c.read_request_timeout_ms, 7000); /* legacy name */
	ck_assert(!c.hinted_handoff_enabled);
	ck_assert_str_eq(c.dc, "dc1");
	ck_assert_str_eq(c.rack, "rack2");
	conf_free(&c);
	test_tmpdir_remove(h.dir);
}
END_TEST

START_TEST(unknown_key_is_named_with_line_and_suggestion)
{
	const char *m = load_fails("cluster_name: x\n\nnum_token: 4\n", NULL);
	ck_assert_contains(m, "node.yaml:3: unknown key 'num_token'");
	ck_assert_contains(m, "did you mean 'num_tokens'?");
	m = load_fails("zzzzzzzzzz: 1\n", NULL);
	ck_assert_contains(m, "node.yaml:1: unknown key 'zzzzzzzzzz'");
}
END_TEST

START_TEST(out_of_range_and_bad_types_are_refused)
{
	const char *m = load_fails("num_tokens: 0\n", NULL);
	ck_assert_contains(
		m, "node.yaml:1: num_tokens: 0 is out of range (1 to 1536)");
	m = load_fails("storage_port: 70000\n", NULL);
	ck_assert_contains(m, "storage_port: 70000 is out of range");
	m = load_fails("num_tokens: many\n", NULL);
	ck_assert_contains(m, "num_tokens: 'many' is not an integer");
	m = load_fails("phi_convict_threshold: 100\n", NULL);
	ck_assert_contains(m, "phi_convict_threshold: 100 is out of range");
	m = load_fails("hinted_handoff_enabled: maybe\n", NULL);
	ck_assert_contains(m, "'maybe' is not a boolean");
	m = load_fails("commitlog_sync: sometimes\n", NULL);
	ck_assert_contains(m,
			   "'sometimes' is not one of: periodic, batch, group");
	m = load_fails("listen_address: localhost\n", NULL);
	ck_assert_contains(m, "listen_address: 'localhost' is not a numeric");
	m = load_fails("num_tokens:\n  - 1\n", NULL);
	ck_assert_contains(m, "num_tokens: expected a single value");
}
END_TEST

START_TEST(durations_and_sizes_take_cassandra_units)
{
	uint64_t v;
	ck_assert_int_eq(conf_parse_duration_ms("10000ms", &v), 0);
	ck_assert_uint_eq(v, 10000);
	ck_assert_int_eq(conf_parse_duration_ms("10s", &v), 0);
	ck_assert_uint_eq(v, 10000);
	ck_assert_int_eq(conf_parse_duration_ms("3h", &v), 0);
	ck_assert_uint_eq(v, 10800000);
	ck_assert_int_eq(conf_parse_duration_ms("2d", &v), 0);
	ck_assert_uint_eq(v, 172800000);
	ck_assert_int_eq(conf_parse_duration_ms("1500us", &v), 0);
	ck_assert_uint_eq(v, 1);
	ck_assert_int_eq(conf_parse_size("32MiB", &v), 0);
	ck_assert_uint_eq(v, 32u << 20);
	ck_assert_int_eq(conf_parse_size("5KiB", &v), 0);
	ck_assert_uint_eq(v, 5120);
	ck_assert_int_eq(conf_parse_rate("64MiB/s", &v), 0);
	ck_assert_uint_eq(v, 64u << 20);
	const char *bad[] = {"10",
			     "10 s",
			     "-1s",
			     "s",
			     "1.5s",
			     "10sec",
			     "99999999999999999999999ms"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(conf_parse_duration_ms(bad[i], &v) == -1, "%s",
			      bad[i]);
	ck_assert_int_eq(conf_parse_size("32MB", &v), -1);
	ck_assert_contains(err_msg(), "unit must be one of B, KiB, MiB, GiB");
	ck_assert_int_eq(conf_parse_size("18446744073709551615GiB", &v), -1);

	const char *m = load_fails("max_hint_window: 3 hours\n", NULL);
	ck_assert_contains(m, "node.yaml:1: max_hint_window: invalid duration");
	m = load_fails("commitlog_segment_size: 2GiB\n", NULL);
	ck_assert_contains(m, "commitlog_segment_size: 2GiB is out of range");
}
END_TEST

START_TEST(cross_key_rules_are_checked)
{
	const char *m =
		load_fails("num_tokens: 2\ninitial_token: 1,2,3\n", NULL);
	ck_assert_contains(m,
			   "initial_token: 3 tokens given but num_tokens is 2");
	m = load_fails("num_tokens: 1\ninitial_token: abc\n", NULL);
	ck_assert_contains(m, "'abc' is not a Murmur3 token");
	m = load_fails("batch_size_warn_threshold: 10KiB\n"
		       "batch_size_fail_threshold: 5KiB\n",
		       NULL);
	ck_assert_contains(m, "batch_size_fail_threshold: must not be below");
	m = load_fails("listen_address: 0.0.0.0\n", NULL);
	ck_assert_contains(m, "listen_address: listen_address cannot be a "
			      "wildcard address (0.0.0.0)!");
	m = load_fails(
		"partitioner: org.apache.cassandra.dht.RandomPartitioner\n",
		NULL);
	ck_assert_contains(m, "partitioner: 'org.apache.cassandra.dht."
			      "RandomPartitioner' is not supported");
	m = load_fails("cluster_name: a\ncluster_name: b\n", NULL);
	ck_assert_contains(m,
			   "node.yaml:2: cluster_name: given more than once");
	m = load_fails("seed_provider:\n  - class_name: Foo\n", NULL);
	ck_assert_contains(m, "unsupported class_name 'Foo'");
	m = load_fails("seed_provider:\n"
		       "  - class_name: SimpleSeedProvider\n"
		       "    parameters:\n"
		       "      - seeds: \"127.0.0.1, nope\"\n",
		       NULL);
	ck_assert_contains(m, "seed_provider: 'nope' is not a numeric");
	m = load_fails("authorizer: CassandraAuthorizer\n", NULL);
	ck_assert_contains(m, "AllowAllAuthenticator can't be used with "
			      "CassandraAuthorizer");
}
END_TEST

START_TEST(yaml_syntax_errors_name_the_line)
{
	const char *m = load_fails("cluster_name: x\nnum_tokens: [1\n", NULL);
	ck_assert_contains(m, "invalid YAML");
	m = load_fails("- just\n- a list\n", NULL);
	ck_assert_contains(m, "the top level must be a mapping");
}
END_TEST

START_TEST(rackdc_properties_are_strict)
{
	const char *gpfs = "endpoint_snitch: GossipingPropertyFileSnitch\n";
	const char *m = load_fails(gpfs, NULL);
	ck_assert_contains(m, "rackdc.properties: GossipingPropertyFileSnitch "
			      "needs this file");
	m = load_fails(gpfs, "dc=dc1\nrak=r1\n");
	ck_assert_contains(m, "rackdc.properties:2: unknown key 'rak'");
	m = load_fails(gpfs, "dc=dc1\nrack\n");
	ck_assert_contains(m, "rackdc.properties:2: expected key=value");
	m = load_fails(gpfs, "dc=\n");
	ck_assert_contains(m, "rackdc.properties:1: dc: empty value");

	struct conf c;
	ck_assert_int_eq(conf_init_defaults(&c), 0);
	const char *props =
		"dc=east\nrack=r9\nprefer_local=true\ndc_suffix=_x\n";
	ck_assert_int_eq(conf_parse_rackdc(&c, "p", props, strlen(props)), 0);
	ck_assert_str_eq(c.dc, "east");
	ck_assert(c.prefer_local);
	ck_assert_str_eq(c.dc_suffix, "_x");
	conf_free(&c);

	/* The suffix is applied on load. */
	struct home h;
	home_make(&h, gpfs, "dc=east\nrack=r1\ndc_suffix=_backup\n");
	ck_assert_int_eq(conf_load(&c, h.conf), 0);
	ck_assert_str_eq(c.dc, "east_backup");
	conf_free(&c);
	test_tmpdir_remove(h.dir);
}
END_TEST

START_TEST(empty_file_means_every_default)
{
	struct home h;
	struct conf c;
	home_make(&h, "# nothing here\n", NULL);
	ck_assert_msg(conf_load(&c, h.conf) == 0, "%s", err_msg());
	ck_assert_int_eq(c.num_tokens, 16);
	ck_assert_uint_eq(c.seed_count, 1);
	conf_free(&c);
	test_tmpdir_remove(h.dir);
	ck_assert_int_eq(conf_load(&c, "/nonexistent/cassini/conf"), -1);
	ck_assert_contains(err_msg(), "/nonexistent/cassini/conf");
}
END_TEST

START_TEST(key_docs_cover_every_key)
{
	ck_assert_uint_gt(conf_key_count(), 40);
	for (size_t i = 0; i < conf_key_count(); i++) {
		const struct conf_key_doc *d = conf_key_doc_at(i);
		ck_assert_ptr_nonnull(d);
		ck_assert_uint_gt(strlen(d->doc), 10);
	}
	ck_assert_ptr_null(conf_key_doc_at(conf_key_count()));
}
END_TEST

START_TEST(repair_scheduler_section_is_a_mapping_of_its_keys)
{
	struct home h;
	struct conf c;
	ck_assert_int_eq(conf_init_defaults(&c), 0);
	ck_assert(!c.repair_scheduler.enabled);
	ck_assert_double_eq(c.repair_scheduler.gc_grace_fraction, 0.7);
	ck_assert_int_eq(c.repair_scheduler.partitions_per_segment, 1 << 20);
	conf_free(&c);
	home_make(&h,
		  "repair_scheduler:\n"
		  "  enabled: true\n"
		  "  intensity: 0.5\n"
		  "  segments_per_node: 32\n"
		  "  segment_timeout: 10m\n"
		  "  windows: [\"01:00-05:00\", \"22:00-23:30\"]\n"
		  "  tables: [\"ks.t enabled=false\"]\n"
		  "num_tokens: 4\n",
		  NULL);
	ck_assert_msg(conf_load(&c, h.conf) == 0, "%s", err_msg());
	ck_assert(c.repair_scheduler.enabled);
	ck_assert_double_eq(c.repair_scheduler.intensity, 0.5);
	ck_assert_int_eq(c.repair_scheduler.segments_per_node, 32);
	ck_assert_uint_eq(c.repair_scheduler.segment_timeout_ms, 600000);
	ck_assert_uint_eq(c.repair_scheduler.windows.count, 2);
	ck_assert_str_eq(c.repair_scheduler.windows.items[1], "22:00-23:30");
	ck_assert_uint_eq(c.repair_scheduler.tables.count, 1);
	ck_assert_int_eq(c.num_tokens, 4);
	conf_free(&c);
	test_tmpdir_remove(h.dir);

	const char *m = load_fails("repair_scheduler:\n  enable: true\n", NULL);
	ck_assert_contains(m, "node.yaml:2: unknown key "
			      "'repair_scheduler.enable' (did you mean "
			      "'repair_scheduler.enabled'?)");
	m = load_fails("repair_scheduler:\n  intensity: 0\n", NULL);
	ck_assert_contains(m, "repair_scheduler.intensity: 0 is out of range");
	m = load_fails("repair_scheduler: true\n", NULL);
	ck_assert_contains(m, "repair_scheduler: expected a mapping");
	m = load_fails("repair_scheduler.enabled: true\n", NULL);
	ck_assert_contains(m, "unknown key 'repair_scheduler.enabled'");
}
END_TEST

/* Loads `yaml` and returns the conf (the caller frees it). */
static void load_ok(struct conf *c, const char *yaml)
{
	struct home h;
	home_make(&h, yaml, NULL);
	ck_assert_msg(conf_load(c, h.conf) == 0, "%s", err_msg());
	test_tmpdir_remove(h.dir);
}

/* Cassandra's replica_filtering_protection: section, block or flow. */
START_TEST(replica_filtering_protection_is_a_section)
{
	struct conf c;
	load_ok(&c, "replica_filtering_protection:\n"
		    "  cached_rows_warn_threshold: 5\n"
		    "  cached_rows_fail_threshold: 7\n");
	ck_assert_int_eq(c.rfp_cached_rows_warn_threshold, 5);
	ck_assert_int_eq(c.rfp_cached_rows_fail_threshold, 7);
	conf_free(&c);
	load_ok(&c, "replica_filtering_protection: "
		    "{cached_rows_fail_threshold: 3000}\n");
	ck_assert_int_eq(c.rfp_cached_rows_warn_threshold, 2000);
	ck_assert_int_eq(c.rfp_cached_rows_fail_threshold, 3000);
	conf_free(&c);
	const char *m = load_fails("replica_filtering_protection:\n"
				   "  cached_rows_warn_threshold: 10\n"
				   "  cached_rows_fail_threshold: 9\n",
				   NULL);
	ck_assert_contains(m, "replica_filtering_protection."
			      "cached_rows_fail_threshold: must not be below "
			      "cached_rows_warn_threshold");
	m = load_fails("replica_filtering_protection:\n"
		       "  cached_rows_fail_threshold: 0\n",
		       NULL);
	ck_assert_contains(m, "cached_rows_fail_threshold: 0 is out of range");
}
END_TEST

static const char *addr_text(const struct inet_addr *a)
{
	static char buf[4][INET_ADDR_STRLEN];
	static int i;
	i = (i + 1) % 4;
	return inet_addr_format(a, buf[i], sizeof(buf[i]));
}

START_TEST(broadcast_addresses_default_as_in_cassandra)
{
	struct conf c;
	load_ok(&c, "");
	ck_assert_str_eq(addr_text(&c.listen_address), "127.0.0.1:7000");
	ck_assert_str_eq(addr_text(&c.broadcast_address), "127.0.0.1:7000");
	ck_assert_str_eq(addr_text(&c.rpc_address), "127.0.0.1:9042");
	ck_assert_str_eq(addr_text(&c.broadcast_rpc_address), "127.0.0.1:9042");
	conf_free(&c);

	load_ok(&c, "listen_address: 10.0.0.5\n"
		    "broadcast_address: 203.0.113.5\n"
		    "listen_on_broadcast_address: true\n"
		    "rpc_address: 0.0.0.0\n"
		    "broadcast_rpc_address: 203.0.113.5\n");
	ck_assert_str_eq(addr_text(&c.listen_address), "10.0.0.5:7000");
	ck_assert_str_eq(addr_text(&c.broadcast_address), "203.0.113.5:7000");
	ck_assert(c.listen_on_broadcast_address);
	ck_assert_str_eq(addr_text(&c.rpc_address), "0.0.0.0:9042");
	ck_assert_str_eq(addr_text(&c.broadcast_rpc_address),
			 "203.0.113.5:9042");
	/* the admin endpoint stays on this host (Cassandra's LOCAL_JMX),
	 * never on a routable or wildcard address unless it is named */
	ck_assert_str_eq(addr_text(&c.admin_address), "127.0.0.1:7199");
	conf_free(&c);

	/* named, it is used; IPv6 nodes default to ::1; metrics follow */
	load_ok(&c, "listen_address: 10.0.0.5\nadmin_address: 10.0.0.5\n"
		    "metrics_port: 9500\n");
	ck_assert_str_eq(addr_text(&c.admin_address), "10.0.0.5:7199");
	ck_assert_str_eq(addr_text(&c.metrics_address), "10.0.0.5:9500");
	conf_free(&c);
	load_ok(&c, "listen_address: fd00::5\nseed_provider:\n"
		    "  - class_name: SimpleSeedProvider\n"
		    "    parameters:\n      - seeds: \"[fd00::5]:7000\"\n");
	ck_assert_str_eq(addr_text(&c.admin_address), "[::1]:7199");
	conf_free(&c);

	/* rpc defaults to listen, broadcast_rpc to rpc */
	load_ok(&c, "listen_address: 10.0.0.5\nrpc_address: 10.1.0.5\n");
	ck_assert_str_eq(addr_text(&c.broadcast_rpc_address), "10.1.0.5:9042");
	conf_free(&c);
}
END_TEST

START_TEST(ipv6_addresses_work_everywhere)
{
	struct conf c;
	load_ok(&c, "listen_address: fd31::5\n"
		    "broadcast_address: 2001:db8::5\n"
		    "rpc_address: '::'\n"
		    "broadcast_rpc_address: 2001:db8::5\n"
		    "seed_provider:\n"
		    "  - class_name: SimpleSeedProvider\n"
		    "    parameters:\n"
		    "      - seeds: \"[2001:db8::1]:7000,2001:db8::2\"\n");
	ck_assert_str_eq(addr_text(&c.listen_address), "[fd31::5]:7000");
	ck_assert_str_eq(addr_text(&c.broadcast_address), "[2001:db8::5]:7000");
	ck_assert(inet_addr_is_wildcard(&c.rpc_address));
	ck_assert_str_eq(addr_text(&c.broadcast_rpc_address),
			 "[2001:db8::5]:9042");
	ck_assert_uint_eq(c.seed_count, 2);
	ck_assert_str_eq(addr_text(&c.seeds[1]), "[2001:db8::2]:7000");
	conf_free(&c);
}
END_TEST

START_TEST(interfaces_give_their_address)
{
	struct conf c;
	/* lo has 127.0.0.1 and ::1 on Linux */
	load_ok(&c, "listen_interface: lo\nrpc_interface: lo\n"
		    "rpc_interface_prefer_ipv6: true\n");
	ck_assert_str_eq(addr_text(&c.listen_address), "127.0.0.1:7000");
	ck_assert_str_eq(addr_text(&c.broadcast_address), "127.0.0.1:7000");
	ck_assert_str_eq(addr_text(&c.rpc_address), "[::1]:9042");
	ck_assert_str_eq(addr_text(&c.broadcast_rpc_address), "[::1]:9042");
	conf_free(&c);
	load_ok(&c, "listen_interface: lo\nlisten_interface_prefer_ipv6: "
		    "true\n");
	ck_assert_str_eq(addr_text(&c.listen_address), "[::1]:7000");
	ck_assert_str_eq(addr_text(&c.rpc_address), "[::1]:9042");
	conf_free(&c);
}
END_TEST

START_TEST(address_rules_use_cassandras_messages)
{
	const char *m = load_fails(
		"listen_address: 127.0.0.1\nlisten_interface: lo\n", NULL);
	ck_assert_contains(m, "Set listen_address OR listen_interface, not "
			      "both");
	m = load_fails("rpc_address: 127.0.0.1\nrpc_interface: lo\n", NULL);
	ck_assert_contains(m, "Set rpc_address OR rpc_interface, not both");
	m = load_fails("listen_interface: nope9\n", NULL);
	ck_assert_contains(m, "listen_interface: Configured listen_interface "
			      "\"nope9\" could not be found");
	m = load_fails("broadcast_address: 0.0.0.0\n", NULL);
	ck_assert_contains(m, "broadcast_address cannot be a wildcard address "
			      "(0.0.0.0)!");
	m = load_fails("rpc_address: 0.0.0.0\n", NULL);
	ck_assert_contains(m, "If rpc_address is set to a wildcard address "
			      "(0.0.0.0), then you must set "
			      "broadcast_rpc_address to a value other than "
			      "0.0.0.0");
	m = load_fails("rpc_address: '::'\nbroadcast_rpc_address: '::'\n",
		       NULL);
	ck_assert_contains(m, "broadcast_rpc_address cannot be a wildcard "
			      "address (::)!");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("conf");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, defaults_match_cassandra);
	tcase_add_test(tc, full_config_loads_with_units_lists_and_seeds);
	tcase_add_test(tc, unknown_key_is_named_with_line_and_suggestion);
	tcase_add_test(tc, out_of_range_and_bad_types_are_refused);
	tcase_add_test(tc, durations_and_sizes_take_cassandra_units);
	tcase_add_test(tc, cross_key_rules_are_checked);
	tcase_add_test(tc, yaml_syntax_errors_name_the_line);
	tcase_add_test(tc, rackdc_properties_are_strict);
	tcase_add_test(tc, empty_file_means_every_default);
	tcase_add_test(tc, key_docs_cover_every_key);
	tcase_add_test(tc, repair_scheduler_section_is_a_mapping_of_its_keys);
	tcase_add_test(tc, replica_filtering_protection_is_a_section);
	tcase_add_test(tc, broadcast_addresses_default_as_in_cassandra);
	tcase_add_test(tc, ipv6_addresses_work_everywhere);
	tcase_add_test(tc, interfaces_give_their_address);
	tcase_add_test(tc, address_rules_use_cassandras_messages);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
