"""Schema on a real 3-node cluster: DDL on one node reaches every node
(push), the driver sees agreement, and a node that was down catches up when
it returns (pull on a gossiped version mismatch). Clusters live on
127.0.4.x with a 250 ms gossip interval. No timing thresholds: waits are
"until it happens" with a ceiling that only guards against hanging."""
import os
import subprocess
import time

import pytest
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


def tables_on(ip):
    # Pinned to `ip`: by default the driver spreads queries over every node
    # it discovers, and this must ask that one node.
    pinned = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([ip]))
    c = Cluster([ip], protocol_version=4,
                execution_profiles={EXEC_PROFILE_DEFAULT: pinned})
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
