"""The paxos repair of moving ranges with real processes (docs/lwt.md,
"Paxos repair when ranges move"): 3 nodes RF 3 hold conditional writes
whose proposals node1 accepted alone (the paxosfault hook: as if it died
right after its own accept), on no replica's data. A 4th node bootstraps:
before it streams, the replicas of the ranges it takes finish the
proposals they hold there, and only there (node1 completes exactly the
keys the new node will replicate). Then node2, holding proposals it
accepted alone, is decommissioned: it finishes those of the ranges it
replicates (exactly those) before it streams them out. The data streamed
holds them all, so with node1 stopped (and node2 gone) SERIAL and ONE
reads through the new node see every one of them.

Nodes live on 127.0.107.40-43."""
import re

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import WriteTimeout
from cassandra.query import SimpleStatement

from clusters import session, tool, tool_run
from conftest import default_yaml, seeds_yaml, wait_all_normal

IPS = ["127.0.107.40", "127.0.107.41", "127.0.107.42"]
NEW = "127.0.107.43"
KEYS = 24


def yaml_for(ip):
    return default_yaml(
        listen_address=ip, gossip_interval="200ms", ring_delay="1000ms",
        num_tokens="4", test_fault_injection="true",
        write_request_timeout="1000ms", seed_provider=seeds_yaml(IPS[0]))


def test_bootstrap_finishes_the_proposals_of_its_ranges(make_node):
    nodes = []
    for i, ip in enumerate(IPS):
        n = make_node(yaml_for(ip), name=f"n{i}")
        n.start()
        nodes.append(n)
        assert n.wait_for_log("CQL clients on", timeout=30), n.log()
    wait_all_normal(IPS)
    c, s = session(IPS[0])
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int)")
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)

    tool(IPS[0], "paxosfault", "propose-self-only", "on")
    for k in range(KEYS):
        with pytest.raises(WriteTimeout) as e:
            s.execute(f"INSERT INTO ks.t (k, v) VALUES ({k}, {100 + k}) "
                      "IF NOT EXISTS")
        assert "CAS operation result is unknown" in str(e.value)
    tool(IPS[0], "paxosfault", "propose-self-only", "off")
    c.shutdown()

    new = make_node(yaml_for(NEW), name="n3")
    new.start()
    assert new.wait_for_log("bootstrap: complete", timeout=90), new.log()
    assert new.wait_for_log("CQL clients on", timeout=30), new.log()
    log = new.log()
    m = re.search(r"bootstrap: paxos repair of ks: (\d+) unfinished "
                  r"proposals completed on (\d+) replicas", log)
    assert m, log
    # the paxos repair ran before the streaming
    assert log.index("paxos repair of ks:") < \
        log.index("bootstrap: streaming keyspace ks")
    wait_all_normal(IPS + [NEW])
    moving = [k for k in range(KEYS) if NEW in
              tool(NEW, "getendpoints", "ks", "t", str(k)).split()]
    assert 0 < len(moving) < KEYS, moving
    # node1 held all of them; only the moving ranges' were finished
    # there (another replica's share may also count one it found in
    # progress while node1's round re-proposed it)
    assert int(m.group(2)) == 3, m.group(0)
    assert int(m.group(1)) >= len(moving), (m.group(0), moving)
    own = re.findall(r"paxos repair of moving ranges: (\d+) unfinished "
                     r"proposals completed, 0 failed", nodes[0].log())
    assert own and int(own[-1]) == len(moving), (own, moving)

    # node1 still holds, alone, the proposals of the ranges that did not
    # move. Finish them now: else node1's share of the decommission below
    # re-proposes them to node2 while node2's share scans, and node2
    # counts those it finds accepted but not yet committed.
    tool(IPS[0], "repair", "--paxos-only", "ks")

    # node2 leaves while it holds proposals it accepted alone: the
    # decommission finishes those of its ranges before it streams them
    c, s = session(IPS[1])
    tool(IPS[1], "paxosfault", "propose-self-only", "on")
    for k in range(100, 100 + KEYS):
        with pytest.raises(WriteTimeout):
            s.execute(f"INSERT INTO ks.t (k, v) VALUES ({k}, {100 + k}) "
                      "IF NOT EXISTS")
    tool(IPS[1], "paxosfault", "propose-self-only", "off")
    c.shutdown()
    held = [k for k in range(100, 100 + KEYS) if IPS[1] in
            tool(NEW, "getendpoints", "ks", "t", str(k)).split()]
    assert held, held
    r = tool_run(IPS[1], "decommission")
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"\[decommission\] paxos repair of ks: (\d+) unfinished "
                  r"proposals completed on (\d+) replicas", r.stdout)
    assert m and int(m.group(1)) >= len(held), (r.stdout, held)
    assert r.stdout.index("paxos repair of ks:") < \
        r.stdout.index("[decommission] streaming keyspace ks"), r.stdout
    own = re.findall(r"paxos repair of moving ranges: (\d+) unfinished "
                     r"proposals completed, 0 failed", nodes[1].log())
    assert own and int(own[-1]) == len(held), (own, held)
    moving += held

    nodes[0].stop()
    c, s = session(NEW)
    try:
        for k in moving:
            r = s.execute(SimpleStatement(
                f"SELECT v FROM ks.t WHERE k = {k}",
                consistency_level=CL.SERIAL)).one()
            assert r is not None and r.v == 100 + k, k
            # and on the new node's own copy
            r = s.execute(SimpleStatement(
                f"SELECT v FROM ks.t WHERE k = {k}",
                consistency_level=CL.ONE)).one()
            assert r is not None and r.v == 100 + k, k
    finally:
        c.shutdown()
