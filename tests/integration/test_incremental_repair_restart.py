"""Incremental repair's participant sessions survive restarts (3 nodes):

- a finalized session is still listed by `repair_admin list --all` after
  its participant restarts (the sessions are persisted in
  saved_caches_directory/repair_sessions);
- a session whose coordinator is killed mid-way stays pending on a
  participant through that participant's restart (its data too), and is
  failed once the coordinator comes back with a new gossip generation (it
  forgot the session): the data is unrepaired again, never left pending;
- `repair_admin cleanup` settles what ended sessions left pending.

Nodes live on 127.0.77.50-52 (the seed: .51)."""
import re
import subprocess

from cassandra import ConsistencyLevel as CL

from clusters import TOOL, session, wait_for
from clusters import tool_run as tool
from conftest import default_yaml, seeds_yaml, wait_all_normal

IPS = ["127.0.77.50", "127.0.77.51", "127.0.77.52"]
N1, N2, N3 = IPS


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


def test_sessions_survive_restarts(make_node):
    nodes = [None] * 3
    for i in (1, 0, 2):  # the seed first
        nodes[i] = make_node(default_yaml(
            listen_address=IPS[i], gossip_interval="250ms", num_tokens=4,
            hinted_handoff_enabled="false",
            # validation reads 1 KiB/s: a session lasts long enough to
            # kill its coordinator in it
            compaction_throughput="1KiB/s",
            seed_provider=seeds_yaml(N2)), name=f"node{i + 1}")
        nodes[i].start()
        assert nodes[i].wait_for_log("CQL clients on", timeout=60), \
            nodes[i].log()
    wait_all_normal(IPS, timeout=60)
    c, s = session(N1)
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)
    ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
    ins.consistency_level = CL.ALL
    for k in range(50):
        s.execute(ins, (k, "base"))
    c.shutdown()

    # 1. a finalized session outlives its participant's restart
    r = tool(N1, "repair", "ks")
    assert r.returncode == 0, r.stdout + r.stderr
    first = re.search(r"incremental session (\S+):", r.stdout).group(1)
    nodes[1].restart()
    r = tool(N2, "repair_admin", "list", "--all")
    print(r.stdout)
    assert first in r.stdout and "FINALIZED" in r.stdout, r.stdout

    # 2. the coordinator dies mid-session: the participant keeps the
    # session and its pending data through its own restart
    wait_all_normal(IPS, timeout=60)
    c, s = session(N2)
    ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
    ins.consistency_level = CL.ALL
    for k in range(1000, 1300):
        s.execute(ins, (k, "x" * 20))
    c.shutdown()
    p = subprocess.Popen([TOOL, "-h", N1, "repair", "ks"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)

    def in_session():
        out = tool(N3, "repair_admin", "list").stdout
        return "PREPARED" in out or "REPAIRING" in out
    assert wait_for(in_session, timeout=60, step=0.1)
    nodes[0].kill()
    p.communicate(timeout=60)
    assert any(pend != "--" for _, pend in sstables(nodes[2]))
    nodes[2].restart()
    r = tool(N3, "repair_admin", "list")
    print(r.stdout)
    assert "PREPARED" in r.stdout or "REPAIRING" in r.stdout, r.stdout
    assert any(pend != "--" for _, pend in sstables(nodes[2]))
    # cleanup leaves a running session's data alone
    r = tool(N3, "repair_admin", "cleanup")
    print(r.stdout, r.stderr)
    assert r.returncode == 0 and "settled" in r.stdout, r.stdout + r.stderr
    assert any(pend != "--" for _, pend in sstables(nodes[2]))

    # 3. the coordinator comes back (a new generation, the session
    # forgotten): the participant fails the session, unrepairing its data
    nodes[0].start()
    assert nodes[0].wait_for_log("CQL clients on", timeout=60)

    def settled():
        return all(pend == "--" for _, pend in sstables(nodes[2]))
    assert wait_for(settled, timeout=60), sstables(nodes[2])
    r = tool(N3, "repair_admin", "list", "--all")
    assert "FAILED" in r.stdout, r.stdout
    assert "coordinator restarted" in nodes[2].log() or \
        "FAIL" in r.stdout, nodes[2].log()
    r = tool(N3, "repair_admin", "cleanup", "--force")
    assert r.returncode == 0, r.stdout + r.stderr
    r = tool(N3, "repair_admin", "cleanup", "--bogus")
    assert r.returncode == 1, r.stdout + r.stderr
