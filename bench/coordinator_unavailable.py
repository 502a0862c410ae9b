#!/usr/bin/python3
"""How fast a coordinator answers Unavailable once the failure detector has
convicted replicas (target: within 5 ms).

Starts a 3-node cluster (127.0.13.x, private CASSINI_HOME), creates an RF 3
keyspace, stops node3 and waits until node1 lists it DN, then sends 500
writes and 500 reads at ALL to node1 and reports the client-observed
latency percentiles of the Unavailable answers, next to those of successful
QUORUM writes for scale.

Usage: /usr/bin/python3 bench/coordinator_unavailable.py
"""
import os
import subprocess
import sys
import tempfile
import time

from cassandra import ConsistencyLevel as CL
from cassandra import Unavailable
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import (FallthroughRetryPolicy,
                                WhiteListRoundRobinPolicy)
from cassandra.query import SimpleStatement

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOME = tempfile.mkdtemp(prefix="cassini-unavail.")
ENV = dict(os.environ, CASSINI_HOME=HOME)
TOOL = os.path.join(ROOT, "build", "release", "node", "cassini-tool")


def cluster(*args):
    subprocess.run([os.path.join(ROOT, "scripts", "cluster"), *args],
                   env=ENV, check=True, stdout=subprocess.DEVNULL)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))] * 1000


def main():
    cluster("create", "u", "-n", "3", "--base-ip", "127.0.13.", "-s")
    try:
        prof = ExecutionProfile(
            retry_policy=FallthroughRetryPolicy(),
            load_balancing_policy=WhiteListRoundRobinPolicy(["127.0.13.1"]))
        c = Cluster(["127.0.13.1"],
                    execution_profiles={EXEC_PROFILE_DEFAULT: prof})
        s = c.connect()
        s.execute("CREATE KEYSPACE b WITH replication = {'class': "
                  "'SimpleStrategy', 'replication_factor': 3}")
        s.execute("CREATE TABLE b.t (k int PRIMARY KEY, v int)")
        c.control_connection.wait_for_schema_agreement()
        ok = []
        w = s.prepare("INSERT INTO b.t (k, v) VALUES (?, ?)")
        w.consistency_level = CL.QUORUM
        for k in range(500):
            t = time.perf_counter()
            s.execute(w, (k, k))
            ok.append(time.perf_counter() - t)
        cluster("node", "node3", "stop")
        while "DN  127.0.13.3" not in subprocess.run(
                [TOOL, "-h", "127.0.13.1", "status"], capture_output=True,
                text=True).stdout:
            time.sleep(0.2)
        lat = {"write": [], "read": []}
        for op, q in (("write", "INSERT INTO b.t (k, v) VALUES (1, 1)"),
                      ("read", "SELECT v FROM b.t WHERE k = 1")):
            st = SimpleStatement(q, consistency_level=CL.ALL)
            for _ in range(500):
                t = time.perf_counter()
                try:
                    s.execute(st)
                    sys.exit("expected Unavailable")
                except Unavailable:
                    lat[op].append(time.perf_counter() - t)
        print(f"{'':34} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for name, v in (("QUORUM write (all replicas up)", ok),
                        ("Unavailable, write at ALL", lat["write"]),
                        ("Unavailable, read at ALL", lat["read"])):
            print(f"{name:34} {pct(v, 50):8.3f} {pct(v, 99):8.3f} "
                  f"{max(v) * 1000:8.3f}")
        c.shutdown()
    finally:
        subprocess.run([os.path.join(ROOT, "scripts", "cluster"), "-C", "u",
                        "remove"], env=ENV, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
