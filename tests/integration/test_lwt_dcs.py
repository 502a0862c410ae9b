"""Lightweight transactions across two datacenters with real processes:
3 + 3 nodes (NetworkTopologyStrategy 3 + 3), four clients of both DCs
doing CAS increments at SERIAL on one register while a dc2 node is killed
and a dc1 node is paused (SIGSTOP) and resumed; the history checked
linearizable (lincheck.py).

Nodes live on 127.0.114.1-6, a block of their own (suites run in
parallel; scripts/check-test-addresses)."""
import os
import signal
import threading
import time

from cassandra import ConsistencyLevel as CL
from cassandra.query import SimpleStatement

from clusters import session
from conftest import default_yaml, seeds_yaml, wait_all_normal
from lincheck import cas_increments, check

IPS = ["127.0.114.%d" % i for i in range(1, 7)]  # test-addresses: 127.0.114.1-6


def test_increments_across_two_datacenters_stay_linearizable(make_node):
    nodes = []
    for i, ip in enumerate(IPS):
        dc = "dc1" if i < 3 else "dc2"
        n = make_node(default_yaml(
            listen_address=ip, gossip_interval="250ms",
            seed_provider=seeds_yaml(IPS[0], IPS[3])), name=f"n{i}",
            rackdc=f"dc={dc}\nrack=rack1\n")
        n.start()
        nodes.append(n)
    for n in nodes:
        assert n.wait_for_log("CQL clients on", timeout=120), n.log()
    wait_all_normal(IPS, timeout=120)
    c, s = session(IPS[0])
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 3}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int)")
    assert c.control_connection.wait_for_schema_agreement(wait_time=60)
    s.execute(SimpleStatement("INSERT INTO ks.t (k, v) VALUES (0, 0)",
                              consistency_level=CL.ALL))
    history = []
    t0 = time.monotonic()
    stop_at = [time.monotonic() + 600]

    def incrementer(cid):
        # dc1's node1, node2 and dc2's node4, node5 (node6 gets killed)
        cc, ss = session(IPS[(0, 3, 1, 4)[cid % 4]])
        p = ss.prepare("UPDATE ks.t SET v = ? WHERE k = 0 IF v = ?")
        p.consistency_level = CL.QUORUM
        p.serial_consistency_level = CL.SERIAL
        cas_increments(ss, p, cid, t0, stop_at, history)
        cc.shutdown()

    ts = [threading.Thread(target=incrementer, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    time.sleep(3)
    nodes[5].kill()
    time.sleep(2)
    # dc1's node3 paused and resumed: its queued messages arrive late
    os.kill(nodes[2].proc.pid, signal.SIGSTOP)
    try:
        time.sleep(3)
    finally:
        os.kill(nodes[2].proc.pid, signal.SIGCONT)
    stop_at[0] = time.monotonic() + 3
    for t in ts:
        t.join()
    counts = {r: sum(1 for o in history if o.res == r)
              for r in ("ok", "fail", "unknown")}
    print("CAS increments across 2 DCs:", counts)
    assert counts["ok"] > 10, history
    verdict = check(history, 0)
    assert verdict is True, verdict
    c.shutdown()
