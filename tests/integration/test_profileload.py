"""cassini-tool profileload (nodetool 4.1's): one sampling window over
every table of the node, a keyspace's (`ks *`) or one table's, per
sampler in Cassandra's SamplerType order and SamplingManager's layout
(`Table Partition Count +/-` rows merged over the tables, Table as
ks.table); the largest-figure samplers (READ_ROW_COUNT, READ_SSTABLE_COUNT,
WRITE_SIZE, ...); ProfileLoad's argument errors. Address 127.0.115.41
(test-addresses: 127.0.115.41-50)."""
import re
import subprocess

from clusters import TOOL, session, tool_run
from conftest import default_yaml, seeds_yaml

import pytest

IP = "127.0.115.41"

SAMPLERS = "[READS, WRITES, READ_ROW_COUNT, READ_TOMBSTONE_COUNT, " \
    "READ_SSTABLE_COUNT, WRITE_SIZE]"
DESCRIPTIONS = ["Frequency of reads by partition:",
                "Frequency of writes by partition:",
                "Partitions read with the most rows:",
                "Partitions read with the most tombstones:",
                "Partitions read with the most sstables:",
                "Max mutation size by partition:"]
NOTHING = "   Nothing recorded during sampling period..."


def tool(*args):
    return tool_run(IP, *args, timeout=60)


@pytest.fixture
def node(make_node):
    n = make_node(default_yaml(listen_address=IP, rpc_address=IP,
                               seed_provider=seeds_yaml(IP)))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    return n


def window(node, since, what, *args):
    """profileload in the background, once its window has started."""
    p = subprocess.Popen([TOOL, "-h", IP, "profileload", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    assert node.wait_for_log(f"profileload: sampling {what}", since=since,
                             timeout=30), node.log()[since:]
    return p


def answer(p):
    out, errs = p.communicate(timeout=60)
    assert p.returncode == 0, errs
    return out


def sections(out):
    """{description: [row cells]} of an answer, checking the order of
    the descriptions and each section's header."""
    got, cur, order = {}, None, []
    for line in out.split("\n"):
        if line.endswith(":") and not line.startswith(" "):
            cur = line
            order.append(line)
            got[cur] = []
        elif line.startswith("   Table ") or line == NOTHING or not line:
            continue
        else:
            got[cur].append(line.split())
    assert order == [d for d in DESCRIPTIONS if d in order], out
    return got


def test_profileload(node):
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE pl WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE KEYSPACE pl2 WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE pl.a (k int PRIMARY KEY, v text)")
        s.execute("CREATE TABLE pl.b (a text, b int, v int, "
                  "PRIMARY KEY ((a, b)))")
        s.execute("CREATE TABLE pl.idle (k int PRIMARY KEY)")
        s.execute("CREATE TABLE pl2.x (k int PRIMARY KEY, v int)")

        # every table of the node, every sampler
        since = node.log_size()
        p = window(node, since, "*.* (", "-k", "50", "8000")
        # a second window over a table already sampled is refused
        r = tool("profileload", "pl", "a", "100")
        assert r.returncode == 2 and "already sampling" in r.stderr, \
            r.stderr
        for _ in range(6):
            s.execute("INSERT INTO pl.a (k, v) VALUES (7, 'v')")
        for _ in range(2):
            s.execute("INSERT INTO pl.a (k, v) VALUES (3, %s)", ("w" * 300,))
        for _ in range(4):
            s.execute("INSERT INTO pl.b (a, b, v) VALUES ('x', 1, 1)")
        for _ in range(3):
            s.execute("INSERT INTO pl2.x (k, v) VALUES (1, 1)")
        for _ in range(3):
            s.execute("SELECT v FROM pl.a WHERE k = 7")
        s.execute("SELECT v FROM pl.b WHERE a = 'x' AND b = 1")
        got = sections(answer(p))
        assert list(got) == DESCRIPTIONS, got

        def ours(rows):
            return [r for r in rows if r[0].split(".")[0] in ("pl", "pl2")]
        assert ours(got[DESCRIPTIONS[0]]) == [
            ["pl.a", "7", "3", "0"], ["pl.b", "x:1", "1", "0"]], got
        assert ours(got[DESCRIPTIONS[1]]) == [
            ["pl.a", "7", "6", "0"], ["pl.b", "x:1", "4", "0"],
            ["pl2.x", "1", "3", "0"], ["pl.a", "3", "2", "0"]], got
        assert ours(got[DESCRIPTIONS[2]]) == [
            ["pl.a", "7", "1"]] * 3 + [["pl.b", "x:1", "1"]], got
        assert ours(got[DESCRIPTIONS[3]]) == [], got
        sizes = ours(got[DESCRIPTIONS[5]])
        assert len(sizes) == 15, got
        assert sizes[0][:2] == ["pl.a", "3"] == sizes[1][:2], got
        assert int(sizes[1][2]) > int(sizes[2][2]) > 0, got

        # a keyspace's tables; the samplers asked for, in Cassandra's order
        since = node.log_size()
        p = window(node, since, "pl.* (3 tables) for 8000 ms", "-a",
                   "write_size, writes", "-k", "2", "pl", "*", "8000")
        for _ in range(3):
            s.execute("INSERT INTO pl.a (k, v) VALUES (5, %s)", ("z" * 200,))
        for _ in range(2):
            s.execute("INSERT INTO pl.b (a, b, v) VALUES ('y', 2, 1)")
        for _ in range(5):
            s.execute("INSERT INTO pl2.x (k, v) VALUES (9, 1)")
        out = answer(p)
        m = re.fullmatch(
            r"Frequency of writes by partition:\n"
            r"   Table Partition Count \+/-\n"
            r"   pl\.a  5         3     0  \n"
            r"   pl\.b  y:2       2     0  \n"
            r"\n"
            r"Max mutation size by partition:\n"
            r"   Table Partition Bytes\n"
            r"   pl\.a  5         (\d+) *\n"
            r"   pl\.a  5         \1 *\n", out)
        assert m, out

        # one table, flushed first: its read meets one SSTable
        s.execute("INSERT INTO pl.b (a, b, v) VALUES ('z', 3, 1)")
        assert tool("flush", "pl", "b").returncode == 0
        since = node.log_size()
        p = window(node, since, "pl.b for 8000 ms", "pl", "b", "8000")
        for _ in range(2):
            s.execute("INSERT INTO pl.b (a, b, v) VALUES ('z', 3, 2)")
        s.execute("SELECT v FROM pl.b WHERE a = 'z' AND b = 3")
        out = answer(p)
        m = re.fullmatch(
            r"Frequency of reads by partition:\n"
            r"   Table Partition Count \+/-\n"
            r"   pl\.b  z:3       1     0  \n"
            r"\n"
            r"Frequency of writes by partition:\n"
            r"   Table Partition Count \+/-\n"
            r"   pl\.b  z:3       2     0  \n"
            r"\n"
            r"Partitions read with the most rows:\n"
            r"   Table Partition Rows\n"
            r"   pl\.b  z:3       1   \n"
            r"\n"
            r"Partitions read with the most tombstones:\n"
            r"   Nothing recorded during sampling period\.\.\.\n"
            r"\n"
            r"Partitions read with the most sstables:\n"
            r"   Table Partition SSTables\n"
            r"   pl\.b  z:3       1       \n"
            r"\n"
            r"Max mutation size by partition:\n"
            r"   Table Partition Bytes\n"
            r"   pl\.b  z:3       (\d+) *\n"
            r"   pl\.b  z:3       \1 *\n", out)
        assert m, out
    finally:
        cluster.shutdown()

    # an idle keyspace: nothing recorded
    assert tool("profileload", "-a", "READS", "pl", "idle", "50").stdout \
        == "Frequency of reads by partition:\n" + NOTHING + "\n"

    # the scheduled forms: none is ever running, -i is refused
    r = tool("profileload", "-l")
    assert r.returncode == 0 and r.stdout == "KEYSPACE TABLE\n", r
    r = tool("profileload", "-t", "pl", "a")
    assert r.returncode == 0 and r.stdout == (
        "Unable to stop the non-existent scheduled sampling for "
        "keyspace: pl, table: a\n"), r
    for bad, code, text in (
            (["-a", "CAS_CONTENTIONS", "10"], 1,
             "'CAS_CONTENTIONS' sampler is not available from: " + SAMPLERS),
            (["-a", "READS,nope", "10"], 1, "'nope' sampler is not"),
            (["nope", "*", "10"], 2, "Keyspace [nope] does not exist."),
            (["pl", "nope", "10"], 2, "Unknown table nope in keyspace pl"),
            (["pl", "a", "x"], 1, 'For input string: "x"'),
            (["x"], 1, 'For input string: "x"'),
            (["0"], 1, "Duration: 0 must be positive"),
            (["pl", "a", "10", "20"], 1, "Invalid arguments, either"),
            (["-k", "0", "10"], 1, "must have positive value"),
            (["-k", "300", "10"], 1, "must be smaller then the summary"),
            (["-s", "2000", "10"], 1, "Capacity (-s) cannot exceed 1024."),
            (["-i", "50", "100"], 1, "Expecting interval >= duration"),
            (["-i", "1000", "100"], 2, "scheduled sampling (-i) is not"),
            (["-q", "1", "10"], 1, "usage: profileload")):
        r = tool("profileload", *bad)
        assert r.returncode == code and text in r.stderr, (bad, r.stderr)
