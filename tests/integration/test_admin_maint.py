"""cassini-tool's garbagecollect, scrub, toppartitions and
get/setstreamthroughput against real nodes (nodetool 4.1's names,
arguments and output), errors on bad arguments included. Addresses
127.0.100.40-42."""
import re
import subprocess

from cassandra import ConsistencyLevel as CL

from clusters import (TOOL, all_up, cluster_script, run_at, session, state,
                      tool_run, wait_for)
from conftest import default_yaml, seeds_yaml

import pytest

IP = "127.0.100.40"


def tool(*args):
    return tool_run(IP, *args, timeout=60)


@pytest.fixture
def node(make_node):
    n = make_node(default_yaml(listen_address=IP, rpc_address=IP,
                               seed_provider=seeds_yaml(IP)))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    return n


def partitions(table):
    out = tool("tablestats", "g", table).stdout
    m = re.search(r"Number of partitions \(estimate\): (\d+)", out)
    assert m, out
    return int(m.group(1))


def test_garbagecollect(node):
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE g WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        for t in ("d", "c"):
            s.execute(f"CREATE TABLE g.{t} (k int PRIMARY KEY, v int) "
                      "WITH gc_grace_seconds = 864000 AND compaction = "
                      "{'class': 'SizeTieredCompactionStrategy', "
                      "'min_threshold': 32}")
        for k in range(100):
            s.execute("INSERT INTO g.d (k, v) VALUES (%s, 1)", (k,))
            s.execute("INSERT INTO g.c (k, v) VALUES (%s, 1)", (k,))
        assert tool("flush", "g").returncode == 0
        for k in range(50):
            s.execute("DELETE FROM g.d WHERE k = %s", (k,))
            s.execute("INSERT INTO g.c (k, v) VALUES (%s, 2)", (k,))
        assert tool("flush", "g").returncode == 0
        assert partitions("d") == 150 and partitions("c") == 150

        # ROW: g.d's first SSTable loses the 50 deleted partitions (the
        # tombstones stay: gc_grace has not passed); g.c loses nothing
        r = tool("garbagecollect", "g")
        assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
        assert partitions("d") == 100, tool("tablestats", "g").stdout
        assert partitions("c") == 150
        # CELL: the overwritten cells of g.c go too
        r = tool("garbagecollect", "-g", "CELL", "-j", "2", "g", "c")
        assert r.returncode == 0, r.stderr
        assert partitions("c") == 100
        assert sorted(x.k for x in s.execute("SELECT k FROM g.d")) == \
            list(range(50, 100))
        rows = {x.k: x.v for x in s.execute("SELECT k, v FROM g.c")}
        assert rows == {k: 2 if k < 50 else 1 for k in range(100)}
    finally:
        cluster.shutdown()
    r = tool("garbagecollect", "-g", "PARTITION", "g")
    assert r.returncode == 1 and "TombstoneOption.PARTITION" in r.stderr
    r = tool("garbagecollect", "-x")
    assert r.returncode == 1 and "usage: garbagecollect" in r.stderr
    r = tool("garbagecollect", "nope")
    assert r.returncode == 2 and "Keyspace [nope] does not exist" in r.stderr
    r = tool("garbagecollect", "g", "nope")
    assert r.returncode == 2 and "Unknown table nope" in r.stderr


def test_scrub(node):
    """A flipped byte in one block of an SSTable: verify fails, scrub keeps
    a pre-scrub snapshot, drops the partitions of that block and says so;
    afterwards verify passes and the other rows read."""
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE v WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE v.t (k int PRIMARY KEY, x text) WITH "
                  "compression = {'class': 'LZ4Compressor', "
                  "'chunk_length_in_kb': 4}")
        for k in range(400):
            s.execute("INSERT INTO v.t (k, x) VALUES (%s, %s)",
                      (k, "%05d" % k * 20))
    finally:
        cluster.shutdown()
    assert tool("flush", "v").returncode == 0
    assert tool("scrub", "v").returncode == 0  # sound: nothing dropped
    snaps = tool("listsnapshots").stdout
    assert "pre-scrub-" in snaps, snaps
    data = [p for p in node.home.rglob("*Data.db")
            if "/v/t-" in str(p) and "snapshots" not in str(p)]
    assert len(data) == 1, data
    raw = bytearray(data[0].read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data[0].write_bytes(bytes(raw))
    assert tool("verify", "v").returncode == 2

    r = tool("scrub", "-r", "v")
    assert r.returncode == 1 and "not supported" in r.stderr
    r = tool("scrub", "--bogus")
    assert r.returncode == 1 and "usage: scrub" in r.stderr
    since = node.log_size()
    r = tool("scrub", "-ns", "v", "t")
    # nodetool prints nothing: the Scrubber's lines are in the server log
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    log = node.log()[since:]
    m = re.search(r"Scrub of \S+Data.db complete: (\d+) partitions in new "
                  r"sstable and 0 empty \(tombstoned\) partitions dropped",
                  log)
    assert m, log
    kept = int(m.group(1))
    m = re.search(r"Unable to recover (\d+) partitions that were skipped\. "
                  r" You can attempt manual recovery from the pre-scrub "
                  r"snapshot\.", log)
    assert m, log
    dropped = int(m.group(1))
    assert kept + dropped == 400 and 0 < dropped < 400, log
    assert tool("verify", "v").returncode == 0
    cluster, s = session(IP)
    try:
        assert len(list(s.execute("SELECT k FROM v.t"))) == kept
    finally:
        cluster.shutdown()


def test_scrub_counter_table(node):
    """A counter table's corrupt partitions abort its scrub (dropping
    shards would lose increments) with nodetool's line, unless
    --skip-corrupted."""
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE cn WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE cn.c (k text PRIMARY KEY, n counter) WITH "
                  "compression = {'class': 'LZ4Compressor', "
                  "'chunk_length_in_kb': 4}")
        for k in range(400):
            s.execute("UPDATE cn.c SET n = n + 1 WHERE k = %s",
                      ("%05d" % k * 10,))
    finally:
        cluster.shutdown()
    assert tool("flush", "cn").returncode == 0
    data = [p for p in node.home.rglob("*Data.db") if "/cn/c-" in str(p)]
    assert len(data) == 1, data
    raw = bytearray(data[0].read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data[0].write_bytes(bytes(raw))
    r = tool("scrub", "-ns", "cn")
    assert r.returncode == 2 and r.stdout == (
        "Aborted scrubbing at least one table in keyspace cn, check "
        "server logs for more information.\n"), r.stdout + r.stderr
    assert "--skip-corrupted" in node.log()
    assert tool("verify", "cn").returncode == 2  # left as it was
    r = tool("scrub", "-ns", "-s", "cn", "c")
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    assert tool("verify", "cn").returncode == 0


def test_stream_throughput_args(node):
    r = tool("getstreamthroughput")
    assert r.stdout == "Current stream throughput: 201 Mb/s\n", r.stderr
    assert tool("getstreamthroughput", "-m").stdout == \
        "Current stream throughput: 24.0 MiB/s\n"
    assert tool("setstreamthroughput", "80").returncode == 0
    assert tool("getstreamthroughput").stdout == \
        "Current stream throughput: 80 Mb/s\n"
    assert tool("getstreamthroughput", "-m").stdout == \
        "Current stream throughput: 9.5367431640625 MiB/s\n"
    assert tool("setstreamthroughput", "-m", "3").returncode == 0
    assert tool("getstreamthroughput", "-m").stdout == \
        "Current stream throughput: 3.0 MiB/s\n"
    assert tool("setstreamthroughput", "0").returncode == 0
    assert tool("getstreamthroughput").stdout == \
        "Current stream throughput: unlimited\n"
    for bad in (["-1"], ["x"], ["1", "2"], [], ["-q", "1"]):
        r = tool("setstreamthroughput", *bad)
        assert r.returncode == 1 and "usage: setstreamthroughput" in \
            r.stderr, bad
    r = tool("getstreamthroughput", "-e", "-m")
    assert r.returncode == 1 and "You cannot use -e and -m" in r.stderr
    r = tool("getstreamthroughput", "-e")
    assert r.returncode == 1 and "entire SSTables" in r.stderr
    assert tool("getstreamthroughput", "x").returncode == 1


B = "127.0.100."  # test-addresses: 127.0.100.40-42
N1, N2 = B + "41", B + "42"


def throttle(ip):
    out = tool_run(ip, "netstats").stdout
    m = re.search(r"Stream throttle: (\d+) bytes sent, (\d+) waits", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


def test_stream_throttle_slows_repair(tmp_path):
    """node2 misses rows; node1's repair streams them to it. Unthrottled
    the stream never waits; at 4 KiB/s its messages wait for their
    bytes (the throttle's counter), and the rows arrive all the same."""
    run = cluster_script(tmp_path)
    try:
        run("create", "st", "-n", "2", "--base-ip", N1,
            "-c", "num_tokens=4", "-c", "gossip_interval=250ms",
            "-c", "hinted_handoff_enabled=false", "-s", timeout=180)
        c, s = session(N1)
        s.execute("CREATE KEYSPACE ks WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 2}")
        s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
        c.shutdown()
        # unthrottled, then at 1 Mb/s (125,000 bytes/s): each task's
        # APPLY of ~40 rows of 2 KB books over half a second, so the
        # next task's message waits for it
        for rnd, rate in ((0, "0"), (1, "1")):
            run("node", "node2", "stop")
            assert wait_for(lambda: state(N1, N2) == "DN", timeout=40)
            c, s = session(N1)
            for k in range(rnd * 1000, rnd * 1000 + 300):
                run_at(s, "INSERT INTO ks.t (k, v) VALUES (%s, %s)", CL.ONE,
                       (k, "v" * 2000))
            c.shutdown()
            run("node", "node2", "start", timeout=180)
            all_up((N1, N2))
            assert tool_run(N1, "setstreamthroughput", rate).returncode == 0
            before = throttle(N1)
            r = tool_run(N1, "repair", "--full", "ks")
            assert r.returncode == 0, r.stdout + r.stderr
            after = throttle(N1)
            print("throttle", rate, before, after, r.stdout[-300:])
            assert after[0] > before[0] + 300 * 2000, (before, after)
            if rnd:
                assert after[1] > before[1], (before, after)
            else:
                assert after[1] == before[1], (before, after)
        c, s = session(N2)
        rows = run_at(s, "SELECT k FROM ks.t", CL.ONE)
        assert len(list(rows)) == 600
        c.shutdown()
    finally:
        run("-C", "st", "remove", check=False)


def test_toppartitions(node):
    """nodetool 4.1's toppartitions: the window's reads and writes of one
    table, per sampler, in Cassandra's TableBuilder layout; an untouched
    sampler says nothing was recorded."""
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE tp WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE tp.t (k int PRIMARY KEY, v int)")
        s.execute("CREATE TABLE tp.c (a text, b int, v int, "
                  "PRIMARY KEY ((a, b)))")
        s.execute("CREATE TABLE tp.idle (k int PRIMARY KEY)")
        since = node.log_size()
        win = subprocess.Popen([TOOL, "-h", IP, "toppartitions", "tp", "t",
                                "8000"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        other = subprocess.Popen([TOOL, "-h", IP, "toppartitions", "-a",
                                  "writes", "-k", "2", "tp", "c", "8000"],
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        assert node.wait_for_log("sampling tp.c for 8000 ms", since=since,
                                 timeout=30), node.log()[since:]
        assert node.wait_for_log("sampling tp.t for 8000 ms", since=since,
                                 timeout=30), node.log()[since:]
        for k, times in ((7, 12), (3, 5), (11, 1)):
            for _ in range(times):
                s.execute("INSERT INTO tp.t (k, v) VALUES (%s, 1)", (k,))
        for _ in range(4):
            s.execute("SELECT v FROM tp.t WHERE k = 3")
        for b, times in ((1, 3), (2, 2), (3, 1)):
            for _ in range(times):
                s.execute("INSERT INTO tp.c (a, b, v) VALUES ('x y', %s, 1)",
                          (b,))
        # a second window of the same table's samplers is refused
        r = tool("toppartitions", "tp", "t", "100")
        assert r.returncode == 2 and "already sampling" in r.stderr, \
            r.stderr
        out, errs = win.communicate(timeout=60)
        assert win.returncode == 0, errs
        assert out == (
            "Frequency of reads by partition:\n"
            "   Table Partition Count +/-\n"
            "   tp.t  3         4     0  \n"
            "\n"
            "Frequency of writes by partition:\n"
            "   Table Partition Count +/-\n"
            "   tp.t  7         12    0  \n"
            "   tp.t  3         5     0  \n"
            "   tp.t  11        1     0  \n"), out
        out, errs = other.communicate(timeout=60)
        assert other.returncode == 0, errs
        assert out == (
            "Frequency of writes by partition:\n"
            "   Table Partition Count +/-\n"
            "   tp.c  x y:1     3     0  \n"
            "   tp.c  x y:2     2     0  \n"), out
    finally:
        cluster.shutdown()
    assert tool("toppartitions", "tp", "idle", "50").stdout == (
        "Frequency of reads by partition:\n"
        "   Nothing recorded during sampling period...\n"
        "\n"
        "Frequency of writes by partition:\n"
        "   Nothing recorded during sampling period...\n")
    for bad, code, text in (
            (["tp", "t"], 1, "requires keyspace, table name, and duration"),
            (["tp", "t", "x"], 1, 'For input string: "x"'),
            (["-k", "300", "tp", "t", "10"], 1, "must be smaller then"),
            (["-a", "CAS", "tp", "t", "10"], 1, "CAS is not a valid sampler"),
            (["-q", "1", "tp", "t", "10"], 1, "usage: toppartitions"),
            (["nope", "t", "10"], 2, "Keyspace [nope] does not exist"),
            (["tp", "nope", "10"], 2, "Unknown table nope")):
        r = tool("toppartitions", *bad)
        assert r.returncode == code and text in r.stderr, (bad, r.stderr)
