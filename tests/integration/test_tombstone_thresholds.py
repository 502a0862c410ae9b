"""Cassandra's read tombstone thresholds on a real cassinid through the
stock DataStax driver: past tombstone_warn_threshold the replica logs
"Read N live rows and M tombstone cells for query ..." and the client gets
Cassandra 4.1's coordinator warning; past tombstone_failure_threshold the
read fails with ReadFailure (TombstoneOverwhelming). Addresses: the
127.0.75.x block.
"""
import pytest
from cassandra import ReadFailure
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.cqltypes import Int32Type
from cassandra.metadata import Murmur3Token
from cassandra.policies import WhiteListRoundRobinPolicy

from conftest import default_yaml

IP = "127.0.75.1"
WARN, FAIL = 10, 100


@pytest.fixture
def session(make_node):
    node = make_node(default_yaml(listen_address=IP,
                                  tombstone_warn_threshold=WARN,
                                  tombstone_failure_threshold=FAIL))
    node.start()
    assert node.wait_for_log("CQL clients on"), node.log()
    pinned = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([IP]),
        request_timeout=60)
    cluster = Cluster([IP], protocol_version=4,
                      execution_profiles={EXEC_PROFILE_DEFAULT: pinned})
    s = cluster.connect()
    s.execute("CREATE KEYSPACE ks WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE ks.t (k int, c int, v int, PRIMARY KEY (k, c))")
    s.execute("CREATE TABLE ks.r (k int, c int, v int, PRIMARY KEY (k, c))")
    yield node, s
    cluster.shutdown()


def fill(s, table, k, live, deleted):
    ins = s.prepare(f"INSERT INTO ks.{table} (k, c, v) VALUES (?, ?, 1)")
    dele = s.prepare(f"DELETE FROM ks.{table} WHERE k = ? AND c = ?")
    for c in range(live):
        s.execute(ins, (k, c))
    for c in range(live, live + deleted):
        s.execute(dele, (k, c))


def token(k):
    return Murmur3Token.from_key(Int32Type.serialize(k, 4)).value


def test_under_the_warning_threshold_nothing_is_said(session):
    node, s = session
    fill(s, "t", 3, 2, WARN)  # exactly the threshold: no warning
    f = s.execute_async("SELECT * FROM ks.t WHERE k = 3")
    assert len(f.result().current_rows) == 2
    assert not f.warnings


def test_past_the_warning_threshold_the_client_is_warned(session):
    node, s = session
    fill(s, "t", 1, 3, 20)
    tok = token(1)
    f = s.execute_async("SELECT * FROM ks.t WHERE k = 1")
    assert len(f.result().current_rows) == 3
    shape = f"SELECT * FROM ks.t WHERE token(k) = {tok}"
    assert f.warnings == [
        f"1 nodes scanned up to 20 tombstones and issued tombstone "
        f"warnings for query {shape}  (see tombstone_warn_threshold)"]
    assert node.wait_for_log(
        f"Read 3 live rows and 20 tombstone cells for query {shape} "
        f"(see tombstone_warn_threshold)"), node.log()


def test_a_scan_is_warned_with_its_token_range(session):
    node, s = session
    fill(s, "r", 1, 1, 30)
    f = s.execute_async("SELECT * FROM ks.r")
    assert len(f.result().current_rows) == 1
    assert len(f.warnings) == 1, f.warnings
    w = f.warnings[0]
    assert w.startswith("1 nodes scanned up to 30 tombstones and issued "
                        "tombstone warnings for query SELECT * FROM ks.r "
                        "WHERE token(k) > "), w


def test_past_the_failure_threshold_the_read_fails(session):
    node, s = session
    fill(s, "t", 2, 1, FAIL + 5)
    tok = token(2)
    with pytest.raises(ReadFailure) as e:
        s.execute("SELECT * FROM ks.t WHERE k = 2")
    assert e.value.failures == 1
    assert (f"1 nodes scanned over {FAIL} tombstones and aborted the query "
            f"SELECT * FROM ks.t WHERE token(k) = {tok} (see "
            f"tombstone_failure_threshold)") in str(e.value), str(e.value)
    assert node.wait_for_log(f"Scanned over {FAIL} tombstones during query "
                             f"SELECT * FROM ks.t WHERE token(k) = {tok}"), \
        node.log()
    # the partition next to it still reads
    fill(s, "t", 4, 2, 0)
    assert len(s.execute("SELECT * FROM ks.t WHERE k = 4").current_rows) \
        == 2
