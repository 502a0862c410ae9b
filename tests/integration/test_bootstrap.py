"""Adding nodes to a cluster that holds data, as an operator does with
`scripts/cluster add`: a new node (not a seed) gossips BOOT, takes the
writes of its future ranges, fetches the rest from the current replicas,
and only then turns NORMAL and opens its native port. A node killed while
it bootstraps bootstraps again when restarted.

Checked the way a client would notice a gap: each new node, alone (a
driver pinned to it, consistency ONE), answers every key it replicates
from its own storage, deleted rows stay deleted, and the writes that
went on during the join are there too."""
import re
import subprocess
import threading
import time

import pytest
from cassandra import ConsistencyLevel

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


def replicas(ip, key):
    """The replicas of ks.t's partition `key`, as getendpoints says."""
    return set(tool(ip, "getendpoints", "ks", "t", str(key)).split())


def check_alone(ip, keys, deleted):
    """Every key that `ip` replicates is there, read at ONE from `ip`
    alone; deleted keys are not. Returns how many keys it holds."""
    c, s = session(ip)
    try:
        sel = s.prepare("SELECT v FROM ks.t WHERE k = ?")
        sel.consistency_level = ConsistencyLevel.ONE
        held = 0
        for k in keys:
            if ip not in replicas(ip, k):
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


def test_new_nodes_fetch_their_data_before_they_serve(cluster):
    cluster("create", "bs", "-n", "3", "--racks", "3", "--base-ip", BASE,
            "-c", "gossip_interval=250ms", "-c", "ring_delay=2s", "-s",
            timeout=180)
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

    # node4 joins while a client keeps writing; node1 shows it joining.
    writer = Writer(first=100000)
    writer.start()
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
    assert "gossiped as BOOT" in log
    m = re.search(r"bootstrap: complete: 1 keyspaces, (\d+) rows", log)
    assert m and int(m.group(1)) > 0, log
    # the native port opened only once the data was there
    assert log.index("bootstrap: complete") < log.index("CQL clients on")
    assert len(writer.acked) > 20
    keys = list(range(ROWS)) + writer.acked
    held = check_alone(BASE + "4", keys, deleted)
    assert held > len(keys) // 4, held  # about 2/4 of the keys

    # node5 is killed while it bootstraps: a restart bootstraps again.
    cluster("-C", "bs", "add")
    cluster("-C", "bs", "node", "node5", "start")
    assert wait_for(lambda: "gossiped as BOOT" in log_of(cluster, "node5"),
                    timeout=60)
    cluster("-C", "bs", "node", "node5", "kill")
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

