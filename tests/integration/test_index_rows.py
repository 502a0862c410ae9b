"""Index entries carry rows (docs/indexes.md, "Row positions"): an index on
a regular column of a table with clustering columns lists (partition,
row), so a query matching one row of a 2,000-row partition makes the
replica read that row, not the partition. Through the python driver on
one node (127.0.116.1), summing the trace's `Read N live rows` events as
test_index_intersect.py does: from the memtable, from SSTables, after a
compaction. And the answers stay right: an overwritten value (the row
moves to its new value, its old entry is stale), a deleted row, a range
deletion, a partition deletion, a TTL, a static column's index (listed by
partition), two indexes ANDed on one partition but other rows (no match),
paging inside the partition, LIMIT and PER PARTITION LIMIT. A clustering
restriction of the query's own (`c >= 1235`) is intersected with the
index's rows: the rows inside it are read. No timing thresholds."""
import re
import subprocess
import time

import pytest
from cassandra.query import SimpleStatement

from conftest import BUILD_DIR, one_node_session

# test-addresses: 127.0.116.1
ADDRESS = "127.0.116.1"
WIDE = 2000  # rows of partition k = 1


@pytest.fixture
def session(make_node):
    with one_node_session(make_node, ADDRESS, "r") as s:
        s.execute("CREATE TABLE r.t (k int, c int, v int, w int, "
                  "s int static, PRIMARY KEY (k, c))")
        for col in ("v", "w", "s"):
            s.execute(f"CREATE INDEX ON r.t ({col})")
        yield s


def tool(*args):
    subprocess.run([str(BUILD_DIR / "node" / "cassini-tool"), "-h", ADDRESS,
                    *args], check=True, capture_output=True, timeout=60)


def rows(s, where, fetch=None):
    st = SimpleStatement(f"SELECT k, c FROM r.t WHERE {where}",
                         fetch_size=fetch)
    return sorted((r.k, r.c) for r in s.execute(st))


def rows_read(s, where):
    """The rows and the rows the replica read (the trace's `Read N live
    rows` events summed)."""
    rs = s.execute(SimpleStatement(f"SELECT k, c FROM r.t WHERE {where}",
                                   fetch_size=5000), trace=True)
    got = sorted((r.k, r.c) for r in rs)
    events = [e.description for e in rs.get_query_trace(30).events]
    reads = [int(m.group(1)) for m in
             (re.match(r"Read (\d+) live rows", e) for e in events) if m]
    assert reads, events
    return got, sum(reads)


def test_a_query_reads_only_the_matching_rows(session):
    s = session
    ins = s.prepare("INSERT INTO r.t (k, c, v, w) VALUES (?, ?, ?, ?)")
    # partition 1: 2,000 rows, v = c, w = c % 10; partitions 2..5 small
    for c in range(WIDE):
        s.execute(ins, (1, c, c, c % 10))
    for k in range(2, 6):
        for c in range(5):
            s.execute(ins, (k, c, 100 * k + c, c % 10))
    s.execute("UPDATE r.t SET s = 7 WHERE k = 1")

    # The rows read count the partition's static row (s = 7) too: the
    # matching rows + 1. Without row positions: the 2,000 rows + 1.
    def check_reads(when):
        got, n = rows_read(s, "v = 1234")
        print(f"{when}: v = 1234 over a {WIDE}-row partition: {len(got)} "
              f"row, {n} rows read (the row and the static row)")
        assert got == [(1, 1234)]
        assert n == 1 + 1, n
        got, n = rows_read(s, "v >= 100 AND v < 110")
        assert got == [(1, c) for c in range(100, 110)]
        assert n == 10 + 1, n

        # the query's own clustering restriction intersected with the
        # index's rows: the rows inside it alone (without: the 765 rows
        # of c >= 1235 and the static row)
        got, n = rows_read(s, "v >= 1230 AND v < 1240 AND c >= 1235 "
                           "ALLOW FILTERING")
        assert got == [(1, c) for c in range(1235, 1240)]
        assert n == 5 + 1, n

    check_reads("memtable")
    tool("flush", "r")
    # a second SSTable and the memtable on top
    s.execute(ins, (1, 5000, 7777, 0))
    tool("flush", "r")
    s.execute(ins, (1, 5001, 7777, 1))
    check_reads("SSTables and a memtable")
    assert rows(s, "v = 7777") == [(1, 5000), (1, 5001)]
    tool("compact", "r")
    check_reads("compacted")

    # an overwrite: row 1234 moves to v = 9999; its old entry is stale
    s.execute("UPDATE r.t SET v = 9999 WHERE k = 1 AND c = 1234")
    assert rows(s, "v = 1234") == []
    assert rows(s, "v = 9999") == [(1, 1234)]
    tool("flush", "r")
    assert rows(s, "v = 1234") == []
    assert rows(s, "v = 9999") == [(1, 1234)]
    # a row deletion, a range deletion, a TTL
    s.execute("DELETE FROM r.t WHERE k = 1 AND c = 1234")
    assert rows(s, "v = 9999") == []
    s.execute("DELETE FROM r.t WHERE k = 1 AND c >= 100 AND c < 105")
    assert rows(s, "v >= 100 AND v < 110") == [(1, c)
                                                for c in range(105, 110)]
    s.execute("UPDATE r.t USING TTL 1 SET v = 4242 WHERE k = 1 AND c = 7")
    assert rows(s, "v = 4242") == [(1, 7)]
    time.sleep(2.5)
    assert rows(s, "v = 4242") == []
    assert rows(s, "v = 7") == []  # the TTL'd write shadowed it

    # two indexes on the same partition, other rows: no match; same row:
    # the row (w = c % 10: row 3 has v = 3, w = 3)
    assert rows(s, "v = 3 AND w = 4") == []
    assert rows(s, "v = 3 AND w = 3") == [(1, 3)]
    got, n = rows_read(s, "v = 13 AND w = 3")
    assert got == [(1, 13)] and n == 1 + 1, (got, n)
    # a static column's index lists the partition: all its rows match
    live = WIDE + 2 - 1 - 5  # +5000, 5001; -1234, -100..104
    assert len(rows(s, "s = 7")) == live
    assert rows(s, "s = 7 AND v = 42") == [(1, 42)]
    got, n = rows_read(s, "s = 7 AND v = 42")
    assert got == [(1, 42)] and n == 1 + 1, (got, n)

    # paging inside the partition, LIMIT, PER PARTITION LIMIT
    # (partition 2 has v = 200..204)
    want = [(1, c) for c in range(200, 240)] + [(2, c) for c in range(5)]
    for fetch in (1, 3, 7, None):
        assert rows(s, "v >= 200 AND v < 240", fetch) == want, fetch
    got = rows(s, "v >= 200 AND v < 240 LIMIT 4", 3)
    assert len(got) == 4 and set(got) <= set(want), got
    got = rows(s, "v >= 200 AND v < 240 LIMIT 43", 5)
    assert len(got) == 43 and set(got) <= set(want), got
    ppl = rows(s, "w = 5 PER PARTITION LIMIT 2", 1)
    assert ppl == [(1, 5), (1, 15)], ppl  # k = 2..5 have c < 5 only
    assert rows(s, "w = 2 PER PARTITION LIMIT 1") == [(k, 2)
                                                      for k in range(1, 6)]
    # a partition deletion
    s.execute("DELETE FROM r.t WHERE k = 1")
    assert rows(s, "v = 42") == []
    assert rows(s, "w = 2") == [(k, 2) for k in range(2, 6)]
