"""Indexed queries against a model: a random table with indexes on a
regular column, a static column, a clustering column and a component of
the partition key takes random inserts, overwrites, row and partition
deletions, null writes and TTL'd writes, with flushes and compactions in
between (so memtables and SSTables merge, tombstones shadow older data
across SSTables); after every round each indexed query (=, IN, ranges,
ANDs of two indexes, intersected on the replica, and of three, with LIMIT,
PER PARTITION LIMIT and every page size) must return exactly
the rows of the model's filtered scan. An index that returned a row the
data does not hold (a stale value, a deleted row, an expired cell) fails
this test. Partitions hold up to CS rows, and take clustering range
deletions too: the regular columns' indexes list rows, so the replica
reads only those rows of a partition (docs/indexes.md, "Row positions").
Seeded: CASSINI_SEED reproduces a run."""
import os
import random
import subprocess
import time

import pytest
from cassandra.query import SimpleStatement

from conftest import BUILD_DIR, one_node_session

ADDRESS = "127.0.109.4"  # a block of its own: suites run in parallel
KEYS, CS, VALUES = 8, 12, 6


@pytest.fixture
def session(make_node):
    with one_node_session(make_node, ADDRESS, "m") as s:
        s.execute("CREATE TABLE m.t (a int, b int, c int, v int, w text, "
                  "s int static, PRIMARY KEY ((a, b), c))")
        for col in ("v", "w", "s", "c", "b"):
            s.execute(f"CREATE INDEX ON m.t ({col})")
        yield s


def tool(*args):
    subprocess.run([str(BUILD_DIR / "node" / "cassini-tool"), "-h", ADDRESS,
                    *args], check=True, capture_output=True, timeout=60)


class Model:
    """Rows by (a, b, c) -> {v, w}; statics by (a, b); TTL'd cells that
    will have expired when they are read."""

    def __init__(self):
        self.rows = {}
        self.statics = {}

    def rows_view(self):
        out = []
        for (a, b, c), cells in self.rows.items():
            out.append((a, b, c, cells.get("v"), cells.get("w"),
                        self.statics.get((a, b))))
        # a partition with only its static row reads as one row of nulls
        for (a, b), sv in self.statics.items():
            if not any(k[:2] == (a, b) for k in self.rows):
                out.append((a, b, None, None, None, sv))
        return out


def write(s, m, rng, expiring):
    a, b, c = rng.randrange(KEYS), rng.randrange(2), rng.randrange(CS)
    op = rng.random()
    v, w = rng.randrange(VALUES), rng.choice(["x", "y", "z"])
    if op < 0.45:
        ttl = " USING TTL 1" if expiring else ""
        s.execute(f"INSERT INTO m.t (a, b, c, v, w) VALUES "
                  f"({a}, {b}, {c}, {v}, '{w}'){ttl}")
        if not expiring:
            m.rows[(a, b, c)] = {"v": v, "w": w}
        # an expiring insert: the row and both cells go when it expires,
        # so whatever was there before is shadowed until then and gone
        # after (the insert's timestamp is later)
        elif (a, b, c) in m.rows:
            del m.rows[(a, b, c)]
    elif op < 0.65:
        if (a, b, c) in m.rows or not expiring:
            s.execute(f"UPDATE m.t SET v = {v} WHERE a = {a} AND b = {b} "
                      f"AND c = {c}")
            m.rows.setdefault((a, b, c), {})["v"] = v
    elif op < 0.72:
        s.execute(f"UPDATE m.t SET s = {v} WHERE a = {a} AND b = {b}")
        m.statics[(a, b)] = v
    elif op < 0.80:
        s.execute(f"UPDATE m.t SET w = null WHERE a = {a} AND b = {b} "
                  f"AND c = {c}")
        if (a, b, c) in m.rows:
            m.rows[(a, b, c)].pop("w", None)
            if not m.rows[(a, b, c)]:
                # an UPDATE wrote no row marker: no cells, no row
                del m.rows[(a, b, c)]
    elif op < 0.90:
        s.execute(f"DELETE FROM m.t WHERE a = {a} AND b = {b} AND c = {c}")
        m.rows.pop((a, b, c), None)
    elif op < 0.95:  # a clustering range deletion
        hi = c + rng.randrange(1, 4)
        s.execute(f"DELETE FROM m.t WHERE a = {a} AND b = {b} AND c >= {c} "
                  f"AND c < {hi}")
        for k in [k for k in m.rows if k[:2] == (a, b) and c <= k[2] < hi]:
            del m.rows[k]
    else:
        s.execute(f"DELETE FROM m.t WHERE a = {a} AND b = {b}")
        for k in [k for k in m.rows if k[:2] == (a, b)]:
            del m.rows[k]
        m.statics.pop((a, b), None)


def fix_update_rows(m):
    """A row made only by UPDATEs exists while it has a live cell."""
    for k in [k for k, cells in m.rows.items()
              if all(x is None for x in cells.values())]:
        del m.rows[k]


QUERIES = [
    ("v = {x}", lambda r, x: r[3] == x),
    ("v IN ({x}, {y})", lambda r, x, y: r[3] in (x, y)),
    ("v > {x}", lambda r, x: r[3] is not None and r[3] > x),
    ("v <= {x}", lambda r, x: r[3] is not None and r[3] <= x),
    ("w = 'x' AND v = {x}", lambda r, x: r[4] == "x" and r[3] == x),
    ("c = {x}", lambda r, x: r[2] == x),
    ("c >= {x} AND v < {y}",
     lambda r, x, y: r[2] is not None and r[2] >= x and r[3] is not None
     and r[3] < y),
    ("b = 1 AND v = {x}", lambda r, x: r[1] == 1 and r[3] == x),
    ("s = {x}", lambda r, x: r[5] == x),
    # two indexes intersected on the replicas (and a third re-checked)
    ("v = {x} AND s = {y}", lambda r, x, y: r[3] == x and r[5] == y),
    ("c = {x} AND v IN ({y}, 5)",
     lambda r, x, y: r[2] == x and r[3] in (y, 5)),
    ("s > {x} AND v <= {y}",
     lambda r, x, y: r[5] is not None and r[5] > x and r[3] is not None
     and r[3] <= y),
    ("v = {x} AND b = {y} AND c = 1",
     lambda r, x, y: r[3] == x and r[1] == y and r[2] == 1),
    ("a = {x} AND b = 0 AND v >= {y}",
     lambda r, x, y: r[0] == x and r[1] == 0 and r[3] is not None
     and r[3] >= y),
]


def check(s, m, rng):
    rows = m.rows_view()
    for text, pred in QUERIES:
        n = text.count("{")
        args = [rng.randrange(VALUES) for _ in range(n)]
        if text.startswith("a ="):
            args[0] = rng.randrange(KEYS)
        where = text.format(**dict(zip("xy", args)))
        want = sorted((r[0], r[1], r[2]) for r in rows if pred(r, *args))
        for fetch in (None, 1, 3):
            got = sorted(tuple(r) for r in s.execute(SimpleStatement(
                f"SELECT a, b, c FROM m.t WHERE {where}",
                fetch_size=fetch)))
            assert got == want, f"WHERE {where} (page {fetch})"
        limit = rng.randrange(1, 4)
        got = list(s.execute(f"SELECT a, b, c FROM m.t WHERE {where} "
                             f"LIMIT {limit}"))
        assert len(got) == min(limit, len(want)), f"WHERE {where} LIMIT"
        assert all((r.a, r.b, r.c) in want for r in got), where
        # PER PARTITION LIMIT: each partition's first rows (c ascending)
        ppl = rng.randrange(1, 3)
        per = {}
        for r in want:
            per.setdefault(r[:2], []).append(r)
        want_ppl = sorted(x for rs in per.values()
                          for x in sorted(rs, key=lambda r: (r[2] is None,
                                                             r[2]))[:ppl])
        for fetch in (None, 2):
            got = sorted(tuple(r) for r in s.execute(SimpleStatement(
                f"SELECT a, b, c FROM m.t WHERE {where} "
                f"PER PARTITION LIMIT {ppl}", fetch_size=fetch)))
            assert got == want_ppl, (f"WHERE {where} PER PARTITION LIMIT "
                                     f"{ppl} (page {fetch}): missing "
                                     f"{sorted(set(want_ppl) - set(got))}, "
                                     f"extra {sorted(set(got) - set(want_ppl))}")


def test_indexed_queries_match_the_model(session):
    seed = int(os.environ.get("CASSINI_SEED", random.randrange(1 << 30)))
    print(f"CASSINI_SEED={seed}")
    rng = random.Random(seed)
    m = Model()
    for round_ in range(5):
        for _ in range(120):
            write(session, m, rng, expiring=False)
        fix_update_rows(m)
        check(session, m, rng)
        if rng.random() < 0.8:
            tool("flush", "m")
        if round_ % 2 == 1:
            tool("compact", "m")
        check(session, m, rng)
    # Expiring writes: once their TTL has passed they are gone, and what
    # they overwrote stays shadowed.
    for _ in range(60):
        write(session, m, rng, expiring=True)
    fix_update_rows(m)
    tool("flush", "m")
    time.sleep(2.5)
    check(session, m, rng)
    tool("compact", "m")
    check(session, m, rng)
