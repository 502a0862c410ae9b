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

from clusters import rf3_table, session, wait_for
from clusters import tool_run as tool
from conftest import wait_all_normal
from incremental_repair import (repair_in_session, sstables, start_nodes,
                                write_all)

IPS = ["127.0.77.50", "127.0.77.51", "127.0.77.52"]
N1, N2, N3 = IPS


def test_sessions_survive_restarts(make_node):
    nodes = start_nodes(make_node, IPS, N2)
    c, s = session(N1)
    rf3_table(c, s)
    c.shutdown()
    write_all(N1, range(50), "base")

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
    write_all(N2, range(1000, 1300), "x" * 20)
    p = repair_in_session(N1, N3)
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
