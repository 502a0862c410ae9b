"""cassini-tool tablehistograms on one node: nodetool's layout, values that
move after writes, reads and a flush (and on /metrics too), every table
without arguments, and errors on an unknown table or bad arguments. Address 127.0.100.20."""
import re
import subprocess
import urllib.request

import pytest

from clusters import session
from conftest import BUILD_DIR, default_yaml, seeds_yaml

IP = "127.0.100.20"
PORT = 9520
TOOL = str(BUILD_DIR / "node" / "cassini-tool")
LABELS = ["50%", "75%", "95%", "98%", "99%", "Min", "Max"]


def tool(*args):
    return subprocess.run([TOOL, "-h", IP, *args], capture_output=True,
                          text=True, timeout=30)


def table(*args):
    """{label: [read, write, sstables, size, cells]} after checking the
    header lines are nodetool's, column for column."""
    r = tool("tablehistograms", *args)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[0] == "h/t histograms"
    assert lines[1] == "%-10s%18s%18s%18s%18s%18s" % (
        "Percentile", "Read Latency", "Write Latency", "SSTables",
        "Partition Size", "Cell Count")
    assert lines[2] == "%-10s%18s%18s%18s%18s%18s" % (
        "", "(micros)", "(micros)", "", "(bytes)", "")
    rows = {}
    for line, label in zip(lines[3:10], LABELS):
        assert len(line) == 100, line
        assert line[:10].rstrip() == label
        cols = [line[10 + 18 * i:28 + 18 * i] for i in range(5)]
        assert all(re.fullmatch(r" *\d+\.\d\d", c) for c in cols[:3]), line
        assert all(re.fullmatch(r" *\d+", c) for c in cols[3:]), line
        rows[label] = [float(c) for c in cols]
    return rows


@pytest.fixture
def node(make_node):
    n = make_node(default_yaml(listen_address=IP, rpc_address=IP,
                               seed_provider=seeds_yaml(IP),
                               metrics_port=PORT))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    return n


def test_tablehistograms(node):
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE h WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE h.t (k int, c int, v text, "
                  "PRIMARY KEY (k, c))")
        empty = table("h", "t")
        assert all(v == [0, 0, 0, 0, 0] for v in empty.values())
        ins = s.prepare("INSERT INTO h.t (k, c, v) VALUES (?, ?, ?)")
        for k in range(20):
            for c in range(10):
                s.execute(ins, (k, c, "x" * 50))
        written = table("h", "t")
        assert written["Max"][1] > 0 and written["Min"][1] > 0
        assert written["Max"][0] == 0  # no reads yet
        assert written["Max"][3] == 0  # nothing flushed
        assert tool("flush", "h", "t").returncode == 0
        sel = s.prepare("SELECT * FROM h.t WHERE k = ?")
        for k in range(20):
            assert len(list(s.execute(sel, (k,)))) == 10
        done = table("h.t")  # <keyspace.table> too
        assert done["Max"][0] > 0 and done["50%"][0] > 0
        assert done["Max"][2] == 1 and done["Min"][2] == 1
        # 10 rows of 50-byte values: a few hundred bytes; 10 to 20 cells
        # (with the rows' markers), shown as their bucket's top (23)
        assert 500 <= done["50%"][3] <= 2047
        assert 10 <= done["50%"][4] <= 23 and done["Max"][4] <= 23
        with urllib.request.urlopen(f"http://{IP}:{PORT}/metrics",
                                    timeout=10) as r:
            text = r.read().decode()
        lab = 'keyspace="h",table="t"'
        assert f"cassandra_table_read_latency_seconds_count{{{lab}}} 20\n" \
            in text
        assert f"cassandra_table_sstables_per_read_sum{{{lab}}} 20." in text
        # a count histogram keeps its exact buckets: all 20 reads read one
        # SSTable, which a power-of-two export would show only as "<= 15"
        for le, n in (("0", 0), ("1", 20), ("2", 20)):
            assert (f'cassandra_table_sstables_per_read_bucket{{{lab},'
                    f'le="{le}.000000"}} {n}\n') in text, le
        m = re.search(r"cassandra_table_write_latency_seconds_count\{%s\} "
                      r"(\d+)" % lab, text)
        assert m and int(m.group(1)) >= 200
    finally:
        cluster.shutdown()
    r = tool("tablehistograms", "h", "nope")
    assert r.returncode == 2 and "Unknown table h.nope" in r.stderr
    r = tool("tablehistograms", "nope.t")
    assert r.returncode == 2 and "Unknown table nope.t" in r.stderr
    # no arguments: every table of the node, each in the same layout
    r = tool("tablehistograms")
    assert r.returncode == 0, r.stderr
    heads = [line for line in r.stdout.split("\n")
             if line.endswith(" histograms")]
    assert "h/t histograms" in heads, heads
    assert "system_auth/roles histograms" in heads, heads
    assert r.stdout.count("\nPercentile ") == len(heads)
    block = r.stdout[r.stdout.index("h/t histograms"):].split("\n\n")[0]
    assert len(block.split("\n")) == 10, block
    for bad in (("h",), ("h", "t", "u"), ("h.",), (".t",)):
        r = tool("tablehistograms", *bad)
        assert r.returncode == 1 and "tablehistograms requires " \
            "<keyspace> <table> or <keyspace.table>" in r.stderr, bad
