#!/usr/bin/python3
"""Index size on disk per indexed byte of data (issue #27's figure): one
node (FIRST_IP, default 127.0.109.63; private CASSINI_HOME) takes ROWS
rows of (k int, v int, w text, u text) with SAI indexes on v (4-byte
values, ROWS/100 distinct) and w (text of 8-24 bytes, ROWS/10
distinct); flushed and compacted to one SSTable, `cassini-tool tablestats`
gives each index's components (`SAI index <name> disk space used
(bytes)`) and the table's SSTables (`Space used (live)`). Printed: per
index the bytes on disk, the bytes of the values it indexes, their ratio,
and the index bytes per byte of SSTable data.

Usage: flock /tmp/cassini-tests.lock /usr/bin/python3 bench/index_size.py \
    [ROWS]   (default 100000; CASSINI_BIN_DIR: default build/dev)
"""
import os
import re
import subprocess
import sys
import tempfile

from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CASSINI_BIN_DIR", SRC + "/build/dev")
env = dict(os.environ, CASSINI_HOME=tempfile.mkdtemp(prefix="index-size-"),
           CASSINI_BIN_DIR=BIN)
ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
IP = os.environ.get("FIRST_IP", "127.0.109.63")


def run(*a):
    r = subprocess.run(["/usr/bin/python3", SRC + "/scripts/cluster.py",
                        "-C", "ixs", *a], env=env, capture_output=True,
                       text=True, timeout=900)
    if r.returncode:
        print(r.stdout, r.stderr)
        sys.exit(1)
    return r.stdout


def w_of(i):
    x = i % (ROWS // 10 or 1)
    return ("w%07d" % x) * (1 + x % 3)  # 8, 16 or 24 bytes


run("create", "ixs", "-n", "1", "--base-ip", IP)
run("start")
try:
    c = Cluster([IP], protocol_version=4)
    s = c.connect()
    s.execute("CREATE KEYSPACE b WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE b.t (k int PRIMARY KEY, v int, w text, u text)")
    s.execute("CREATE INDEX t_v ON b.t (v)")
    s.execute("CREATE INDEX t_w ON b.t (w)")
    ins = s.prepare("INSERT INTO b.t (k, v, w, u) VALUES (?, ?, ?, ?)")
    step = 20000
    for lo in range(0, ROWS, step):
        args = [(i, i % (ROWS // 100 or 1), w_of(i), "u%d" % i)
                for i in range(lo, min(ROWS, lo + step))]
        execute_concurrent_with_args(s, ins, args, concurrency=64,
                                     raise_on_first_error=True)
    c.shutdown()
    run("node", "node1", "tool", "flush", "b", "t")
    run("node", "node1", "tool", "compact", "b", "t")
    out = run("node", "node1", "tool", "tablestats", "b", "t")
    live = int(re.search(r"Space used \(live\): (\d+)", out).group(1))
    sizes = dict(re.findall(r"SAI index (\S+) disk space used \(bytes\): "
                            r"(\d+)", out))
    data = {"t_v": 4 * ROWS,
            "t_w": sum(len(w_of(i)) for i in range(ROWS))}
    print(f"rows {ROWS}, SSTable bytes (Space used (live)) {live}")
    for name in ("t_v", "t_w"):
        b = int(sizes[name])
        print(f"{name}: {b} bytes on disk for {data[name]} indexed bytes: "
              f"{b / data[name]:.2f} index bytes per indexed byte, "
              f"{b / live:.3f} per SSTable byte")
finally:
    run("stop")
    run("remove")
