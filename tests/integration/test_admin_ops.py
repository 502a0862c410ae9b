"""cassini-tool's statusbinary / disablebinary / enablebinary and
get/setcompactionthroughput and verify against a real node, as an operator runs
them (nodetool's names and output). Address 127.0.85.6."""
import subprocess

import pytest
from cassandra.cluster import NoHostAvailable

from clusters import session
from conftest import BUILD_DIR, default_yaml, seeds_yaml

IP = "127.0.85.6"
TOOL = str(BUILD_DIR / "node" / "cassini-tool")


def tool(*args):
    return subprocess.run([TOOL, "-h", IP, *args], capture_output=True,
                          text=True, timeout=30)


@pytest.fixture
def node(make_node):
    n = make_node(default_yaml(listen_address=IP, rpc_address=IP,
                               seed_provider=seeds_yaml(IP),
                               compaction_throughput="32MiB/s"))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    return n


def test_binary_off_and_on(node):
    assert tool("statusbinary").stdout == "running\n"
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE o WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE o.t (k int PRIMARY KEY)")
        s.execute("INSERT INTO o.t (k) VALUES (1)")
    finally:
        cluster.shutdown()
    r = tool("disablebinary")
    assert r.returncode == 0, r.stderr
    assert tool("statusbinary").stdout == "not running\n"
    assert tool("disablebinary").returncode == 0  # again: nothing to do
    with pytest.raises(NoHostAvailable):
        session(IP)
    assert "native transport stopped (disablebinary)" in node.log()
    r = tool("enablebinary")
    assert r.returncode == 0, r.stderr
    assert tool("statusbinary").stdout == "running\n"
    cluster, s = session(IP)
    try:
        assert [row.k for row in s.execute("SELECT k FROM o.t")] == [1]
    finally:
        cluster.shutdown()
    r = tool("statusbinary", "x")
    assert r.returncode == 1 and "usage: statusbinary" in r.stderr


def test_binary_stays_off_after_drain(node):
    assert tool("drain").returncode == 0
    assert tool("statusbinary").stdout == "not running\n"
    r = tool("enablebinary")
    assert r.returncode == 2
    assert "drained" in r.stderr


def test_compaction_throughput(node):
    r = tool("getcompactionthroughput")
    assert r.stdout == "Current compaction throughput: 32 MB/s\n", r.stderr
    assert tool("setcompactionthroughput", "100").returncode == 0
    assert tool("getcompactionthroughput").stdout == \
        "Current compaction throughput: 100 MB/s\n"
    assert tool("setcompactionthroughput", "0").returncode == 0
    assert tool("getcompactionthroughput").stdout == \
        "Current compaction throughput: 0 MB/s\n"
    assert "compaction throughput set to 0 MB/s (unthrottled)" in node.log()
    for bad in (["-1"], ["x"], ["1", "2"], []):
        r = tool("setcompactionthroughput", *bad)
        assert r.returncode == 1, bad
        assert "usage: setcompactionthroughput <value_in_mb>" in r.stderr
    # compaction still runs (flush + compact with the new budget)
    assert tool("flush").returncode == 0
    assert tool("compact").returncode == 0


def test_verify(node):
    """verify reads every SSTable of the tables named: silent when all are
    sound; a flipped byte in one SSTable's Data.db gives nodetool's
    "Aborted verifying ..." line and exit 2, and the log names the file."""
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE v WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE v.t (k int PRIMARY KEY, x text)")
        s.execute("CREATE TABLE v.u (k int PRIMARY KEY)")
        for k in range(200):
            s.execute("INSERT INTO v.t (k, x) VALUES (%s, %s)",
                      (k, "x" * 100))
            s.execute("INSERT INTO v.u (k) VALUES (%s)", (k,))
    finally:
        cluster.shutdown()
    assert tool("flush", "v").returncode == 0
    r = tool("verify", "v")
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    assert tool("verify", "-f", "v", "t").returncode == 0  # nodetool's -f
    r = tool("verify", "-r", "v")
    assert r.returncode == 1 and "-r is not supported" in r.stderr
    data = [p for p in node.home.rglob("*Data.db")
            if "/v/t-" in str(p) and "snapshots" not in str(p)]
    assert len(data) == 1, data
    raw = bytearray(data[0].read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data[0].write_bytes(bytes(raw))
    r = tool("verify", "v")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == ("Aborted verifying at least one table in keyspace "
                        "v, check server logs for more information.\n")
    assert tool("verify", "v", "u").returncode == 0  # the sound table
    assert f"Corrupted SSTable {data[0]}" in node.log()
