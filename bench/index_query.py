#!/usr/bin/python3
"""Secondary index costs on a 3-node cluster, RF 3 (127.0.109.1-3, private
CASSINI_HOME): INSERT throughput into a table with two indexes and into the
same table without (same run, the same driver loop), then the p50 latency
of a query matching 100 rows by an indexed column against the same query
by an unindexed copy of the column with ALLOW FILTERING.

Usage: flock /tmp/cassini-tests.lock /usr/bin/python3 bench/index_query.py [ROWS]
(ROWS default 100000; CASSINI_BIN_DIR: a build directory, default build/dev)
"""
import os
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
env = dict(os.environ, CASSINI_HOME=tempfile.mkdtemp(prefix="index-bench-"),
           CASSINI_BIN_DIR=os.environ.get("CASSINI_BIN_DIR",
                                          SRC + "/build/dev"))
ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
BASE = "127.0.109."


def run(*a, check=True):
    r = subprocess.run(["/usr/bin/python3", SRC + "/scripts/cluster.py", *a],
                       env=env, capture_output=True, text=True, timeout=300)
    if check and r.returncode:
        print(r.stdout, r.stderr)
        sys.exit(1)


def load(s, table, n):
    ins = s.prepare(f"INSERT INTO b.{table} (k, c, v, u, w) "
                    "VALUES (?, ?, ?, ?, ?)")
    ins.consistency_level = ConsistencyLevel.QUORUM
    groups = ROWS // 100
    args = [(i // 10, i % 10, i % groups, i % groups, str(i % 7))
            for i in range(n)]
    t0 = time.perf_counter()
    execute_concurrent_with_args(s, ins, args, concurrency=64,
                                 raise_on_first_error=True)
    return n / (time.perf_counter() - t0)


def p50(s, cql, values):
    times = []
    for x in values:
        st = SimpleStatement(cql, consistency_level=ConsistencyLevel.ONE,
                             fetch_size=5000)
        t0 = time.perf_counter()
        rows = list(s.execute(st, (x,)))
        times.append(time.perf_counter() - t0)
        assert len(rows) == 100, (cql, x, len(rows))
    return statistics.median(times) * 1000


run("create", "ixb", "-n", "3", "--racks", "3", "--base-ip", BASE)
run("start")
try:
    c = Cluster([BASE + "1"], protocol_version=4)
    s = c.connect()
    s.execute("CREATE KEYSPACE b WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    for t in ("plain", "indexed"):
        s.execute(f"CREATE TABLE b.{t} (k int, c int, v int, u int, w text, "
                  "PRIMARY KEY (k, c))")
    s.execute("CREATE INDEX ON b.indexed (v)")
    s.execute("CREATE INDEX ON b.indexed (w)")
    n = min(ROWS, 20000)
    # alternating halves, so neither table's load meets only the other's
    # flushes and compactions
    rates = {"plain": [], "indexed": []}
    for t in ("plain", "indexed", "indexed", "plain"):
        rates[t].append(load(s, t, n // 2))
    plain = statistics.mean(rates["plain"])
    indexed = statistics.mean(rates["indexed"])
    print(f"INSERT {n} rows, QUORUM, 64 in flight: no index {plain:.0f}/s, "
          f"two indexes {indexed:.0f}/s, ratio {indexed / plain:.2f}")
    if ROWS > n:
        load(s, "indexed", ROWS)  # rewrites the first n, then the rest
    values = list(range(0, ROWS // 100, max(1, ROWS // 100 // 20)))[:20]
    ix = p50(s, "SELECT k, c FROM b.indexed WHERE v = %s", values)
    af = p50(s, "SELECT k, c FROM b.indexed WHERE u = %s ALLOW FILTERING",
             values)
    print(f"{ROWS} rows, 100 match, CL ONE, p50 of {len(values)}: indexed "
          f"{ix:.1f} ms, ALLOW FILTERING {af:.1f} ms, ratio {af / ix:.2f}")
    c.shutdown()
finally:
    run("remove", check=False)
