"""system.paxos purging (paxos_state_purging: legacy; docs/lwt.md,
"Purging system.paxos") with real processes: 2 nodes RF 2. Registers of
finished LWTs are written with a TTL of max(3 h, the table's
gc_grace_seconds); an unfinished one (the paxosfault hook leaves a proposal
accepted by node1 alone) never expires. With node1's wall clock moved 4 h
ahead (clockskew), `repair --paxos-only` on it scans only what is left: t
(gc_grace 1 h: TTL 3 h) has lost its finished registers, u (gc_grace 1 day)
has kept them; the unfinished proposal is still there and is completed;
the data itself is untouched.

Nodes live on 127.0.107.46-47."""
import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import WriteTimeout
from cassandra.query import SimpleStatement

from clusters import session, tool
from conftest import default_yaml, seeds_yaml, wait_all_normal

IPS = ["127.0.107.46", "127.0.107.47"]


def scanned(out):
    line = [x for x in out.splitlines() if "partitions scanned" in x][0]
    return tuple(int(p.split(":")[1]) for p in line.strip().split(","))


def test_finished_registers_expire_unfinished_ones_stay(make_node):
    for i, ip in enumerate(IPS):
        n = make_node(default_yaml(
            listen_address=ip, gossip_interval="200ms",
            test_fault_injection="true", write_request_timeout="1000ms",
            seed_provider=seeds_yaml(IPS[0])), name=f"n{i}")
        n.start()
        assert n.wait_for_log("CQL clients on", timeout=30), n.log()
    wait_all_normal(IPS)
    c, s = session(IPS[0])
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 2}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int) "
              "WITH gc_grace_seconds = 3600")
    s.execute("CREATE TABLE ks.u (k int PRIMARY KEY, v int) "
              "WITH gc_grace_seconds = 86400")
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)
    for table in ("t", "u"):
        for k in range(5):
            assert s.execute(f"INSERT INTO ks.{table} (k, v) VALUES "
                             f"({k}, {k}) IF NOT EXISTS").was_applied
    tool(IPS[0], "paxosfault", "propose-self-only", "on")
    with pytest.raises(WriteTimeout):
        s.execute("INSERT INTO ks.t (k, v) VALUES (9, 9) IF NOT EXISTS")
    tool(IPS[0], "paxosfault", "propose-self-only", "off")
    # before: 5 finished registers and k 9's (node2 only promised it:
    # nothing of its own to complete)
    assert scanned(tool(IPS[1], "repair", "--paxos-only", "ks", "t")) \
        == (6, 0, 0)

    tool(IPS[0], "clockskew", "set", "4h")
    out = tool(IPS[0], "repair", "--paxos-only", "ks", "t")
    # t: only the unfinished register is left; it is completed
    assert scanned(out) == (1, 1, 0), out
    out = tool(IPS[0], "repair", "--paxos-only", "ks", "u")
    assert scanned(out) == (5, 0, 0), out  # a day's TTL: all kept
    tool(IPS[0], "clockskew", "clear")
    for table, keys in (("t", list(range(5)) + [9]), ("u", range(5))):
        for k in keys:
            r = s.execute(SimpleStatement(
                f"SELECT v FROM ks.{table} WHERE k = {k}",
                consistency_level=CL.SERIAL)).one()
            assert r is not None and r.v == k, (table, k)
    c.shutdown()
