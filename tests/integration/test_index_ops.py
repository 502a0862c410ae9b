"""Secondary index operations on one real node with the stock DataStax
driver (docs/indexes.md): the text analyzer options, a failed index
build, a corrupt index component on disk and the index sizes of
tablestats. Nodes on 127.0.109.60-62, one per test. No timing
thresholds."""
import subprocess
import time
import unicodedata

import pytest
from cassandra import ReadFailure
from cassandra.cluster import Cluster

from conftest import BUILD_DIR, default_yaml

TOOL = str(BUILD_DIR / "node" / "cassini-tool")


def start(make_node, ip, **extra):
    n = make_node(default_yaml(listen_address=ip, **extra))
    n.start()
    assert n.wait_for_log("CQL clients on"), n.log()
    return n


def connect(ip):
    c = Cluster([ip], protocol_version=4)
    s = c.connect()
    return c, s


def tool(ip, *args, check=True):
    r = subprocess.run([TOOL, "-h", ip, *args], capture_output=True,
                       text=True, timeout=120)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def until(pred, what, ceiling=60):
    deadline = time.monotonic() + ceiling
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"never happened: {what}")


def nfd(s):
    return unicodedata.normalize("NFD", s)


# ---- analyzer options ----------------------------------------------------

ROWS = {
    1: "HELLO",
    2: "hello",
    3: "\u00c9COLE",            # ÉCOLE, composed
    4: nfd("\u00e9cole"),       # école, decomposed (e + U+0301)
    5: "cr\u00e8me br\u00fbl\u00e9e",
    6: "Stra\u00dfe",           # Straße
    7: "\u039f\u0394\u039f\u03a3",  # ΟΔΟΣ
    8: "\u0416\u0423\u041a",    # ЖУК
    9: "ecole",
}
OPTIONS = {
    "plain": "",
    "ci": "{'case_sensitive': 'false'}",
    "nf": "{'normalize': 'true'}",
    "af": "{'ascii': 'true'}",
    "alls": "{'case_sensitive': 'false', 'normalize': 'true', "
            "'ascii': 'true'}",
}
# (column, query value, keys expected)
CASES = [
    ("plain", "hello", [2]),
    ("plain", "\u00e9cole", []),             # composed: no decomposed match
    ("ci", "hello", [1, 2]),
    ("ci", "HeLLo", [1, 2]),
    ("ci", "\u00e9cole", [3]),                # É lowered; 4 is decomposed
    ("ci", "\u03bf\u03b4\u03bf\u03c2", [7]),  # final sigma
    ("ci", "\u0436\u0443\u043a", [8]),
    ("nf", "\u00e9cole", [4]),                # composed finds decomposed
    ("nf", nfd("\u00e9cole"), [4]),
    ("nf", "\u00c9COLE", [3]),
    ("af", "creme brulee", [5]),
    ("af", "Strasse", [6]),
    ("af", "ecole", [9]),                    # decomposed 4 keeps its mark
    ("af", "ECOLE", [3]),
    ("alls", "ecole", [3, 4, 9]),
    ("alls", "\u00c9cOlE", [3, 4, 9]),
    ("alls", "CREME BRULEE", [5]),
    ("alls", "strasse", [6]),
]


def check_cases(s):
    sel = {col: s.prepare(f"SELECT k FROM ks.t WHERE {col} = ?")
           for col in OPTIONS}
    for col, value, want in CASES:
        got = sorted(r.k for r in s.execute(sel[col], (value,)))
        assert got == want, (col, ascii(value), got, want)
        # the same as a literal, and inside an IN
        lit = value.replace("'", "''")
        got = sorted(r.k for r in s.execute(
            f"SELECT k FROM ks.t WHERE {col} = '{lit}'"))
        assert got == want, (col, ascii(value), got, want)
        got = sorted(r.k for r in s.execute(
            f"SELECT k FROM ks.t WHERE {col} IN ('{lit}', 'zzz')"))
        assert got == want, (col, "IN", ascii(value), got, want)
    # a column without an index compares the bytes (ALLOW FILTERING)
    got = sorted(r.k for r in s.execute(
        "SELECT k FROM ks.t WHERE raw = 'hello' ALLOW FILTERING"))
    assert got == [2]


def test_analyzer_options(make_node):
    ip = "127.0.109.60"
    node = start(make_node, ip)
    c, s = connect(ip)
    s.execute("CREATE KEYSPACE ks WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, plain text, ci text, "
              "nf text, af text, alls text, raw text)")
    for col, opts in OPTIONS.items():
        with_opts = f" WITH OPTIONS = {opts}" if opts else ""
        s.execute(f"CREATE CUSTOM INDEX t_{col} ON ks.t ({col}) USING "
                  f"'StorageAttachedIndex'{with_opts}")
    ins = s.prepare("INSERT INTO ks.t (k, plain, ci, nf, af, alls, raw) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)")
    for k, v in ROWS.items():
        if k == 6:  # some rows in an SSTable, the rest in the memtable
            tool(ip, "flush", "ks", "t")
        s.execute(ins, (k, v, v, v, v, v, v))
    check_cases(s)
    tool(ip, "flush", "ks", "t")  # the components of SSTables alone
    check_cases(s)

    rows = {r.index_name: r.analyzer for r in s.execute(
        "SELECT index_name, analyzer FROM system_views.sai_column_indexes "
        "WHERE keyspace_name = 'ks'")}
    assert rows["t_plain"] == "NoOpAnalyzer"
    assert rows["t_nf"] == ("NonTokenizingAnalyzer{caseSensitive=true, "
                            "normalized=true, ascii=false}")
    assert rows["t_alls"] == ("NonTokenizingAnalyzer{caseSensitive=false, "
                              "normalized=true, ascii=true}")
    c.shutdown()

    # after a restart, from the components on disk
    node.restart()
    c, s = connect(ip)
    check_cases(s)
    c.shutdown()


# ---- a failed build ------------------------------------------------------

NOT_AVAILABLE = "INDEX_NOT_AVAILABLE"


def query_v(s, v):
    return sorted(r.k for r in s.execute(f"SELECT k FROM ks.t WHERE v = {v}"))


def test_failed_build_stays_failed_until_rebuilt(make_node):
    ip = "127.0.109.61"
    node = start(make_node, ip, test_fault_injection="true")
    c, s = connect(ip)
    s.execute("CREATE KEYSPACE ks WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int)")
    for k in range(100):
        s.execute("INSERT INTO ks.t (k, v) VALUES (%s, %s)", (k, k % 5))
    tool(ip, "flush", "ks", "t")
    tool(ip, "indexbuildfault", "fail")
    s.execute("CREATE INDEX t_v ON ks.t (v)")
    until(lambda: "index t_v on ks.t: build failed" in node.log(),
          "the build fails")

    def refused(sess):
        with pytest.raises(ReadFailure) as e:
            query_v(sess, 3)
        assert NOT_AVAILABLE in str(e.value), str(e.value)

    refused(s)
    st = list(s.execute("SELECT is_queryable, is_building FROM "
                        "system_views.sai_column_indexes WHERE "
                        "keyspace_name = 'ks'"))
    assert [tuple(r) for r in st] == [(False, False)]
    # a rebuild that fails again says so
    r = tool(ip, "rebuild_index", "ks", "t", "t_v", check=False)
    assert r.returncode != 0 and "rebuild of index t_v failed" in r.stderr, \
        r.stdout + r.stderr
    refused(s)
    c.shutdown()

    # a restart (the fault is gone with it) keeps the index failed
    mark = node.log_size()
    node.restart()
    assert "its build failed before the restart" in node.log()[mark:]
    c, s = connect(ip)
    refused(s)
    time.sleep(1)  # nothing builds it behind our back
    refused(s)
    tool(ip, "rebuild_index", "ks", "t", "t_v")
    assert query_v(s, 3) == list(range(3, 100, 5))
    c.shutdown()
    node.restart()
    c, s = connect(ip)
    assert query_v(s, 3) == list(range(3, 100, 5))
    c.shutdown()


# ---- a corrupt component, tablestats ---------------------------------------

def index_bytes(ip, name):
    out = tool(ip, "tablestats", "ks", "t").stdout
    line = f"SAI index {name} disk space used (bytes): "
    for ln in out.splitlines():
        if ln.strip().startswith(line):
            return int(ln.strip()[len(line):])
    raise AssertionError(out)


def test_corrupt_component_is_detected_never_a_wrong_answer(make_node):
    ip = "127.0.109.62"
    node = start(make_node, ip)
    c, s = connect(ip)
    s.execute("CREATE KEYSPACE ks WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int, w text)")
    s.execute("CREATE INDEX t_v ON ks.t (v)")
    s.execute("CREATE INDEX t_w ON ks.t (w)")
    assert index_bytes(ip, "t_v") == 0
    for k in range(400):
        s.execute("INSERT INTO ks.t (k, v, w) VALUES (%s, %s, %s)",
                  (k, k % 20, "w%d" % (k % 7)))
    tool(ip, "flush", "ks", "t")
    want = list(range(7, 400, 20))
    assert query_v(s, 7) == want
    size_v = index_bytes(ip, "t_v")
    assert size_v > 0 and index_bytes(ip, "t_w") > 0
    c.shutdown()
    node.stop()

    comps = list((node.home / "data" / "data" / "ks").glob(
        "t-*/ca-*-SAI_t_v.db"))
    assert len(comps) == 1, comps
    data = bytearray(comps[0].read_bytes())
    assert len(data) == size_v
    for off in range(len(data) // 3, len(data) // 3 + 8):
        data[off] ^= 0x5A  # inside the terms and keys, not the header
    comps[0].write_bytes(bytes(data))

    mark = node.log_size()
    node.start()
    assert node.wait_for_log("CQL clients on", since=mark), node.log()
    c, s = connect(ip)
    assert query_v(s, 7) == want
    # a damaged block is found when a query reads it: that query, and
    # every one after, scans the SSTable (whole); the others are answered
    # from the component's sound blocks
    for v in range(20):
        assert query_v(s, v) == list(range(v, 400, 20))
    log = node.log()[mark:]
    assert "is missing or corrupt" in log and "SAI_t_v.db" in log, log
    # written again in the background, and used
    until(lambda: comps[0].read_bytes() != bytes(data),
          "the component is written again")
    until(lambda: "index t_v on ks.t: built" in node.log()[mark:],
          "the repair finishes")
    for v in range(20):
        assert query_v(s, v) == list(range(v, 400, 20))
    assert index_bytes(ip, "t_v") == size_v
    c.shutdown()
