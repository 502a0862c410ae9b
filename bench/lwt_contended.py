#!/usr/bin/python3
"""Contended CAS against uncontended CAS, in the same run on the same 3-node
RF 3 cluster.

CLIENTS clients (PROCS processes x THREADS threads, each with one request in
flight) do CAS increments (`UPDATE ... SET v = new IF v = seen`, taking the
current value from a not-applied answer) for SECONDS each phase:

  uncontended  every client on a partition of its own;
  contended    all clients on the same PARTS partitions (client i on
               partition i % PARTS);
  uncontended  again (the reference is the mean of both).

Reported per phase: attempts/s, applied/s, success rate (applied /
attempts), unknown outcomes (WriteTimeout: contention past
cas_contention_timeout, or a proposal accepted by a minority), p50 and
p99 of the attempts' latency; then the contended / uncontended ratios.
Every contended partition's history is checked linearizable with
tests/integration/lincheck.py (no livelock: applied/s must stay > 0).

Usage: flock /tmp/cassini-tests.lock /usr/bin/python3 \
       bench/lwt_contended.py [seconds per phase, 10] [partitions, 10]
Binaries: CASSINI_BIN_DIR, default build/release.
"""
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
HOME = tempfile.mkdtemp(prefix="cassini-lwtc.")
ENV = dict(os.environ, CASSINI_HOME=HOME)
ENV.setdefault("CASSINI_BIN_DIR", os.path.join(ROOT, "build", "release"))
PROCS, THREADS = 4, 8
CLIENTS = PROCS * THREADS


def cluster(*args):
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts",
                                                     "cluster.py"), *args],
                   env=ENV, check=True, stdout=subprocess.DEVNULL)


def worker(proc, base, parts, seconds, ip, out):
    from cassandra import ConsistencyLevel as CL
    from cassandra import WriteTimeout, Unavailable
    from cassandra.cluster import Cluster
    c = Cluster([ip], protocol_version=4)
    s = c.connect()
    p = s.prepare("UPDATE b.c SET v = ? WHERE k = ? IF v = ?")
    p.consistency_level = CL.QUORUM
    p.serial_consistency_level = CL.SERIAL
    t0 = time.monotonic()
    stop = t0 + seconds
    results = []  # per thread: (latencies, applied, unknown, history)

    def client(cid):
        key = base + (cid % parts if parts else cid)
        rnd = random.Random(cid * 7919 + base)
        seen, lat, applied, unknown, hist = 0, [], 0, 0, []
        while time.monotonic() < stop:
            new = cid * 1_000_000 + rnd.randrange(1, 999_999)
            call = time.monotonic() - t0
            try:
                r = s.execute(p, (new, key, seen))
                ret = time.monotonic() - t0
                lat.append(ret - call)
                if r.was_applied:
                    applied += 1
                    hist.append((key, ("cas", seen, new, "ok", None, call,
                                       ret)))
                    seen = new
                else:
                    cur = r.one().v
                    hist.append((key, ("cas", seen, new, "fail", cur, call,
                                       ret)))
                    seen = cur
            except (WriteTimeout, Unavailable):
                lat.append(time.monotonic() - t0 - call)
                unknown += 1
                hist.append((key, ("cas", seen, new, "unknown", None, call,
                                   None)))
        results.append((lat, applied, unknown, hist))

    ts = [threading.Thread(target=client, args=(proc * THREADS + i,))
          for i in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put((t0, results))
    c.shutdown()


def run(base, parts, seconds):
    """Partitions base .. base + (parts or CLIENTS) - 1, all starting at 0;
    clocks of the processes are made one by a shared monotonic origin."""
    from cassandra.cluster import Cluster
    c = Cluster(["127.0.107.1"], protocol_version=4)
    s = c.connect()
    from cassandra import ConsistencyLevel as CL
    ins = s.prepare("INSERT INTO b.c (k, v) VALUES (?, 0)")
    ins.consistency_level = CL.ALL
    for k in range(base, base + (parts or CLIENTS)):
        s.execute(ins, (k,))
    c.shutdown()
    q = multiprocessing.Queue()
    ps = [multiprocessing.Process(
        target=worker,
        args=(i, base, parts, seconds, "127.0.107.%d" % (1 + i % 3), q))
        for i in range(PROCS)]
    for p in ps:
        p.start()
    res = [q.get() for _ in ps]
    for p in ps:
        p.join()
    lat, applied, unknown, hist = [], 0, 0, {}
    # CLOCK_MONOTONIC is one clock for every process on the machine: the
    # histories are shifted to the earliest process's origin
    origin = min(r[0] for r in res)
    for t0, threads in res:
        d = t0 - origin
        for tl, ta, tu, th in threads:
            lat += tl
            applied += ta
            unknown += tu
            for key, (k, a, b, rr, o, call, ret) in th:
                hist.setdefault(key, []).append(
                    (k, a, b, rr, o, call + d,
                     None if ret is None else ret + d))
    lat.sort()
    n = len(lat)
    return {"attempts_s": n / seconds, "applied_s": applied / seconds,
            "success": applied / n if n else 0.0, "unknown": unknown,
            "p50_ms": lat[n // 2] * 1000 if n else 0.0,
            "p99_ms": lat[int(n * 0.99)] * 1000 if n else 0.0,
            "hist": hist}


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10
    parts = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    from lincheck import Op, check
    cluster("create", "benchc", "-n", "3", "--base-ip", "127.0.107.",
            "-s")
    try:
        from cassandra.cluster import Cluster
        c = Cluster(["127.0.107.1"], protocol_version=4)
        s = c.connect()
        s.execute("CREATE KEYSPACE b WITH replication = {'class': "
                  "'SimpleStrategy', 'replication_factor': 3}")
        s.execute("CREATE TABLE b.c (k int PRIMARY KEY, v int)")
        c.control_connection.wait_for_schema_agreement(wait_time=30)
        c.shutdown()
        run(9_000_000, 0, seconds / 4)  # warm up
        unc = run(0, 0, seconds)
        con = run(1_000_000, parts, seconds)
        unc2 = run(2_000_000, 0, seconds)
        for name, r in (("uncontended", unc),
                        ("contended (%d partitions)" % parts, con),
                        ("uncontended again", unc2)):
            print("%-26s %7.0f attempts/s %7.0f applied/s  success %5.1f %%"
                  "  unknown %4d  p50 %7.2f ms  p99 %7.2f ms"
                  % (name, r["attempts_s"], r["applied_s"],
                     100 * r["success"], r["unknown"], r["p50_ms"],
                     r["p99_ms"]))
        ref = {k: (unc[k] + unc2[k]) / 2
               for k in ("attempts_s", "applied_s", "success", "p99_ms")}
        print("contended / uncontended: attempts/s %.2fx, applied/s %.2fx, "
              "success rate %.2fx, p99 %.2fx"
              % (con["attempts_s"] / ref["attempts_s"],
                 con["applied_s"] / ref["applied_s"],
                 con["success"] / ref["success"],
                 con["p99_ms"] / ref["p99_ms"]))
        bad = gave_up = 0
        for key, h in sorted(con["hist"].items()):
            verdict = check([Op(*o) for o in h], 0)
            if verdict == "gave up":
                # the search's budget ran out (many clients on one
                # partition): no verdict, not a failure
                gave_up += 1
                print("partition %d: checker gave up (%d operations)"
                      % (key, len(h)))
            elif verdict is not True:
                bad += 1
                print("partition %d: NOT linearizable: %s" % (key, verdict))
        print("contended histories: %d partitions, %d operations: %d "
              "linearizable, %d NOT, %d unchecked (checker gave up)"
              % (len(con["hist"]), sum(len(h) for h in con["hist"].values()),
                 len(con["hist"]) - bad - gave_up, bad, gave_up))
        if bad or con["applied_s"] == 0:
            sys.exit(1)
    finally:
        cluster("-C", "benchc", "remove")


if __name__ == "__main__":
    main()
