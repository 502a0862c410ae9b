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


def test_connect_negotiates_v5_and_reads_the_system_tables(session):
    cluster, s = session
    assert cluster.protocol_version == 5
    assert cluster.metadata.cluster_name == "Driver Test"
    assert set(cluster.metadata.keyspaces) == {
        "system", "system_auth", "system_distributed", "system_schema",
        "system_traces", "system_views", "system_virtual_schema"}
    # the virtual keyspaces, from system_virtual_schema (empty tables in
    # this test executor, which installs no views hook)
    views = cluster.metadata.keyspaces["system_views"]
    assert views.virtual
    assert set(views.tables) == {"settings", "clients", "thread_pools",
                                 "gossip_info", "pending_hints", "disk_usage",
                                 "sstable_tasks", "max_partition_size", "caches",
                                 "rows_per_read", "tombstones_per_read",
                                 "local_read_latency", "local_write_latency",
                                 "internode_inbound", "internode_outbound",
                                 "sai_column_indexes",
                                 "coordinator_read_latency",
                                 "coordinator_scan_latency",
                                 "coordinator_write_latency",
                                 "local_scan_latency", "repairs",
                                 "repair_sessions"}
    assert list(s.execute("SELECT * FROM system_views.settings")) == []
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


def test_syntax_errors_and_relation_shapes_as_cassandra_answers(session):
    """Cassandra 4.1's class for each refused relation shape (a syntax
    error where Parser.g has no such shape, an invalid request where it
    parses and the restriction is refused) and ErrorCollector's snippet."""
    _, s = session
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE ks.t (k int, c int, v int, PRIMARY KEY (k, c))")
    syntax = {
        "SELECT * FORM ks.t": "line 1:9 mismatched input 'FORM' expecting "
                              "K_FROM (SELECT * [FORM]...)",
        "SELECT * FROM ks.t WHERE token(k) IN (1, 2)":
            "line 1:34 no viable alternative at input 'IN' "
            "(....t WHERE token(k) [IN]...)",
        "SELECT * FROM ks.t WHERE k IN 1":
            "line 1:30 no viable alternative at input '1' "
            "(...* FROM ks.t WHERE [k] IN...)",
        "SELECT * FROM ks.t WHERE (c) = 1":
            "line 1:31 no viable alternative at input '1' "
            "(...ks.t WHERE (c) [=] 1)",
        "DROP nosuch.t": "line 1:5 no viable alternative at input 'nosuch' "
                         "([DROP] nosuch...)",
        "SELECT * FROM ks.t WHERE": "line 0:-1 no viable alternative at "
                                    "input '<EOF>'",
    }
    for q, msg in syntax.items():
        with pytest.raises(SyntaxException) as e:
            s.execute(q)
        assert str(e.value).endswith(msg + '">'), (q, str(e.value))
    invalid = {
        "SELECT * FROM ks.t WHERE token(k) != 1":
            'Unsupported "!=" relation: token(k) != 1',
        "SELECT * FROM ks.t WHERE v IS NOT NULL ALLOW FILTERING":
            "Unsupported restriction: v IS NOT NULL",
    }
    for q, msg in invalid.items():
        with pytest.raises(InvalidRequest, match=msg.replace("(", r"\(")
                           .replace(")", r"\)")):
            s.execute(q)
    # '(' relation ')' is a relation (user tables are not served here)
    assert s.execute("SELECT key FROM system.local WHERE ((key = 'local'))"
                     ).one().key == "local"


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
    with pytest.raises(InvalidRequest, match="Materialized views are "
                                             "disabled"):
        s.execute("CREATE MATERIALIZED VIEW ks.mv AS SELECT * FROM ks.t "
                  "WHERE k IS NOT NULL PRIMARY KEY (k)")
    with pytest.raises(ConfigurationException, match="Cannot drop non "
                                                      "existing keyspace"):
        s.execute("DROP KEYSPACE nope")
    # Cassandra 4.0+: replication_factor is every known datacenter's
    s.execute("CREATE KEYSPACE k2 WITH replication = {'class': "
              "'NetworkTopologyStrategy', 'replication_factor': 3}")
    assert s.execute("SELECT replication FROM system_schema.keyspaces "
                     "WHERE keyspace_name = 'k2'").one().replication == {
        "class": "org.apache.cassandra.locator.NetworkTopologyStrategy",
        "dc1": "3"}
    s.execute("DROP KEYSPACE k2")
    with pytest.raises(ConfigurationException, match="Unrecognized strategy "
                       "option {dc2} passed to NetworkTopologyStrategy for "
                       "keyspace k2"):
        s.execute("CREATE KEYSPACE k2 WITH replication = {'class': "
                  "'NetworkTopologyStrategy', 'dc2': 3}")
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
    # Every keyspace names its strategy's full class, system ones too.
    classes = {r.keyspace_name: r.replication["class"] for r in
               s.execute("SELECT * FROM system_schema.keyspaces")}
    assert classes["system"] == "org.apache.cassandra.locator.LocalStrategy"
    assert classes["system_auth"] == \
        "org.apache.cassandra.locator.SimpleStrategy"
    assert classes["ks"] == "org.apache.cassandra.locator.SimpleStrategy"


def test_system_schema_rows_restricted_to_a_keyspace_or_table(session):
    """The node builds only the rows of the keyspace and table a query
    names (what drivers ask after a schema change); the answers are those
    of the whole table filtered, for literals, bound values, a table or a
    keyspace that does not exist, and a restriction the rows cannot meet."""
    cluster, s = session
    for ks in ("ks1", "ks2"):
        s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': "
                  "'SimpleStrategy', 'replication_factor': 1}")
        for t in ("a", "b"):
            s.execute(f"CREATE TABLE {ks}.{t} (k int PRIMARY KEY, "
                      f"{t}v text)")
    s.execute("ALTER TABLE ks2.b DROP bv")

    def rows(q, *args):
        return sorted(tuple(r) for r in s.execute(q, list(args)))

    for table, cols in (("tables", "keyspace_name, table_name"),
                        ("columns", "keyspace_name, table_name, "
                                    "column_name"),
                        ("dropped_columns", "keyspace_name, table_name, "
                                            "column_name")):
        everything = rows(f"SELECT {cols} FROM system_schema.{table}")
        for ks in ("ks1", "ks2", "nosuch", "system_schema"):
            want = [r for r in everything if r[0] == ks]
            assert rows(f"SELECT {cols} FROM system_schema.{table} "
                        f"WHERE keyspace_name = '{ks}'") == want
            assert rows(f"SELECT {cols} FROM system_schema.{table} "
                        "WHERE keyspace_name = %s", ks) == want
            for t in ("a", "b", "nosuch", "tables"):
                want_t = [r for r in want if r[1] == t]
                assert rows(f"SELECT {cols} FROM system_schema.{table} "
                            "WHERE keyspace_name = %s AND table_name = %s",
                            ks, t) == want_t
    assert rows("SELECT table_name FROM system_schema.tables "
                "WHERE keyspace_name = %s", "x" * 100) == []
    assert rows("SELECT keyspace_name FROM system_schema.keyspaces "
                "WHERE keyspace_name = 'ks2'") == [("ks2",)]
    assert rows("SELECT column_name FROM system_schema.dropped_columns "
                "WHERE keyspace_name = 'ks2' AND table_name = 'b'") == \
        [("bv",)]


@pytest.fixture
def data_session(tmp_path):
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([str(SERVER), "--data", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    port = int(proc.stdout.readline().split()[1])
    cluster = Cluster(["127.0.0.1"], port=port)
    try:
        s = cluster.connect()
        s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
                  "'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE ks.t (k int, c int, v text, tags set<text>, "
                  "m map<text, int>, l list<int>, s int static, "
                  "PRIMARY KEY (k, c))")
        yield s
    finally:
        cluster.shutdown()
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
        # Sanitizer reports and crashes land here; show them.
        text = (tmp_path / "server.log").read_text()
        assert "ERROR: AddressSanitizer" not in text, text[-4000:]
        assert "runtime error" not in text, text[-4000:]


def test_writes_and_reads_round_trip_through_the_driver(data_session):
    s = data_session
    ins = s.prepare("INSERT INTO ks.t (k, c, v, tags) VALUES (?, ?, ?, ?)")
    assert ins.routing_key_indexes == [0]
    for k in range(3):
        for c in range(4):
            s.execute(ins, [k, c, f"v{k}{c}", {"a", f"b{c}"}])
    rows = list(s.execute("SELECT k, c, v, tags FROM ks.t WHERE k = 1"))
    assert [(r.c, r.v) for r in rows] == [(0, "v10"), (1, "v11"), (2, "v12"),
                                         (3, "v13")]
    assert rows[2].tags == {"a", "b2"}
    rows = list(s.execute("SELECT c FROM ks.t WHERE k = 2 AND c >= 2 "
                          "ORDER BY c DESC"))
    assert [r.c for r in rows] == [3, 2]
    assert s.execute("SELECT count(*) FROM ks.t").one().count == 12
    toks = list(s.execute("SELECT k, token(k) FROM ks.t"))
    assert len(toks) == 12
    # Rows come in token order, and token() is the driver's Murmur3.
    from cassandra.metadata import Murmur3Token
    import struct
    for r in toks:
        assert r[1] == Murmur3Token.from_key(struct.pack(">i", r.k)).value
    assert [r[1] for r in toks] == sorted(r[1] for r in toks)
    rows = list(s.execute("SELECT k, c FROM ks.t WHERE k IN (0, 2) AND c = 1"))
    assert [(r.k, r.c) for r in rows] == [(0, 1), (2, 1)]
    assert list(s.execute("SELECT * FROM ks.t WHERE k = 1 LIMIT 2"))[-1].c == 1


def test_token_of_values_pages_through_the_ring(data_session):
    """Apps page a table by hand with `token(k) > token(?)` (and tools
    with numbers): both must work, bound or literal, compound keys too."""
    s = data_session
    for k in range(20):
        s.execute("INSERT INTO ks.t (k, c, v) VALUES (%s, 0, 'x')", (k,))
    page = s.prepare("SELECT k, token(k) FROM ks.t WHERE token(k) > "
                     "token(?) LIMIT 3")
    assert [(c.name, c.type.typename) for c in page.column_metadata] == \
        [("k", "int")]
    rows = list(s.execute("SELECT k, token(k) FROM ks.t LIMIT 3"))
    while True:
        more = list(s.execute(page, [rows[-1].k]))
        if not more:
            break
        rows += more
    assert sorted(r.k for r in rows) == list(range(20))
    assert [r[1] for r in rows] == sorted(r[1] for r in rows)
    assert [r.k for r in s.execute(
        "SELECT k FROM ks.t WHERE token(k) >= token(5) AND "
        "token(k) <= TOKEN(5)")] == [5]
    t5 = next(r[1] for r in rows if r.k == 5)
    assert [r.k for r in s.execute(
        "SELECT k FROM ks.t WHERE token(k) = %s" % t5)] == [5]
    with pytest.raises(InvalidRequest, match="2 provided"):
        s.execute("SELECT k FROM ks.t WHERE token(k) > token(1, 2)")
    s.execute("CREATE TABLE ks.pair (a int, b text, v int, "
              "PRIMARY KEY ((a, b)))")
    for a, b in [(1, "x"), (1, "y"), (2, "x")]:
        s.execute("INSERT INTO ks.pair (a, b, v) VALUES (%s, %s, 0)", (a, b))
    by_pair = s.prepare("SELECT a, b FROM ks.pair WHERE token(a, b) = "
                        "token(?, ?)")
    assert [tuple(r) for r in s.execute(by_pair, [1, "y"])] == [(1, "y")]


def test_filtered_pages_hold_rows_until_the_end(data_session):
    """A page counts the rows it sends: counting the rows a filter drops
    cut pages short, some empty, and the driver stops at an empty page
    (2 of these 4 rows came back at fetch size 1)."""
    s = data_session
    hits = [(k, c) for k in (1, 6) for c in (1, 4)]
    for k in range(8):
        for c in range(6):
            s.execute("INSERT INTO ks.t (k, c, v) VALUES (%s, %s, %s)",
                      (k, c, "hit" if (k, c) in hits else "miss"))
    for fetch in (1, 2, 3, 5000):
        rows = list(s.execute(SimpleStatement(
            "SELECT k, c FROM ks.t WHERE v = 'hit' ALLOW FILTERING",
            fetch_size=fetch)))
        assert sorted((r.k, r.c) for r in rows) == hits, fetch


def test_aggregates_of_a_column(data_session):
    """count, min, max, sum and avg as Cassandra computes them: NULLs
    skipped, integer sums wrapping in the column's type, integer averages
    truncated, sum and avg of nothing 0, min and max of nothing NULL."""
    s = data_session
    s.execute("CREATE TABLE ks.nums (k int, c int, ti tinyint, i int, "
              "b bigint, d double, t text, PRIMARY KEY (k, c))")
    ins = s.prepare("INSERT INTO ks.nums (k, c, ti, i, b, d, t) VALUES "
                    "(1, ?, ?, ?, ?, ?, ?)")
    rows = [(0, 100, 2**31 - 1, 2**62, 1.5, "b"),
            (1, 100, 2**31 - 1, 2**62, -0.25, "a"),
            (2, -3, -5, 7, 2.0, "c"),
            (3, None, None, None, None, None)]
    for r in rows:
        s.execute(ins, r)
    got = s.execute("SELECT count(*), count(ti), sum(ti), avg(ti), sum(i), "
                    "avg(i), min(i), max(b), avg(b), sum(d), avg(d), "
                    "min(t), max(t), max(c) FROM ks.nums WHERE k = 1").one()
    assert tuple(got) == (4, 3, 197 - 256, 65, (2 * (2**31 - 1) - 5)
                          % 2**32 - 2**32, (2 * (2**31 - 1) - 5) // 3, -5,
                          2**62, (2**63 + 7) // 3, 3.25, 3.25 / 3, "a",
                          "c", 3)
    assert got._fields[:3] == ("count", "system_count_ti", "system_sum_ti")
    empty = s.execute("SELECT count(i), sum(i), avg(d), min(t) FROM ks.nums "
                      "WHERE k = 2").one()
    assert tuple(empty) == (0, 0, 0.0, None)
    assert s.execute("SELECT max(i) AS top FROM ks.nums WHERE k = 1 AND "
                     "c < 2").one().top == 2**31 - 1
    with pytest.raises(InvalidRequest, match="non-numeric"):
        s.execute("SELECT sum(t) FROM ks.nums")
    # other selections take the first row's values; with no row, NULL
    assert tuple(s.execute("SELECT k, c, max(i), t FROM ks.nums WHERE "
                           "k = 1 AND c > 0").one()) == (1, 1, 2**31 - 1, "a")
    assert tuple(s.execute("SELECT k, count(*) FROM ks.nums WHERE "
                           "k = 9").one()) == (None, 0)


def test_multi_column_slices_page_a_partition(data_session):
    """Apps page a wide partition by its clustering tuple: `(a, b) >
    (?, ?)`, bound or literal, both ends, both clustering directions."""
    s = data_session
    for order in ("ASC", "DESC"):
        s.execute(f"CREATE TABLE ks.w{order} (k int, a int, b int, v int, "
                  "PRIMARY KEY (k, a, b)) WITH CLUSTERING ORDER BY "
                  f"(a {order}, b {order})")
        for a in range(4):
            for b in range(3):
                s.execute(f"INSERT INTO ks.w{order} (k, a, b, v) VALUES "
                          "(1, %s, %s, 0)", (a, b))
        every = sorted((a, b) for a in range(4) for b in range(3))
        if order == "DESC":
            every.reverse()
        nxt = s.prepare(f"SELECT a, b FROM ks.w{order} WHERE k = 1 AND "
                        "(a, b) > (?, ?) LIMIT 4" if order == "ASC" else
                        f"SELECT a, b FROM ks.w{order} WHERE k = 1 AND "
                        "(a, b) < (?, ?) LIMIT 4")
        seen = [tuple(r) for r in s.execute(
            f"SELECT a, b FROM ks.w{order} WHERE k = 1 LIMIT 4")]
        while True:
            more = [tuple(r) for r in s.execute(nxt, seen[-1])]
            if not more:
                break
            seen += more
        assert seen == every, order
        got = [tuple(r) for r in s.execute(
            f"SELECT a, b FROM ks.w{order} WHERE k = 1 AND (a, b) >= (1, 2) "
            "AND (a, b) < (3, 1)")]
        want = [t for t in every if (1, 2) <= t < (3, 1)]
        assert got == want, order
        assert [tuple(r) for r in s.execute(
            f"SELECT a, b FROM ks.w{order} WHERE k = 1 AND (a, b) = "
            "(2, 2)")] == [(2, 2)]
    s.execute("CREATE TABLE ks.mixed (k int, a int, b int, PRIMARY KEY "
              "(k, a, b)) WITH CLUSTERING ORDER BY (a ASC, b DESC)")
    with pytest.raises(InvalidRequest, match="same clustering direction"):
        s.execute("SELECT * FROM ks.mixed WHERE k = 1 AND (a, b) > (1, 1)")
    with pytest.raises(InvalidRequest, match="PRIMARY KEY order"):
        s.execute("SELECT * FROM ks.wASC WHERE k = 1 AND (b, a) > (1, 1)")


def test_map_values_and_set_elements_in_selections(data_session):
    """Cassandra 4.0's element selection: m['k'] is the value at a key,
    s['e'] the element when the set holds it, NULL otherwise."""
    s = data_session
    s.execute("INSERT INTO ks.t (k, c, tags, m) VALUES (1, 1, {'a', 'b'}, "
              "{'x': 1, 'y': 2})")
    row = s.execute("SELECT m['y'], m['z'], tags['b'], tags['q'] AS none "
                    "FROM ks.t WHERE k = 1 AND c = 1").one()
    assert tuple(row) == (2, None, "b", None)
    with pytest.raises(InvalidRequest, match="only allowed on sets and maps"):
        s.execute("SELECT l[0] FROM ks.t WHERE k = 1")
    with pytest.raises(InvalidRequest, match="Slices"):
        s.execute("SELECT m['a'..'b'] FROM ks.t WHERE k = 1")


def test_time_conversions_and_as_blob_in_selections(data_session):
    """toTimestamp, toDate, toUnixTimestamp (dateOf, unixTimestampOf) of
    timeuuid, timestamp and date columns, and <type>AsBlob, as in
    Cassandra."""
    import datetime
    from cassandra.util import Date, uuid_from_time
    s = data_session
    s.execute("CREATE TABLE ks.ev (k int PRIMARY KEY, id timeuuid, "
              "at timestamp, day date, name text)")
    at = datetime.datetime(2024, 3, 5, 6, 7, 8, 250000)
    tu = uuid_from_time(at)
    s.execute("INSERT INTO ks.ev (k, id, at, day, name) VALUES "
              "(1, %s, %s, %s, 'x')", (tu, at, Date(datetime.date(1969, 12,
                                                                 31))))
    row = s.execute("SELECT toTimestamp(id), dateOf(id), toDate(id), "
                    "toUnixTimestamp(id), unixTimestampOf(id), toDate(at), "
                    "toUnixTimestamp(at), toTimestamp(day), "
                    "toUnixTimestamp(day), textAsBlob(name), "
                    "varcharAsBlob(name), intAsBlob(k) FROM ks.ev "
                    "WHERE k = 1").one()
    ms = int((at - datetime.datetime(1970, 1, 1)).total_seconds() * 1000)
    assert tuple(row) == (at, at, Date(datetime.date(2024, 3, 5)), ms, ms,
                          Date(datetime.date(2024, 3, 5)), ms,
                          datetime.datetime(1969, 12, 31), -86400000, b"x",
                          b"x", b"\x00\x00\x00\x01")
    assert row._fields[0] == "system_totimestamp_id"
    with pytest.raises(InvalidRequest, match="Type error"):
        s.execute("SELECT dateOf(at) FROM ks.ev")
    with pytest.raises(InvalidRequest, match="Type error"):
        s.execute("SELECT intAsBlob(name) FROM ks.ev")


def test_now_in_where_is_the_time_of_the_request(data_session):
    """`ts < toTimestamp(now())` compared with 1970 (the functions had no
    clock when a SELECT was planned) and silently matched nothing."""
    s = data_session
    s.execute("CREATE TABLE ks.tl (k int, ts timestamp, id timeuuid, "
              "PRIMARY KEY (k, ts))")
    s.execute("INSERT INTO ks.tl (k, ts, id) VALUES (1, '2020-01-01', "
              "now())")
    s.execute("INSERT INTO ks.tl (k, ts, id) VALUES (1, '2999-01-01', "
              "now())")
    for bound in ("toTimestamp(now())", "currentTimestamp()"):
        got = [r.ts.year for r in s.execute(
            f"SELECT ts FROM ks.tl WHERE k = 1 AND ts < {bound}")]
        assert got == [2020], bound


def test_updates_deletes_ttl_and_collections(data_session):
    s = data_session
    s.execute("INSERT INTO ks.t (k, c, v, l, m) VALUES (0, 0, 'a', [1, 2], "
              "{'x': 1})")
    s.execute("UPDATE ks.t USING TTL 100 SET v = 'b', l = [0] + l, "
              "l = l + [3], m['y'] = 2, tags = {'t'}, s = 7 "
              "WHERE k = 0 AND c = 0")
    r = s.execute("SELECT v, ttl(v), writetime(v), l, m, tags, s FROM ks.t "
                  "WHERE k = 0 AND c = 0").one()
    assert (r.v, r.l, r.m, r.tags, r.s) == ("b", [0, 1, 2, 3],
                                            {"x": 1, "y": 2}, {"t"}, 7)
    assert 95 <= r.ttl_v <= 100
    assert r.writetime_v > 1_600_000_000_000_000
    s.execute("UPDATE ks.t SET m = m - {'x'}, tags = tags + {'u'} "
              "WHERE k = 0 AND c = 0")
    r = s.execute("SELECT m, tags FROM ks.t WHERE k = 0 AND c = 0").one()
    assert (r.m, r.tags) == ({"y": 2}, {"t", "u"})
    for c in range(1, 5):
        s.execute("INSERT INTO ks.t (k, c, v) VALUES (0, %s, 'x')", [c])
    s.execute("DELETE FROM ks.t WHERE k = 0 AND c > 2")
    s.execute("DELETE v FROM ks.t WHERE k = 0 AND c = 1")
    rows = list(s.execute("SELECT c, v, s FROM ks.t WHERE k = 0"))
    assert [(r.c, r.v) for r in rows] == [(0, "b"), (1, None), (2, "x")]
    assert all(r.s == 7 for r in rows)  # the static is on every row
    # A null writes a tombstone; an unset value writes nothing.
    from cassandra.query import UNSET_VALUE
    upd = s.prepare("UPDATE ks.t SET v = ? WHERE k = 0 AND c = ?")
    s.execute(upd, [UNSET_VALUE, 2])
    assert s.execute("SELECT v FROM ks.t WHERE k = 0 AND c = 2").one().v == "x"
    s.execute(upd, [None, 2])
    assert s.execute("SELECT v FROM ks.t WHERE k = 0 AND c = 2").one().v is None
    s.execute("DELETE FROM ks.t WHERE k = 0")
    assert list(s.execute("SELECT * FROM ks.t WHERE k = 0")) == []


def test_read_and_write_errors_name_the_problem(data_session):
    s = data_session
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        s.execute("SELECT * FROM ks.t WHERE v = 'x'")
    s.execute("INSERT INTO ks.t (k, c, v) VALUES (5, 1, 'hit')")
    assert [r.c for r in s.execute("SELECT c FROM ks.t WHERE v = 'hit' "
                                   "ALLOW FILTERING")] == [1]
    with pytest.raises(InvalidRequest, match="Some clustering keys are "
                                             "missing: c"):
        s.execute("INSERT INTO ks.t (k, v) VALUES (1, 'x')")
    with pytest.raises(InvalidRequest, match="Undefined column name nope"):
        s.execute("SELECT nope FROM ks.t WHERE k = 1")
    with pytest.raises(InvalidRequest, match="Setting a list element by "
                                             "index"):
        s.execute("UPDATE ks.t SET l[0] = 1 WHERE k = 1 AND c = 1")
    with pytest.raises(InvalidRequest, match="Invalid STRING constant"):
        s.execute("INSERT INTO ks.t (k, c) VALUES ('one', 1)")
    with pytest.raises(InvalidRequest, match="ORDER BY is only supported"):
        s.execute("SELECT * FROM ks.t ORDER BY c DESC")


def test_batches_from_the_driver_and_from_cql_text(data_session):
    from cassandra.query import BatchStatement, BatchType
    s = data_session
    ins = s.prepare("INSERT INTO ks.t (k, c, v) VALUES (?, ?, ?)")
    b = BatchStatement()
    for c in range(3):
        b.add(ins, [7, c, f"p{c}"])
    b.add(SimpleStatement("UPDATE ks.t SET v = %s WHERE k = %s AND c = %s"),
          ["plain", 7, 9])
    b.add("DELETE FROM ks.t WHERE k = 7 AND c = 1")
    s.execute(b)
    rows = list(s.execute("SELECT c, v, writetime(v) FROM ks.t WHERE k = 7"))
    assert [(r.c, r.v) for r in rows] == [(0, "p0"), (2, "p2"), (9, "plain")]
    # Every write of a batch carries the same timestamp.
    assert len({r.writetime_v for r in rows}) == 1

    # A text batch: markers number across the whole text; USING TIMESTAMP
    # applies to every statement.
    text = s.prepare("BEGIN UNLOGGED BATCH USING TIMESTAMP 1234 "
                     "INSERT INTO ks.t (k, c, v) VALUES (?, 0, ?); "
                     "UPDATE ks.t SET v = ? WHERE k = 8 AND c = 1; "
                     "APPLY BATCH")
    s.execute(text, [8, "a", "b"])
    rows = list(s.execute("SELECT c, v, writetime(v) FROM ks.t WHERE k = 8"))
    assert [(r.c, r.v, r.writetime_v) for r in rows] == [
        (0, "a", 1234), (1, "b", 1234)]

    # A prepared statement from another keyspace keeps its own keyspace.
    s.execute("USE ks")
    local = s.prepare("INSERT INTO t (k, c, v) VALUES (?, ?, ?)")
    s.execute("CREATE KEYSPACE other WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("USE other")
    b = BatchStatement(batch_type=BatchType.UNLOGGED)
    b.add(local, [9, 1, "kept"])
    s.execute(b)
    assert s.execute("SELECT v FROM ks.t WHERE k = 9").one().v == "kept"

    with pytest.raises(SyntaxException, match="expecting K_APPLY"):
        s.execute("BEGIN BATCH SELECT * FROM ks.t; APPLY BATCH")
    with pytest.raises(InvalidRequest, match="only UPDATE, INSERT and DELETE"):
        b = BatchStatement()
        b.add("SELECT * FROM ks.t")
        s.execute(b)
    with pytest.raises(InvalidRequest, match="Cannot include non-counter "
                       "statement in a counter batch"):
        b = BatchStatement(batch_type=BatchType.COUNTER)
        b.add("UPDATE ks.t SET v = 'x' WHERE k = 1 AND c = 1")
        s.execute(b)
    with pytest.raises(InvalidRequest, match="unconfigured table nope"):
        b = BatchStatement()
        b.add(ins, [10, 0, "ok"])
        b.add("INSERT INTO ks.nope (k) VALUES (1)")
        s.execute(b)
    # A rejected batch applies none of its writes.
    assert list(s.execute("SELECT * FROM ks.t WHERE k = 10")) == []
    with pytest.raises(Unauthorized):
        s.execute("BEGIN BATCH INSERT INTO system_schema.tables "
                  "(keyspace_name) VALUES ('x'); APPLY BATCH")


def test_counter_batches_and_increments_from_the_driver(data_session):
    from cassandra.query import BatchStatement, BatchType
    s = data_session
    s.execute("CREATE TABLE ks.hits (k int, page text, n counter, "
              "PRIMARY KEY (k, page))")
    inc = s.prepare("UPDATE ks.hits SET n = n + ? WHERE k = ? AND page = ?")
    assert inc.column_metadata[0].type.typename == "counter"
    b = BatchStatement(batch_type=BatchType.COUNTER)
    b.add(inc, [2, 1, "a"])
    b.add(inc, [3, 1, "b"])
    b.add(SimpleStatement("UPDATE ks.hits SET n = n - 1 WHERE k = 1 AND "
                          "page = 'a'"))
    s.execute(b)
    s.execute(inc, [10, 1, "b"])
    rows = s.execute("SELECT page, n FROM ks.hits WHERE k = 1")
    assert [(r.page, r.n) for r in rows] == [("a", 1), ("b", 13)]
    assert rows.column_types[1].typename == "counter"
    with pytest.raises(InvalidRequest, match="Cannot include a counter "
                       "statement in a logged batch"):
        b = BatchStatement(batch_type=BatchType.LOGGED)
        b.add(inc, [1, 1, "a"])
        s.execute(b)


def test_paging_resumes_where_the_page_stopped(data_session):
    s = data_session
    ins = s.prepare("INSERT INTO ks.t (k, c, v) VALUES (?, ?, ?)")
    for k in range(25):
        for c in range(10):
            s.execute(ins, [k, c, f"{k}.{c}"])
    for c in range(250):
        s.execute(ins, [100, c, "wide"])

    def fetch(q, size, params=None):
        st = SimpleStatement(q, fetch_size=size)
        res = s.execute(st, params)
        pages = [len(res.current_rows)]
        rows = list(res.current_rows)
        while res.has_more_pages:
            res.fetch_next_page()
            pages.append(len(res.current_rows))
            rows.extend(res.current_rows)
        return rows, pages

    # A whole-table scan: 500 rows in pages of 100, each row once, in the
    # same order as one unpaged read.
    everything = list(s.execute(SimpleStatement("SELECT k, c FROM ks.t",
                                                fetch_size=None)))
    rows, pages = fetch("SELECT k, c FROM ks.t", 100)
    assert pages[:5] == [100] * 5 and sum(pages) == 500
    assert [(r.k, r.c) for r in rows] == [(r.k, r.c) for r in everything]

    # One wide partition, forwards and backwards.
    rows, pages = fetch("SELECT c FROM ks.t WHERE k = 100", 100)
    assert [r.c for r in rows] == list(range(250))
    assert pages[:3] == [100, 100, 50]
    rows, _ = fetch("SELECT c FROM ks.t WHERE k = 100 ORDER BY c DESC", 100)
    assert [r.c for r in rows] == list(range(249, -1, -1))

    # LIMIT and PER PARTITION LIMIT hold across pages.
    rows, pages = fetch("SELECT k, c FROM ks.t LIMIT 150", 100)
    assert len(rows) == 150 and pages == [100, 50]
    rows, _ = fetch("SELECT k, c FROM ks.t PER PARTITION LIMIT 3", 7)
    assert len(rows) == 26 * 3
    assert all(r.c < 3 for r in rows)

    # IN lists (partitions in the key's order) and filtering page too.
    rows, _ = fetch("SELECT k, c FROM ks.t WHERE k IN (3, 100, 4)", 16)
    assert [(r.k, r.c) for r in rows] == (
        [(3, c) for c in range(10)] + [(4, c) for c in range(10)] +
        [(100, c) for c in range(250)])
    rows, _ = fetch("SELECT k, c FROM ks.t WHERE v = 'wide' ALLOW FILTERING",
                    60)
    assert sorted(r.c for r in rows) == list(range(250))

    # Rows written between pages: behind the position they stay unseen,
    # ahead of it they show up; nothing is repeated.
    res = s.execute(SimpleStatement("SELECT c FROM ks.t WHERE k = 100",
                                    fetch_size=100))
    first = [r.c for r in res.current_rows]
    s.execute("DELETE FROM ks.t WHERE k = 100 AND c = 5")
    s.execute("DELETE FROM ks.t WHERE k = 100 AND c = 200")
    res.fetch_next_page()
    rest = [r.c for r in res.current_rows]
    while res.has_more_pages:
        res.fetch_next_page()
        rest.extend(r.c for r in res.current_rows)
    assert first == list(range(100))
    assert rest == [c for c in range(100, 250) if c != 200]

    # The paging state works from a fresh statement (any node could resume).
    st = SimpleStatement("SELECT k, c FROM ks.t", fetch_size=50)
    state = s.execute(st).paging_state
    again = s.execute(st, paging_state=state)
    assert [(r.k, r.c) for r in again.current_rows] == \
        [(r.k, r.c) for r in everything[50:100]]
    with pytest.raises(InvalidRequest, match="paging state"):
        s.execute(st, paging_state=b"\xc1garbage")

    # count(*) is one row whatever the fetch size.
    assert s.execute(SimpleStatement("SELECT count(*) FROM ks.t",
                                     fetch_size=10)).one().count == 498


def test_in_on_a_clustering_column(data_session):
    s = data_session
    s.execute("CREATE TABLE ks.w (k int, a int, b text, v int, "
              "PRIMARY KEY (k, a, b)) WITH CLUSTERING ORDER BY (a ASC, b DESC)")
    ins = s.prepare("INSERT INTO ks.w (k, a, b, v) VALUES (?, ?, ?, ?)")
    for a in range(4):
        for b in "xyz":
            s.execute(ins, [1, a, b, a * 10])
    rows = s.execute("SELECT a, b FROM ks.w WHERE k = 1 AND a IN (3, 1, 3)")
    # Clustering order, each value once.
    assert [(r.a, r.b) for r in rows] == [(1, "z"), (1, "y"), (1, "x"),
                                          (3, "z"), (3, "y"), (3, "x")]
    rows = s.execute("SELECT b FROM ks.w WHERE k = 1 AND a = 2 AND "
                     "b IN ('x', 'z', 'q')")
    assert [r.b for r in rows] == ["z", "x"]  # b is DESC
    rows = s.execute("SELECT a, b FROM ks.w WHERE k = 1 AND a IN (0, 2) "
                     "ORDER BY a DESC")
    assert [(r.a, r.b) for r in rows] == [(2, "x"), (2, "y"), (2, "z"),
                                          (0, "x"), (0, "y"), (0, "z")]
    sel = s.prepare("SELECT a FROM ks.w WHERE k = ? AND a IN ?")
    assert [r.a for r in s.execute(sel, [1, [2, 0]])] == [0, 0, 0, 2, 2, 2]
    assert list(s.execute(sel, [1, []])) == []
    st = SimpleStatement("SELECT a, b FROM ks.w WHERE k = 1 AND a IN (1, 2)",
                         fetch_size=4)
    assert [(r.a, r.b) for r in s.execute(st)] == [
        (1, "z"), (1, "y"), (1, "x"), (2, "z"), (2, "y"), (2, "x")]
    with pytest.raises(InvalidRequest, match="not supported"):
        s.execute("SELECT * FROM ks.w WHERE k = 1 AND a IN (1, 2) AND b = 'x'")


def test_alter_table_add_and_drop_on_a_table_with_data(data_session,
                                                       tmp_path):
    """ALTER TABLE ADD / DROP on a table that already holds rows: old rows
    read the new column as null, it can be written at once, a dropped
    column never comes back (not even re-added under its name), errors
    carry Cassandra's text and exception classes, the driver's metadata
    follows, and a SELECT * prepared before the ALTER returns rows that
    match their metadata (the server evicts it; the driver re-prepares)."""
    s = data_session
    cluster = s.cluster
    ins = s.prepare("INSERT INTO ks.t (k, c, v) VALUES (?, ?, ?)")
    for c in range(3):
        s.execute(ins, [1, c, f"old{c}"])
    star = s.prepare("SELECT * FROM ks.t WHERE k = ?")
    before = s.execute(star, [1])
    assert "extra" not in before.column_names

    s.execute("ALTER TABLE ks.t ADD (extra text, n int)")
    s.execute("ALTER TABLE ks.t ADD st2 int static")
    cols = cluster.metadata.keyspaces["ks"].tables["t"].columns
    assert cols["extra"].cql_type == "text" and cols["n"].cql_type == "int"
    assert cols["st2"].is_static
    rows = list(s.execute("SELECT c, v, extra, n FROM ks.t WHERE k = 1"))
    assert [(r.c, r.v, r.extra, r.n) for r in rows] == [
        (0, "old0", None, None), (1, "old1", None, None),
        (2, "old2", None, None)]
    s.execute("UPDATE ks.t SET extra = 'new', n = 7 WHERE k = 1 AND c = 1")
    s.execute("UPDATE ks.t SET st2 = 5 WHERE k = 1")
    put = s.prepare("INSERT INTO ks.t (k, c, v, extra) VALUES (?, ?, ?, ?)")
    s.execute(put, [2, 0, "fresh", "e"])
    assert s.execute("SELECT extra, n, st2 FROM ks.t WHERE k = 1 AND c = 1"
                     ).one() == ("new", 7, 5)
    assert s.execute("SELECT extra FROM ks.t WHERE k = 2").one().extra == "e"
    # The statement prepared before the ALTER: rows and metadata agree.
    after = s.execute(star, [1])
    assert "extra" in after.column_names
    assert "prepared statements on ks.t evicted" in \
        (tmp_path / "server.log").read_text()
    got = {r.c: (r.v, r.extra, r.n) for r in after}
    assert got == {0: ("old0", None, None), 1: ("old1", "new", 7),
                   2: ("old2", None, None)}

    s.execute("ALTER TABLE ks.t DROP v")
    s.execute("ALTER TABLE ks.t DROP (n, st2)")
    cols = cluster.metadata.keyspaces["ks"].tables["t"].columns
    assert "v" not in cols and "n" not in cols and "extra" in cols
    dropped = {r.column_name: r for r in s.execute(
        "SELECT * FROM system_schema.dropped_columns WHERE "
        "keyspace_name = 'ks' AND table_name = 't'")}
    assert set(dropped) == {"v", "n", "st2"}
    assert dropped["v"].type == "text" and dropped["st2"].kind == "static"
    assert dropped["v"].dropped_time is not None
    rows = list(s.execute(star, [1]))
    assert "v" not in rows[0]._fields
    assert [(r.c, r.extra) for r in rows] == [(0, None), (1, "new"),
                                             (2, None)]
    with pytest.raises(InvalidRequest, match="Undefined column name v"):
        s.execute("SELECT v FROM ks.t WHERE k = 1")
    # Re-added under the same name: the old cells stay gone.
    s.execute("ALTER TABLE ks.t ADD v text")
    rows = list(s.execute("SELECT c, v FROM ks.t WHERE k = 1"))
    assert [(r.c, r.v) for r in rows] == [(0, None), (1, None), (2, None)]
    s.execute("INSERT INTO ks.t (k, c, v) VALUES (1, 0, 'again')")
    assert s.execute("SELECT v FROM ks.t WHERE k = 1 AND c = 0").one().v \
        == "again"
    assert "v" in cluster.metadata.keyspaces["ks"].tables["t"].columns
    desc = s.execute("DESCRIBE TABLE ks.t").one().create_statement
    assert "extra text" in desc and "v text" in desc and " n int" not in desc

    # Errors, with Cassandra's wording and the driver's classes.
    with pytest.raises(InvalidRequest,
                       match="Column with name 'extra' already exists"):
        s.execute("ALTER TABLE ks.t ADD extra int")
    with pytest.raises(InvalidRequest,
                       match="Cannot drop PRIMARY KEY column c"):
        s.execute("ALTER TABLE ks.t DROP c")
    with pytest.raises(InvalidRequest, match="Column nope was not found in "
                                             "table 'ks.t'"):
        s.execute("ALTER TABLE ks.t DROP nope")
    with pytest.raises(InvalidRequest, match="Table 'ks.nope' doesn't exist"):
        s.execute("ALTER TABLE ks.nope ADD x int")
    with pytest.raises(ConfigurationException, match="Cannot have a counter "
                                                     "column"):
        s.execute("ALTER TABLE ks.t ADD hits counter")
    with pytest.raises(InvalidRequest, match="Cannot re-add previously "
                                             "dropped column 'n'"):
        s.execute("ALTER TABLE ks.t ADD n text")
    s.execute("CREATE TABLE ks.flat (k int PRIMARY KEY)")
    with pytest.raises(InvalidRequest, match="Static columns are only "
                                             "useful"):
        s.execute("ALTER TABLE ks.flat ADD s int static")
    # ALTER ... WITH keeps working next to the column changes.
    s.execute("ALTER TABLE ks.t WITH comment = 'altered' AND "
              "gc_grace_seconds = 3600")
    t = cluster.metadata.keyspaces["ks"].tables["t"]
    assert t.options["comment"] == "altered"
    assert t.options["gc_grace_seconds"] == 3600
    assert cluster.control_connection.wait_for_schema_agreement()


def test_tracing_is_refused_with_a_clear_error_not_dropped(data_session):
    # cqlsh's TRACING ON sets the tracing flag on every statement; Cassini
    # keeps no trace sessions, so the statement is refused (not run) with
    # an Invalid error saying so, instead of running untraced in silence.
    s = data_session
    for stmt in ["SELECT * FROM ks.t WHERE k = 1",
                 "INSERT INTO ks.t (k, c, v) VALUES (7, 1, 'traced')",
                 s.prepare("SELECT v FROM ks.t WHERE k = ?").bind([1])]:
        with pytest.raises(InvalidRequest,
                           match="Request tracing is not supported"):
            s.execute(stmt, trace=True)
    assert list(s.execute("SELECT v FROM ks.t WHERE k = 7")) == []
    # The connection stays usable, untraced statements run.
    s.execute("INSERT INTO ks.t (k, c, v) VALUES (7, 1, 'plain')")
    assert s.execute("SELECT v FROM ks.t WHERE k = 7").one().v == "plain"


def test_count_without_partition_key_warns_as_cassandra_does(data_session):
    # cqlsh prints a server's client warnings under the result; Cassandra
    # warns on an aggregate over a range read, not on one partition.
    s = data_session
    for k in range(3):
        s.execute("INSERT INTO ks.t (k, c, v) VALUES (%s, 1, 'x')", [k])
    rs = s.execute("SELECT count(*) FROM ks.t")
    assert rs.one().count == 3
    assert rs.response_future.warnings == [
        "Aggregation query used without partition key"]
    # a token() relation restricts the partition key
    # (StatementRestrictions.hasPartitionKeyRestrictions: a non-empty
    # TokenRestriction), so Cassandra does not warn
    rs = s.execute("SELECT count(*) FROM ks.t WHERE token(k) > 0")
    assert not rs.response_future.warnings
    rs = s.execute("SELECT count(*) FROM ks.t WHERE k IN (1, 2)")
    assert rs.one().count == 2
    assert rs.response_future.warnings == [
        "Aggregation query used on multiple partition keys (IN "
        "restriction)"]
    rs = s.execute("SELECT k, count(*) FROM ks.t GROUP BY k")
    assert len(list(rs)) == 3
    assert rs.response_future.warnings == [
        "Aggregation query used without partition key"]
    rs = s.execute("SELECT count(*) FROM ks.t WHERE k = 1")
    assert rs.one().count == 1 and not rs.response_future.warnings
    rs = s.execute("SELECT * FROM ks.t")
    assert len(list(rs)) == 3 and not rs.response_future.warnings


def test_prepared_statements_run_many_times_with_their_own_binds(
        data_session):
    """A prepared statement keeps its parsed form across EXECUTEs (DML and
    SELECT): every execution must still use its own bound values, a
    prepared batch too; prepared DDL is parsed each time (it may evict
    itself), and a dropped table's prepared statements stop working."""
    s = data_session
    ins = s.prepare("INSERT INTO ks.t (k, c, v) VALUES (?, ?, ?)")
    sel = s.prepare("SELECT c, v FROM ks.t WHERE k = ? AND c = ?")
    upd = s.prepare("UPDATE ks.t SET v = ? WHERE k = ? AND c = ?")
    dele = s.prepare("DELETE FROM ks.t WHERE k = ? AND c = ?")
    for i in range(60):
        s.execute(ins, [100, i, f"v{i}"])
    for i in range(0, 60, 2):
        s.execute(upd, [f"u{i}", 100, i])
    for i in range(0, 60, 3):
        s.execute(dele, [100, i])
    for i in range(60):
        rows = s.execute(sel, [100, i]).all()
        if i % 3 == 0:
            assert rows == []
        else:
            assert [(r.c, r.v) for r in rows] == \
                [(i, f"u{i}" if i % 2 == 0 else f"v{i}")]
    batch = s.prepare("BEGIN BATCH INSERT INTO ks.t (k, c, v) VALUES (?, ?, ?); "
                      "INSERT INTO ks.t (k, c, v) VALUES (?, ?, ?); "
                      "APPLY BATCH")
    for i in range(5):
        s.execute(batch, [200 + i, 1, "a", 300 + i, 2, "b"])
    for i in range(5):
        assert s.execute(sel, [200 + i, 1]).one().v == "a"
        assert s.execute(sel, [300 + i, 2]).one().v == "b"
    ddl = s.prepare("CREATE TABLE IF NOT EXISTS ks.pp (k int PRIMARY KEY, "
                    "v int)")
    s.execute(ddl)
    s.execute(ddl)
    ins_pp = s.prepare("INSERT INTO ks.pp (k, v) VALUES (?, ?)")
    s.execute(ins_pp, [1, 1])
    s.execute("DROP TABLE ks.pp")
    with pytest.raises(InvalidRequest):
        s.execute(ins_pp, [2, 2])
    s.execute(ddl)
    s.execute(ins_pp, [3, 3])
    assert [tuple(r) for r in s.execute("SELECT k, v FROM ks.pp")] == [(3, 3)]


def test_big_statements_deep_nesting_and_short_errors(data_session):
    """Statements above 1 MiB run (up to the frame limit, as Cassandra);
    input nested deeper than the parser's limit is a syntax error, not a
    crash; a huge bad statement answers a short message."""
    s = data_session
    s.execute("CREATE TABLE ks.big (k int PRIMARY KEY, b blob)")
    blob = "ab" * (3 << 20)
    s.execute(f"INSERT INTO ks.big (k, b) VALUES (1, 0x{blob})")
    row = s.execute("SELECT b FROM ks.big WHERE k = 1").one()
    assert row.b == bytes.fromhex(blob)
    for opener in ("[", "(", "{", "intAsBlob("):
        with pytest.raises(SyntaxException) as e:
            s.execute("INSERT INTO ks.big (k, b) VALUES (2, " +
                      opener * 50000)
        assert "nested more than 64 levels deep" in str(e.value)
    with pytest.raises(SyntaxException) as e:
        s.execute("CREATE TABLE ks.deep (k int PRIMARY KEY, v " +
                  "frozen<list<" * 20000)
    assert "nested more than" in str(e.value)
    with pytest.raises(SyntaxException) as e:
        s.execute("SELECT " + "x" * (2 << 20) + " FORM ks.big")
    assert len(str(e.value)) < 1024
    # what the limit allows still parses
    nested = "[" * 60 + "]" * 60
    with pytest.raises(InvalidRequest):
        s.execute(f"INSERT INTO ks.big (k, b) VALUES (3, {nested})")


def test_markers_in_calls_take_the_functions_argument_types(data_session):
    """FunctionCall and TypeCast type their markers: arg0(system.f) of
    the resolved overload's argument type, (type)? of the hint's."""
    s = data_session
    s.execute("CREATE TABLE ks.fn (k int PRIMARY KEY, b blob, ts timestamp, "
              "id timeuuid)")
    p = s.prepare("INSERT INTO ks.fn (k, b, ts, id) VALUES ((int)?, "
                  "intAsBlob(?), toTimestamp((date)?), minTimeuuid(?))")
    assert [(c.name, c.type.typename) for c in p.column_metadata] == [
        ("(int)?", "int"), ("arg0(system.intasblob)", "int"),
        ("(date)?", "date"), ("arg0(system.mintimeuuid)", "timestamp")]
    p = s.prepare("SELECT k FROM ks.fn WHERE k = blobAsInt(?)")
    assert [(c.name, c.type.typename) for c in p.column_metadata] == [
        ("arg0(system.blobasint)", "blob")]
    p = s.prepare("UPDATE ks.fn SET b = textAsBlob(blobAsText(?)) "
                  "WHERE k = 1")
    assert [(c.name, c.type.typename) for c in p.column_metadata] == [
        ("arg0(system.blobastext)", "blob")]
    # a call that does not resolve fails the PREPARE, as in Cassandra
    with pytest.raises(InvalidRequest, match="Ambiguous call to function "
                       "system.totimestamp"):
        s.prepare("INSERT INTO ks.fn (k, ts) VALUES (1, toTimestamp(?))")
    with pytest.raises(InvalidRequest, match="Unknown function nope called"):
        s.prepare("INSERT INTO ks.fn (k, b) VALUES (1, nope(?))")


def test_functions_in_prepared_selections(data_session):
    """A selection of calls prepares (its metadata is Cassandra's) and
    computes per row, and now() per query."""
    s = data_session
    s.execute("CREATE TABLE ks.sel (k int PRIMARY KEY, b blob)")
    s.execute("INSERT INTO ks.sel (k, b) VALUES (1, 0x00000007)")
    p = s.prepare("SELECT blobAsInt(b), now(), uuid(), CAST(k AS text) "
                  "FROM ks.sel WHERE k = ?")
    assert [(c[2], c[3].typename) for c in p.result_metadata] == [
        ("system.blobasint(b)", "int"), ("system.now()", "timeuuid"),
        ("system.uuid()", "uuid"), ("cast(k as text)", "varchar")]
    row = s.execute(p, [1]).one()
    assert row[0] == 7 and row[1].version == 1 and row[2].version == 4
    assert row[3] == "1"


def test_indexed_queries_walk_ranges_in_token_order(data_session):
    """An indexed (filtered) scan reads several vnode ranges at once
    (node/cql_data.c's parallel walk); rows still come in token order,
    pages and LIMIT hold, and every row is checked against the data."""
    s = data_session
    s.execute("ALTER TABLE ks.t ADD n int")
    s.execute("CREATE INDEX ON ks.t (n)")
    ins = s.prepare("INSERT INTO ks.t (k, c, n) VALUES (?, ?, ?)")
    for k in range(60):
        for c in range(3):
            s.execute(ins, [k, c, (k + c) % 4])
    every = [(r.k, r.c) for r in s.execute(
        SimpleStatement("SELECT k, c, n FROM ks.t", fetch_size=None))
        if r.n == 1]
    assert len(every) == 45
    for fetch in (None, 1, 4, 50):
        got = [(r.k, r.c) for r in s.execute(SimpleStatement(
            "SELECT k, c FROM ks.t WHERE n = 1", fetch_size=fetch))]
        assert got == every, fetch
    got = [(r.k, r.c) for r in s.execute(SimpleStatement(
        "SELECT k, c FROM ks.t WHERE n = 1 LIMIT 7", fetch_size=3))]
    assert got == every[:7]
    s.execute("UPDATE ks.t SET n = 2 WHERE k = %s AND c = %s", every[0])
    s.execute("DELETE FROM ks.t WHERE k = %s", [every[1][0]])
    left = [kc for kc in every[1:] if kc[0] != every[1][0]]
    got = [(r.k, r.c) for r in s.execute(SimpleStatement(
        "SELECT k, c FROM ks.t WHERE n = 1", fetch_size=2))]
    assert got == left


def test_non_frozen_user_type_columns_prepare(session):
    """A non-frozen user type column is accepted; its field markers are
    named a.f and typed as the field, the whole value's marker as the
    type; PREPARE runs Cassandra's field checks."""
    cluster, s = session
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TYPE ks.addr (street text, zip int)")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, a addr, "
              "f frozen<addr>)")
    r = s.execute("SELECT type FROM system_schema.columns WHERE "
                  "keyspace_name = 'ks' AND table_name = 't' AND "
                  "column_name = 'a'").one()
    assert r.type == "addr"
    ps = s.prepare("UPDATE ks.t SET a.zip = ?, a.street = ? WHERE k = ?")
    assert [(c.name, c.type.typename) for c in ps.column_metadata] == [
        ("a.zip", "int"), ("a.street", "varchar"), ("k", "int")]
    ps = s.prepare("INSERT INTO ks.t (k, a) VALUES (?, ?)")
    assert ps.column_metadata[1].type.typename == "addr"
    assert list(ps.column_metadata[1].type.fieldnames) == ["street", "zip"]
    for q, msg in [
        ("UPDATE ks.t SET a.nope = ? WHERE k = 1",
         "UDT column a does not have a field named nope"),
        ("UPDATE ks.t SET f.zip = 1 WHERE k = 1",
         "Invalid operation \\(f.zip = 1\\) for frozen UDT column f"),
        ("DELETE f.zip FROM ks.t WHERE k = 1",
         "Frozen UDT column f does not support field deletion"),
        ("SELECT ttl(a.nope) FROM ks.t",
         "a of type addr has no field nope"),
        ("UPDATE ks.t SET f = null WHERE k = 1 IF a.nope = ?",
         "Unknown field nope for column a"),
    ]:
        with pytest.raises(InvalidRequest, match=msg):
            s.prepare(q)
    # Cassandra 5.0: ttl(a) is a list, one element per field
    ps = s.prepare("SELECT ttl(a), ttl(a.zip) FROM ks.t")
    assert [(c[2], c[3].cql_parameterized_type())
            for c in ps.result_metadata] == [("ttl(a)", "list<int>"),
                                             ("ttl(a.zip)", "int")]


def test_contains_filters_frozen_collections(data_session):
    """CONTAINS / CONTAINS KEY on frozen collections (one cell, decoded):
    list and set elements, map values and keys, in regular, clustering and
    partition key columns, paged; null and empty values never match."""
    s = data_session
    s.execute("CREATE TABLE ks.f (k int PRIMARY KEY, fl frozen<list<int>>, "
              "fs frozen<set<text>>, fm frozen<map<text, int>>)")
    s.execute("INSERT INTO ks.f (k, fl, fs, fm) VALUES "
              "(1, [1, 2], {'a', 'b'}, {'x': 1, 'y': 2})")
    s.execute("INSERT INTO ks.f (k, fl, fs, fm) VALUES (2, [3], {'c'}, "
              "{'z': 3})")
    s.execute("INSERT INTO ks.f (k, fl, fs, fm) VALUES (3, [], {}, {})")
    s.execute("INSERT INTO ks.f (k) VALUES (4)")
    for k in range(10, 40):
        s.execute("INSERT INTO ks.f (k, fl) VALUES (%s, [%s, 2])", [k, k])

    def keys(where, size=None, params=None):
        st = SimpleStatement("SELECT k FROM ks.f WHERE " + where +
                             " ALLOW FILTERING", fetch_size=size)
        res = s.execute(st, params)
        got = [r.k for r in res.current_rows]
        while res.has_more_pages:
            res.fetch_next_page()
            got.extend(r.k for r in res.current_rows)
        return sorted(got)

    assert keys("fl CONTAINS 3") == [2]
    assert keys("fl CONTAINS 2", size=7) == [1] + list(range(10, 40))
    assert keys("fl CONTAINS 9") == []
    assert keys("fs CONTAINS 'b'") == [1]
    assert keys("fs CONTAINS %s", params=["c"]) == [2]
    assert keys("fm CONTAINS 3") == [2]
    assert keys("fm CONTAINS KEY 'y'") == [1]
    assert keys("fm CONTAINS KEY 'q'") == []
    assert keys("fm CONTAINS KEY 'x' AND fm CONTAINS 2") == [1]
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        s.execute("SELECT k FROM ks.f WHERE fl CONTAINS 2")
    with pytest.raises(InvalidRequest,
                       match="Cannot use CONTAINS KEY on non-map column fl"):
        s.execute("SELECT k FROM ks.f WHERE fl CONTAINS KEY 2 "
                  "ALLOW FILTERING")

    s.execute("CREATE TABLE ks.g (p frozen<list<int>>, "
              "c frozen<map<text, int>>, v int, PRIMARY KEY (p, c))")
    s.execute("INSERT INTO ks.g (p, c, v) VALUES ([1, 2], {'a': 1}, 1)")
    s.execute("INSERT INTO ks.g (p, c, v) VALUES ([1, 2], {'b': 2}, 2)")
    s.execute("INSERT INTO ks.g (p, c, v) VALUES ([3], {'a': 3}, 3)")

    def vals(where):
        return sorted(r.v for r in s.execute(
            "SELECT v FROM ks.g WHERE " + where + " ALLOW FILTERING"))

    assert vals("p CONTAINS 1") == [1, 2]
    assert vals("c CONTAINS KEY 'a'") == [1, 3]
    assert vals("p = [1, 2] AND c CONTAINS 2") == [2]
    with pytest.raises(InvalidRequest, match="Clustering columns can only "
                       "be restricted with CONTAINS with a secondary index "
                       "or filtering"):
        s.execute("SELECT v FROM ks.g WHERE p = [1, 2] AND c CONTAINS 2")
