"""Indexed range reads across replicas on a real 3-node cluster, RF 3, with
the stock DataStax driver (docs/indexes.md, "Indexed range reads"):
replicas answer with their index's candidates; queries honour the
consistency level with a node down (QUORUM answers, ALL is Unavailable),
page through indexed results (=, IN, a range) with memtables and SSTables
mixed; and a replica that missed overwrites and a deletion (hints off)
does not resurrect its stale index matches: replica filtering protection
reads what it returned from the others, whose newer version wins (the
query's trace shows the protection reads). Clusters live on
127.0.109.10-12 with a 250 ms gossip interval. No timing thresholds."""
import pytest
from cassandra import ConsistencyLevel, Unavailable
from cassandra.cluster import NoHostAvailable
from cassandra.query import SimpleStatement

from clusters import cluster_script, session, wait_for

IPS = ["127.0.109.10", "127.0.109.11", "127.0.109.12"]
ONE, QUORUM, ALL = (ConsistencyLevel.ONE, ConsistencyLevel.QUORUM,
                    ConsistencyLevel.ALL)
K, C, V = 120, 5, 40  # partitions, rows each, distinct values of v


@pytest.fixture
def cluster(tmp_path):
    run = cluster_script(tmp_path)
    run("create", "ixr", "-n", "3", "--racks", "3", "--base-ip", IPS[0],
        "-c", "gossip_interval=250ms", "-c", "hinted_handoff_enabled=false")
    run("-C", "ixr", "start", timeout=180)
    yield lambda *a: run("-C", "ixr", *a, timeout=180)
    run("-C", "ixr", "remove", check=False, timeout=60)


def until(pred, what):
    assert wait_for(pred, step=0.2), f"never happened: {what}"


def query(s, cql, cl, fetch=None, args=None):
    st = SimpleStatement(cql, consistency_level=cl, fetch_size=fetch)
    return sorted(tuple(r) for r in s.execute(st, args))


def query_or_none(s, cql, cl, fetch):
    try:
        return query(s, cql, cl, fetch)
    except Exception:  # noqa: BLE001 - retried until the cluster settles
        return None


def index_count(ip):
    c, s = session(ip)
    try:
        return len(list(s.execute(
            "SELECT index_name FROM system_schema.indexes "
            "WHERE keyspace_name = 'ks'")))
    finally:
        c.shutdown()


def value(k, c):
    return (k * C + c) % V


def test_indexed_reads_across_replicas(cluster):
    c, s = session(IPS[0])
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE ks.t (k int, c int, v int, s set<int>, "
              "PRIMARY KEY (k, c))")
    s.execute("CREATE INDEX ON ks.t (v)")
    s.execute("CREATE INDEX ON ks.t (s)")
    until(lambda: all(index_count(ip) == 2 for ip in IPS),
          "the indexes on every node")
    ins = s.prepare("INSERT INTO ks.t (k, c, v, s) VALUES (?, ?, ?, ?)")
    ins.consistency_level = ALL
    for k in range(K):
        if k == K // 2:  # half in SSTables, half in memtables
            for n in ("node1", "node2", "node3"):
                cluster("node", n, "tool", "flush", "ks", "t")
        for cc in range(C):
            s.execute(ins, (k, cc, value(k, cc), {cc, 100 + k % 3}))

    def rows(pred):
        return sorted((k, cc) for k in range(K) for cc in range(C)
                      if pred(k, cc))
    eq3 = rows(lambda k, cc: value(k, cc) == 3)
    in37 = rows(lambda k, cc: value(k, cc) in (3, 7))
    rng = rows(lambda k, cc: 10 <= value(k, cc) < 12)
    has101 = rows(lambda k, cc: k % 3 == 1)
    assert len(eq3) == K * C // V
    for cl in (ONE, QUORUM, ALL):
        assert query(s, "SELECT k, c FROM ks.t WHERE v = 3", cl,
                     fetch=4) == eq3
        assert query(s, "SELECT k, c FROM ks.t WHERE v IN (3, 7)", cl,
                     fetch=5) == in37
        assert query(s, "SELECT k, c FROM ks.t WHERE v >= 10 AND v < 12",
                     cl, fetch=7) == rng
    assert query(s, "SELECT k, c FROM ks.t WHERE s CONTAINS 101", QUORUM,
                 fetch=50) == has101
    assert len(query(s, "SELECT k, c FROM ks.t WHERE v = 3 LIMIT 5",
                     QUORUM, fetch=2)) == 5

    # One node down: QUORUM answers every page, ALL is Unavailable.
    cluster("node", "node3", "stop")
    until(lambda: query_or_none(s, "SELECT k, c FROM ks.t WHERE v = 3",
                                QUORUM, 3) == eq3,
          "a QUORUM index query with a node down")
    assert query(s, "SELECT k, c FROM ks.t WHERE v >= 10 AND v < 12",
                 QUORUM, fetch=2) == rng
    # (the driver reports the one host's Unavailable as NoHostAvailable)
    with pytest.raises((Unavailable, NoHostAvailable),
                       match="Cannot achieve consistency level ALL"):
        s.execute(SimpleStatement("SELECT k FROM ks.t WHERE v = 3",
                                  consistency_level=ALL))

    # Node 3 misses overwrites and a deletion (no hints), and node 1 and
    # 2 compact them in, so their indexes no longer list those rows
    # under v = 3: only node 3's stale index does.
    moved, deleted = eq3[:len(eq3) // 2], eq3[-1]
    for k, cc in moved:
        s.execute(SimpleStatement("UPDATE ks.t SET v = 1000 WHERE k = %s "
                                  "AND c = %s", consistency_level=QUORUM),
                  (k, cc))
    s.execute(SimpleStatement("DELETE FROM ks.t WHERE k = %s AND c = %s",
                              consistency_level=QUORUM), deleted)
    for n in ("node1", "node2"):
        cluster("node", n, "tool", "flush", "ks", "t")
        cluster("node", n, "tool", "compact", "ks", "t")
    cluster("node", "node3", "start")
    c.shutdown()

    c3, s3 = session(IPS[2])
    fresh = [r for r in eq3 if r not in moved and r != deleted]
    # (partition 1 holds no v = 3: reading it repairs nothing of interest)
    until(lambda: query_or_none(s3, "SELECT k, c FROM ks.t WHERE k = 1",
                                QUORUM, 100) is not None,
          "node 3 serving QUORUM again")
    # At QUORUM through the stale node: its stale matches are read from
    # the other contact, whose newer versions win; traced.
    st = SimpleStatement("SELECT k, c FROM ks.t WHERE v = 3",
                         consistency_level=QUORUM)
    rs = s3.execute(st, trace=True)
    assert sorted(tuple(r) for r in rs) == fresh
    acts = [e.description for e in rs.get_query_trace(30).events]
    assert any(a.startswith("Replica filtering protection: ")
               for a in acts), acts
    # read repair brought node 3 up to date: ONE through it agrees now
    assert query(s3, "SELECT k, c FROM ks.t WHERE v = 3", ONE,
                 fetch=3) == fresh
    assert query(s3, "SELECT k, c FROM ks.t WHERE v = 1000", ALL,
                 fetch=3) == sorted(moved)
    c3.shutdown()
