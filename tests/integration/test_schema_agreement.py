"""Schema on a real 3-node cluster: DDL on one node reaches every node
(push), the driver sees agreement, and a node that was down catches up when
it returns (pull on a gossiped version mismatch). Clusters live on
127.0.4.x with a 250 ms gossip interval. No timing thresholds: waits are
"until it happens" with a ceiling that only guards against hanging."""
import os
import subprocess
import threading
import time

import pytest
from cassandra import ConsistencyLevel, InvalidRequest
from cassandra.cluster import (EXEC_PROFILE_DEFAULT, Cluster,
                               ExecutionProfile)
from cassandra.policies import WhiteListRoundRobinPolicy

from conftest import BUILD_DIR, SOURCE_DIR

BASE = "127.0.4."


@pytest.fixture
def cluster(tmp_path):
    env = dict(os.environ, CASSINI_HOME=str(tmp_path / "home"),
               CASSINI_BIN_DIR=str(BUILD_DIR))

    def run(*args):
        r = subprocess.run(["/usr/bin/python3",
                            str(SOURCE_DIR / "scripts" / "cluster.py"), *args],
                           capture_output=True, text=True, env=env,
                           timeout=180)
        assert r.returncode == 0, r.stdout + r.stderr
        return r

    run("create", "s", "-n", "3", "--racks", "3", "--base-ip", BASE,
        "-c", "gossip_interval=250ms")
    run("start")
    yield run
    subprocess.run(["/usr/bin/python3",
                    str(SOURCE_DIR / "scripts" / "cluster.py"), "-C", "s",
                    "remove"], env=env, capture_output=True, timeout=60)


def pinned_to(ip, **kw):
    """A driver that sends every request to `ip`: by default it spreads
    queries over every node it discovers, and these tests must ask (or
    coordinate on) one node."""
    pinned = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([ip]), **kw)
    return Cluster([ip], protocol_version=4,
                   execution_profiles={EXEC_PROFILE_DEFAULT: pinned})


def tables_on(ip):
    c = pinned_to(ip)
    try:
        s = c.connect()
        tables = sorted(r.table_name for r in s.execute(
            "SELECT table_name FROM system_schema.tables "
            "WHERE keyspace_name = 'ks'"))
        version = s.execute("SELECT schema_version FROM system.local").one()
        return tables, version.schema_version
    finally:
        c.shutdown()


def until(pred, what, ceiling=60):
    deadline = time.monotonic() + ceiling
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    pytest.fail(f"never happened: {what}")


def test_ddl_reaches_every_node_and_a_late_node_catches_up(cluster):
    c = Cluster([BASE + "1"])
    s = c.connect()
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
    assert c.control_connection.wait_for_schema_agreement()
    c.shutdown()
    views = [tables_on(BASE + str(i)) for i in (1, 2, 3)]
    assert all(v == views[0] for v in views), views
    assert views[0][0] == ["t"]

    cluster("node", "node3", "stop")
    c = Cluster([BASE + "1"], max_schema_agreement_wait=2)
    s = c.connect()
    s.execute("CREATE TABLE ks.later (k int PRIMARY KEY)")
    s.execute("DROP TABLE ks.t")
    c.shutdown()
    cluster("node", "node3", "start")
    until(lambda: tables_on(BASE + "3") == tables_on(BASE + "1"),
          "node3 catches up with node1")
    assert tables_on(BASE + "3")[0] == ["later"]


IPS = [BASE + str(i) for i in (1, 2, 3)]


def drivers_on_every_node(**profile):
    """One pinned driver and session per node. Where a race leaves the
    nodes apart, agreement never comes and each DDL would wait the
    driver's 10 s for it: 2 s here."""
    drivers = [pinned_to(ip, **profile) for ip in IPS]
    for d in drivers:
        d.max_schema_agreement_wait = 2
    return drivers, [d.connect() for d in drivers]


def logged(tmp_path, text):
    """How many times the nodes' logs say `text`."""
    return sum((tmp_path / "home" / "clusters" / "s" / f"node{i}" / "logs" /
                "system.log").read_text().count(text) for i in (1, 2, 3))


def race(statements_of_round, raced):
    """Rounds of simultaneous statements, one thread per (session,
    statement) that statements_of_round(i) returns, until raced() (a
    round races about half the time on this machine; 20 at most). Returns
    how many rounds ran; a statement's error fails the test."""
    errors = []

    def run(start, s, q):
        start.wait()
        try:
            s.execute(q)
        except Exception as e:  # reported below, with the statement
            errors.append(f"{q}: {e!r}")
    for i in range(20):
        pairs = statements_of_round(i)
        start = threading.Barrier(len(pairs))
        threads = [threading.Thread(target=run, args=(start, s, q))
                   for s, q in pairs]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert not errors, errors
        if raced():
            return i + 1
    pytest.fail("no round raced in 20")


def schema_on(ip, query):
    """Rows of `query` on one node, sorted, and its schema version."""
    c = pinned_to(ip)
    try:
        s = c.connect()
        rows = sorted(tuple(str(v) for v in r) for r in s.execute(query))
        return rows, s.execute(
            "SELECT schema_version FROM system.local").one().schema_version
    finally:
        c.shutdown()


def agree(query, what):
    """Waits until every node gives the same rows and schema version."""
    until(lambda: len({str(schema_on(ip, query)) for ip in IPS}) == 1,
          f"every node has the same {what} and schema version")


def same_after_restart(cluster, query, what):
    """Stops and starts the cluster: replaying their logs, the nodes end
    with what `query` gave before, every one of them."""
    before = schema_on(IPS[0], query)
    cluster("stop")
    cluster("start")
    until(lambda: all(schema_on(ip, query) == before for ip in IPS),
          f"the same {what} on every node after a restart")


def schema_pulls(ip):
    """MigrationStage's completed count in `cassini-tool tpstats`."""
    out = subprocess.run([str(BUILD_DIR / "node" / "cassini-tool"), "-h", ip,
                          "tpstats"], capture_output=True, text=True,
                         check=True).stdout
    row = next(line for line in out.splitlines()
               if line.startswith("MigrationStage"))
    return int(row.split()[3])


TABLE_IDS = ("SELECT table_name, id FROM system_schema.tables "
             "WHERE keyspace_name = 'ks'")


def test_concurrent_create_table_settles_on_one_table(cluster, tmp_path):
    """Apps often run CREATE TABLE IF NOT EXISTS at startup, each against
    its own coordinator. When two nodes create the table at the same
    moment, every node must end with the same table (the id that sorts
    first); before, each kept its own id, versions never agreed and every
    write at ALL failed with "unknown table" on the other replicas."""
    drivers, sessions = drivers_on_every_node(
        consistency_level=ConsistencyLevel.ALL)
    sessions[0].execute("CREATE KEYSPACE ks WITH replication = {'class': "
                        "'SimpleStrategy', 'replication_factor': 3}")
    assert drivers[0].control_connection.wait_for_schema_agreement()
    rounds = race(lambda i: [(s, f"CREATE TABLE IF NOT EXISTS ks.t{i} "
                              "(k int PRIMARY KEY, v text)")
                             for s in sessions],
                  lambda: logged(tmp_path, "was created on two nodes"))
    created = [f"t{i}" for i in range(rounds)]
    agree(TABLE_IDS, "tables and ids")
    tables = [t for t, _ in schema_on(IPS[0], TABLE_IDS)[0]]
    assert tables == sorted(created)
    for i, s in enumerate(sessions):
        for t in created:
            s.execute(f"INSERT INTO ks.{t} (k, v) VALUES (%s, 'x')", (i,))
    for s in sessions:
        for t in created:
            assert sorted(r.k for r in s.execute(
                f"SELECT k FROM ks.{t}")) == [0, 1, 2], t
    for d in drivers:
        d.shutdown()
    # A replaced table's node holds both records in its log.
    same_after_restart(cluster, TABLE_IDS, "schema")


def test_concurrent_create_keyspace_settles_on_one_replication(
        cluster, tmp_path):
    """Three nodes create one keyspace at once with replication factors
    1, 2 and 3: every node ends with the same one."""
    drivers, sessions = drivers_on_every_node()
    race(lambda i: [(s, f"CREATE KEYSPACE IF NOT EXISTS k{i} WITH "
                     "replication = {'class': 'SimpleStrategy', "
                     f"'replication_factor': {rf}}}")
                    for rf, s in enumerate(sessions, 1)],
         lambda: logged(tmp_path, "with other options"))
    for d in drivers:
        d.shutdown()
    agree("SELECT keyspace_name, replication FROM system_schema.keyspaces",
          "keyspaces")


def test_columns_added_on_two_nodes_at_once_refuse_reads_and_writes(
        cluster, tmp_path):
    """Cells travel between nodes by column number, and two ALTER TABLE
    ADDs run on two nodes at once number the new columns differently
    there: a text written as one column was then read on the other node as
    the other column, a bigint (garbage). Such a table must answer an error
    on every node instead, until it is dropped."""
    drivers, sessions = drivers_on_every_node(
        consistency_level=ConsistencyLevel.ALL)
    sessions[0].execute("CREATE KEYSPACE ks WITH replication = {'class': "
                        "'SimpleStrategy', 'replication_factor': 3}")
    sessions[0].execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
    assert drivers[0].control_connection.wait_for_schema_agreement()
    race(lambda i: [(sessions[0], f"ALTER TABLE ks.t ADD x{i} text"),
                    (sessions[1], f"ALTER TABLE ks.t ADD y{i} bigint")],
         lambda: logged(tmp_path, "numbered differently"))
    until(lambda: logged(tmp_path, "numbered differently") == 3,
          "every node marks the table")
    for s in sessions:
        for q in ("INSERT INTO ks.t (k, v) VALUES (1, 'a')",
                  "SELECT * FROM ks.t"):
            with pytest.raises(InvalidRequest,
                               match="numbered differently"):
                s.execute(q)
    # The versions now differ for good; pulls that bring nothing back off
    # (every other 250 ms round without it), so the count stops moving.
    seen = [schema_pulls(IPS[0])]

    def pulls_paused():
        time.sleep(2)
        seen.append(schema_pulls(IPS[0]))
        return seen[-1] == seen[-2]
    until(pulls_paused, "node1's schema pulls back off")
    sessions[2].execute("DROP TABLE ks.t")
    sessions[2].execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
    assert drivers[2].control_connection.wait_for_schema_agreement()
    sessions[0].execute("INSERT INTO ks.t (k, v) VALUES (1, 'a')")
    for s in sessions:
        assert [tuple(r) for r in s.execute("SELECT * FROM ks.t")] == [
            (1, "a")]
    for d in drivers:
        d.shutdown()


def test_options_altered_on_two_nodes_at_once_settle_on_the_later(
        cluster, tmp_path):
    """Two operators (or migration tools) change a table's and a
    keyspace's options on two nodes at once. Each node used to keep the
    change that reached it last, so the nodes kept different options and
    schema versions for good, and drivers waited out their agreement
    timeout on every later DDL. The change stamped later must win, per
    option, on every node and after a restart."""
    drivers, sessions = drivers_on_every_node()
    sessions[0].execute("CREATE KEYSPACE ks WITH replication = {'class': "
                        "'SimpleStrategy', 'replication_factor': 3}")
    sessions[0].execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
    assert drivers[0].control_connection.wait_for_schema_agreement()

    def replication(rf):
        return ("ALTER KEYSPACE ks WITH replication = {'class': "
                f"'SimpleStrategy', 'replication_factor': {rf}}}")
    race(lambda i: [(sessions[0], f"ALTER TABLE ks.t WITH comment = "
                     f"'node1 {i}' AND gc_grace_seconds = {i}"),
                    (sessions[1], f"ALTER TABLE ks.t WITH comment = "
                     f"'node2 {i}' AND default_time_to_live = {i}"),
                    (sessions[1], replication(2)),
                    (sessions[2], replication(3))],
         lambda: logged(tmp_path, "options were written later elsewhere"))
    options = ("SELECT comment, gc_grace_seconds, default_time_to_live "
               "FROM system_schema.tables WHERE keyspace_name = 'ks'")
    agree(options, "table options")
    agree("SELECT replication FROM system_schema.keyspaces "
          "WHERE keyspace_name = 'ks'", "replication")
    (comment, gc, ttl), = schema_on(IPS[0], options)[0]
    assert gc == ttl, "each option keeps its last round's value"
    assert comment in (f"node1 {gc}", f"node2 {gc}")
    sessions[2].execute("ALTER TABLE ks.t WITH comment = 'agreed'")
    assert drivers[2].control_connection.wait_for_schema_agreement()
    for d in drivers:
        d.shutdown()
    same_after_restart(cluster, options, "options")
