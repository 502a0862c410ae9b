"""Membership with real processes: gossip convergence, kill -9 detection,
restart with the same identity and a higher generation, graceful shutdown,
a paused datacenter, and cassini-tool's commands. Clusters live on
127.0.2.x with a 250 ms gossip interval so detection takes seconds.

No timing thresholds: every wait is "until it happens" with a generous
ceiling that only guards against hanging."""
import re
import subprocess
import time

import pytest

from clusters import cluster_script
from conftest import BUILD_DIR

TOOL = BUILD_DIR / "node" / "cassini-tool"
BASE = "127.0.2."


@pytest.fixture
def cluster(tmp_path):
    run = cluster_script(tmp_path)
    yield run
    run("-C", "m", "remove", check=False)


def tool(host, *args, check=True):
    r = subprocess.run([str(TOOL), "-h", host, *args], capture_output=True,
                       text=True, timeout=30)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def status_rows(host):
    rows = {}
    r = tool(host, "status", check=False)
    for line in r.stdout.splitlines():
        m = re.match(r"^([UD][NLJM])\s+(\S+)\s", line)
        if m:
            rows[m.group(2)] = m.group(1)
    return rows


def until(pred, what, ceiling=90):
    deadline = time.monotonic() + ceiling
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"never happened: {what}")


def gossip_field(host, endpoint, field):
    out = tool(host, "gossipinfo").stdout
    block = out.split(f"/{endpoint}:7000\n", 1)[1].split("\n/", 1)[0]
    return re.search(rf"^  {field}:(.*)$", block, re.M).group(1)


def test_three_racks_converge_kill_restart_and_stop(cluster):
    cluster("create", "m", "-n", "3", "--racks", "3", "--base-ip", BASE,
            "-c", "gossip_interval=250ms")
    out = cluster("start").stdout
    assert "3 of 3 nodes running" in out
    addrs = [BASE + str(i) for i in (1, 2, 3)]
    for a in addrs:
        rows = status_rows(a)
        assert rows == {x: "UN" for x in addrs}
    out = tool(addrs[0], "status").stdout
    assert out.startswith("Datacenter: dc1\n===============\n")
    assert "--  Address" in out and "Host ID" in out and "Rack" in out
    assert re.search(r"UN  127\.0\.2\.2 .* 16 .*%\s+[0-9a-f-]{36}  rack2", out)
    # Without a keyspace, as nodetool: no user keyspace yet, so effective
    # ownership under system_traces' replication (SimpleStrategy, RF 2).
    assert "Owns (effective)" in out and "Note:" not in out
    owns = [float(x) for x in re.findall(r"(\d+\.\d)%", out)]
    assert len(owns) == 3 and abs(sum(owns) - 200.0) < 0.5, out

    info_before = tool(addrs[2], "info", "-T").stdout
    host_id = re.search(r"^ID\s+: (\S+)", info_before, re.M).group(1)
    tokens_before = re.findall(r"^Token\s+: (-?\d+)", info_before, re.M)
    assert len(tokens_before) == 16
    gen_before = int(gossip_field(addrs[0], addrs[2], "generation"))

    # kill -9: every live peer lists it DN.
    cluster("node", "node3", "kill")
    until(lambda: all(status_rows(a).get(addrs[2]) == "DN"
                      for a in addrs[:2]), "node3 DN on node1 and node2")

    # Restart: same host id and tokens, a higher generation, UN everywhere.
    time.sleep(1.1)  # generations are seconds
    cluster("node", "node3", "start")
    cluster("wait")
    info_after = tool(addrs[2], "info", "-T").stdout
    assert re.search(r"^ID\s+: (\S+)", info_after, re.M).group(1) == host_id
    assert re.findall(r"^Token\s+: (-?\d+)", info_after, re.M) == tokens_before
    assert int(gossip_field(addrs[0], addrs[2], "generation")) > gen_before

    # Graceful stop: peers hear the announcement.
    cluster("node", "node2", "stop")
    until(lambda: status_rows(addrs[0]).get(addrs[1]) == "DN", "node2 DN")
    assert "shutdown" in gossip_field(addrs[0], addrs[1], "STATUS_WITH_PORT")
    log = (cluster.home / "m" / "node1" / "logs" / "system.log").read_text()
    assert f"{addrs[1]}:7000 is now DOWN (announced shutdown)" in log


def test_saved_peers_file(cluster):
    """saved_caches/peers: written as the ring forms; a restarted node
    lists its peers from it at once; a peer the others have forgotten
    stays DN in its ring (never gossiped to them) until assassinate drops
    it; a file that does not parse is set aside and the node starts from
    gossip alone."""
    cluster("create", "m", "-n", "3", "--base-ip", BASE,
            "-c", "gossip_interval=250ms", "-s")
    addrs = [BASE + str(i) for i in (1, 2, 3)]
    saved = cluster.home / "m" / "node1" / "data" / "saved_caches" / "peers"
    until(lambda: saved.exists() and
          all(f"peer={a}:7000" in saved.read_text() for a in addrs[1:]),
          "node1 saves node2 and node3")
    text = saved.read_text()
    assert f"peer={addrs[0]}:7000" not in text
    assert text.count("TOKENS=") == 2 and text.count("HOST_ID=") == 2

    # A peer removed while node1 was down, and forgotten by the others.
    cluster("node", "node1", "stop")
    ghost = BASE + "99"
    block = text.split(f"peer={addrs[1]}:7000\n", 1)[1].split("peer=")[0]
    host_id = "00000000-0000-4000-8000-000000000099"
    lines = [ln for ln in block.splitlines()
             if not ln.startswith(("HOST_ID=", "TOKENS=", "STATUS_WITH"))]
    saved.write_text(text + f"peer={ghost}:7000\n" + "\n".join(lines) +
                     f"\nHOST_ID={host_id}\nTOKENS=42\n"
                     "STATUS_WITH_PORT=NORMAL,42\n")
    cluster("node", "node1", "start")
    log = cluster.home / "m" / "node1" / "logs" / "system.log"
    until(lambda: "3 peers loaded from" in log.read_text(), "peers loaded")
    until(lambda: status_rows(addrs[0]).get(ghost) == "DN", "ghost DN")
    until(lambda: all(status_rows(addrs[0]).get(a) == "UN" for a in addrs),
          "node1 sees the others UN")
    until(lambda: "peers still down (2 of 3 peers up after 5 gossip"
          in log.read_text(), "node1 serves without the ghost")
    time.sleep(2)  # gossip rounds: the ghost must not spread
    for a in addrs[1:]:
        assert ghost not in status_rows(a)
    assert tool(addrs[0], "assassinate", ghost).stdout.startswith(
        f"Assassinated {ghost}:7000 (known only from this node's saved peers")
    assert ghost not in status_rows(addrs[0])
    until(lambda: ghost not in saved.read_text(), "ghost dropped from file")

    # A corrupt file: set aside, the node starts and learns the ring.
    cluster("node", "node1", "stop")
    saved.write_text("TOKENS=1\ngarbage\n")
    cluster("node", "node1", "start")
    cluster("wait")
    assert saved.with_name("peers.corrupt").exists()
    assert "moved to" in log.read_text()
    until(lambda: all(status_rows(addrs[0]).get(a) == "UN" for a in addrs),
          "node1 sees the others UN after a corrupt file")


def test_tool_commands(cluster):
    cluster("create", "m", "-n", "2:1", "--racks", "2", "--base-ip", BASE,
            "-c", "gossip_interval=250ms")
    cluster("start")
    a = BASE + "1"
    assert tool(a, "version").stdout == "ReleaseVersion: 0.1.0\n"
    ring = tool(a, "ring").stdout
    assert "Datacenter: dc1" in ring and "Datacenter: dc2" in ring
    assert len(re.findall(r"^127\.0\.2\.\d\s+rack\d\s+Up\s+Normal", ring,
                          re.M)) == 48
    dc = tool(a, "describecluster").stdout
    assert "Name: m" in dc and "Live: 3" in dc and "Unreachable: 0" in dc
    assert "dc1 #Nodes: 2 #Down: 0" in dc and "dc2 #Nodes: 1 #Down: 0" in dc
    gi = tool(a, "gossipinfo").stdout
    assert gi.count("  generation:") == 3 and "TOKENS:" in gi
    assert "DC:" in gi and "RACK:" in gi and "HOST_ID:" in gi
    # Replicas: NTS with one replica per DC gives one address of each DC.
    nts = "class=NetworkTopologyStrategy,dc1=1,dc2=1"
    eps = tool(a, "getendpoints", nts, "t", "some-key").stdout.split()
    assert len(eps) == 2 and BASE + "3" in eps
    # Same answer from every node: they share one ring.
    for h in (BASE + "2", BASE + "3"):
        assert tool(h, "getendpoints", nts, "t", "some-key").stdout.split() \
            == eps
    assert tool(a, "getendpoints", "system", "local", "local").stdout == \
        a + "\n"
    r = tool(a, "getendpoints", "system", "nope", "k", check=False)
    assert r.returncode == 1 and "does not exist" in r.stderr
    # A keyspace of the schema: the key is typed by the table's partition
    # key, and the replicas are the ones the driver computes.
    from cassandra.cluster import Cluster
    c = Cluster([a], protocol_version=4)
    try:
        s = c.connect()
        s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
                  "'NetworkTopologyStrategy', 'dc1': 1, 'dc2': 1}")
        s.execute("CREATE TABLE ks.t (k int, b text, v int, "
                  "PRIMARY KEY ((k, b)))")
        s.execute("CREATE TABLE ks.u (id uuid PRIMARY KEY)")
        c.control_connection.wait_for_schema_agreement()
        c.refresh_schema_metadata()
        import struct
        import uuid
        tm = c.metadata.token_map
        for k in range(20):
            key = (struct.pack(">H", 4) + struct.pack(">i", k) + b"\0" +
                   struct.pack(">H", 1) + b"x\0")
            want = sorted(h.address for h in tm.get_replicas("ks", tm.token_class.from_key(key)))
            got = tool(a, "getendpoints", "ks", "t", f"{k}:x").stdout.split()
            assert sorted(got) == want
        u = uuid.UUID("0e9d5c6e-8d53-4b8b-9b0c-5e2f3f1b6d4a")
        want = sorted(h.address for h in tm.get_replicas("ks", tm.token_class.from_key(u.bytes)))
        got = tool(a, "getendpoints", "ks", "u", str(u)).stdout.split()
        assert sorted(got) == want
    finally:
        c.shutdown()
    r = tool(a, "getendpoints", "ks", "t", "1", check=False)
    assert r.returncode == 1 and "separate them with ':'" in r.stderr
    r = tool(a, "getendpoints", "ks", "t", "one:x", check=False)
    assert r.returncode == 1 and "bad key" in r.stderr
    eff = tool(a, "status", "ks").stdout
    assert "Owns (effective)" in eff
    # The only user keyspace is what status without one measures ...
    assert tool(a, "status").stdout == eff
    # ... until two replicate differently: then nodetool's note and "?".
    c = Cluster([a], protocol_version=4)
    try:
        c.connect().execute("CREATE KEYSPACE ks2 WITH replication = "
                            "{'class': 'SimpleStrategy', "
                            "'replication_factor': 1}")
    finally:
        c.shutdown()
    note = "Note: Non-system keyspaces don't have the same replication " \
        "settings, effective ownership information is meaningless"
    st = tool(a, "status").stdout
    assert note in st
    assert len(re.findall(r"^UN\s+\S+\s+\S+ \S*\s+\d+\s+\?\s", st, re.M)) \
        == 3, st
    ring = tool(a, "ring").stdout
    assert note in ring and "Warning: \"nodetool ring\"" in ring
    assert len(re.findall(r"\s+Up\s+Normal\s+.*\s\?\s+-?\d+$", ring,
                          re.M)) == 48, ring
    ring = tool(a, "ring", "ks").stdout
    assert note not in ring
    # NTS dc1:1, dc2:1 on 2 + 1 nodes: dc2's node owns everything
    assert len(re.findall(r"^127\.0\.2\.3\s.*\s100\.00%\s", ring, re.M)) \
        == 16, ring
    dr = tool(a, "describering", nts).stdout
    assert dr.count("TokenRange(start_token:") == 48
    eff = tool(a, "status", "system_distributed").stdout
    assert "Owns (effective)" in eff
    assert eff.count("100.0%") == 3  # RF 3 over 3 nodes: all own everything
    r = tool(a, "status", "nokeyspace", check=False)
    assert r.returncode == 1 and "does not exist" in r.stderr
    r = tool(a, "getendpoints", "ks", check=False)
    assert r.returncode == 1 and r.stderr == \
        "usage: getendpoints <keyspace> <table> <key>\n"
    r = tool(a, "frobnicate", check=False)
    assert r.returncode == 1 and "unknown command 'frobnicate'" in r.stderr
    r = cluster("node", "node2", "tool", "info")
    assert "Rack                   : rack2" in r.stdout
    # drain, then stopdaemon: both answer, and the node stops.
    tool(BASE + "2", "drain")
    tool(BASE + "2", "stopdaemon")
    until(lambda: "stopped" in cluster("status").stdout.split("node2")[1]
          .splitlines()[0], "node2 stopped")


def test_unreachable_node_is_a_clear_error():
    r = subprocess.run([str(TOOL), "-h", BASE + "200", "-p", "7199",
                        "status"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert r.stderr == f"cannot connect to {BASE}200:7199\n"


def test_paused_datacenter_goes_down_and_comes_back(cluster):
    cluster("create", "m", "-n", "2:2", "--base-ip", BASE,
            "-c", "gossip_interval=250ms")
    cluster("start")
    cluster("dc", "dc2", "down", "--mode", "pause")
    until(lambda: status_rows(BASE + "1").get(BASE + "3") == "DN" and
          status_rows(BASE + "2").get(BASE + "4") == "DN", "dc2 DN")
    assert status_rows(BASE + "1").get(BASE + "2") == "UN"
    cluster("dc", "dc2", "up")
    cluster("wait")
