"""The coordinator with real processes, as a user runs them: clusters from
scripts/cluster, the stock DataStax driver with FallthroughRetryPolicy (so
every server answer reaches the test unchanged).

- the availability matrix of Cassandra's dtest TestAvailability on a 3:3
  cluster with NTS {dc1: 3, dc2: 3}, stopping nodes one by one;
- QUORUM writes readable after kill -9 of a replica;
- hints: delivered after a restart, none when disabled, none past the
  window;
- read repair brings a stale replica up to date;
- TRUNCATE empties every replica, survives restarts (kill -9 included)
  while later rows are kept, and is Unavailable with a node down; hints
  written before a truncate are not delivered after it.

Nodes live on 127.0.11.x."""
import threading
import time

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import Unavailable
from cassandra.protocol import TruncateError

from clusters import (cluster_script, rf3_table, run_at, session, state,
                      tool, wait_for)

BASE = "127.0.11."


@pytest.fixture
def cluster(tmp_path):
    run = cluster_script(tmp_path)
    yield run
    run("-C", "co", "remove", check=False)


def expected(cl, live1, live2):
    """(required, alive) when `cl` must be refused as Unavailable, else
    None: Cassandra's arithmetic for NTS {dc1: 3, dc2: 3}, coordinator in
    dc1."""
    need = {CL.ONE: 1, CL.TWO: 2, CL.THREE: 3, CL.QUORUM: 4, CL.ALL: 6}
    if cl in need:
        return None if live1 + live2 >= need[cl] else (need[cl],
                                                       live1 + live2)
    if cl == CL.LOCAL_ONE:
        return None if live1 >= 1 else (1, live1)
    if cl == CL.LOCAL_QUORUM:
        return None if live1 >= 2 else (2, live1)
    if cl == CL.EACH_QUORUM:
        if live1 < 2:
            return (2, live1)
        return None if live2 >= 2 else (2, live2)
    raise AssertionError(cl)


def test_availability_matrix_3_3(cluster):
    """dtest TestAvailability.test_network_topology_strategy: stop nodes
    one by one; every level succeeds or is Unavailable exactly as the
    arithmetic says, for writes and for reads."""
    cluster("create", "co", "-n", "3:3", "--base-ip", BASE,
            "-c", "gossip_interval=250ms", "-s", timeout=180)
    c, s = session(BASE + "1")
    s.execute("CREATE KEYSPACE av WITH replication = {'class': "
              "'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 3}")
    s.execute("CREATE TABLE av.t (k int PRIMARY KEY, v int)")
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)
    levels = [CL.ONE, CL.TWO, CL.THREE, CL.QUORUM, CL.ALL, CL.LOCAL_ONE,
              CL.LOCAL_QUORUM, CL.EACH_QUORUM]
    # node1 coordinates; the others stop from the last one down.
    order = ["node6", "node5", "node4", "node3", "node2"]
    live = {"dc1": 3, "dc2": 3}
    for step in range(len(order) + 1):
        for cl in levels:
            want = expected(cl, live["dc1"], live["dc2"])
            for op in ("write", "read"):
                try:
                    if op == "write":
                        run_at(s, "INSERT INTO av.t (k, v) VALUES (1, %s)",
                               cl, (step,))
                    else:
                        run_at(s, "SELECT v FROM av.t WHERE k = 1", cl)
                    got = None
                except Unavailable as e:
                    got = (e.required_replicas, e.alive_replicas)
                assert got == want, (step, op, CL.value_to_name[cl], got,
                                     want)
        if step == len(order):
            break
        node = order[step]
        cluster("node", node, "stop")
        live["dc2" if node in ("node4", "node5", "node6") else "dc1"] -= 1
        ip = BASE + node[-1]
        assert wait_for(lambda: state(BASE + "1", ip) == "DN",
                        timeout=30)
    c.shutdown()


def test_quorum_writes_survive_kill_9_and_hints_and_read_repair(cluster):
    """On 3 nodes with RF 3: QUORUM writes stay readable after kill -9 of a
    replica; hints written while a replica is down reach it after its
    restart (all 100 readable from it alone); with handoff disabled none
    are kept, and read repair brings the stale replica up to date."""
    cluster("create", "co", "-n", "3", "--base-ip", BASE,
            "-c", "gossip_interval=250ms", "-s", timeout=180)
    n1, n2, n3 = (BASE + str(i) for i in (1, 2, 3))
    c, s = session(n1)
    rf3_table(c, s, "h")

    # A logged batch over several partitions (through the batchlog).
    s.execute("BEGIN BATCH INSERT INTO h.t (k, v) VALUES (1000, 'b'); "
              "INSERT INTO h.t (k, v) VALUES (1001, 'b'); APPLY BATCH")
    assert run_at(s, "SELECT v FROM h.t WHERE k = 1001", CL.ALL).one().v \
        == "b"
    assert "BatchlogTasks" in tool(n1, "tpstats")
    run_at(s, "DELETE FROM h.t WHERE k IN (1000, 1001)", CL.ALL)

    # QUORUM writes, then kill -9 of one replica: still readable.
    for k in range(50):
        run_at(s, "INSERT INTO h.t (k, v) VALUES (%s, 'q')", CL.QUORUM, (k,))
    cluster("node", "node3", "kill")
    # At once (the dead replica is not convicted yet: speculative retry
    # goes around it), then as a range read once it is.
    for k in range(50):
        assert run_at(s, "SELECT v FROM h.t WHERE k = %s", CL.QUORUM,
                      (k,)).one().v == "q"
    assert wait_for(lambda: state(n1, n3) == "DN", timeout=40)
    rows = list(run_at(s, "SELECT k FROM h.t", CL.QUORUM))
    assert sorted(r.k for r in rows) == list(range(50))
    cluster("node", "node3", "start", timeout=180)
    assert wait_for(lambda: state(n1, n3) == "UN")

    # Hints: node2 down, 100 writes at ONE, node2 back, then node1 and
    # node3 stop: node2 alone has all 100.
    cluster("node", "node2", "stop")
    assert wait_for(lambda: state(n1, n2) == "DN")
    for k in range(100, 200):
        run_at(s, "INSERT INTO h.t (k, v) VALUES (%s, 'h')", CL.ONE, (k,))
    pending = tool(n1, "listpendinghints")
    assert "127.0.11.2" in pending, pending
    # system_views.pending_hints shows the same host, DOWN, with files
    hid2 = next(r.host_id for r in s.execute(
        "SELECT peer, host_id FROM system.peers") if r.peer == n2)
    rows = list(s.execute("SELECT * FROM system_views.pending_hints"))
    assert [r.host_id for r in rows] == [hid2], rows
    r = rows[0]
    assert (r.address, r.status, r.dc) == (n2, "DOWN", "dc1")
    assert r.files >= 1 and r.total_size > 0
    assert r.oldest <= r.newest
    # and gossip_info sees three endpoints, node2 with a shutdown status
    gi = {r.address: r for r in
          s.execute("SELECT * FROM system_views.gossip_info")}
    assert sorted(gi) == sorted([n1, n2, n3])
    assert gi[n2].status_with_port.startswith("shutdown"), gi[n2]
    assert gi[n1].status_with_port.startswith("NORMAL")
    assert gi[n1].host_id and gi[n1].tokens_version > 0
    assert gi[n1].dc == "dc1" and gi[n1].generation > 0
    c.shutdown()
    cluster("node", "node2", "start", timeout=180)
    assert wait_for(lambda: "does not have any pending hints" in
                    tool(n1, "listpendinghints"), timeout=60)
    cluster("node", "node1", "stop")
    cluster("node", "node3", "stop")
    c, s = session(n2)
    rows = list(run_at(s, "SELECT k, v FROM h.t", CL.ONE))
    assert sorted(r.k for r in rows if r.v == "h") == list(range(100, 200))
    c.shutdown()
    cluster("node", "node1", "start", timeout=180)
    cluster("node", "node3", "start", timeout=180)
    assert wait_for(lambda: all(state(n1, ip) == "UN" for ip in (n1, n2, n3)))

    # Handoff disabled on node1: node3 misses writes and no hint is kept.
    tool(n1, "disablehandoff")
    cluster("node", "node3", "stop")
    assert wait_for(lambda: state(n1, n3) == "DN")
    c, s = session(n1)
    for k in range(300, 320):
        run_at(s, "INSERT INTO h.t (k, v) VALUES (%s, 'd')", CL.ONE, (k,))
    assert "does not have any pending hints" in tool(n1, "listpendinghints")
    assert "stored 0," in tool(n1, "statushandoff")
    assert "dropped (disabled) 20," in tool(n1, "statushandoff")
    c.shutdown()
    cluster("node", "node3", "start", timeout=180)
    assert wait_for(lambda: all(state(n1, ip) == "UN" for ip in (n1, n2, n3)))
    time.sleep(1)
    # node3 alone: the writes are missing (no hints were delivered).
    cluster("node", "node1", "stop")
    cluster("node", "node2", "stop")
    c, s = session(n3)
    assert run_at(s, "SELECT v FROM h.t WHERE k = 300", CL.ONE).one() is None
    c.shutdown()
    cluster("node", "node1", "start", timeout=180)
    cluster("node", "node2", "start", timeout=180)
    assert wait_for(lambda: all(state(n1, ip) == "UN" for ip in (n1, n2, n3)))

    # Read repair: an ALL read through node1 of each missed key writes it
    # back to node3, which then has them on its own.
    c, s = session(n1)
    for k in range(300, 320):
        assert run_at(s, "SELECT v FROM h.t WHERE k = %s", CL.ALL,
                      (k,)).one().v == "d"
    assert "Read" in tool(n1, "proxyhistograms")
    c.shutdown()
    cluster("node", "node1", "stop")
    cluster("node", "node2", "stop")
    c, s = session(n3)
    for k in range(300, 320):
        assert run_at(s, "SELECT v FROM h.t WHERE k = %s", CL.ONE,
                      (k,)).one().v == "d"
    c.shutdown()


def test_no_hints_past_the_window(cluster):
    """max_hint_window counts from when the target went down: once it has
    passed, writes for that target are not hinted."""
    cluster("create", "co", "-n", "2", "--base-ip", BASE,
            "-c", "gossip_interval=250ms", "-c", "max_hint_window=2s",
            "-s", timeout=180)
    n1, n2 = BASE + "1", BASE + "2"
    c, s = session(n1)
    s.execute("CREATE KEYSPACE w WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 2}")
    s.execute("CREATE TABLE w.t (k int PRIMARY KEY)")
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)
    cluster("node", "node2", "stop")
    assert wait_for(lambda: state(n1, n2) == "DN")
    run_at(s, "INSERT INTO w.t (k) VALUES (1)", CL.ONE)
    assert n2 in tool(n1, "listpendinghints")
    time.sleep(2.5)
    run_at(s, "INSERT INTO w.t (k) VALUES (2)", CL.ONE)
    status = tool(n1, "statushandoff")
    assert "stored 1," in status and "dropped (window) 1" in status, status
    c.shutdown()


def restart_all(cluster, ips, kill):
    for i in (1, 2, 3):
        cluster("node", "node%d" % i, "kill" if kill else "stop")
    cluster("start", timeout=240)
    assert wait_for(lambda: all(state(ips[0], ip) == "UN" for ip in ips))


def keys_at_all(s):
    return sorted(r.k for r in run_at(s, "SELECT k FROM tr.t", CL.ALL))


def test_truncate_every_replica_and_restarts(cluster):
    """3 nodes, RF 3 (truncate_request_timeout 3s): TRUNCATE through the
    driver empties the table on
    every replica (SSTables and memtable: count(*) at ALL is 0); after
    kill -9 and restart of all three nodes (commitlog replay) and after a
    clean restart it is still empty but for the rows written after the
    truncate; with one node stopped TRUNCATE raises Unavailable (ALL, 3
    required, 2 alive) and truncates nothing; with one node paused (alive
    to the failure detector, silent) it raises TruncateError after the
    timeout."""
    cluster("create", "co", "-n", "3", "--base-ip", BASE,
            "-c", "gossip_interval=250ms",
            "-c", "truncate_request_timeout=3s", "-s", timeout=180)
    ips = [BASE + str(i) for i in (1, 2, 3)]
    c, s = session(ips[0])
    rf3_table(c, s, "tr")
    for k in range(50):
        run_at(s, "INSERT INTO tr.t (k, v) VALUES (%s, 'old')", CL.ALL, (k,))
    c.shutdown()
    # A restart replays the log and flushes it: these 50 are SSTables.
    restart_all(cluster, ips, kill=True)
    c, s = session(ips[0])
    for k in range(50, 100):
        run_at(s, "INSERT INTO tr.t (k, v) VALUES (%s, 'old')", CL.ALL, (k,))
    assert run_at(s, "SELECT count(*) FROM tr.t", CL.ALL).one()[0] == 100

    assert list(s.execute("TRUNCATE tr.t")) == []
    assert run_at(s, "SELECT count(*) FROM tr.t", CL.ALL).one()[0] == 0
    for k in range(1000, 1010):
        run_at(s, "INSERT INTO tr.t (k, v) VALUES (%s, 'new')", CL.ALL, (k,))
    c.shutdown()

    # kill -9: the truncated rows are in the commitlog, and stay dead.
    restart_all(cluster, ips, kill=True)
    c, s = session(ips[1])
    assert keys_at_all(s) == list(range(1000, 1010))
    assert run_at(s, "SELECT v FROM tr.t WHERE k = 60", CL.ALL).one() is None
    c.shutdown()
    restart_all(cluster, ips, kill=False)
    c, s = session(ips[2])
    assert keys_at_all(s) == list(range(1000, 1010))
    assert run_at(s, "SELECT count(*) FROM tr.t", CL.ALL).one()[0] == 10

    # One node down: Unavailable at ALL, nothing truncated.
    cluster("node", "node2", "stop")
    assert wait_for(lambda: state(ips[2], ips[1]) == "DN", timeout=30)
    with pytest.raises(Unavailable) as e:
        s.execute("TRUNCATE TABLE tr.t")
    assert e.value.consistency == CL.ALL
    assert (e.value.required_replicas, e.value.alive_replicas) == (3, 2)
    assert run_at(s, "SELECT count(*) FROM tr.t", CL.QUORUM).one()[0] == 10
    c.shutdown()
    cluster("node", "node2", "start", timeout=180)
    assert wait_for(lambda: all(state(ips[0], ip) == "UN" for ip in ips))
    c, s = session(ips[0])
    s.execute("USE tr")
    s.execute("TRUNCATE TABLE t")
    assert keys_at_all(s) == []

    # Alive to the failure detector but silent (SIGSTOP): a truncate
    # error once truncate_request_timeout passes.
    run_at(s, "INSERT INTO tr.t (k, v) VALUES (1, 'x')", CL.ALL)
    cluster("node", "node3", "pause")
    try:
        with pytest.raises(TruncateError) as e:
            s.execute("TRUNCATE tr.t")
        assert "timed out" in str(e.value), e.value
    finally:
        cluster("node", "node3", "resume")
    c.shutdown()


def test_hints_from_before_a_truncate_are_not_delivered(cluster):
    """Hints node1 keeps for node3 from before a TRUNCATE (delivery paused
    meanwhile) are dropped, not delivered: node3 alone reads the table
    empty afterwards, as Cassandra's Hint.apply skips truncated tables."""
    cluster("create", "co", "-n", "3", "--base-ip", BASE,
            "-c", "gossip_interval=250ms", "-s", timeout=180)
    n1, n2, n3 = (BASE + str(i) for i in (1, 2, 3))
    c, s = session(n1)
    rf3_table(c, s, "th")
    cluster("node", "node3", "stop")
    assert wait_for(lambda: state(n1, n3) == "DN")
    for k in range(20):
        run_at(s, "INSERT INTO th.t (k, v) VALUES (%s, 'h')", CL.ONE, (k,))
    assert n3 in tool(n1, "listpendinghints")
    tool(n1, "pausehandoff")
    cluster("node", "node3", "start", timeout=180)
    assert wait_for(lambda: all(state(n1, ip) == "UN" for ip in (n1, n2, n3)))
    s.execute("TRUNCATE th.t")
    run_at(s, "INSERT INTO th.t (k, v) VALUES (100, 'after')", CL.ALL)
    tool(n1, "resumehandoff")
    assert wait_for(lambda: "does not have any pending hints" in
                    tool(n1, "listpendinghints"), timeout=60)
    c.shutdown()
    cluster("node", "node1", "stop")
    cluster("node", "node2", "stop")
    c, s = session(n3)
    rows = list(run_at(s, "SELECT k FROM th.t", CL.ONE))
    assert [r.k for r in rows] == [100]
    c.shutdown()


def test_a_restarted_node_knows_the_ring_before_it_serves(cluster):
    """A node restarted while its peers cannot answer (paused) must not
    take itself for the only replica: it starts from the peers it knew
    (saved_caches/peers, system.peers' role), counted down until they
    answer. Before, its ring held itself alone until gossip arrived, so
    for that while (a second after any restart; here, as long as the
    peers were silent) a read at ONE of a key it does not replicate
    answered "no row", and a write at ONE stayed on it alone, lost to the
    real replicas. 4 nodes, RF 3: keys node1 does not replicate are
    Unavailable, the others are served; every acknowledged write is
    there once the peers are back."""
    cluster("create", "co", "-n", "4", "--base-ip", BASE,
            "-c", "gossip_interval=250ms", "-s", timeout=180)
    ips = [BASE + str(i) for i in (1, 2, 3, 4)]
    c, s = session(ips[1])
    rf3_table(c, s, "rs")
    for k in range(100):
        run_at(s, "INSERT INTO rs.t (k, v) VALUES (%s, 'v')", CL.ALL, (k,))
    c.shutdown()
    cluster("node", "node1", "stop")
    peers = ("node2", "node3", "node4")
    for node in peers:
        cluster("node", node, "pause")
    try:
        cluster("node", "node1", "start")
        sessions = []

        def connect():
            try:
                sessions.append(session(ips[0]))
                return True
            except Exception:
                return False
        assert wait_for(connect, timeout=60)
        c1, s1 = sessions[0]
        served, unavailable = 0, 0
        for k in range(100):
            try:
                row = run_at(s1, "SELECT v FROM rs.t WHERE k = %s", CL.ONE,
                             (k,)).one()
            except Unavailable:
                unavailable += 1
                continue
            assert row is not None and row.v == "v", (k, row)
            served += 1
        acked = []
        for k in range(100, 200):
            try:
                run_at(s1, "INSERT INTO rs.t (k, v) VALUES (%s, 'w')",
                       CL.ONE, (k,))
                acked.append(k)
            except Unavailable:
                pass
        c1.shutdown()
        assert served and unavailable, (served, unavailable)
        assert acked and len(acked) < 100, len(acked)
    finally:
        for node in peers:
            cluster("node", node, "resume")
    assert wait_for(lambda: all(state(ips[1], ip) == "UN" for ip in ips))
    c, s = session(ips[1])
    for k in acked:
        row = run_at(s, "SELECT v FROM rs.t WHERE k = %s", CL.ALL,
                     (k,)).one()
        assert row is not None and row.v == "w", (k, row)
    c.shutdown()


def test_a_stopping_coordinator_finishes_its_writes(cluster):
    """A node stopped (SIGTERM) while it coordinates writes at ONE: every
    write it acknowledged reaches the other replicas (or leaves a hint)
    before it goes. It stops serving clients first, then waits for the
    writes it coordinates, then tells its peers (Cassandra's drain
    order). 3 nodes, RF 3: nodes 2 and 3, each alone, hold every key."""
    cluster("create", "co", "-n", "3", "--base-ip", BASE,
            "-c", "gossip_interval=250ms", "-s", timeout=180)
    ips = [BASE + str(i) for i in (1, 2, 3)]
    c, s = session(ips[1])
    rf3_table(c, s, "st")
    c.shutdown()
    c, s = session(ips[0])
    ins = s.prepare("INSERT INTO st.t (k, v) VALUES (?, 'v')")
    ins.consistency_level = CL.ONE
    acked, stop = [], threading.Event()

    def write():
        k = 0
        while not stop.is_set():
            try:
                s.execute(ins, (k,))
                acked.append(k)
            except Exception:
                pass
            k += 1
    t = threading.Thread(target=write)
    t.start()
    assert wait_for(lambda: len(acked) > 300)
    cluster("node", "node1", "stop")
    stop.set()
    t.join()
    c.shutdown()
    for ip in ips[1:]:
        c, s = session(ip)
        sel = s.prepare("SELECT v FROM st.t WHERE k = ?")
        sel.consistency_level = CL.ONE
        missing = [k for k in acked if s.execute(sel, (k,)).one() is None]
        c.shutdown()
        assert not missing, (ip, len(missing), missing[:10])
