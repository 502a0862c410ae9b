"""Network faults of a local cluster: partitions with kernel packet filters,
WAN links and clock skew through the nodes' admin ports.

Partitions (`cluster partition`, `cluster dc DC down --mode partition|
isolate`) are iptables rules on the nodes' loopback addresses, all in one
chain of the cluster's own, CASSINI-<name>-<hash of its directory>, hooked
at the top of OUTPUT (every loopback packet crosses OUTPUT once) by a rule
whose comment names the cluster's directory. Nothing else is touched:
`heal`, `remove` and the sweep below find exactly that chain and that hook.

The faults wanted are kept in the cluster's `netfaults.json`; the chain is
always rebuilt from it in one atomic `iptables-restore --noflush`. An entry
may have an owner (a pid and its start time): a command writes its entry
owned by itself, applies it, then drops the owner; a drill owns its faults
while it runs. Every `cluster` command first sweeps: entries whose owner
is gone are dropped (so a command or drill killed midway leaves nothing
behind), the chain is rebuilt or removed, and a hook whose cluster
directory no longer exists is removed with its chain.

Only the internode port (storage_port) is cut between nodes, so clients
keep reaching every node unless a DC is isolated: then its native port
answers only its own client address (CLIENT_LAST_OCTET - DC number under
the cluster's prefix; the drills bind their workers of that DC to it).
The admin port is never cut (the operator's management network).

WAN links and clock skew live in the nodes (`cassini-tool netfault`,
`cassini-tool clockskew`, node.yaml `test_fault_injection: true`): they
are recorded here too, so `heal` clears them and a restarted node gets its
links and skew again.

Python standard library only."""
import fcntl
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import time

CLIENT_LAST_OCTET = 255  # dc1's clients: PREFIX254, dc2's: PREFIX253, ...
COMMENT_PREFIX = "cassini-cluster:"


class FaultError(Exception):
    pass


# ---- owners -------------------------------------------------------------

def _start_time(pid):
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def owner_self(pid=None):
    pid = pid or os.getpid()
    return {"pid": pid, "start": _start_time(pid)}


def owner_alive(owner):
    return owner is not None and _start_time(owner["pid"]) == owner["start"]


# ---- state --------------------------------------------------------------

class Faults:
    """The faults wanted for one cluster (netfaults.json), under a lock."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.file = cluster.dir / "netfaults.json"
        self.lock_file = cluster.dir / "netfaults.lock"

    def __enter__(self):
        self._lock = open(self.lock_file, "w")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        try:
            self.entries = json.loads(self.file.read_text())["faults"]
        except (FileNotFoundError, ValueError, KeyError):
            self.entries = []
        return self

    def save(self):
        if self.entries:
            tmp = self.file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"faults": self.entries}, indent=2) +
                           "\n")
            os.replace(tmp, self.file)
        else:
            self.file.unlink(missing_ok=True)

    def __exit__(self, *exc):
        self._lock.close()
        return False


# ---- iptables -----------------------------------------------------------

def chain_name(cluster):
    digest = hashlib.sha1(str(cluster.dir.resolve()).encode()).hexdigest()
    safe = re.sub(r"[^A-Za-z0-9_]", "_", cluster.name)[:12]
    return f"CASSINI-{safe}-{digest[:6]}"


def hook_comment(cluster):
    return COMMENT_PREFIX + str(cluster.dir.resolve())


def is_root():
    return os.geteuid() == 0


def need_root(what):
    if not is_root():
        raise FaultError(
            f"{what} uses kernel packet filters (iptables rules on the "
            f"nodes' loopback addresses) and needs root: run it as root "
            f"(sudo ./scripts/cluster ...)")
    if not shutil.which("iptables"):
        raise FaultError("iptables not found: ./scripts/setup installs it "
                         "(Debian's iptables package)")


def _ipt(*args, check=True, input_text=None, binary="iptables"):
    r = subprocess.run([binary, "-w", *args], capture_output=True,
                       text=True, input=input_text)
    if check and r.returncode != 0:
        raise FaultError(f"{binary} {' '.join(args)}: {r.stderr.strip()}")
    return r


def chain_exists(chain):
    return _ipt("-S", chain, check=False).returncode == 0


def _hook_args(chain, comment):
    return ["OUTPUT", "-m", "comment", "--comment", comment, "-j", chain]


def remove_chain(chain, comment):
    """Unhooks and deletes `chain` (either may already be gone)."""
    while _ipt("-C", *_hook_args(chain, comment), check=False).returncode \
            == 0:
        _ipt("-D", *_hook_args(chain, comment), check=False)
    if chain_exists(chain):
        _ipt("-F", chain, check=False)
        _ipt("-X", chain, check=False)


def chain_rules(chain):
    """The rules of `chain` as `iptables -S` prints them (no -N line)."""
    r = _ipt("-S", chain, check=False)
    if r.returncode != 0:
        return []
    return [l for l in r.stdout.splitlines() if l.startswith("-A ")]


def sweep_orphans():
    """Removes our hooks (and chains) whose cluster directory is gone."""
    if not is_root() or not shutil.which("iptables"):
        return []
    out = _ipt("-S", "OUTPUT", check=False).stdout
    gone = []
    for line in out.splitlines():
        m = re.search(r'--comment "?' + re.escape(COMMENT_PREFIX) +
                      r'([^" ]+)"? -j (CASSINI-[A-Za-z0-9_-]+)', line)
        if not m:
            continue
        path, chain = m.group(1), m.group(2)
        if not (pathlib.Path(path) / "cluster.json").exists():
            remove_chain(chain, COMMENT_PREFIX + path)
            gone.append(chain)
    return gone


# ---- resolving names ----------------------------------------------------

def resolve_set(cluster, spec):
    """'dc1', 'node1,node4', 'dc1,node7' -> the nodes, in cluster order."""
    names = [s for s in spec.split(",") if s]
    if not names:
        raise FaultError(f"'{spec}': expected node or datacenter names")
    dcs = {n.dc for n in cluster.nodes}
    chosen = set()
    for s in names:
        if s in dcs:
            chosen.update(n.name for n in cluster.nodes if n.dc == s)
        elif any(n.name == s for n in cluster.nodes):
            chosen.add(s)
        else:
            raise FaultError(
                f"'{s}' is neither a node nor a datacenter of "
                f"'{cluster.name}' (nodes: "
                f"{', '.join(n.name for n in cluster.nodes)}; datacenters: "
                f"{', '.join(sorted(dcs))})")
    return [n for n in cluster.nodes if n.name in chosen]


def client_address(cluster, dc):
    """The address a DC's own clients use (isolate lets only it in)."""
    d = int(dc[2:])
    addr = f"{cluster.spec['base_ip']}{CLIENT_LAST_OCTET - d}"
    if any(n.address == addr for n in cluster.nodes):
        raise FaultError(f"{dc}'s client address {addr} is a node's")
    return addr


def ports(cluster):
    o = cluster.spec["overrides"]
    return (int(o.get("storage_port", 7000)),
            int(o.get("native_transport_port", 9042)))


def entry_sides(cluster, e):
    a = resolve_set(cluster, e["a"])
    if e.get("b"):
        b = resolve_set(cluster, e["b"])
    else:  # everything else
        names = {n.name for n in a}
        b = [n for n in cluster.nodes if n.name not in names]
    return a, b


def kernel_rules(cluster, entries, chain):
    sp, np_ = ports(cluster)
    rules = []
    for e in entries:
        if e["kind"] not in ("partition", "isolate"):
            continue
        a, b = entry_sides(cluster, e)
        for x in a:
            for y in b:
                if e.get("one_way"):
                    # x's connections to y carry x's messages: their
                    # packets and y's acknowledgements go.
                    rules.append(f"-A {chain} -s {x.address}/32 -d "
                                 f"{y.address}/32 -p tcp --dport {sp} "
                                 f"-j DROP")
                    rules.append(f"-A {chain} -s {y.address}/32 -d "
                                 f"{x.address}/32 -p tcp --sport {sp} "
                                 f"-j DROP")
                else:
                    for s, d in ((x, y), (y, x)):
                        rules.append(f"-A {chain} -s {s.address}/32 -d "
                                     f"{d.address}/32 -p tcp -m multiport "
                                     f"--ports {sp} -j DROP")
        if e["kind"] == "isolate":
            client = client_address(cluster, e["dc"])
            for x in a:
                rules.append(f"-A {chain} ! -s {client}/32 -d "
                             f"{x.address}/32 -p tcp --dport {np_} -j DROP")
                rules.append(f"-A {chain} -s {x.address}/32 ! -d "
                             f"{client}/32 -p tcp --sport {np_} -j DROP")
    return rules


def sync_kernel(cluster, entries):
    """Makes the cluster's chain hold exactly the rules `entries` ask for
    (atomically); removes chain and hook when there are none."""
    chain, comment = chain_name(cluster), hook_comment(cluster)
    rules = kernel_rules(cluster, entries, chain)
    if not rules:
        if is_root() and shutil.which("iptables"):
            remove_chain(chain, comment)
        return
    need_root("a partition")
    text = ["*filter", f":{chain} - [0:0]", *rules]
    if _ipt("-C", *_hook_args(chain, comment), check=False).returncode:
        text.append(f'-I OUTPUT 1 -m comment --comment "{comment}" '
                    f'-j {chain}')
    text.append("COMMIT")
    _ipt("--noflush", input_text="\n".join(text) + "\n",
         binary="iptables-restore")


# ---- node-side faults ---------------------------------------------------

def _tool_ok(node, *args):
    if node.state() != "running":
        return False
    r = node.tool(*args, timeout=15)
    if r.returncode != 0:
        raise FaultError(f"{node.name}: cassini-tool {' '.join(args)}: "
                         f"{(r.stderr or r.stdout).strip()}")
    return True


def apply_node_faults(cluster, e, nodes=None):
    """Sets a link or skew entry on its running nodes (all, or `nodes`)."""
    only = None if nodes is None else {n.name for n in nodes}
    if e["kind"] == "link":
        a, b = entry_sides(cluster, e)
        for src, dst in ((a, b), (b, a)):
            for n in src:
                if only is None or n.name in only:
                    _tool_ok(n, "netfault", "set",
                             ",".join(x.address for x in dst), *e["args"])
    elif e["kind"] == "skew":
        n = cluster.node(e["node"])
        if only is None or n.name in only:
            _tool_ok(n, "clockskew", "set", e["offset"])


def clear_node_faults(cluster, e):
    if e["kind"] == "link":
        a, b = entry_sides(cluster, e)
        for src, dst in ((a, b), (b, a)):
            for n in src:
                _tool_ok(n, "netfault", "clear",
                         ",".join(x.address for x in dst))
    elif e["kind"] == "skew":
        _tool_ok(cluster.node(e["node"]), "clockskew", "clear")


# ---- operations ---------------------------------------------------------

def reconcile(cluster):
    """The sweep every command starts with: entries of dead owners go,
    the chain is rebuilt from what is left (or removed)."""
    sweep_orphans()
    if not (cluster.dir / "netfaults.json").exists():
        if is_root() and shutil.which("iptables") and \
                chain_exists(chain_name(cluster)):
            remove_chain(chain_name(cluster), hook_comment(cluster))
        return []
    with Faults(cluster) as f:
        stale = [e for e in f.entries
                 if "owner" in e and not owner_alive(e["owner"])]
        f.entries = [e for e in f.entries if e not in stale]
        f.save()
        sync_kernel(cluster, f.entries)
        for e in stale:
            try:
                clear_node_faults(cluster, e)
            except FaultError:
                pass
    return stale


def add(cluster, entry, owner=None):
    """Records `entry` (owned by `owner`, else by this process until it
    is applied) and applies it. Returns the entry."""
    entry = dict(entry, since=time.time(),
                 owner=owner or owner_self())
    with Faults(cluster) as f:
        if entry["kind"] in ("partition", "isolate"):
            need_root(f"`{entry['label']}`")
        if entry["kind"] == "skew":
            f.entries = [e for e in f.entries if not (
                e["kind"] == "skew" and e["node"] == entry["node"])]
        if entry["kind"] == "link":
            f.entries = [e for e in f.entries if not (
                e["kind"] == "link" and e["a"] == entry["a"] and
                e.get("b") == entry.get("b"))]
        f.entries.append(entry)
        f.save()
        try:
            sync_kernel(cluster, f.entries)
            apply_node_faults(cluster, entry)
        except BaseException:
            f.entries.remove(entry)
            f.save()
            sync_kernel(cluster, f.entries)
            try:
                clear_node_faults(cluster, entry)
            except FaultError:
                pass
            raise
        if owner is None:
            del entry["owner"]
            f.entries[-1] = entry
            f.save()
    return entry


def remove_where(cluster, pred):
    """Removes (and undoes) the entries pred() picks; returns them."""
    with Faults(cluster) as f:
        gone = [e for e in f.entries if pred(e)]
        f.entries = [e for e in f.entries if not pred(e)]
        f.save()
        sync_kernel(cluster, f.entries)
        for e in gone:
            clear_node_faults(cluster, e)
    return gone


def heal(cluster):
    """Every fault of the cluster goes: its chain, and every link and
    skew on every running node (recorded or not)."""
    with Faults(cluster) as f:
        gone = list(f.entries)
        f.entries = []
        f.save()
        sync_kernel(cluster, [])
    for n in cluster.nodes:
        if n.state() != "running":
            continue
        for args in (("netfault", "clear"), ("clockskew", "clear")):
            r = n.tool(*args, timeout=15)
            if r.returncode != 0 and "fault injection is off" not in \
                    r.stderr:
                raise FaultError(f"{n.name}: cassini-tool "
                                 f"{' '.join(args)}: {r.stderr.strip()}")
    return gone


def reapply_to(cluster, nodes):
    """After `nodes` (re)started: their links and skew again."""
    if not (cluster.dir / "netfaults.json").exists():
        return
    with Faults(cluster) as f:
        for e in f.entries:
            apply_node_faults(cluster, e, nodes)


def describe(cluster):
    """Lines for `cluster status`: the faults in force."""
    try:
        entries = json.loads(
            (cluster.dir / "netfaults.json").read_text())["faults"]
    except (FileNotFoundError, ValueError, KeyError):
        return []
    lines = []
    for e in entries:
        age = time.time() - e.get("since", time.time())
        lines.append(f"  {e['label']}  (for {age:.0f} s)")
    return lines
