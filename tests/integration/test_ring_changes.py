"""Nodes joining and leaving a cluster that holds data, as an operator
runs it: `scripts/cluster add` (a new node bootstraps: it gossips BOOT,
takes the writes of its future ranges, fetches the rest from the current
replicas, and only then turns NORMAL and opens its native port; killed
while it bootstraps, it bootstraps again when restarted),
`cassini-tool decommission` (the node streams its ranges to their new
replicas, leaves, stops and refuses to start again) and `cassini-tool
removenode` (a dead node's ranges go to their new replicas from the live
copies).

Checked the way a client would notice a gap: a new node, alone (a driver
pinned to it, consistency ONE), answers every key it replicates from its
own storage; after nodes leave, every row reads back at ALL; deleted rows
stay deleted; the writes that went on meanwhile are there too."""
import re
import struct
import subprocess
import threading
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster

from clusters import cluster_script, session, tool, tool_run, wait_for
from conftest import SOURCE_DIR

BASE = "127.0.9."  # a block of its own: suites run in parallel
ROWS, DELETED = 1500, 100


@pytest.fixture
def cluster(tmp_path):
    run = cluster_script(tmp_path)
    yield run
    run("-C", "bs", "remove", check=False)


def log_of(cluster, node):
    return (cluster.home / "bs" / node / "logs" / "system.log").read_text()


def check_alone(ip, keys, deleted):
    """Every key that `ip` replicates is there, read at ONE from `ip`
    alone (a coordinator reads its own copy first); deleted keys are not.
    The replicas are the driver's (token-aware drivers compute them the
    same way). Returns how many keys it holds."""
    c, s = session(ip)
    try:
        sel = s.prepare("SELECT v FROM ks.t WHERE k = ?")
        sel.consistency_level = ConsistencyLevel.ONE
        held = 0
        for k in keys:
            hosts = c.metadata.get_replicas("ks", struct.pack(">i", k))
            if ip not in {h.address for h in hosts}:
                continue
            held += 1
            rows = list(s.execute(sel, (k,)))
            if k in deleted:
                assert rows == [], f"deleted key {k} is back on {ip}"
            else:
                assert [r.v for r in rows] == [f"v{k}"], \
                    f"key {k} missing on {ip}"
        return held
    finally:
        c.shutdown()


def hosts_up(c):
    """The hosts driver cluster `c` knows and takes for up."""
    return {h.address for h in c.metadata.all_hosts() if h.is_up}


def sees_boot(ip, of):
    """Whether `ip`'s gossip has `of` joining with its tokens (BOOT)."""
    out = tool_run(ip, "gossipinfo").stdout
    section = out.partition("/" + of + ":")[2].split("\n/")[0]
    return ":BOOT," in section and "TOKENS" in section


def partitions(ip):
    """ks.t's partitions on `ip`, as tablestats counts them."""
    out = tool(ip, "tablestats", "ks", "t")
    return int(re.search(r"Number of partitions \(estimate\): (\d+)",
                         out).group(1))


def replicated_by(ip, keys):
    """How many of `keys` (deleted ones too: their tombstones are
    partitions) `ip` replicates, as the driver places them."""
    c, s = session(ip)
    try:
        return sum(ip in {h.address for h in c.metadata.get_replicas(
            "ks", struct.pack(">i", k))} for k in keys)
    finally:
        c.shutdown()


class Writer(threading.Thread):
    """Writes new keys at QUORUM through node1 until stopped; keeps the
    acknowledged ones."""

    def __init__(self, first):
        super().__init__(daemon=True)
        self.next, self.acked, self.stop = first, [], threading.Event()

    def run(self):
        c, s = session(BASE + "1")
        ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.QUORUM
        while not self.stop.is_set():
            k = self.next
            self.next += 1
            try:
                s.execute(ins, (k, f"v{k}"))
                self.acked.append(k)
            except Exception:
                pass
            time.sleep(0.005)
        c.shutdown()

    def started(self):
        """Once its first writes are acknowledged."""
        return wait_for(lambda: len(self.acked) >= 10, timeout=30)


def load(nodes, racks, cluster):
    """A cluster of `nodes` (a -n layout) with ROWS rows of ks.t (RF 2 in
    dc1), some deleted, some flushed; the deleted keys."""
    cluster("create", "bs", "-n", str(nodes), "--racks", str(racks),
            "--base-ip", BASE, "-c", "gossip_interval=250ms",
            "-c", "ring_delay=2s", "-s", timeout=180)
    c, s = session(BASE + "1")
    s.execute("CREATE KEYSPACE ks WITH replication = "
              "{'class': 'NetworkTopologyStrategy', 'dc1': 2}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
    ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
    ins.consistency_level = ConsistencyLevel.ALL
    for k in range(ROWS):
        s.execute(ins, (k, f"v{k}"))
    deleted = set(range(0, ROWS, ROWS // DELETED))
    dele = s.prepare("DELETE FROM ks.t WHERE k = ?")
    dele.consistency_level = ConsistencyLevel.ALL
    for k in deleted:
        s.execute(dele, (k,))
    tool(BASE + "2", "flush")  # some from SSTables, some from memtables
    c.shutdown()
    return deleted


def check_all(ip, keys, deleted):
    """Every key reads back at ALL through `ip` (deleted ones as none)."""
    c, s = session(ip)
    try:
        sel = s.prepare("SELECT v FROM ks.t WHERE k = ?")
        sel.consistency_level = ConsistencyLevel.ALL
        for k in keys:
            rows = [r.v for r in s.execute(sel, (k,))]
            assert rows == ([] if k in deleted else [f"v{k}"]), (k, rows)
    finally:
        c.shutdown()


def test_new_nodes_fetch_their_data_before_they_serve(cluster):
    deleted = load(3, 3, cluster)

    # node4 joins while a client keeps writing; node1 shows it joining,
    # and a driver connected before hears of it (TOPOLOGY_CHANGE)
    watcher = Cluster([BASE + "1"], protocol_version=4,
                      topology_event_refresh_window=1)
    watcher.connect()
    writer = Writer(first=100000)
    writer.start()
    assert writer.started()
    add = subprocess.Popen(
        ["/usr/bin/python3", str(SOURCE_DIR / "scripts" / "cluster.py"),
         "-C", "bs", "add", "-s"], env=cluster.env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen_joining = wait_for(lambda: "UJ  " + BASE + "4" in
                            tool_run(BASE + "1", "status").stdout,
                            timeout=60, step=0.1)
    out, _ = add.communicate(timeout=300)
    assert add.returncode == 0, out
    assert "node4 joined" in out
    writer.stop.set()
    writer.join()
    log = log_of(cluster, "node4")
    assert seen_joining, "node4 never showed as UJ:\n" + log
    assert wait_for(lambda: BASE + "4" in hosts_up(watcher), timeout=30)
    watcher.shutdown()
    assert "gossiped as BOOT" in log
    m = re.search(r"bootstrap: complete: 1 keyspaces, (\d+) rows", log)
    assert m and int(m.group(1)) > 0, log
    # the native port opened only once the data was there
    assert log.index("bootstrap: complete") < log.index("CQL clients on")
    keys = list(range(ROWS)) + writer.acked
    held = check_alone(BASE + "4", keys, deleted)
    assert held > len(keys) // 4, held  # about 2/4 of the keys

    # the old nodes still hold what node4 took; cleanup drops it
    dropped = 0
    for ip in (BASE + "1", BASE + "2", BASE + "3"):
        before = partitions(ip)
        tool(ip, "cleanup")
        assert partitions(ip) == replicated_by(ip, keys)
        dropped += before - partitions(ip)
        assert check_alone(ip, keys, deleted) > 0
    assert dropped > 0

    # node5 is killed while it bootstraps: a restart bootstraps again.
    cluster("-C", "bs", "add")
    cluster("-C", "bs", "node", "node5", "start")
    assert wait_for(lambda: sees_boot(BASE + "1", BASE + "5"), timeout=60,
                    step=0.05)
    cluster("-C", "bs", "node", "node5", "kill")
    # with a node joining, cleanup could drop what is still ours
    r = tool_run(BASE + "1", "cleanup")
    assert r.returncode == 2
    assert "Not safe to run cleanup" in r.stderr
    r = tool_run(BASE + "1", "decommission")  # one movement at a time
    assert r.returncode == 2
    assert f"{BASE}5:7000 is joining: wait until it is done" in r.stderr
    # a dead joiner can be removed (nothing to stream), and then cleanup
    # runs; node5 restarted later joins again from the start
    assert wait_for(lambda: "DJ  " + BASE + "5" in
                    tool(BASE + "1", "status"), timeout=60)
    hid = host_id(BASE + "1", BASE + "5")
    out = tool(BASE + "1", "removenode", hid)
    assert "it was joining: nothing to stream" in out
    assert wait_for(lambda: BASE + "5" not in tool(BASE + "2", "status"))
    tool(BASE + "1", "cleanup")
    assert "bootstrap: complete" not in log_of(cluster, "node5")
    cluster("-C", "bs", "node", "node5", "start")
    cluster("-C", "bs", "wait", "--timeout", "120", timeout=180)
    log = log_of(cluster, "node5")
    assert log.count("gossiped as BOOT") == 2
    assert "bootstrap: complete: 1 keyspaces" in log
    assert check_alone(BASE + "5", keys, deleted) > len(keys) // 5

    # every node is NORMAL and serves
    for i in range(1, 6):
        assert "UN  " + BASE + "5" in tool(BASE + str(i), "status")


def host_id(ip, of):
    for line in tool(ip, "status").splitlines():
        parts = line.split()
        if len(parts) > 1 and parts[1] == of:
            return parts[-2]
    return None


def test_decommission_and_removenode_keep_every_row(cluster):
    deleted = load(4, 2, cluster)
    n1, n2, n3, n4 = (BASE + str(i) for i in range(1, 5))

    # node2 keeps hints for node3 (paused: writes to it time out) and
    # holds them (pausehandoff); leaving, it hands them over to a node
    # that stays, which delivers them to node3
    hid3 = host_id(n1, n3)
    hinted = list(range(300000, 300060))
    c, s = session(n2)
    ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
    ins.consistency_level = ConsistencyLevel.ONE
    cluster("-C", "bs", "node", "node3", "pause")
    try:
        for k in hinted:
            s.execute(ins, (k, f"v{k}"))
        assert wait_for(lambda: hid3 in tool(n2, "listpendinghints"),
                        timeout=30)
        tool(n2, "pausehandoff")
    finally:
        cluster("-C", "bs", "node", "node3", "resume")
    c.shutdown()

    # node2 leaves while a client keeps writing; a driver hears of it
    watcher = Cluster([n1], protocol_version=4)
    watcher.connect()
    assert wait_for(lambda: n2 in hosts_up(watcher))
    writer = Writer(first=100000)
    writer.start()
    assert writer.started()
    r = tool_run(n2, "decommission")
    writer.stop.set()
    writer.join()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[decommission] streaming keyspace ks" in r.stdout
    handed = re.search(r"\[decommission\] handing (\d+) hints for 1 nodes "
                       r"over to (127\.0\.9\.[134]):7000\n", r.stdout)
    assert handed, r.stdout
    assert f"taken from leaving nodes {handed.group(1)}\n" in tool(
        handed.group(2), "statushandoff")
    assert "[decommission] hints handed over to" in r.stdout
    assert "Decommissioned: " + n2 in r.stdout
    assert wait_for(lambda: "node2  " + n2 in
                    cluster("-C", "bs", "status").stdout and "stopped" in
                    [l for l in cluster("-C", "bs", "status").stdout
                     .splitlines() if "node2 " in l][0], timeout=30)
    for ip in (n1, n3, n4):
        assert wait_for(lambda: n2 not in tool(ip, "status"), timeout=30)
    assert wait_for(lambda: n2 not in hosts_up(watcher) and n2 not in
                    {h.address for h in watcher.metadata.all_hosts()})
    watcher.shutdown()
    # the hints reach node3 from the node that took them (before any read
    # at ALL, whose read repair would write them there too)
    assert wait_for(lambda: all(hid3 not in tool(ip, "listpendinghints")
                                for ip in (n1, n3, n4)), timeout=60)
    assert check_alone(n3, hinted, set()) > 0
    keys = list(range(ROWS)) + writer.acked + hinted
    check_all(n1, keys, deleted)
    for ip in (n4, n1, n3):  # node4, alone on rack2 now, took node2's
        assert check_alone(ip, keys, deleted) > 0
    # it does not come back with its old ranges
    r = cluster("-C", "bs", "node", "node2", "start", check=False)
    assert r.returncode != 0
    assert "was decommissioned and will not rejoin the ring" in \
        log_of(cluster, "node2")
    cluster("-C", "bs", "node", "node2", "remove")  # ccm's node remove
    assert "node2 " not in cluster("-C", "bs", "status").stdout

    # node3 dies; node1 removes it
    hid = host_id(n1, n3)
    cluster("-C", "bs", "node", "node3", "kill")
    assert wait_for(lambda: "DN  " + n3 in tool(n1, "status"), timeout=60)
    assert "Cannot remove self" in \
        tool_run(n1, "removenode", host_id(n1, n1)).stderr
    assert "is alive and owns this ID" in \
        tool_run(n1, "removenode", host_id(n1, n4)).stderr
    assert "Host ID not found." in tool_run(
        n1, "removenode", "00000000-0000-4000-8000-000000000000").stderr
    # writes node3 misses are kept for it as hints on node1...
    c, s = session(n1)
    ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
    ins.consistency_level = ConsistencyLevel.ONE
    for k in range(200000, 200100):
        s.execute(ins, (k, f"v{k}"))
        keys.append(k)
    c.shutdown()
    assert hid in tool(n1, "listpendinghints")
    r = tool_run(n1, "removenode", hid)
    assert r.returncode == 0, r.stdout + r.stderr
    # ...and dropped once it has left
    assert wait_for(lambda: hid not in tool(n1, "listpendinghints"))
    assert f"Removed {n3}:7000 (host id {hid})" in r.stdout
    assert "RemovalStatus: No removals in process." in \
        tool(n1, "removenode", "status")
    for ip in (n1, n4):
        assert wait_for(lambda: n3 not in tool(ip, "status"), timeout=30)
    for ip in (n1, n4):  # RF 2 on two nodes: each holds every key
        assert check_alone(ip, keys, deleted) == len(keys)

    # two nodes left with RF 2: leaving would lose a replica
    r = tool_run(n1, "decommission")
    assert r.returncode == 2
    assert ("Not enough live nodes to maintain replication factor in "
            "keyspace ks (RF = 2, N = 2). Perform a forceful decommission "
            "to ignore.") in r.stderr

    # the last resort for a dead node: assassinate (nothing streams)
    assert "is alive" in tool_run(n1, "assassinate", n4).stderr
    assert "is this node" in tool_run(n1, "assassinate", n1).stderr
    cluster("-C", "bs", "node", "node4", "kill")
    assert wait_for(lambda: "DN  " + n4 in tool(n1, "status"), timeout=60)
    assert f"Assassinated {n4}:7000" in tool(n1, "assassinate", n4)
    assert n4 not in tool(n1, "status")


def test_a_datacenter_added_is_filled_by_rebuild(cluster):
    """dc2 joins a keyspace that lived in dc1 only (ALTER KEYSPACE), then
    each of its nodes fetches its ranges from dc1, as Cassandra's
    procedure for adding a datacenter goes."""
    deleted = load("2:2", 1, cluster)
    c, s = session(BASE + "1")
    s.execute("ALTER KEYSPACE ks WITH replication = {'class': "
              "'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 2}")
    c.shutdown()
    keys = list(range(ROWS))
    n3, n4 = BASE + "3", BASE + "4"
    for ip in (n3, n4):  # each has the new replication: every key
        assert wait_for(lambda: ip in tool(ip, "getendpoints", "ks", "t",
                                           "1"))
    with pytest.raises(AssertionError):  # dc2 holds nothing yet
        check_alone(n3, keys, deleted)
    r = tool_run(n3, "rebuild", "dc3")
    assert r.returncode == 2 and "unknown datacenter: dc3" in r.stderr
    for ip in (n3, n4):
        r = tool_run(ip, "rebuild", "dc1")
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"[rebuild] {ip}:7000 fetches its ranges from dc1" \
            in r.stdout
        assert f"Rebuilt {ip}:7000" in r.stdout
        # RF 2 on dc2's two nodes: each holds every key, read alone
        assert check_alone(ip, keys, deleted) == ROWS
