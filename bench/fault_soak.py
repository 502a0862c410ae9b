#!/usr/bin/python3
"""Fault soak: clients write while nodes die, pause and restart, then every
acknowledged write must read back.

A cluster from scripts/cluster (release build, a private CASSINI_HOME under
/tmp); four writer threads insert unique keys and delete every tenth one a
little later, at the chosen consistency level; a fault loop, for
--duration seconds, picks one of: kill -9 a node, stop it (SIGTERM),
pause it (SIGSTOP), and with --dcs 2 take dc2 down (kill, stop or pause)
or kill every node at once; then restarts what it took down. With
--ring-changes it also adds a node to dc1 (`cluster add -s`: it
bootstraps under the load) or decommissions one it added. At the end
every node is started, and after --settle seconds (time for hints) each
acknowledged insert must read back with its value, and each acknowledged
delete must stay deleted, at QUORUM (one DC) or at LOCAL_QUORUM in each DC
(two). A delete or insert that failed may still have been applied: those
keys are not judged. Prints RESULT OK or RESULT FAIL with the keys; after
a failure the cluster is stopped and kept (its CASSINI_HOME is printed).

    /usr/bin/python3 bench/fault_soak.py [--dcs 1|2] [--cl ONE]
        [--duration 90] [--seed 1] [--settle 40] [--base-ip 127.0.22.]
        [--ring-changes]

Session 12 found with it: a restarted node answering from itself as if it
were the whole ring (one DC, --cl ONE), and LOCAL_QUORUM writes refused as
Overloaded while dc2 was silent (two DCs)."""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import (DCAwareRoundRobinPolicy,
                                FallthroughRetryPolicy)

SRC = Path(__file__).resolve().parent.parent


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dcs", type=int, choices=(1, 2), default=1)
    p.add_argument("--cl", help="write consistency (ONE, QUORUM, "
                   "LOCAL_QUORUM...; default QUORUM, LOCAL_QUORUM with two "
                   "DCs)")
    p.add_argument("--duration", type=float, default=90)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--settle", type=float, default=40,
                   help="seconds between the last fault and the reads")
    p.add_argument("--base-ip", default="127.0.22.")
    p.add_argument("--ring-changes", action="store_true",
                   help="also add nodes to dc1 and decommission them")
    a = p.parse_args()
    a.cl = a.cl or ("LOCAL_QUORUM" if a.dcs == 2 else "QUORUM")
    return a


class Soak:
    def __init__(self, a):
        self.a = a
        self.rnd = random.Random(a.seed)
        self.home = tempfile.mkdtemp(prefix="cassini-soak-")
        self.env = dict(os.environ, CASSINI_HOME=self.home)
        self.nodes = ["node%d" % i for i in range(1, 7 if a.dcs == 2
                                                 else 5)]
        self.added = []  # nodes --ring-changes added, still in the ring
        self.acked, self.deleted, self.tried = {}, set(), set()
        self.errors = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def cluster(self, *args, check=True):
        r = subprocess.run(["/usr/bin/python3",
                            str(SRC / "scripts" / "cluster.py"), *args],
                           capture_output=True, text=True, env=self.env,
                           timeout=300)
        if check and r.returncode:
            sys.exit(f"cluster {' '.join(args)}: {r.stdout}{r.stderr}")
        return r.stdout

    def session(self, dc, cl):
        prof = ExecutionProfile(
            retry_policy=FallthroughRetryPolicy(), request_timeout=10,
            load_balancing_policy=DCAwareRoundRobinPolicy(local_dc=dc),
            consistency_level=cl)
        c = Cluster([self.a.base_ip + "1"], protocol_version=4,
                    execution_profiles={EXEC_PROFILE_DEFAULT: prof})
        return c, c.connect()

    def count(self, what):
        with self.lock:
            self.errors[what] = self.errors.get(what, 0) + 1

    def writer(self, s, w):
        cl = getattr(ConsistencyLevel, self.a.cl)
        ins = s.prepare("INSERT INTO ks.kv (k, v) VALUES (?, ?)")
        dele = s.prepare("DELETE FROM ks.kv WHERE k = ?")
        ins.consistency_level = dele.consistency_level = cl
        i = 0
        while not self.stop.is_set():
            k = w * 10_000_000 + i
            try:
                s.execute(ins, (k, i))
                with self.lock:
                    self.acked[k] = i
            except Exception as e:
                self.count(type(e).__name__)
            if i % 10 == 5:
                with self.lock:
                    self.tried.add(k - 5)
                try:
                    s.execute(dele, (k - 5,))
                    with self.lock:
                        self.deleted.add(k - 5)
                except Exception as e:
                    self.count("delete " + type(e).__name__)
            i += 1

    def join(self):
        out = self.cluster("add", "--dc", "dc1", "-s")
        name = out.split()[1]  # "Added node5 (127.0.22.5, dc1/rack1) ..."
        self.nodes.append(name)
        self.added.append(name)
        return f"join {name}"

    def leave(self):
        name = self.added.pop(0)
        addr = self.a.base_ip + name[len("node"):]
        tool = Path(os.environ.get("CASSINI_BIN_DIR",
                                   SRC / "build" / "release")) / "node" / \
            "cassini-tool"
        r = subprocess.run([str(tool), "-h", addr, "decommission"],
                           capture_output=True, text=True, timeout=900)
        if r.returncode:
            sys.exit(f"decommission {name}: {r.stdout}{r.stderr}")
        self.cluster("node", name, "remove")
        self.nodes.remove(name)
        return f"decommission {name}"

    def fault(self):
        kinds = ["kill", "stop", "pause"]
        if self.a.dcs == 2:
            kinds += ["dc2", "dc2", "all"]
        if self.a.ring_changes:
            kinds += ["ring", "ring"]
        kind = self.rnd.choice(kinds)
        if kind == "ring":
            return self.leave() if len(self.added) == 2 or (
                self.added and self.rnd.random() < 0.5) else self.join()
        if kind == "dc2":
            mode = self.rnd.choice(["kill", "stop", "pause"])
            self.cluster("dc", "dc2", "down", "--mode", mode)
            time.sleep(self.rnd.uniform(3, 10))
            self.cluster("dc", "dc2", "up")
            return f"dc2 down ({mode})"
        if kind == "all":
            for n in self.nodes:
                self.cluster("node", n, "kill")
            time.sleep(1)
            self.cluster("start")
            return "every node killed"
        victim = self.rnd.choice(self.nodes)
        self.cluster("node", victim, kind)
        time.sleep(self.rnd.uniform(2, 10))
        self.cluster("node", victim, "resume" if kind == "pause" else
                     "start")
        return f"{kind} {victim}"

    def verify(self, dc, cl):
        c, s = self.session(dc, cl)
        sel = s.prepare("SELECT v FROM ks.kv WHERE k = ?")
        missing, wrong, back, errs = [], [], [], 0
        for k, v in self.acked.items():
            try:
                rows = list(s.execute(sel, (k,)))
            except Exception:
                errs += 1
                continue
            if k in self.deleted:
                if rows:
                    back.append(k)
            elif k in self.tried:
                continue  # a failed delete may have been applied
            elif not rows:
                missing.append(k)
            elif rows[0].v != v:
                wrong.append(k)
        c.shutdown()
        print(f"{dc}: missing {len(missing)} {missing[:10]}, wrong "
              f"{len(wrong)} {wrong[:10]}, deleted keys back {len(back)} "
              f"{back[:10]}, read errors {errs}", flush=True)
        return not (missing or wrong or back or errs)

    def run(self):
        layout = "3:3" if self.a.dcs == 2 else "4"
        self.cluster("create", "soak", "-n", layout, "--base-ip",
                     self.a.base_ip, "-s")
        c, s = self.session("dc1", ConsistencyLevel.QUORUM)
        rf = "'dc1': 3, 'dc2': 3" if self.a.dcs == 2 else "'dc1': 3"
        s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
                  f"'NetworkTopologyStrategy', {rf}}}")
        s.execute("CREATE TABLE ks.kv (k int PRIMARY KEY, v int)")
        time.sleep(2)
        threads = [threading.Thread(target=self.writer, args=(s, w))
                   for w in range(4)]
        for t in threads:
            t.start()
        start = time.time()
        while time.time() < start + self.a.duration:
            at = time.time() - start
            print(f"{at:6.1f} s  {self.fault()}", flush=True)
            time.sleep(self.rnd.uniform(2, 6))
        self.stop.set()
        for t in threads:
            t.join()
        c.shutdown()
        print(f"acknowledged: {len(self.acked)} inserts, {len(self.deleted)}"
              f" deletes; errors: {self.errors}", flush=True)
        self.cluster("start", check=False)
        self.cluster("wait")
        time.sleep(self.a.settle)
        if self.a.dcs == 2:
            ok = all([self.verify(dc, ConsistencyLevel.LOCAL_QUORUM)
                      for dc in ("dc1", "dc2")])
        else:
            ok = self.verify("dc1", ConsistencyLevel.QUORUM)
        if ok:
            self.cluster("remove", check=False)
            shutil.rmtree(self.home, ignore_errors=True)
        else:  # kept for its logs
            self.cluster("stop", check=False)
            print(f"cluster kept (stopped): CASSINI_HOME={self.home}")
        print("RESULT", "OK" if ok else "FAIL")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(Soak(parse_args()).run())
