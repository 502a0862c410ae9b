"""Repair session options with real processes: 3 nodes, RF 3, hinted
handoff off, node3 down while 20 rows are written at ONE.

- `repair -seq --trace ks` converges node3 and its trace lines show one
  replica of a range validating at a time (the same check fails on the
  parallel run's trace: all three are asked at once);
- `-j 2` runs two (table, range) tasks at once, never more; `-dcpar`
  runs; conflicting options are refused with nodetool's wording;
- `repair_admin history` lists every (table, range) task with its
  options, outcome and rows streamed; it survives a restart of the
  coordinating node, and a corrupt history file is refused (moved aside,
  an error in the log), never a crash.

Nodes live on 127.0.18.x, 4 tokens each (12 ranges), to keep it quick."""
import re

import pytest
from cassandra import ConsistencyLevel as CL

from clusters import all_up, cluster_script, session, state
from clusters import tool_run as tool
from clusters import rf3_table, wait_for

BASE = "127.0.18."
RANGES = 12  # 3 nodes x num_tokens 4, each replicated on all three
N1, N2, N3 = (BASE + str(i) for i in (1, 2, 3))
TRACE = re.compile(r"^\[trace\] \+[\d.]+s (\S+ \(-?\d+,-?\d+\]): (.*)$")


@pytest.fixture
def cluster(tmp_path):
    run = cluster_script(tmp_path)
    yield run
    run("-C", "ro", "remove", check=False)



def repair(*args):
    r = tool(N1, "repair", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def trace_events(out):
    """(task, event) of every trace line, in order."""
    ev = []
    for line in out.splitlines():
        m = TRACE.match(line)
        if m:
            ev.append((m.group(1), m.group(2)))
    return ev


def most_validating(events):
    """The most validations of one task outstanding at once."""
    out, most = {}, 0
    for task, what in events:
        if what.startswith("validation requested from"):
            out[task] = out.get(task, 0) + 1
            most = max(most, out[task])
        elif what.startswith("tree from"):
            out[task] -= 1
    return most


def most_tasks(events):
    """The most tasks running at once (first request to "task done")."""
    running, most = set(), 0
    for task, what in events:
        if what.startswith("validation requested from"):
            running.add(task)
            most = max(most, len(running))
        elif what.startswith("task done"):
            running.discard(task)
    return most


def history(ip, *args):
    r = tool(ip, "repair_admin", "history", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return [l for l in r.stdout.splitlines() if l.startswith("ks.t ")]


def test_repair_options_and_history(cluster):
    cluster("create", "ro", "-n", "3", "--base-ip", BASE,
            "--vnodes", "4", "-c", "gossip_interval=250ms",
            "-c", "hinted_handoff_enabled=false", "-s", timeout=180)
    c, s = session(N1)
    rf3_table(c, s)
    ins = s.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
    ins.consistency_level = CL.ALL
    for k in range(100):
        s.execute(ins, (k, "all"))
    cluster("node", "node3", "stop")
    assert wait_for(lambda: state(N1, N3) == "DN", timeout=40)
    ins.consistency_level = CL.ONE
    for k in range(1000, 1020):
        s.execute(ins, (k, "while down"))
    c.shutdown()
    cluster("node", "node3", "start", timeout=180)
    all_up((N1, N2, N3))

    # Refused combinations, nodetool's words where it has them.
    r = tool(N1, "repair", "-seq", "-dcpar", "ks")
    assert r.returncode == 1 and \
        "Cannot combine -seq and -dcpar options." in r.stderr, r.stderr
    r = tool(N1, "repair", "-j", "5", "ks")
    assert r.returncode == 1 and "Too many job threads. Max is 4" in \
        r.stderr, r.stderr
    r = tool(N1, "repair", "-dc", "dc1", "-hosts", N1 + "," + N2, "ks")
    assert r.returncode == 1 and \
        "Cannot combine -dc and -hosts options." in r.stderr, r.stderr

    # Sequential, traced: node3 gets exactly the 20 rows; one replica of
    # a range validates at a time.
    out = repair("-seq", "--trace", "ks")
    print(out)
    assert re.search(re.escape(N3) + r":\d+\s+streamed 20 rows", out), out
    ev = trace_events(out)
    assert ev, out
    assert most_validating(ev) == 1, out
    assert most_tasks(ev) == 1, out
    assert any(w.startswith("trees compared: ") and
               not w.startswith("trees compared: 0 ") for _, w in ev), out
    assert any(w.startswith("fetching ") for _, w in ev), out
    assert any(w.startswith("sending ") and N3 in w for _, w in ev), out

    # Parallel with two job threads: all replicas at once, two tasks.
    out = repair("-j", "2", "--trace", "ks")
    ev = trace_events(out)
    assert most_validating(ev) == 3, out
    assert most_tasks(ev) == 2, out
    assert "mismatched ranges: 0" in out, out
    out = repair("-dcpar", "-j", "4", "ks")
    assert f"ranges: {RANGES}," in out and "mismatched ranges: 0" in out, out

    # History: every (table, range) task of the three sessions.
    hist = history(N1, "ks.t")
    print("\n".join(hist[:3] + hist[-2:]))
    assert len(hist) == 3 * RANGES, "\n".join(hist)
    seq = [l for l in hist if "-seq --trace" in l]
    assert len(seq) == RANGES and all(" ok " in l for l in seq), seq
    rows = 0
    for l in seq:
        m = re.search(r" ok +(\d+) +(\d+) +(\d+) ", l)
        assert m, l
        rows += int(m.group(2))
    assert rows == 20, seq
    assert len([l for l in hist if "-dcpar -j 4" in l]) == RANGES, hist
    assert history(N1, "other") == []

    # It survives a restart of node1.
    cluster("node", "node1", "stop")
    cluster("node", "node1", "start", timeout=180)
    all_up((N1, N2, N3))
    assert history(N1, "ks") == hist

    # A corrupt file: refused with a clear error, moved aside, empty.
    cluster("node", "node1", "stop")
    f = cluster.home / "ro" / "node1" / "data" / "saved_caches" / \
        "repair_history"
    data = bytearray(f.read_bytes())
    data[40] ^= 1
    f.write_bytes(bytes(data))
    cluster("node", "node1", "start", timeout=180)
    log = (cluster.home / "ro" / "node1" / "logs" / "system.log").read_text()
    assert "repair history: checksum mismatch" in log, log[-2000:]
    assert f.with_name("repair_history.corrupt").exists()
    assert history(N1) == []
