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

from cassandra import ConsistencyLevel as CL

from clusters import rf3_table, run_at, session, wait_for
from clusters import tool_run as tool
from conftest import wait_all_normal
from incremental_repair import (repair_in_session, sstables, start_nodes,
                                write_all)

IPS = ["127.0.77.41", "127.0.77.42", "127.0.77.43"]
N1, N2, N3 = IPS


def streamed_to(out, ip):
    m = re.search(re.escape(ip) + r":\d+\s+streamed (\d+) rows", out)
    assert m, out
    return int(m.group(1))


def test_incremental_repair(make_node):
    nodes = start_nodes(make_node, IPS, N1)
    c, s = session(N1)
    rf3_table(c, s)
    c.shutdown()
    write_all(N1, range(200), "base")
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
    write_all(N1, range(2000, 2300), "x" * 20)
    p = repair_in_session(N1, N3)
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
