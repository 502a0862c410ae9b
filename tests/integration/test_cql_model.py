"""Random writes and reads through the stock driver, checked against a
model of CQL's semantics: tables in every clustering order, row and range
deletions (on either clustering column, bounds open or closed), slices,
multi-column slices, reversed ORDER BY, IN on the partition key (repeated
keys, key order, ORDER BY across partitions), LIMIT, ALLOW FILTERING,
aggregates and paging, with flushes in between so memtables and SSTables merge. A range deletion on a DESC column once deleted the
wrong rows (`c1 >= 3` deleted every row); this is the test that catches
such a thing on every path at once."""
import os
import random
import struct
import subprocess

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.metadata import Murmur3Token
from cassandra.query import SimpleStatement

from conftest import BUILD_DIR, SOURCE_DIR, default_yaml

ADDRESS = "127.0.5.1"  # a block of its own: suites run in parallel
ORDERS = [("ASC", "ASC"), ("ASC", "DESC"), ("DESC", "ASC"), ("DESC", "DESC")]
KEYS, C1S, C2S, VALUES = 3, 6, 4, 4
OPS = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
       "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
       "=": lambda a, b: a == b}


@pytest.fixture
def session(make_node):
    n = make_node(default_yaml(listen_address=ADDRESS))
    n.start()
    assert n.wait_for_log("CQL clients on"), n.log()
    cluster = Cluster([ADDRESS], protocol_version=4)
    s = cluster.connect()
    s.execute("CREATE KEYSPACE m WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    yield s
    cluster.shutdown()
    n.kill()


class Table:
    """One table and its model: (k, c1, c2) -> v."""

    def __init__(self, s, o1, o2, keys):
        self.name = f"m.t_{o1}_{o2}".lower()
        self.keys = keys
        self.desc = (o1 == "DESC", o2 == "DESC")
        self.rows = {}
        s.execute(f"CREATE TABLE {self.name} (k int, c1 int, c2 int, v int, "
                  "PRIMARY KEY (k, c1, c2)) WITH CLUSTERING ORDER BY "
                  f"(c1 {o1}, c2 {o2})")

    def order(self, rows, reverse):
        """Rows in the table's clustering order (or its reverse)."""
        def key(r):
            return tuple(-c if d else c for c, d in zip(r[1:3], self.desc))
        return sorted(rows, key=key, reverse=reverse)


def bounds(rng, column, values):
    """A random slice on `column`: one or two bounds, as CQL text and as
    a predicate."""
    rels = []
    if rng.random() < 0.7:
        rels.append((rng.choice([">", ">="]), rng.randrange(-1, values + 1)))
    if not rels or rng.random() < 0.6:
        rels.append((rng.choice(["<", "<="]), rng.randrange(-1, values + 1)))
    text = " AND ".join(f"{column} {op} {v}" for op, v in rels)
    return text, lambda x: all(OPS[op](x, v) for op, v in rels)


def write(s, t, rng):
    k = rng.randrange(t.keys)
    c1, c2 = rng.randrange(C1S), rng.randrange(C2S)
    p = rng.random()
    if p < 0.55:
        v = rng.randrange(VALUES)
        s.execute(f"INSERT INTO {t.name} (k, c1, c2, v) VALUES "
                  f"({k}, {c1}, {c2}, {v})")
        t.rows[(k, c1, c2)] = v
    elif p < 0.65:
        s.execute(f"DELETE FROM {t.name} WHERE k = {k} AND c1 = {c1} "
                  f"AND c2 = {c2}")
        t.rows.pop((k, c1, c2), None)
    elif p < 0.8:
        text, pred = bounds(rng, "c1", C1S)
        s.execute(f"DELETE FROM {t.name} WHERE k = {k} AND {text}")
        for key in [r for r in t.rows if r[0] == k and pred(r[1])]:
            del t.rows[key]
    elif p < 0.95:
        text, pred = bounds(rng, "c2", C2S)
        s.execute(f"DELETE FROM {t.name} WHERE k = {k} AND c1 = {c1} "
                  f"AND {text}")
        for key in [r for r in t.rows
                    if r[0] == k and r[1] == c1 and pred(r[2])]:
            del t.rows[key]
    else:
        s.execute(f"DELETE FROM {t.name} WHERE k = {k}")
        for key in [r for r in t.rows if r[0] == k]:
            del t.rows[key]


def token(k):
    return Murmur3Token.from_key(struct.pack(">i", k)).value


def read(s, t, rng):
    """One random query, compared with the model."""
    k = rng.randrange(t.keys)
    where, pred = f"k = {k}", (lambda r: r[0] == k)
    p = rng.random()
    if p < 0.15:
        # a filtered scan of every partition, in token order
        v = rng.randrange(VALUES)
        q = (f"SELECT k, c1, c2, v FROM {t.name} WHERE v = {v} "
             "ALLOW FILTERING")
        want = []
        for key in sorted(range(t.keys), key=token):
            want += t.order([(r[0], r[1], r[2], w) for r, w in
                             t.rows.items() if r[0] == key and w == v], False)
        got = [tuple(r) for r in s.execute(SimpleStatement(
            q, fetch_size=rng.choice([1, 2, 5000])))]
        assert got == want, q
        return
    if rng.random() < 0.12:
        read_in(s, t, rng)
        return
    p = rng.random()
    if p < 0.4:
        text, c1_pred = bounds(rng, "c1", C1S)
        where += " AND " + text
        pred = (lambda r, c=c1_pred: r[0] == k and c(r[1]))
    elif p < 0.6:
        c1 = rng.randrange(C1S)
        text, c2_pred = bounds(rng, "c2", C2S)
        where += f" AND c1 = {c1} AND " + text
        pred = (lambda r, c=c2_pred: r[0] == k and r[1] == c1 and c(r[2]))
    elif p < 0.68 and t.desc[0] == t.desc[1]:
        # (c1, c2) op (x, y): value order, as tuples compare
        rels = []
        for ops in ([">", ">="], ["<", "<="]):
            if not rels or rng.random() < 0.5:
                rels.append((rng.choice(ops), rng.randrange(-1, C1S + 1),
                             rng.randrange(-1, C2S + 1)))
        if rng.random() < 0.1:
            rels = [("=", rng.randrange(C1S), rng.randrange(C2S))]
        where += "".join(f" AND (c1, c2) {op} ({x}, {y})"
                         for op, x, y in rels)
        pred = (lambda r, rels=rels: r[0] == k and all(
            OPS[op](r[1:3], (x, y)) for op, x, y in rels))
    elif p < 0.75:
        c1s = rng.sample(range(C1S), rng.randrange(1, 4))
        where += f" AND c1 IN ({', '.join(map(str, c1s))})"
        pred = (lambda r: r[0] == k and r[1] in c1s)
    if rng.random() < 0.25:
        v = rng.randrange(VALUES)
        where += f" AND v = {v}"
        pred = (lambda r, p=pred: p(r) and t.rows[r] == v)
    if rng.random() < 0.15:
        q = (f"SELECT count(*), count(v), min(v), max(v), sum(v), avg(v), "
             f"min(c2), max(c1) FROM {t.name} WHERE {where}" +
             (" ALLOW FILTERING" if " v = " in where else ""))
        keys = [key for key in t.rows if pred(key)]
        vs = [t.rows[key] for key in keys]
        want = (len(vs), len(vs), min(vs, default=None),
                max(vs, default=None), sum(vs),
                int(sum(vs) / len(vs)) if vs else 0,
                min((key[2] for key in keys), default=None),
                max((key[1] for key in keys), default=None))
        assert tuple(s.execute(q).one()) == want, q
        return
    reverse = rng.random() < 0.4
    order = ""
    if reverse or rng.random() < 0.2:
        first = "DESC" if t.desc[0] != reverse else "ASC"
        order = f" ORDER BY c1 {first}"
    limit = rng.choice([None, None, 1, 3, 7])
    q = f"SELECT k, c1, c2, v FROM {t.name} WHERE {where}{order}" + (
        f" LIMIT {limit}" if limit else "") + (
        " ALLOW FILTERING" if " v = " in where else "")
    want = t.order([(key[0], key[1], key[2], v)
                    for key, v in t.rows.items() if pred(key)], reverse)
    want = want[:limit] if limit else want
    got = [tuple(r) for r in s.execute(SimpleStatement(
        q, fetch_size=rng.choice([2, 5, 5000])))]
    assert got == want, q


def read_in(s, t, rng):
    """IN on the partition key, keys repeated and out of order: each
    partition once, in the key's (int) order; with ORDER BY, unpaged, the
    rows of every partition sorted together by c1 (ties keep the read
    order), then the LIMIT (Cassandra's post-query ordering)."""
    keys = [rng.randrange(t.keys + 1) for _ in range(rng.randrange(1, 6))]
    text, c1_pred = bounds(rng, "c1", C1S) if rng.random() < 0.5 else (
        None, lambda x: True)
    reverse = rng.random() < 0.4
    first = "DESC" if t.desc[0] != reverse else "ASC"
    order = f" ORDER BY c1 {first}" if reverse or rng.random() < 0.3 \
        else ""
    limit = rng.choice([None, None, 1, 4])
    q = (f"SELECT k, c1, c2, v FROM {t.name} WHERE k IN "
         f"({', '.join(map(str, keys))})" + (f" AND {text}" if text else "")
         + order + (f" LIMIT {limit}" if limit else ""))
    want = []
    for key in sorted(set(keys)):
        want += t.order([(r[0], r[1], r[2], v) for r, v in t.rows.items()
                         if r[0] == key and c1_pred(r[1])], reverse)
    if order:
        want = sorted(want, key=lambda r: r[1], reverse=first == "DESC")
    want = want[:limit] if limit else want
    fetch = None if order else rng.choice([1, 2, 5000])
    got = [tuple(r) for r in s.execute(SimpleStatement(q,
                                                       fetch_size=fetch))]
    assert got == want, q


def flush():
    subprocess.run([str(BUILD_DIR / "node" / "cassini-tool"), "-h", ADDRESS,
                    "flush", "m"], check=True, capture_output=True,
                   timeout=60)


def run_model(session, seed, rounds=6, flush=None, keys=KEYS):
    rng = random.Random(seed)
    tables = [Table(session, o1, o2, keys) for o1, o2 in ORDERS]
    for round_ in range(rounds):
        for _ in range(60):
            t = rng.choice(tables)
            write(session, t, rng)
        for t in tables:
            for _ in range(15):
                read(session, t, rng)
        if flush and round_ % 2 == 1:
            flush()
    return tables


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_writes_and_reads_match_the_model(session, seed):
    tables = run_model(session, seed, flush=flush)
    for t in tables:
        got = [tuple(r) for r in session.execute(SimpleStatement(
            f"SELECT k, c1, c2, v FROM {t.name}", fetch_size=7))]
        assert sorted(got) == sorted((k, c1, c2, v)
                                     for (k, c1, c2), v in t.rows.items())
        assert session.execute(f"SELECT count(*) FROM {t.name}").one()[0] \
            == len(t.rows)


def test_the_model_holds_on_three_nodes_at_all(tmp_path):
    """The same on three nodes, RF 2, every request at ALL: scans merge
    ranges from several replicas, and every coordinator agrees."""
    env = dict(os.environ, CASSINI_HOME=str(tmp_path / "home"),
               CASSINI_BIN_DIR=str(BUILD_DIR))

    def cluster(*args):
        r = subprocess.run(["/usr/bin/python3",
                            str(SOURCE_DIR / "scripts" / "cluster.py"),
                            *args], capture_output=True, text=True,
                           env=env, timeout=180)
        assert r.returncode == 0, r.stdout + r.stderr
    cluster("create", "m", "-n", "3", "--base-ip", "127.0.6.")
    try:
        cluster("start")
        c = Cluster(["127.0.6.1"], protocol_version=4, execution_profiles={
            EXEC_PROFILE_DEFAULT: ExecutionProfile(
                consistency_level=ConsistencyLevel.ALL)})
        s = c.connect()
        s.execute("CREATE KEYSPACE m WITH replication = {'class': "
                  "'SimpleStrategy', 'replication_factor': 2}")
        run_model(s, 7, rounds=4, keys=12)
        c.shutdown()
    finally:
        subprocess.run(["/usr/bin/python3",
                        str(SOURCE_DIR / "scripts" / "cluster.py"), "-C",
                        "m", "remove"], env=env, capture_output=True,
                       timeout=60)


def test_static_and_collection_cells_match_the_model(session):
    """Static columns and set cells across memtables, flushes and
    compaction: UPDATE-only rows live while a cell does, INSERT adds the row
    marker (an INSERT of only the static column too, when it names the
    row), a static-only partition reads as one row, deletions of rows,
    ranges, cells, elements and partitions."""
    rng = random.Random(11)
    session.execute("CREATE TABLE m.sc (k int, c int, v int, s int static, "
                    "tags set<int>, PRIMARY KEY (k, c))")
    rows, statics = {}, {}  # (k, c) -> [marker, v, tags]; k -> s

    def row(k, c):
        return rows.setdefault((k, c), [False, None, set()])

    def live(r):
        return r[0] or r[1] is not None or r[2]
    for step in range(400):
        k, c, x = rng.randrange(3), rng.randrange(5), rng.randrange(4)
        p = rng.random()
        if p < 0.06:
            # a static-only INSERT naming the row creates it
            session.execute(f"INSERT INTO m.sc (k, c, s) VALUES ({k}, {c}, "
                            f"{x})")
            row(k, c)[0] = True
            statics[k] = x
        elif p < 0.15:
            session.execute(f"INSERT INTO m.sc (k, c, v) VALUES ({k}, {c}, "
                            f"{x})")
            r = row(k, c)
            r[0], r[1] = True, x
        elif p < 0.3:
            session.execute(f"UPDATE m.sc SET v = {x} WHERE k = {k} AND "
                            f"c = {c}")
            row(k, c)[1] = x
        elif p < 0.45:
            session.execute(f"UPDATE m.sc SET tags = tags + {{{x}}} WHERE "
                            f"k = {k} AND c = {c}")
            row(k, c)[2].add(x)
        elif p < 0.55:
            session.execute(f"UPDATE m.sc SET tags = tags - {{{x}}} WHERE "
                            f"k = {k} AND c = {c}")
            row(k, c)[2].discard(x)
        elif p < 0.65:
            session.execute(f"UPDATE m.sc SET s = {x} WHERE k = {k}")
            statics[k] = x
        elif p < 0.7:
            session.execute(f"DELETE s FROM m.sc WHERE k = {k}")
            statics.pop(k, None)
        elif p < 0.77:
            session.execute(f"DELETE v FROM m.sc WHERE k = {k} AND c = {c}")
            row(k, c)[1] = None
        elif p < 0.84:
            session.execute(f"DELETE FROM m.sc WHERE k = {k} AND c = {c}")
            rows.pop((k, c), None)
        elif p < 0.9:
            session.execute(f"DELETE FROM m.sc WHERE k = {k} AND c >= {c}")
            for key in [key for key in rows if key[0] == k and key[1] >= c]:
                del rows[key]
        elif p < 0.93:
            session.execute(f"DELETE FROM m.sc WHERE k = {k}")
            for key in [key for key in rows if key[0] == k]:
                del rows[key]
            statics.pop(k, None)
        elif p < 0.96:
            flush()
        else:
            subprocess.run([str(BUILD_DIR / "node" / "cassini-tool"), "-h",
                            ADDRESS, "compact", "m", "sc"], check=True,
                           capture_output=True, timeout=60)
        if step % 20 == 19:
            for key in range(3):
                want = [(key, c, r[1], statics.get(key),
                         sorted(r[2]) or None)
                        for (k2, c), r in sorted(rows.items())
                        if k2 == key and live(r)]
                if not want and statics.get(key) is not None:
                    want = [(key, None, None, statics[key], None)]
                got = [(r.k, r.c, r.v, r.s,
                        sorted(r.tags) if r.tags else None)
                       for r in session.execute(SimpleStatement(
                           f"SELECT k, c, v, s, tags FROM m.sc WHERE "
                           f"k = {key}", fetch_size=2))]
                assert got == want, (step, key)
                assert session.execute(
                    f"SELECT count(*) FROM m.sc WHERE k = {key}"
                ).one()[0] == len(want), (step, key)
