"""A real cassinid serving CQL to the stock DataStax driver: DDL, writes,
reads, and what survives a clean restart and a kill -9."""
import re
import signal
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel, InvalidRequest, Unauthorized
from cassandra.cluster import Cluster
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

from conftest import BUILD_DIR, default_yaml, seeds_yaml, wait_all_normal

ADDRESS = "127.0.3.1"  # a block of its own: suites run in parallel


def yaml(**kw):
    return default_yaml(listen_address=ADDRESS, **kw)


def connect():
    cluster = Cluster([ADDRESS])
    return cluster, cluster.connect()


@pytest.fixture
def node(make_node):
    n = make_node(yaml())
    n.start()
    assert n.wait_for_log("CQL clients on"), n.log()
    yield n
    n.kill()


def load(session):
    session.execute("CREATE KEYSPACE app WITH replication = {'class': "
                    "'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE app.events (day text, seq int, body text, "
                    "tags set<text>, extra int, dropped int, "
                    "PRIMARY KEY (day, seq)) "
                    "WITH CLUSTERING ORDER BY (seq DESC)")
    session.execute("ALTER TABLE app.events DROP dropped")
    session.execute("ALTER TABLE app.events ADD later int")
    ins = session.prepare("INSERT INTO app.events (day, seq, body, tags, "
                          "extra) VALUES (?, ?, ?, ?, ?)")
    for seq in range(50):
        session.execute(ins, ["mon", seq, f"e{seq}", {"t"}, seq * 2])


def check(session):
    rows = list(session.execute("SELECT seq, body, extra FROM app.events "
                                "WHERE day = 'mon' LIMIT 3"))
    assert [(r.seq, r.body, r.extra) for r in rows] == \
        [(49, "e49", 98), (48, "e48", 96), (47, "e47", 94)]
    assert session.execute("SELECT count(*) FROM app.events").one().count == 50


def test_driver_writes_and_reads_and_data_survives_restart(node):
    cluster, s = connect()
    assert cluster.metadata.cluster_name == "Integration"
    load(s)
    check(s)
    cluster.shutdown()
    assert "replayed 4 statements" in node.restart(signal.SIGTERM)
    cluster, s = connect()
    columns = cluster.metadata.keyspaces["app"].tables["events"].columns
    assert "extra" in columns and "dropped" not in columns
    check(s)
    cluster.shutdown()


def test_acknowledged_writes_survive_kill_9(node):
    cluster, s = connect()
    load(s)
    cluster.shutdown()
    log = node.restart(signal.SIGKILL)
    assert "replayed 4 statements" in log
    assert "commitlog replay" in log
    cluster, s = connect()
    check(s)
    cluster.shutdown()


def test_describe_matches_the_driver_and_survives_restart(node):
    """Server-side DESCRIBE (what cqlsh 4.x sends) on a real node: the
    CREATE text reads as the driver's export of the same schema (save the
    "extensions = {}" line Cassandra prints and the driver leaves out), the
    dropped column is not shown, DESCRIBE CLUSTER reports the configured
    cluster and snitch and the ring's ranges as the driver's token map
    places them, and all of it is the same after a restart."""
    cluster, s = connect()
    load(s)
    cluster.refresh_schema_metadata()
    ks = cluster.metadata.keyspaces["app"]
    got = list(s.execute("DESCRIBE KEYSPACE app"))
    assert [(r.type, r.name) for r in got] == \
        [("keyspace", "app"), ("table", "events")]
    assert got[0].create_statement == ks.as_cql_query() + ";"
    events = got[1].create_statement
    assert "dropped" not in events
    assert events.replace("\n    AND extensions = {}", "") == \
        ks.tables["events"].export_as_string()
    s.execute("USE app")
    desc = s.execute("DESCRIBE CLUSTER").one()
    assert (desc.cluster, desc.partitioner, desc.snitch) == \
        ("Integration", "Murmur3Partitioner", "GossipingPropertyFileSnitch")
    tm = cluster.metadata.token_map
    assert len(desc.range_ownership) == len(tm.ring)
    for token, replicas in desc.range_ownership.items():
        want = tm.get_replicas("app", tm.token_class(int(token)))
        assert [r.rsplit(":", 1)[0] for r in replicas] == \
            [h.address for h in want]
    cluster.shutdown()
    node.restart(signal.SIGTERM)
    cluster, s = connect()
    assert list(s.execute("DESCRIBE KEYSPACE app")) == got
    cluster.shutdown()


def test_role_statements_need_a_login_under_allow_all(node):
    """AllowAllAuthenticator: every client is Cassandra's anonymous user,
    which may not run role statements, and no default superuser is made;
    system_auth's tables are there to read."""
    cluster, s = connect()
    with pytest.raises(Unauthorized, match="You have to be logged in and "
                       "not anonymous to perform this request"):
        s.execute("CREATE ROLE alice WITH LOGIN = true")
    with pytest.raises(Unauthorized):
        s.execute("LIST ROLES")
    assert list(s.execute("SELECT role FROM system_auth.roles")) == []
    assert list(s.execute("SELECT * FROM system_auth.role_members")) == []
    cluster.shutdown()


def test_two_nodes_replicate_writes(make_node):
    """A write at ALL through one node is read back at ONE from the other,
    which answers from its own replica."""
    seeds = "127.0.3.11"
    nodes = []
    for i, ip in enumerate(["127.0.3.11", "127.0.3.12"]):
        n = make_node(default_yaml(
            listen_address=ip, gossip_interval="200ms",
            seed_provider=seeds_yaml(seeds)), name=f"n{i}")
        n.start()
        nodes.append(n)
    for n in nodes:
        assert n.wait_for_log("CQL clients on", timeout=30), n.log()
    wait_all_normal(["127.0.3.11", "127.0.3.12"])
    cluster = Cluster(["127.0.3.11"], protocol_version=4,
                      load_balancing_policy=WhiteListRoundRobinPolicy(
                          ["127.0.3.11"]))
    s = cluster.connect()
    s.execute("CREATE KEYSPACE k WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 2}")
    s.execute("CREATE TABLE k.t (id int PRIMARY KEY, v text)")
    s.execute(SimpleStatement("INSERT INTO k.t (id, v) VALUES (1, 'one')",
                              consistency_level=ConsistencyLevel.ALL))
    cluster.shutdown()
    cluster = Cluster(["127.0.3.12"], protocol_version=4,
                      load_balancing_policy=WhiteListRoundRobinPolicy(
                          ["127.0.3.12"]))
    s = cluster.connect()
    row = s.execute(SimpleStatement(
        "SELECT v FROM k.t WHERE id = 1",
        consistency_level=ConsistencyLevel.ONE)).one()
    assert row.v == "one"
    cluster.shutdown()


def test_status_shows_the_load_of_flushed_sstables(make_node):
    # Flushes from about 330 KiB, well below memtable_heap_space, so that
    # writes seldom wait for room while a flush runs (memtables full).
    n = make_node(yaml(memtable_heap_space="4MiB",
                       memtable_cleanup_threshold="0.08"))
    n.start()
    assert n.wait_for_log("CQL clients on"), n.log()

    def load():
        out = subprocess.run([str(BUILD_DIR / "node" / "cassini-tool"), "-h",
                              ADDRESS, "status"], capture_output=True,
                             text=True, check=True).stdout
        m = re.search(r"^[UD][NJLM]\s+\S+\s+([\d.]+) (\w+)", out, re.M)
        return float(m.group(1)) * {"bytes": 1, "KiB": 1024,
                                    "MiB": 1 << 20}[m.group(2)]

    assert load() == 0
    cluster, s = connect()
    s.execute("CREATE KEYSPACE app WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE app.blobs (k int PRIMARY KEY, v text)")
    ins = s.prepare("INSERT INTO app.blobs (k, v) VALUES (?, ?)")
    for k in range(3000):
        s.execute(ins, [k, "x" * 1000])
    cluster.shutdown()
    # Memtables past 330 KiB flush; their SSTables are the load
    # (several flushes: wait for more than the first one to land).
    deadline = time.monotonic() + 30
    while load() <= 100 * 1024 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert load() > 100 * 1024
    n.kill()


def tool(*args):
    return subprocess.run([str(BUILD_DIR / "node" / "cassini-tool"), "-h",
                           ADDRESS, *args], capture_output=True, text=True,
                          timeout=60)


def test_tablestats_and_compact(node):
    """nodetool's tablestats and compact: flushes leave SSTables that
    tablestats counts, compact merges them into one, and both name a
    keyspace or table that does not exist."""
    cluster, s = connect()
    s.execute("CREATE KEYSPACE app WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE app.t (k int PRIMARY KEY, v text)")
    s.execute("CREATE TABLE app.other (k int PRIMARY KEY)")
    for part in range(3):
        for k in range(100):
            s.execute("INSERT INTO app.t (k, v) VALUES (%s, %s)",
                      (part * 100 + k, "x" * 100))
        assert tool("flush", "app", "t").returncode == 0

    def stats(*args):
        r = tool("tablestats", *args)
        assert r.returncode == 0, r.stderr
        return r.stdout
    s.execute("SELECT v FROM app.t WHERE k = 5")
    out = stats("app", "t")
    assert out.startswith("Total number of tables: 1\n"), out
    assert "Keyspace : app\n\t\tTable: t\n\t\tLocal read count: 1\n" \
        "\t\tLocal write count: 300\n\t\tSSTable count: 3\n" in out, out
    assert "Number of partitions (estimate): 300\n" in out
    assert "Memtable switch count: 3\n" in out
    assert "Total number of tables: 2\n" in stats()  # every user table
    assert tool("compact", "app", "t").returncode == 0
    out = stats("app", "t")
    assert "SSTable count: 1\n" in out and "Compactions completed: 1\n" \
        in out, out
    assert s.execute("SELECT count(*) FROM app.t").one().count == 300
    for args in (("tablestats", "nope"), ("compact", "app", "nope")):
        r = tool(*args)
        assert r.returncode == 2 and "nope" in r.stderr, r
    cluster.shutdown()


def test_snapshots_are_listed_cleared_and_restore_a_table(node):
    """nodetool's snapshot, listsnapshots and clearsnapshot, and the
    restore a Cassandra operator does: stop the node, put a snapshot's
    files in place of the table's, start it."""
    cluster, s = connect()
    s.execute("CREATE KEYSPACE app WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE app.t (k int PRIMARY KEY, v text)")
    for k in range(100):
        s.execute("INSERT INTO app.t (k, v) VALUES (%s, 'before')", (k,))
    assert tool("listsnapshots").stdout == "There are no snapshots\n"
    r = tool("snapshot", "-t", "b1", "app")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("Requested creating snapshot(s) for [app] with "
                        "snapshot name [b1]\nSnapshot directory: b1\n")
    r = tool("snapshot", "-t", "b1", "app")
    assert r.returncode == 2 and "Snapshot b1 already exists." in r.stderr
    assert tool("snapshot").returncode == 0  # a timestamped one, all
    out = tool("listsnapshots").stdout
    rows = [l.split() for l in out.splitlines()[2:]]
    assert out.startswith("Snapshot Details: \nSnapshot name"), out
    assert ["b1", "app", "t", "0"] == rows[0][:4] or \
        ["b1", "app", "t", "0"] in [r[:4] for r in rows], out
    assert len(rows) == 2, out
    # overwrite, compact away the snapshot's files from the table
    for k in range(100):
        s.execute("INSERT INTO app.t (k, v) VALUES (%s, 'after')", (k,))
    assert tool("flush", "app").returncode == 0
    assert tool("compact", "app").returncode == 0
    out = tool("listsnapshots").stdout
    b1 = [l.split() for l in out.splitlines() if l.startswith("b1 ")][0]
    assert int(b1[3]) == int(b1[4]) > 0, out  # all its bytes are its own
    r = tool("clearsnapshot")
    assert r.returncode == 1 and "Specify snapshot name or --all" in \
        r.stderr
    r = tool("clearsnapshot", "--all", "--", "nope")
    assert r.returncode == 2 and "nope" in r.stderr
    cluster.shutdown()
    # restore b1 as in Cassandra: drain and stop (every table flushed),
    # empty the commitlog (it would replay the overwrites), swap the
    # table's files for the snapshot's, start
    assert tool("drain").returncode == 0
    assert node.stop() == 0
    for f in (node.home / "data" / "commitlog").iterdir():
        f.unlink()
    table = next((node.home / "data" / "data" / "app").glob("t-*"))
    for f in table.glob("ca-*"):
        f.unlink()
    for f in (table / "snapshots" / "b1").iterdir():
        (table / f.name).write_bytes(f.read_bytes())
    since = node.log_size()
    node.start()
    assert node.wait_for_log("CQL clients on", since=since), node.log()
    cluster, s = connect()
    assert {r.v for r in s.execute("SELECT v FROM app.t")} == {"before"}
    assert s.execute("SELECT count(*) FROM app.t").one().count == 100
    r = tool("clearsnapshot", "-t", "b1")
    assert r.returncode == 0 and "with [b1]" in r.stdout
    assert len(tool("listsnapshots").stdout.splitlines()) == 3  # 1 left
    assert tool("clearsnapshot", "--all").returncode == 0
    assert tool("listsnapshots").stdout == "There are no snapshots\n"
    cluster.shutdown()


def test_batch_size_guards(node):
    """batch_size_warn_threshold (5KiB) answers with a warning,
    batch_size_fail_threshold (50KiB) refuses; an unlogged batch over more
    than 10 partitions warns."""
    cluster, s = connect()
    s.execute("CREATE KEYSPACE b WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE b.t (k int PRIMARY KEY, v text)")

    def batch(kind, n, size):
        body = "".join(f"INSERT INTO b.t (k, v) VALUES ({i}, '{'x' * size}');"
                       for i in range(n))
        f = s.execute_async(f"BEGIN {kind}BATCH {body} APPLY BATCH")
        f.result()
        return f.warnings or []

    assert batch("", 3, 100) == []
    warned = batch("", 8, 1000)
    assert len(warned) == 1 and "exceeding specified threshold of 5120" \
        in warned[0], warned
    warned = batch("UNLOGGED ", 11, 10)
    assert len(warned) == 1 and "Unlogged batch covering 11 partitions" \
        in warned[0], warned
    with pytest.raises(InvalidRequest, match="Batch too large"):
        batch("", 60, 1000)
    assert s.execute("SELECT count(*) FROM b.t").one()[0] == 11
    cluster.shutdown()


def cli(*args):
    return subprocess.run([str(BUILD_DIR / "node" / "cassini-tool"), "-h",
                           ADDRESS, *args], capture_output=True, text=True,
                          timeout=60)


def test_flush_and_drain_leave_nothing_to_replay(node):
    """nodetool flush and drain: flush answers once the memtables are
    SSTables; drain closes the native transport and leaves gossip too, so
    after a kill -9 the commitlog has nothing left to apply."""
    cluster, s = connect()
    s.execute("CREATE KEYSPACE fl WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    for t in ("a", "b"):
        s.execute(f"CREATE TABLE fl.{t} (k int PRIMARY KEY, v text)")
        ins = s.prepare(f"INSERT INTO fl.{t} (k, v) VALUES (?, ?)")
        for k in range(100):
            s.execute(ins, [k, "v" * 100])
    assert "Load                   : 0 bytes" in cli("info").stdout

    r = cli("flush", "fl", "a")
    assert r.returncode == 0, r.stderr
    assert "Load                   : 0 bytes" not in cli("info").stdout
    r = cli("flush", "nokeyspace")
    assert (r.returncode, r.stderr) == \
        (2, "error: Keyspace [nokeyspace] does not exist.\n")
    r = cli("flush", "fl", "nope")
    assert (r.returncode, r.stderr) == \
        (2, "error: Unknown table nope in keyspace fl\n")

    info = cli("info").stdout
    assert "Native Transport active: true" in info
    assert "Gossip active          : true" in info
    r = cli("drain")
    assert r.returncode == 0, r.stderr
    info = cli("info").stdout
    assert "Native Transport active: false" in info
    assert "Gossip active          : false" in info
    cluster.shutdown()
    with pytest.raises(Exception):
        Cluster([ADDRESS], connect_timeout=2).connect()

    log = node.restart(signal.SIGKILL)
    m = re.search(r"commitlog replay: (\d+) records, (\d+) applied", log)
    assert m is None or m.group(2) == "0", log
    cluster, s = connect()
    for t in ("a", "b"):
        assert s.execute(f"SELECT count(*) FROM fl.{t}").one().count == 100
    cluster.shutdown()


def test_nested_tuple_duration_values_survive_flush_compaction_and_restart(
        node):
    """Values of the type trees (frozen collections in collections and as
    clustering keys, tuples, durations, vectors) read the same from the
    memtable, after flushes and a compaction, after a clean restart (the
    schema log re-creates the types) and after a kill -9 (the commitlog
    replays them); DESCRIBE prints the types as the driver exports them."""
    from cassandra.util import Duration
    cluster, s = connect()
    s.execute("CREATE KEYSPACE app WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE app.t (k int, c frozen<list<int>>, "
              "l list<frozen<set<int>>>, m map<text, frozen<list<int>>>, "
              "tu tuple<int, text>, d duration, v vector<float, 2>, "
              "PRIMARY KEY (k, c))")
    ins = s.prepare("INSERT INTO app.t (k, c, l, m, tu, d) "
                    "VALUES (?, ?, ?, ?, ?, ?)")
    s.execute(ins, [1, [2], [{3, 1}], {"a": [1]}, (1, "x"),
                    Duration(1, 2, 3)])
    s.execute("INSERT INTO app.t (k, c, l, tu, d, v) VALUES "
              "(1, [1, 9], [{2}, {1, 1}], (2, null), -1h30m, [1.0, 2.0])")
    assert tool("flush", "app", "t").returncode == 0
    s.execute("UPDATE app.t SET l = l + [{7}], m['b'] = [] "
              "WHERE k = 1 AND c = [2]")
    assert tool("flush", "app", "t").returncode == 0
    s.execute("INSERT INTO app.t (k, c, tu) VALUES (1, [], (0, 'z'))")

    def rows():
        return [tuple(r) for r in s.execute(
            "SELECT c, l, m, tu, d FROM app.t WHERE k = 1")]
    want = [
        ([], None, None, (0, "z"), None),
        ([1, 9], [{2}, {1}], None, (2, None),
         Duration(0, 0, -5400000000000)),
        ([2], [{1, 3}, {7}], {"a": [1], "b": []}, (1, "x"),
         Duration(1, 2, 3)),
    ]
    assert rows() == want
    assert tool("compact", "app", "t").returncode == 0
    assert rows() == want
    cluster.refresh_schema_metadata()
    table = cluster.metadata.keyspaces["app"].tables["t"]
    assert table.columns["tu"].cql_type == "frozen<tuple<int, text>>"
    assert table.columns["l"].cql_type == "list<frozen<set<int>>>"
    got = s.execute("DESCRIBE TABLE app.t").one().create_statement
    # Cassandra's DESCRIBE puts simple columns (frozen ones too) before
    # multi-cell ones; the driver's export sorts by name: compare types.
    for col in table.columns.values():
        assert f"\n    {col.name} {col.cql_type}," in got, (col.name, got)
    assert got.index("    v vector") < got.index("    l list")
    cluster.shutdown()
    node.restart(signal.SIGTERM)
    cluster, s = connect()
    assert rows() == want
    assert s.execute("DESCRIBE TABLE app.t").one().create_statement == got
    s.execute("INSERT INTO app.t (k, c, d) VALUES (2, [0], 1y)")
    cluster.shutdown()
    node.restart(signal.SIGKILL)
    cluster, s = connect()
    assert rows() == want
    assert s.execute("SELECT d FROM app.t WHERE k = 2").one().d == \
        Duration(12, 0, 0)
    cluster.shutdown()
