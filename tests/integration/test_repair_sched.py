"""Scheduled repair with real processes: 3 nodes, RF 3, hinted handoff off.

The scheduler is enabled and paused on every node (pauses persist)
before the table exists; node3 is down while rows are written and
deleted at ONE; then `repair schedule resume`: every node repairs its
primary ranges in 32+ segments; node1 is restarted in the middle of its
cycle and resumes it at the next unfinished segment (its state file);
every node completes a cycle, `repair schedule status` shows it, and
afterwards each replica alone holds every row and no deleted one.
pause/resume act on the node addressed; run-now starts another cycle,
and a manual repair on that node runs at once (the scheduler's segment
is retried later). A state file that fails its checksum is refused
with a clear error and moved aside.

Nodes live on 127.0.15.x."""
import re
import subprocess

import pytest
from cassandra import ConsistencyLevel as CL

from clusters import all_up, alone, cluster_script, run_at, session, state
from clusters import tool_run as tool
from clusters import rf3_table, wait_for
from conftest import CASSINID

BASE = "127.0.15."
N1, N2, N3 = (BASE + str(i) for i in (1, 2, 3))
NODES = (("node1", N1), ("node2", N2), ("node3", N3))

SCHED = ("repair_scheduler={enabled: true, intensity: 0.2, "
         "segments_per_node: 32, initial_delay: 1s, check_interval: 200ms, "
         "retry_delay: 1s, segment_timeout: 60s}")


@pytest.fixture
def cluster(tmp_path):
    run = cluster_script(tmp_path)
    yield run
    run("-C", "rs", "remove", check=False)



def status_row(ip, table="ks.t"):
    """(state, done, total, cycles) of `table` in `repair schedule status`,
    and the whole output."""
    r = tool(ip, "repair", "schedule", "status")
    assert r.returncode == 0, r.stdout + r.stderr
    for line in r.stdout.splitlines():
        if line.startswith(table + " "):
            parts = line.split()
            m = re.match(r"(\d+)/(\d+)", parts[2])
            done, total = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
            cycles = int(parts[-2])
            return (parts[1], done, total, cycles), r.stdout
    return None, r.stdout


def test_scheduler_completes_a_cycle_and_resumes_after_restart(cluster):
    cluster("create", "rs", "-n", "3", "--base-ip", BASE,
            "-c", "gossip_interval=250ms",
            "-c", "hinted_handoff_enabled=false", "-c", SCHED, "-s",
            timeout=180)
    for _, ip in NODES:
        r = tool(ip, "repair", "schedule", "pause")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Paused the repair scheduler" in r.stdout, r.stdout
    c, s = session(N1)
    rf3_table(c, s)
    ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
    ins.consistency_level = CL.ALL
    for k in range(300):
        s.execute(ins, (k, "first"))
    c.shutdown()

    # node3 misses 50 rows and 10 deletions; it stays paused across its
    # restart.
    cluster("node", "node3", "stop")
    assert wait_for(lambda: state(N1, N3) == "DN", timeout=40)
    c, s = session(N1)
    for k in range(5000, 5050):
        run_at(s, "INSERT INTO ks.t (k, v) VALUES (%s, 'while down')",
               CL.ONE, (k,))
    for k in range(10):
        run_at(s, "DELETE FROM ks.t WHERE k = %s", CL.ONE, (k,))
    c.shutdown()
    cluster("node", "node3", "start", timeout=180)
    all_up((N1, N2, N3))
    for _, ip in NODES:
        row, out = status_row(ip)
        assert "Scheduled repair: PAUSED" in out, out
        assert row is None or (row[1] == 0 and row[3] == 0), out
    r = tool(N2, "repair", "schedule", "pause", "nope.t")
    assert r.returncode != 0 and "no scheduled table" in r.stderr, r.stderr

    # resume acts on the addressed node only
    r = tool(N1, "repair", "schedule", "resume")
    assert r.returncode == 0, r.stderr
    assert "Scheduled repair: active" in tool(
        N1, "repair", "schedule", "status").stdout
    assert "Scheduled repair: PAUSED" in tool(
        N2, "repair", "schedule", "status").stdout
    for ip in (N2, N3):
        r = tool(ip, "repair", "schedule", "resume")
        assert r.returncode == 0, r.stderr

    # node1: restart it mid-cycle; it resumes where it was.
    def midway():
        row, _ = status_row(N1)
        return row and row[2] >= 32 and 3 <= row[1] < row[2] - 3
    assert wait_for(midway, timeout=60, step=0.05)
    cluster("node", "node1", "stop")
    cluster("node", "node1", "start", timeout=180)
    row, out = status_row(N1)
    assert row and row[1] >= 3 and row[2] >= 32 and row[3] == 0, out
    print(out)

    def completed(ip):
        row, _ = status_row(ip)
        return row is not None and row[3] >= 1
    for _, ip in NODES:
        assert wait_for(lambda: completed(ip), timeout=90), \
            status_row(ip)[1]
    row, out = status_row(N1)
    print(out)
    assert row[3] == 1, out
    assert re.search(r"ks\.t\s+\S+\s+idle\s+-\s+\d{4}-", out), out
    assert "At risk" in out and " YES " not in out, out

    # run-now starts another cycle at once; a manual repair on that node
    # goes first (the running segment is retried, not failed)
    r = tool(N2, "repair", "schedule", "run-now", "ks.t")
    assert r.returncode == 0 and "for 1 table" in r.stdout, r.stdout
    row, out = status_row(N2)
    assert row[2] >= 32 or row[3] >= 2, out
    r = tool(N2, "repair", "ks")
    assert r.returncode == 0, r.stdout + r.stderr
    assert wait_for(lambda: status_row(N2)[0][3] >= 2, timeout=60)
    row, out = status_row(N2)
    assert re.search(r"ks\.t .* 2\s+0/0\n", out), out
    out = tool(N2, "repair", "schedule", "status", "ks.t").stdout
    hist = out.split("Completed cycles of ks.t")[1].splitlines()[2:]
    assert len(hist) == 2, out
    assert all(int(line.split()[5]) >= 32 for line in hist), out

    want = sorted(list(range(10, 300)) + list(range(5000, 5050)))

    def every_row(sess):
        rows = list(run_at(sess, "SELECT k FROM ks.t", CL.ONE))
        assert sorted(r.k for r in rows) == want
        for k in range(10):
            assert run_at(sess, "SELECT v FROM ks.t WHERE k = %s", CL.ONE,
                          (k,)).one() is None

    for node, ip in NODES:
        alone(cluster, node, ip, every_row)

    # A corrupt state file is refused whole, with a clear error: moved
    # aside, and a new schedule starts.
    cluster("node", "node3", "stop")
    state_file = (cluster.home / "rs" / "node3" / "data" / "saved_caches" /
                  "repair_schedule")
    data = bytearray(state_file.read_bytes())
    data[30] ^= 1
    state_file.write_bytes(bytes(data))
    cluster("node", "node3", "start", timeout=180)
    log = (cluster.home / "rs" / "node3" / "logs" / "system.log").read_text()
    assert "repair schedule state: checksum mismatch" in log, log[-2000:]
    assert state_file.with_name("repair_schedule.corrupt").exists()
    row, out = status_row(N3)
    assert row is None or row[3] == 0, out


@pytest.mark.parametrize("section,message", [
    ('  windows: ["1:00-5:00"]',
     "repair_scheduler.windows: '1:00-5:00' is not a time window"),
    ('  tables: ["ks.t speed=9"]',
     "repair_scheduler.tables: unknown table setting 'speed'"),
    ('  tables: ["ks.t intensity=2"]', "intensity=2: not in (0, 1]"),
    ("  intensity: 0", "repair_scheduler.intensity: 0 is out of range"),
])
def test_bad_scheduler_settings_are_refused_by_check(tmp_path, section,
                                                     message):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "node.yaml").write_text("repair_scheduler:\n" + section + "\n")
    r = subprocess.run([str(CASSINID), "-c", str(conf), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and message in r.stderr, r.stderr
