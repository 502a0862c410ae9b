"""The Prometheus endpoint (metrics_port), scraped while a two-node
cluster works and after a replica dies, and parsed with Prometheus' own
text-format parser: every family is well formed, and the counters move as
the work does (requests by operation and consistency level, table writes,
bytes compacted, repair sessions, Unavailable and hints once a replica is
gone), a rebuild's progress. Addresses 127.0.85.x and 127.0.100.62-63."""
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from cassandra import ConsistencyLevel, Unavailable
from cassandra.query import SimpleStatement
from prometheus_client.parser import text_string_to_metric_families

from clusters import TOOL, session, tool
from conftest import default_yaml, seeds_yaml, wait_all_normal

IPS = ["127.0.85.1", "127.0.85.2"]
PORT = 9507


def scrape(ip):
    with urllib.request.urlopen(f"http://{ip}:{PORT}/metrics",
                                timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {}
    for f in families.values():
        for s in f.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return families, samples


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def yaml_for(ip):
    return default_yaml(listen_address=ip, rpc_address=ip,
                        seed_provider=seeds_yaml(IPS[0]),
                        metrics_port=PORT, hinted_handoff_enabled="true")


@pytest.fixture
def two_nodes(make_node):
    nodes = [make_node(yaml_for(ip), name=f"node{i + 1}")
             for i, ip in enumerate(IPS)]
    for n in nodes:
        n.start()
        assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    wait_all_normal(IPS, timeout=60)
    return nodes


def test_metrics_follow_the_work(two_nodes):
    families, samples = scrape(IPS[0])
    assert families["cassandra_client_request_latency_seconds"].type == \
        "histogram"
    for name in ("cassandra_client_native_connections",
                 "cassandra_storage_hints_in_progress",
                 "cassandra_table_live_sstables",
                 "cassandra_endpoint_active", "cassini_endpoint_phi",
                 "process_resident_memory_bytes", "process_open_fds"):
        assert families[name].type == "gauge", name
    for name in ("cassandra_client_request_unavailable_exceptions",
                 "cassandra_storage_hints", "cassandra_dropped_messages",
                 "process_cpu_seconds"):
        assert families[name].type == "counter", name
    assert value(samples, "cassandra_endpoint_active",
                 endpoint=IPS[1]) == 1
    assert value(samples, "process_resident_memory_bytes") > 0

    cluster, s = session(IPS[0])
    try:
        s.execute("CREATE KEYSPACE m WITH replication = "
                  "{'class': 'NetworkTopologyStrategy', 'dc1': 2}")
        s.execute("CREATE TABLE m.t (k int PRIMARY KEY, v text)")
        ins = s.prepare("INSERT INTO m.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.QUORUM
        sel = s.prepare("SELECT v FROM m.t WHERE k = ?")
        sel.consistency_level = ConsistencyLevel.ONE
        for k in range(200):
            s.execute(ins, (k, "x" * 20))
        for k in range(100):
            assert s.execute(sel, (k,)).one().v == "x" * 20

        families, samples = scrape(IPS[0])
        w = dict(operation="write", consistency="QUORUM")
        r = dict(operation="read", consistency="ONE")
        name = "cassandra_client_request_latency_seconds"
        assert value(samples, name + "_count", **w) >= 200
        assert value(samples, name + "_count", **r) >= 100
        assert value(samples, name + "_sum", **w) > 0
        buckets = sorted(
            (float("inf") if dict(k[1])["le"] == "+Inf"
             else float(dict(k[1])["le"]), v)
            for k, v in samples.items()
            if k[0] == name + "_bucket" and
            dict(k[1]).get("consistency") == "QUORUM" and
            dict(k[1]).get("operation") == "write")
        counts = [c for _, c in buckets]
        assert counts == sorted(counts), buckets  # cumulative
        assert counts[-1] == value(samples, name + "_count", **w)
        assert value(samples, "cassandra_client_native_connections") >= 1
        writes = value(samples, "cassini_table_local_writes_total",
                       keyspace="m", table="t")
        assert writes >= 200, writes
        # compaction: two flushed SSTables compacted into one; repair: a
        # full session that ends well (the replicas agree: nothing sent)
        assert value(samples, "cassandra_compaction_bytes_compacted_total") \
            == 0
        for k in range(200, 210):
            s.execute(ins, (k, "y"))
        tool(IPS[0], "flush", "m")
        for k in range(210, 220):
            s.execute(ins, (k, "y"))
        tool(IPS[0], "flush", "m")
        tool(IPS[0], "compact", "m", "t")
        families, samples = scrape(IPS[0])
        assert families["cassandra_compaction_bytes_compacted"].type == \
            "counter"
        assert value(samples, "cassandra_compaction_bytes_compacted_total") \
            > 0
        assert value(samples, "cassini_compaction_remaining_bytes") == 0
        assert value(samples,
                     "cassini_compaction_throughput_limit_bytes_per_second"
                     ) >= 0
        full = dict(type="full", outcome="success")
        assert value(samples, "cassini_repair_sessions_total", **full) == 0
        assert value(samples, "cassini_repair_sessions_running") == 0
        tool(IPS[0], "repair", "--full", "m")
        families, samples = scrape(IPS[0])
        assert families["cassini_repair_sessions"].type == "counter"
        assert value(samples, "cassini_repair_sessions_total", **full) == 1
        assert value(samples, "cassini_repair_sessions_total",
                     type="full", outcome="failure") == 0
        assert value(samples, "cassini_repair_sessions_total",
                     type="incremental", outcome="success") == 0
        assert value(samples, "cassini_repair_streamed_bytes_total") == 0
        assert value(samples, "cassini_stream_outgoing_bytes_total") == 0
        _, samples = scrape(IPS[0])
        hints_before = value(samples, "cassandra_storage_hints_total")
        unav_before = value(
            samples, "cassandra_client_request_unavailable_exceptions_total",
            operation="write", consistency="ALL") or 0

        # A replica dies: writes at ALL are Unavailable, writes at ONE
        # leave hints for it.
        two_nodes[1].stop(signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, samples = scrape(IPS[0])
            if value(samples, "cassandra_endpoint_active",
                     endpoint=IPS[1]) == 0:
                break
            time.sleep(0.5)
        else:
            pytest.fail("node1 never saw node2 down")
        all_ = SimpleStatement("INSERT INTO m.t (k, v) VALUES (1, 'a')",
                               consistency_level=ConsistencyLevel.ALL)
        with pytest.raises(Unavailable):
            s.execute(all_)
        one = SimpleStatement("INSERT INTO m.t (k, v) VALUES (2, 'b')",
                              consistency_level=ConsistencyLevel.ONE)
        for _ in range(5):
            s.execute(one)
        _, samples = scrape(IPS[0])
        assert value(
            samples, "cassandra_client_request_unavailable_exceptions_total",
            operation="write", consistency="ALL") == unav_before + 1
        assert value(samples, "cassandra_storage_hints_total") >= \
            hints_before + 5
        assert value(samples, "cassini_gossip_down_endpoints") == 1
    finally:
        cluster.shutdown()


def test_only_metrics_is_served(make_node):
    n = make_node(default_yaml(listen_address="127.0.85.3",
                               rpc_address="127.0.85.3",
                               seed_provider=seeds_yaml("127.0.85.3"),
                               metrics_port=PORT))
    n.start()
    assert n.wait_for_log("metrics endpoint on http://127.0.85.3:%d/metrics"
                          % PORT, timeout=60), n.log()
    for path, code in (("/", 404), ("/metrics/x", 404)):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.85.3:{PORT}{path}",
                                   timeout=10)
        assert e.value.code == code
    for body, code in ((None, 501), (b"x" * 100, 413)):
        req = urllib.request.Request(f"http://127.0.85.3:{PORT}/metrics",
                                     data=body, method="POST")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == code
    families, _ = scrape("127.0.85.3")  # still serving
    assert "cassandra_client_native_connections" in families


def test_metrics_address_is_never_a_wildcard(make_node):
    n = make_node(default_yaml(listen_address="127.0.85.4",
                               metrics_address="0.0.0.0",
                               metrics_port=PORT))
    assert n.start().wait(timeout=30) == 2
    err = n.stderr_path.read_text()
    assert "metrics_address cannot be a wildcard address (0.0.0.0)" in err


def test_metrics_off_by_default(make_node):
    n = make_node(default_yaml(listen_address="127.0.85.5",
                               rpc_address="127.0.85.5",
                               seed_provider=seeds_yaml("127.0.85.5")))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    assert "metrics endpoint" not in n.log()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.85.5:{PORT}/metrics",
                               timeout=5)


def test_movement_progress(make_node):
    """A rebuild slowed to 1 KiB/s of validation reads (its sessions'
    scans share compaction_throughput): its ranges and keyspaces, to
    stream and streamed, while it runs. Addresses 127.0.100.62-63."""
    a, b = "127.0.100.62", "127.0.100.63"
    nodes = []
    for ip in (a, b):
        n = make_node(default_yaml(listen_address=ip, rpc_address=ip,
                                   seed_provider=seeds_yaml(a),
                                   compaction_throughput="1KiB/s",
                                   metrics_port=PORT), name=ip)
        n.start()
        assert n.wait_for_log("CQL clients on", timeout=60), n.log()
        nodes.append(n)
    wait_all_normal([a, b], timeout=60)
    c, s = session(a)
    try:
        s.execute("CREATE KEYSPACE mv WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 2}")
        s.execute("CREATE TABLE mv.t (k int PRIMARY KEY, v text)")
        assert c.control_connection.wait_for_schema_agreement(wait_time=30)
        ins = s.prepare("INSERT INTO mv.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.ALL
        for k in range(100):
            s.execute(ins, (k, "v" * 40))
    finally:
        c.shutdown()
    _, samples = scrape(b)
    assert value(samples, "cassini_movement_ranges",
                 operation="rebuild", state="all") is None
    p = subprocess.Popen([TOOL, "-h", b, "rebuild"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    seen = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        _, samples = scrape(b)
        total = value(samples, "cassini_movement_ranges",
                      operation="rebuild", state="all")
        if total:
            seen = samples
            break
        time.sleep(0.1)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, out + err
    assert seen is not None, "the rebuild was never seen streaming"
    rb = dict(operation="rebuild")
    assert value(seen, "cassini_movement_ranges", state="streamed",
                 **rb) <= value(seen, "cassini_movement_ranges",
                                state="all", **rb)
    assert value(seen, "cassini_movement_keyspaces", state="all", **rb) >= 1
    assert value(seen, "cassini_movement_keyspaces", state="streamed",
                 **rb) == 0
    assert value(seen, "cassini_movement_streamed_bytes", **rb) >= 0
    assert value(seen, "cassini_movement_streamed_rows", **rb) >= 0
    # a movement's sessions are not repairs
    assert value(seen, "cassini_repair_sessions_running") == 0
