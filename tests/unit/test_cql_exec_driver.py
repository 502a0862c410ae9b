"""The executor, schema registry and system tables behind the CQL server,
driven by an unmodified DataStax driver: Cluster.connect() with protocol
negotiation, schema metadata, DDL, prepared statements, error classes."""
import os
import pathlib
import subprocess

import pytest
from cassandra import AlreadyExists, InvalidRequest, Unauthorized
from cassandra.cluster import Cluster
from cassandra.protocol import ConfigurationException, SyntaxException
from cassandra.query import SimpleStatement

BUILD = pathlib.Path(os.environ["CASSINI_BUILD_DIR"])
SERVER = BUILD / "tests" / "unit" / "cql_exec_server"


@pytest.fixture
def session():
    proc = subprocess.Popen([str(SERVER)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    port = int(proc.stdout.readline().split()[1])
    cluster = Cluster(["127.0.0.1"], port=port)  # no pinned version
    try:
        yield cluster, cluster.connect()
    finally:
        cluster.shutdown()
        proc.terminate()
        proc.wait(timeout=10)


def test_connect_negotiates_v4_and_reads_the_system_tables(session):
    cluster, s = session
    assert cluster.protocol_version == 4
    assert cluster.metadata.cluster_name == "Driver Test"
    assert set(cluster.metadata.keyspaces) == {
        "system", "system_auth", "system_distributed", "system_schema",
        "system_traces"}
    host = cluster.metadata.all_hosts()[0]
    assert (host.datacenter, host.rack) == ("dc1", "rack1")
    assert host.release_version == "4.0.11"
    local = s.execute("SELECT * FROM system.local WHERE key = 'local'").one()
    assert local.partitioner.endswith("Murmur3Partitioner")
    assert sorted(local.tokens, key=int) == \
        ["-6148914691236517206", "0", "6148914691236517205"]
    assert local.schema_version is not None
    # The driver's token map was built from those tokens.
    assert len(cluster.metadata.token_map.ring) == 3
    assert list(s.execute("SELECT * FROM system.peers")) == []


def test_ddl_reaches_driver_metadata(session):
    cluster, s = session
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'NetworkTopologyStrategy', 'dc1': 3} AND durable_writes = false")
    ks = cluster.metadata.keyspaces["ks"]
    assert ks.replication_strategy.dc_replication_factors == {"dc1": 3}
    assert ks.durable_writes is False
    s.execute("CREATE TABLE ks.events (day date, sensor text, ts timeuuid, "
              "v double, tags set<text>, m frozen<map<text, int>>, "
              "owner text static, PRIMARY KEY ((day, sensor), ts)) "
              "WITH CLUSTERING ORDER BY (ts DESC) AND comment = 'sensors' "
              "AND default_time_to_live = 60")
    t = cluster.metadata.keyspaces["ks"].tables["events"]
    assert [c.name for c in t.partition_key] == ["day", "sensor"]
    assert [c.name for c in t.clustering_key] == ["ts"]
    assert t.clustering_key[0].is_reversed
    assert t.columns["tags"].cql_type == "set<text>"
    assert t.columns["m"].cql_type == "frozen<map<text, int>>"
    assert t.columns["owner"].is_static
    assert t.options["comment"] == "sensors"
    assert t.options["default_time_to_live"] == 60
    assert "PRIMARY KEY ((day, sensor), ts)" in t.export_as_string()

    s.execute("ALTER TABLE ks.events ADD extra blob")
    assert "extra" in cluster.metadata.keyspaces["ks"].tables["events"].columns
    s.execute("ALTER TABLE ks.events DROP v")
    assert "v" not in cluster.metadata.keyspaces["ks"].tables["events"].columns
    s.execute("USE ks")
    s.execute("DROP TABLE events")
    assert "events" not in cluster.metadata.keyspaces["ks"].tables
    s.execute("DROP KEYSPACE ks")
    assert "ks" not in cluster.metadata.keyspaces
    # Schema agreement: every DDL above waited for it and got it.
    assert cluster.control_connection.wait_for_schema_agreement()


def test_errors_arrive_as_the_drivers_exception_classes(session):
    _, s = session
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
    with pytest.raises(AlreadyExists) as e:
        s.execute("CREATE TABLE ks.t (k int PRIMARY KEY)")
    assert (e.value.keyspace, e.value.table) == ("ks", "t")
    with pytest.raises(AlreadyExists) as e:
        s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
                  "'SimpleStrategy', 'replication_factor': 1}")
    assert e.value.keyspace == "ks"
    with pytest.raises(SyntaxException, match="no viable alternative"):
        s.execute("SELEC * FROM ks.t")
    with pytest.raises(InvalidRequest, match="unconfigured table nosuch"):
        s.execute("SELECT * FROM system.nosuch")
    with pytest.raises(InvalidRequest, match="Unknown type ks.addr"):
        s.execute("CREATE TABLE ks.u (k int PRIMARY KEY, a addr)")
    with pytest.raises(InvalidRequest, match="Secondary indexes are not "
                                             "supported"):
        s.execute("CREATE INDEX ON ks.t (v)")
    with pytest.raises(InvalidRequest, match="Lightweight transactions"):
        s.execute("INSERT INTO ks.t (k, v) VALUES (1, 'a') IF NOT EXISTS")
    with pytest.raises(ConfigurationException, match="Cannot drop non "
                                                      "existing keyspace"):
        s.execute("DROP KEYSPACE nope")
    with pytest.raises(ConfigurationException, match="replication_factor is "
                                                     "an option for "
                                                     "SimpleStrategy"):
        s.execute("CREATE KEYSPACE k2 WITH replication = {'class': "
                  "'NetworkTopologyStrategy', 'replication_factor': 3}")
    with pytest.raises(Unauthorized, match="not user-modifiable"):
        s.execute("DROP TABLE system.local")
    with pytest.raises(InvalidRequest, match="does not exist"):
        s.execute("USE nope")
    # IF NOT EXISTS / IF EXISTS succeed quietly.
    s.execute("CREATE TABLE IF NOT EXISTS ks.t (k int PRIMARY KEY)")
    s.execute("DROP TABLE IF EXISTS ks.nothing")


def test_prepared_statements_and_bound_values(session):
    cluster, s = session
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE ks.a (k int PRIMARY KEY)")
    s.execute("CREATE TABLE ks.b (k int PRIMARY KEY)")
    ps = s.prepare("SELECT table_name FROM system_schema.tables "
                   "WHERE keyspace_name = ?")
    assert [c.name for c in ps.column_metadata] == ["keyspace_name"]
    assert sorted(r.table_name for r in s.execute(ps, ["ks"])) == ["a", "b"]
    rows = s.execute("SELECT keyspace_name FROM system_schema.keyspaces "
                     "WHERE keyspace_name IN ('ks', 'system') LIMIT 1")
    assert len(list(rows)) == 1
    # Routing metadata for a user table: partition key bind indexes.
    ps = s.prepare("SELECT * FROM ks.a WHERE k = ?")
    assert ps.routing_key_indexes == [0]
    with pytest.raises(InvalidRequest, match="not served by this node yet"):
        s.execute(ps, [1])
    stmt = SimpleStatement("SELECT * FROM system_schema.keyspaces "
                           "WHERE keyspace_name = %s")
    assert s.execute(stmt, ["ks"]).one().keyspace_name == "ks"
