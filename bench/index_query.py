#!/usr/bin/python3
"""Secondary index costs on a 3-node cluster, RF 3 (FIRST_IP and the next
two addresses, default 127.0.109.1-3; private CASSINI_HOME), issue #27's
targets, in one run:

1. INSERT throughput with cassini-stress at QUORUM into a table with two
   SAI indexes (`-col indexed=yes`: indexed2) and into the same table
   without (`-col indexed=no`: plain2), alternated (plain, indexed,
   indexed, plain) with the memtables flushed and compactions settled
   before each run; the ratio of the means.
2. The p50 latency of a query matching 100 rows out of ROWS by an
   indexed column, against the same query by an unindexed copy of the
   column with ALLOW FILTERING (same table, same data), at ONE and QUORUM.

Usage: flock /tmp/cassini-tests.lock /usr/bin/python3 bench/index_query.py \
    [ROWS] [STRESS_N]
(ROWS default 1000000, 0: the write cost only; STRESS_N per stress run
default 100000; ROUNDS: of the four alternated stress runs, default 1;
CASSINI_BIN_DIR: a build directory, default build/dev; FIRST_IP: the
first node's address)
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CASSINI_BIN_DIR", SRC + "/build/dev")
env = dict(os.environ, CASSINI_HOME=tempfile.mkdtemp(prefix="index-bench-"),
           CASSINI_BIN_DIR=BIN)
ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 1000000
STRESS_N = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
ROUNDS = int(os.environ.get("ROUNDS", "1"))  # of the four stress runs
FIRST = os.environ.get("FIRST_IP", "127.0.109.1")
BASE, LAST = FIRST.rsplit(".", 1)[0] + ".", int(FIRST.rsplit(".", 1)[1])
IPS = [BASE + str(LAST + i) for i in range(3)]


def run(*a, check=True):
    r = subprocess.run(["/usr/bin/python3", SRC + "/scripts/cluster.py",
                        "-C", "ixb", *a], env=env, capture_output=True,
                       text=True, timeout=900)
    if check and r.returncode:
        print(r.stdout, r.stderr)
        sys.exit(1)
    return r.stdout


def settle():
    """Memtables flushed, no compaction running or due, on every node."""
    for n in ("node1", "node2", "node3"):
        run("node", n, "tool", "flush")
    for n in ("node1", "node2", "node3"):
        for _ in range(1200):
            if re.search(r"^pending tasks: 0", run("node", n, "tool",
                                                   "compactionstats"),
                         re.M):
                break
            time.sleep(0.5)


def stress(indexed):
    settle()
    r = subprocess.run([BIN + "/node/cassini-stress", "write",
                        f"n={STRESS_N}", "cl=QUORUM", "-rate", "threads=64",
                        "-col", "size=34",
                        "indexed=" + ("yes" if indexed else "no"),
                        "-schema", "replication(factor=3)",
                        "-node", ",".join(IPS)],
                       capture_output=True, text=True, timeout=900)
    m = re.search(r"Op rate\s*:\s*([0-9.]+)", r.stdout)
    if r.returncode or not m:
        print(r.stdout, r.stderr)
        sys.exit(1)
    return float(m.group(1))


def load(s, n):
    ins = s.prepare("INSERT INTO b.t (k, c, v, u, w) VALUES (?, ?, ?, ?, ?)")
    ins.consistency_level = ConsistencyLevel.QUORUM
    groups = n // 100
    t0 = time.perf_counter()
    step = 50000
    for lo in range(0, n, step):
        args = [(i // 10, i % 10, i % groups, i % groups, str(i % 7))
                for i in range(lo, min(n, lo + step))]
        execute_concurrent_with_args(s, ins, args, concurrency=96,
                                     raise_on_first_error=True)
    return n / (time.perf_counter() - t0)


def p50(s, cql, values, cl):
    times = []
    for x in values:
        st = SimpleStatement(cql, consistency_level=cl, fetch_size=5000)
        t0 = time.perf_counter()
        rows = list(s.execute(st, (x,), timeout=120))
        times.append(time.perf_counter() - t0)
        assert len(rows) == 100, (cql, x, len(rows))
    return statistics.median(times) * 1000


run("create", "ixb", "-n", "3", "--racks", "3", "--base-ip", IPS[0])
run("start")
try:
    # 1. the write cost of two indexes (the tables made here, as
    # cassini-stress would, so that no timed run includes making them;
    # the driver waits for schema agreement after each DDL)
    c = Cluster([IPS[0]], protocol_version=4)
    s = c.connect()
    s.execute("CREATE KEYSPACE cassini_stress WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    for t in ("plain2", "indexed2"):
        s.execute(f"CREATE TABLE cassini_stress.{t} (key blob PRIMARY KEY, "
                  "c0 blob, c1 int, c2 text)")
    s.execute("CREATE INDEX ON cassini_stress.indexed2 (c1)")
    s.execute("CREATE INDEX ON cassini_stress.indexed2 (c2)")
    rates = {False: [], True: []}
    for _ in range(ROUNDS):
        for indexed in (False, True, True, False):
            rates[indexed].append(stress(indexed))
    plain, withix = statistics.mean(rates[False]), statistics.mean(
        rates[True])
    print(f"INSERT (cassini-stress write n={STRESS_N} cl=QUORUM threads=64, "
          f"alternated, {2 * ROUNDS} runs each): no index {plain:.0f}/s "
          f"{[round(x) for x in rates[False]]}, two SAI indexes "
          f"{withix:.0f}/s {[round(x) for x in rates[True]]}, ratio "
          f"{withix / plain:.2f}")
    if ROWS == 0:
        c.shutdown()
        sys.exit(0)

    # 2. a query matching 100 of ROWS rows
    s.execute("CREATE KEYSPACE b WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE b.t (k int, c int, v int, u int, w text, "
              "PRIMARY KEY (k, c))")
    s.execute("CREATE INDEX ON b.t (v)")
    s.execute("CREATE INDEX ON b.t (w)")
    rate = load(s, ROWS)
    print(f"loaded {ROWS} rows at QUORUM from Python: {rate:.0f} rows/s")
    settle()
    groups = ROWS // 100
    values = list(range(0, groups, max(1, groups // 20)))[:20]
    for cl, name in ((ConsistencyLevel.ONE, "ONE"),
                     (ConsistencyLevel.QUORUM, "QUORUM")):
        p50(s, "SELECT k, c FROM b.t WHERE v = %s", values[:2], cl)  # warm
        ix = p50(s, "SELECT k, c FROM b.t WHERE v = %s", values, cl)
        af = p50(s, "SELECT k, c FROM b.t WHERE u = %s ALLOW FILTERING",
                 values[:5], cl)
        print(f"{ROWS} rows, 100 match, CL {name}: p50 indexed {ix:.1f} ms "
              f"(of {len(values)}), ALLOW FILTERING without index "
              f"{af:.1f} ms (of 5), {af / ix:.1f}x")
    c.shutdown()
finally:
    run("remove", check=False)
