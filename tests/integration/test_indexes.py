"""Secondary indexes on a real 3-node cluster, RF 3, with the stock DataStax
driver: CREATE INDEX on one node reaches every node (system_schema.indexes,
the driver's metadata and export_as_string), indexed queries answer at the
request's consistency level (Unavailable when too few replicas are up),
page, honour LIMIT and deletions, and the indexes survive a restart of the
whole cluster; DROP INDEX spreads too. Clusters live on 127.0.109.x with a
250 ms gossip interval. No timing thresholds: waits are "until it
happens" with a ceiling that only guards against hanging."""
import os
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel, InvalidRequest, Unavailable
from cassandra.cluster import (EXEC_PROFILE_DEFAULT, Cluster,
                               ExecutionProfile, NoHostAvailable)
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

from conftest import BUILD_DIR, SOURCE_DIR

BASE = "127.0.109."  # test-addresses: 127.0.109.1-3
IPS = [BASE + str(i) for i in (1, 2, 3)]
SAI = "org.apache.cassandra.index.sai.StorageAttachedIndex"


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

    run("create", "ix", "-n", "3", "--racks", "3", "--base-ip", BASE,
        "-c", "gossip_interval=250ms")
    run("start")
    yield run
    subprocess.run(["/usr/bin/python3",
                    str(SOURCE_DIR / "scripts" / "cluster.py"), "-C", "ix",
                    "remove"], env=env, capture_output=True, timeout=60)


def pinned_to(ip):
    pinned = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([ip]))
    return Cluster([ip], protocol_version=4,
                   execution_profiles={EXEC_PROFILE_DEFAULT: pinned})


def until(pred, what, ceiling=60):
    deadline = time.monotonic() + ceiling
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"never happened: {what}")


def indexes_on(ip):
    c = pinned_to(ip)
    try:
        s = c.connect()
        return sorted((r.index_name, r.options["target"]) for r in s.execute(
            "SELECT index_name, options FROM system_schema.indexes "
            "WHERE keyspace_name = 'ks'"))
    finally:
        c.shutdown()


def query(s, cql, cl, fetch=None):
    st = SimpleStatement(cql, consistency_level=cl, fetch_size=fetch)
    return sorted(tuple(r) for r in s.execute(st))


def test_indexes_across_the_cluster(cluster):
    c = pinned_to(IPS[0])
    s = c.connect()
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE ks.t (k int, c int, v int, w text, "
              "PRIMARY KEY (k, c))")
    s.execute("CREATE INDEX ON ks.t (v)")
    s.execute("CREATE CUSTOM INDEX wi ON ks.t (w) USING 'sai' "
              "WITH OPTIONS = {'case_sensitive': 'false'}")
    want = [("t_v_idx", "v"), ("wi", "w")]
    for ip in IPS:
        until(lambda ip=ip: indexes_on(ip) == want, f"indexes on {ip}")

    # The driver's metadata: the indexes and the CQL it would export.
    c.refresh_schema_metadata()
    t = c.metadata.keyspaces["ks"].tables["t"]
    assert sorted(t.indexes) == ["t_v_idx", "wi"]
    text = t.export_as_string()
    assert (f"CREATE CUSTOM INDEX t_v_idx ON ks.t (v) USING '{SAI}';"
            in text), text
    assert ("CREATE CUSTOM INDEX wi ON ks.t (w) USING "
            f"'{SAI}' WITH OPTIONS = {{'case_sensitive': 'false'}};"
            in text), text

    ins = s.prepare("INSERT INTO ks.t (k, c, v, w) VALUES (?, ?, ?, ?)")
    ins.consistency_level = ConsistencyLevel.ALL
    for k in range(40):
        for cc in range(5):
            s.execute(ins, (k, cc, (k * 5 + cc) % 10,
                            "Even" if cc % 2 == 0 else "odd"))
    threes = sorted((k, cc) for k in range(40) for cc in range(5)
                    if (k * 5 + cc) % 10 == 3)
    assert len(threes) == 20
    for cl in (ConsistencyLevel.ONE, ConsistencyLevel.QUORUM,
               ConsistencyLevel.ALL):
        # paged by 3 rows: every page comes back, no row twice
        assert query(s, "SELECT k, c FROM ks.t WHERE v = 3", cl,
                     fetch=3) == threes
    assert len(query(s, "SELECT k, c FROM ks.t WHERE v = 3 LIMIT 7",
                     ConsistencyLevel.QUORUM)) == 7
    evens = sorted((k, cc) for k in range(40) for cc in range(5)
                   if cc % 2 == 0 and (k * 5 + cc) % 10 == 4)
    assert query(s, "SELECT k, c FROM ks.t WHERE v = 4 AND w = 'EVEN'",
                 ConsistencyLevel.QUORUM, fetch=4) == evens
    assert query(s, "SELECT k, c FROM ks.t WHERE k = 2 AND v = 3",
                 ConsistencyLevel.QUORUM) == [(2, 3)]
    # a clustering restriction beside an indexed one is filtered
    assert query(s, "SELECT k, c FROM ks.t WHERE c = 3 AND v = 3",
                 ConsistencyLevel.QUORUM, fetch=2) == threes

    # A deletion and an overwrite through another coordinator.
    c2 = pinned_to(IPS[1])
    s2 = c2.connect()
    s2.execute(SimpleStatement("DELETE FROM ks.t WHERE k = %s AND c = %s",
                               consistency_level=ConsistencyLevel.QUORUM),
               threes[0])
    s2.execute(SimpleStatement("UPDATE ks.t SET v = 9 WHERE k = %s AND "
                               "c = %s",
                               consistency_level=ConsistencyLevel.QUORUM),
               threes[1])
    c2.shutdown()
    assert query(s, "SELECT k, c FROM ks.t WHERE v = 3",
                 ConsistencyLevel.QUORUM, fetch=5) == threes[2:]

    # One node down: QUORUM answers, ALL is unavailable.
    cluster("node", "node3", "stop")
    until(lambda: query_or_none(s, ConsistencyLevel.QUORUM) == threes[2:],
          "a QUORUM index query with a node down")
    # (the driver reports the one host's Unavailable as NoHostAvailable)
    with pytest.raises((Unavailable, NoHostAvailable),
                       match="Cannot achieve consistency level ALL"):
        s.execute(SimpleStatement("SELECT k FROM ks.t WHERE v = 3",
                                  consistency_level=ConsistencyLevel.ALL))
    c.shutdown()

    # The whole cluster restarted: the indexes are still there and serve.
    cluster("stop")
    cluster("start")
    for ip in IPS:
        until(lambda ip=ip: indexes_on(ip) == want, f"indexes on {ip}")
    c = pinned_to(IPS[2])
    s = c.connect()
    until(lambda: query_or_none(s, ConsistencyLevel.ALL) == threes[2:],
          "an ALL index query after the restart")
    s.execute("DROP INDEX ks.t_v_idx")
    for ip in IPS:
        until(lambda ip=ip: indexes_on(ip) == [("wi", "w")],
              f"the drop on {ip}")
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        s.execute("SELECT k FROM ks.t WHERE v = 3")
    c.shutdown()


def query_or_none(s, cl):
    try:
        return query(s, "SELECT k, c FROM ks.t WHERE v = 3", cl, fetch=6)
    except Exception:  # noqa: BLE001 - retried until the cluster settles
        return None
