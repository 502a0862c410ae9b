"""cassini-tool import and refresh (nodetool 4.1's names, options and
messages) against one real node: SSTables copied out of a snapshot come
back after a TRUNCATE, through the stock driver and the table's
storage-attached index; a corrupt directory fails alone; tokens the node
does not own are refused unless -t, SSTables of another column layout
always; --copy-data keeps the sources;
refresh loads files dropped into the table's directory; bad arguments
answer nodetool's errors. Addresses: 127.0.115.1 (test-addresses:
127.0.115.1-20)."""
import re
import shutil
import subprocess

from clusters import TOOL, session, tool_run
from conftest import default_yaml, seeds_yaml

import pytest

IP = "127.0.115.1"


def tool(*args):
    return tool_run(IP, *args, timeout=120)


@pytest.fixture
def node(make_node):
    n = make_node(default_yaml(listen_address=IP, rpc_address=IP,
                               seed_provider=seeds_yaml(IP)))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    return n


def table_dir(node, ks, t):
    return next((node.home / "data" / "data" / ks).glob(f"{t}-*"))


def sstables(d):
    return sorted(p.name for p in d.glob("ca-*-TOC.txt"))


def sstable_count(ks, t):
    out = tool("tablestats", ks, t).stdout
    m = re.search(r"SSTable count: (\d+)", out)
    assert m, out
    return int(m.group(1))


def schema(s, ks, tables, strategy="'SimpleStrategy', "
           "'replication_factor': 1"):
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = "
              f"{{'class': {strategy}}}")
    for t in tables:
        s.execute(f"CREATE TABLE {ks}.{t} (k int PRIMARY KEY, v text)")


def backup(node, s, tmp_path, ks, t, tag, n=100):
    """Writes n rows, flushes, snapshots; the snapshot's directory."""
    for k in range(n):
        s.execute(f"INSERT INTO {ks}.{t} (k, v) VALUES (%s, %s)",
                  (k, f"v{k}"))
    assert tool("flush", ks, t).returncode == 0
    assert tool("snapshot", "-t", tag, ks).returncode == 0
    return table_dir(node, ks, t) / "snapshots" / tag


def test_import_after_truncate(node, tmp_path):
    cluster, s = session(IP)
    try:
        schema(s, "i", ["t", "u"])
        s.execute("CREATE INDEX tv ON i.t (v) USING 'sai'")
        snap = backup(node, s, tmp_path, "i", "t", "b1")
        out = tmp_path / "out"
        shutil.copytree(snap, out)
        assert sstables(out)
        s.execute("TRUNCATE i.t")
        assert s.execute("SELECT count(*) FROM i.t").one().count == 0

        r = tool("import", "i", "t", str(out))
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout == "" and r.stderr == ""
        assert sstables(out) == []  # moved
        assert s.execute("SELECT count(*) FROM i.t").one().count == 100
        assert {(x.k, x.v) for x in s.execute("SELECT k, v FROM i.t")} == \
            {(k, f"v{k}") for k in range(100)}
        # the index answers for the imported rows
        rows = list(s.execute("SELECT k FROM i.t WHERE v = 'v42'"))
        assert [x.k for x in rows] == [42]

        # --copy-data into another table of the same shape: the sources stay
        copy = tmp_path / "copy"
        shutil.copytree(snap, copy)
        r = tool("import", "--copy-data", "i", "u", str(copy))
        assert r.returncode == 0, r.stderr
        assert sstables(copy) == sstables(snap)
        assert s.execute("SELECT count(*) FROM i.u").one().count == 100
        # a relative directory is the tool's working directory's
        rel = tmp_path / "rel"
        shutil.copytree(snap, rel)
        s.execute("TRUNCATE i.u")
        r = subprocess.run([TOOL, "-h", IP, "import", "-q", "i", "u",
                            "rel"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout == ("Doing a quick import - skipping sstable "
                            "verification and row cache invalidation\n")
        assert s.execute("SELECT count(*) FROM i.u").one().count == 100

        # SSTables written without the index (i.u has none) imported into
        # the indexed table: the import has their components written in
        # the background, and the index finds their rows meanwhile (those
        # SSTables are scanned)
        s.execute("TRUNCATE i.u")
        plain = tmp_path / "plain"
        shutil.copytree(backup(node, s, tmp_path, "i", "u", "b2"), plain)
        s.execute("TRUNCATE i.t")
        since = node.log_size()
        r = tool("import", "i", "t", str(plain))
        assert r.returncode == 0, r.stderr
        assert node.wait_for_log("index tv on i.t: SSTables without a "
                                 "usable component", since=since), node.log()
        rows = list(s.execute("SELECT k FROM i.t WHERE v = 'v7'"))
        assert [x.k for x in rows] == [7]

        # restart: the imported SSTables stay, once each
        before = sstable_count("i", "t")
        cluster.shutdown()
        since = node.log_size()
        assert tool("drain").returncode == 0
        node.stop()
        node.start()
        assert node.wait_for_log("CQL clients on", since=since), node.log()
        cluster, s = session(IP)
        assert sstable_count("i", "t") == before
        assert s.execute("SELECT count(*) FROM i.t").one().count == 100
    finally:
        cluster.shutdown()


def test_import_refuses_corrupt_and_foreign(node, tmp_path):
    cluster, s = session(IP)
    try:
        schema(s, "c", ["t"])
        # a keyspace this node replicates nothing of
        schema(s, "o", ["t"], "'NetworkTopologyStrategy', 'dc1': 0")
        snap = backup(node, s, tmp_path, "c", "t", "b1")
        good, bad = tmp_path / "good", tmp_path / "bad"
        shutil.copytree(snap, good)
        shutil.copytree(snap, bad)
        data = next(bad.glob("ca-*-Data.db"))
        b = bytearray(data.read_bytes())
        b[len(b) // 2] ^= 0xFF
        data.write_bytes(bytes(b))
        s.execute("TRUNCATE c.t")

        r = tool("import", "c", "t", str(good), str(bad))
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stderr == ("Some directories failed to import, check "
                            f"server logs for details:\n{bad}\n")
        assert sstables(bad) == sstables(snap)  # nothing of it moved
        assert sstables(good) == []
        assert s.execute("SELECT count(*) FROM c.t").one().count == 100
        assert "Failed verifying SSTable" in node.log()

        # tokens this node does not own: the directory fails, unless -t
        foreign = tmp_path / "foreign"
        shutil.copytree(snap, foreign)
        r = tool("import", "o", "t", str(foreign))
        assert r.returncode == 1 and str(foreign) in r.stderr, r.stderr
        assert sstables(foreign) == sstables(snap)
        assert sstable_count("o", "t") == 0
        r = tool("import", "-t", "o", "t", str(foreign))
        assert r.returncode == 0, r.stderr
        assert sstables(foreign) == []
        assert sstable_count("o", "t") == len(sstables(snap))

        # SSTables of another column layout (v text, the table's v int)
        # are refused even by a quick import, and stay where they are
        s.execute("CREATE TABLE c.w (k int PRIMARY KEY, v int)")
        other = tmp_path / "other"
        shutil.copytree(snap, other)
        r = tool("import", "-q", "c", "w", str(other))
        assert r.returncode == 1 and str(other) in r.stderr, r.stderr
        assert sstables(other) == sstables(snap)
        assert sstable_count("c", "w") == 0
        assert ("Column layout mismatch with table c.w: column 1 of the "
                "SSTable is regular v text, the table's is regular v int"
                ) in node.log()
    finally:
        cluster.shutdown()


def test_refresh(node, tmp_path):
    cluster, s = session(IP)
    try:
        schema(s, "r", ["t"])
        snap = backup(node, s, tmp_path, "r", "t", "b1")
        s.execute("TRUNCATE r.t")
        d = table_dir(node, "r", "t")
        assert sstables(d) == []
        for f in snap.iterdir():
            shutil.copy(f, d / f.name)
        dropped = sstables(d)
        assert dropped
        assert s.execute("SELECT count(*) FROM r.t").one().count == 0
        r = tool("refresh", "r", "t")
        assert r.returncode == 0, r.stderr
        assert r.stdout == ("nodetool refresh is deprecated, use nodetool "
                            "import instead\n")
        assert s.execute("SELECT count(*) FROM r.t").one().count == 100
        # renumbered: the dropped names are gone, as many new ones live
        now = sstables(d)
        assert len(now) == len(dropped) and not set(now) & set(dropped)
        assert sstable_count("r", "t") == len(dropped)
        # again: nothing new
        assert tool("refresh", "r", "t").returncode == 0
        assert sstable_count("r", "t") == len(dropped)
    finally:
        cluster.shutdown()


def test_bad_arguments(node, tmp_path):
    cluster, s = session(IP)
    try:
        schema(s, "a", ["t"])
    finally:
        cluster.shutdown()
    r = tool("import", "a", "t")
    assert r.returncode == 1
    assert "import requires keyspace, table name and directories" in \
        r.stderr
    r = tool("import", "a", "nope", str(tmp_path))
    assert r.returncode == 1
    assert r.stderr == "ColumnFamilyStore for a/nope not found.\n"
    r = tool("import", "nope", "t", str(tmp_path))
    assert r.returncode == 1 and "ColumnFamilyStore for nope/t" in r.stderr
    missing = tmp_path / "missing"
    r = tool("import", "a", "t", str(missing))
    assert r.returncode == 2
    assert f"Directory {missing} does not exist" in r.stderr
    r = tool("import", "-x", "a", "t", str(tmp_path))
    assert r.returncode == 1 and "usage: import" in r.stderr
    # an empty directory imports nothing and succeeds
    r = tool("import", "a", "t", str(tmp_path))
    assert r.returncode == 0, r.stderr
    r = tool("refresh", "a")
    assert r.returncode == 1 and "refresh requires ks and cf args" in \
        r.stderr
    r = tool("refresh", "nope", "t")
    assert r.returncode == 2 and "Keyspace nope does not exist" in r.stderr
    r = tool("refresh", "a", "nope")
    assert r.returncode == 2
    assert "Unknown keyspace/cf pair (a.nope)" in r.stderr
