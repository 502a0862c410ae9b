#!/usr/bin/python3
"""Datacenter-loss drills: `scripts/cluster drill SCENARIO` (docs/drills.md).

A drill creates (or reuses) a cluster, loads data, runs a workload in every
datacenter (driver workers writing and reading at the scenario's
consistency levels, every operation kept in a ledger), applies the nemesis
schedule (partitions, one-way cuts, isolation, WAN links, process faults,
a whole DC lost and rebuilt, clock skew, repairs), heals, waits for hints,
runs the repair the scenario names, reads every replica alone, and judges
(drill_checks.py). It prints one progress line a second, then a verdict,
and writes a report directory: the ledger, a summary, a timeline picture
and a self-contained HTML page (drill_report.py).

Uses Debian's python3-cassandra, python3-yaml and python3-matplotlib."""
import argparse
import collections
import concurrent.futures
import copy
import csv
import datetime
import gc
import json
import os
import pathlib
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import yaml

import cluster as cl
import cluster_net
import drill_checks as checks
from drill_checks import Op

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILTIN = ROOT / "scripts" / "drills"
DEFAULT_SCENARIO = "dc-partition"
DEFAULT_BASE_IP = "127.0.64."
LEVELS = ("ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_ONE",
          "LOCAL_QUORUM", "EACH_QUORUM")
FAULTS = ("partition", "one-way", "isolate", "link", "kill", "stop", "pause",
          "dc-loss", "skew", "repair")
KEYSPACE = "drill"


class DrillError(Exception):
    pass


# ---- scenarios ----------------------------------------------------------

def seconds(v, what):
    """'10s', '500ms', '2m', 30 -> seconds."""
    if isinstance(v, (int, float)):
        return float(v)
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ms|s|m|h)?\s*", str(v))
    if not m:
        raise DrillError(f"{what}: '{v}' is not a duration (like 10s, "
                         f"500ms, 2m)")
    n = float(m.group(1))
    return n * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


DEFAULTS = {
    "name": None,
    "description": "",
    "cluster": {"nodes": "3:3", "racks": 3, "vnodes": 16, "config": {},
                "handoff": True},
    "keyspace": {"replication": None, "preload": 500},
    "workload": {"duration": "60s", "baseline": "0s", "keys": 2000,
                 "timestamps": "client", "dcs": None, "client_timeout": "10s",
                 "streams": [{"cl": "LOCAL_QUORUM", "rate": 100,
                              "threads": 2, "reads": 0.3}]},
    "nemesis": [],
    "after": {"hints": "wait", "hints_timeout": "120s", "repair": "none"},
    "checks": {"acknowledged_writes": {"scope": "all"},
               "later_write_wins": {}, "errors_where_expected": {},
               "converged": {}, "no_false_convictions": {}},
    "targets": {},
    "expect": {},
    "grace": "10s",
}
TOP_KEYS = set(DEFAULTS)
SECTION_KEYS = {
    "cluster": {"nodes", "racks", "vnodes", "config", "handoff"},
    "keyspace": {"replication", "preload"},
    "workload": {"duration", "baseline", "keys", "timestamps", "dcs",
                 "client_timeout", "streams"},
    "after": {"hints", "hints_timeout", "repair"},
    "targets": {"converge", "detect", "local_quorum_p99_ratio",
                "availability_recovered"},
}
CHECKS = ("acknowledged_writes", "later_write_wins", "errors_where_expected",
          "converged", "no_false_convictions")
STREAM_KEYS = {"cl", "rate", "threads", "reads"}
FAULT_KEYS = {"at", "for", "fault", "dc", "a", "b", "from", "to", "node",
              "nodes", "between", "delay", "jitter", "loss", "rate", "flap",
              "offset", "rebuild_from", "wipe", "keyspace"}


def unknown(keys, allowed, where):
    bad = sorted(set(keys) - set(allowed))
    if bad:
        raise DrillError(f"{where}: unknown key{'s' if len(bad) > 1 else ''} "
                         f"{', '.join(bad)} (known: "
                         f"{', '.join(sorted(allowed))})")


def load_scenario(name_or_path):
    p = pathlib.Path(name_or_path)
    if not p.exists():
        p = BUILTIN / f"{name_or_path}.yaml"
    if not p.exists():
        raise DrillError(f"no scenario '{name_or_path}': a YAML file or one "
                         f"of {', '.join(builtin_names())}")
    try:
        raw = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise DrillError(f"{p}: {e}")
    if not isinstance(raw, dict):
        raise DrillError(f"{p}: expected a mapping at the top")
    s = copy.deepcopy(DEFAULTS)
    unknown(raw, TOP_KEYS, str(p))
    for k, v in raw.items():
        if k in SECTION_KEYS or k == "checks":
            if v is None:
                v = {}
            if not isinstance(v, dict):
                raise DrillError(f"{p}: {k}: expected a mapping")
            if k in SECTION_KEYS:
                unknown(v, SECTION_KEYS[k], f"{p}: {k}")
                s[k].update(v)
            else:
                unknown(v, CHECKS, f"{p}: checks")
                s[k] = {c: (o or {}) for c, o in v.items()}
        else:
            s[k] = v
    s["name"] = s["name"] or p.stem
    s["file"] = str(p)
    return s


def builtin_names():
    return sorted(f.stem for f in BUILTIN.glob("*.yaml"))


def set_path(s, dotted, value):
    """--set workload.duration=30s, nemesis.0.for=10s."""
    keys = dotted.split(".")
    cur = s
    for k in keys[:-1]:
        cur = cur[int(k)] if isinstance(cur, list) else cur.setdefault(k, {})
    last = keys[-1]
    v = yaml.safe_load(value)
    if isinstance(cur, list):
        cur[int(last)] = v
    else:
        cur[last] = v


def validate(s):
    """Fills derived fields; raises DrillError naming what is wrong."""
    w = s["workload"]
    layout = cl.parse_layout(str(s["cluster"]["nodes"]))
    dcs = [f"dc{i}" for i in range(1, len(layout) + 1)]
    s["_layout"], s["_dcs"] = layout, dcs
    rf = s["keyspace"]["replication"] or {d: min(3, n)
                                          for d, n in zip(dcs, layout)}
    unknown(rf, dcs, "keyspace.replication")
    s["_rf"] = {d: int(rf.get(d, 0)) for d in dcs}
    w["_duration"] = seconds(w["duration"], "workload.duration")
    w["_baseline"] = seconds(w["baseline"], "workload.baseline")
    w["_client_timeout"] = seconds(w["client_timeout"],
                                   "workload.client_timeout")
    if w["timestamps"] not in ("client", "server"):
        raise DrillError("workload.timestamps: client or server")
    w["_dcs"] = w["dcs"] or dcs
    unknown(w["_dcs"], dcs, "workload.dcs")
    for i, st in enumerate(w["streams"]):
        unknown(st, STREAM_KEYS, f"workload.streams[{i}]")
        if st.get("cl") not in LEVELS:
            raise DrillError(f"workload.streams[{i}].cl: one of "
                             f"{', '.join(LEVELS)}")
        st.setdefault("threads", 1)
        st.setdefault("reads", 0.0)
        st.setdefault("rate", 50)
    s["_grace"] = seconds(s["grace"], "grace")
    for i, f in enumerate(s["nemesis"]):
        where = f"nemesis[{i}]"
        unknown(f, FAULT_KEYS, where)
        if f.get("fault") not in FAULTS:
            raise DrillError(f"{where}.fault: one of {', '.join(FAULTS)}")
        f["_at"] = seconds(f.get("at", 0), f"{where}.at")
        f["_for"] = seconds(f["for"], f"{where}.for") if "for" in f else None
        if f["fault"] not in ("skew", "repair") and f["_for"] is None:
            raise DrillError(f"{where}: a {f['fault']} needs `for`")
        if f["_for"] is not None and f["_at"] + f["_for"] > w["_duration"]:
            raise DrillError(f"{where}: ends at {f['_at'] + f['_for']:.0f}s,"
                             f" after the workload ({w['_duration']:.0f}s)")
    a = s["after"]
    if a["hints"] not in ("wait", "skip"):
        raise DrillError("after.hints: wait or skip")
    if a["repair"] not in ("none", "full"):
        raise DrillError("after.repair: none or full")
    a["_hints_timeout"] = seconds(a["hints_timeout"], "after.hints_timeout")
    unknown(s["expect"], CHECKS, "expect")
    for k, v in s["expect"].items():
        if v not in ("pass", "fail"):
            raise DrillError(f"expect.{k}: pass or fail")
    return s


def scale(s, f):
    """--scale: every time and rate of the scenario times f (at least 1 s
    and 1 op/s), for a shorter, lighter run."""
    w = s["workload"]
    for k in ("duration", "baseline"):
        w[k] = max(1.0, seconds(w[k], k) * f) if seconds(w[k], k) else 0
    for st in w["streams"]:
        st["rate"] = max(1, round(st.get("rate", 50) * f))
    s["keyspace"]["preload"] = int(s["keyspace"].get("preload", 0) * f)
    w["keys"] = max(min(50, w["keys"]), int(w["keys"] * f))
    for x in s["nemesis"]:
        x["at"] = seconds(x.get("at", 0), "at") * f
        if "for" in x:
            x["for"] = max(1.0, seconds(x["for"], "for") * f)
        if "flap" in x:
            d, p = (seconds(v, "flap") for v in str(x["flap"]).split("/"))
            x["flap"] = (f"{int(max(0.5, d * f) * 1000)}ms/"
                         f"{int(max(1.0, p * f) * 1000)}ms")
    return s


# ---- the cluster --------------------------------------------------------

def cluster_overrides(s):
    return {str(k): str(v) for k, v in (s["cluster"]["config"] or {}).items()}


def prepare_cluster(s, args, say):
    """The drill's cluster, running and all UN. Returns (cluster,
    created)."""
    name = args.cluster or f"drill-{s['name']}"
    d = cl.clusters_dir() / name
    want = {"layout": s["_layout"], "racks": s["cluster"]["racks"],
            "overrides": cluster_overrides(s)}
    created = False
    if (d / "cluster.json").exists():
        c = cl.Cluster(name)
        have = {"layout": c.spec["layout"], "racks": c.spec["racks"],
                "overrides": {k: v for k, v in c.spec["overrides"].items()}}
        if args.cluster and have["layout"] == want["layout"]:
            if have != want:
                say(f"note: cluster '{name}' has racks {have['racks']} and "
                    f"config {have['overrides']}; the scenario asks for "
                    f"racks {want['racks']} and {want['overrides']}")
            say(f"using cluster '{name}'")
        elif have != want:
            if c.spec.get("drill") and not args.cluster:
                say(f"cluster '{name}' was made for another shape: "
                    f"recreating it")
                cluster_net.sync_kernel(c, [])
                for n in c.nodes:
                    n.stop(kill=True)
                shutil.rmtree(c.dir)
            else:
                raise DrillError(
                    f"cluster '{name}' has layout {have['layout']}, racks "
                    f"{have['racks']}, config {have['overrides']}; the "
                    f"scenario wants {want}")
        else:
            say(f"reusing cluster '{name}'")
    if not (d / "cluster.json").exists():
        say(f"creating cluster '{name}' ({s['cluster']['nodes']}, "
            f"{args.base_ip}x)")
        c = cl.create(name, s["_layout"], s["cluster"]["racks"],
                      s["cluster"]["vnodes"], args.base_ip,
                      [f"{k}={v}" for k, v in want["overrides"].items()])
        c.spec["drill"] = s["name"]
        (c.dir / "cluster.json").write_text(json.dumps(c.spec, indent=2) +
                                            "\n")
        created = True
    c = cl.Cluster(name)
    cluster_net.reconcile(c)
    if any(n.state() == "running" for n in c.nodes):
        cluster_net.heal(c)  # a reused cluster starts without faults
    for n in c.nodes:
        if n.state() == "paused":
            n.signal(signal.SIGCONT)
    cl.start_nodes(c.nodes)
    cl.wait_until_up(c, timeout=120)
    return c, created


# ---- the driver ---------------------------------------------------------

def driver_modules():
    from cassandra import ConsistencyLevel
    from cassandra.cluster import (EXEC_PROFILE_DEFAULT, Cluster,
                                   ExecutionProfile)
    from cassandra.policies import (DCAwareRoundRobinPolicy,
                                    FallthroughRetryPolicy,
                                    TokenAwarePolicy,
                                    WhiteListRoundRobinPolicy)
    return locals()


def bound_connection_class(source):
    """The driver's connection class, its sockets bound to `source` (a
    DC's client address, which `dc DC down --mode isolate` lets in)."""
    from cassandra.cluster import Cluster
    base = Cluster.connection_class

    class Bound(base):
        def _initiate_connection(self, sockaddr):
            self._socket.bind((source, 0))
            self._socket.connect(sockaddr)
    Bound.__name__ = f"Bound{base.__name__}"
    return Bound


def dc_session(c, dc, timeout, server_ts):
    m = driver_modules()
    contacts = [n.address for n in c.nodes if n.dc == dc]
    prof = m["ExecutionProfile"](
        retry_policy=m["FallthroughRetryPolicy"](), request_timeout=timeout,
        # Replicas shuffled: a key's requests go through every replica of
        # the DC, not always the first (so a skewed node coordinates some
        # writes of every key).
        load_balancing_policy=m["TokenAwarePolicy"](
            m["DCAwareRoundRobinPolicy"](local_dc=dc),
            shuffle_replicas=True))
    cluster = m["Cluster"](
        contacts, protocol_version=4, port=cl_port(c),
        execution_profiles={m["EXEC_PROFILE_DEFAULT"]: prof},
        connection_class=bound_connection_class(
            cluster_net.client_address(c, dc)),
        connect_timeout=5, control_connection_timeout=5,
        # The Python driver leaves Nagle on: a request sent while an
        # earlier one on the connection waits for a slow remote DC then
        # waits for the server's delayed ACK (40 ms) before it leaves.
        # The Java driver and Cassini's own client set TCP_NODELAY.
        sockopts=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    session = cluster.connect()
    if server_ts:
        session.use_client_timestamp = False
    return cluster, session


def cl_port(c):
    return int(c.spec["overrides"].get("native_transport_port", 9042))


def node_session(c, node):
    m = driver_modules()
    prof = m["ExecutionProfile"](
        retry_policy=m["FallthroughRetryPolicy"](), request_timeout=30,
        load_balancing_policy=m["WhiteListRoundRobinPolicy"]([node.address]))
    cluster = m["Cluster"]([node.address], protocol_version=4,
                           port=cl_port(c),
                           execution_profiles={m["EXEC_PROFILE_DEFAULT"]:
                                               prof})
    return cluster, cluster.connect()


def error_class(e):
    name = type(e).__name__
    return {"OperationTimedOut": "ClientTimeout",
            "NoHostAvailable": "NoHostAvailable"}.get(name, name)


# ---- the run ------------------------------------------------------------

class Drill:
    def __init__(self, s, args):
        self.s, self.args = s, args
        # Plain tuples in Op's order, appended by the workers: the garbage
        # collector stops tracking plain tuples of plain values, so a long
        # ledger does not make its full collections (which stop every
        # thread, and so every request in flight) longer and longer.
        self.ledger = []
        self.windows = []         # faults as they happened
        self.marks = []           # (t, label): heal, hints, repair...
        self.samples = []         # monitor: (t, {dc: dn seen}, hints)
        self.stop = threading.Event()
        self.paused_dcs = set()   # DCs whose workers wait (dc-loss)
        self.lock = threading.Lock()
        self.ts_last = 0
        self.value_seq = 0
        self.t_start = None
        self.wall_start = None
        self.phase = "setup"
        self.active = {}          # fault index -> label, for progress
        self.owner = cluster_net.owner_self()
        self.rnd = random.Random(args.seed)
        self.errors = []

    # -- clocks
    def now(self):
        return time.monotonic() - self.t_start

    def say(self, text):
        print(text, flush=True)

    def next_ts_and_value(self, dc):
        with self.lock:
            ts = max(self.ts_last + 1, int(time.time() * 1e6))
            self.ts_last = ts
            self.value_seq += 1
            return ts, f"{dc}-{self.value_seq}"

    # -- setup
    def set_handoff(self, nodes, on):
        """Hinted handoff on or off at run time (cluster.handoff), so one
        cluster serves scenarios with and without hints."""
        for n in nodes:
            if n.state() == "running":
                r = n.tool("enablehandoff" if on else "disablehandoff")
                if r.returncode:
                    raise DrillError(f"{n.name}: {r.stderr.strip()}")

    def started(self, nodes):
        if not self.s["cluster"]["handoff"]:
            self.set_handoff(nodes, False)

    def setup_schema(self):
        c = self.c
        cluster, s = node_session(c, c.nodes[0])
        self.meta_cluster = cluster
        rf = ", ".join(f"'{d}': {r}" for d, r in self.s["_rf"].items() if r)
        s.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", timeout=60)
        s.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
                  f"{{'class': 'NetworkTopologyStrategy', {rf}}}", timeout=60)
        s.execute(f"CREATE TABLE {KEYSPACE}.kv (k int PRIMARY KEY, v text)",
                  timeout=60)
        if not cluster.control_connection.wait_for_schema_agreement(
                wait_time=60):
            raise DrillError("no schema agreement after 60 s")
        self.meta_session = s

    def preload(self):
        n = int(self.s["keyspace"]["preload"])
        if not n:
            return
        m = driver_modules()
        s = self.meta_session
        ins = s.prepare(f"INSERT INTO {KEYSPACE}.kv (k, v) VALUES (?, ?) "
                        f"USING TIMESTAMP ?")
        ins.consistency_level = m["ConsistencyLevel"].ALL
        from cassandra.concurrent import execute_concurrent_with_args
        rows = []
        for k in range(min(n, self.s["workload"]["keys"])):
            ts, v = self.next_ts_and_value("load")
            rows.append((k, v, ts))
        t0 = time.monotonic()
        res = execute_concurrent_with_args(s, ins, rows, concurrency=50,
                                           raise_on_first_error=False)
        bad = sum(1 for ok, _ in res if not ok)
        if bad:
            raise DrillError(f"preload: {bad} of {len(rows)} writes at ALL "
                             f"failed")
        for k, v, ts in rows:  # before the workload: time 0
            self.ledger.append((-1.0, -0.5, "load", -1, "W", k, v, ts,
                                "ALL", "ok", None))
        self.say(f"preloaded {len(rows)} rows at ALL in "
                 f"{time.monotonic() - t0:.1f} s")

    # -- workers
    def worker(self, dc, si, stream, session, idx):
        m = driver_modules()
        level = getattr(m["ConsistencyLevel"], stream["cl"])
        server_ts = self.s["workload"]["timestamps"] == "server"
        if server_ts:
            ins = session.prepare(f"INSERT INTO {KEYSPACE}.kv (k, v) "
                                  f"VALUES (?, ?)")
        else:
            ins = session.prepare(f"INSERT INTO {KEYSPACE}.kv (k, v) "
                                  f"VALUES (?, ?) USING TIMESTAMP ?")
        sel = session.prepare(f"SELECT v FROM {KEYSPACE}.kv WHERE k = ?")
        ins.consistency_level = sel.consistency_level = level
        rate = float(stream["rate"]) / stream["threads"]
        rnd = random.Random(f"{self.args.seed}-{dc}-{si}-{idx}")
        keys = self.s["workload"]["keys"]
        reads = float(stream["reads"])
        nxt = time.monotonic()
        while not self.stop.is_set():
            nxt += 1.0 / rate
            wait = nxt - time.monotonic()
            if wait > 0:
                self.stop.wait(wait)
            elif wait < -1.0:
                nxt = time.monotonic()
            if self.stop.is_set():
                break
            if dc in self.paused_dcs:
                continue
            key = rnd.randrange(keys)
            t0 = self.now()
            host = None
            if rnd.random() < reads:
                kind, value, ts = "R", None, None
                fut = session.execute_async(sel, (key,))
            else:
                kind = "W"
                ts, value = self.next_ts_and_value(dc)
                if server_ts:
                    ts = None
                    fut = session.execute_async(ins, (key, value))
                else:
                    fut = session.execute_async(ins, (key, value, ts))
            try:
                rows = fut.result()
                outcome = "ok"
                if kind == "R":
                    row = rows.one()
                    value = row.v if row else None
            except Exception as e:  # every server answer is data here
                outcome = error_class(e)
            h = getattr(fut, "coordinator_host", None) or getattr(
                fut, "_current_host", None)
            host = getattr(h, "address", None) if h else None
            self.ledger.append((t0, self.now(), dc, si, kind, key, value,
                                ts, stream["cl"], outcome, host))

    def start_workers(self):
        w = self.s["workload"]
        self.sessions = {}
        self.threads = []
        for dc in w["_dcs"]:
            self.sessions[dc] = dc_session(
                self.c, dc, w["_client_timeout"], w["timestamps"] == "server")
        for dc in w["_dcs"]:
            for si, st in enumerate(w["streams"]):
                for i in range(st["threads"]):
                    t = threading.Thread(
                        target=self.worker, daemon=True,
                        args=(dc, si, st, self.sessions[dc][1], i))
                    self.threads.append(t)
        gc.collect()
        gc.freeze()  # what exists now (the driver, the preload) is not
        # traversed again by the collections during the run
        self.t_start = time.monotonic()
        self.wall_start = time.time()
        for t in self.threads:
            t.start()

    # -- monitor
    def monitor(self):
        last_i = 0
        hints = 0
        tick = 0
        while not self.monitor_stop.is_set():
            t = self.now()
            dn = {}
            for dc in self.s["_dcs"]:
                obs = next((n for n in self.c.nodes if n.dc == dc and
                            n.state() == "running"), None)
                rows = obs.status_rows() if obs else None
                dn[dc] = None if rows is None else sum(
                    1 for v in rows.values() if v.startswith("D"))
            if tick % 2 == 0:
                hints = self.pending_hints()
            self.samples.append((t, dn, hints))
            n = len(self.ledger)
            recent = self.ledger[last_i:n]
            last_i = n
            per = collections.Counter()
            err = collections.Counter()
            for op in recent:
                per[op[2]] += 1
                if op[9] != "ok":
                    err[op[2]] += 1
            faults = "; ".join(self.active.values()) or "no fault"
            dcs = "  ".join(f"{dc} {per[dc]:>4} ops {err[dc]:>3} err"
                            for dc in self.s["workload"]["_dcs"])
            dns = " ".join(f"{dc}:{'-' if v is None else v}"
                           for dc, v in dn.items())
            if not self.args.quiet:
                self.say(f"[{t:6.1f}s] {self.phase:<8} {dcs}  DN seen "
                         f"{dns}  hints {hints}  | {faults}")
            tick += 1
            self.monitor_stop.wait(max(0.0, 1.0 - (self.now() - t)))

    def pending_hints(self):
        total = 0
        for n in self.c.nodes:
            if n.state() != "running":
                continue
            try:
                r = n.tool("listpendinghints", timeout=5)
            except subprocess.TimeoutExpired:
                continue
            for line in r.stdout.splitlines()[1:]:
                parts = line.split()
                if len(parts) >= 7 and parts[5].isdigit():
                    total += int(parts[5])
        return total

    # -- nemesis
    def names(self, spec):
        return [n.name for n in cluster_net.resolve_set(self.c, spec)]

    def fault_nodes(self, f):
        if "node" in f:
            return self.names(f["node"])
        if "nodes" in f:
            return self.names(",".join(f["nodes"]) if isinstance(
                f["nodes"], list) else f["nodes"])
        if "dc" in f:
            return self.names(f["dc"])
        raise DrillError(f"a {f['fault']} needs node, nodes or dc")

    def begin(self, i, f):
        """Applies fault `f`; returns its window (end filled later)."""
        c, kind = self.c, f["fault"]
        w = {"kind": kind, "start": self.now(), "end": None, "index": i}
        own = self.owner
        if kind in ("partition", "one-way", "isolate"):
            if kind == "isolate" or ("dc" in f and "b" not in f):
                a = f["dc"]
                b = ",".join(n.name for n in c.nodes if n.dc != a)
            elif kind == "one-way":
                a, b = f["from"], f["to"]
            else:
                a, b = f["a"], f["b"]
            one_way = kind == "one-way"
            label = {"partition": f"partition {a} | {f.get('b') or 'rest'}",
                     "one-way": f"one-way cut {a} -> {b}",
                     "isolate": f"{a} isolated"}[kind]
            entry = {"kind": "isolate" if kind == "isolate" else "partition",
                     "a": a, "b": b, "one_way": one_way, "label": label}
            if kind == "isolate":
                entry["dc"] = a
            w["entry"] = cluster_net.add(c, entry, owner=own)
            w.update(a=self.names(a), b=self.names(b), label=label)
        elif kind == "link":
            a, b = f["between"]
            opts = []
            for k in ("delay", "jitter", "loss", "rate", "flap"):
                if k in f:
                    opts += [f"--{k}", str(f[k])]
            label = f"link {a} <-> {b} {' '.join(opts)}"
            w["entry"] = cluster_net.add(c, {"kind": "link", "a": a, "b": b,
                                             "args": opts, "label": label},
                                         owner=own)
            w.update(a=self.names(a), b=self.names(b), label=label)
            if "flap" in f:
                d, p = (seconds(v, "flap") for v in str(f["flap"]).split("/"))
                w["flap"] = (d, p)
        elif kind in ("kill", "stop", "pause"):
            nodes = self.fault_nodes(f)
            for n in nodes:
                node = c.node(n)
                if kind == "pause":
                    node.signal(signal.SIGSTOP)
                else:
                    node.stop(kill=(kind == "kill"))
            w.update(nodes=nodes, label=f"{kind} {', '.join(nodes)}")
        elif kind == "dc-loss":
            dc = f["dc"]
            nodes = self.names(dc)
            self.paused_dcs.add(dc)
            for n in nodes:
                c.node(n).stop(kill=True)
            if f.get("wipe", True):
                for n in nodes:
                    wipe_data(c.node(n))
            w.update(nodes=nodes, label=f"{dc} lost" + (
                " (data wiped)" if f.get("wipe", True) else ""))
        elif kind == "skew":
            node = f["node"]
            w["entry"] = cluster_net.add(
                c, {"kind": "skew", "node": node, "offset": str(f["offset"]),
                    "label": f"clock skew {node} {f['offset']}"}, owner=own)
            w.update(label=f"clock skew {node} {f['offset']}")
        elif kind == "repair":
            w.update(label="repair (during the run)")
            threading.Thread(target=self.run_repair_bg, args=(w, f),
                             daemon=True).start()
        self.active[i] = w["label"]
        self.windows.append(w)
        self.say(f"[{w['start']:6.1f}s] fault: {w['label']}")
        return w

    def end(self, i, f, w):
        """Undoes fault `f`. Its window ends when the undo starts (a cut
        healed, a link cleared, a node resumed), or for a restart when
        the node is up again (a rebuilt DC: when it is rebuilt)."""
        c, kind = self.c, f["fault"]
        w["end"] = self.now()
        if kind in ("partition", "one-way", "isolate", "link", "skew"):
            entry = w["entry"]
            cluster_net.remove_where(
                c, lambda e: e.get("since") == entry["since"] and
                e.get("label") == entry["label"])
        elif kind in ("kill", "stop", "pause"):
            for n in w["nodes"]:
                node = c.node(n)
                if kind == "pause":
                    node.signal(signal.SIGCONT)
            if kind != "pause":
                cl.start_nodes([c.node(n) for n in w["nodes"]])
                self.started([c.node(n) for n in w["nodes"]])
        elif kind == "dc-loss":
            cl.start_nodes([c.node(n) for n in w["nodes"]])
            self.started([c.node(n) for n in w["nodes"]])
            src = f.get("rebuild_from")
            if src:
                self.phase = "rebuild"
                for n in w["nodes"]:
                    t0 = self.now()
                    r = c.node(n).tool("rebuild", src, timeout=900)
                    self.marks.append((t0, f"rebuild {n}"))
                    if r.returncode:
                        self.errors.append(f"rebuild {n}: {r.stdout}"
                                           f"{r.stderr}")
                self.phase = "run"
            self.paused_dcs.discard(f["dc"])
        if kind in ("kill", "stop", "dc-loss"):
            w["end"] = self.now()
        self.active.pop(i, None)
        self.marks.append((w["end"], f"end: {w['label']}"))
        self.say(f"[{w['end']:6.1f}s] healed: {w['label']}")

    def run_repair_bg(self, w, f):
        ks = f.get("keyspace", KEYSPACE)
        node = self.c.node(f.get("node", self.c.nodes[0].name))
        t0 = self.now()
        try:
            r = node.tool("repair", ks, timeout=900)
            outcome = "ok" if r.returncode == 0 else \
                f"failed (exit {r.returncode}): " + \
                (r.stderr or r.stdout).strip().splitlines()[-1][:200]
        except subprocess.TimeoutExpired:
            outcome = "no answer within 900 s"
        w["end"] = self.now()
        w["outcome"] = outcome
        self.active.pop(w["index"], None)
        self.marks.append((t0, f"repair on {node.name} starts"))
        self.marks.append((w["end"], f"repair on {node.name}: {outcome}"))
        self.say(f"[{w['end']:6.1f}s] repair on {node.name} "
                 f"({w['end'] - t0:.1f} s): {outcome}")

    def nemesis(self):
        """Runs the schedule on this thread; every fault ends by the end
        of the workload."""
        events = []
        for i, f in enumerate(self.s["nemesis"]):
            events.append((f["_at"], 0, i, "begin"))
            if f["_for"] is not None:
                events.append((f["_at"] + f["_for"], 1, i, "end"))
        events.sort()
        open_w = {}
        for at, _, i, what in events:
            delay = at - self.now()
            if delay > 0 and self.stop.wait(delay):
                break
            f = self.s["nemesis"][i]
            if what == "begin":
                open_w[i] = self.begin(i, f)
            else:
                self.end(i, f, open_w.pop(i))
        rest = self.s["workload"]["_duration"] - self.now()
        if rest > 0:
            self.stop.wait(rest)
        for i, w in list(open_w.items()):  # a skew without `for`
            if w["kind"] != "repair":
                self.end(i, self.s["nemesis"][i], w)

    # -- after
    def after(self):
        c = self.c
        self.phase = "heal"
        gone = cluster_net.remove_where(
            c, lambda e: e.get("owner") == self.owner)
        for n in c.nodes:
            if n.state() == "paused":
                n.signal(signal.SIGCONT)
        back = [n for n in c.nodes if n.state() == "stopped"]
        cl.start_nodes(back)
        self.started(back)
        if gone:
            self.marks.append((self.now(), "healed what was left"))
        cl.wait_until_up(c, timeout=180)
        self.phase = "hints"
        a = self.s["after"]
        self.hints_drained = None
        if a["hints"] == "wait":
            deadline = time.monotonic() + a["_hints_timeout"]
            while time.monotonic() < deadline:
                if self.pending_hints() == 0:
                    self.hints_drained = self.now()
                    break
                time.sleep(1)
            if self.hints_drained is None:
                self.errors.append(f"hints still pending after "
                                   f"{a['_hints_timeout']:.0f} s")
        self.repair_done = None
        if a["repair"] == "full":
            self.phase = "repair"
            t0 = self.now()
            self.marks.append((t0, "repair starts"))
            for n in c.nodes:
                r = n.tool("repair", "-pr", KEYSPACE, timeout=1800)
                if r.returncode:
                    self.errors.append(f"repair -pr on {n.name}: "
                                       f"{(r.stderr or r.stdout)[-300:]}")
            self.repair_done = self.now()
            self.marks.append((self.repair_done, "repair done"))
            self.say(f"[{self.repair_done:6.1f}s] repair -pr on every node:"
                     f" {self.repair_done - t0:.1f} s")

    # -- verification
    def read_replicas(self):
        """{node: {key: (value, writetime)}}, each replica read alone (a
        read at ONE that the replica coordinates is answered from its own
        storage; speculative retry off so no other replica is asked)."""
        self.phase = "verify"
        s = self.meta_session
        s.execute(f"ALTER TABLE {KEYSPACE}.kv WITH speculative_retry = "
                  f"'NONE'", timeout=60)
        self.meta_cluster.control_connection.wait_for_schema_agreement(
            wait_time=60)
        self.meta_cluster.refresh_schema_metadata()
        meta = self.meta_cluster.metadata
        by_addr = {n.address: n.name for n in self.c.nodes}
        keys = sorted({op[5] for op in self.ledger})
        replicas = {}
        for k in keys:
            hosts = meta.get_replicas(KEYSPACE, struct.pack(">i", k))
            replicas[k] = sorted(by_addr[h.address] for h in hosts
                                 if h.address in by_addr)
        from cassandra import ConsistencyLevel
        from cassandra.concurrent import execute_concurrent_with_args

        def read_one(node):
            mine = [k for k in keys if node.name in replicas[k]]
            cluster, sess = node_session(self.c, node)
            try:
                q = sess.prepare(f"SELECT v, writetime(v) AS ts FROM "
                                 f"{KEYSPACE}.kv WHERE k = ?")
                q.consistency_level = ConsistencyLevel.ONE
                res = execute_concurrent_with_args(
                    sess, q, [(k,) for k in mine], concurrency=64,
                    raise_on_first_error=False)
                got = {}
                failed = 0
                for k, (ok, rows) in zip(mine, res):
                    if not ok:
                        failed += 1
                        continue
                    row = rows.one() if hasattr(rows, "one") else \
                        (rows[0] if rows else None)
                    if row is not None:
                        got[k] = (row.v, row.ts)
                if failed:
                    self.errors.append(f"{node.name}: {failed} replica "
                                       f"reads failed")
                return got
            finally:
                cluster.shutdown()
        with concurrent.futures.ThreadPoolExecutor(len(self.c.nodes)) as ex:
            states = dict(zip((n.name for n in self.c.nodes),
                              ex.map(read_one, self.c.nodes)))
        return states, replicas

    def preview(self):
        """{node: mismatched ranges} of `repair -pr --preview` on every
        node (their primary ranges do not overlap, so they run at once;
        one that fails is run again alone)."""
        def one(n):
            r = n.tool("repair", "-pr", "--preview", KEYSPACE, timeout=900)
            m = re.search(r"mismatched ranges: (\d+)", r.stdout)
            return int(m.group(1)) if m and r.returncode == 0 else None
        with concurrent.futures.ThreadPoolExecutor(len(self.c.nodes)) as ex:
            out = dict(zip((n.name for n in self.c.nodes),
                           ex.map(one, self.c.nodes)))
        for n in self.c.nodes:
            if out[n.name] is None:
                out[n.name] = one(n)
        return out

    def log_events(self):
        """(t, observer, target, DOWN|UP) from every node's log."""
        addr = {n.address: n.name for n in self.c.nodes}
        pat = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .*"
                         r"\[gossip\] ([0-9.]+):\d+ is now (UP|DOWN)")
        out = []
        for n in self.c.nodes:
            if not n.log_file.exists():
                continue
            for line in n.log_file.read_text(errors="replace").splitlines():
                m = pat.match(line)
                if not m or m.group(3) not in addr:
                    continue
                wall = datetime.datetime.strptime(
                    m.group(1), "%Y-%m-%d %H:%M:%S").replace(
                    tzinfo=datetime.timezone.utc).timestamp() + \
                    int(m.group(2)) / 1000.0
                t = wall - self.wall_start
                if t >= 0:
                    out.append((t, n.name, addr[m.group(3)], m.group(4)))
        return sorted(out)

    # -- the whole drill
    def run(self):
        s = self.s
        self.say(f"drill {s['name']}: {s['description'].strip()}")
        t0 = time.monotonic()
        self.timings = {}

        def took(phase):
            nonlocal t0
            now = time.monotonic()
            self.timings[phase] = round(now - t0, 1)
            t0 = now
        self.took = took
        self.c, self.created = prepare_cluster(s, self.args, self.say)
        took("cluster")
        ok = False
        try:
            self.started(self.c.nodes)
            self.setup_schema()
            self.preload()
            took("data")
            self.monitor_stop = threading.Event()
            self.start_workers()
            self.phase = "run"
            mon = threading.Thread(target=self.monitor, daemon=True)
            mon.start()
            try:
                self.nemesis()
            finally:
                self.stop.set()
                for t in self.threads:
                    t.join(timeout=s["workload"]["_client_timeout"] + 5)
                self.workload_end = self.now()
                for cluster, _ in self.sessions.values():
                    cluster.shutdown()
            took("workload")
            self.after()
            self.monitor_stop.set()
            mon.join(timeout=10)
            self.after_end = self.now()
            took("heal, hints, repair")
            states, replicas = self.read_replicas()
            preview = self.preview()
            events = self.log_events()
            took("verification")
            result = self.judge(states, replicas, preview, events)
            ok = result["verdict"] == "PASS"
            self.write_report(result, states, replicas, events)
            return 0 if ok else 1
        finally:
            self.stop.set()
            if getattr(self, "monitor_stop", None):
                self.monitor_stop.set()
            try:
                cluster_net.remove_where(
                    self.c, lambda e: e.get("owner") == self.owner)
            except Exception as e:  # a drill that failed still cleans up
                print(f"drill: cleanup: {e}", file=sys.stderr)
            if getattr(self, "meta_cluster", None):
                self.meta_cluster.shutdown()
            if not self.s["cluster"]["handoff"]:
                try:
                    self.set_handoff(self.c.nodes, True)
                except Exception as e:
                    print(f"drill: cleanup: {e}", file=sys.stderr)
            self.finish_cluster(ok)

    def finish_cluster(self, ok):
        c = self.c
        if self.args.keep:
            self.say(f"cluster '{c.name}' kept running "
                     f"(CASSINI_HOME={cl.HOME})")
        elif not ok and self.created:
            for n in c.nodes:
                n.stop(kill=True)
            self.say(f"cluster '{c.name}' kept, stopped, for its logs: "
                     f"{c.dir}")
        elif not ok:
            self.say(f"cluster '{c.name}' left running; its logs: "
                     f"{c.dir}/<node>/logs/system.log")
        elif self.created:
            cluster_net.sync_kernel(c, [])
            for n in c.nodes:
                n.stop(kill=True)
            shutil.rmtree(c.dir, ignore_errors=True)
            if cl.current_name() == c.name:
                (cl.HOME / "CURRENT").unlink(missing_ok=True)

    # -- judgement
    def drained_after(self, t):
        """The first moment from `t` on after which no node had hints
        pending (the monitor's samples, every 2 s; the wait of the after
        phase when the samples never showed it)."""
        hinted = [x for x in self.samples if x[0] >= t]
        first = None
        for x in hinted:
            if x[2]:
                first = None
            elif first is None:
                first = x[0]
        return first if first is not None else self.hints_drained

    def judge(self, states, replicas, preview, events):
        s = self.s
        nodes = {n.name: {"dc": n.dc, "address": n.address}
                 for n in self.c.nodes}
        rf = s["_rf"]
        grace = s["_grace"]
        wins = [w for w in self.windows if w["end"] is not None]
        ledger = self.ops = [Op(*t) for t in self.ledger]
        results = []
        cfg = s["checks"]
        if "acknowledged_writes" in cfg:
            results.append(checks.check_acknowledged(
                ledger, states, replicas, nodes,
                cfg["acknowledged_writes"].get("scope", "all")))
        if "later_write_wins" in cfg:
            results.append(checks.check_later_write_wins(ledger, states,
                                                         replicas))
        if "errors_where_expected" in cfg:
            results.append(checks.check_errors(
                ledger, wins, nodes, rf, grace,
                s["workload"]["_client_timeout"]))
        if "converged" in cfg:
            results.append(checks.check_converged(states, replicas, preview))
        if "no_false_convictions" in cfg:
            results.append(checks.check_false_convictions(
                events, wins, nodes, grace, until=self.after_end))
        repairs = [w for w in self.windows if w["kind"] == "repair"]
        if repairs:
            hung = [w for w in repairs if w.get("outcome") is None or
                    w["outcome"].startswith("no answer")]
            results.append({
                "name": "repairs_ended", "ok": not hung,
                "summary": "; ".join(
                    f"repair at {w['start']:.1f}s: "
                    f"{w.get('outcome') or 'still running'}"
                    for w in repairs),
                "numbers": {"hung": len(hung)}})
        for r in results:
            r["expected"] = s["expect"].get(r["name"], "pass")
        times = checks.fault_times(events, wins, nodes, ledger, rf, grace)
        cut_end = max([w["end"] for w in wins if w["kind"] in
                       checks.CUT_KINDS + checks.PROCESS_KINDS] or [None],
                      key=lambda x: -1 if x is None else x)
        if self.hints_drained is not None:
            if any(x[2] for x in self.samples):
                t_h = self.drained_after(cut_end if cut_end is not None
                                         else 0.0)
                self.marks.append((t_h, "hints delivered"))
            else:
                self.marks.append((self.hints_drained, "no hints pending"))
        converge = None
        conv = next((r for r in results if r["name"] == "converged"), None)
        if cut_end is not None and conv and conv["ok"]:
            done = self.repair_done or self.drained_after(cut_end)
            if done is not None:
                converge = max(0.0, done - cut_end)
        spans = checks.merge([(w["start"], w["end"]) for w in wins
                              if w["kind"] not in ("repair",)])
        lat = checks.latency_ratio(ledger, s["workload"]["_baseline"],
                                   spans) if s["workload"]["_baseline"] \
            else None
        targets = []
        t = s["targets"]
        if "converge" in t:
            lim = seconds(t["converge"], "targets.converge")
            targets.append({"name": f"converge within {lim:.0f} s of the "
                                    f"heal",
                            "value": converge,
                            "ok": converge is not None and converge <= lim})
        if "detect" in t:
            lim = seconds(t["detect"], "targets.detect")
            v = max([x.get("detect_all", 1e9) for x in times] or [None],
                    key=lambda x: -1 if x is None else x)
            targets.append({"name": f"every node across a cut sees it within "
                                    f"{lim:.0f} s", "value": v,
                            "ok": v is not None and v <= lim})
        if "availability_recovered" in t:
            lim = seconds(t["availability_recovered"], "targets")
            v = max([x["availability_recovered"] for x in times] or [0.0])
            targets.append({"name": f"errors stop within {lim:.0f} s of "
                                    f"the heal", "value": v, "ok": v <= lim})
        if "local_quorum_p99_ratio" in t and lat:
            lim = float(t["local_quorum_p99_ratio"])
            for dc, x in lat.items():
                targets.append({
                    "name": f"{dc} LOCAL_QUORUM p99 within {lim}x of the "
                            f"fault-free baseline", "value": x["ratio"],
                    "ok": x["ratio"] is not None and x["ratio"] <= lim})
        if self.args.no_targets:
            for x in targets:
                x["ok"] = None
        verdict_ok = all((r["ok"] if r["expected"] == "pass" else
                          r["ok"] is False) for r in results) and \
            all(x["ok"] is not False for x in targets) and not self.errors
        ops = collections.Counter()
        errs = collections.Counter()
        for op in ledger:
            if op.dc == "load":
                continue
            ops[(op.dc, op.cl, op.op)] += 1
            if op.outcome != "ok":
                errs[(op.dc, op.cl, op.op, op.outcome)] += 1
        return {
            "scenario": s["name"], "file": s["file"],
            "description": s["description"].strip(),
            "verdict": "PASS" if verdict_ok else "FAIL",
            "checks": results, "targets": targets, "fault_times": times,
            "converge_after_heal": converge, "latency": lat,
            "hints_drained": self.hints_drained,
            "repair_done": self.repair_done,
            "windows": [{k: v for k, v in w.items() if k != "entry"}
                        for w in self.windows],
            "marks": self.marks, "problems": self.errors,
            "workload_end": self.workload_end,
            "ops": {" ".join(k): v for k, v in sorted(ops.items())},
            "errors": {" ".join(k): v for k, v in sorted(errs.items())},
            "cluster": {"name": self.c.name, "nodes": nodes, "rf": rf},
            "wall_start": self.wall_start,
        }

    def write_report(self, result, states, replicas, events):
        import drill_report
        stamp = datetime.datetime.fromtimestamp(self.wall_start).strftime(
            "%Y%m%d-%H%M%S")
        out = pathlib.Path(self.args.report or
                           cl.HOME / "drills" / f"{self.s['name']}-{stamp}")
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "ledger.csv", "w", newline="") as f:
            wr = csv.writer(f)
            wr.writerow(Op._fields)
            for op in self.ops:
                wr.writerow([f"{op.t0:.4f}", f"{op.t1:.4f}", *op[2:]])
        (out / "summary.json").write_text(json.dumps(result, indent=2,
                                                     default=str) + "\n")
        (out / "events.json").write_text(json.dumps(
            {"gossip": events, "samples": self.samples}, default=str) + "\n")
        drill_report.timeline_png(result, self.ops, self.samples,
                                  out / "timeline.png")
        drill_report.html_page(result, self.ops, out / "timeline.png",
                               out / "report.html")
        self.took("report")
        result["timings"] = self.timings
        text = drill_report.verdict_text(result)
        (out / "verdict.txt").write_text(text)
        (out / "summary.json").write_text(json.dumps(result, indent=2,
                                                     default=str) + "\n")
        print()
        print(text, end="")
        print(f"report: {out}/report.html (timeline.png, ledger.csv, "
              f"summary.json)")


def wipe_data(node):
    """A node that lost its disks but not its identity: the drill
    keyspace's SSTables, the commitlog and the hints go; host id, tokens
    and schema (saved_caches) stay, as a replacement with the same tokens
    would have them."""
    data = node.home / "data"
    shutil.rmtree(data / "data" / KEYSPACE, ignore_errors=True)
    for sub in ("commitlog", "hints"):
        d = data / sub
        if d.exists():
            for f in d.iterdir():
                if f.is_file():
                    f.unlink()


# ---- command line -------------------------------------------------------

def parse(argv):
    p = argparse.ArgumentParser(
        prog="cluster drill",
        description="Run a datacenter-loss drill (docs/drills.md).")
    p.add_argument("scenario", nargs="?", default=DEFAULT_SCENARIO,
                   help=f"a scenario file, or a built-in: "
                   f"{', '.join(builtin_names())} (default "
                   f"{DEFAULT_SCENARIO})")
    p.add_argument("-C", "--cluster", help="run on this existing cluster "
                   "(its layout must match the scenario's)")
    p.add_argument("--base-ip", default=DEFAULT_BASE_IP,
                   help=f"address prefix of a cluster the drill creates "
                   f"(default {DEFAULT_BASE_IP})")
    p.add_argument("--scale", type=float, default=1.0,
                   help="times and rates times this (0.3: a short run)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario value: workload.duration=30s, "
                   "nemesis.0.for=10s, cluster.config.gossip_interval=250ms")
    p.add_argument("--report", help="report directory (default "
                   "$CASSINI_HOME/drills/<scenario>-<time>)")
    p.add_argument("--keep", action="store_true",
                   help="leave the cluster running afterwards")
    p.add_argument("--no-targets", action="store_true",
                   help="report the targets' numbers without judging them")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quiet", action="store_true",
                   help="no progress line every second")
    p.add_argument("--list", action="store_true",
                   help="list the built-in scenarios")
    p.add_argument("--check", action="store_true",
                   help="validate the scenario and print it; run nothing")
    return p.parse_args(argv)


def main(argv):
    rest = list(argv)
    cluster_name = None
    if rest[:1] in (["-C"], ["--cluster"]):
        cluster_name = rest[1]
        rest = rest[2:]
    rest = rest[1:]  # "drill"
    args = parse(rest)
    if cluster_name:
        args.cluster = cluster_name
    try:
        if args.list:
            for n in builtin_names():
                sc = load_scenario(n)
                first = sc["description"].strip().split(": ")[0].split(
                    ". ")[0]
                print(f"{n:<26} {first}")
            return 0
        s = load_scenario(args.scenario)
        if args.scale != 1.0:
            scale(s, args.scale)
        for item in args.set:  # after --scale: what it says, it gets
            if "=" not in item:
                raise DrillError(f"--set {item}: expected KEY=VALUE")
            k, v = item.split("=", 1)
            try:
                set_path(s, k, v)
            except (KeyError, IndexError, ValueError, TypeError):
                raise DrillError(f"--set {item}: no such place in the "
                                 f"scenario")
        validate(s)
        if args.check:
            print(yaml.safe_dump({k: v for k, v in s.items()
                                  if not k.startswith("_")},
                                 sort_keys=False))
            return 0
        if any(f["fault"] in ("partition", "one-way", "isolate")
               for f in s["nemesis"]):
            cluster_net.need_root(f"scenario {s['name']}")
        if not (cl.BIN_DIR / "node" / "cassinid").exists():
            raise DrillError(f"{cl.BIN_DIR}/node/cassinid not found: build "
                             f"first (./scripts/cluster drill builds "
                             f"build/release)")
        return Drill(s, args).run()
    except (DrillError, cl.ClusterError, cluster_net.FaultError) as e:
        print(f"drill: {e}", file=sys.stderr)
        return 2
