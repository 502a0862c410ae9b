#!/usr/bin/env python3
"""Per-statement cost of schema changes at growing schema sizes.

Starts one cassinid (its own home under /tmp, address --ip), creates a
keyspace, then for each schema size S in --sizes: fills the keyspace to S
tables, and runs --pairs CREATE TABLE / DROP TABLE pairs of one more table
through the stock Python driver (with its schema metadata refreshes and
agreement waits, as an application sees them). For each size it prints the
node's RSS growth per statement and its CPU time (user + system, from
/proc/<pid>/stat) and wall time per statement. With --alters, ALTER TABLE
... WITH comment statements on one table instead of the pairs.

  /usr/bin/python3 bench/schema_churn.py [--build build/dev]
      [--sizes 1,100,600,2000] [--pairs 200] [--alters] [--ip 127.7.66.1]

Not a test: never run by CTest. A node that keeps what schema changes
replaced grows by kilobytes a statement here; one that rebuilds the whole
schema per statement spends CPU growing with the size.
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import time

from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build/dev")
    p.add_argument("--sizes", default="1,100,600,2000")
    p.add_argument("--pairs", type=int, default=200)
    p.add_argument("--alters", action="store_true")
    p.add_argument("--ip", default="127.7.66.1")
    p.add_argument("--home", default="/tmp/cassini-schema-churn")
    a = p.parse_args()
    home = pathlib.Path(a.home)
    shutil.rmtree(home, ignore_errors=True)
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "node.yaml").write_text(
        f"cluster_name: 'Churn'\nlisten_address: {a.ip}\n"
        "endpoint_snitch: GossipingPropertyFileSnitch\n")
    (home / "conf" / "rackdc.properties").write_text("dc=dc1\nrack=rack1\n")
    binary = pathlib.Path(a.build) / "node" / "cassinid"
    proc = subprocess.Popen([str(binary), "-c", str(home / "conf")],
                            stdout=subprocess.DEVNULL,
                            stderr=open(home / "stderr.txt", "wb"))

    def rss_kib():
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def cpu_s():
        with open(f"/proc/{proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    cluster = None
    try:
        log = home / "logs" / "system.log"
        for _ in range(400):
            if log.exists() and "CQL clients on" in log.read_text():
                break
            if proc.poll() is not None:
                sys.exit(f"cassinid exited: {(home / 'stderr.txt').read_text()}")
            time.sleep(0.05)
        profile = ExecutionProfile(
            load_balancing_policy=WhiteListRoundRobinPolicy([a.ip]),
            request_timeout=60)
        cluster = Cluster([a.ip], protocol_version=4,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        s = cluster.connect()
        s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
                  "'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE ks.altered (k int PRIMARY KEY, v text)")
        have = 1

        def once(i):
            if a.alters:
                s.execute(f"ALTER TABLE ks.altered WITH comment = 'c{i}'")
                return 1
            s.execute("CREATE TABLE ks.churn (k int PRIMARY KEY, v text)")
            s.execute("DROP TABLE ks.churn")
            return 2

        kind = "ALTER" if a.alters else "CREATE/DROP"
        print(f"{kind} statements, {a.pairs} rounds a size, {binary}")
        for size in [int(x) for x in a.sizes.split(",")]:
            while have < size:
                s.execute(f"CREATE TABLE ks.base{have} (k int PRIMARY KEY, "
                          "v text)")
                have += 1
            for i in range(20):  # warm the allocator at this size
                once(i)
            r0, c0, t0 = rss_kib(), cpu_s(), time.monotonic()
            n = sum(once(i) for i in range(a.pairs))
            r1, c1, t1 = rss_kib(), cpu_s(), time.monotonic()
            print(f"tables {size:5d}: RSS {r0} -> {r1} KiB, "
                  f"{(r1 - r0) * 1024 / n:7.0f} B/statement, "
                  f"CPU {(c1 - c0) * 1000 / n:5.2f} ms/statement, "
                  f"wall {(t1 - t0) * 1000 / n:5.2f} ms/statement",
                  flush=True)
    finally:
        if cluster:
            cluster.shutdown()
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
