"""A real node drops an SSTable of expired data when it expires (the
compactor is woken by the node's loop timer, storage_droppable_watch_start),
not at the next flush or the compactor's 5-minute look. Address
127.0.125.2."""
import re

from clusters import session, tool_run, wait_for
from conftest import default_yaml, seeds_yaml

import pytest

IP = "127.0.125.2"


def tool(*args):
    r = tool_run(IP, *args, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.fixture
def node(make_node):
    n = make_node(default_yaml(listen_address=IP, rpc_address=IP,
                               seed_provider=seeds_yaml(IP)))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    return n


def sstables(table):
    out = tool("tablestats", "ex", table)
    m = re.search(r"SSTable count: (\d+)", out)
    assert m, out
    return int(m.group(1))


@pytest.mark.parametrize("strategy", ["TimeWindowCompactionStrategy",
                                      "SizeTieredCompactionStrategy"])
def test_an_expired_sstable_goes_when_it_expires(node, strategy):
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE IF NOT EXISTS ex WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        t = "tw" if strategy.startswith("Time") else "st"
        s.execute(f"CREATE TABLE ex.{t} (k int PRIMARY KEY, v int) WITH "
                  "default_time_to_live = 2 AND gc_grace_seconds = 0 AND "
                  f"compaction = {{'class': '{strategy}'}}")
        for k in range(50):
            s.execute(f"INSERT INTO ex.{t} (k, v) VALUES (%s, 1)", (k,))
        tool("flush", "ex", t)
        assert sstables(t) == 1
        # nothing is written from now on: only the wake-up can drop it
        # (the compactor's own look comes after 5 minutes; this is a
        # hang guard)
        assert wait_for(lambda: sstables(t) == 0, timeout=120), \
            tool("tablestats", "ex", t)
        assert list(s.execute(f"SELECT k FROM ex.{t}")) == []
    finally:
        cluster.shutdown()
