"""Repair with real processes: 3 nodes, RF 3, hinted handoff off, so a
replica that was down misses writes for good until repair.

- node3 down while a row is written and ten are deleted (between two
  batches of 1,000 at ONE): `cassini-tool repair ks` on node1 streams only
  that to node3; afterwards each node alone (the others stopped) returns
  every row at ONE and the deleted rows stay deleted; a second repair
  streams nothing;
- -pr repairs only the node's primary ranges; `repair_admin list` shows
  the sessions, `repair_admin cancel` fails the running one, `netstats` shows it;
- a subrange repair (-st/-et) repairs only the rows whose tokens are in
  (st, et];
- -dc, -local and -hosts restrict the replicas compared and streamed to;
- with a replica down, repair refuses to run (non-zero exit, a message).

Nodes live on 127.0.14.x."""
import re
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel as CL

from clusters import (TOOL, all_up, alone, cluster_script, run_at, session,
                      state)
from clusters import tool_run as tool
from clusters import rf3_table, wait_for

BASE = "127.0.14."
N1, N2, N3 = (BASE + str(i) for i in (1, 2, 3))


@pytest.fixture
def cluster(tmp_path):
    run = cluster_script(tmp_path)
    yield run
    run("-C", "rp", "remove", check=False)



def streamed_to(out, ip):
    """Rows streamed to `ip` in a repair summary."""
    m = re.search(re.escape(ip) + r":\d+\s+(?:streamed|would stream) "
                  r"(\d+) rows", out)
    assert m, out
    return int(m.group(1))


def test_repair_converges_replicas(cluster):
    cluster("create", "rp", "-n", "3", "--base-ip", BASE,
            "-c", "gossip_interval=250ms",
            "-c", "hinted_handoff_enabled=false", "-s", timeout=180)
    c, s = session(N1)
    rf3_table(c, s)
    ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
    ins.consistency_level = CL.ONE
    for k in range(1000):
        s.execute(ins, (k, "first"))

    # node3 misses one row and ten deletions.
    cluster("node", "node3", "stop")
    assert wait_for(lambda: state(N1, N3) == "DN", timeout=40)
    s.execute(ins, (5000, "while down"))
    for k in range(10):
        run_at(s, "DELETE FROM ks.t WHERE k = %s", CL.ONE, (k,))
    r = tool(N1, "repair", "ks")
    assert r.returncode != 0 and "Endpoint not alive" in r.stderr, \
        r.stdout + r.stderr
    c.shutdown()
    cluster("node", "node3", "start", timeout=180)
    all_up((N1, N2, N3))
    c, s = session(N1)
    ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
    ins.consistency_level = CL.ONE
    for k in range(1000, 2000):
        s.execute(ins, (k, "second"))
    c.shutdown()

    r = tool(N1, "repair", "ks")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    print(out)
    assert "Repair session" in out and "finished" in out, out
    assert "[repair]" in out, out
    # exactly the divergent rows: one row and ten tombstones, to node3
    assert streamed_to(out, N3) == 11, out
    assert streamed_to(out, N1) == 0, out
    assert streamed_to(out, N2) == 0, out
    m = re.search(r"ranges: (\d+), mismatched ranges: (\d+)", out)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) >= 1, out

    want = sorted(list(range(10, 2000)) + [5000])

    def every_row(sess):
        rows = list(run_at(sess, "SELECT k FROM ks.t", CL.ONE))
        assert sorted(r.k for r in rows) == want
        for k in range(10):
            assert run_at(sess, "SELECT v FROM ks.t WHERE k = %s", CL.ONE,
                          (k,)).one() is None
        assert run_at(sess, "SELECT v FROM ks.t WHERE k = 5000",
                      CL.ONE).one().v == "while down"

    for node, ip in (("node3", N3), ("node1", N1), ("node2", N2)):
        alone(cluster, node, ip, every_row)
    all_up((N1, N2, N3))

    # In sync now: nothing streams.
    r = tool(N1, "repair", "ks")
    assert r.returncode == 0, r.stdout + r.stderr
    for ip in (N1, N2, N3):
        assert streamed_to(r.stdout, ip) == 0, r.stdout
    assert "mismatched ranges: 0" in r.stdout, r.stdout
    # -pr: only the 16 ranges node1 is primary for (num_tokens 16), of 48
    assert "ranges: 48," in r.stdout, r.stdout
    r = tool(N1, "repair", "-pr", "ks")
    assert r.returncode == 0 and "ranges: 16," in r.stdout, \
        r.stdout + r.stderr

    # History (since node1's restart: the in-sync and the -pr session),
    # and cancel: the running repair fails with the reason.
    r = tool(N1, "repair_admin", "list")
    lines = [l for l in r.stdout.splitlines() if " ks " in l]
    assert r.returncode == 0 and len(lines) == 2, r.stdout
    assert all(" ok " in l for l in lines), r.stdout
    r = tool(N1, "repair_admin", "cancel")
    assert r.returncode != 0 and "no repair session" in r.stderr, r.stderr
    p = subprocess.Popen([TOOL, "-h", N1, "repair", "ks"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(0.5)
    r = tool(N1, "netstats")
    assert r.returncode == 0 and "Repair session" in r.stdout \
        and "ks.t, range" in r.stdout, r.stdout
    r = tool(N1, "repair_admin", "cancel")
    out, err = p.communicate(timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert p.returncode == 2 and "cancelled" in err, out + err
    r = tool(N1, "repair_admin", "list")
    assert "failed" in r.stdout and "cancelled" in r.stdout, r.stdout
    assert "Not sending any streams" in tool(N1, "netstats").stdout


def test_subrange_repair_touches_only_its_range(cluster):
    """Also: validation reads at most compaction_throughput (1 KiB/s
    here), so a full repair of ~10 KB per replica takes seconds."""
    cluster("create", "rp", "-n", "3", "--base-ip", BASE,
            "-c", "gossip_interval=250ms",
            "-c", "compaction_throughput=1KiB/s",
            "-c", "hinted_handoff_enabled=false", "-s", timeout=180)
    c, s = session(N1)
    rf3_table(c, s)
    for k in range(100):
        run_at(s, "INSERT INTO ks.t (k, v) VALUES (%s, 'base')", CL.ALL,
               (k,))
    c.shutdown()
    cluster("node", "node3", "stop")
    assert wait_for(lambda: state(N1, N3) == "DN", timeout=40)
    c, s = session(N1)
    for k in range(6000, 6020):
        run_at(s, "INSERT INTO ks.t (k, v) VALUES (%s, 'new')", CL.ONE,
               (k,))
    tokens = sorted((r.t, r.k) for r in run_at(
        s, "SELECT k, token(k) AS t FROM ks.t WHERE k IN (%s)" %
        ",".join(str(k) for k in range(6000, 6020)), CL.ONE))
    c.shutdown()
    assert len(tokens) == 20
    st, et = tokens[4][0], tokens[14][0]
    inside = sorted(k for t, k in tokens if st < t <= et)
    assert len(inside) == 10
    cluster("node", "node3", "start", timeout=180)
    all_up((N1, N2, N3))

    r = tool(N1, "repair", "-st", str(st), "-et", str(et), "ks")
    assert r.returncode == 0, r.stdout + r.stderr
    assert streamed_to(r.stdout, N3) == 10, r.stdout

    def only_inside(sess):
        rows = list(run_at(sess, "SELECT k FROM ks.t", CL.ONE))
        got = sorted(r.k for r in rows if r.k >= 6000)
        assert got == inside
        assert len([r for r in rows if r.k < 100]) == 100

    alone(cluster, "node3", N3, only_inside)
    all_up((N1, N2, N3))

    r = tool(N1, "repair", "ks")
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"finished in ([0-9.]+) s", r.stdout)
    print("throttled repair:", m and m.group(1))
    assert m and float(m.group(1)) >= 10, r.stdout


def test_dc_option_repairs_only_that_datacenter(cluster):
    """2:2 nodes, NTS {dc1: 2, dc2: 2}; node4 (dc2) misses ten rows.
    `repair -dc dc1` (and -local, and -hosts node1,node3) compare only
    those replicas and send node4 nothing; `repair -dc dc2` (coordinated
    from dc1) brings node4 up to date."""
    n4 = BASE + "4"
    cluster("create", "rp", "-n", "2:2", "--base-ip", BASE,
            "-c", "gossip_interval=250ms",
            "-c", "hinted_handoff_enabled=false", "-s", timeout=180)
    c, s = session(N1)
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 2}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)
    c.shutdown()
    cluster("node", "node4", "stop")
    assert wait_for(lambda: state(N1, n4) == "DN", timeout=40)
    c, s = session(N1)
    for k in range(10):
        run_at(s, "INSERT INTO ks.t (k, v) VALUES (%s, 'x')", CL.ONE, (k,))
    c.shutdown()
    cluster("node", "node4", "start", timeout=180)
    assert wait_for(lambda: state(N1, n4) == "UN", timeout=60)

    r = tool(N1, "repair", "-dc", "dc1", "ks")
    assert r.returncode == 0, r.stdout + r.stderr
    assert n4 not in r.stdout and N3 not in r.stdout, r.stdout
    assert streamed_to(r.stdout, N1) == 0, r.stdout

    r = tool(N1, "repair", "-local", "ks")
    assert r.returncode == 0, r.stdout + r.stderr
    assert n4 not in r.stdout and N3 not in r.stdout, r.stdout
    r = tool(N1, "repair", "-hosts", N1 + "," + N3, "ks")
    assert r.returncode == 0, r.stdout + r.stderr
    assert n4 not in r.stdout and N2 not in r.stdout, r.stdout
    assert streamed_to(r.stdout, N3) == 0, r.stdout

    r = tool(N1, "repair", "-dc", "dc2", "ks")
    assert r.returncode == 0, r.stdout + r.stderr
    assert N2 not in r.stdout, r.stdout
    assert streamed_to(r.stdout, n4) == 10, r.stdout
    assert streamed_to(r.stdout, N3) == 0, r.stdout
