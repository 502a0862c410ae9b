"""Lightweight transactions with real processes, through the stock DataStax
driver: conditional INSERT/UPDATE/DELETE and their [applied] rows
(was_applied), Cassandra's refusals, conditional batches, SERIAL reads;
then several clients racing IF NOT EXISTS claims (no key claimed twice)
and CAS increments on 3 nodes RF 3 while a node is killed and restarted,
node1 is partitioned from the others (root and iptables) and a node is
paused (SIGSTOP) and resumed,
the increment history checked linearizable (lincheck.py).

Nodes live on 127.0.107.x."""
import os
import shutil
import threading
import time

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import InvalidRequest, Unavailable, WriteTimeout
from cassandra.query import BatchStatement, SimpleStatement

from clusters import cluster_script, session
from lincheck import Op, cas_increments, check

# -n 3 and -n 2:2 from BASE: test-addresses: 127.0.107.1-4
BASE = "127.0.107."


@pytest.fixture
def cluster(tmp_path):
    run = cluster_script(tmp_path)
    yield run
    run("-C", "lwt", "heal", check=False)  # partitions, pauses
    run("-C", "lwt", "remove", check=False)


def start3(cluster):
    cluster("create", "lwt", "-n", "3", "--base-ip", BASE,
            "-c", "gossip_interval=250ms", "-s", timeout=180)
    c, s = session(BASE + "1")
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int, w text)")
    s.execute("CREATE TABLE ks.c (k int, ck int, s int static, v int, "
              "m map<text, int>, PRIMARY KEY (k, ck))")
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)
    return c, s


def test_checker_rejects_non_linearizable_histories():
    """The checker used below: a lost update and a double claim are
    refused, a history explained by an unknown outcome is accepted."""
    lost = [Op("cas", 0, 1, "ok", None, 0, 10),
            Op("cas", 1, 2, "ok", None, 20, 30),
            Op("cas", 1, 3, "fail", 1, 40, 50)]
    assert check(lost, 0) == "not linearizable"
    twice = [Op("cas", 0, 1, "ok", None, 0, 10),
             Op("cas", 0, 2, "ok", None, 5, 15)]
    assert check(twice, 0) == "not linearizable"
    later = [Op("cas", 0, 5, "unknown", None, 0, None),
             Op("cas", 7, 8, "fail", 0, 10, 20),
             Op("cas", 7, 8, "fail", 5, 30, 40)]
    assert check(later, 0) is True


def test_statements_and_results(cluster):
    c, s = start3(cluster)
    r = s.execute("INSERT INTO ks.t (k, v) VALUES (1, 10) IF NOT EXISTS")
    assert r.was_applied
    assert r.column_names == ["[applied]"]
    r = s.execute("INSERT INTO ks.t (k, v) VALUES (1, 11) IF NOT EXISTS")
    assert not r.was_applied
    row = r.one()
    assert row.k == 1 and row.v == 10 and row.w is None
    # conditions: applied, then not applied with the current value
    assert s.execute("UPDATE ks.t SET v = 12 WHERE k = 1 IF v = 10") \
        .was_applied
    r = s.execute("UPDATE ks.t SET v = 13 WHERE k = 1 IF v = 10")
    assert not r.was_applied
    assert r.column_names == ["[applied]", "v"] and r.one().v == 12
    for cond, want in (("v != 12", False), ("v < 13", True),
                       ("v <= 12", True), ("v > 12", False),
                       ("v >= 12", True), ("v IN (1, 12)", True),
                       ("v IN (1, 2)", False), ("w = null", True),
                       ("w != null", False), ("v = 12 AND w = null", True)):
        r = s.execute("UPDATE ks.t SET w = 'x' WHERE k = 1 IF " + cond)
        assert r.was_applied == want, cond
        if want:
            s.execute("UPDATE ks.t SET w = null WHERE k = 1")
    # prepared, with bind markers in the conditions
    p = s.prepare("UPDATE ks.t SET v = ? WHERE k = ? IF v = ?")
    assert s.execute(p, (20, 1, 12)).was_applied
    assert not s.execute(p, (21, 1, 12)).was_applied
    # IF EXISTS on a missing row: [applied] only
    r = s.execute("UPDATE ks.t SET v = 1 WHERE k = 99 IF EXISTS")
    assert not r.was_applied and r.column_names == ["[applied]"]
    assert s.execute("DELETE FROM ks.t WHERE k = 1 IF EXISTS").was_applied
    assert s.execute("SELECT * FROM ks.t WHERE k = 1").one() is None
    assert not s.execute("DELETE FROM ks.t WHERE k = 1 IF v = 20") \
        .was_applied
    # static columns and map elements
    s.execute("INSERT INTO ks.c (k, ck, s, v, m) VALUES (1, 1, 5, 1, "
              "{'a': 1}) IF NOT EXISTS")
    assert s.execute("UPDATE ks.c SET s = 6 WHERE k = 1 IF s = 5") \
        .was_applied
    assert s.execute("UPDATE ks.c SET v = 2 WHERE k = 1 AND ck = 1 "
                     "IF m['a'] = 1").was_applied
    r = s.execute("UPDATE ks.c SET v = 3 WHERE k = 1 AND ck = 1 "
                  "IF m['a'] = 2")
    assert not r.was_applied and r.one().m == {"a": 1}
    # a conditional batch on one partition
    b = BatchStatement()
    b.add("UPDATE ks.c SET v = 10 WHERE k = 1 AND ck = 1 IF v = 2")
    b.add("INSERT INTO ks.c (k, ck, v) VALUES (1, 2, 20) IF NOT EXISTS")
    assert s.execute(b).was_applied
    assert s.execute("SELECT v FROM ks.c WHERE k = 1 AND ck = 2").one().v \
        == 20
    b = BatchStatement()
    b.add("UPDATE ks.c SET v = 11 WHERE k = 1 AND ck = 1 IF v = 2")
    r = s.execute(b)
    assert not r.was_applied
    assert r.one().k == 1 and r.one().ck == 1 and r.one().v == 10
    # Cassandra's refusals
    for q, msg in (
            ("UPDATE ks.t SET v = 1 WHERE k = 1 IF k = 1",
             "PRIMARY KEY column 'k' cannot have IF conditions"),
            ("UPDATE ks.t USING TIMESTAMP 5 SET v = 1 WHERE k = 1 "
             "IF v = 1",
             "Cannot provide custom timestamp for conditional updates"),
            ("UPDATE ks.t SET v = 1 WHERE k IN (1, 2) IF v = 1",
             "IN on the partition key is not supported with conditional "
             "updates"),
            ("UPDATE ks.t SET v = 1 WHERE k = 1 IF v < null",
             "Invalid comparison with null")):
        with pytest.raises(InvalidRequest, match=msg):
            s.execute(q)
    b = BatchStatement()
    b.add("UPDATE ks.t SET v = 1 WHERE k = 1 IF v = 1")
    b.add("UPDATE ks.t SET v = 1 WHERE k = 2")
    with pytest.raises(InvalidRequest,
                       match="Batch with conditions cannot span multiple "
                             "partitions"):
        s.execute(b)
    # SERIAL and LOCAL_SERIAL reads, LOCAL_SERIAL Paxos
    s.execute(SimpleStatement(
        "INSERT INTO ks.t (k, v) VALUES (5, 1) IF NOT EXISTS",
        serial_consistency_level=CL.LOCAL_SERIAL))
    for cl in (CL.SERIAL, CL.LOCAL_SERIAL):
        r = s.execute(SimpleStatement("SELECT v FROM ks.t WHERE k = 5",
                                      consistency_level=cl))
        assert r.one().v == 1
    with pytest.raises(InvalidRequest, match="SERIAL is not supported"):
        s.execute(SimpleStatement(
            "UPDATE ks.t SET v = 2 WHERE k = 5 IF v = 1",
            consistency_level=CL.SERIAL))
    # proxyhistograms has nodetool 4.1's columns, and node1 (every
    # statement's coordinator) timed the conditional writes and the
    # SERIAL reads' rounds
    out = cluster("node", "node1", "tool", "proxyhistograms").stdout
    lines = out.splitlines()
    assert lines[1].split("  ")[0] == "Percentile"
    assert "CAS Read Latency" in lines[1] and "View Write Latency" in lines[1]
    mx = next(ln for ln in lines if ln.startswith("Max")).split()
    assert len(mx) == 7
    assert float(mx[4]) > 0 and float(mx[5]) > 0  # CAS Read, CAS Write
    assert float(mx[6]) == 0  # no views
    c.shutdown()
    # Unavailable with Cassandra's counts: 2 of 3 needed
    cluster("node", "node2", "stop")
    cluster("node", "node3", "stop")
    c, s = session(BASE + "1")
    time.sleep(3)
    with pytest.raises(Unavailable) as e:
        s.execute("UPDATE ks.t SET v = 2 WHERE k = 5 IF v = 1")
    assert e.value.required_replicas == 2 and e.value.alive_replicas == 1
    c.shutdown()


def test_races_claims_and_increments_with_a_kill(cluster):
    c, s = start3(cluster)
    ips = [BASE + str(i) for i in (1, 2, 3)]
    # claims: every client tries every key; each key has one winner
    winners = {}
    lock = threading.Lock()

    def claimer(cid):
        cc, ss = session(ips[cid % 3])
        p = ss.prepare("INSERT INTO ks.t (k, w) VALUES (?, ?) "
                       "IF NOT EXISTS")
        for k in range(100, 140):
            try:
                if ss.execute(p, (k, "c%d" % cid)).was_applied:
                    with lock:
                        winners.setdefault(k, []).append(cid)
            except WriteTimeout:
                pass
        cc.shutdown()

    ts = [threading.Thread(target=claimer, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(len(w) == 1 for w in winners.values()), winners
    for k, w in winners.items():
        row = s.execute(SimpleStatement("SELECT w FROM ks.t WHERE k = %d" % k,
                                        consistency_level=CL.SERIAL)).one()
        assert row.w == "c%d" % w[0]

    # CAS increments on one register while node3 is killed and restarted,
    # node1 is partitioned from the others (with root and iptables: the
    # cluster script's own chain, removed by heal and by the fixture),
    # and node3 is paused (SIGSTOP) and resumed
    s.execute("INSERT INTO ks.t (k, v) VALUES (0, 0)")
    history = []
    t0 = time.monotonic()
    stop_at = [time.monotonic() + 600]  # set when the faults are over

    def incrementer(cid):
        cc, ss = session(ips[cid % 2])  # node1, node2: node3 gets killed
        p = ss.prepare("UPDATE ks.t SET v = ? WHERE k = 0 IF v = ?")
        cas_increments(ss, p, cid, t0, stop_at, history,
                       quick_retry=(WriteTimeout,))
        cc.shutdown()

    ts = [threading.Thread(target=incrementer, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    time.sleep(3)
    cluster("node", "node3", "kill")
    time.sleep(3)
    cluster("node", "node3", "start", timeout=180)
    time.sleep(2)
    faults = ["kill"]
    if os.geteuid() == 0 and shutil.which("iptables"):
        cluster("partition", "node1", "node2,node3")
        time.sleep(4)  # node1's clients: timeouts, Unavailable
        cluster("heal")
        faults.append("partition")
        time.sleep(2)
    cluster("node", "node3", "pause")
    time.sleep(4)  # node3's queued messages arrive late
    cluster("node", "node3", "resume")
    faults.append("pause")
    stop_at[0] = time.monotonic() + 3
    for t in ts:
        t.join()
    print("faults:", faults)
    counts = {r: sum(1 for o in history if o.res == r)
              for r in ("ok", "fail", "unknown")}
    print("CAS increments:", counts)
    assert counts["ok"] > 10, history
    verdict = check(history, 0)
    assert verdict is True, verdict
    c.shutdown()


def test_local_serial_with_a_datacenter_down(cluster):
    """2 DCs (2 + 2 nodes, NetworkTopologyStrategy 2 + 2), dc2 stopped:
    SERIAL needs a quorum of all 4 replicas and answers Unavailable with
    Cassandra's counts (3 required, 2 alive); LOCAL_SERIAL in dc1 (with a
    LOCAL_QUORUM commit) still decides, and its answers stay right."""
    cluster("create", "lwt", "-n", "2:2", "--base-ip", BASE,
            "-c", "gossip_interval=250ms", "-s", timeout=180)
    c, s = session(BASE + "1")
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 2}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int)")
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)

    def lwt(q, serial, cl=CL.LOCAL_QUORUM):
        return s.execute(SimpleStatement(q, consistency_level=cl,
                                         serial_consistency_level=serial))

    assert lwt("INSERT INTO ks.t (k, v) VALUES (1, 1) IF NOT EXISTS",
               CL.SERIAL).was_applied
    cluster("dc", "dc2", "down", "--mode", "stop")
    # until node1 sees dc2 down (the failure detector decides when)
    deadline = time.monotonic() + 60
    while True:
        try:
            lwt("UPDATE ks.t SET v = 9 WHERE k = 1 IF v = 0", CL.SERIAL)
        except Unavailable as e:
            err = e
            break
        assert time.monotonic() < deadline, "dc2 never seen down"
        time.sleep(0.5)
    assert err.consistency == CL.SERIAL
    assert err.required_replicas == 3 and err.alive_replicas == 2
    with pytest.raises(Unavailable) as e:
        s.execute(SimpleStatement("SELECT v FROM ks.t WHERE k = 1",
                                  consistency_level=CL.SERIAL))
    assert e.value.required_replicas == 3 and e.value.alive_replicas == 2
    # LOCAL_SERIAL: dc1's 2 replicas are its whole quorum
    r = lwt("UPDATE ks.t SET v = 2 WHERE k = 1 IF v = 1", CL.LOCAL_SERIAL)
    assert r.was_applied
    r = lwt("UPDATE ks.t SET v = 3 WHERE k = 1 IF v = 1", CL.LOCAL_SERIAL)
    assert not r.was_applied and r.one().v == 2
    r = lwt("INSERT INTO ks.t (k, v) VALUES (1, 7) IF NOT EXISTS",
            CL.LOCAL_SERIAL)
    assert not r.was_applied and r.one().v == 2
    assert lwt("INSERT INTO ks.t (k, v) VALUES (2, 7) IF NOT EXISTS",
               CL.LOCAL_SERIAL).was_applied
    for k, v in ((1, 2), (2, 7)):
        row = s.execute(SimpleStatement(
            "SELECT v FROM ks.t WHERE k = %d" % k,
            consistency_level=CL.LOCAL_SERIAL)).one()
        assert row.v == v
    c.shutdown()
