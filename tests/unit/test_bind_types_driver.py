"""Bind and result metadata for every type the server can name, in every
marker position, as the stock DataStax driver decodes it.

A model of Cassandra's PREPARE (cql3/Lists, Sets, Maps, Operation,
AbstractMarker, SingleColumnRelation, TokenRelation) gives each marker's
name and type; every statement is prepared against the executor and the
data path (cql_exec_server --data) and the driver's decoded
column_metadata must equal the model's. Each prepared statement is then
executed with values the driver serializes from that metadata (a wrong
type would fail in the driver), and rows written through the markers
read back equal. Types: every simple type, list/set/map of each (frozen
and not; maps with every key and value type), frozen collections as
partition and clustering keys (whose IN ? marker is a list of a frozen
collection: the PREPARE that used to kill the node).
"""
import datetime
import decimal
import ipaddress
import os
import pathlib
import random
import re
import subprocess
import uuid

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Cluster
from cassandra.util import Date, Time

BUILD = pathlib.Path(os.environ["CASSINI_BUILD_DIR"])
SERVER = BUILD / "tests" / "unit" / "cql_exec_server"
SEED = int(os.environ.get("CASSINI_SEED", "23"))

SIMPLE = ["ascii", "bigint", "blob", "boolean", "date", "decimal", "double",
          "float", "inet", "int", "smallint", "text", "time", "timestamp",
          "timeuuid", "tinyint", "uuid", "varint"]


def value(t, r):
    """A random value of CQL type `t` (a string: 'int', 'list<int>',
    'frozen<map<text, int>>') that round-trips exactly."""
    t = t.replace("frozen<", "", 1)[:-1] if t.startswith("frozen<") else t
    if t.startswith("list<"):
        return [value(t[5:-1], r) for _ in range(r.randrange(1, 3))]
    if t.startswith("set<"):
        return {value(t[4:-1], r) for _ in range(r.randrange(1, 3))}
    if t.startswith("map<"):
        k, v = t[4:-1].split(", ")
        return {value(k, r): value(v, r) for _ in range(r.randrange(1, 3))}
    n = r.randrange(-100, 100)
    return {
        "ascii": lambda: f"a{n}",
        "bigint": lambda: n * 10**15,
        "blob": lambda: bytes([n & 255, 7]),
        "boolean": lambda: n > 0,
        "date": lambda: Date(17000 + n),
        "decimal": lambda: decimal.Decimal(n) / 8,
        "double": lambda: n / 4,
        "float": lambda: n / 2,
        "inet": lambda: f"10.0.0.{n & 255}",
        "int": lambda: n,
        "smallint": lambda: n * 300,
        "text": lambda: f"t\u00e9{n}",
        "time": lambda: Time(abs(n) * 10**9),
        "timestamp": lambda: datetime.datetime(2024, 1, 1) +
        datetime.timedelta(milliseconds=abs(n) * 1001),
        "timeuuid": lambda: uuid.UUID(int=(abs(n) << 96) | (1 << 76) |
                                      (2 << 62)),
        "tinyint": lambda: n,
        "uuid": lambda: uuid.UUID(int=r.getrandbits(128)),
        "varint": lambda: n * 10**30,
    }[t]()


def as_blob(t):
    """<type>AsBlob(v); Cassandra has no blobAsBlob, v is its blob."""
    return "v" if t == "blob" else f"{t}AsBlob(v)"


def lit(t):
    """A CQL literal of simple type `t`."""
    return {"ascii": "'a'", "blob": "0x00", "boolean": "true",
            "date": "'2024-01-01'", "inet": "'1.2.3.4'", "text": "'t'",
            "time": "'10:00:00'", "timestamp": "'2024-01-01'",
            "timeuuid": "00000000-0000-1000-8000-000000000000",
            "uuid": "00000000-0000-4000-8000-000000000000"}.get(t, "1")


def same(a, b):
    if isinstance(a, dict) and hasattr(b, "items"):
        return len(a) == len(b) and all(
            any(same(k, k2) and same(v, v2) for k2, v2 in b.items())
            for k, v in a.items())
    if isinstance(a, (set, frozenset)) and b is not None and \
            not isinstance(b, (str, bytes)):
        return len(a) == len(b) and all(any(same(x, y) for y in b)
                                        for x in a)
    if isinstance(a, list) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(b, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
        return str(a) == str(b)
    return a == b


def bare(t):
    """The type as the protocol (and so the driver) names it: no frozen<>,
    and text is option 0x000D, which the driver calls varchar."""
    t = re.sub(r"\btext\b", "varchar", t)
    while "frozen<" in t:
        i = t.index("frozen<")
        depth, j = 0, i + 7
        while True:
            if t[j] == "<":
                depth += 1
            elif t[j] == ">":
                if depth == 0:
                    break
                depth -= 1
            j += 1
        t = t[:i] + t[i + 7:j] + t[j + 1:]
    return t


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bind-types")
    log = open(tmp / "server.log", "w")
    proc = subprocess.Popen([str(SERVER), "--data", str(tmp)],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    port = int(proc.stdout.readline().split()[1])
    cluster = Cluster(["127.0.0.1"], port=port)
    try:
        s = cluster.connect()
        s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
                  "'SimpleStrategy', 'replication_factor': 1}")
        s.set_keyspace("ks")
        yield s
    finally:
        cluster.shutdown()
        proc.terminate()
        rc = proc.wait(timeout=10)
        log.close()
        text = (tmp / "server.log").read_text()
        assert "ERROR: AddressSanitizer" not in text, text[-4000:]
        assert "runtime error" not in text, text[-4000:]
        assert rc in (0, -15), f"server exited {rc}: {text[-3000:]}"


class Checker:
    def __init__(self, session):
        self.s = session
        self.r = random.Random(SEED)
        self.checked = 0

    def check(self, cql, want, ok_errors=()):
        """Prepares `cql`, compares the driver's bind metadata with `want`
        (a list of (name, type)), and executes it with values of those
        types. InvalidRequest is accepted only for a feature Cassini
        refuses by name ("... not supported by Cassini yet") or when its
        message contains one of ok_errors."""
        ps = self.s.prepare(cql)
        got = [(c.name, c.type.cql_parameterized_type())
               for c in ps.column_metadata]
        assert got == [(n, bare(t)) for n, t in want], cql
        values = [POSITIVE[n](self.r) if n in POSITIVE else value(t, self.r)
                  for n, t in want]
        try:
            self.s.execute(ps, values)
        except InvalidRequest as e:
            assert any(m in str(e) for m in tuple(ok_errors) + ("Cassini",)), \
                (cql, str(e))
        self.checked += 1
        return ps


# Markers whose values must be positive.
POSITIVE = {
    "[limit]": lambda r: r.randrange(1, 100),
    "[per_partition_limit]": lambda r: r.randrange(1, 100),
    "[ttl]": lambda r: r.randrange(1, 100000),
    "[timestamp]": lambda r: r.randrange(1, 10**15),
    "idx(l)": lambda r: 0,
}

# Statements Cassini refuses at execution (each with a message naming
# the missing feature): reading before writing lists, CONTAINS filtering.
READ_BEFORE_WRITE = "read before the write"
FILTERING = "filtering"


def table_for(s, name, columns, key):
    s.execute(f"CREATE TABLE {name} ({', '.join(columns)}, "
              f"PRIMARY KEY {key})")


def test_every_type_in_every_marker_position(session):
    s = session
    c = Checker(s)
    for i, t in enumerate(SIMPLE):
        name = f"s_{t}"
        other = SIMPLE[(i + 5) % len(SIMPLE)]
        table_for(s, name, [
            f"k {t}", f"c {t}", f"v {t}", f"l list<{t}>", f"st set<{t}>",
            f"m map<{t}, {other}>", f"fl frozen<list<{t}>>",
            f"fs frozen<set<{t}>>", f"fm frozen<map<{other}, {t}>>"],
            "(k, c)")
        # keys in WHERE
        c.check(f"SELECT * FROM {name} WHERE k = ?", [("k", t)])
        c.check(f"SELECT * FROM {name} WHERE k IN ?",
                [("in(k)", f"list<{t}>")])
        c.check(f"SELECT * FROM {name} WHERE k IN (?, ?)",
                [("k", t), ("k", t)])
        c.check(f"SELECT * FROM {name} WHERE k = ? AND c = ?",
                [("k", t), ("c", t)])
        c.check(f"SELECT * FROM {name} WHERE k = ? AND c IN ?",
                [("k", t), ("in(c)", f"list<{t}>")])
        c.check(f"SELECT * FROM {name} WHERE k = ? AND c > ? AND c <= ?",
                [("k", t), ("c", t), ("c", t)])
        c.check(f"SELECT * FROM {name} WHERE k = ? AND (c) >= (?)",
                [("k", t), ("c", t)])
        c.check(f"SELECT * FROM {name} WHERE token(k) > token(?)",
                [("k", t)])
        c.check(f"SELECT * FROM {name} WHERE token(k) <= ?",
                [("partition key token", "bigint")])
        c.check(f"SELECT k FROM {name} WHERE v = ? ALLOW FILTERING",
                [("v", t)])
        c.check(f"SELECT k FROM {name} WHERE k = ? LIMIT ?",
                [("k", t), ("[limit]", "int")])
        c.check(f"SELECT k FROM {name} PER PARTITION LIMIT ? LIMIT ?",
                [("[per_partition_limit]", "int"), ("[limit]", "int")])
        c.check(f"SELECT k FROM {name} WHERE l CONTAINS ? ALLOW FILTERING",
                [("value(l)", t)], [FILTERING])
        c.check(f"SELECT k FROM {name} WHERE st CONTAINS ? ALLOW FILTERING",
                [("value(st)", t)], [FILTERING])
        c.check(f"SELECT k FROM {name} WHERE m CONTAINS ? ALLOW FILTERING",
                [("value(m)", other)], [FILTERING])
        c.check(f"SELECT k FROM {name} WHERE m CONTAINS KEY ? "
                "ALLOW FILTERING", [("key(m)", t)], [FILTERING])
        c.check(f"SELECT k FROM {name} WHERE fm CONTAINS ? ALLOW FILTERING",
                [("value(fm)", t)], [FILTERING])
        # writes: every column, USING, collection operations
        cols = [("k", t), ("c", t), ("v", t), ("l", f"list<{t}>"),
                ("st", f"set<{t}>"), ("m", f"map<{t}, {other}>"),
                ("fl", f"frozen<list<{t}>>"), ("fs", f"frozen<set<{t}>>"),
                ("fm", f"frozen<map<{other}, {t}>>")]
        ins = c.check(f"INSERT INTO {name} ({', '.join(n for n, _ in cols)})"
                      f" VALUES ({', '.join('?' for _ in cols)}) "
                      "USING TTL ? AND TIMESTAMP ?",
                      cols + [("[ttl]", "int"), ("[timestamp]", "bigint")])
        assert ins.routing_key_indexes == [0]
        w = "WHERE k = ? AND c = ?"
        kc = [("k", t), ("c", t)]
        c.check(f"UPDATE {name} USING TTL ? SET v = ?, fl = ? {w}",
                [("[ttl]", "int"), ("v", t), ("fl", f"frozen<list<{t}>>")]
                + kc)
        c.check(f"UPDATE {name} SET l = l + ?, st = st + ?, m = m + ? {w}",
                [("l", f"list<{t}>"), ("st", f"set<{t}>"),
                 ("m", f"map<{t}, {other}>")] + kc)
        c.check(f"UPDATE {name} SET l = ? + l {w}",
                [("l", f"list<{t}>")] + kc)
        c.check(f"UPDATE {name} SET st = st - ?, m = m - ? {w}",
                [("st", f"set<{t}>"), ("m", f"set<{t}>")] + kc)
        c.check(f"UPDATE {name} SET l = l - ? {w}",
                [("l", f"list<{t}>")] + kc, [READ_BEFORE_WRITE])
        c.check(f"UPDATE {name} SET m[?] = ? {w}",
                [("key(m)", t), ("value(m)", other)] + kc)
        c.check(f"UPDATE {name} SET l[?] = ? {w}",
                [("idx(l)", "int"), ("value(l)", t)] + kc,
                [READ_BEFORE_WRITE])
        c.check(f"DELETE st[?], m[?] FROM {name} USING TIMESTAMP ? {w}",
                [("value(st)", t), ("key(m)", t),
                 ("[timestamp]", "bigint")] + kc)
        c.check(f"DELETE l[?] FROM {name} {w}", [("idx(l)", "int")] + kc,
                [READ_BEFORE_WRITE])
        c.check(f"DELETE FROM {name} WHERE k IN ? AND c IN ?",
                [("in(k)", f"list<{t}>"), ("in(c)", f"list<{t}>")])
        c.check(f"DELETE FROM {name} WHERE k = ? AND c >= ?",
                [("k", t), ("c", t)])
        c.check(f"BEGIN BATCH USING TIMESTAMP ? "
                f"INSERT INTO {name} (k, c, v) VALUES (?, ?, ?); "
                f"DELETE v FROM {name} {w}; APPLY BATCH",
                [("[timestamp]", "bigint"), ("k", t), ("c", t), ("v", t)]
                + kc)
        # a row written through every marker reads back equal
        vals = [value(ct, c.r) for _, ct in cols]
        s.execute(s.prepare(f"INSERT INTO {name} "
                            f"({', '.join(n for n, _ in cols)}) "
                            f"VALUES ({', '.join('?' for _ in cols)})"),
                  vals)
        sel = s.prepare(f"SELECT {', '.join(n for n, _ in cols)} "
                        f"FROM {name} WHERE k = ? AND c = ?")
        assert [(x[2], x[3].cql_parameterized_type())
                for x in sel.result_metadata] == \
            [(n, bare(ct)) for n, ct in cols]
        fns = s.prepare(f"SELECT max(v), min(v), count(v), writetime(v), "
                        f"ttl(v), token(k), {as_blob(t)}, m[{lit(t)}] "
                        f"FROM {name} WHERE k = ?")
        assert [x[3].cql_parameterized_type()
                for x in fns.result_metadata] == \
            [bare(x) for x in (t, t, "bigint", "bigint", "int", "bigint",
                               "blob", other)], name
        s.execute(fns, [vals[0]])
        rows = list(s.execute(sel, vals[:2]))
        assert len(rows) == 1, (name, vals)
        for (n, ct), want, got in zip(cols, vals, rows[0]):
            assert same(want, got), (name, n, want, got)
    assert c.checked > 500


def test_maps_of_every_key_and_value_type(session):
    s = session
    c = Checker(s)
    for k in SIMPLE:
        name = f"m_{k}"
        table_for(s, name, ["id int"] +
                  [f"m_{v} map<{k}, {v}>" for v in SIMPLE] +
                  [f"f_{v} frozen<map<{k}, {v}>>" for v in SIMPLE], "(id)")
        for v in SIMPLE:
            mt, ft = f"map<{k}, {v}>", f"frozen<map<{k}, {v}>>"
            c.check(f"INSERT INTO {name} (id, m_{v}, f_{v}) VALUES (?, ?, ?)",
                    [("id", "int"), (f"m_{v}", mt), (f"f_{v}", ft)])
            c.check(f"UPDATE {name} SET m_{v} = m_{v} + ?, "
                    f"m_{v}[?] = ?, m_{v} = m_{v} - ? WHERE id = ?",
                    [(f"m_{v}", mt), (f"key(m_{v})", k),
                     (f"value(m_{v})", v), (f"m_{v}", f"set<{k}>"),
                     ("id", "int")])
            c.check(f"DELETE m_{v}[?] FROM {name} WHERE id = ?",
                    [(f"key(m_{v})", k), ("id", "int")])
            c.check(f"SELECT id FROM {name} WHERE f_{v} = ? "
                    "ALLOW FILTERING", [(f"f_{v}", ft)])
        vals = [1] + [value(f"map<{k}, {v}>", c.r) for v in SIMPLE]
        s.execute(s.prepare(
            f"INSERT INTO {name} (id, {', '.join('f_' + v for v in SIMPLE)})"
            f" VALUES (?{', ?' * len(SIMPLE)})"), vals)
        row = s.execute(f"SELECT {', '.join('f_' + v for v in SIMPLE)} "
                        f"FROM {name} WHERE id = 1").one()
        for v, want, got in zip(SIMPLE, vals[1:], row):
            assert same(want, got), (name, v, want, got)
    assert c.checked == len(SIMPLE) * len(SIMPLE) * 4


def test_frozen_collections_as_keys_in_every_marker_position(session):
    s = session
    c = Checker(s)
    for i, t in enumerate(SIMPLE):
        other = SIMPLE[(i + 7) % len(SIMPLE)]
        for j, (kt, ct) in enumerate((
                (f"frozen<list<{t}>>", f"frozen<set<{t}>>"),
                (f"frozen<set<{t}>>", f"frozen<map<{t}, {other}>>"),
                (f"frozen<map<{other}, {t}>>", f"frozen<list<{t}>>"))):
            name = f"fk_{t}_{j}"
            table_for(s, name, [f"k {kt}", f"c {ct}", "v int"], "(k, c)")
            c.check(f"SELECT v FROM {name} WHERE k = ?", [("k", kt)])
            c.check(f"SELECT v FROM {name} WHERE k IN ?",
                    [("in(k)", f"list<{kt}>")])
            c.check(f"SELECT v FROM {name} WHERE k = ? AND c IN ? "
                    "ORDER BY c DESC",
                    [("k", kt), ("in(c)", f"list<{ct}>")])
            c.check(f"UPDATE {name} SET v = ? WHERE k IN ? AND c IN ?",
                    [("v", "int"), ("in(k)", f"list<{kt}>"),
                     ("in(c)", f"list<{ct}>")])
            c.check(f"DELETE FROM {name} WHERE k = ? AND c IN ?",
                    [("k", kt), ("in(c)", f"list<{ct}>")])
            key, ck = value(kt, c.r), value(ct, c.r)
            s.execute(s.prepare(f"INSERT INTO {name} (k, c, v) "
                                "VALUES (?, ?, ?)"), [key, ck, 5])
            rows = list(s.execute(s.prepare(
                f"SELECT k, c, v FROM {name} WHERE k IN ? AND c IN ?"),
                [[key], [ck]]))
            assert len(rows) == 1 and same(key, rows[0][0]) and \
                same(ck, rows[0][1]), (name, key, ck, rows)
    assert c.checked == len(SIMPLE) * 3 * 5
