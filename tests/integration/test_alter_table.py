"""ALTER TABLE ADD / DROP on real cassinid processes with the stock DataStax
driver: data written before the ALTER (flushed SSTables, the commitlog
replayed after kill -9) reads correctly after it, a dropped column's cells
never come back (not after restarts, not under a re-added name), and the
change reaches a second node, which writes and reads the new column.
Addresses: the 127.0.16.x block, this suite's own."""
import signal
import time

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import (EXEC_PROFILE_DEFAULT, Cluster,
                               ExecutionProfile)
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement
from cassandra import ConsistencyLevel

from conftest import default_yaml, seeds_yaml, wait_all_normal

ADDRESS = "127.0.16.1"


def connect(ip=ADDRESS):
    pinned = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([ip]))
    cluster = Cluster([ip], protocol_version=4,
                      execution_profiles={EXEC_PROFILE_DEFAULT: pinned})
    return cluster, cluster.connect()


def rows_of(s, key):
    return {r.c: r for r in s.execute(
        f"SELECT * FROM app.t WHERE k = {key}")}


def test_add_and_drop_survive_flushes_and_restarts(make_node):
    node = make_node(default_yaml(listen_address=ADDRESS))
    node.start()
    assert node.wait_for_log("CQL clients on"), node.log()
    cluster, s = connect()
    s.execute("CREATE KEYSPACE app WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE app.t (k int, c int, v text, PRIMARY KEY (k, c))")
    for c in range(5):
        s.execute("INSERT INTO app.t (k, c, v) VALUES (1, %s, %s)",
                  [c, f"old{c}"])
    cluster.shutdown()
    # A clean stop flushes: the old rows now live in an SSTable.
    node.restart(signal.SIGTERM)

    cluster, s = connect()
    s.execute("ALTER TABLE app.t ADD (extra text, tags set<int>)")
    assert {r.c: (r.v, r.extra) for r in rows_of(s, 1).values()} == {
        c: (f"old{c}", None) for c in range(5)}
    s.execute("UPDATE app.t SET extra = 'x', tags = tags + {3, -1} "
              "WHERE k = 1 AND c = 2")
    s.execute("INSERT INTO app.t (k, c, v, extra) VALUES (2, 0, 'n', 'y')")
    cluster.shutdown()
    # kill -9: the new column's cells come back from the commitlog.
    log = node.restart(signal.SIGKILL)
    assert "commitlog replay" in log, log

    cluster, s = connect()
    assert "extra" in cluster.metadata.keyspaces["app"].tables["t"].columns
    r = rows_of(s, 1)
    assert (r[2].v, r[2].extra, r[2].tags) == ("old2", "x", {-1, 3})
    assert (r[3].v, r[3].extra) == ("old3", None)
    assert rows_of(s, 2)[0].extra == "y"
    s.execute("ALTER TABLE app.t DROP v")
    assert "v" not in rows_of(s, 1)[0]._fields
    cluster.shutdown()
    log = node.restart(signal.SIGKILL)
    assert "replayed 4 statements" in log, log

    cluster, s = connect()
    assert "v" not in cluster.metadata.keyspaces["app"].tables["t"].columns
    with pytest.raises(InvalidRequest, match="Undefined column name v"):
        s.execute("SELECT v FROM app.t WHERE k = 1")
    # Re-added: the cells from before the drop (SSTable and commitlog)
    # stay gone, through restarts too.
    s.execute("ALTER TABLE app.t ADD v text")
    assert [r.v for r in rows_of(s, 1).values()] == [None] * 5
    s.execute("UPDATE app.t SET v = 'again' WHERE k = 1 AND c = 4")
    cluster.shutdown()
    node.restart(signal.SIGTERM)
    cluster, s = connect()
    r = rows_of(s, 1)
    assert [r[c].v for c in range(5)] == [None, None, None, None, "again"]
    assert r[2].extra == "x"
    dropped = list(s.execute(
        "SELECT column_name, dropped_time FROM system_schema.dropped_columns "
        "WHERE keyspace_name = 'app' AND table_name = 't'"))
    assert [d.column_name for d in dropped] == ["v"]
    assert dropped[0].dropped_time.year >= 2024
    cluster.shutdown()


def test_a_second_node_takes_the_new_column(make_node):
    seeds = "127.0.16.11"
    nodes = []
    for i, ip in enumerate(["127.0.16.11", "127.0.16.12"]):
        n = make_node(default_yaml(
            listen_address=ip, gossip_interval="200ms",
            seed_provider=seeds_yaml(seeds)), name=f"n{i}")
        n.start()
        nodes.append(n)
    for n in nodes:
        assert n.wait_for_log("CQL clients on", timeout=30), n.log()
    wait_all_normal(["127.0.16.11", "127.0.16.12"])
    c1, s1 = connect("127.0.16.11")
    s1.execute("CREATE KEYSPACE k WITH replication = {'class': "
               "'SimpleStrategy', 'replication_factor': 2}")
    s1.execute("CREATE TABLE k.t (id int PRIMARY KEY, v text, gone int)")
    s1.execute(SimpleStatement("INSERT INTO k.t (id, v, gone) "
                               "VALUES (1, 'one', 1)",
                               consistency_level=ConsistencyLevel.ALL))
    s1.execute("ALTER TABLE k.t ADD later int")
    assert c1.control_connection.wait_for_schema_agreement()
    c2, s2 = connect("127.0.16.12")
    # Node 2 learned the column: it coordinates a write of it to both.
    deadline = time.monotonic() + 30
    while "later" not in c2.metadata.keyspaces["k"].tables["t"].columns:
        assert time.monotonic() < deadline
        time.sleep(0.2)
        c2.refresh_schema_metadata()
    s2.execute(SimpleStatement("UPDATE k.t SET later = 5 WHERE id = 1",
                               consistency_level=ConsistencyLevel.ALL))
    s2.execute("ALTER TABLE k.t DROP gone")
    assert c2.control_connection.wait_for_schema_agreement()
    for s in (s1, s2):
        row = s.execute(SimpleStatement(
            "SELECT * FROM k.t WHERE id = 1",
            consistency_level=ConsistencyLevel.ONE)).one()
        assert (row.v, row.later) == ("one", 5)
        assert "gone" not in row._fields
    c1.shutdown()
    c2.shutdown()
