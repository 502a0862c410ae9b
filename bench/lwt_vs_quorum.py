#!/usr/bin/python3
"""Uncontended INSERT ... IF NOT EXISTS against plain QUORUM INSERT, in the
same run on the same 3-node RF 3 cluster (target: LWT throughput >= 0.3x).

Starts a cluster (127.0.107.1-3, private CASSINI_HOME, the binaries of
CASSINI_BIN_DIR or build/release), then for each kind runs PROCS client
processes, each keeping DEPTH requests in flight on distinct keys, and
reports throughput, p50 and p99 of the client-observed latency, and the
ratio.

Usage: flock /tmp/cassini-tests.lock /usr/bin/python3 \
       bench/lwt_vs_quorum.py [ops per kind, 20000]
"""
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOME = tempfile.mkdtemp(prefix="cassini-lwt.")
ENV = dict(os.environ, CASSINI_HOME=HOME)
ENV.setdefault("CASSINI_BIN_DIR", os.path.join(ROOT, "build", "release"))
PROCS, DEPTH = 4, 32


def cluster(*args):
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts",
                                                     "cluster.py"), *args],
                   env=ENV, check=True, stdout=subprocess.DEVNULL)


def worker(kind, first, n, ip, out):
    from cassandra import ConsistencyLevel as CL
    from cassandra.cluster import Cluster
    c = Cluster([ip], protocol_version=4)
    s = c.connect()
    q = ("INSERT INTO b.t (k, v) VALUES (?, 'x') IF NOT EXISTS"
         if kind == "lwt" else "INSERT INTO b.t (k, v) VALUES (?, 'x')")
    p = s.prepare(q)
    p.consistency_level = CL.QUORUM
    lat, errors = [], [0]
    sem = threading.Semaphore(DEPTH)
    done = threading.Event()
    left = [n]
    lock = threading.Lock()

    def finish(t0, ok):
        with lock:
            if ok:
                lat.append(time.perf_counter() - t0)
            else:
                errors[0] += 1
            left[0] -= 1
            if left[0] == 0:
                done.set()
        sem.release()

    start = time.perf_counter()
    for k in range(first, first + n):
        sem.acquire()
        t0 = time.perf_counter()
        f = s.execute_async(p, (k,))
        f.add_callbacks(lambda r, t0=t0: finish(t0, True),
                        lambda e, t0=t0: finish(t0, False))
    done.wait()
    out.put((time.perf_counter() - start, lat, errors[0]))
    c.shutdown()


def run(kind, base, n):
    q = multiprocessing.Queue()
    per = n // PROCS
    ps = [multiprocessing.Process(
        target=worker,
        args=(kind, base + i * per, per, "127.0.107.%d" % (1 + i % 3), q))
        for i in range(PROCS)]
    t0 = time.perf_counter()
    for p in ps:
        p.start()
    res = [q.get() for _ in ps]
    wall = time.perf_counter() - t0
    for p in ps:
        p.join()
    lat = sorted(x for r in res for x in r[1])
    errs = sum(r[2] for r in res)
    busy = max(r[0] for r in res)
    return {"ops_s": len(lat) / busy, "p50_ms": lat[len(lat) // 2] * 1000,
            "p99_ms": lat[int(len(lat) * 0.99)] * 1000, "errors": errs,
            "wall_s": wall}


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    cluster("create", "bench", "-n", "3", "--base-ip", "127.0.107.",
            "-s")
    try:
        from cassandra.cluster import Cluster
        c = Cluster(["127.0.107.1"], protocol_version=4)
        s = c.connect()
        s.execute("CREATE KEYSPACE b WITH replication = {'class': "
                  "'SimpleStrategy', 'replication_factor': 3}")
        s.execute("CREATE TABLE b.t (k int PRIMARY KEY, v text)")
        c.control_connection.wait_for_schema_agreement(wait_time=30)
        c.shutdown()
        run("quorum", 10_000_000, n // 4)  # warm up
        plain = run("quorum", 0, n)
        lwt = run("lwt", 1_000_000, n)
        plain2 = run("quorum", 2_000_000, n)
        base = (plain["ops_s"] + plain2["ops_s"]) / 2
        for name, r in (("QUORUM INSERT", plain), ("INSERT IF NOT EXISTS",
                                                   lwt),
                        ("QUORUM INSERT again", plain2)):
            print("%-22s %8.0f ops/s  p50 %6.2f ms  p99 %6.2f ms  "
                  "errors %d" % (name, r["ops_s"], r["p50_ms"],
                                 r["p99_ms"], r["errors"]))
        print("LWT / plain throughput: %.2fx" % (lwt["ops_s"] / base))
    finally:
        cluster("-C", "bench", "remove")


if __name__ == "__main__":
    main()
