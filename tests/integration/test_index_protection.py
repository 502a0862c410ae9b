"""Replica filtering protection on a real 3-node cluster, RF 3, with the
stock DataStax driver (docs/indexes.md, "Replica filtering protection"):
node 1 misses overwrites while it is down (hints off, read_repair NONE so
it stays stale) that the others compact in, so only its index still lists
them under their old value. An
indexed query at QUORUM and ALL through every node returns the model's
rows, and its trace shows the partitions read from the replicas that did
not return them going several to a message ("Requesting N partitions from
/ip for replica filtering protection": fewer messages than partitions).
Each node has its own replica_filtering_protection thresholds: node 1
Cassandra's defaults (no warning), node 2 a low cached_rows_warn_threshold
(the client gets Cassandra's warning, node 2 logs it), node 3 a low
cached_rows_fail_threshold (the query fails with Overloaded and
Cassandra's message, node 3 logs it; ONE, which is not protected,
answers). Clusters live on 127.0.117.1-3 with a 250 ms gossip interval.
No timing thresholds."""
import re

import pytest
from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

from clusters import cluster_script, session, wait_for

# test-addresses: 127.0.117.1-3
IPS = ["127.0.117.1", "127.0.117.2", "127.0.117.3"]
ONE, QUORUM, ALL = (ConsistencyLevel.ONE, ConsistencyLevel.QUORUM,
                    ConsistencyLevel.ALL)
K = 200      # partitions, one row each, v = 1
MOVED = 150  # of them set to v = 2 while node 1 is down
WARN = "(See 'cached_replica_rows_warn_threshold' in cassandra.yaml.)"
FAIL = "(See 'cached_replica_rows_fail_threshold' in cassandra.yaml.)"
THRESHOLDS = {  # per node: (cached_rows_warn_threshold, ..._fail_threshold)
    "node2": (10, 32000),
    "node3": (5, 10),
}


@pytest.fixture
def cluster(tmp_path):
    run = cluster_script(tmp_path)
    run("create", "rfp", "-n", "3", "--racks", "3", "--base-ip", IPS[0],
        "-c", "gossip_interval=250ms", "-c", "hinted_handoff_enabled=false")
    for name, (warn, fail) in THRESHOLDS.items():
        conf = run.home / "rfp" / name / "conf" / "node.yaml"
        with conf.open("a") as f:
            f.write("replica_filtering_protection:\n"
                    f"  cached_rows_warn_threshold: {warn}\n"
                    f"  cached_rows_fail_threshold: {fail}\n")
    run("-C", "rfp", "start", timeout=180)
    yield lambda *a: run("-C", "rfp", *a, timeout=180)
    run("-C", "rfp", "remove", check=False, timeout=60)


def log_of(cluster_home, name):
    return (cluster_home / "rfp" / name / "logs" / "system.log").read_text()


def until(pred, what):
    assert wait_for(pred, step=0.2), f"never happened: {what}"


def rows(rs):
    return sorted(r.k for r in rs)


def run(s, cql, cl, trace=False):
    st = SimpleStatement(cql, consistency_level=cl, fetch_size=1000)
    return s.execute(st, trace=trace)


def answers(s, cql, cl):
    try:
        return rows(run(s, cql, cl))
    except Exception:  # noqa: BLE001 - retried until the cluster settles
        return None


def test_protection_batches_reads_and_bounds_cached_rows(cluster, tmp_path):
    home = tmp_path / "home" / "clusters"
    c1, s1 = session(IPS[0])
    s1.execute("CREATE KEYSPACE ks WITH replication = "
               "{'class': 'SimpleStrategy', 'replication_factor': 3}")
    s1.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int) "
               "WITH read_repair = 'NONE'")
    s1.execute("CREATE INDEX ON ks.t (v)")
    ins = s1.prepare("INSERT INTO ks.t (k, v) VALUES (?, 1)")
    ins.consistency_level = ALL
    for k in range(K):
        s1.execute(ins, (k,))
    c1.shutdown()

    # Node 1 misses the overwrites (no hints, no read repair): its index
    # lists MOVED partitions under v = 1 that the others moved to v = 2.
    cluster("node", "node1", "stop")
    c2, s2 = session(IPS[1])
    upd = s2.prepare("UPDATE ks.t SET v = 2 WHERE k = ?")
    upd.consistency_level = QUORUM
    for k in range(MOVED):
        s2.execute(upd, (k,))
    # compacted in, so their indexes no longer list the moved partitions
    # under v = 1 (a memtable's index keeps an overwritten value's entry)
    for n in ("node2", "node3"):
        cluster("node", n, "tool", "flush", "ks", "t")
        cluster("node", n, "tool", "compact", "ks", "t")
    cluster("node", "node1", "start")
    c2.shutdown()

    model = {1: list(range(MOVED, K)), 2: list(range(MOVED))}
    sessions = [session(ip) for ip in IPS]
    s1, s2, s3 = (s for _, s in sessions)
    for i, s in enumerate((s1, s2, s3)):
        until(lambda: answers(s, "SELECT k FROM ks.t WHERE k = 0", ALL)
              == [0], f"node {i + 1} seeing every node up")
    # node 1 alone still answers with its stale index
    assert len(rows(run(s1, "SELECT k FROM ks.t WHERE v = 1", ONE))) == K

    # Right rows at QUORUM and ALL through nodes 1 and 2 (node 3 fails).
    for s in (s1, s2):
        for cl in (QUORUM, ALL):
            for v, want in model.items():
                assert rows(run(s, f"SELECT k FROM ks.t WHERE v = {v}",
                                cl)) == want, (v, cl)

    # Through the stale node at ALL: 150 partitions read from each of the
    # two others, several to a message (at most 64).
    rs = run(s1, "SELECT k FROM ks.t WHERE v = 1", ALL, trace=True)
    assert rows(rs) == model[1]
    acts = [e.description for e in rs.get_query_trace(30).events]
    asked = [int(m.group(1)) for m in
             (re.match(r"Requesting (\d+) partitions from /[0-9.:]+ for "
                       r"replica filtering protection", a) for a in acts)
             if m]
    assert sum(asked) == 2 * MOVED, "\n".join(acts)
    assert 0 < len(asked) < 2 * MOVED, asked
    assert max(asked) <= 64, asked
    summary = [a for a in acts
               if a.startswith("Replica filtering protection: ")]
    assert summary and summary[0].startswith(
        f"Replica filtering protection: {2 * MOVED} partitions read"), acts
    # node 1's default thresholds (2000 rows): no warning
    assert not rs.response_future.warnings

    # Node 2 warns past its cached_rows_warn_threshold of 10, in
    # Cassandra's words, to the client and in its log; the rows stand.
    rs = run(s2, "SELECT k FROM ks.t WHERE v = 1", ALL)
    assert rows(rs) == model[1]
    warnings = rs.response_future.warnings or []
    assert any(w.startswith("Replica filtering protection has cached over "
                            "10 rows during query SELECT * FROM ks.t ")
               and w.endswith(WARN) for w in warnings), warnings
    assert ("Replica filtering protection has cached over 10 rows"
            in log_of(home, "node2"))

    # Node 3 fails past its cached_rows_fail_threshold of 10: Overloaded
    # with Cassandra's message, logged; at ONE nothing is protected.
    with pytest.raises(Exception) as e:
        run(s3, "SELECT k FROM ks.t WHERE v = 1", ALL)
    assert "Replica filtering protection has cached over 10 rows during " \
           "query SELECT * FROM ks.t " in str(e.value), e.value
    assert FAIL in str(e.value), e.value
    assert type(e.value).__name__ in ("OverloadedErrorMessage",
                                      "NoHostAvailable"), type(e.value)
    assert "Overloaded" in repr(e.value) or \
        "overloaded" in repr(e.value).lower(), repr(e.value)
    log3 = log_of(home, "node3")
    assert re.search(r"ERROR.*Replica filtering protection has cached over "
                     r"10 rows", log3), log3[-2000:]
    assert len(rows(run(s3, "SELECT k FROM ks.t WHERE v = 1", ONE))) in (
        K - MOVED, K)
    for c, _ in sessions:
        c.shutdown()
