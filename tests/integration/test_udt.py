"""User-defined types through the stock DataStax python driver on real
cassinid processes: CREATE / ALTER / DROP TYPE reach the driver's metadata
(cluster.metadata.keyspaces[k].user_types, refreshed from the SCHEMA_CHANGE
TYPE events), system_schema.types, DESCRIBE, survive restarts (the schema
log replays them) and spread to a second node; the keyspace's
export_as_string, run on an empty keyspace, gives the same schema back.
Addresses: 127.0.103.x."""
import signal
import time

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import (EXEC_PROFILE_DEFAULT, Cluster,
                               ExecutionProfile)
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.protocol import _ProtocolHandler

from conftest import default_yaml, seeds_yaml, wait_all_normal

ADDRESS = "127.0.103.1"


def connect(ip=ADDRESS):
    pinned = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([ip]))
    cluster = Cluster([ip], protocol_version=4,
                      execution_profiles={EXEC_PROFILE_DEFAULT: pinned})
    return cluster, cluster.connect()


def wait_for(check, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


SCHEMA = [
    "CREATE TYPE app.point (x int, y int)",
    # names types defined before it; sorts before them by name
    "CREATE TYPE app.address (street text, \"Zip\" varchar, "
    "loc frozen<point>, tags list<text>, "
    "pairs map<text, frozen<tuple<int, text>>>)",
    "CREATE TYPE app.zzz (a frozen<address>)",
]


def types_of(cluster, ks="app"):
    return {n: (list(t.field_names), list(t.field_types))
            for n, t in cluster.metadata.keyspaces[ks].user_types.items()}


def test_types_in_metadata_describe_and_restart(make_node):
    node = make_node(default_yaml(listen_address=ADDRESS))
    node.start()
    assert node.wait_for_log("CQL clients on"), node.log()
    cluster, s = connect()
    s.execute("CREATE KEYSPACE app WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    for q in SCHEMA:
        s.execute(q)
    want = {
        "point": (["x", "y"], ["int", "int"]),
        "address": (["street", "Zip", "loc", "tags", "pairs"],
                    ["text", "text", "frozen<point>", "list<text>",
                     "map<text, frozen<tuple<int, text>>>"]),
        "zzz": (["a"], ["frozen<address>"]),
    }
    wait_for(lambda: types_of(cluster) == want, "driver metadata")
    rows = s.execute("SELECT type_name, field_names, field_types FROM "
                     "system_schema.types WHERE keyspace_name = 'app'")
    assert {r.type_name: (r.field_names, r.field_types)
            for r in rows} == want

    # Cassandra's refusals
    for q, msg in [
        ("CREATE TYPE app.point (z int)",
         "A user type with name 'point' already exists"),
        ("DROP TYPE app.point",
         "Cannot drop user type 'app.point' as it is still used by user "
         "types address, zzz"),
        ("ALTER TYPE app.point ADD x int",
         "Cannot add field x to type app.point: a field with name x "
         "already exists"),
        ("ALTER TYPE app.point ADD back frozen<zzz>",
         "Cannot add new field back of type frozen<zzz> to user type "
         "app.point as it would create a circular reference"),
        ("CREATE TYPE app.self (me frozen<self>)", "Unknown type app.self"),
        ("CREATE TYPE app.d (a int, a text)",
         "Duplicate field name 'a' in type 'd'"),
        ("CREATE TYPE app.l (a list<point>)",
         "Non-frozen UDTs are not allowed inside collections: list<point>"),
        ("CREATE TYPE app.n (a point)",
         "A user type cannot contain non-frozen UDTs"),
        ("DROP TYPE app.nope", "Type 'app.nope' doesn't exist"),
    ]:
        with pytest.raises(InvalidRequest) as e:
            s.execute(q)
        assert msg in str(e.value), (q, str(e.value))
    s.execute("CREATE TYPE IF NOT EXISTS app.point (z int)")
    s.execute("DROP TYPE IF EXISTS app.nope")

    s.execute("ALTER TYPE app.point ADD z int")
    s.execute("ALTER TYPE app.point RENAME x TO xx AND y TO yy")
    want["point"] = (["xx", "yy", "z"], ["int", "int", "int"])
    wait_for(lambda: types_of(cluster) == want, "ALTER TYPE in metadata")

    ddl = cluster.metadata.keyspaces["app"].export_as_string()
    # server-side DESCRIBE: the same statements, in the same order
    described = "\n\n".join(
        r.create_statement for r in s.execute("DESCRIBE KEYSPACE app"))
    assert described == ddl
    row = s.execute("DESCRIBE TYPE app.point").one()
    assert row.create_statement == (
        "CREATE TYPE app.point (\n    xx int,\n    yy int,\n    z int\n);")
    assert [r.name for r in s.execute("DESCRIBE TYPES")
            if r.keyspace_name == "app"] == ["address", "point", "zzz"]
    cluster.shutdown()

    # kill -9: the schema log brings the types back as they were
    node.restart(signal.SIGKILL)
    cluster, s = connect()
    assert types_of(cluster) == want
    assert cluster.metadata.keyspaces["app"].export_as_string() == ddl

    # the driver's text recreates the same schema in an empty keyspace
    s.execute("CREATE KEYSPACE copy WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    for stmt in ddl.split(";\n\n")[1:]:
        s.execute(stmt.rstrip(";").replace("app.", "copy."))
    wait_for(lambda: types_of(cluster, "copy") == want, "copied types")

    s.execute("DROP TYPE app.zzz")
    s.execute("DROP TYPE app.address")
    s.execute("DROP TYPE app.point")
    wait_for(lambda: types_of(cluster) == {}, "dropped types")
    # DROP KEYSPACE takes its types
    s.execute("DROP KEYSPACE copy")
    s.execute("CREATE KEYSPACE copy WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    assert list(s.execute("SELECT * FROM system_schema.types WHERE "
                          "keyspace_name = 'copy'")) == []
    cluster.shutdown()


def test_types_spread_to_a_second_node(make_node):
    ips = ["127.0.103.2", "127.0.103.3"]
    nodes = []
    for i, ip in enumerate(ips):
        n = make_node(default_yaml(
            listen_address=ip, gossip_interval="200ms",
            seed_provider=seeds_yaml(ips[0])), name=f"n{i}")
        n.start()
        nodes.append(n)
    for n in nodes:
        assert n.wait_for_log("CQL clients on", timeout=30), n.log()
    wait_all_normal(ips)
    c1, s1 = connect(ips[0])
    s1.execute("CREATE KEYSPACE app WITH replication = {'class': "
               "'SimpleStrategy', 'replication_factor': 2}")
    s1.execute("CREATE TYPE app.point (x int, y int)")
    assert c1.control_connection.wait_for_schema_agreement()
    c2, s2 = connect(ips[1])
    wait_for(lambda: "point" in c2.metadata.keyspaces["app"].user_types,
             "type on node 2")
    # node 2 alters it; node 1 sees it
    s2.execute("ALTER TYPE app.point ADD z int")
    assert c2.control_connection.wait_for_schema_agreement()
    wait_for(lambda: list(
        c1.metadata.keyspaces["app"].user_types["point"].field_names) ==
        ["x", "y", "z"], "ALTER on node 1")
    r = s1.execute("SELECT field_names FROM system_schema.types WHERE "
                   "keyspace_name = 'app' AND type_name = 'point'").one()
    assert r.field_names == ["x", "y", "z"]
    c1.shutdown()
    c2.shutdown()
    # a restarted node 2 keeps what it learned
    nodes[1].restart(signal.SIGKILL)
    c2, s2 = connect(ips[1])
    r = s2.execute("SELECT field_names FROM system_schema.types WHERE "
                   "keyspace_name = 'app' AND type_name = 'point'").one()
    assert r.field_names == ["x", "y", "z"]
    c2.shutdown()


def test_frozen_columns_through_the_driver(make_node):
    """Values of frozen user type columns: the driver's named tuples and
    register_user_type classes, both ways; ALTER TYPE ADD seen in old rows
    as None; DESCRIBE of a keyspace whose tables use types recreates it;
    the values survive a kill -9 (commitlog) and a flush."""
    ip = "127.0.103.4"
    node = make_node(default_yaml(listen_address=ip), name="values")
    node.start()
    assert node.wait_for_log("CQL clients on"), node.log()
    cluster, s = connect(ip)
    s.execute("CREATE KEYSPACE app WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TYPE app.point (x int, y text)")
    s.execute("CREATE TYPE app.shape (name text, pts list<frozen<point>>)")
    s.execute("CREATE TABLE app.t (k int, c frozen<point>, "
              "s frozen<shape>, PRIMARY KEY (k, c))")

    class Point:
        def __init__(self, x=None, y=None, z=None):
            self.x, self.y, self.z = x, y, z

    cluster.register_user_type("app", "point", Point)
    ins = s.prepare("INSERT INTO app.t (k, c, s) VALUES (?, ?, ?)")
    s.execute(ins, (1, Point(1, "a"), None))
    s.execute("INSERT INTO app.t (k, c, s) VALUES (1, {x: 2}, "
              "{name: 'tri', pts: [{x: 0, y: 'o'}, {x: 1}]})")
    rows = list(s.execute("SELECT c, s FROM app.t WHERE k = 1"))
    assert [(r.c.x, r.c.y) for r in rows] == [(1, "a"), (2, None)]
    assert isinstance(rows[0].c, Point)
    assert rows[0].s is None
    assert rows[1].s.name == "tri"
    assert [(p.x, p.y) for p in rows[1].s.pts] == [(0, "o"), (1, None)]
    sel = s.prepare("SELECT c.y, s.name FROM app.t WHERE k = 1 AND c = ?")
    got = s.execute(sel, (Point(2),)).one()
    assert (got.c_y, got.s_name) == (None, "tri")

    s.execute("ALTER TYPE app.point ADD z int")
    wait_for(lambda: "z" in cluster.metadata.keyspaces["app"]
             .user_types["point"].field_names, "ALTER in metadata")
    cluster.shutdown()
    node.restart(signal.SIGKILL)

    cluster, s = connect(ip)
    cluster.register_user_type("app", "point", Point)
    rows = list(s.execute("SELECT c FROM app.t WHERE k = 1"))
    assert [(r.c.x, r.c.y, r.c.z) for r in rows] == [(1, "a", None),
                                                     (2, None, None)]
    # prepared after the ALTER: its marker carries the three fields
    ins = s.prepare("INSERT INTO app.t (k, c, s) VALUES (?, ?, ?)")
    s.execute(ins, (2, Point(3, "b", 4), None))
    r = s.execute("SELECT c FROM app.t WHERE k = 2").one()
    assert (r.c.x, r.c.y, r.c.z) == (3, "b", 4)

    # the keyspace's DESCRIBE text recreates it (types before tables)
    ddl = cluster.metadata.keyspaces["app"].export_as_string()
    described = [r.create_statement
                 for r in s.execute("DESCRIBE KEYSPACE app")]
    # the types as the driver writes them, in its order; the table's
    # options differ from the driver's (extensions), its columns do not
    assert [d for d in described if d.startswith("CREATE TYPE")] == [
        d if d.endswith(";") else d + ";" for d in ddl.split(";\n\n")
        if d.startswith("CREATE TYPE")]
    assert "c frozen<point>,\n    s frozen<shape>," in described[-1]
    s.execute("CREATE KEYSPACE copy WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    for stmt in ddl.split(";\n\n")[1:]:
        s.execute(stmt.rstrip(";").replace("app.", "copy."))
    wait_for(lambda: "t" in cluster.metadata.keyspaces.get(
        "copy", cluster.metadata.keyspaces["app"]).tables and
        "copy" in cluster.metadata.keyspaces, "copied keyspace")
    copy = cluster.metadata.keyspaces["copy"].export_as_string()
    assert copy == ddl.replace("app.", "copy.").replace(
        "KEYSPACE app", "KEYSPACE copy")
    with pytest.raises(InvalidRequest, match="still used by user types "
                       "shape"):
        s.execute("DROP TYPE app.point")
    with pytest.raises(InvalidRequest, match="still used by tables t"):
        s.execute("DROP TYPE app.shape")
    cluster.shutdown()


def test_non_frozen_columns_through_the_driver(make_node):
    """A non-frozen user type column (one cell per field) through the
    driver: register_user_type classes both ways, prepared whole values
    and field markers (named a.f), per-field updates, deletes and TTLs,
    and the fields surviving a kill -9 (commitlog replay)."""
    ip = "127.0.103.5"
    node = make_node(default_yaml(listen_address=ip), name="nonfrozen")
    node.start()
    assert node.wait_for_log("CQL clients on"), node.log()
    cluster, s = connect(ip)
    s.execute("CREATE KEYSPACE app WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TYPE app.addr (street text, zip int)")
    s.execute("CREATE TABLE app.t (k int PRIMARY KEY, a addr)")
    wait_for(lambda: "t" in cluster.metadata.keyspaces["app"].tables,
             "table in metadata")
    col = cluster.metadata.keyspaces["app"].tables["t"].columns["a"]
    assert col.cql_type == "addr"

    class Addr:
        def __init__(self, street=None, zip=None, extra=None):
            self.street, self.zip, self.extra = street, zip, extra

    cluster.register_user_type("app", "addr", Addr)
    ins = s.prepare("INSERT INTO app.t (k, a) VALUES (?, ?)")
    s.execute(ins, (1, Addr("main", 10)))
    r = s.execute("SELECT a FROM app.t WHERE k = 1").one()
    assert isinstance(r.a, Addr) and (r.a.street, r.a.zip) == ("main", 10)

    upd = s.prepare("UPDATE app.t SET a.zip = ? WHERE k = ?")
    assert [c.name for c in upd.column_metadata] == ["a.zip", "k"]
    s.execute(upd, (20, 1))
    s.execute("UPDATE app.t USING TTL 1000 SET a.street = 'ttl' "
              "WHERE k = 1")
    r = s.execute("SELECT a.street, a.zip FROM app.t WHERE k = 1").one()
    assert (r.a_street, r.a_zip) == ("ttl", 20)
    s.execute("DELETE a.zip FROM app.t WHERE k = 1")
    # a whole value replaces every field cell
    s.execute(ins, (2, Addr("x", 1)))
    s.execute(ins, (2, Addr(None, 2)))

    s.execute("ALTER TYPE app.addr ADD extra int")
    wait_for(lambda: "extra" in cluster.metadata.keyspaces["app"]
             .user_types["addr"].field_names, "ALTER in metadata")
    cluster.shutdown()
    node.restart(signal.SIGKILL)

    cluster, s = connect(ip)
    cluster.register_user_type("app", "addr", Addr)
    got = {r.k: (r.a.street, r.a.zip, r.a.extra)
           for r in s.execute("SELECT k, a FROM app.t")}
    assert got == {1: ("ttl", None, None), 2: (None, 2, None)}
    # Cassandra 5.0: one write time per field, the field's own (null
    # elements: the pure-Python decoder)
    s.client_protocol_handler = _ProtocolHandler
    r = s.execute("SELECT writetime(a), writetime(a.zip) FROM app.t "
                  "WHERE k = 2").one()
    assert len(r[0]) == 3 and r[0][1] == r[1] and r[0][0] is None
    cluster.shutdown()


def test_non_frozen_conditions_times_and_markers(make_node):
    """Non-frozen user type columns through the driver: lightweight
    transactions (`IF a.f = ?`, the marker named a.f of the field's type;
    `IF a = ?` on the whole value; was_applied and the current value of a
    row not applied, mapped to the registered class), Cassandra 5.0's
    writetime() / ttl() of the column and of its fields, and the names of
    markers inside literals under element and field assignments."""
    ip = "127.0.103.50"
    node = make_node(default_yaml(listen_address=ip), name="nonfrozen_lwt")
    node.start()
    assert node.wait_for_log("CQL clients on"), node.log()
    cluster, s = connect(ip)
    s.execute("CREATE KEYSPACE app WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TYPE app.addr (street text, zip int)")
    s.execute("CREATE TABLE app.t (k int PRIMARY KEY, a addr, n int)")

    class Addr:
        def __init__(self, street=None, zip=None):
            self.street, self.zip = street, zip

    cluster.register_user_type("app", "addr", Addr)
    s.execute("INSERT INTO app.t (k, a) VALUES (1, {street: 'main', "
              "zip: 10})")
    by_field = s.prepare("UPDATE app.t SET n = ? WHERE k = ? IF a.zip = ?")
    assert [(c.name, c.type.typename) for c in by_field.column_metadata] \
        == [("n", "int"), ("k", "int"), ("a.zip", "int")]
    assert s.execute(by_field, (1, 1, 10)).was_applied
    r = s.execute(by_field, (2, 1, 11))
    assert not r.was_applied
    row = r.one()
    assert isinstance(row.a, Addr) and (row.a.street, row.a.zip) == \
        ("main", 10)
    whole = s.prepare("UPDATE app.t SET a = ? WHERE k = ? IF a = ?")
    assert s.execute(whole, (Addr("x", 1), 1, Addr("main", 10))).was_applied
    assert not s.execute(whole, (Addr("y"), 1, Addr("main", 10))).was_applied
    s.execute("UPDATE app.t SET a.zip = null WHERE k = 1")
    assert s.execute(whole, (None, 1, Addr("x"))).was_applied
    assert s.execute("UPDATE app.t SET n = 3 WHERE k = 1 IF a = null"
                     ).was_applied

    # writetime() / ttl() (Cassandra 5.0): a list with one element per
    # field, null where the field has no cell (the pure-Python decoder:
    # the Cython one fails on null list elements), u.f a single value
    s.client_protocol_handler = _ProtocolHandler
    s.execute("INSERT INTO app.t (k, a) VALUES (2, {street: 's'}) "
              "USING TIMESTAMP 100")
    s.execute("UPDATE app.t USING TIMESTAMP 200 AND TTL 1000 SET a.zip = 5 "
              "WHERE k = 2")
    r = s.execute("SELECT writetime(a), ttl(a), maxwritetime(a), "
                  "writetime(a.zip), ttl(a.street) FROM app.t WHERE k = 2"
                  ).one()
    assert r[0] == [100, 200] and r[1][0] is None and 0 < r[1][1] <= 1000
    assert (r[2], r[3], r[4]) == (200, 200, None)
    s.execute("UPDATE app.t USING TIMESTAMP 300 SET a.street = null "
              "WHERE k = 2")
    r = s.execute("SELECT writetime(a), writetime(a.street) FROM app.t "
                  "WHERE k = 2").one()
    assert r[0] == [None, 200] and r[1] is None
    meta = s.prepare("SELECT writetime(a), ttl(a.zip) FROM app.t")
    assert [(c[2], c[3].cql_parameterized_type()) for c in
            meta.result_metadata] == [("writetime(a)", "list<bigint>"),
                                       ("ttl(a.zip)", "int")]

    # markers inside a literal under m[k] = ... and u.f = ...: named after
    # their receiver (Maps.valueSpecOf, UserTypes.fieldSpecOf, then the
    # literal's Lists.valueSpecOf / Tuples.componentSpecOf)
    s.execute("CREATE TYPE app.loc (pt frozen<tuple<int, int>>, "
              "tags frozen<list<int>>)")
    s.execute("CREATE TABLE app.e (k int PRIMARY KEY, "
              "ml map<text, frozen<list<int>>>, "
              "mt map<int, frozen<tuple<int, text>>>, l loc)")
    p = s.prepare("UPDATE app.e SET ml['x'] = [?, ?], mt[?] = (?, ?), "
                  "l.pt = (?, ?), l.tags = [?] WHERE k = ?")
    assert [(c.name, c.type.typename) for c in p.column_metadata] == [
        ("value(value(ml))", "int"), ("value(value(ml))", "int"),
        ("key(mt)", "int"), ("value(mt)[0]", "int"),
        ("value(mt)[1]", "varchar"), ("l.pt[0]", "int"), ("l.pt[1]", "int"),
        ("value(l.tags)", "int"), ("k", "int")]
    s.execute(p, (1, 2, 3, 4, "y", 5, 6, 7, 1))
    r = s.execute("SELECT ml, mt, l.pt, l.tags FROM app.e WHERE k = 1").one()
    assert (dict(r[0]), dict(r[1]), r[2], r[3]) == \
        ({"x": [1, 2]}, {3: (4, "y")}, (5, 6), [7])
    cluster.shutdown()
