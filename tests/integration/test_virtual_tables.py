"""system_views (Cassandra 4.0+ virtual tables) through the stock python
driver: the keyspace and its tables in the driver's metadata (read from
system_virtual_schema) with Cassandra 4.1's columns and types, the rows of
settings, clients, thread_pools, gossip_info, disk_usage, pending_hints,
max_partition_size and the local latency tables, internode_inbound and
internode_outbound (two nodes), repairs and repair_sessions (a repair
seen running, then done; full and incremental), WHERE on the key, and
writes refused as Cassandra refuses them. Addresses 127.0.100.1,
127.0.100.30-31 and 127.0.100.60-61."""
import os
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel, InvalidRequest
from cassandra.cluster import Cluster

from clusters import TOOL, session, tool
from conftest import default_yaml, seeds_yaml, wait_all_normal

IP = "127.0.100.1"

# Cassandra's ApplicationState names (GossipInfoTable: a text and a
# version column each; TOKENS only its version)
GOSSIP_STATES = [
    "status", "load", "schema", "dc", "rack", "release_version",
    "removal_coordinator", "internal_ip", "rpc_address", "x_11_padding",
    "severity", "net_version", "host_id", "rpc_ready",
    "internal_address_and_port", "native_address_and_port",
    "status_with_port", "sstable_versions", "disk_usage",
] + ["x%d" % i for i in range(1, 11)]

# TableMetricTables' latency tables
LATENCY = {"keyspace_name": "text", "table_name": "text", "count": "bigint",
           "max_ms": "double", "p50th_ms": "double", "p99th_ms": "double",
           "per_second": "double"}

HISTOGRAM = {"keyspace_name": "text", "table_name": "text", "count": "bigint",
             "max": "double", "p50th": "double", "p99th": "double"}

# InternodeInboundTable / InternodeOutboundTable: their counters
INBOUND = ["using_bytes", "using_reserve_bytes", "corrupt_frames_recovered",
           "corrupt_frames_unrecovered", "error_bytes", "error_count",
           "expired_bytes", "expired_count", "scheduled_bytes",
           "scheduled_count", "processed_bytes", "processed_count",
           "received_bytes", "received_count", "throttled_count",
           "throttled_nanos"]
OUTBOUND = ["using_bytes", "using_reserve_bytes", "pending_count",
            "pending_bytes", "sent_count", "sent_bytes", "expired_count",
            "expired_bytes", "error_count", "error_bytes", "overload_count",
            "overload_bytes", "active_connections", "connection_attempts",
            "successful_connection_attempts"]

# Cassandra 5.0's LocalRepairTables: the columns every state table has
REPAIR_STD = {"id": "timeuuid", "last_updated_at": "timestamp",
              "completed": "boolean", "duration_millis": "bigint",
              "failure_cause": "text", "success_message": "text",
              "state_init_timestamp": "timestamp",
              "state_success_timestamp": "timestamp",
              "state_skipped_timestamp": "timestamp",
              "state_failure_timestamp": "timestamp", "status": "text"}
REPAIR_STEPS = ["setup", "start", "prepare_start", "prepare_complete",
                "repair_start", "repair_complete"]

# Cassandra 4.1's db/virtual/*Table.java: column -> CQL type (and 5.0's
# sai_column_indexes, repairs, repair_sessions)
EXPECTED = {
    "repairs": dict(
        REPAIR_STD, command_id="int", keyspace_name="text", type="text",
        sessions="frozen<set<timeuuid>>", options_parallelism="text",
        options_primary_range="boolean", options_incremental="boolean",
        options_trace="boolean", options_job_threads="int",
        options_subrange_repair="boolean", options_pull_repair="boolean",
        options_force_repair="boolean", options_preview_kind="text",
        options_optimise_streams="boolean",
        options_ignore_unreplicated_keyspaces="boolean",
        options_column_families="frozen<set<text>>",
        options_data_centers="frozen<set<text>>",
        options_hosts="frozen<set<text>>",
        options_ranges="frozen<set<text>>",
        table_names="frozen<list<text>>",
        ranges="frozen<list<frozen<list<text>>>>",
        unfiltered_ranges="frozen<list<frozen<list<text>>>>",
        participants="frozen<list<text>>",
        **{"state_%s_timestamp" % st: "timestamp" for st in REPAIR_STEPS}),
    "repair_sessions": dict(
        REPAIR_STD, repair_id="timeuuid", keyspace_name="text",
        table_names="frozen<list<text>>", ranges="frozen<list<text>>",
        participants="frozen<list<text>>", jobs="frozen<set<uuid>>",
        state_start_timestamp="timestamp",
        state_jobs_start_timestamp="timestamp"),
    "local_scan_latency": LATENCY,
    "settings": {"name": "text", "value": "text"},
    "clients": {
        "address": "inet", "port": "int",
        "client_options": "map<text, text>",
        "connection_stage": "text", "driver_name": "text",
        "driver_version": "text", "hostname": "text",
        "protocol_version": "int", "request_count": "bigint",
        "ssl_cipher_suite": "text", "ssl_enabled": "boolean",
        "ssl_protocol": "text", "username": "text",
    },
    "pending_hints": {
        "host_id": "uuid", "address": "inet", "port": "int", "rack": "text",
        "dc": "text", "status": "text", "files": "int",
        "total_size": "bigint", "corrupted_files": "int",
        "total_corrupted_files_size": "bigint", "newest": "timestamp",
        "oldest": "timestamp",
    },
    "disk_usage": {"keyspace_name": "text", "table_name": "text",
                   "mebibytes": "bigint"},
    "max_partition_size": {"keyspace_name": "text", "table_name": "text",
                           "mebibytes": "bigint"},
    "local_read_latency": LATENCY,
    "local_write_latency": LATENCY,
    "coordinator_read_latency": LATENCY,
    "coordinator_scan_latency": LATENCY,
    "coordinator_write_latency": LATENCY,
    "rows_per_read": HISTOGRAM,
    "tombstones_per_read": HISTOGRAM,
    "caches": {"name": "text", "capacity_bytes": "bigint",
               "entry_count": "int", "hit_count": "bigint",
               "hit_ratio": "double", "recent_hit_rate_per_second": "bigint",
               "recent_request_rate_per_second": "bigint",
               "request_count": "bigint", "size_bytes": "bigint"},
    "sstable_tasks": {"keyspace_name": "text", "table_name": "text",
                      "task_id": "uuid", "completion_ratio": "double",
                      "kind": "text", "progress": "bigint",
                      "total": "bigint", "unit": "text"},
    # Cassandra 5.0's ColumnIndexesSystemView
    "sai_column_indexes": {"keyspace_name": "text", "index_name": "text",
                           "table_name": "text", "column_name": "text",
                           "is_queryable": "boolean",
                           "is_building": "boolean", "is_string": "boolean",
                           "analyzer": "text"},
    "gossip_info": dict(
        {"address": "inet", "port": "int", "hostname": "text",
         "generation": "int", "heartbeat": "int", "tokens_version": "int"},
        **{st: "text" for st in GOSSIP_STATES},
        **{st + "_version": "int" for st in GOSSIP_STATES}),
    "thread_pools": {
        "name": "text", "active_tasks": "int", "active_tasks_limit": "int",
        "blocked_tasks": "bigint", "blocked_tasks_all_time": "bigint",
        "completed_tasks": "bigint", "pending_tasks": "int",
    },
    "internode_inbound": dict(
        {"address": "inet", "port": "int", "dc": "text", "rack": "text"},
        **{c: "bigint" for c in INBOUND}),
    "internode_outbound": dict(
        {"address": "inet", "port": "int", "dc": "text", "rack": "text"},
        **{c: "bigint" for c in OUTBOUND}),
}


@pytest.fixture
def node(make_node):
    n = make_node(default_yaml(listen_address=IP, rpc_address=IP,
                               seed_provider=seeds_yaml(IP),
                               concurrent_compactors=3))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    return n


def test_metadata_lists_system_views(node):
    cluster, s = session(IP)
    try:
        ks = cluster.metadata.keyspaces["system_views"]
        assert ks.virtual
        assert set(ks.tables) == set(EXPECTED)
        for name, columns in EXPECTED.items():
            t = ks.tables[name]
            assert t.virtual
            got = {c: t.columns[c].cql_type for c in t.columns}
            assert got == columns, name
        assert [c.name for c in ks.tables["clients"].partition_key] == \
            ["address"]
        assert [c.name for c in ks.tables["clients"].clustering_key] == \
            ["port"]
        assert [c.name for c in ks.tables["settings"].partition_key] == \
            ["name"]
        vs = cluster.metadata.keyspaces["system_virtual_schema"]
        assert vs.virtual
        assert set(vs.tables) == {"keyspaces", "tables", "columns"}
        # not a regular keyspace: system_schema does not list it
        rows = s.execute("SELECT keyspace_name FROM system_schema.keyspaces")
        assert "system_views" not in {r.keyspace_name for r in rows}
    finally:
        cluster.shutdown()


# Cassandra 4.1's DescribeStatementTest.testDescribeVirtualTables
VIRTUAL_KS = ("/*\n"
              "Warning: Keyspace system_virtual_schema is a virtual keyspace "
              "and cannot be recreated with CQL.\n"
              "Structure, for reference:\n"
              "VIRTUAL KEYSPACE system_virtual_schema;\n"
              "*/")
VIRTUAL_COLUMNS = ("/*\n"
                   "Warning: Table system_virtual_schema.columns is a virtual "
                   "table and cannot be recreated with CQL.\n"
                   "Structure, for reference:\n"
                   "VIRTUAL TABLE system_virtual_schema.columns (\n"
                   "    keyspace_name text,\n"
                   "    table_name text,\n"
                   "    column_name text,\n"
                   "    clustering_order text,\n"
                   "    column_name_bytes blob,\n"
                   "    kind text,\n"
                   "    position int,\n"
                   "    type text,\n"
                   "    PRIMARY KEY (keyspace_name, table_name, column_name)\n"
                   ") WITH CLUSTERING ORDER BY (table_name ASC, "
                   "column_name ASC)\n"
                   "    AND comment = 'virtual column definitions';\n"
                   "*/")


def test_describe_and_use_virtual_keyspaces(node):
    cluster, s = session(IP)
    try:
        listed = [r.name for r in s.execute("DESCRIBE KEYSPACES")]
        assert "system_views" in listed
        assert "system_virtual_schema" in listed
        assert listed == sorted(listed)
        rows = list(s.execute(
            "DESCRIBE ONLY KEYSPACE system_virtual_schema"))
        assert [tuple(r) for r in rows] == [
            ("system_virtual_schema", "keyspace", "system_virtual_schema",
             VIRTUAL_KS)]
        rows = list(s.execute("DESCRIBE TABLE system_virtual_schema.columns"))
        assert [tuple(r) for r in rows] == [
            ("system_virtual_schema", "table", "columns", VIRTUAL_COLUMNS)]
        # the whole keyspace: its definition, then every table by name
        rows = list(s.execute("DESCRIBE KEYSPACE system_views"))
        assert rows[0].type == "keyspace"
        tables = [r.name for r in rows[1:]]
        assert tables == sorted(tables) and "settings" in tables
        assert all(r.create_statement.startswith("/*\nWarning: Table "
                                                 "system_views.")
                   for r in rows[1:])
        # DESCRIBE SCHEMA leaves the system keyspaces out, FULL has them
        assert not [r for r in s.execute("DESCRIBE SCHEMA")
                    if r.keyspace_name.startswith("system")]
        full = {r.keyspace_name for r in s.execute("DESCRIBE FULL SCHEMA")}
        assert {"system_views", "system_virtual_schema"} <= full
        # USE a virtual keyspace, then its tables by their bare names
        s.execute("USE system_views")
        got = [r.name for r in s.execute("DESCRIBE settings")]
        assert got == ["settings"]
        one = list(s.execute("SELECT value FROM settings "
                             "WHERE name = 'cluster_name'"))
        assert [r.value for r in one] == ["Integration"]
    finally:
        cluster.shutdown()


def test_settings(node):
    cluster, s = session(IP)
    try:
        rows = {r.name: r.value
                for r in s.execute("SELECT * FROM system_views.settings")}
        # every node.yaml key, with its effective value
        assert rows["cluster_name"] == "Integration"
        assert rows["listen_address"] == IP
        assert rows["concurrent_compactors"] == "3"
        assert len(rows) > 40
        names = [r.name for r in
                 s.execute("SELECT name FROM system_views.settings")]
        assert names == sorted(names)
        one = list(s.execute("SELECT value FROM system_views.settings "
                             "WHERE name = 'cluster_name'"))
        assert [r.value for r in one] == ["Integration"]
        ps = s.prepare("SELECT name, value FROM system_views.settings "
                       "WHERE name = ?")
        assert [(r.name, r.value) for r in
                s.execute(ps, ["rpc_address"])] == [("rpc_address", IP)]
        assert list(s.execute(ps, ["no_such_key"])) == []
    finally:
        cluster.shutdown()


def test_clients(node):
    cluster, s = session(IP)
    try:
        for _ in range(5):
            s.execute("SELECT key FROM system.local")
        rows = list(s.execute("SELECT * FROM system_views.clients"))
        # the driver's control connection and its pool's connection
        assert len(rows) >= 2, rows
        ports = set()
        for r in rows:
            assert r.address == "127.0.0.1" or r.address.startswith("127.")
            assert r.hostname == r.address
            assert r.connection_stage == "ready"
            assert r.protocol_version == 4
            assert r.driver_name == "DataStax Python Driver"
            assert r.driver_version
            assert r.ssl_enabled is False
            assert r.username is None
            ports.add(r.port)
        assert len(ports) == len(rows)
        # the pool's connection served the SELECTs above
        assert max(r.request_count for r in rows) >= 5
        # a second client shows up, and its port is the key
        c2 = Cluster([IP], protocol_version=4)
        s2 = c2.connect()
        try:
            after = list(s.execute("SELECT port FROM system_views.clients"))
            assert len(after) > len(rows)
            port = next(p.port for p in after if p.port not in ports)
            addr = rows[0].address
            one = list(s.execute(
                "SELECT port, driver_name FROM system_views.clients "
                "WHERE address = %s AND port = %s", (addr, port)))
            assert [(r.port, r.driver_name) for r in one] == \
                [(port, "DataStax Python Driver")]
        finally:
            c2.shutdown()
    finally:
        cluster.shutdown()


def test_thread_pools(node):
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE v WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE v.t (k int PRIMARY KEY, x int)")
        for k in range(7):
            s.execute("INSERT INTO v.t (k, x) VALUES (%s, %s)", (k, k))
        rows = {r.name: r for r in
                s.execute("SELECT * FROM system_views.thread_pools")}
        # the pools tpstats lists, with its figures
        out = tool(IP, "tpstats")
        listed = {}
        for line in out.splitlines()[1:]:
            if not line.strip():
                break
            f = line.split()
            listed[f[0]] = int(f[3])
        assert set(rows) == set(listed)
        # the coordinator ran the 7 INSERTs (and the DDL, this SELECT)
        assert rows["CoordinatorStage"].completed_tasks >= 7
        assert listed["CoordinatorStage"] >= \
            rows["CoordinatorStage"].completed_tasks
        for r in rows.values():
            assert r.active_tasks >= 0 and r.pending_tasks >= 0
            assert r.blocked_tasks_all_time >= r.blocked_tasks >= 0
        one = list(s.execute("SELECT name, completed_tasks FROM "
                             "system_views.thread_pools "
                             "WHERE name = 'CoordinatorStage'"))
        assert len(one) == 1 and one[0].completed_tasks >= 7
    finally:
        cluster.shutdown()


def test_gossip_info(node):
    cluster, s = session(IP)
    try:
        rows = list(s.execute("SELECT * FROM system_views.gossip_info"))
        assert len(rows) == 1, rows
        r = rows[0]
        local = s.execute("SELECT host_id, data_center, rack, "
                          "schema_version FROM system.local").one()
        assert (r.address, r.hostname) == (IP, IP)
        assert r.port == 7000
        assert r.generation > 0 and r.heartbeat >= 0
        assert r.status_with_port.startswith("NORMAL,")
        assert r.host_id == str(local.host_id)
        assert (r.dc, r.rack) == (local.data_center, local.rack)
        assert r.schema == str(local.schema_version)
        assert r.tokens_version > 0 and r.status_with_port_version > 0
        # states Cassini does not gossip stay null
        assert r.x1 is None and r.status is None
        one = list(s.execute("SELECT address, port FROM "
                             "system_views.gossip_info WHERE address = %s",
                             (IP,)))
        assert [(x.address, x.port) for x in one] == [(IP, 7000)]
    finally:
        cluster.shutdown()


def test_disk_usage_and_pending_hints(node):
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE d WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        for t in ("b", "a"):
            s.execute("CREATE TABLE d.%s (k int PRIMARY KEY, x blob)" % t)
        blob = os.urandom(1 << 20)  # 1 MiB that LZ4 cannot shrink
        for k in range(3):
            s.execute("INSERT INTO d.b (k, x) VALUES (%s, %s)",
                      (k, bytearray(blob)))
        s.execute("INSERT INTO d.a (k, x) VALUES (1, 0x00)")
        tool(IP, "flush", "d")
        rows = [(r.keyspace_name, r.table_name, r.mebibytes) for r in
                s.execute("SELECT * FROM system_views.disk_usage")]
        mine = [r for r in rows if r[0] == "d"]
        # sorted by key; a tiny SSTable rounds up to 1 MiB as Cassandra's
        assert [r[1] for r in mine] == ["a", "b"], rows
        assert mine[0][2] == 1
        assert mine[1][2] >= 1
        one = list(s.execute("SELECT mebibytes FROM system_views.disk_usage "
                             "WHERE keyspace_name = 'd' AND "
                             "table_name = 'b'"))
        assert [r.mebibytes for r in one] == [mine[1][2]]
        # one node: no hints
        assert list(s.execute("SELECT * FROM system_views.pending_hints")) \
            == []
    finally:
        cluster.shutdown()


def test_table_metric_tables(node):
    """local_read_latency, local_write_latency and max_partition_size:
    a row per table, the replica's own reads and writes counted."""
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE m WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE m.t (k int PRIMARY KEY, v text)")
        for k in range(3):
            s.execute("INSERT INTO m.t (k, v) VALUES (%s, 'x')", (k,))
        for k in range(2):
            s.execute("SELECT v FROM m.t WHERE k = %s", (k,))
        where = " WHERE keyspace_name = 'm' AND table_name = 't'"
        w = s.execute("SELECT * FROM system_views.local_write_latency" +
                      where).one()
        r = s.execute("SELECT * FROM system_views.local_read_latency" +
                      where).one()
        assert w.count == 3 and r.count == 2, (w, r)
        for row in (w, r):
            assert 0 <= row.p50th_ms <= row.p99th_ms <= row.max_ms, row
            assert row.per_second is None
        # rows and tombstones per read: the two reads met one row each
        q = "SELECT * FROM system_views.%s" + where
        rows = s.execute(q % "rows_per_read").one()
        tombs = s.execute(q % "tombstones_per_read").one()
        assert (rows.count, rows.p50th, rows.max) == (2, 1.0, 1.0), rows
        assert (tombs.count, tombs.max) == (2, 0.0), tombs
        s.execute("DELETE FROM m.t WHERE k = 2")
        assert list(s.execute("SELECT v FROM m.t WHERE k = 2")) == []
        tombs = s.execute(q % "tombstones_per_read").one()
        assert (tombs.count, tombs.max) == (3, 1.0), tombs
        # every table has a row, sorted by key
        keys = [(x.keyspace_name, x.table_name) for x in
                s.execute("SELECT * FROM system_views.local_read_latency")]
        assert ("m", "t") in keys and keys == sorted(keys), keys
        # SSTables only: nothing before the flush, a tiny one rounds up
        q = "SELECT mebibytes FROM system_views.max_partition_size" + where
        assert s.execute(q).one().mebibytes == 0
        tool(IP, "flush", "m")
        assert s.execute(q).one().mebibytes == 1
        # the block cache: its row; reads of the flushed SSTable use it
        before = s.execute("SELECT * FROM system_views.caches").one()
        for k in range(3):
            s.execute("SELECT v FROM m.t WHERE k = %s", (k,))
        rows = list(s.execute("SELECT * FROM system_views.caches"))
        assert [r.name for r in rows] == ["chunks"], rows
        c = rows[0]
        assert c.capacity_bytes == 32 << 20, c  # block_cache_size default
        assert c.request_count > before.request_count, (before, c)
        assert 0 <= c.hit_count <= c.request_count
        assert 0 <= c.hit_ratio <= 1
        assert c.entry_count >= 1 and c.size_bytes > 0, c
        assert c.recent_hit_rate_per_second is None
    finally:
        cluster.shutdown()


def test_coordinator_latency_tables(node):
    """coordinator_read_latency, coordinator_scan_latency and
    coordinator_write_latency: a row per table, the requests this node
    coordinated that succeeded (a batch counts once per table)."""
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE co WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE co.t (k int PRIMARY KEY, v text)")
        s.execute("CREATE TABLE co.u (k int PRIMARY KEY, v text)")
        for k in range(4):
            s.execute("INSERT INTO co.t (k, v) VALUES (%s, 'x')", (k,))
        s.execute("BEGIN BATCH INSERT INTO co.t (k, v) VALUES (8, 'y'); "
                  "INSERT INTO co.t (k, v) VALUES (9, 'y'); "
                  "INSERT INTO co.u (k, v) VALUES (1, 'y'); APPLY BATCH")
        for k in range(3):
            s.execute("SELECT v FROM co.t WHERE k = %s", (k,))
        assert len(list(s.execute("SELECT * FROM co.t"))) == 6
        where = " WHERE keyspace_name = 'co' AND table_name = '%s'"
        q = "SELECT * FROM system_views.coordinator_%s_latency" + where
        w, r, sc = (s.execute(q % (kind, "t")).one()
                    for kind in ("write", "read", "scan"))
        assert (w.count, r.count) == (5, 3), (w, r)
        assert sc.count >= 1, sc
        for row in (w, r, sc):
            assert 0 <= row.p50th_ms <= row.p99th_ms <= row.max_ms, row
            assert row.per_second is None
        u = s.execute(q % ("write", "u")).one()
        assert u.count == 1, u
        assert s.execute(q % ("read", "u")).one().count == 0
        keys = [(x.keyspace_name, x.table_name) for x in s.execute(
            "SELECT * FROM system_views.coordinator_read_latency")]
        assert ("co", "t") in keys and keys == sorted(keys), keys
    finally:
        cluster.shutdown()


def test_sstable_tasks_and_compactionstats(node):
    """A major compaction slowed to 1 MiB/s shows in sstable_tasks and
    compactionstats while it runs, and leaves neither when done."""
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE c WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE c.t (k int PRIMARY KEY, x blob) WITH "
                  "compaction = {'class': 'SizeTieredCompactionStrategy', "
                  "'min_threshold': 32}")
        for k in range(5):
            s.execute("INSERT INTO c.t (k, x) VALUES (%s, %s)",
                      (k, bytearray(os.urandom(1 << 20))))
            tool(IP, "flush", "c", "t")
        assert "pending tasks: 0" in tool(IP, "compactionstats")
        assert list(s.execute("SELECT * FROM system_views.sstable_tasks")) \
            == []
        tool(IP, "setcompactionthroughput", "1")
        major = subprocess.Popen([TOOL, "-h", IP, "compact", "c", "t"],
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + 60
            rows = []
            while not rows and time.time() < deadline:
                rows = list(s.execute(
                    "SELECT * FROM system_views.sstable_tasks"))
                time.sleep(0.05)
            assert len(rows) == 1, rows
            r = rows[0]
            assert (r.keyspace_name, r.table_name) == ("c", "t")
            assert (r.kind, r.unit) == ("compaction", "bytes")
            assert r.total >= 5 << 20
            assert 0 <= r.progress <= r.total
            assert 0.0 <= r.completion_ratio <= 1.0
            out = tool(IP, "compactionstats")
            lines = out.splitlines()
            assert lines[0] == "pending tasks: 1", out
            assert lines[1] == "- c.t: 1", out
            head = lines[3].split()
            assert head[:3] == ["id", "compaction", "type"], out
            row = lines[4].split()
            assert row[0] == str(r.task_id) and row[1] == "Compaction"
            assert row[2:4] == ["c", "t"] and row[6] == "bytes", out
            assert int(row[5]) == r.total
            assert lines[5].startswith("Active compaction remaining time :")
        finally:
            tool(IP, "setcompactionthroughput", "0")
            assert major.wait(timeout=120) == 0, major.stdout.read()
        assert list(s.execute("SELECT * FROM system_views.sstable_tasks")) \
            == []
        assert tool(IP, "compactionstats").splitlines()[0] == \
            "pending tasks: 0"
    finally:
        cluster.shutdown()


def test_writes_refused(node):
    cluster, s = session(IP)
    try:
        for stmt in ["INSERT INTO system_views.settings (name, value) "
                     "VALUES ('cluster_name', 'x')",
                     "UPDATE system_views.thread_pools SET active_tasks = 1 "
                     "WHERE name = 'ReadStage'",
                     "DELETE FROM system_views.settings WHERE name = 'x'",
                     "INSERT INTO system_virtual_schema.keyspaces "
                     "(keyspace_name) VALUES ('x')"]:
            with pytest.raises(InvalidRequest,
                               match="Modification is not supported by "
                                     "table system_"):
                s.execute(stmt)
        with pytest.raises(InvalidRequest,
                           match="unconfigured table nosuch"):
            s.execute("INSERT INTO system_views.nosuch (a) VALUES (1)")
        with pytest.raises(InvalidRequest,
                           match="unconfigured table nosuch"):
            s.execute("SELECT * FROM system_views.nosuch")
        # the value did not change
        one = list(s.execute("SELECT value FROM system_views.settings "
                             "WHERE name = 'cluster_name'"))
        assert one[0].value == "Integration"
    finally:
        cluster.shutdown()


def test_internode_inbound_and_outbound(make_node):
    a, b = "127.0.100.30", "127.0.100.31"
    for ip, name in ((a, "na"), (b, "nb")):
        n = make_node(default_yaml(listen_address=ip, rpc_address=ip,
                                   seed_provider=seeds_yaml(a)), name=name)
        n.start()
        assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    wait_all_normal([a, b], timeout=60)
    ca, sa = session(a)
    cb, sb = session(b)
    q_out = ("SELECT * FROM system_views.internode_outbound "
             "WHERE address = %s AND port = 7000")
    q_in = ("SELECT * FROM system_views.internode_inbound "
            "WHERE address = %s AND port = 7000")
    try:
        sa.execute("CREATE KEYSPACE ik WITH replication = "
                   "{'class': 'SimpleStrategy', 'replication_factor': 2}")
        sa.execute("CREATE TABLE ik.t (k int PRIMARY KEY, v text)")
        assert ca.control_connection.wait_for_schema_agreement(wait_time=30)
        out0 = sa.execute(q_out, (b,)).one()
        in0 = sb.execute(q_in, (a,)).one()
        assert out0 is not None and in0 is not None
        local = sa.execute("SELECT data_center, rack FROM system.peers "
                           "WHERE peer = %s", (b,)).one()
        assert (out0.dc, out0.rack) == (local.data_center, local.rack)
        ins = sa.prepare("INSERT INTO ik.t (k, v) VALUES (?, 'x')")
        ins.consistency_level = ConsistencyLevel.ALL
        for k in range(50):
            sa.execute(ins, (k,))
        # every write sent b a mutation and waited for its answer
        out1 = sa.execute(q_out, (b,)).one()
        assert out1.sent_count - out0.sent_count >= 50, (out0, out1)
        assert out1.sent_bytes > out0.sent_bytes
        assert out1.active_connections == 1
        assert out1.successful_connection_attempts >= 1
        assert out1.connection_attempts >= out1.successful_connection_attempts
        assert out1.error_count == 0 and out1.overload_count == 0
        assert out1.pending_count >= 0 and out1.pending_bytes >= 0
        assert out1.using_bytes == out1.pending_bytes
        in1 = sb.execute(q_in, (a,)).one()
        assert in1.received_count - in0.received_count >= 50, (in0, in1)
        assert in1.processed_count - in0.processed_count >= 50
        assert in1.received_bytes > in0.received_bytes
        assert in1.processed_count + in1.expired_count + in1.error_count \
            == in1.received_count
        assert in1.error_count == 0 and in1.corrupt_frames_unrecovered == 0
        # and b's answers came back to a
        back = sa.execute(q_in, (b,)).one()
        assert back.received_count >= 50, back
        # the whole tables: one row each way on each node
        assert [(r.address, r.port) for r in sa.execute(
            "SELECT address, port FROM system_views.internode_outbound")] \
            == [(b, 7000)]
        assert [(r.address, r.port) for r in sb.execute(
            "SELECT address, port FROM system_views.internode_inbound")] \
            == [(a, 7000)]
    finally:
        ca.shutdown()
        cb.shutdown()


def test_repairs_and_repair_sessions(make_node):
    """A full repair seen while it runs (validation slowed to 1 KiB/s) and
    once done, then an incremental one: Cassandra 5.0's repairs and
    repair_sessions rows, their steps in order."""
    a, b = "127.0.100.60", "127.0.100.61"
    nodes = []
    for ip, name in ((a, "ra"), (b, "rb")):
        n = make_node(default_yaml(listen_address=ip, rpc_address=ip,
                                   compaction_throughput="1KiB/s",
                                   seed_provider=seeds_yaml(a)), name=name)
        n.start()
        assert n.wait_for_log("CQL clients on", timeout=60), n.log()
        nodes.append(n)
    wait_all_normal([a, b], timeout=60)
    c, s = session(a)
    try:
        s.execute("CREATE KEYSPACE rk WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 2}")
        s.execute("CREATE TABLE rk.t (k int PRIMARY KEY, v text)")
        s.execute("CREATE INDEX ON rk.t (v)")
        assert c.control_connection.wait_for_schema_agreement(wait_time=30)
        ins = s.prepare("INSERT INTO rk.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.ALL
        for k in range(100):
            s.execute(ins, (k, "v" * 40))
        assert list(s.execute("SELECT * FROM system_views.repairs")) == []
        # a range read counts in local_scan_latency
        assert len(list(s.execute("SELECT * FROM rk.t"))) == 100
        scan = s.execute("SELECT * FROM system_views.local_scan_latency "
                         "WHERE keyspace_name = 'rk' AND table_name = 't'"
                         ).one()
        assert scan.count >= 1 and scan.max_ms >= scan.p50th_ms >= 0, scan
        # and so does an index query
        assert len(list(s.execute("SELECT k FROM rk.t WHERE v = %s",
                                  ("v" * 40,)))) == 100
        after = s.execute("SELECT * FROM system_views.local_scan_latency "
                          "WHERE keyspace_name = 'rk' AND table_name = 't'"
                          ).one()
        assert after.count > scan.count, (scan, after)

        p = subprocess.Popen([TOOL, "-h", a, "repair", "--full", "rk"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        running = None
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            rows = list(s.execute("SELECT * FROM system_views.repairs"))
            if rows and not rows[0].completed:
                running = rows[0]
                sess = list(s.execute(
                    "SELECT * FROM system_views.repair_sessions"))
                break
            time.sleep(0.1)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, out + err
        assert running is not None, "the repair was never seen running"
        assert running.status == "repair_start", running
        assert running.state_repair_start_timestamp is not None
        assert running.state_repair_complete_timestamp is None
        assert running.state_success_timestamp is None
        assert [x.status for x in sess] == ["jobs_start"], sess
        assert not sess[0].completed

        r = s.execute("SELECT * FROM system_views.repairs").one()
        assert r.id == running.id
        assert (r.completed, r.status, r.failure_cause) == \
            (True, "success", None), r
        assert (r.command_id, r.keyspace_name, r.type) == (1, "rk", "full")
        assert r.options_parallelism == "PARALLEL"
        assert r.options_incremental is False
        assert r.options_primary_range is False
        assert r.options_preview_kind == "NONE"
        assert r.options_job_threads == 1
        assert r.table_names == ["t"]
        assert sorted(r.participants) == ["/%s:7000" % a, "/%s:7000" % b]
        assert r.ranges and r.ranges == r.unfiltered_ranges
        flat = [x for group in r.ranges for x in group]
        assert set(flat) == r.options_ranges
        assert all(x.startswith("(") and x.endswith("]") for x in flat)
        steps = [getattr(r, "state_%s_timestamp" % st)
                 for st in REPAIR_STEPS]
        assert None not in steps, r
        assert steps == sorted(steps)
        assert r.state_init_timestamp <= steps[0]
        assert steps[-1] <= r.state_success_timestamp == r.last_updated_at
        assert r.state_failure_timestamp is None and r.duration_millis >= 0
        sess = list(s.execute("SELECT * FROM system_views.repair_sessions"))
        assert len(sess) == 1
        x = sess[0]
        assert r.sessions == {x.id}
        assert (x.repair_id, x.keyspace_name, x.status, x.completed) == \
            (r.id, "rk", "success", True), x
        assert x.table_names == ["t"] and x.ranges == flat
        assert sorted(x.participants) == sorted(r.participants)
        assert x.state_start_timestamp <= x.state_jobs_start_timestamp
        # WHERE on the key
        assert s.execute("SELECT status FROM system_views.repairs "
                         "WHERE id = %s", (r.id,)).one().status == "success"

        # incremental (nodetool 4's default): PREPARE before the tasks
        out = tool(a, "repair", "rk")
        rows = list(s.execute("SELECT * FROM system_views.repairs"))
        assert len(rows) == 2, rows
        inc = [x for x in rows if x.command_id == 2][0]
        assert (inc.type, inc.options_incremental, inc.status) == \
            ("incremental", True, "success"), inc
        assert inc.state_prepare_start_timestamp <= \
            inc.state_prepare_complete_timestamp <= \
            inc.state_repair_start_timestamp
        assert len(list(s.execute(
            "SELECT * FROM system_views.repair_sessions"))) == 2

        # the other node coordinated nothing
        cb, sb = session(b)
        try:
            assert list(sb.execute(
                "SELECT * FROM system_views.repairs")) == []
        finally:
            cb.shutdown()
        t = s.execute("SELECT comment FROM system_virtual_schema.tables "
                      "WHERE keyspace_name = 'system_views' AND "
                      "table_name = 'repairs'").one()
        assert t.comment == "Repair summary"
    finally:
        c.shutdown()
