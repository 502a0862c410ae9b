"""The node's own trace writes are not client batches: with
batch_size_warn_threshold and batch_size_fail_threshold far below the
size of a trace session's batch, a traced read over many partitions keeps
every event (the session's and its replica's), and the log has no batch
warning for system_traces, while a client's batch of that size is still
refused. Cassandra's trace writes never meet the batch guards.
Addresses 127.0.119.1."""
from cassandra import InvalidRequest
import pytest

from clusters import session
from conftest import default_yaml, seeds_yaml
from test_tracing import events_until

IP = "127.0.119.1"
KEYS = 120


@pytest.fixture
def node(make_node):
    n = make_node(default_yaml(listen_address=IP, rpc_address=IP,
                               seed_provider=seeds_yaml(IP),
                               batch_size_warn_threshold="1KiB",
                               batch_size_fail_threshold="2KiB"))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    return n


def test_trace_batches_skip_the_batch_size_guards(node):
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE ks WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
        for k in range(KEYS):
            s.execute("INSERT INTO ks.t (k, v) VALUES (%s, 'v')", [k])
        # a client's batch past 2 KiB is refused: the guards are on
        big = "BEGIN UNLOGGED BATCH " + "".join(
            f"INSERT INTO ks.t (k, v) VALUES ({k}, '{'x' * 100}'); "
            for k in range(40)) + "APPLY BATCH"
        with pytest.raises(InvalidRequest, match="Batch too large"):
            s.execute(big)
        # one between the thresholds runs, with the warning in the log
        mid = "BEGIN UNLOGGED BATCH " + "".join(
            f"INSERT INTO ks.t (k, v) VALUES ({k}, '{'x' * 100}'); "
            for k in range(12)) + "APPLY BATCH"
        s.execute(mid)
        # one traced read of every key: the session's batch carries the
        # whole query text (over 2 KiB), the replica's many events go in
        # batches of up to 16 KiB of text
        keys = ", ".join(str(k) for k in range(KEYS))
        q = f"SELECT k, v FROM ks.t WHERE k IN ({keys}) /* {'c' * 2048} */"
        rs = s.execute(q, trace=True)
        assert len(list(rs)) == KEYS
        trace = rs.get_query_trace(max_wait_sec=30)
        assert trace.parameters["query"] == q

        def reads(rows):
            return [r for r in rows if r.activity ==
                    "Executing single-partition query on ks.t"]
        rows = events_until(s, trace.trace_id,
                            lambda rs: len(reads(rs)) >= KEYS)
        acts = [r.activity for r in rows]
        assert len(reads(rows)) == KEYS, acts
        assert acts[0].startswith("Parsing SELECT k, v FROM ks.t"), acts
        assert "Preparing statement" in acts
        assert acts.count("Merged data from memtables and 0 sstables") \
            == KEYS, acts
    finally:
        cluster.shutdown()
    log = node.log()
    assert "Batch for [ks.t] is of size" in log  # the client's warning path
    assert "system_traces" not in "".join(
        line for line in log.splitlines(True)
        if "Batch for [" in line or "Batch too large" in line), log
