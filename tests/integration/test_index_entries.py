"""m[k] = v through the python driver on one node: an entries(m) index
answers it without ALLOW FILTERING, from memtables and SSTables; a deleted
or overwritten map entry, a deleted row and an expired entry are never
returned (the coordinator re-checks every row against the merged data);
ALLOW FILTERING on an unindexed map gives the same rows; literal and
prepared forms, paging. Node on 127.0.109.64; a 3-node RF 3 cluster on
127.0.109.65-67 (the pair goes to remote replicas in RangeReq's index
expression). No timing thresholds."""
import os
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel, InvalidRequest
from cassandra.cluster import Cluster
from cassandra.query import SimpleStatement

from conftest import BUILD_DIR, SOURCE_DIR, one_node_session

# --base-ip .65 -n 3 below: test-addresses: 127.0.109.64-67
ADDRESS = "127.0.109.64"


@pytest.fixture
def session(make_node):
    with one_node_session(make_node, ADDRESS, "e") as s:
        # m indexed by entries(), u the same data without an index
        s.execute("CREATE TABLE e.t (k int, c int, m map<text, int>, "
                  "u map<text, int>, PRIMARY KEY (k, c))")
        s.execute("CREATE INDEX ON e.t (entries(m))")
        yield s


def tool(*args):
    subprocess.run([str(BUILD_DIR / "node" / "cassini-tool"), "-h", ADDRESS,
                    *args], check=True, capture_output=True, timeout=60)


def rows(session, query, params=None, fetch=None):
    st = SimpleStatement(query, fetch_size=fetch)
    return sorted((r.k, r.c) for r in session.execute(st, params))


def check(session, model, key, value):
    want = sorted(kc for kc, m in model.items() if m.get(key) == value)
    lit = f"SELECT k, c FROM e.t WHERE m['{key}'] = {value}"
    assert rows(session, lit) == want, lit
    assert rows(session, lit, fetch=2) == want, lit + " (pages of 2)"
    prep = session.prepare("SELECT k, c FROM e.t WHERE m[?] = ?")
    got = sorted((r.k, r.c) for r in session.execute(prep, (key, value)))
    assert got == want, f"prepared m[{key!r}] = {value}"
    unidx = (f"SELECT k, c FROM e.t WHERE u['{key}'] = {value} "
             "ALLOW FILTERING")
    assert rows(session, unidx) == want, unidx
    return want


def put(session, model, k, c, key, value, ttl=None):
    using = f" USING TTL {ttl}" if ttl else ""
    session.execute(f"UPDATE e.t{using} SET m['{key}'] = {value}, "
                    f"u['{key}'] = {value} WHERE k = {k} AND c = {c}")
    if not ttl:
        model.setdefault((k, c), {})[key] = value


def test_map_entry_equality(session):
    model = {}
    for k in range(6):
        for c in range(3):
            put(session, model, k, c, "a", (k + c) % 3)
            put(session, model, k, c, "b", k % 2)
    assert len(check(session, model, "a", 1)) == 6
    # a deleted entry, an overwritten one, a deleted row (memtable)
    session.execute("DELETE m['b'], u['b'] FROM e.t WHERE k = 1 AND c = 0")
    del model[(1, 0)]["b"]
    put(session, model, 2, 0, "a", 7)
    session.execute("DELETE FROM e.t WHERE k = 3 AND c = 1")
    del model[(3, 1)]
    for key, value in (("a", 1), ("a", 7), ("b", 1), ("b", 0)):
        check(session, model, key, value)
    tool("flush", "e")
    for key, value in (("a", 1), ("a", 7), ("b", 1)):
        check(session, model, key, value)
    # deletions in the memtable shadow entries in the SSTable
    session.execute("DELETE m['a'], u['a'] FROM e.t WHERE k = 4 AND c = 0")
    del model[(4, 0)]["a"]
    put(session, model, 5, 2, "a", 1)
    put(session, model, 0, 1, "a", 9)
    session.execute("DELETE FROM e.t WHERE k = 5")
    for c in range(3):
        model.pop((5, c), None)
    put(session, model, 1, 1, "z", 3, ttl=1)  # expires before the reads
    time.sleep(1.5)
    for key, value in (("a", 1), ("a", 9), ("b", 1), ("z", 3)):
        check(session, model, key, value)
    tool("flush", "e")
    for key, value in (("a", 1), ("a", 9), ("b", 0), ("z", 3)):
        check(session, model, key, value)
    tool("compact", "e")
    for key, value in (("a", 1), ("a", 2), ("a", 9), ("b", 1), ("b", 0)):
        check(session, model, key, value)
    # a single partition through the index
    for k in (0, 2):
        want = [(k, c) for c in range(3)
                if model.get((k, c), {}).get("a") == 2]
        assert rows(session, f"SELECT k, c FROM e.t WHERE k = {k} AND "
                    "m['a'] = 2") == want


def test_refusals(session):
    with pytest.raises(InvalidRequest, match="Cannot execute this query"):
        session.execute("SELECT k FROM e.t WHERE u['a'] = 1")
    with pytest.raises(InvalidRequest,
                       match="Unsupported null map key for column m"):
        session.execute(session.prepare(
            "SELECT k FROM e.t WHERE m[?] = 1"), (None,))
    with pytest.raises(InvalidRequest,
                       match="Unsupported null map value for column m"):
        session.execute(session.prepare(
            "SELECT k FROM e.t WHERE m['a'] = ?"), (None,))


def test_three_nodes(tmp_path):
    env = dict(os.environ, CASSINI_HOME=str(tmp_path / "home"),
               CASSINI_BIN_DIR=str(BUILD_DIR))

    def run(*args):
        r = subprocess.run(["/usr/bin/python3",
                            str(SOURCE_DIR / "scripts" / "cluster.py"), *args],
                           capture_output=True, text=True, env=env,
                           timeout=180)
        assert r.returncode == 0, r.stdout + r.stderr

    run("create", "ie", "-n", "3", "--racks", "3", "--base-ip",
        "127.0.109.65", "-c", "gossip_interval=250ms")
    try:
        run("start")
        c = Cluster(["127.0.109.65"], protocol_version=4)
        s = c.connect()
        s.execute("CREATE KEYSPACE e WITH replication = {'class': "
                  "'SimpleStrategy', 'replication_factor': 3}")
        s.execute("CREATE TABLE e.t (k int PRIMARY KEY, m map<int, text>)")
        s.execute("CREATE INDEX ON e.t (entries(m))")
        ins = s.prepare("UPDATE e.t SET m[?] = ? WHERE k = ?")
        ins.consistency_level = ConsistencyLevel.ALL
        for k in range(30):
            s.execute(ins, (k % 4, "v%d" % (k % 3), k))
        want = sorted(k for k in range(30) if k % 4 == 1 and k % 3 == 2)
        sel = s.prepare("SELECT k FROM e.t WHERE m[?] = ?")
        for cl in (ConsistencyLevel.ONE, ConsistencyLevel.QUORUM,
                   ConsistencyLevel.ALL):
            sel.consistency_level = cl
            deadline = time.monotonic() + 60
            while True:  # the index may still be building on a replica
                try:
                    got = sorted(r.k for r in s.execute(sel, (1, "v2")))
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            assert got == want, cl
        c.shutdown()
    finally:
        subprocess.run(["/usr/bin/python3",
                        str(SOURCE_DIR / "scripts" / "cluster.py"), "-C",
                        "ie", "remove"], env=env, capture_output=True,
                       timeout=60)
