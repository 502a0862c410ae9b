"""Incremental repair (Cassandra 4's default) on a 3-node cluster:

- `repair ks` is incremental: each replica marks its unrepaired SSTables
  pending for the session, validation and streaming cover only those, and
  at the end every SSTable of ks.t on every node is repaired
  (sstablemetadata: "Repaired at" > 0, "Pending repair: --");
- a second incremental repair marks, validates and streams nothing;
- a session whose participant is killed fails, and leaves nothing newly
  repaired or pending on the surviving nodes (their pending data goes back
  to unrepaired); `repair_admin list --all` shows the session FAILED there;
- `repair --full` still compares everything;
- an incremental repair covering a TimeWindowCompactionStrategy table is
  refused with the reason unless --force-incremental; --full repairs it.

Nodes live on 127.0.77.41-43."""
import re
import subprocess

from cassandra import ConsistencyLevel as CL

from clusters import TOOL, run_at, session, wait_for
from clusters import tool_run as tool
from conftest import default_yaml, seeds_yaml, wait_all_normal

IPS = ["127.0.77.41", "127.0.77.42", "127.0.77.43"]
N1, N2, N3 = IPS


def start_nodes(make_node):
    nodes = []
    for i, ip in enumerate(IPS):
        n = make_node(default_yaml(
            listen_address=ip, gossip_interval="250ms", num_tokens=4,
            hinted_handoff_enabled="false",
            # validation reads 1 KiB/s: a session over a few KB lasts
            # seconds, long enough to kill a participant in it
            compaction_throughput="1KiB/s",
            seed_provider=seeds_yaml(IPS[0])), name=f"node{i + 1}")
        n.start()
        nodes.append(n)
        assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    wait_all_normal(IPS, timeout=60)
    return nodes


def streamed_to(out, ip):
    m = re.search(re.escape(ip) + r":\d+\s+streamed (\d+) rows", out)
    assert m, out
    return int(m.group(1))


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


def test_incremental_repair(make_node):
    nodes = start_nodes(make_node)
    c, s = session(N1)
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)
    ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
    ins.consistency_level = CL.ALL
    for k in range(200):
        s.execute(ins, (k, "base"))
    c.shutdown()
    nodes[2].stop()
    c, s = session(N1)
    for k in range(1000, 1020):
        run_at(s, "INSERT INTO ks.t (k, v) VALUES (%s, 'new')", CL.ONE, (k,))
    c.shutdown()
    nodes[2].start()
    assert nodes[2].wait_for_log("CQL clients on", timeout=60)
    wait_all_normal(IPS, timeout=60)

    # 1. incremental by default: everything ends repaired
    r = tool(N1, "repair", "ks")
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "incremental session" in r.stdout, r.stdout
    assert streamed_to(r.stdout, N3) == 20, r.stdout
    m = re.search(r"(\d+) SSTables marked pending, (\d+) marked repaired",
                  r.stdout)
    first = re.search(r"partitions validated: (\d+)", r.stdout)
    assert first and int(first.group(1)) >= 3 * 200, r.stdout
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0, r.stdout
    for n in nodes:
        ss = sstables(n)
        assert ss, n.home
        assert all(rep > 0 and pend == "--" for rep, pend in ss), \
            (n.home, ss)
    r = tool(N2, "repair_admin", "list", "--all")
    print(r.stdout)
    assert r.returncode == 0 and "FINALIZED" in r.stdout, r.stdout
    assert r.stdout.startswith("id "), r.stdout
    r = tool(N2, "repair_admin", "list")
    assert r.stdout.startswith("no sessions"), r.stdout
    r = tool(N1, "repair_admin", "summarize-pending", "ks")
    print(r.stdout)
    assert r.returncode == 0 and re.search(r"ks\.t\s+0 ", r.stdout), \
        r.stdout

    # 2. a second one: nothing unrepaired, so nothing validated or sent
    r = tool(N1, "repair", "ks")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 SSTables marked pending" in r.stdout, r.stdout
    # the target: <= 5% of what the first one validated (here 0)
    assert "partitions validated: 0 " in r.stdout, r.stdout
    assert "mismatched ranges: 0, rows hashed: 0" in r.stdout, r.stdout
    for ip in IPS:
        assert streamed_to(r.stdout, ip) == 0, r.stdout
    # a full repair still compares everything (and finds it in sync)
    r = tool(N1, "repair", "--full", "ks")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "incremental session" not in r.stdout, r.stdout
    assert "mismatched ranges: 0" in r.stdout, r.stdout
    full = re.search(r"partitions validated: (\d+)", r.stdout)
    assert full and int(full.group(1)) == 3 * 220, r.stdout

    # 3. TWCS: incremental refused (naming the table and why) unless
    # forced; the keyspace's other table alone, and --full, repair
    c, s = session(N1)
    s.execute("CREATE KEYSPACE ks2 WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE ks2.tw (k int PRIMARY KEY, v text) WITH "
              "compaction = {'class': 'TimeWindowCompactionStrategy'}")
    s.execute("CREATE TABLE ks2.st (k int PRIMARY KEY, v text)")
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)
    for tab in ("tw", "st"):
        ins = s.prepare(f"INSERT INTO ks2.{tab} (k, v) VALUES (?, ?)")
        ins.consistency_level = CL.ALL
        for k in range(3):
            s.execute(ins, (k, "w"))
    c.shutdown()
    r = tool(N1, "repair", "ks2")
    print(r.stdout, r.stderr)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "TimeWindowCompactionStrategy table ks2.tw:" in r.stderr, r.stderr
    assert "anticompaction" in r.stderr and "--full" in r.stderr and \
        "--force-incremental" in r.stderr, r.stderr
    assert "session" not in r.stdout, r.stdout
    r = tool(N1, "repair", "ks2", "st")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "incremental session" in r.stdout, r.stdout
    r = tool(N1, "repair", "--full", "ks2", "tw")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "incremental session" not in r.stdout, r.stdout
    r = tool(N1, "repair", "--force-incremental", "ks2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "incremental session" in r.stdout, r.stdout

    # 4. a session that fails (node3 killed while validating) marks
    # nothing repaired and leaves nothing pending on the others
    before = {i: sstables(nodes[i]) for i in (0, 1)}
    c, s = session(N1)
    ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
    ins.consistency_level = CL.ALL
    for k in range(2000, 2300):
        s.execute(ins, (k, "x" * 20))
    c.shutdown()
    p = subprocess.Popen([TOOL, "-h", N1, "repair", "ks"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)

    def in_session():
        out = tool(N3, "repair_admin", "list").stdout
        return "PREPARED" in out or "REPAIRING" in out
    assert wait_for(in_session, timeout=60, step=0.1)
    nodes[2].kill()
    out, err = p.communicate(timeout=240)
    print(out, err)
    assert p.returncode == 2 and N3 in err, out + err
    assert "pending data back to unrepaired" in out, out

    def settled():
        return all(pend == "--" for i in (0, 1)
                   for _, pend in sstables(nodes[i]))
    assert wait_for(settled, timeout=60)
    for i in (0, 1):
        ss = sstables(nodes[i])
        # the new data is unrepaired; the repaired SSTables are those of
        # before (compaction may merge them, never with unrepaired ones)
        assert any(rep == 0 for rep, _ in ss), (i, ss)
        assert 0 < sum(1 for rep, _ in ss if rep > 0) <= \
            sum(1 for rep, _ in before[i] if rep > 0), (i, ss, before[i])
    r = tool(N2, "repair_admin", "list", "--all")
    assert "FAILED" in r.stdout, r.stdout
