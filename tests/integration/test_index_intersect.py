"""ANDed indexed restrictions intersected on the replicas, on a real
3-node cluster, RF 3, with the stock DataStax driver (docs/indexes.md,
"Indexed range reads"): the coordinator sends two index restrictions in a
range request (RangeReq.index and and_index), each replica answers with
the partitions both indexes list, asking its indexes for a page's worth
of candidates at a time (64 at least), and the coordinator re-checks
every row (a third restriction included). Checked against a model at
ONE, QUORUM and ALL with page sizes across the candidate limit, with
memtables and SSTables mixed, with a node down (QUORUM answers every
page, ALL is Unavailable), on a single partition and with ALLOW
FILTERING; and by the query's trace: `a = 1 AND b = 2` over 400 rows
reads the 20 matching rows, where one index (`a = 1`, the other column
filtered) reads 100; at ALL each of the three replicas reads 20. Clusters live on 127.0.115.21-23 with a 250 ms
gossip interval. No timing thresholds."""
import re

import pytest
from cassandra import ConsistencyLevel, Unavailable
from cassandra.cluster import NoHostAvailable
from cassandra.query import SimpleStatement

from clusters import cluster_script, session, wait_for

# test-addresses: 127.0.115.21-23
IPS = ["127.0.115.21", "127.0.115.22", "127.0.115.23"]
ONE, QUORUM, ALL = (ConsistencyLevel.ONE, ConsistencyLevel.QUORUM,
                    ConsistencyLevel.ALL)
N = 400  # partitions, one row each: a = k % 4, b = k % 5, f = b, r = k


@pytest.fixture
def cluster(tmp_path):
    run = cluster_script(tmp_path)
    run("create", "ixi", "-n", "3", "--racks", "3", "--base-ip", IPS[0],
        "-c", "gossip_interval=250ms")
    run("-C", "ixi", "start", timeout=180)
    yield lambda *a: run("-C", "ixi", *a, timeout=180)
    run("-C", "ixi", "remove", check=False, timeout=60)


def until(pred, what):
    assert wait_for(pred, step=0.2), f"never happened: {what}"


def query(s, cql, cl, fetch=None):
    st = SimpleStatement(cql, consistency_level=cl, fetch_size=fetch)
    return sorted(r[0] for r in s.execute(st))


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


def row(k):
    return {"k": k, "a": k % 4, "b": k % 5, "f": k % 5, "r": k}


# (WHERE clause, the model's predicate)
QUERIES = [
    ("a = 1 AND b = 2", lambda x: x["a"] == 1 and x["b"] == 2),
    ("b = 2 AND a = 1", lambda x: x["a"] == 1 and x["b"] == 2),
    # 100 candidates of a = 1, 240 of the IN: both past the limit of 64
    ("a = 1 AND b IN (1, 2, 3)",
     lambda x: x["a"] == 1 and x["b"] in (1, 2, 3)),
    ("a = 3 AND r >= 100 AND r < 300",
     lambda x: x["a"] == 3 and 100 <= x["r"] < 300),
    ("r > 50 AND b = 4", lambda x: x["r"] > 50 and x["b"] == 4),
    # three indexed restrictions: two intersected, r re-checked
    ("a = 1 AND b = 2 AND r > 200",
     lambda x: x["a"] == 1 and x["b"] == 2 and x["r"] > 200),
    ("a = 0 AND b = 0 AND r < 10 AND r >= 0",
     lambda x: x["a"] == 0 and x["b"] == 0 and x["r"] < 10),
]


def want(pred):
    return sorted(k for k in range(N) if pred(row(k)))


def rows_read(s, cql, cl=ONE):
    """The rows the replicas read for a traced query, summed over the
    trace's `Read N live rows` events (each replica's)."""
    rs = s.execute(SimpleStatement(cql, consistency_level=cl,
                                   fetch_size=1000), trace=True)
    got = sorted(r[0] for r in rs)
    events = [e.description for e in rs.get_query_trace(30).events]
    reads = [int(m.group(1)) for m in
             (re.match(r"Read (\d+) live rows", e) for e in events) if m]
    assert reads, events
    return got, sum(reads)


def test_two_index_ands(cluster):
    c, s = session(IPS[0])
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, a int, b int, f int, "
              "r int)")
    for col in ("a", "b", "r"):
        s.execute(f"CREATE INDEX ON ks.t ({col})")
    until(lambda: all(index_count(ip) == 3 for ip in IPS),
          "the indexes on every node")
    ins = s.prepare("INSERT INTO ks.t (k, a, b, f, r) VALUES (?, ?, ?, ?, ?)")
    ins.consistency_level = ALL
    for k in range(N):
        if k == N // 2:  # half in SSTables, half in memtables
            for n in ("node1", "node2", "node3"):
                cluster("node", n, "tool", "flush", "ks", "t")
        x = row(k)
        s.execute(ins, (k, x["a"], x["b"], x["f"], x["r"]))

    for where, pred in QUERIES:
        w = want(pred)
        assert w, where
        for cl in (ONE, QUORUM, ALL):
            for fetch in (3, 50, None):
                assert query(s, f"SELECT k FROM ks.t WHERE {where}", cl,
                             fetch) == w, (where, cl, fetch)
    # LIMIT, and pages of one across the candidate pages
    got = query(s, "SELECT k FROM ks.t WHERE a = 1 AND b IN (1, 2, 3) "
                "LIMIT 7", QUORUM, 2)
    assert len(got) == 7 and set(got) <= set(want(QUERIES[2][1]))
    assert query(s, "SELECT k FROM ks.t WHERE a = 1 AND b IN (1, 2, 3)",
                 QUORUM, 1) == want(QUERIES[2][1])
    # a single partition, and ALLOW FILTERING on an unindexed column
    assert query(s, "SELECT k FROM ks.t WHERE k = 17 AND a = 1 AND b = 2",
                 QUORUM) == [17]
    assert query(s, "SELECT k FROM ks.t WHERE k = 18 AND a = 1 AND b = 2",
                 QUORUM) == []
    assert query(s, "SELECT k FROM ks.t WHERE a = 1 AND b = 2 AND f = 2 "
                 "ALLOW FILTERING", QUORUM, 4) == want(QUERIES[0][1])
    assert query(s, "SELECT k FROM ks.t WHERE a = 1 AND b = 2 AND f = 3 "
                 "ALLOW FILTERING", QUORUM, 4) == []

    # The trace: the intersection reads only the matching rows (20 of
    # 400), one index (b's copy f filtered) reads a = 1's 100.
    both, n_both = rows_read(s, "SELECT k FROM ks.t WHERE a = 1 AND b = 2")
    one, n_one = rows_read(s, "SELECT k FROM ks.t WHERE a = 1 AND f = 2 "
                           "ALLOW FILTERING")
    assert both == one == want(QUERIES[0][1])
    print(f"rows read: a = 1 AND b = 2: {n_both}; a = 1 AND f = 2 "
          f"(one index): {n_one}")
    assert n_both == len(both) == 20, n_both
    assert n_one == N // 4, n_one
    # at ALL the two remote replicas intersect too (and_index sent)
    _, n_all = rows_read(s, "SELECT k FROM ks.t WHERE a = 1 AND b = 2", ALL)
    print(f"rows read at ALL: {n_all}")
    assert n_all == 3 * 20, n_all

    # One node down: QUORUM answers every page, ALL is Unavailable.
    cluster("node", "node3", "stop")
    until(lambda: query_or_none(s, "SELECT k FROM ks.t WHERE a = 1 AND "
                                "b = 2", QUORUM, 3) == want(QUERIES[0][1]),
          "a QUORUM two-index query with a node down")
    for where, pred in QUERIES:
        for fetch in (3, 50):
            assert query(s, f"SELECT k FROM ks.t WHERE {where}", QUORUM,
                         fetch) == want(pred), (where, fetch)
    # (the driver reports the one host's Unavailable as NoHostAvailable)
    with pytest.raises((Unavailable, NoHostAvailable),
                       match="Cannot achieve consistency level ALL"):
        s.execute(SimpleStatement("SELECT k FROM ks.t WHERE a = 1 AND b = 2",
                                  consistency_level=ALL))
    # writes meanwhile (an overwrite out of the intersection, a deletion,
    # a new match) are seen at QUORUM
    s.execute(SimpleStatement("UPDATE ks.t SET b = 3 WHERE k = 17",
                              consistency_level=QUORUM))
    s.execute(SimpleStatement("DELETE FROM ks.t WHERE k = 37",
                              consistency_level=QUORUM))
    s.execute(SimpleStatement("INSERT INTO ks.t (k, a, b, f, r) VALUES "
                              "(1001, 1, 2, 2, 1001)",
                              consistency_level=QUORUM))
    expect = sorted([k for k in want(QUERIES[0][1]) if k not in (17, 37)] +
                    [1001])
    assert query(s, "SELECT k FROM ks.t WHERE a = 1 AND b = 2", QUORUM,
                 3) == expect
    c.shutdown()
