#!/usr/bin/python3
"""Local Cassini clusters on loopback addresses, in ccm's role.

Every node of a cluster gets its own address (127.0.0.1, .2, ...) and the
same ports, as ccm does, and its own home with conf/, data/ and logs/ under
.cassini/clusters/NAME/ in the repository (or $CASSINI_HOME/clusters/NAME/).
Commands act on the current cluster (the last created or switched to) unless
-C NAME names another.

  cluster up                         create (first time: 3 nodes in dc1 on
                                     3 racks) and start "default"
  cluster create NAME -n 3:3 [--racks R] [--vnodes N] [--base-ip 127.0.0.|127.0.0.20]
                      [--generate-tokens] [-c key=value]...
                      [--auth] [--tls [all|dc|rack] [--internode-only]]
                                     --auth: PasswordAuthenticator and
                                     CassandraAuthorizer (cassandra/cassandra
                                     until replaced); --tls: a cluster CA and
                                     a certificate per node (openssl, under
                                     the cluster's tls/), internode TLS with
                                     mutual authentication, clients over
                                     TLS and the admin port over TLS
                                     (jmx_encryption_options; `cluster node
                                     N tool` passes --ssl) (docs/security.md)
  cluster start [--no-wait] | stop | status | remove | list | switch NAME
  cluster add [--dc DC] [--rack R] [-s]
                                     a new node (not a seed: it bootstraps,
                                     fetching its data before it serves)
  cluster wait [--timeout S]         until every live node sees every live
                                     node UN (cassini-tool status)
  cluster node NODE start|stop|kill|pause|resume|log|conf|remove
  cluster node NODE tool ARGS...     cassini-tool against that node
  cluster dc DC down|up [--mode kill|stop|pause|partition|isolate]
  cluster partition A B [--one-way]  cut internode traffic between two sets
                                     of nodes/DCs (A B: dc1 or node1,node4)
  cluster link A B [--delay 80ms] [--jitter 10ms] [--loss 1%]
                   [--rate 10mbit] [--flap 5s/30s] | --clear
                                     a slow, lossy or flapping WAN link
  cluster node NODE skew [-]OFFSET|0 offset the node's wall clock
  cluster heal                       remove every partition, link and skew
  cluster drill SCENARIO [options]   run a datacenter-loss drill (docs/drills.md)

This file uses only the Python standard library: run it with /usr/bin/python3
through scripts/cluster, which also installs and builds what is missing.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import cluster_net
from cluster_net import FaultError

ROOT = pathlib.Path(__file__).resolve().parents[1]
HOME = pathlib.Path(os.environ.get("CASSINI_HOME", ROOT / ".cassini"))
BIN_DIR = pathlib.Path(os.environ.get("CASSINI_BIN_DIR",
                                      ROOT / "build" / "release"))
DEFAULT_CLUSTER = "default"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
WAIT_TIMEOUT = 60.0


class ClusterError(Exception):
    pass


# ---- cluster layout -----------------------------------------------------

def clusters_dir():
    return HOME / "clusters"


def current_name():
    f = HOME / "CURRENT"
    return f.read_text().strip() if f.exists() else None


def set_current(name):
    HOME.mkdir(parents=True, exist_ok=True)
    (HOME / "CURRENT").write_text(name + "\n")


class Cluster:
    def __init__(self, name):
        self.name = name
        self.dir = clusters_dir() / name
        spec_file = self.dir / "cluster.json"
        if not spec_file.exists():
            raise ClusterError(f"no cluster named '{name}' "
                               f"(see `cluster list`)")
        self.spec = json.loads(spec_file.read_text())

    @property
    def nodes(self):
        return [Node(self, n) for n in self.spec["nodes"]]

    def node(self, name):
        for n in self.nodes:
            if n.name == name:
                return n
        raise ClusterError(f"cluster '{self.name}' has no node '{name}' "
                           f"(nodes: {', '.join(x.name for x in self.nodes)})")

    def dc_nodes(self, dc):
        nodes = [n for n in self.nodes if n.dc == dc]
        if not nodes:
            dcs = sorted({n.dc for n in self.nodes})
            raise ClusterError(f"cluster '{self.name}' has no datacenter "
                               f"'{dc}' (datacenters: {', '.join(dcs)})")
        return nodes


class Node:
    def __init__(self, cluster, spec):
        self.cluster = cluster
        self.name = spec["name"]
        self.address = spec["address"]
        self.dc = spec["dc"]
        self.rack = spec["rack"]
        self.home = cluster.dir / self.name
        self.conf_dir = self.home / "conf"
        self.pidfile = self.home / "cassinid.pid"
        self.log_file = self.home / "logs" / "system.log"
        self.out_file = self.home / "logs" / "stdout.log"

    def pid(self):
        try:
            pid = int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        # A zombie or another program that reused the pid is not ours.
        try:
            cmd = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return None
        if b"cassinid" not in cmd or stat.split(")")[-1].split()[0] == "Z":
            return None
        return pid

    def state(self):
        pid = self.pid()
        if pid is None:
            return "stopped"
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        if stat.split(")")[-1].split()[0] == "T":
            return "paused"
        return "running"

    def log_tail(self, lines=20):
        text = ""
        for f in (self.log_file, self.out_file):
            if f.exists():
                text = f.read_text(errors="replace")
                if text:
                    break
        return "\n".join(text.splitlines()[-lines:])

    def start(self):
        if self.pid() is not None:
            return False
        binary = BIN_DIR / "node" / "cassinid"
        if not binary.exists():
            raise ClusterError(f"{binary} not found: build first "
                               f"(./scripts/cluster start builds it)")
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        mark = self.log_file.stat().st_size if self.log_file.exists() else 0
        with open(self.out_file, "ab") as out:
            proc = subprocess.Popen(
                [str(binary), "-c", str(self.conf_dir), "-p",
                 str(self.pidfile)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True)
        self._proc = proc
        self._log_mark = mark
        return True

    def wait_ready(self, timeout=START_TIMEOUT):
        """Until the node is up: serving clients when it restarts with its
        tokens (its "cassinid ready" line says so), else running (a new
        node chooses its tokens later, a bootstrapping one serves once it
        has its data)."""
        deadline = time.monotonic() + timeout
        proc = getattr(self, "_proc", None)
        mark = getattr(self, "_log_mark", 0)
        while time.monotonic() < deadline:
            if self.log_file.exists():
                with open(self.log_file, "rb") as f:
                    f.seek(mark)
                    text = f.read()
                ready = text.find(b"cassinid ready")
                if ready >= 0 and (
                        b"CQL clients on" in text or
                        b"(clients served once gossip settles)" not in
                        text[ready:ready + 80]):
                    return
            if proc is not None and proc.poll() is not None:
                raise ClusterError(
                    f"{self.name} exited with status {proc.returncode} "
                    f"while starting; last lines:\n{self.log_tail()}")
            time.sleep(0.05)
        raise ClusterError(f"{self.name} not ready after {timeout:.0f}s; "
                           f"last lines:\n{self.log_tail()}")

    @property
    def admin_port(self):
        return int(self.cluster.spec["overrides"].get("admin_port", 7199))

    def tool(self, *args, timeout=15):
        binary = BIN_DIR / "node" / "cassini-tool"
        if not binary.exists():
            raise ClusterError(f"{binary} not found: build first")
        creds = []
        if "Password" in self.cluster.spec["overrides"].get(
                "authenticator", ""):
            # the admin port wants a superuser (docs/security.md)
            creds = ["-u", os.environ.get("CASSINI_ADMIN_USER", "cassandra"),
                     "-pw", os.environ.get("CASSINI_ADMIN_PASSWORD",
                                           "cassandra")]
        ssl = []
        if self.cluster.spec.get("admin_tls"):
            # jmx_encryption_options: the node's certificate must chain to
            # the cluster's CA and name the address
            ssl = ["--ssl", "--truststore",
                   str(pathlib.Path(self.cluster.spec["tls_dir"]) / "ca.pem"),
                   "--check-hostname"]
        return subprocess.run([str(binary), "-h", self.address, "-p",
                               str(self.admin_port), *creds, *ssl, *args],
                              capture_output=True, text=True,
                              timeout=timeout)

    def status_rows(self):
        """{address: 'UN'|'DN'|...} as this node's `status` lists them,
        or None when it does not answer."""
        try:
            r = self.tool("status", timeout=5)
        except subprocess.TimeoutExpired:
            return None
        if r.returncode != 0:
            return None
        rows = {}
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and len(parts[0]) == 2 and \
                    parts[0][0] in "UD" and parts[0][1] in "NLJM":
                rows[parts[1]] = parts[0]
        return rows

    def signal(self, sig):
        pid = self.pid()
        if pid is None:
            return False
        os.kill(pid, sig)
        return True

    def stop(self, kill=False, timeout=STOP_TIMEOUT):
        pid = self.pid()
        if pid is None:
            return False
        if self.state() == "paused":
            os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid() is None:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            raise ClusterError(f"{self.name} did not stop within "
                               f"{timeout:.0f}s; killed")
        if kill:
            self.pidfile.unlink(missing_ok=True)
        return True


# ---- configuration ------------------------------------------------------

def parse_layout(text):
    try:
        counts = [int(x) for x in text.split(":")]
    except ValueError:
        raise ClusterError(f"-n {text}: expected node counts per DC, "
                           f"like 3 or 3:3:3")
    if not counts or any(c < 1 for c in counts) or sum(counts) > 254:
        raise ClusterError(f"-n {text}: each DC needs 1 or more nodes, "
                           f"254 at most in all")
    return counts


def yaml_scalar(value):
    """Quotes a value unless it is plainly safe in YAML."""
    if value == "" or any(c in value for c in ":#{}[],&*!|>'\"%@`"):
        return "'" + value.replace("'", "''") + "'"
    return value


def node_yaml(spec, node, seeds):
    lines = [
        "# Written by scripts/cluster; edit with `cluster create -c` or by "
        "hand.",
        f"cluster_name: {yaml_scalar(spec['name'])}",
        f"num_tokens: {spec['vnodes']}",
        f"listen_address: {node['address']}",
        "seed_provider:",
        "  - class_name: org.apache.cassandra.locator.SimpleSeedProvider",
        "    parameters:",
        f"      - seeds: \"{','.join(seeds)}\"",
        "endpoint_snitch: GossipingPropertyFileSnitch",
        # A local test cluster: scripts/cluster link / skew and the drills
        # use the nodes' fault injection (docs/drills.md).
        "test_fault_injection: true",
    ]
    if spec.get("tls"):
        tdir = pathlib.Path(spec["tls_dir"])
        pem = tdir / f"{node['name']}.pem"
        lines += [
            "server_encryption_options:",
            f"  internode_encryption: {spec['tls']}",
            f"  keystore: {pem}",
            f"  truststore: {tdir / 'ca.pem'}",
            "  require_client_auth: true",
            "  require_endpoint_verification: true",
        ]
        if spec.get("client_tls", True):
            lines += ["client_encryption_options:", "  enabled: true",
                      f"  keystore: {pem}"]
        if spec.get("admin_tls"):
            # the admin port too (Cassandra 5.0's jmx_encryption_options);
            # Node.tool() connects with --ssl and the cluster's CA
            lines += ["jmx_encryption_options:", "  enabled: true",
                      f"  keystore: {pem}"]
    if node.get("initial_token"):
        lines.append(f"initial_token: {yaml_scalar(node['initial_token'])}")
    keys = {l.split(":")[0] for l in lines if not l.startswith((" ", "#"))}
    for key, value in spec["overrides"].items():
        if key in keys:
            lines = [l for l in lines if not l.startswith(key + ":")]
        lines.append(f"{key}: {value}")
    return "\n".join(lines) + "\n"


def openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise ClusterError(f"openssl {args[0]}: {r.stderr.strip()}")


def make_ca(tdir):
    """The cluster's CA (a P-256 key, ten years), once."""
    tdir.mkdir(parents=True, exist_ok=True)
    if not (tdir / "ca.pem").exists():
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
                "-out", "ca.pem", "-days", "3650", "-subj",
                f"/CN=cassini cluster CA {tdir.parent.name}", cwd=tdir)
        os.chmod(tdir / "ca.key", 0o600)


def make_node_cert(tdir, node):
    """A key and a certificate naming the node's address (an IP
    subjectAltName, for require_endpoint_verification), signed by the
    cluster's CA, in one PEM: nodeN.pem."""
    name = node["name"]
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}", cwd=tdir)
    (tdir / f"{name}.ext").write_text(
        f"subjectAltName=IP:{node['address']}\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem",
            "-CAkey", "ca.key", "-CAcreateserial", "-out", f"{name}.crt",
            "-days", "3650", "-extfile", f"{name}.ext", cwd=tdir)
    pem = tdir / f"{name}.pem"
    pem.write_text((tdir / f"{name}.key").read_text() +
                   (tdir / f"{name}.crt").read_text())
    os.chmod(pem, 0o600)
    for ext in ("csr", "ext"):
        (tdir / f"{name}.{ext}").unlink()


def write_configs(spec, cdir):
    if spec.get("tls"):
        make_ca(pathlib.Path(spec["tls_dir"]))
    seeds = []
    for dc in sorted({n["dc"] for n in spec["nodes"]},
                     key=lambda d: int(d[2:])):
        first = next(n for n in spec["nodes"] if n["dc"] == dc)
        seeds.append(first["address"])
    for n in spec["nodes"]:
        conf = cdir / n["name"] / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        if spec.get("tls"):
            make_node_cert(pathlib.Path(spec["tls_dir"]), n)
        (conf / "node.yaml").write_text(node_yaml(spec, n, seeds))
        (conf / "rackdc.properties").write_text(
            f"dc={n['dc']}\nrack={n['rack']}\n")


def generate_tokens(spec):
    """Sets every node's initial_token from `cassini-tool generatetokens`,
    one plan per DC (its own seed, so DCs never share a token): the nodes of
    a DC, on its racks round robin, in the order they are listed, as
    generatetokens orders them."""
    rf = spec["overrides"].get(
        "allocate_tokens_for_local_replication_factor", "3")
    tool = BIN_DIR / "node" / "cassini-tool"
    for d, count in enumerate(spec["layout"], start=1):
        in_dc = [n for n in spec["nodes"] if n["dc"] == f"dc{d}"]
        per_rack = [sum(n["rack"] == f"rack{r}" for n in in_dc)
                    for r in range(1, min(spec["racks"], count) + 1)]
        r = subprocess.run(
            [str(tool), "generatetokens", "-n", str(count),
             "-t", str(spec["overrides"].get("num_tokens", spec["vnodes"])),
             "--rf", rf,
             "--racks", ",".join(map(str, per_rack)), "--seed", str(d)],
            capture_output=True, text=True)
        if r.returncode != 0:
            raise ClusterError(f"generatetokens: {r.stderr.strip()}")
        plan = re.findall(r"^node\d+ (\S+): (\S+)$", r.stdout, re.M)
        if [rack for rack, _ in plan] != [n["rack"] for n in in_dc]:
            raise ClusterError(f"generatetokens: unexpected output "
                               f"{r.stdout[:200]!r}")
        for node, (_, tokens) in zip(in_dc, plan):
            node["initial_token"] = tokens


def split_base_ip(base_ip):
    """--base-ip as (prefix, first host number): `127.0.0.` numbers the
    nodes .1, .2, ...; a whole address `127.0.103.60` numbers them from
    .60."""
    if base_ip.endswith("."):
        prefix, first = base_ip, 1
    else:
        prefix, _, last = base_ip.rpartition(".")
        prefix += "."
        if not last.isdigit() or not 1 <= int(last) <= 254:
            raise ClusterError(f"--base-ip {base_ip}: expected a prefix "
                               f"ending in '.', like 127.0.0., or the "
                               f"first node's address, like 127.0.0.20")
        first = int(last)
    parts = prefix[:-1].split(".")
    if len(parts) != 3 or not all(p.isdigit() and int(p) < 256
                                  for p in parts):
        raise ClusterError(f"--base-ip {base_ip}: expected an IPv4 prefix "
                           f"like 127.0.0. or an address like 127.0.0.20")
    return prefix, first


def create(name, layout, racks, vnodes, base_ip, overrides,
           tokens=False, auth=False, tls=None, client_tls=True):
    if not name or "/" in name or name.startswith("."):
        raise ClusterError(f"bad cluster name '{name}'")
    cdir = clusters_dir() / name
    if cdir.exists():
        raise ClusterError(f"cluster '{name}' already exists "
                           f"(`cluster -C {name} remove` first)")
    base_ip, first = split_base_ip(base_ip)
    if racks < 1:
        raise ClusterError("--racks must be at least 1")
    parsed = {}
    for item in overrides:
        if "=" not in item:
            raise ClusterError(f"-c {item}: expected key=value")
        k, v = item.split("=", 1)
        parsed[k.strip()] = v.strip()
    if auth:
        parsed.setdefault("authenticator", "PasswordAuthenticator")
        parsed.setdefault("authorizer", "CassandraAuthorizer")
    if first + sum(layout) - 1 > 254:
        raise ClusterError(f"--base-ip: {sum(layout)} nodes from "
                           f"{base_ip}{first} run past {base_ip}254")
    nodes, index = [], 0
    for d, count in enumerate(layout, start=1):
        for i in range(count):
            index += 1
            nodes.append({"name": f"node{index}",
                          "address": f"{base_ip}{first + index - 1}",
                          "dc": f"dc{d}",
                          "rack": f"rack{i % racks + 1}"})
    spec = {"name": name, "layout": layout, "racks": racks,
            "vnodes": vnodes, "base_ip": base_ip, "first_ip": first,
            "overrides": parsed,
            "nodes": nodes}
    if tls:
        spec["tls"] = tls
        spec["tls_dir"] = str(cdir / "tls")
        spec["client_tls"] = client_tls
        spec["admin_tls"] = True
    if tokens:
        generate_tokens(spec)
    cdir.mkdir(parents=True)
    try:
        write_configs(spec, cdir)
        # Validate the written configuration with the real parser.
        binary = BIN_DIR / "node" / "cassinid"
        if binary.exists():
            r = subprocess.run([str(binary), "-c",
                                str(cdir / nodes[0]["name"] / "conf"),
                                "--check"], capture_output=True, text=True)
            if r.returncode != 0:
                raise ClusterError(r.stderr.strip())
        (cdir / "cluster.json").write_text(json.dumps(spec, indent=2) + "\n")
    except Exception:
        shutil.rmtree(cdir, ignore_errors=True)
        raise
    set_current(name)
    return Cluster(name)


def add_node(cluster, dc, rack):
    """Appends a node to `cluster` (ccm's `add`): the next name and address,
    `dc` (an existing one or the next dcN), `rack` or the DC's next rack
    round robin, the existing seeds. Not a seed itself, so it bootstraps
    when started: it fetches the data it will replicate before it
    serves."""
    spec = cluster.spec
    dcs = sorted({n["dc"] for n in spec["nodes"]}, key=lambda d: int(d[2:]))
    new_dc = f"dc{len(dcs) + 1}"
    if dc not in dcs and dc != new_dc:
        raise ClusterError(f"--dc {dc}: expected one of "
                           f"{', '.join(dcs)} or a new {new_dc}")
    in_dc = [n for n in spec["nodes"] if n["dc"] == dc]
    rack = rack or f"rack{len(in_dc) % spec['racks'] + 1}"
    index = max(int(n["name"][4:]) for n in spec["nodes"]) + 1
    last = spec.get("first_ip", 1) + index - 1
    if last > 254:
        raise ClusterError("no address left under --base-ip")
    node = {"name": f"node{index}", "address": f"{spec['base_ip']}{last}",
            "dc": dc, "rack": rack}
    seeds = []
    for d in dcs:
        first = next(n for n in spec["nodes"] if n["dc"] == d)
        seeds.append(first["address"])
    conf = cluster.dir / node["name"] / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    if spec.get("tls"):
        make_node_cert(pathlib.Path(spec["tls_dir"]), node)
    (conf / "node.yaml").write_text(node_yaml(spec, node, seeds))
    (conf / "rackdc.properties").write_text(f"dc={dc}\nrack={rack}\n")
    spec["nodes"].append(node)
    (cluster.dir / "cluster.json").write_text(json.dumps(spec, indent=2) +
                                              "\n")
    return cluster.node(node["name"])


# ---- commands -----------------------------------------------------------

def start_nodes(nodes):
    started = [n for n in nodes if n.start()]
    for n in started:
        n.wait_ready()
    if started:  # the links and skew they had before
        cluster_net.reapply_to(started[0].cluster, started)
    return started


def wait_until_up(cluster, timeout=WAIT_TIMEOUT):
    """Until every running node lists every running node as UN."""
    deadline = time.monotonic() + timeout
    last = {}
    while True:
        live = [n for n in cluster.nodes if n.state() == "running"]
        addrs = {n.address for n in live}
        ok = bool(live)
        last = {}
        for n in live:
            rows = n.status_rows()
            last[n.name] = rows
            if rows is None or any(rows.get(a) != "UN" for a in addrs):
                ok = False
        if ok:
            return
        if time.monotonic() >= deadline:
            lines = []
            suspects = set()
            for name, rows in last.items():
                if rows is None:
                    lines.append(f"  {name}: no answer from its admin port")
                else:
                    bad = {a: s for a, s in rows.items()
                           if a in addrs and s != "UN"}
                    missing = sorted(addrs - set(rows))
                    if bad or missing:
                        lines.append(f"  {name}: sees {bad or ''}"
                                     f"{' missing ' + ', '.join(missing) if missing else ''}")
                        suspects.update(set(bad) | set(missing))
            for n in live:
                if n.address in suspects:
                    lines.append(f"last lines of {n.name}'s log:\n"
                                 f"{n.log_tail(10)}")
            raise ClusterError(f"cluster '{cluster.name}' not all UN after "
                               f"{timeout:.0f}s:\n" + "\n".join(lines))
        time.sleep(0.25)


def print_contact_points(cluster):
    running = [n for n in cluster.nodes if n.state() == "running"]
    print(f"Cluster '{cluster.name}' is up: {len(running)} of "
          f"{len(cluster.nodes)} nodes running.")
    for n in cluster.nodes:
        print(f"  {n.name}  {n.address}  {n.dc}/{n.rack}  {n.state()}")
    if running:
        print("CQL contact points (port 9042): " +
              ", ".join(n.address for n in running))
    print(f"Logs: {cluster.dir}/<node>/logs/system.log")


def cmd_status(cluster):
    print(f"Cluster: {cluster.name}  ({cluster.dir})")
    width = max(len(n.name) for n in cluster.nodes)
    print(f"{'node'.ljust(width)}  {'address':<15} {'dc':<6} {'rack':<8} "
          f"{'state':<8} pid")
    for n in cluster.nodes:
        pid = n.pid()
        print(f"{n.name.ljust(width)}  {n.address:<15} {n.dc:<6} "
              f"{n.rack:<8} {n.state():<8} {pid if pid else '-'}")
    faults = cluster_net.describe(cluster)
    if faults:
        print("Faults in force (`cluster heal` removes them):")
        print("\n".join(faults))


def cmd_node(cluster, node, action, tool_args=()):
    if action == "start":
        if not start_nodes([node]):
            print(f"{node.name} is already running")
        else:
            print(f"{node.name} started")
    elif action == "stop":
        print(f"{node.name} stopped" if node.stop()
              else f"{node.name} was not running")
    elif action == "kill":
        print(f"{node.name} killed" if node.stop(kill=True)
              else f"{node.name} was not running")
    elif action == "pause":
        if not node.signal(signal.SIGSTOP):
            raise ClusterError(f"{node.name} is not running")
        print(f"{node.name} paused")
    elif action == "resume":
        if not node.signal(signal.SIGCONT):
            raise ClusterError(f"{node.name} is not running")
        print(f"{node.name} resumed")
    elif action == "log":
        print(node.log_tail(lines=100))
    elif action == "remove":
        node.stop(kill=True)
        cluster.spec["nodes"] = [n for n in cluster.spec["nodes"]
                                 if n["name"] != node.name]
        (cluster.dir / "cluster.json").write_text(
            json.dumps(cluster.spec, indent=2) + "\n")
        shutil.rmtree(node.home, ignore_errors=True)
        print(f"{node.name} removed from '{cluster.name}' with its "
              f"directory (take a node out of the ring first: "
              f"decommission, removenode)")
    elif action == "conf":
        print((node.conf_dir / "node.yaml").read_text(), end="")
    elif action == "skew":
        if len(tool_args) != 1:
            raise ClusterError("usage: cluster node NODE skew [-]OFFSET "
                               "(like 1500ms, -2s; 0 clears)")
        offset = tool_args[0]
        if offset in ("0", "clear", "0ms", "0s"):
            cluster_net.remove_where(cluster, lambda e: e["kind"] == "skew"
                                     and e["node"] == node.name)
            print(f"{node.name}: clock skew cleared")
        else:
            cluster_net.add(cluster, {"kind": "skew", "node": node.name,
                                      "offset": offset,
                                      "label": f"clock skew {node.name} "
                                               f"{offset}"})
            print(f"{node.name}: wall clock offset {offset}")
    elif action == "tool":
        r = node.tool(*tool_args, timeout=60)
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        return r.returncode
    return 0


def cmd_dc(cluster, dc, action, mode):
    nodes = cluster.dc_nodes(dc)
    if action == "down" and mode in ("partition", "isolate"):
        if len({n.dc for n in cluster.nodes}) < 2:
            raise ClusterError(f"--mode {mode}: '{cluster.name}' has one "
                               f"datacenter only")
        if mode == "partition":
            label = f"{dc} partitioned from the other datacenters"
        else:
            label = (f"{dc} isolated (its clients: "
                     f"{cluster_net.client_address(cluster, dc)})")
        cluster_net.add(cluster, {"kind": mode, "a": dc, "b": None,
                                  "dc": dc, "label": label})
        print(f"{dc} down ({mode}): " + ", ".join(n.name for n in nodes))
        return
    if action == "down":
        for n in nodes:
            if mode == "pause":
                n.signal(signal.SIGSTOP)
            else:
                n.stop(kill=(mode == "kill"))
        print(f"{dc} down ({mode}): " + ", ".join(n.name for n in nodes))
    else:
        cluster_net.remove_where(
            cluster, lambda e: e["kind"] in ("partition", "isolate") and
            e.get("dc") == dc)
        paused = [n for n in nodes if n.state() == "paused"]
        for n in paused:
            n.signal(signal.SIGCONT)
        start_nodes([n for n in nodes if n.state() == "stopped"])
        print(f"{dc} up: " + ", ".join(n.name for n in nodes))


def cmd_partition(cluster, a, b, one_way):
    sa = cluster_net.resolve_set(cluster, a)
    sb = cluster_net.resolve_set(cluster, b)
    if {n.name for n in sa} & {n.name for n in sb}:
        raise ClusterError(f"partition {a} {b}: the two sides share nodes")
    label = (f"one-way cut {a} -> {b} ({a}'s messages do not reach {b})"
             if one_way else f"partition {a} | {b}")
    cluster_net.add(cluster, {"kind": "partition", "a": a, "b": b,
                              "one_way": one_way, "label": label})
    print(label)


def cmd_link(cluster, a, b, args):
    cluster_net.resolve_set(cluster, a)
    cluster_net.resolve_set(cluster, b)
    if args.clear:
        gone = cluster_net.remove_where(
            cluster, lambda e: e["kind"] == "link" and
            {e["a"], e["b"]} == {a, b})
        print(f"link {a} <-> {b}: cleared" if gone else
              f"link {a} <-> {b}: no fault was set")
        return
    opts = []
    for name in ("delay", "jitter", "loss", "rate", "flap"):
        v = getattr(args, name)
        if v is not None:
            opts += [f"--{name}", v]
    if not opts:
        raise ClusterError("link: expected --delay, --jitter, --loss, "
                           "--rate, --flap or --clear")
    label = f"link {a} <-> {b}: {' '.join(opts)}"
    cluster_net.add(cluster, {"kind": "link", "a": a, "b": b,
                              "args": opts, "label": label})
    print(label)


def cmd_heal(cluster):
    gone = cluster_net.heal(cluster)
    print("healed: " + ("; ".join(e["label"] for e in gone) if gone
                        else "no recorded fault") +
          " (links and clock skew cleared on every running node)")


def resolve(args):
    name = args.cluster or current_name()
    if not name:
        raise ClusterError("no current cluster: `cluster create NAME -n 3` "
                           "or `cluster up` first")
    return Cluster(name)


def build_parser():
    p = argparse.ArgumentParser(
        prog="cluster", description="Local Cassini clusters (ccm's role).")
    p.add_argument("-C", "--cluster", help="act on this cluster instead of "
                   "the current one")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("up", help="create (once) and start the default cluster")
    c = sub.add_parser("create", help="write the configuration of a cluster")
    c.add_argument("name")
    c.add_argument("-n", "--nodes", default="1",
                   help="nodes per DC, colon separated (3:3 = two DCs)")
    c.add_argument("--racks", type=int, default=1,
                   help="racks per DC, nodes assigned round-robin")
    c.add_argument("--vnodes", type=int, default=16, help="num_tokens")
    c.add_argument("--generate-tokens", action="store_true",
                   help="give each node an initial_token from `cassini-tool "
                   "generatetokens` (a plan per DC) instead of choosing "
                   "at first start")
    c.add_argument("--base-ip", default="127.0.0.",
                   help="address prefix (node i gets PREFIX<i>) or the "
                   "first node's address (127.0.0.20: nodes .20, .21, ...)")
    c.add_argument("-c", "--conf", action="append", default=[],
                   metavar="KEY=VALUE", help="node.yaml override (repeat)")
    c.add_argument("--auth", action="store_true",
                   help="PasswordAuthenticator and CassandraAuthorizer")
    c.add_argument("--tls", nargs="?", const="all",
                   choices=["all", "dc", "rack"],
                   help="a cluster CA, a certificate per node, internode "
                   "TLS (internode_encryption, default all) with mutual "
                   "authentication, clients and the admin port over TLS")
    c.add_argument("--internode-only", action="store_true",
                   help="with --tls: clients stay plaintext")
    c.add_argument("-s", "--start", action="store_true",
                   help="start it right away")
    st = sub.add_parser("start", help="start every stopped node and wait "
                        "until all are UN")
    st.add_argument("--no-wait", action="store_true",
                    help="return once each node is ready, before gossip "
                    "has converged")
    w = sub.add_parser("wait", help="wait until every live node sees every "
                       "live node UN")
    w.add_argument("--timeout", type=float, default=WAIT_TIMEOUT)
    for name, help_text in [("stop", "stop every node (SIGTERM)"),
                            ("status", "show nodes and their state"),
                            ("remove", "stop and delete the cluster"),
                            ("list", "list clusters")]:
        sub.add_parser(name, help=help_text)
    a = sub.add_parser("add", help="add a node (it bootstraps: fetches "
                       "its data before it serves)")
    a.add_argument("--dc", default="dc1", help="an existing datacenter or "
                   "the next one (default dc1)")
    a.add_argument("--rack", help="default: the DC's next rack, round robin")
    a.add_argument("-s", "--start", action="store_true",
                   help="start it and wait until every node is UN")
    a.add_argument("--timeout", type=float, default=600.0,
                   help="with --start: how long to wait (bootstrap "
                   "streams data; default 600 s)")
    s = sub.add_parser("switch", help="make another cluster current")
    s.add_argument("name")
    n = sub.add_parser("node", help="act on one node")
    n.add_argument("node")
    n.add_argument("action", choices=["start", "stop", "kill", "pause",
                                      "resume", "log", "conf", "tool",
                                      "remove", "skew"])
    n.add_argument("tool_args", nargs=argparse.REMAINDER,
                   help="with `tool`: cassini-tool arguments; with `skew`: "
                   "the offset")
    d = sub.add_parser("dc", help="take a datacenter down or bring it back")
    d.add_argument("dc")
    d.add_argument("action", choices=["down", "up"])
    d.add_argument("--mode", choices=["kill", "stop", "pause", "partition",
                                      "isolate"], default="kill",
                   help="partition: the DC lives and serves its clients but "
                   "exchanges nothing with the other DCs; isolate: its "
                   "native port also answers only its own clients "
                   "(needs root: iptables)")
    pa = sub.add_parser("partition", help="cut internode traffic between "
                        "two sets of nodes (needs root: iptables)")
    pa.add_argument("a", help="nodes or DCs, comma separated (dc1, "
                    "node1,node4)")
    pa.add_argument("b")
    pa.add_argument("--one-way", action="store_true",
                    help="only A's messages to B are lost; B's reach A")
    li = sub.add_parser("link", help="a slow, lossy or flapping WAN link "
                        "between two sets of nodes (in the nodes' "
                        "internode transport)")
    li.add_argument("a")
    li.add_argument("b")
    li.add_argument("--delay", help="one way, like 80ms")
    li.add_argument("--jitter", help="uniform +-, like 10ms")
    li.add_argument("--loss", help="like 1%%: a lost segment costs a "
                    "retransmission timeout")
    li.add_argument("--rate", help="like 10mbit (tc's units)")
    li.add_argument("--flap", help="DOWN/PERIOD, like 5s/30s")
    li.add_argument("--clear", action="store_true",
                    help="remove the link's faults")
    sub.add_parser("heal", help="remove every partition, link and clock "
                   "skew of the cluster")
    dr = sub.add_parser("drill", help="run a datacenter-loss drill: a "
                        "scenario file or a built-in name (docs/drills.md)",
                        add_help=False)
    dr.add_argument("drill_args", nargs=argparse.REMAINDER)
    return p


def main(argv):
    if argv[:1] == ["drill"] or (len(argv) > 2 and argv[0] in ("-C",
                                                               "--cluster")
                                 and argv[2:3] == ["drill"]):
        import drill  # the driver, yaml and matplotlib: only for drills
        return drill.main(argv)
    args = build_parser().parse_args(argv)
    cluster_net.sweep_orphans()
    if args.command == "up":
        name = args.cluster or DEFAULT_CLUSTER
        if not (clusters_dir() / name / "cluster.json").exists():
            create(name, [3], 3, 16, "127.0.0.", [])
        set_current(name)
        cluster = Cluster(name)
        cluster_net.reconcile(cluster)
        start_nodes(cluster.nodes)
        wait_until_up(cluster)
        print_contact_points(cluster)
    elif args.command == "create":
        cluster = create(args.name, parse_layout(args.nodes), args.racks,
                         args.vnodes, args.base_ip, args.conf,
                         args.generate_tokens, args.auth, args.tls,
                         not args.internode_only)
        print(f"Created cluster '{cluster.name}' with "
              f"{len(cluster.nodes)} nodes in {cluster.dir}")
        if args.start:
            start_nodes(cluster.nodes)
            wait_until_up(cluster)
            print_contact_points(cluster)
    elif args.command == "list":
        cur = current_name()
        d = clusters_dir()
        for c in sorted(d.iterdir()) if d.exists() else []:
            if (c / "cluster.json").exists():
                print(("* " if c.name == cur else "  ") + c.name)
    elif args.command == "switch":
        Cluster(args.name)
        set_current(args.name)
        print(f"Current cluster: {args.name}")
    else:
        cluster = resolve(args)
        cluster_net.reconcile(cluster)
        if args.command == "start":
            start_nodes(cluster.nodes)
            if not args.no_wait:
                wait_until_up(cluster)
            print_contact_points(cluster)
        elif args.command == "wait":
            wait_until_up(cluster, args.timeout)
            print(f"all {sum(n.state() == 'running' for n in cluster.nodes)}"
                  f" running nodes are UN")
        elif args.command == "add":
            node = add_node(cluster, args.dc, args.rack)
            print(f"Added {node.name} ({node.address}, {node.dc}/"
                  f"{node.rack}) to '{cluster.name}'")
            if args.start:
                start_nodes([node])
                wait_until_up(cluster, args.timeout)
                print(f"{node.name} joined: every node is UN")
        elif args.command == "stop":
            stopped = [n.name for n in cluster.nodes if n.stop()]
            print("stopped: " + (", ".join(stopped) if stopped else "none"))
        elif args.command == "status":
            cmd_status(cluster)
        elif args.command == "remove":
            cluster_net.sync_kernel(cluster, [])
            for node in cluster.nodes:
                node.stop(kill=True)
            shutil.rmtree(cluster.dir)
            if current_name() == cluster.name:
                (HOME / "CURRENT").unlink(missing_ok=True)
            print(f"Removed cluster '{cluster.name}'")
        elif args.command == "node":
            if args.tool_args and args.action not in ("tool", "skew"):
                raise ClusterError(f"unexpected arguments after "
                                   f"{args.action}: {' '.join(args.tool_args)}")
            return cmd_node(cluster, cluster.node(args.node), args.action,
                            args.tool_args)
        elif args.command == "dc":
            cmd_dc(cluster, args.dc, args.action, args.mode)
        elif args.command == "partition":
            cmd_partition(cluster, args.a, args.b, args.one_way)
        elif args.command == "link":
            cmd_link(cluster, args.a, args.b, args)
        elif args.command == "heal":
            cmd_heal(cluster)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (ClusterError, FaultError) as e:
        print(f"cluster: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:  # `cluster status | head`
        sys.stderr.close()
        sys.exit(0)
