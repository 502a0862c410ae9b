#!/usr/bin/python3
"""A 10-field user type column, frozen and non-frozen (one cell per
field), against 10 plain int columns, on one node (127.0.103.1, private
CASSINI_HOME): INSERT throughput of whole rows, then SELECT-by-key
throughput, each as a ratio to the plain columns' in the same run (the
same prepared-statement driver loop, 64 in flight, tables interleaved so
none meets only another's flushes).

Usage: flock /tmp/cassini-tests.lock /usr/bin/python3 bench/udt_vs_columns.py [ROWS]
(ROWS default 20000; CASSINI_BIN_DIR: a build directory, default build/dev)
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
env = dict(os.environ, CASSINI_HOME=tempfile.mkdtemp(prefix="udt-bench-"),
           CASSINI_BIN_DIR=os.environ.get("CASSINI_BIN_DIR",
                                          SRC + "/build/dev"))
ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
BASE = "127.0.103."  # node 1: 127.0.103.1
FIELDS = [f"f{i}" for i in range(10)]


def run(*a, check=True):
    r = subprocess.run(["/usr/bin/python3", SRC + "/scripts/cluster.py", *a],
                       env=env, capture_output=True, text=True, timeout=300)
    if check and r.returncode:
        print(r.stdout, r.stderr)
        sys.exit(1)


def timed(s, stmt, args):
    t0 = time.perf_counter()
    execute_concurrent_with_args(s, stmt, args, concurrency=64,
                                 raise_on_first_error=True)
    return len(args) / (time.perf_counter() - t0)


def statements(s, table):
    if table == "plain":
        ins = s.prepare(f"INSERT INTO b.plain (k, {', '.join(FIELDS)}) "
                        f"VALUES (?{', ?' * len(FIELDS)})")
        row = lambda k: (k, *[k + i for i in range(len(FIELDS))])
        sel = s.prepare(f"SELECT {', '.join(FIELDS)} FROM b.plain "
                        "WHERE k = ?")
    else:
        ins = s.prepare(f"INSERT INTO b.{table} (k, a) VALUES (?, ?)")
        row = lambda k: (k, tuple(k + i for i in range(len(FIELDS))))
        sel = s.prepare(f"SELECT a FROM b.{table} WHERE k = ?")
    return ins, row, sel


run("create", "udtb", "-n", "1", "--base-ip", BASE)
run("start")
try:
    c = Cluster([BASE + "1"], protocol_version=4)
    s = c.connect()
    s.execute("CREATE KEYSPACE b WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute(f"CREATE TYPE b.t10 ({', '.join(f + ' int' for f in FIELDS)})")
    s.execute(f"CREATE TABLE b.plain (k int PRIMARY KEY, "
              f"{', '.join(f + ' int' for f in FIELDS)})")
    s.execute("CREATE TABLE b.frozen (k int PRIMARY KEY, a frozen<t10>)")
    s.execute("CREATE TABLE b.nonfrozen (k int PRIMARY KEY, a t10)")
    tables = ("plain", "frozen", "nonfrozen")
    prep = {t: statements(s, t) for t in tables}
    ins_rate = {t: [] for t in tables}
    sel_rate = {t: [] for t in tables}
    half = ROWS // 2
    for rnd, order in enumerate((tables, tables[::-1])):
        for t in order:
            ins, row, _ = prep[t]
            keys = range(rnd * half, (rnd + 1) * half)
            ins_rate[t].append(timed(s, ins, [row(k) for k in keys]))
    for order in (tables, tables[::-1]):
        for t in order:
            _, _, sel = prep[t]
            sel_rate[t].append(timed(s, sel, [(k,) for k in range(ROWS)]))
    got = s.execute(prep["nonfrozen"][2], (7,)).one().a
    assert tuple(got) == tuple(7 + i for i in range(10)), got
    base_i = statistics.mean(ins_rate["plain"])
    base_s = statistics.mean(sel_rate["plain"])
    print(f"{ROWS} rows, 10 int fields, CL ONE, 64 in flight")
    for t in tables:
        i = statistics.mean(ins_rate[t])
        r = statistics.mean(sel_rate[t])
        print(f"  {t:9s} INSERT {i:7.0f}/s ratio {i / base_i:.2f}   "
              f"SELECT {r:7.0f}/s ratio {r / base_s:.2f}")
    c.shutdown()
finally:
    run("remove", check=False)
