"""Query tracing through the python driver on three nodes (RF 3): a traced
statement's reply carries a session id, and system_traces.sessions/events
(Cassandra 4.1's tables, TTL 86400) hold the coordinator's session and
events, and the replicas' events under the coordinator's session id, as
cqlsh's TRACING ON reads them. Addresses 127.0.110.x."""
import re
import socket
import struct
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

from clusters import session, tool_run
from conftest import default_yaml, seeds_yaml, wait_all_normal

IPS = ["127.0.110.1", "127.0.110.2", "127.0.110.3"]


@pytest.fixture
def three_nodes(make_node):
    nodes = []
    for i, ip in enumerate(IPS):
        # no hints: a node that missed a write stays stale until a
        # read repairs it (test_a_traced_read_repair)
        n = make_node(default_yaml(listen_address=ip, rpc_address=ip,
                                   seed_provider=seeds_yaml(IPS[0]),
                                   hinted_handoff_enabled="false"),
                      name=f"node{i + 1}")
        nodes.append(n)
    for n in nodes:
        n.start()
        assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    wait_all_normal(IPS, timeout=60)
    return nodes


def test_traced_select_writes_a_session_with_events(three_nodes):
    cluster, s = session(IPS[0])
    try:
        s.execute("CREATE KEYSPACE ks WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
        s.execute("INSERT INTO ks.t (k, v) VALUES (1, 'one')")
        q = SimpleStatement("SELECT v FROM ks.t WHERE k = 1",
                            consistency_level=ConsistencyLevel.QUORUM)
        rs = s.execute(q, trace=True)
        assert rs.one().v == "one"
        trace = rs.get_query_trace(max_wait_sec=30)
        assert trace.request_type == "Execute CQL3 query"
        assert trace.parameters["query"] == "SELECT v FROM ks.t WHERE k = 1"
        assert trace.parameters["consistency_level"] == "QUORUM"
        assert trace.duration.total_seconds() > 0
        assert str(trace.coordinator) in IPS
        acts = [e.description for e in trace.events]
        assert acts[0] == "Parsing SELECT v FROM ks.t WHERE k = 1", acts
        assert "Preparing statement" in acts
        for e in trace.events:
            if e.description.startswith(("Parsing", "Preparing")):
                assert str(e.source) == str(trace.coordinator)
            assert e.source_elapsed is not None
        # Cassandra's trace TTL on the rows
        ttl = s.execute("SELECT TTL(duration) AS t FROM "
                        "system_traces.sessions WHERE session_id = %s",
                        [trace.trace_id]).one().t
        assert 0 < ttl <= 86400
        # a conditional write: the Paxos proposer's steps, Cassandra's words
        q = "INSERT INTO ks.t (k, v) VALUES (2, 'two') IF NOT EXISTS"
        rs = s.execute(q, trace=True)
        assert rs.was_applied
        trace = rs.get_query_trace(30)
        acts = [e.description for e in trace.events]
        assert "Reading existing values for CAS precondition" in acts, acts
        met = [a for a in acts if a.startswith(
            "CAS precondition is met; proposing client-requested updates "
            "for ")]
        assert len(met) == 1 and len(met[0].split()[-1]) == 36, acts
        ballot = met[0].split()[-1]
        # each acceptor traces its part of the round in Cassandra 4.1's
        # Paxos v2 words, and the proposer its messages
        coord = str(trace.coordinator)
        others = [ip for ip in IPS if ip != coord]
        rows = events_until(s, trace.trace_id, lambda rs: all(
            any(str(r.source) == ip and r.activity.startswith(
                "Committing proposal") for r in rs) for ip in others))
        acts = [(str(r.source), r.activity, r.thread) for r in rows]
        for ip in others:
            mine = [(a, t) for src, a, t in acts if src == ip]
            for verb in ("PAXOS2_PREPARE_REQ", "PAXOS2_PROPOSE_REQ",
                         "PAXOS_COMMIT_REQ"):
                assert (f"{verb} message received from {peer(coord)}",
                        "Messaging-EventLoop-1") in mine, acts
                assert sent(acts, coord, verb, ip), acts
            assert any(a.startswith("Promising ballot ") and
                       t == "MutationStage-1" for a, t in mine), acts
            assert (f"Accepting proposal {ballot}", "MutationStage-1") \
                in mine, acts
            assert (f"Committing proposal {ballot}", "MutationStage-1") \
                in mine, acts
            for verb in ("PAXOS2_PREPARE_RSP", "PAXOS2_PROPOSE_RSP"):
                assert sent(acts, ip, verb, coord), acts
        # the proposer took at least a quorum's promises and acceptances
        for verb in ("PAXOS2_PREPARE_RSP", "PAXOS2_PROPOSE_RSP"):
            assert any(src == coord and a.startswith(
                f"{verb} message received from /") for src, a, _ in acts)
        rs = s.execute(q, trace=True)
        assert not rs.was_applied
        acts = [e.description for e in rs.get_query_trace(30).events]
        assert "CAS precondition does not match current values" in acts
        # an untraced statement opens no session
        rs = s.execute("SELECT v FROM ks.t WHERE k = 1")
        assert not rs.response_future._query_traces
        # probabilistic tracing: nodetool's words
        r = tool_run(IPS[0], "gettraceprobability")
        assert r.stdout == "Current trace probability: 0.0\n", r
        for bad in [["2"], ["-0.5"], ["x"], []]:
            r = tool_run(IPS[0], "settraceprobability", *bad)
            assert r.returncode != 0, r
        r = tool_run(IPS[0], "settraceprobability", "1")
        assert r.returncode == 0, r
        r = tool_run(IPS[0], "gettraceprobability")
        assert r.stdout == "Current trace probability: 1.0\n", r
        before = s.execute("SELECT count(*) FROM system_traces.sessions",
                           ).one().count
        s.execute("SELECT v FROM ks.t WHERE k = 1 -- sampled")
        tool_run(IPS[0], "settraceprobability", "0")
        # the sampled statement's session is written after its reply: wait
        # for it, as the drivers poll
        for _ in range(100):
            rows = [r for r in s.execute(
                "SELECT parameters FROM system_traces.sessions")
                if r.parameters and r.parameters.get("query", "")
                .endswith("-- sampled")]
            if rows:
                break
            time.sleep(0.1)
        assert rows, before
    finally:
        cluster.shutdown()


def peer(ip):
    """A node as Cassandra 4's trace events name it."""
    return f"/{ip}:7000"


def sent(acts, src, verb, ip):
    """Whether `src` traced sending a `verb` message to `ip`."""
    return any(a == src and act.startswith(
        f"Sending {verb} message to {peer(ip)} message size ")
        for a, act, _ in acts)


def events_until(s, trace_id, want):
    """system_traces.events of a session once `want(rows)` holds (the
    replicas write theirs asynchronously, after their answers)."""
    rows = []
    # a deadline, not a count of tries: under ASan on 2 loaded cores one
    # SELECT of the events can take most of a second
    end = time.monotonic() + 60
    while True:
        rows = list(s.execute(
            "SELECT activity, source, source_elapsed, thread FROM "
            "system_traces.events WHERE session_id = %s", [trace_id]))
        if want(rows) or time.monotonic() > end:
            break
        time.sleep(0.1)
    return rows


def test_replicas_record_their_events_in_the_session(three_nodes):
    cluster, s = session(IPS[0])
    try:
        s.execute("CREATE KEYSPACE ks WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
        # an INSERT at QUORUM goes to all three replicas: the two others
        # than the coordinator record theirs under its session
        q = SimpleStatement("INSERT INTO ks.t (k, v) VALUES (7, 'seven')",
                            consistency_level=ConsistencyLevel.QUORUM)
        trace = s.execute(q, trace=True).get_query_trace(max_wait_sec=30)
        coord = str(trace.coordinator)
        others = [ip for ip in IPS if ip != coord]
        rows = events_until(s, trace.trace_id, lambda rs: all(
            any(str(r.source) == ip and r.activity.startswith(
                "Enqueuing response") for r in rs) for ip in others))
        acts = [(str(r.source), r.activity, r.thread) for r in rows]
        for ip in others:
            assert sent(acts, coord, "MUTATION_REQ", ip), acts
            mine = [(a, t) for src, a, t in acts if src == ip]
            assert (f"MUTATION_REQ message received from {peer(coord)}",
                    "Messaging-EventLoop-1") in mine, acts
            assert ("Appending to commitlog", "MutationStage-1") in mine, acts
            assert ("Adding to ks.t memtable", "MutationStage-1") in mine
            assert (f"Enqueuing response to {peer(coord)}",
                    "MutationStage-1") in mine
            assert sent(acts, ip, "MUTATION_RSP", coord), acts
        assert all(r.source_elapsed is not None and r.source_elapsed >= 0
                   for r in rows)
        ttl = s.execute("SELECT TTL(activity) AS t FROM system_traces.events"
                        " WHERE session_id = %s", [trace.trace_id]).one().t
        assert 0 < ttl <= 86400
        # a SELECT at QUORUM: each replica it sent a READ to traces it,
        # with what its storage read met (the row flushed: one SSTable)
        for ip in IPS:
            r = tool_run(ip, "flush", "ks", "t")
            assert r.returncode == 0, r
        q = SimpleStatement("SELECT v FROM ks.t WHERE k = 7",
                            consistency_level=ConsistencyLevel.QUORUM)
        rs = s.execute(q, trace=True)
        assert rs.one().v == "seven"
        trace = rs.get_query_trace(max_wait_sec=30)
        coord = str(trace.coordinator)
        prefix = "Sending READ_REQ message to /"

        def sent_to(rows):
            return [r.activity[len(prefix):].split(":")[0] for r in rows
                    if str(r.source) == coord and
                    r.activity.startswith(prefix)]

        rows = events_until(s, trace.trace_id, lambda rs: sent_to(rs) and all(
            any(str(r.source) == ip and r.activity.startswith(
                "Enqueuing response") for r in rs) for ip in sent_to(rs)))
        acts = [(str(r.source), r.activity, r.thread) for r in rows]
        peers = sent_to(rows)
        assert peers, acts  # RF 3 at QUORUM: at least one other replica
        assert any(a.startswith("Determining replicas to query")
                   for _, a, _ in acts), acts
        for ip in peers:
            assert ip in others
            mine = [(a, t) for src, a, t in acts if src == ip]
            assert ("Executing single-partition query on ks.t",
                    "ReadStage-1") in mine, acts
            assert ("Acquiring sstable references", "ReadStage-1") in mine
            assert ("Merged data from memtables and 1 sstables",
                    "ReadStage-1") in mine, acts
            assert ("Read 1 live rows and 0 tombstone cells",
                    "ReadStage-1") in mine, acts
            assert (f"Enqueuing response to {peer(coord)}",
                    "ReadStage-1") in mine
            assert sent(acts, ip, "READ_RSP", coord), acts
            # the coordinator asked it for data or a digest, and took
            # its answer
            assert any(src == coord and a in (f"reading data from {peer(ip)}",
                                               f"reading digest from {peer(ip)}")
                       for src, a, _ in acts), acts
            assert (coord, f"Processing response from {peer(ip)}",
                    "RequestResponseStage-1") in acts, acts
        # the coordinator is a replica too (RF 3): its own read's steps
        mine = [a for src, a, _ in acts if src == coord]
        assert "Merged data from memtables and 1 sstables" in mine, acts
        assert "Read 1 live rows and 0 tombstone cells" in mine, acts
        # a range read: the coordinator's sends, each replica's scans
        q = SimpleStatement("SELECT v FROM ks.t",
                            consistency_level=ConsistencyLevel.QUORUM)
        rs = s.execute(q, trace=True)
        assert [r.v for r in rs] == ["seven"]
        trace = rs.get_query_trace(max_wait_sec=30)
        coord = str(trace.coordinator)
        prefix = "Sending RANGE_REQ message to /"
        rows = events_until(s, trace.trace_id, lambda rs: sent_to(rs) and all(
            any(str(r.source) == ip and r.activity.startswith(
                "Enqueuing response") for r in rs) for ip in sent_to(rs)))
        acts = [(str(r.source), r.activity, r.thread) for r in rows]
        assert ("Computing ranges to query", coord) in [
            (a, src) for src, a, _ in acts], acts
        # Cassandra's RangeCommands line: every vnode range of the ring
        # (a token per range and the one wrapping past the last), read
        # one at a time, the estimate printed as Java prints a float
        sub = [re.fullmatch(r"Submitting range requests on (\d+) ranges "
                            r"with a concurrency of 1 \((\d+\.\d+(E-?\d+)?) "
                            r"rows per range expected\)", a)
               for src, a, _ in acts if src == coord and
               a.startswith("Submitting range requests")]
        assert len(sub) == 1 and sub[0], acts
        tokens = len(s.execute("SELECT tokens FROM system.local").one()
                     .tokens) + sum(len(r.tokens) for r in s.execute(
                         "SELECT tokens FROM system.peers"))
        assert int(sub[0].group(1)) == tokens + 1, (sub[0].group(0), tokens)
        peers = set(sent_to(rows))
        assert peers, acts
        scan = "Executing seq scan across 1 sstables for ("
        assert any(a.startswith(scan + "min(-9223372036854775808), max(")
                   for _, a, _ in acts), acts
        for ip in peers | {coord}:
            mine = [(a, t) for src, a, t in acts if src == ip]
            assert any(a.startswith(scan) and t == "ReadStage-1"
                       for a, t in mine), acts
            assert any(a.startswith("Read ") and a.endswith(
                " live rows and 0 tombstone cells") for a, _ in mine), acts
        # the one row, read by the scan of the range holding it
        assert any(a == "Read 1 live rows and 0 tombstone cells"
                   for _, a, _ in acts), acts
        # after each batch of range requests (one range at a time here)
        # Cassandra's "Submitted N concurrent range requests"
        submitted = [a for src, a, _ in acts if src == coord and
                     a.startswith("Submitted ")]
        assert submitted == ["Submitted 1 concurrent range requests"] * \
            (tokens + 1), (len(submitted), tokens, submitted[:3])
        # a filtered scan reads several ranges at once: 4 in the first
        # batch, then as many as Cassandra's concurrency factor says;
        # every range is asked at least once
        q = SimpleStatement("SELECT v FROM ks.t WHERE v = 'seven' "
                            "ALLOW FILTERING",
                            consistency_level=ConsistencyLevel.QUORUM)
        rs = s.execute(q, trace=True)
        assert [r.v for r in rs] == ["seven"]
        trace = rs.get_query_trace(max_wait_sec=30)
        coord = str(trace.coordinator)

        def batches(rs):
            return [int(m.group(1)) for m in (
                re.fullmatch(r"Submitted (\d+) concurrent range requests",
                             r.activity) for r in rs
                if str(r.source) == coord) if m]
        rows = events_until(s, trace.trace_id,
                            lambda rs: sum(batches(rs)) >= tokens + 1)
        got = batches(rows)
        assert got and got[0] == 4 and sum(got) >= tokens + 1, \
            (got, [(str(r.source), r.activity) for r in rows][:40])
        assert any(str(r.source) == coord and r.activity.startswith(
            "Submitting range requests on") and "with a concurrency of 4"
            in r.activity for r in rows), [r.activity for r in rows]
        # a counter increment: the coordinator is a replica (RF 3), so
        # it leads: lock, read, write, then the shards to the others
        s.execute("CREATE TABLE ks.c (k int PRIMARY KEY, n counter)")
        q = SimpleStatement("UPDATE ks.c SET n = n + 5 WHERE k = 1",
                            consistency_level=ConsistencyLevel.QUORUM)
        trace = s.execute(q, trace=True).get_query_trace(max_wait_sec=30)
        coord = str(trace.coordinator)
        others = [ip for ip in IPS if ip != coord]
        rows = events_until(s, trace.trace_id, lambda rs: all(
            any(str(r.source) == ip and r.activity == "Adding to ks.c memtable"
                for r in rs) for ip in others) and any(
            r.activity.startswith("Read ") for r in rs))
        acts = [(str(r.source), r.activity, r.thread) for r in rows]
        lead = [a for src, a, t in acts
                if src == coord and t == "CounterMutationStage-1"]
        for a in ["Acquiring counter locks",
                  "Executing single-partition query on ks.c",
                  "Merged data from memtables and 0 sstables",
                  "Read 0 live rows and 0 tombstone cells",
                  "Adding to ks.c memtable"]:
            assert a in lead, acts
        for ip in others:
            assert sent(acts, coord, "MUTATION_REQ", ip), acts
            assert (ip, "Adding to ks.c memtable", "MutationStage-1") in acts
    finally:
        cluster.shutdown()


def test_a_traced_read_repair(three_nodes):
    """A node that missed a write (down, no hints) is found stale by a
    traced read at ALL: the trace shows the mismatch and the repair in
    Cassandra 4's words."""
    cluster, s = session(IPS[0])
    try:
        s.execute("CREATE KEYSPACE ks WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
        assert cluster.control_connection.wait_for_schema_agreement(
            wait_time=30)
        three_nodes[2].stop()
        s.execute(SimpleStatement(
            "INSERT INTO ks.t (k, v) VALUES (9, 'nine')",
            consistency_level=ConsistencyLevel.ONE))
        three_nodes[2].start()
        assert three_nodes[2].wait_for_log("CQL clients on", timeout=60)
        wait_all_normal(IPS, timeout=60)
        q = SimpleStatement("SELECT v FROM ks.t WHERE k = 9",
                            consistency_level=ConsistencyLevel.ALL)
        rs = s.execute(q, trace=True)
        assert rs.one().v == "nine"
        trace = rs.get_query_trace(max_wait_sec=30)
        coord, stale = IPS[0], IPS[2]
        assert str(trace.coordinator) == coord
        rows = events_until(s, trace.trace_id, lambda rs: any(
            str(r.source) == stale and r.activity.startswith(
                "Sending READ_RSP") for r in rs) and any(
            r.activity.startswith("READ_REPAIR_RSP message received")
            for r in rs))
        acts = [(str(r.source), r.activity, r.thread) for r in rows]
        mine = [a for src, a, _ in acts if src == coord]
        # int 9 is the key 00000009
        assert any(a.startswith("Digest mismatch: Mismatch for key "
                                "DecoratedKey(") and a.endswith(", 00000009)")
                   for a in mine), acts
        for ip in IPS[1:]:
            assert f"reading digest from {peer(ip)}" in mine, acts
            assert any(a.startswith(f"Enqueuing full data read to "
                                    f"Full({peer(ip)},(") for a in mine), acts
        # the repair goes to the stale replica only
        assert any(a.startswith(f"Sending read-repair-mutation to "
                                f"Full({peer(stale)},(") for a in mine), acts
        assert not any(a.startswith(f"Sending read-repair-mutation to "
                                    f"Full({peer(IPS[1])},(")
                       for a in mine), acts
        assert sent(acts, coord, "READ_REPAIR_REQ", stale), acts
        assert f"READ_REPAIR_RSP message received from {peer(stale)}" \
            in mine, acts
        assert (stale, f"READ_REQ message received from {peer(coord)}",
                "Messaging-EventLoop-1") in acts, acts
        # and the stale replica now has the row
        cluster.shutdown()
        cluster, s = session(stale)
        r = s.execute(SimpleStatement(
            "SELECT v FROM ks.t WHERE k = 9",
            consistency_level=ConsistencyLevel.ONE)).one()
        assert r is not None and r.v == "nine"
    finally:
        cluster.shutdown()


def frame(flags, stream, opcode, body):
    return struct.pack(">BBhBI", 4, flags, stream, opcode, len(body)) + body


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:  # the node closed the connection (or died)
            raise ConnectionError(f"EOF after {len(data)} of {n} bytes")
        data += chunk
    return data


def read_frame(sock):
    head = recv_exactly(sock, 9)
    _, flags, stream, opcode, n = struct.unpack(">BBhBI", head)
    return flags, stream, opcode, recv_exactly(sock, n)


def test_garbage_with_the_tracing_flag_is_answered_traced(three_nodes):
    with socket.create_connection((IPS[0], 9042), timeout=30) as sock:
        opts = b"\x00\x01" + b"\x00\x0bCQL_VERSION" + b"\x00\x053.0.0"
        sock.sendall(frame(0, 1, 0x01, opts))
        assert read_frame(sock)[2] == 0x02  # READY
        # a QUERY whose text claims more bytes than the frame has, an
        # empty one, and an EXECUTE of an unknown id, all traced
        for stream, op, body in [(2, 0x07, b"\x7f\xff\xff\xff\x00"),
                                 (3, 0x07, b""),
                                 (4, 0x0a, b"\x00\x02ab\x00\x01\x00")]:
            sock.sendall(frame(0x02, stream, op, body))
            flags, st, opcode, resp = read_frame(sock)
            assert st == stream
            assert flags & 0x02, (flags, resp)
            assert opcode == 0x00  # ERROR, after the 16-byte session id
            code = struct.unpack(">i", resp[16:20])[0]
            assert code in (0x000A, 0x2500), hex(code)
        # the connection still serves a traced, well-formed QUERY
        q = b"SELECT key FROM system.local"
        sock.sendall(frame(0x02, 5, 0x07, struct.pack(">i", len(q)) + q +
                           b"\x00\x01\x00"))
        flags, st, opcode, resp = read_frame(sock)
        assert (st, opcode) == (5, 0x08) and flags & 0x02
    assert three_nodes[0].proc.poll() is None, three_nodes[0].log()


def test_a_traced_protection_read(three_nodes):
    """A node missed an indexed write (down, no hints): the other replicas'
    indexes return the partition, its does not, so an indexed read at ALL
    reads the partition from it (replica filtering protection), traced as
    Cassandra's single-partition reads (READ_REQ / READ_RSP), not as range
    answers."""
    stale, coord, other = IPS
    cluster, s = session(coord)
    try:
        s.execute("CREATE KEYSPACE px WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        s.execute("CREATE TABLE px.t (k int PRIMARY KEY, v text)")
        s.execute("CREATE INDEX t_v ON px.t (v)")
        assert cluster.control_connection.wait_for_schema_agreement(
            wait_time=30)
        three_nodes[0].stop()
        s.execute(SimpleStatement("INSERT INTO px.t (k, v) VALUES (1, 'b')",
                                  consistency_level=ConsistencyLevel.QUORUM))
        three_nodes[0].start()
        assert three_nodes[0].wait_for_log("CQL clients on", timeout=60)
        wait_all_normal(IPS, timeout=60)
        q = SimpleStatement("SELECT k FROM px.t WHERE v = 'b'",
                            consistency_level=ConsistencyLevel.ALL)
        rs = s.execute(q, trace=True)
        assert [r.k for r in rs] == [1]
        trace = rs.get_query_trace(max_wait_sec=30)
        assert str(trace.coordinator) == coord
        rows = events_until(s, trace.trace_id, lambda rs: any(
            r.activity.startswith("READ_RSP message received") and
            str(r.source) == coord for r in rs))
        acts = [(str(r.source), r.activity, r.thread) for r in rows]
        mine = [a for src, a, _ in acts if src == coord]
        assert any(a.startswith("Replica filtering protection: 1 ")
                   for a in mine), acts
        assert sent(acts, coord, "READ_REQ", stale), acts
        assert not sent(acts, coord, "READ_REQ", other), acts
        assert f"READ_RSP message received from {peer(stale)}" in mine, acts
        assert (stale, f"READ_REQ message received from {peer(coord)}",
                "Messaging-EventLoop-1") in acts, acts
        for ip in (stale, other):
            assert sent(acts, coord, "RANGE_REQ", ip), acts
            # one range answer each: the protection read's answer is not
            # one
            assert mine.count(
                f"RANGE_RSP message received from {peer(ip)}") == 1, acts
    finally:
        cluster.shutdown()
