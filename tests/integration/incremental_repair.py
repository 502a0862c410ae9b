"""What the incremental repair suites (test_incremental_repair*.py) share:
three nodes whose validation is slow enough to act inside a session, rows
written at ALL to ks.t, each SSTable's repair state, and a repair left
running in the background until a participant lists its session."""
import re
import subprocess

from cassandra import ConsistencyLevel as CL

from clusters import TOOL, session, wait_for
from clusters import tool_run as tool
from conftest import default_yaml, seeds_yaml, wait_all_normal


def start_nodes(make_node, ips, seed):
    """node1..node3 on `ips`, the seed `seed` started first; all NORMAL."""
    nodes = [None] * len(ips)
    order = [ips.index(seed)] + [i for i in range(len(ips))
                                 if ips[i] != seed]
    for i in order:
        nodes[i] = make_node(default_yaml(
            listen_address=ips[i], gossip_interval="250ms", num_tokens=4,
            hinted_handoff_enabled="false",
            # validation reads 1 KiB/s: a session over a few KB lasts
            # seconds, long enough to kill a node in it
            compaction_throughput="1KiB/s",
            seed_provider=seeds_yaml(seed)), name=f"node{i + 1}")
        nodes[i].start()
        assert nodes[i].wait_for_log("CQL clients on", timeout=60), \
            nodes[i].log()
    wait_all_normal(ips, timeout=60)
    return nodes


def write_all(ip, keys, value):
    """ks.t rows (k, value) for k in `keys`, at ALL through `ip`."""
    c, s = session(ip)
    ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
    ins.consistency_level = CL.ALL
    for k in keys:
        s.execute(ins, (k, value))
    c.shutdown()


def sstables(node):
    """(repaired_at, pending) of every SSTable of ks.t on `node`."""
    out = []
    for data in node.home.glob("**/ks/t-*/*-Data.db"):
        r = subprocess.run([TOOL, "sstablemetadata", str(data)],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0 and not data.exists():
            continue  # compacted away meanwhile
        assert r.returncode == 0, r.stdout + r.stderr
        rep = re.search(r"^Repaired at: (-?\d+)$", r.stdout, re.M)
        pend = re.search(r"^Pending repair: (\S+)$", r.stdout, re.M)
        assert rep and pend, r.stdout
        out.append((int(rep.group(1)), pend.group(1)))
    return out


def repair_in_session(coordinator, participant):
    """Starts `repair ks` on `coordinator` and returns its Popen once
    `participant` lists the session as PREPARED or REPAIRING."""
    p = subprocess.Popen([TOOL, "-h", coordinator, "repair", "ks"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)

    def in_session():
        out = tool(participant, "repair_admin", "list").stdout
        return "PREPARED" in out or "REPAIRING" in out
    assert wait_for(in_session, timeout=60, step=0.1)
    return p
