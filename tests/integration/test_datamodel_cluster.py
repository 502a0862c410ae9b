"""The data model's types on a real 3-node cluster (RF 3) through the stock
DataStax python driver: non-frozen UDT columns (whole values, `SET a.f`,
`DELETE a.f`, field TTLs), frozen UDTs in collections, tuples, durations,
vectors, nested collections and frozen collections as map keys, and
counters (hints and repair carry the leader's shards).

- written while one replica is stopped: hints bring them to it;
- written while another replica is stopped with handoff off: repair
  streams them to it (and the field tombstones and row deletions);
- then every node is flushed, compacted and restarted, and every node
  reads the expected values at ALL as a coordinator and at ONE alone
  (the other two stopped), so each replica holds all of them.

Nodes live on 127.0.103.61-63."""
import re
import time

from cassandra import ConsistencyLevel as CL
from cassandra.util import Duration

from clusters import run_at, session, state, tool, tool_run, wait_for
from conftest import default_yaml, seeds_yaml, wait_all_normal

IPS = ["127.0.103.61", "127.0.103.62", "127.0.103.63"]
H = 3600 * 10**9  # an hour in nanoseconds

SCHEMA = [
    "CREATE KEYSPACE dm WITH replication = {'class': 'SimpleStrategy', "
    "'replication_factor': 3}",
    "CREATE TYPE dm.addr (street text, zip int)",
    "CREATE TYPE dm.point (x int, y text)",
    "CREATE TABLE dm.t (k int PRIMARY KEY, a addr, "
    "pts list<frozen<point>>, pm map<text, frozen<point>>, "
    "tp tuple<int, text, frozen<list<int>>>, d duration, "
    "v vector<float, 3>, nest map<text, frozen<list<frozen<set<int>>>>>, "
    "fk map<frozen<list<int>>, text>)",
    "CREATE TABLE dm.c (k int PRIMARY KEY, n counter, m counter)",
]
COLS = ["a", "pts", "pm", "tp", "d", "v", "nest", "fk"]


def norm(x):
    """A hashable, order-insensitive-where-CQL-is form of a driver value
    (UDTs as tuples, sets as frozensets, maps as frozensets of pairs)."""
    if x is None or isinstance(x, (int, float, str, bytes, Duration)):
        return x
    if hasattr(x, "items"):
        return frozenset((norm(k), norm(v)) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return tuple(norm(e) for e in x)
    return frozenset(norm(e) for e in x)  # set, sortedset


def full_row(k, street, zip_, pts, pm, tp, d, v, nest, fk):
    return {"a": (street, zip_), "pts": pts, "pm": pm, "tp": tp, "d": d,
            "v": v, "nest": nest, "fk": fk}


class Model:
    """Statements run at a consistency level, and what they leave."""

    def __init__(self):
        self.rows = {}
        self.counters = {}
        self.expire = {}  # k -> (time, field): a field whose TTL runs out

    def insert(self, s, cl, k):
        run_at(s, "INSERT INTO dm.t (k, a, pts, pm, tp, d, v, nest, fk) "
               "VALUES (%s, {street: %s, zip: %s}, [{x: %s, y: 'p'}], "
               "{'a': {x: 1, y: 'q'}}, (%s, 't', [1, 2]), 1h30m, "
               "[1.0, 2.0, 3.0], {'n': [{1, 2}, {3}]}, {[1, 2]: 'x'})",
               cl, (k, "s%d" % k, k, k, k))
        self.rows[k] = {"a": ("s%d" % k, k), "pts": [(k, "p")],
                        "pm": {"a": (1, "q")}, "tp": (k, "t", [1, 2]),
                        "d": Duration(0, 0, 90 * 60 * 10**9),
                        "v": [1.0, 2.0, 3.0],
                        "nest": {"n": [{1, 2}, {3}]},
                        "fk": {(1, 2): "x"}}

    def run(self, s, cl, cql, k, change):
        run_at(s, cql.replace("K", str(k)), cl)
        row = self.rows.setdefault(k, {c: None for c in COLS})
        change(row)
        # a UDT whose fields are all gone reads as null
        if row["a"] is not None and all(f is None for f in row["a"]):
            row["a"] = None
        for c in ("pts", "pm", "nest", "fk"):
            if row[c] is not None and len(row[c]) == 0:
                row[c] = None
        if all(row[c] is None for c in COLS):
            del self.rows[k]

    def inc(self, s, cl, k, n, m=0):
        """Counter increments: what hints and repair carry are the
        leader's shards, not the deltas."""
        run_at(s, "UPDATE dm.c SET n = n + %s, m = m - %s WHERE k = %s", cl,
               (n, m, k))
        was = self.counters.get(k, (0, 0))
        self.counters[k] = (was[0] + n, was[1] - m)

    def want(self):
        rows = {k: {c: norm(v) for c, v in r.items()}
                for k, r in self.rows.items()}
        return rows, dict(self.counters)


def setf(col, i, value):
    def f(row):
        cur = list(row[col] or (None, None))
        cur[i] = value
        row[col] = tuple(cur)
    return f


def put(col, key, value):
    def f(row):
        m = dict(row[col] or {})
        if value is None:
            m.pop(key, None)
        else:
            m[key] = value
        row[col] = m
    return f


def assign(**cols):
    def f(row):
        row.update(cols)
    return f


def gone(row):
    for c in COLS:
        row[c] = None


def read(s, cl):
    got = {}
    for r in run_at(s, "SELECT k, a, pts, pm, tp, d, v, nest, fk "
                    "FROM dm.t", cl):
        row = {c: getattr(r, c) for c in COLS}
        # the driver (3.25) has no vector type: the value's bytes
        if isinstance(row["v"], bytes):
            import struct
            row["v"] = list(struct.unpack(">3f", row["v"]))
        got[r.k] = {c: norm(v) for c, v in row.items()}
    counters = {r.k: (r.n, r.m)
                for r in run_at(s, "SELECT k, n, m FROM dm.c", cl)}
    return got, counters


def start_cluster(make_node):
    nodes = []
    for i, ip in enumerate(IPS):
        n = make_node(default_yaml(
            listen_address=ip, gossip_interval="250ms",
            seed_provider=seeds_yaml(IPS[0])), name=f"n{i + 1}")
        n.start()
        nodes.append(n)
    for n in nodes:
        assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    wait_all_normal(IPS, timeout=60)
    return nodes


def start(node):
    mark = node.log_size()
    node.start()
    assert node.wait_for_log("CQL clients on", timeout=90, since=mark), \
        node.log()[mark:]


def fetched_by(out, ip):
    """Rows `ip` fetched, in a repair summary."""
    m = re.search(re.escape(ip) + r":\d+\s+streamed \d+ rows \(\d+ bytes\), "
                  r"fetched (\d+) rows", out)
    assert m, out
    return int(m.group(1))


def alone(nodes, i, want):
    """Stops every node but nodes[i], reads at ONE from it (no read repair
    can help) and compares with `want`, then starts the others again."""
    others = [n for j, n in enumerate(nodes) if j != i]
    for o in others:
        o.stop(timeout=30)
    c, s = session(IPS[i])
    try:
        assert read(s, CL.ONE) == want, IPS[i]
    finally:
        c.shutdown()
    for o in others:
        start(o)
    wait_all_normal(IPS, timeout=60)


def expired(at):
    """Waits until a TTL of 3 s set at `at` (monotonic) has run out."""
    while time.monotonic() < at + 4:
        time.sleep(0.2)


def test_types_through_hints_repair_flush_compaction_restart(make_node):
    nodes = start_cluster(make_node)
    n1, n2, n3 = IPS
    c, s = session(n1)
    for q in SCHEMA:
        s.execute(q)
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)
    m = Model()
    for k in range(6):
        m.insert(s, CL.ALL, k)
        m.inc(s, CL.ALL, k, k + 1)
    assert read(s, CL.ALL) == m.want()
    # a field's TTL and writetime
    r = run_at(s, "SELECT ttl(a.street), writetime(a.zip) FROM dm.t "
               "WHERE k = 0", CL.ALL).one()
    assert r[0] is None and r[1] > 0, r

    # -- node3 stopped: the writes reach it as hints --------------------
    nodes[2].stop(timeout=30)
    assert wait_for(lambda: state(n1, n3) == "DN", timeout=40)
    q = CL.QUORUM
    m.run(s, q, "UPDATE dm.t SET a.zip = 100 WHERE k = K", 0,
          setf("a", 1, 100))
    m.run(s, q, "DELETE pm['a'] FROM dm.t WHERE k = K", 0,
          put("pm", "a", None))
    m.run(s, q, "DELETE a.street FROM dm.t WHERE k = K", 1,
          setf("a", 0, None))
    m.run(s, q, "UPDATE dm.t SET d = -2d WHERE k = K", 1,
          assign(d=Duration(0, -2, 0)))
    m.run(s, q, "UPDATE dm.t USING TTL 100000 SET a.street = 'long' "
          "WHERE k = K", 2, setf("a", 0, "long"))
    m.run(s, q, "UPDATE dm.t USING TTL 3 SET a.street = 'short' "
          "WHERE k = K", 3, setf("a", 0, None))  # gone once it expires
    short_at = time.monotonic()
    m.run(s, q, "UPDATE dm.t SET a = {street: 'new'} WHERE k = K", 4,
          assign(a=("new", None)))
    m.run(s, q, "UPDATE dm.t SET pts = pts + [{x: 9, y: 'z'}], "
          "pm['b'] = {x: 2}, nest['m'] = [{7}] WHERE k = K", 5,
          lambda row: row.update(
              pts=row["pts"] + [(9, "z")],
              pm=dict(row["pm"], b=(2, None)),
              nest=dict(row["nest"], m=[{7}])))
    m.run(s, q, "INSERT INTO dm.t (k, tp, d, v, fk) VALUES (K, "
          "(6, null, []), P1DT2H, [4.0, 5.0, 6.0], {[]: 'e', [3]: 'f'})", 6,
          assign(tp=(6, None, []), d=Duration(0, 1, 2 * H),
                 v=[4.0, 5.0, 6.0], fk={(): "e", (3,): "f"}))
    m.run(s, q, "UPDATE dm.t SET a.zip = 7 WHERE k = K", 7,
          setf("a", 1, 7))
    for k in range(8):
        m.inc(s, q, k % 4, 10, k)
    pending = tool(n1, "listpendinghints")
    assert n3 in pending, pending
    c.shutdown()
    start(nodes[2])
    # every node: a counter leader other than the coordinator keeps the
    # hints of the states it replicates
    assert wait_for(lambda: all("does not have any pending hints" in
                                tool(ip, "listpendinghints") for ip in IPS),
                    timeout=90)
    wait_all_normal(IPS, timeout=60)
    expired(short_at)
    alone(nodes, 2, m.want())  # node3 has every hinted write

    # -- node2 stopped, handoff off: only repair brings these to it ------
    for ip in IPS:
        tool(ip, "disablehandoff")
    nodes[1].stop(timeout=30)
    assert wait_for(lambda: state(n1, n2) == "DN", timeout=40)
    c, s = session(n1)
    m.run(s, q, "DELETE a.zip FROM dm.t WHERE k = K", 0,
          setf("a", 1, None))
    m.run(s, q, "DELETE FROM dm.t WHERE k = K", 1, gone)
    m.run(s, q, "UPDATE dm.t SET a.zip = 22 WHERE k = K", 2,
          setf("a", 1, 22))
    m.run(s, q, "UPDATE dm.t SET a = {street: 'b', zip: 44} WHERE k = K", 4,
          assign(a=("b", 44)))
    m.run(s, q, "UPDATE dm.t SET pts = [{x: 1, y: 'only'}], "
          "nest['n'] = [] WHERE k = K", 5,
          lambda row: row.update(pts=[(1, "only")],
                                 nest=dict(row["nest"], n=[])))
    m.run(s, q, "DELETE pm['b'] FROM dm.t WHERE k = K", 5,
          put("pm", "b", None))
    m.run(s, q, "UPDATE dm.t SET tp = (60, 'six', [6]), "
          "v = [7.0, 8.0, 9.0], d = P1W WHERE k = K", 6,
          assign(tp=(60, "six", [6]), v=[7.0, 8.0, 9.0],
                 d=Duration(0, 7, 0)))
    m.run(s, q, "UPDATE dm.t SET fk[[5]] = 'g' WHERE k = K", 7,
          put("fk", (5,), "g"))
    m.insert(s, q, 10)
    for k in range(8):
        m.inc(s, q, k % 3 + 2, 100, 1)
    m.run(s, q, "UPDATE dm.t USING TTL 100000 SET a.street = 't11' "
          "WHERE k = K", 11, setf("a", 0, "t11"))
    c.shutdown()
    start(nodes[1])
    wait_all_normal(IPS, timeout=60)
    r = tool_run(n1, "repair", "dm", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert fetched_by(r.stdout, n2) > 0, r.stdout
    for ip in IPS:
        tool(ip, "enablehandoff")

    # -- flush, compact and restart every node ----------------------------
    for ip in IPS:
        tool(ip, "flush", "dm")
    for ip in IPS:
        tool(ip, "compact", "dm")
    for n in nodes:
        n.stop(timeout=30)
        start(n)
    wait_all_normal(IPS, timeout=60)

    want = m.want()
    # each replica alone holds all of it (before any read at ALL, whose
    # read repair could hide a replica's gap)
    for i in range(len(IPS)):
        alone(nodes, i, want)
    for ip in IPS:
        c, s = session(ip)
        assert read(s, CL.ALL) == want, ip
        r = run_at(s, "SELECT ttl(a.street), ttl(a.zip), "
                   "writetime(a.street) FROM dm.t WHERE k = 2", CL.ALL).one()
        assert 0 < r[0] <= 100000 and r[1] is None and r[2] > 0, r
        c.shutdown()
