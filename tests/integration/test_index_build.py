"""Building an index over existing data on a real 3-node cluster, RF 3,
with the stock DataStax driver (docs/indexes.md, "Building an index").

CREATE INDEX on a table holding data in SSTables and memtables builds
the index on every node; while one node's build is held back
(`indexbuildfault hold`, test clusters only: the build waits before its
first SSTable, listed by compactionstats and sstable_tasks) its index is
not queryable there: an indexed query that needs that replica fails with ReadFailure
(INDEX_NOT_AVAILABLE from that node, Cassandra's message), and a query
that reaches only built replicas answers in full, never a partial
result. system_views.sai_column_indexes and system."IndexInfo" show the
states. A restart mid-build finishes the build; `rebuild_index` builds
again and waits. Nodes on 127.0.109.20-22. No timing thresholds."""
import os
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel, InvalidRequest, ReadFailure
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

from conftest import BUILD_DIR, SOURCE_DIR

IPS = ["127.0.109.20", "127.0.109.21", "127.0.109.22"]
NODES = ["node1", "node2", "node3"]
ONE, ALL = ConsistencyLevel.ONE, ConsistencyLevel.ALL
K = 300


@pytest.fixture
def cluster(tmp_path):
    env = dict(os.environ, CASSINI_HOME=str(tmp_path / "home"),
               CASSINI_BIN_DIR=str(BUILD_DIR))
    script = str(SOURCE_DIR / "scripts" / "cluster.py")

    def run(*args, check=True):
        r = subprocess.run(["/usr/bin/python3", script, "-C", "ixb", *args],
                           capture_output=True, text=True, env=env,
                           timeout=180)
        if check:
            assert r.returncode == 0, r.stdout + r.stderr
        return r

    def spawn(*args):
        return subprocess.Popen(["/usr/bin/python3", script, "-C", "ixb",
                                 *args], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env)

    subprocess.run(["/usr/bin/python3", script, "create", "ixb", "-n", "3",
                    "--racks", "3", "--base-ip", IPS[0],
                    "-c", "gossip_interval=250ms"],
                   check=True, capture_output=True, env=env, timeout=180)
    run("start")
    run.spawn = spawn
    yield run
    subprocess.run(["/usr/bin/python3", script, "-C", "ixb", "remove"],
                   env=env, capture_output=True, timeout=60)


def pinned_to(ip):
    pinned = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([ip]))
    return Cluster([ip], protocol_version=4,
                   execution_profiles={EXEC_PROFILE_DEFAULT: pinned})


def until(pred, what, ceiling=90):
    deadline = time.monotonic() + ceiling
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"never happened: {what}")


def states(ip):
    """(is_queryable, is_building) of ks.t_v on node `ip`, and whether
    system."IndexInfo" lists it there."""
    c = pinned_to(ip)
    try:
        s = c.connect()
        rows = list(s.execute(
            "SELECT index_name, table_name, column_name, is_queryable, "
            "is_building, is_string, analyzer FROM "
            "system_views.sai_column_indexes WHERE keyspace_name = 'ks'"))
        info = [tuple(r) for r in s.execute(
            'SELECT table_name, index_name FROM system."IndexInfo"')]
    finally:
        c.shutdown()
    assert [(r.index_name, r.table_name, r.column_name, r.is_string,
             r.analyzer) for r in rows] == [
        ("t_v", "t", "v", False, "NoOpAnalyzer")]
    return rows[0].is_queryable, rows[0].is_building, ("ks", "t_v") in info


def test_build_over_existing_data(cluster):
    c = pinned_to(IPS[0])
    s = c.connect()
    s.execute("CREATE KEYSPACE ks WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int, w text)")
    ins = s.prepare("INSERT INTO ks.t (k, v, w) VALUES (?, ?, ?)")
    ins.consistency_level = ALL
    model = {}
    for k in range(K):
        if k == 2 * K // 3:  # two thirds in SSTables, the rest in memtables
            for n in NODES:
                cluster("node", n, "tool", "flush", "ks", "t")
        s.execute(ins, (k, k % 10, "w%d" % k))
        model[k] = k % 10

    def want(v):
        return sorted(k for k, x in model.items() if x == v)

    def query(sess, v, cl):
        st = SimpleStatement("SELECT k FROM ks.t WHERE v = %d" % v,
                             consistency_level=cl)
        return sorted(r.k for r in sess.execute(st))

    # node2's build held back: the others build, node2 refuses
    cluster("node", "node2", "tool", "indexbuildfault", "hold")
    s.execute("CREATE INDEX t_v ON ks.t (v)")
    until(lambda: states(IPS[0])[0] and states(IPS[2])[0],
          "built on node1 and node3")
    assert states(IPS[0]) == (True, False, True)
    assert states(IPS[1]) == (False, True, False)
    # the held build shows as running: compactionstats, sstable_tasks

    def listed():
        out = cluster("node", "node2", "tool", "compactionstats").stdout
        return any("Secondary index build" in line and " ks " in line
                   and " t " in line for line in out.splitlines())
    until(listed, "the build in node2's compactionstats")
    c2 = pinned_to(IPS[1])
    s2 = c2.connect()
    assert [(r.keyspace_name, r.table_name, r.kind, r.unit) for r in
            s2.execute("SELECT * FROM system_views.sstable_tasks")] == [
        ("ks", "t", "secondary index build", "bytes")]
    # writes during the build go to the memtable index as usual
    for k in range(K, K + 20):
        s.execute(ins, (k, 3, "new"))
        model[k] = 3
    for sess in (s, s2):
        with pytest.raises(ReadFailure) as e:
            query(sess, 3, ALL)
        assert "INDEX_NOT_AVAILABLE from /%s" % IPS[1] in str(e.value)
        assert "Operation failed - received" in str(e.value)
    # never a partial answer: every ONE query is whole or refused
    refused = 0
    for i in range(30):
        try:
            assert query(s if i % 2 else s2, 3, ONE) == want(3)
        except ReadFailure as e:
            assert "INDEX_NOT_AVAILABLE" in str(e)
            refused += 1
    # ALLOW FILTERING of an unindexed column is not refused
    st = SimpleStatement("SELECT k FROM ks.t WHERE w = 'new' ALLOW FILTERING",
                         consistency_level=ALL)
    assert len(list(s2.execute(st))) == 20
    c2.shutdown()

    # a restart mid-build: the build resumes and finishes
    cluster("node", "node2", "stop")
    cluster("node", "node2", "start")
    cluster("wait")
    until(lambda: states(IPS[1])[0], "built on node2 after its restart")
    assert states(IPS[1]) == (True, False, True)
    for v in range(10):
        assert query(s, v, ALL) == want(v)

    # rebuild_index: building while held, waits, then queryable again
    with pytest.raises(InvalidRequest, match="Modification is not supported"):
        s.execute("INSERT INTO system_views.sai_column_indexes "
                  "(keyspace_name, index_name) VALUES ('ks', 'x')")
    cluster("node", "node3", "tool", "indexbuildfault", "hold")
    tool = cluster.spawn("node", "node3", "tool", "rebuild_index", "ks", "t",
                         "t_v")
    until(lambda: states(IPS[2]) == (False, True, False),
          "node3 rebuilding")
    assert tool.poll() is None  # rebuild_index waits for the build
    cluster("node", "node3", "tool", "indexbuildfault", "release")
    assert tool.wait(timeout=120) == 0, tool.stdout.read()
    assert states(IPS[2]) == (True, False, True)
    for v in range(10):
        assert query(s, v, ALL) == want(v)
    r = cluster("node", "node1", "tool", "rebuild_index", "ks", "nope", "x",
                check=False)
    assert r.returncode != 0
    assert "Unknown table nope in keyspace ks" in r.stdout + r.stderr
    c.shutdown()
