"""Row-level replica filtering protection on a real 3-node cluster, RF 3
(docs/indexes.md, "Row positions"): at QUORUM and ALL the replicas read
only an index's rows of a candidate partition, as at ONE, and the
coordinator asks each contact by primary key for the rows another
contact returned and it did not. A query matching one row of a 2,000-row
partition reads that row (and the static row) on each contact, not the
partition: the trace's `Read N live rows` events summed over the
replicas. Node 1 then misses an overwrite, a row deletion, a range
deletion, new rows and a value moved onto the queried one (hints off,
read_repair NONE so it stays stale) that the others compact in: every
query through every node at QUORUM and ALL, paged, with LIMIT and PER
PARTITION LIMIT, returns the newest rows (no resurrection, no missing
row), and the stale query through node 1 still reads a few rows, not the
partition. Partition 1 holds v = c, partitions 2..5 v = 100 k + c.
Clusters live on 127.0.123.1-3. No timing thresholds."""
import re

import pytest
from cassandra import ConsistencyLevel
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

from clusters import cluster_script, session, wait_for

# test-addresses: 127.0.123.1-3
IPS = ["127.0.123.1", "127.0.123.2", "127.0.123.3"]
ONE, QUORUM, ALL = (ConsistencyLevel.ONE, ConsistencyLevel.QUORUM,
                    ConsistencyLevel.ALL)
WIDE = 2000  # rows of partition k = 1, v = c


@pytest.fixture
def cluster(tmp_path):
    run = cluster_script(tmp_path)
    run("create", "rq", "-n", "3", "--racks", "3", "--base-ip", IPS[0],
        "-c", "gossip_interval=250ms", "-c", "hinted_handoff_enabled=false")
    run("-C", "rq", "start", timeout=180)
    yield lambda *a: run("-C", "rq", *a, timeout=180)
    run("-C", "rq", "remove", check=False, timeout=60)


def run(s, where, cl, fetch=5000, trace=False):
    st = SimpleStatement(f"SELECT k, c FROM r.t WHERE {where}",
                         consistency_level=cl, fetch_size=fetch)
    return s.execute(st, trace=trace)


def rows(s, where, cl, fetch=5000):
    return sorted((r.k, r.c) for r in run(s, where, cl, fetch))


def rows_read(s, where, cl):
    """The rows and the rows the replicas read (the trace's `Read N live
    rows` events summed), and the trace."""
    rs = run(s, where, cl, trace=True)
    got = sorted((r.k, r.c) for r in rs)
    acts = [e.description for e in rs.get_query_trace(30).events]
    reads = [int(m.group(1)) for m in
             (re.match(r"Read (\d+) live rows", a) for a in acts) if m]
    assert reads, acts
    return got, sum(reads), acts


def answers(s, cql, cl):
    try:
        return sorted(tuple(r) for r in s.execute(
            SimpleStatement(cql, consistency_level=cl)))
    except Exception:  # noqa: BLE001 - retried until the cluster settles
        return None


def test_quorum_reads_rows_and_protects_them(cluster):
    c1, s1 = session(IPS[0])
    s1.execute("CREATE KEYSPACE r WITH replication = "
               "{'class': 'SimpleStrategy', 'replication_factor': 3}")
    s1.execute("CREATE TABLE r.t (k int, c int, v int, s int static, "
               "PRIMARY KEY (k, c)) WITH read_repair = 'NONE'")
    s1.execute("CREATE INDEX ON r.t (v)")
    ins = s1.prepare("INSERT INTO r.t (k, c, v) VALUES (?, ?, ?)")
    ins.consistency_level = ALL
    args = [(1, c, c) for c in range(WIDE)]
    args += [(k, c, 100 * k + c) for k in range(2, 6) for c in range(5)]
    for ok, res in execute_concurrent_with_args(s1, ins, args,
                                                concurrency=32):
        assert ok, res
    s1.execute(SimpleStatement("UPDATE r.t SET s = 7 WHERE k = 1",
                               consistency_level=ALL))
    for n in ("node1", "node2", "node3"):
        cluster("node", n, "tool", "flush", "r", "t")

    # Agreeing replicas: each contact reads the row and the static row.
    # Before row-level protection: 2,001 rows each contact.
    for cl, contacts in ((QUORUM, 2), (ALL, 3)):
        got, n, acts = rows_read(s1, "v = 1234", cl)
        print(f"{cl}: v = 1234 over a {WIDE}-row partition: {n} rows read "
              f"({contacts} contacts)")
        assert got == [(1, 1234)]
        assert n <= 2 * contacts, "\n".join(acts)
        got, n, _ = rows_read(s1, "v >= 100 AND v < 110", cl)
        assert got == [(1, c) for c in range(100, 110)]
        assert n <= 11 * contacts, n
        # with a clustering restriction of its own: the rows inside it
        got, n, _ = rows_read(s1, "v >= 100 AND v < 110 AND c >= 105 "
                              "ALLOW FILTERING", cl)
        assert got == [(1, c) for c in range(105, 110)]
        assert n <= 6 * contacts, n
    c1.shutdown()

    # Node 1 misses these (no hints, no read repair):
    cluster("node", "node1", "stop")
    c2, s2 = session(IPS[1])
    for cql in (
            "UPDATE r.t SET v = 99999 WHERE k = 1 AND c = 1500",  # moved
            "DELETE FROM r.t WHERE k = 1 AND c = 1600",           # deleted
            "DELETE FROM r.t WHERE k = 1 AND c >= 1700 AND c <= 1710",
            "INSERT INTO r.t (k, c, v) VALUES (1, 5000, 1800)",   # new row
            "UPDATE r.t SET v = 1900 WHERE k = 1 AND c = 42",     # moved in
            "INSERT INTO r.t (k, c, v) VALUES (2, 9, 203)",       # new row
            "DELETE FROM r.t WHERE k = 3"):                       # partition
        s2.execute(SimpleStatement(cql, consistency_level=QUORUM))
    # compacted in: their indexes no longer list the stale values
    for n in ("node2", "node3"):
        cluster("node", n, "tool", "flush", "r", "t")
        cluster("node", n, "tool", "compact", "r", "t")
    cluster("node", "node1", "start")
    c2.shutdown()

    sessions = [session(ip) for ip in IPS]
    for i, (_, s) in enumerate(sessions):
        assert wait_for(lambda: answers(
            s, "SELECT k FROM r.t WHERE k = 2 AND c = 0", ALL) == [(2,)],
            step=0.2), f"node {i + 1} never saw every node up"
    s1 = sessions[0][1]
    # node 1 alone still answers from its stale data
    assert rows(s1, "v = 1500", ONE) == [(1, 1500)]

    model = {
        "v = 1500": [],
        "v = 99999": [(1, 1500)],
        "v = 1600": [],
        "v >= 1700 AND v <= 1710": [],
        "v >= 1695 AND v < 1715": [(1, c) for c in range(1695, 1700)]
        + [(1, c) for c in range(1711, 1715)],
        "v = 1800": [(1, 1800), (1, 5000)],
        "v = 42": [],
        "v = 1900": [(1, 42), (1, 1900)],
        "v = 203": [(1, 203), (2, 3), (2, 9)],
        "v >= 300 AND v < 305": [(1, c) for c in range(300, 305)],
        "v >= 200 AND v < 210": [(1, c) for c in range(200, 210)]
        + [(2, c) for c in range(5)] + [(2, 9)],
    }
    for _, s in sessions:
        for cl in (QUORUM, ALL):
            for where, want in model.items():
                for fetch in (1, 3, 5000):
                    assert rows(s, where, cl, fetch) == want, (where, cl,
                                                               fetch)
            got = rows(s, "v >= 1695 AND v < 1715 LIMIT 3", cl, 2)
            assert got == [(1, c) for c in range(1695, 1698)], got
            got = rows(s, "v >= 200 AND v < 210 PER PARTITION LIMIT 2",
                       cl, 1)
            assert got == [(1, 200), (1, 201), (2, 0), (2, 1)], got
            got = rows(s, "v >= 300 AND v < 305 PER PARTITION LIMIT 2",
                       cl, 1)
            assert got == [(1, 300), (1, 301)], got  # k = 3 deleted
            got = rows(s, "v = 1800 PER PARTITION LIMIT 1", cl)
            assert got == [(1, 1800)], got

    # The stale query through node 1 at ALL: node 1 returns its stale row,
    # the others are asked for that row by primary key.
    got, n, acts = rows_read(s1, "v = 1500", ALL)
    print(f"stale ALL through node 1: v = 1500: {n} rows read")
    assert got == []
    assert any(re.match(r"Requesting 1 partitions \(1 rows by primary key\)"
                        r" from /[0-9.:]+ for replica filtering protection",
                        a) for a in acts), "\n".join(acts)
    assert n <= 10, "\n".join(acts)
    got, n, acts = rows_read(s1, "v = 1900", QUORUM)
    print(f"stale QUORUM through node 1: v = 1900: {n} rows read")
    assert got == [(1, 42), (1, 1900)]
    assert n <= 10, "\n".join(acts)
    for c, _ in sessions:
        c.shutdown()
