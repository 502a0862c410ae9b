"""Native protocol v5 on a real cassinid through the stock DataStax driver:
a Cluster left to negotiate settles on v5 (segments, LZ4 when the driver
has lz4); prepared statements, paging, batches, the v5 keyspace flag,
values larger than a segment, errors (ReadFailure past the tombstone
failure threshold), a login (SASL in segments), and a schema change that
alters a prepared SELECT's columns: the ALTER evicts the statement, the
new PREPARE carries a new result_metadata_id, and an EXECUTE still holding
the old id gets Rows with METADATA_CHANGED and the new id. v3 and v4 still
work on the same node. Addresses: the 127.0.127.x block.
"""
import pytest
from cassandra import ConsistencyLevel, InvalidRequest, ReadFailure
from cassandra.cluster import Cluster, DefaultConnection
from cassandra.connection import DefaultEndPoint
from cassandra.protocol import ExecuteMessage, PrepareMessage, QueryMessage
from cassandra.query import BatchStatement, SimpleStatement

from conftest import default_yaml

IP = "127.0.127.1"
FAIL = 100

try:
    import lz4.block  # noqa: F401
    HAVE_LZ4 = True
except ImportError:
    HAVE_LZ4 = False


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    from conftest import Node
    n = Node(tmp_path_factory.mktemp("v5") / "node1",
             default_yaml(listen_address=IP,
                          tombstone_warn_threshold=10,
                          tombstone_failure_threshold=FAIL))
    n.start()
    assert n.wait_for_log("CQL clients on"), n.log()
    cluster = Cluster([IP], protocol_version=4)
    s = cluster.connect()
    s.execute("CREATE KEYSPACE ks WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE ks.t (k int, c int, v text, "
              "PRIMARY KEY (k, c))")
    cluster.shutdown()
    yield n
    n.kill()


@pytest.fixture(params=["plain", "lz4"])
def session(node, request):
    if request.param == "lz4" and not HAVE_LZ4:
        pytest.skip("python3-lz4 is not installed")
    # no protocol_version: the driver starts high and steps down
    cluster = Cluster([IP], compression=request.param == "lz4")
    s = cluster.connect()
    yield s
    cluster.shutdown()


def test_a_default_cluster_negotiates_v5_with_segments(session):
    cluster = session.cluster
    assert cluster.protocol_version == 5
    conn = cluster.control_connection._connection
    assert conn.protocol_version == 5
    assert conn._is_checksumming_enabled
    lz4 = cluster.compression is True
    assert (conn.compressor is not None) == lz4
    row = session.execute("SELECT release_version FROM system.local").one()
    assert row.release_version


def test_prepared_paging_batches_and_the_keyspace_flag(session):
    session.execute("DELETE FROM ks.t WHERE k = 1")  # each param's own run
    ins = session.prepare("INSERT INTO ks.t (k, c, v) VALUES (?, ?, ?)")
    assert len(ins.result_metadata_id) == 16
    for c in range(250):
        session.execute(ins, (1, c, f"v{c}"))
    sel = session.prepare("SELECT c, v FROM ks.t WHERE k = ?")
    sel.fetch_size = 40
    rows = list(session.execute(sel, (1,)))
    assert [r.c for r in rows] == list(range(250))
    # a BATCH of prepared statements carries the keyspace flag
    b = BatchStatement()
    for c in range(250, 260):
        b.add(ins, (1, c, "b"))
    session.execute(b)
    # no USE anywhere: the statement names its keyspace with the flag
    st = SimpleStatement("SELECT count(*) FROM t WHERE k = 1", keyspace="ks")
    assert session.execute(st).one()[0] == 260
    p = session.prepare("SELECT v FROM t WHERE k = 1 AND c = 3",
                        keyspace="ks")
    assert session.execute(p).one().v == "v3"
    with pytest.raises(InvalidRequest, match="No keyspace has been"):
        session.execute("SELECT count(*) FROM t WHERE k = 1")


def test_values_larger_than_a_segment_round_trip(session):
    ins = session.prepare("INSERT INTO ks.t (k, c, v) VALUES (2, ?, ?)")
    big = "".join(chr(ord("a") + i % 26) for i in range(400000))
    session.execute(ins, (1, big))
    session.execute("INSERT INTO ks.t (k, c, v) VALUES (2, 2, %s)", (big,))
    rows = list(session.execute("SELECT c, v FROM ks.t WHERE k = 2"))
    assert [(r.c, r.v == big) for r in rows] == [(1, True), (2, True)]


def test_errors_arrive_in_v5_shapes(session):
    with pytest.raises(InvalidRequest, match="unconfigured table nope"):
        session.execute("SELECT * FROM ks.nope")
    dele = session.prepare("DELETE FROM ks.t WHERE k = 9 AND c = ?")
    for c in range(FAIL + 1):
        session.execute(dele, (c,))
    with pytest.raises(ReadFailure) as e:
        session.execute("SELECT * FROM ks.t WHERE k = 9")
    # v5's reason map replaces the count: the replica (this node) and
    # RequestFailureReason's READ_TOO_MANY_TOMBSTONES (0x0001)
    assert e.value.error_code_map == {IP: 0x0001}
    assert e.value.failures == 1
    # the connection goes on
    assert session.execute("SELECT count(*) FROM ks.t WHERE k = 1").one()


def test_v4_read_failure_counts_the_failed_replica(node):
    # before v5 a count of the failed replicas, no map
    cluster = Cluster([IP], protocol_version=4)
    s = cluster.connect()
    try:
        dele = s.prepare("DELETE FROM ks.t WHERE k = 10 AND c = ?")
        for c in range(FAIL + 1):
            s.execute(dele, (c,))
        with pytest.raises(ReadFailure) as e:
            s.execute("SELECT * FROM ks.t WHERE k = 10")
        assert e.value.failures == 1
        assert e.value.error_code_map is None
    finally:
        cluster.shutdown()


def test_a_schema_change_is_reported_as_metadata_changed(node):
    conn = DefaultConnection.factory(DefaultEndPoint(IP, 9042), 10,
                                     protocol_version=5)
    try:
        conn.wait_for_response(QueryMessage(
            "CREATE TABLE ks.m (k int PRIMARY KEY, a int)",
            ConsistencyLevel.ONE), timeout=10)
        conn.wait_for_response(QueryMessage(
            "INSERT INTO ks.m (k, a) VALUES (1, 10)", ConsistencyLevel.ONE),
            timeout=10)
        prep = conn.wait_for_response(
            PrepareMessage("SELECT * FROM ks.m WHERE k = 1"), timeout=10)
        old = prep.result_metadata_id
        assert len(old) == 16

        def execute(meta_id):
            r = conn.wait_for_response(ExecuteMessage(
                prep.query_id, [], ConsistencyLevel.ONE, skip_meta=True,
                result_metadata_id=meta_id), timeout=10)
            # set only when the Rows carry METADATA_CHANGED
            r.new_id = getattr(r, "result_metadata_id", None)
            return r

        r = execute(old)
        assert r.new_id is None  # current: no METADATA_CHANGED
        assert r.column_names == ["k", "a"]
        conn.wait_for_response(QueryMessage(
            "ALTER TABLE ks.m ADD b text", ConsistencyLevel.ONE), timeout=10)
        # the ALTER evicted the statement: the driver prepares it again
        # and gets the new columns' id
        ok, err = conn.wait_for_responses(ExecuteMessage(
            prep.query_id, [], ConsistencyLevel.ONE,
            result_metadata_id=old), timeout=10, fail_on_error=False)[0]
        assert not ok and type(err).__name__ == "PreparedQueryNotFound"
        prep = conn.wait_for_response(
            PrepareMessage("SELECT * FROM ks.m WHERE k = 1"), timeout=10)
        new = prep.result_metadata_id
        assert len(new) == 16 and new != old
        assert execute(new).new_id is None
        # a client still holding the old id is told, with the new one
        r = execute(old)
        assert r.new_id == new
        assert r.column_names == ["k", "a", "b"]
        assert r.parsed_rows[0][:2] == (1, 10)
    finally:
        conn.close()


@pytest.mark.parametrize("version", [3, 4])
def test_v3_and_v4_still_work_beside_v5(node, version):
    cluster = Cluster([IP], protocol_version=version)
    try:
        s = cluster.connect("ks")
        assert cluster.protocol_version == version
        ins = s.prepare("INSERT INTO t (k, c, v) VALUES (3, ?, 'x')")
        for c in range(30):
            s.execute(ins, (c,))
        sel = s.prepare("SELECT c FROM t WHERE k = 3")
        sel.fetch_size = 7
        assert [r.c for r in s.execute(sel)] == list(range(30))
    finally:
        cluster.shutdown()


def test_v5_login_after_authenticate(tmp_path):
    # AUTHENTICATE is the last plain envelope: the SASL exchange is in
    # segments
    import time
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import NoHostAvailable
    from conftest import Node
    ip = "127.0.127.2"
    n = Node(tmp_path / "auth",
             default_yaml(listen_address=ip,
                          authenticator="PasswordAuthenticator",
                          superuser_setup_delay="500ms"))
    n.start()
    try:
        assert n.wait_for_log("CQL clients on"), n.log()

        def connect(password):
            c = Cluster([ip], auth_provider=PlainTextAuthProvider(
                "cassandra", password))
            return c, c.connect()

        deadline = time.monotonic() + 60
        while True:
            try:
                c, s = connect("cassandra")
                break
            except NoHostAvailable:
                assert time.monotonic() < deadline, n.log()
                time.sleep(0.5)
        try:
            assert c.protocol_version == 5
            assert c.control_connection._connection._is_checksumming_enabled
            assert s.execute("SELECT role FROM system_auth.roles").one()
        finally:
            c.shutdown()
        with pytest.raises(NoHostAvailable, match="Bad credentials|"
                           "Provided username"):
            connect("wrong")
    finally:
        n.kill()
