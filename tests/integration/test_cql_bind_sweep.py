"""Null and unset bound into every bind position of every statement shape
(INSERT, UPDATE, DELETE, SELECT; keys, clustering slices, IN, collections,
USING TTL / TIMESTAMP, LIMIT, PER PARTITION LIMIT, token(), batches), each
answer checked against Cassandra 4.1's: success, or InvalidRequest with
its words. No answer may be a server error: `DELETE ... WHERE p = ? AND
c >= ?` with a null bound once answered one ("range tombstone"), which
drivers report as NoHostAvailable.

Cassandra's rules, from its sources: a key column read as a condition
(SingleColumnRestriction; an INSERT's key columns too) refuses null ("Invalid
null value in condition for column c") and unset ("Invalid unset value for
column c"); a bound IN list refuses null as "Invalid null value for column
c"; an unset TTL, timestamp or LIMIT is "not given", a null TTL is no TTL, a
null timestamp or LIMIT is refused (Attributes, SelectStatement.getLimit);
adding, removing or prepending null or unset does nothing; map keys and set
elements refuse null (Maps.SetterByKey, Sets.ElementDiscarder); filtering
refuses both as "Unsupported ... value" (RowFilter.Expression.validate).
"""
import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Cluster, NoHostAvailable
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.protocol import ServerError
from cassandra.query import UNSET_VALUE, BatchStatement

from conftest import default_yaml

ADDRESS = "127.0.55.1"  # a block of its own: suites run in parallel

OK = None


def cond(col):
    return (f"Invalid null value in condition for column {col}",
            f"Invalid unset value for column {col}")


def in_list(col):
    return (f"Invalid null value for column {col}",
            f"Invalid unset value for column {col}")


def tuple_field(col, i):
    return (f"Invalid null value in condition for column {col}",
            f"Invalid unset value for tuple field number {i}")


NOTHING = (OK, OK)  # null and unset both succeed
TIMESTAMP = ("Invalid null value of timestamp", OK)
LIMIT = ("Invalid null value of limit", OK)
MAP_KEY = ("Invalid null map key", "Invalid unset map key")
KEYS3 = [cond("p"), cond("c"), cond("c2")]

# (statement, valid values, what null and unset in each position answer)
WRITES = [
    ("INSERT INTO t (p, c, c2, v) VALUES (?, ?, ?, ?)", (1, 1, 1, 1),
     KEYS3 + [NOTHING]),
    ("INSERT INTO t (p, c, c2, v) VALUES (?, ?, ?, ?) USING TTL ? AND "
     "TIMESTAMP ?", (1, 1, 1, 1, 100, 1000), KEYS3 + [NOTHING, NOTHING,
                                                      TIMESTAMP]),
    ("INSERT INTO t (p, c, c2, l, st, m) VALUES (?, ?, ?, ?, ?, ?)",
     (1, 1, 1, [1], {1}, {1: 1}), KEYS3 + [NOTHING] * 3),
    ("INSERT INTO t (p, s) VALUES (?, ?)", (1, 1), [cond("p"), NOTHING]),
    ("INSERT INTO t (p, c, c2, s) VALUES (?, ?, ?, ?) USING TIMESTAMP ?",
     (1, 1, 1, 1, 5), KEYS3 + [NOTHING, TIMESTAMP]),
    ("UPDATE t USING TTL ? SET v = ? WHERE p = ? AND c = ? AND c2 = ?",
     (100, 1, 1, 1, 1), [NOTHING, NOTHING] + KEYS3),
    ("UPDATE t USING TIMESTAMP ? SET v = ? WHERE p = ? AND c = ? AND "
     "c2 = ?", (1000, 1, 1, 1, 1), [TIMESTAMP, NOTHING] + KEYS3),
    ("UPDATE t SET l = l + ?, st = st + ?, m = m + ? WHERE p = ? AND c = ? "
     "AND c2 = ?", ([1], {1}, {1: 1}, 1, 1, 1), [NOTHING] * 3 + KEYS3),
    ("UPDATE t SET l = ? + l, st = st - ? WHERE p = ? AND c = ? AND c2 = ?",
     ([1], {1}, 1, 1, 1), [NOTHING] * 2 + KEYS3),
    ("UPDATE t SET l = ?, st = ?, m = ? WHERE p = ? AND c = ? AND c2 = ?",
     ([1], {1}, {1: 1}, 1, 1, 1), [NOTHING] * 3 + KEYS3),
    ("UPDATE t SET m[?] = ? WHERE p = ? AND c = ? AND c2 = ?",
     (1, 1, 1, 1, 1), [MAP_KEY, NOTHING] + KEYS3),
    ("UPDATE t SET v = ? WHERE p IN (?, ?) AND c IN ? AND c2 = ?",
     (1, 1, 2, [1, 2], 1),
     [NOTHING, cond("p"), cond("p"), in_list("c"), cond("c2")]),
    ("UPDATE t SET s = ? WHERE p = ?", (1, 1), [NOTHING, cond("p")]),
    ("DELETE FROM t WHERE p = ? AND c = ? AND c2 = ?", (1, 1, 1), KEYS3),
    ("DELETE FROM t WHERE p = ? AND c >= ? AND c < ?", (1, 1, 5),
     [cond("p"), cond("c"), cond("c")]),
    ("DELETE FROM t WHERE p = ? AND c = ? AND c2 > ?", (1, 1, 1), KEYS3),
    ("DELETE FROM t WHERE p = ? AND c IN (?, ?)", (1, 1, 2),
     [cond("p"), cond("c"), cond("c")]),
    ("DELETE v FROM t USING TIMESTAMP ? WHERE p = ? AND c = ? AND c2 = ?",
     (10, 1, 1, 1), [TIMESTAMP] + KEYS3),
    ("DELETE m[?], st[?] FROM t WHERE p = ? AND c = ? AND c2 = ?",
     (1, 1, 1, 1, 1),
     [MAP_KEY, ("Invalid null set element", OK)] + KEYS3),
    ("DELETE FROM t WHERE p IN ?", ([1, 2],), [in_list("p")]),
    ("DELETE s FROM t WHERE p = ?", (1,), [cond("p")]),
    ("INSERT INTO k2 (a, b, c, v) VALUES (?, ?, ?, ?)", (1, "x", 1, 1),
     [cond("a"), cond("b"), cond("c"), NOTHING]),
    ("BEGIN BATCH USING TIMESTAMP ? INSERT INTO t (p, c, c2, v) VALUES "
     "(?, ?, ?, ?); DELETE FROM t WHERE p = ? AND c > ?; APPLY BATCH",
     (2000, 1, 1, 1, 1, 2, 3),
     [TIMESTAMP] + KEYS3 + [NOTHING, cond("p"), cond("c")]),
]

READS = [
    ("SELECT * FROM t WHERE p = ? AND c = ? AND c2 = ?", (1, 1, 1), KEYS3),
    ("SELECT * FROM t WHERE p = ? AND c > ? AND c <= ?", (1, 0, 5),
     [cond("p"), cond("c"), cond("c")]),
    ("SELECT * FROM t WHERE p = ? AND (c, c2) > (?, ?)", (1, 0, 0),
     [cond("p"), tuple_field("c", 0), tuple_field("c2", 1)]),
    ("SELECT * FROM t WHERE p = ? AND (c, c2) = (?, ?)", (1, 1, 1),
     [cond("p"), tuple_field("c", 0), tuple_field("c2", 1)]),
    ("SELECT * FROM t WHERE p IN ? AND c IN ?", ([1, 2], [1]),
     [in_list("p"), in_list("c")]),
    ("SELECT * FROM t WHERE p IN (?, ?)", (1, 2), [cond("p"), cond("p")]),
    ("SELECT * FROM t WHERE p = ? AND c = ? AND c2 IN (?, ?) ORDER BY c2 "
     "DESC", (1, 1, 1, 2), KEYS3[:2] + [cond("c2"), cond("c2")]),
    ("SELECT * FROM t WHERE token(p) > ? AND token(p) <= ?", (-5, 5),
     [("Invalid null token value", "Invalid unset token value")] * 2),
    ("SELECT * FROM t WHERE token(p) >= token(?)", (1,),
     [("Invalid null token value", "Invalid unset value for argument in "
       "call to function token")]),
    ("SELECT * FROM t WHERE p = ? LIMIT ?", (1, 10), [cond("p"), LIMIT]),
    ("SELECT * FROM t PER PARTITION LIMIT ? LIMIT ?", (1, 10),
     [LIMIT, LIMIT]),
    ("SELECT * FROM t WHERE p = ? PER PARTITION LIMIT ?", (1, 1),
     [cond("p"), LIMIT]),
    ("SELECT * FROM t WHERE v = ? ALLOW FILTERING", (1,),
     [("Unsupported null value for column v",
       "Unsupported unset value for column v")]),
    ("SELECT DISTINCT p, s FROM t WHERE p = ?", (1,), [cond("p")]),
    ("SELECT count(*), max(v) FROM t WHERE p = ? AND c = ?", (1, 1),
     KEYS3[:2]),
    ("SELECT writetime(v), ttl(v), token(p) FROM t WHERE p = ? AND "
     "c = ? AND c2 = ?", (1, 1, 1), KEYS3),
    ("SELECT * FROM k2 WHERE a = ? AND b IN ?", (1, ["x", "y"]),
     [cond("a"), in_list("b")]),
    ("SELECT * FROM k2 WHERE token(a, b) > token(?, ?)", (1, "x"),
     [("Invalid null token value", "Invalid unset value for argument in "
       "call to function token")] * 2),
]


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    from conftest import Node
    n = Node(tmp_path_factory.mktemp("sweep"),
             default_yaml(listen_address=ADDRESS))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=30), n.log()
    # Not token-aware: an unset key must reach the node, not the driver's
    # routing.
    cluster = Cluster([ADDRESS], protocol_version=4,
                      load_balancing_policy=WhiteListRoundRobinPolicy(
                          [ADDRESS]))
    s = cluster.connect()
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.set_keyspace("ks")
    s.execute("CREATE TABLE t (p int, c int, c2 int, s int static, v int, "
              "l list<int>, st set<int>, m map<int, int>, "
              "PRIMARY KEY (p, c, c2))")
    s.execute("CREATE TABLE k2 (a int, b text, c int, v int, "
              "PRIMARY KEY ((a, b), c))")
    yield n, s
    cluster.shutdown()
    assert n.proc.poll() is None, n.log()[-3000:]
    n.kill()


def answer(session, stmt):
    """None for success, else the error's message; a server error (or
    anything but InvalidRequest) fails the test."""
    try:
        session.execute(stmt)
        return None
    except NoHostAvailable as e:
        errors = list(e.errors.values())
        pytest.fail(f"NoHostAvailable: {errors}")
    except ServerError as e:
        pytest.fail(f"server error: {e}")
    except InvalidRequest as e:
        msg = str(e)
        return msg.split('message="', 1)[1][:-1] if 'message="' in msg \
            else msg


def bound_with(prepared, values, i, value):
    b = prepared.bind(values)
    vals = list(b.values)
    vals[i] = value
    b.values = vals
    return b


def sweep(session, shapes, in_batch):
    problems, count = [], 0
    for cql, values, expect in shapes:
        batchable = in_batch and not cql.startswith("BEGIN")
        if in_batch and not batchable:
            continue
        prepared = session.prepare(cql)
        assert len(expect) == len(prepared.column_metadata), cql
        for i, (null, unset) in enumerate(expect):
            for value, want in ((None, null), (UNSET_VALUE, unset)):
                stmt = bound_with(prepared, values, i, value)
                if batchable:
                    batch = BatchStatement()
                    # a routing key of its own: the driver computes none
                    # from an unset key (nor needs one, not token-aware)
                    batch.routing_key = b"\0"
                    batch.add(stmt)
                    stmt = batch
                got = answer(session, stmt)
                count += 1
                if got != want:
                    what = "null" if value is None else "unset"
                    problems.append(f"{cql!r} #{i} {what}: got {got!r}, "
                                    f"want {want!r}")
        # with every value given the statement succeeds
        assert answer(session, prepared.bind(values)) is None, cql
    assert not problems, "\n".join(problems)
    return count


def test_null_and_unset_in_every_write_position(session):
    n, s = session
    assert sweep(s, WRITES, in_batch=False) > 100
    assert n.proc.poll() is None


def test_null_and_unset_in_every_write_position_of_a_batch(session):
    n, s = session
    assert sweep(s, WRITES, in_batch=True) > 100
    assert n.proc.poll() is None


def test_null_and_unset_in_every_read_position(session):
    n, s = session
    assert sweep(s, READS, in_batch=False) > 50
    assert n.proc.poll() is None


def test_operations_that_need_a_counter_are_refused_at_prepare(session):
    """Cassandra checks an operation against its column's type when it
    prepares the statement; the driver then never gets an id."""
    _, s = session
    for cql, msg in [
            ("UPDATE t SET v = v + ? WHERE p = ? AND c = ? AND c2 = ?",
             "Invalid operation (v = v + ?) for non counter column v"),
            ("UPDATE t SET v = v - 1 WHERE p = ? AND c = ? AND c2 = ?",
             "Invalid operation (v = v - 1) for non counter column v"),
            ("DELETE s FROM t WHERE p = ? AND c = ?",
             "Invalid restrictions on clustering columns since the DELETE "
             "statement modifies only static columns"),
            ("SELECT DISTINCT p FROM t PER PARTITION LIMIT ?",
             "PER PARTITION LIMIT is not allowed with SELECT DISTINCT "
             "queries"),
            ("BEGIN BATCH UPDATE t SET v = v + 1 WHERE p = ? AND c = 1 AND "
             "c2 = 1; APPLY BATCH",
             "Invalid operation (v = v + 1) for non counter column v")]:
        with pytest.raises(InvalidRequest) as e:
            s.prepare(cql)
        assert msg in str(e.value), cql
