"""cassini-tool repair --paxos-only with real processes: 3 nodes RF 3; a
conditional write whose proposal node1 accepted alone (the paxosfault test
hook: its proposals reach only itself, as if it died right after its own
accept) is unknown to the client and on no replica's data; paxos repair on
node1 finishes it, and then a plain read at ONE from each replica sees it.
A second unfinished proposal in another table is left to a repair of all
keyspaces, which the first (ks t) must not have touched.

Nodes live on 127.0.107.21-23."""
import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import WriteTimeout
from cassandra.query import SimpleStatement

from clusters import session, tool, tool_run, wait_for
from conftest import default_yaml, seeds_yaml, wait_all_normal

IPS = ["127.0.107.21", "127.0.107.22", "127.0.107.23"]


def read_one(ip, table, k):
    c, s = session(ip)
    try:
        r = s.execute(SimpleStatement(
            f"SELECT v FROM ks.{table} WHERE k = %s",
            consistency_level=CL.ONE), (k,)).one()
        return r.v if r else None
    finally:
        c.shutdown()


def read_one_quorum(s, table, k):
    r = s.execute(SimpleStatement(
        f"SELECT v FROM ks.{table} WHERE k = %s",
        consistency_level=CL.QUORUM), (k,)).one()
    return r.v if r else None


def counts(out):
    """(scanned, completed, failed) from the summary line."""
    line = [x for x in out.splitlines() if "partitions scanned" in x][0]
    nums = [int(p.split(":")[1]) for p in line.strip().split(",")]
    return tuple(nums)


def test_paxos_repair_completes_an_unfinished_proposal(make_node):
    nodes = []
    for i, ip in enumerate(IPS):
        n = make_node(default_yaml(
            listen_address=ip, gossip_interval="200ms",
            test_fault_injection="true", write_request_timeout="1000ms",
            seed_provider=seeds_yaml(IPS[0])), name=f"n{i}")
        n.start()
        nodes.append(n)
        assert n.wait_for_log("CQL clients on", timeout=30), n.log()
    wait_all_normal(IPS)
    c, s = session(IPS[0])
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int)")
    s.execute("CREATE TABLE ks.u (k int PRIMARY KEY, v int)")
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)
    # a finished one, to be scanned and left alone
    assert s.execute("INSERT INTO ks.t (k, v) VALUES (2, 20) "
                     "IF NOT EXISTS").was_applied

    tool(IPS[0], "paxosfault", "propose-self-only", "on")
    for table, v in (("t", 10), ("u", 30)):
        with pytest.raises(WriteTimeout) as e:
            s.execute(f"INSERT INTO ks.{table} (k, v) VALUES (1, {v}) "
                      "IF NOT EXISTS")
        assert "CAS operation result is unknown" in str(e.value)
    tool(IPS[0], "paxosfault", "propose-self-only", "off")
    # accepted by node1 only: on no replica's data
    for ip in IPS:
        assert read_one(ip, "t", 1) is None
        assert read_one(ip, "u", 1) is None

    # node2 holds no unfinished proposal: nothing to complete there
    out = tool(IPS[1], "repair", "--paxos-only", "ks", "t")
    assert counts(out)[1:] == (0, 0), out

    out = tool(IPS[0], "repair", "--paxos-only", "ks", "t")
    assert "Paxos repair of ks.t finished" in out, out
    scanned, completed, failed = counts(out)
    assert (completed, failed) == (1, 0), out
    assert scanned >= 2, out
    # committed at quorum before the round ends; sent to all three
    assert read_one_quorum(s, "t", 1) == 10
    for ip in IPS:
        assert wait_for(lambda: read_one(ip, "t", 1) == 10, 20), ip
        assert read_one(ip, "u", 1) is None, ip  # not of ks.t
    # again: nothing is unfinished any more
    assert counts(tool(IPS[0], "repair", "--paxos-only", "ks", "t"))[1] == 0

    out = tool(IPS[0], "repair", "--paxos-only")
    assert "Paxos repair of all keyspaces finished" in out, out
    assert counts(out)[1:] == (1, 0), out
    assert read_one_quorum(s, "u", 1) == 30
    for ip in IPS:
        assert wait_for(lambda: read_one(ip, "u", 1) == 30, 20), ip
    # a SERIAL read agrees, and the finished row is untouched
    r = s.execute(SimpleStatement("SELECT v FROM ks.t WHERE k = 1",
                                  consistency_level=CL.SERIAL)).one()
    assert r.v == 10
    assert read_one(IPS[2], "t", 2) == 20

    r = tool_run(IPS[0], "repair", "--paxos-only", "nope")
    assert r.returncode == 1 and "Keyspace [nope] does not exist" in r.stderr
    r = tool_run(IPS[0], "repair", "--paxos-only", "ks", "nope")
    assert r.returncode == 1 and "Unknown keyspace/cf pair" in r.stderr
    c.shutdown()
