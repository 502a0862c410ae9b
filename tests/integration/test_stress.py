"""cassini-stress against one real cassinid: write then read back n keys,
counted by the stock DataStax driver; a read past what was written fails
with NotFound; a second, dead contact point is survived."""
import re
import subprocess

import pytest
from cassandra.cluster import Cluster

from conftest import BUILD_DIR, default_yaml

ADDRESS = "127.0.8.2"  # 127.0.8.x is cassini-stress's block
DEAD = "127.0.8.3"
STRESS = BUILD_DIR / "node" / "cassini-stress"


def yaml():
    return default_yaml(listen_address=ADDRESS) + (
        "seed_provider:\n"
        "  - class_name: org.apache.cassandra.locator.SimpleSeedProvider\n"
        "    parameters:\n"
        f"      - seeds: \"{ADDRESS}\"\n")


@pytest.fixture
def node(make_node):
    n = make_node(yaml())
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=20), n.log()
    yield n
    n.kill()


def stress(*args, timeout=120):
    proc = subprocess.run([str(STRESS), *args], capture_output=True,
                          text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def summary(out, label):
    m = re.search(rf"^{label}\s*:\s*(\S+)", out, re.M)
    assert m, out
    return m.group(1)


def test_write_then_read_back_every_key(node):
    rc, out, err = stress("write", "n=2000", "-node", ADDRESS, "-rate",
                          "threads=20")
    assert rc == 0, out + err
    assert summary(out, "Total operations") == "2000"
    assert summary(out, "Total errors") == "0"
    assert re.search(r"^\s+\d+\.\d+s\s+\d+", out, re.M), out  # progress

    rc, out, err = stress("read", "n=2000", "-node", ADDRESS, "cl=ONE",
                          "-mode", "compression=lz4")
    assert rc == 0, out + err
    assert summary(out, "Total operations") == "2000"
    assert summary(out, "Total errors") == "0"
    assert summary(out, "Rows not found") == "0"
    for label in ("Op rate", "Latency mean", "Latency median",
                  "Latency 95th percentile", "Latency 99th percentile",
                  "Latency max"):
        assert float(summary(out, label)) > 0, label

    cluster = Cluster([ADDRESS])
    try:
        s = cluster.connect()
        count = s.execute("SELECT count(*) FROM cassini_stress.standard1")
        assert count.one().count == 2000
        row = s.execute("SELECT c0 FROM cassini_stress.standard1 "
                        "WHERE key = %s", [b"0000001999"]).one()
        assert row is not None and len(row.c0) == 34
    finally:
        cluster.shutdown()


def test_reading_unwritten_keys_fails_with_not_found(node):
    rc, out, err = stress("write", "n=100", "-node", ADDRESS, "-col",
                          "size=100")
    assert rc == 0, out + err
    rc, out, err = stress("read", "n=150", "-node", ADDRESS, "-col",
                          "size=100", "-rate", "threads=5")
    assert rc == 1, out + err
    assert summary(out, "Total operations") == "150"
    assert summary(out, "Rows not found") == "50"
    assert re.search(r"^\s+NotFound\s*:\s*50$", out, re.M), out
    # Values are checked: a different column size reads as BadValue.
    rc, out, err = stress("read", "n=100", "-node", ADDRESS, "-col",
                          "size=99")
    assert rc == 1
    assert re.search(r"^\s+BadValue\s*:\s*100$", out, re.M), out


def test_mixed_quorum_with_a_dead_contact_point(node):
    rc, out, err = stress("mixed", "n=1000", "ratio(write=1,read=3)",
                          "cl=QUORUM", "-node", f"{ADDRESS},{DEAD}",
                          "-rate", "threads=10",
                          "-schema", "replication(factor=1)")
    assert rc == 0, out + err
    assert summary(out, "Total operations") == "1000"
    assert summary(out, "Total errors") == "0"


def test_schema_option_sets_the_replication(node):
    rc, out, err = stress("write", "n=50", "-node", ADDRESS, "-schema",
                          "replication(strategy=NetworkTopologyStrategy,",
                          "dc1=1)")
    assert rc == 0, out + err
    cluster = Cluster([ADDRESS])
    try:
        cluster.connect()
        ks = cluster.metadata.keyspaces["cassini_stress"]
        assert ks.replication_strategy.name == "NetworkTopologyStrategy"
        assert ks.replication_strategy.dc_replication_factors == {"dc1": 1}
    finally:
        cluster.shutdown()


def test_writes_wait_for_flushes_when_memtables_are_full(make_node):
    """With a memtable_heap_space far too small for the write rate, writes
    wait for flushes instead of failing (before, 90% of them failed here),
    and tpstats counts them as MutationStage's blocked."""
    n = make_node(yaml() + "memtable_heap_space: 1MiB\n"
                  "write_request_timeout: 20000ms\n")
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=20), n.log()
    rc, out, err = stress("write", "n=10000", "-node", ADDRESS, "-col",
                          "size=4096", "-rate", "threads=16", timeout=300)
    assert rc == 0, out + err
    assert summary(out, "Total errors") == "0", out
    tp = subprocess.run([str(BUILD_DIR / "node" / "cassini-tool"), "-h",
                         ADDRESS, "tpstats"], capture_output=True,
                        text=True, check=True).stdout
    row = next(line for line in tp.splitlines()
               if line.startswith("MutationStage"))
    # How many waited depends on this machine's speed (none when flushes
    # keep up); the unit tests make them wait on purpose.
    print("MutationStage blocked since start:", row.split()[5])
    n.kill()


def test_bad_arguments_exit_2():
    for args in (["write"], ["scan", "n=1"], ["write", "n=1", "cl=MOST"],
                 ["write", "n=1", "-rate", "threads=0"],
                 ["write", "n=1", "-schema", "replication(foo)"]):
        rc, out, err = stress(*args)
        assert rc == 2, args
        assert "usage" in err, err
