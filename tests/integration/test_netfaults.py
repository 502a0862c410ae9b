"""scripts/cluster's network faults on a real 2:2 cluster (127.0.30.x):
each takes effect (the other side turns DN, a client outside an isolated
DC is cut, latency rises by at least the injected delay, a flapping link
holds what is sent while it is down, a skewed clock stamps writes ahead),
and heal / `dc up` / a sweep after a command killed midway / a cluster
directory deleted under its rules leave no rule and no fault behind.

Needs root for iptables (sessions and CI run as root); skipped otherwise.
Only lower bounds on time are asserted: nothing can arrive before the
fault lets it."""
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import Unavailable
from cassandra.cluster import (EXEC_PROFILE_DEFAULT, Cluster,
                               ExecutionProfile, NoHostAvailable)
from cassandra.policies import (FallthroughRetryPolicy,
                                WhiteListRoundRobinPolicy)
from cassandra.query import SimpleStatement

from clusters import TOOL, cluster_script, wait_for
from conftest import SOURCE_DIR

BASE = "127.0.30."
IPS = [f"{BASE}{i}" for i in range(1, 5)]  # dc1: .1 .2, dc2: .3 .4

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("iptables"),
    reason="partitions need root and iptables")


sys.path.insert(0, str(SOURCE_DIR / "scripts"))
import cluster_net  # noqa: E402
import drill  # noqa: E402

CHAIN = None  # this module's cluster's chain, set by the fixture


def our_chains():
    """The lines of `iptables -S` that name this cluster's chain."""
    out = subprocess.run(["iptables", "-w", "-S"], capture_output=True,
                         text=True, check=True).stdout
    return [l for l in out.splitlines() if CHAIN in l]


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("netfaults-home")
    run = cluster_script(tmp)
    run("create", "it", "-n", "2:2", "--base-ip", BASE,
        "-c", "gossip_interval=100ms", "-c", "write_request_timeout=1000ms")
    run("start", timeout=180)

    class C:
        name, dir = "it", run.home / "it"
    global CHAIN
    CHAIN = cluster_net.chain_name(C)
    c, s = session(IPS[0])
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 2}")
    s.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)
    c.shutdown()
    yield run
    run("heal", check=False)
    run("remove", check=False)


def session(ip, source=None):
    prof = ExecutionProfile(
        retry_policy=FallthroughRetryPolicy(), request_timeout=20,
        load_balancing_policy=WhiteListRoundRobinPolicy([ip]))
    kw = {}
    if source:
        kw["connection_class"] = drill.bound_connection_class(source)
    c = Cluster([ip], protocol_version=4, connect_timeout=3,
                execution_profiles={EXEC_PROFILE_DEFAULT: prof}, **kw)
    return c, c.connect()


def status(ip):
    r = subprocess.run([TOOL, "-h", ip, "status"], capture_output=True,
                       text=True, timeout=30)
    rows = {}
    for line in r.stdout.splitlines():
        p = line.split()
        if len(p) > 1 and p[1] in IPS:
            rows[p[1]] = p[0]
    return rows


def sees(ip, others, state):
    return wait_for(lambda: all(status(ip).get(o) == state for o in others),
                    timeout=60)


def tool(ip, *args):
    return subprocess.run([TOOL, "-h", ip, *args], capture_output=True,
                          text=True, timeout=30).stdout


def nothing_left(run):
    assert our_chains() == []
    assert "netfaults.json" not in os.listdir(run.home / "it")
    for ip in IPS:
        assert tool(ip, "netfault").strip() == "no faulty links"
        assert "+0.000 s" in tool(ip, "clockskew")


def write(s, cl, k=1):
    s.execute(SimpleStatement("INSERT INTO ks.t (k, v) VALUES (%s, 'x')",
                              consistency_level=cl), (k,))


def test_partition_cuts_the_dcs_apart_and_dc_up_heals_it(net):
    net("dc", "dc2", "down", "--mode", "partition")
    assert our_chains(), "no chain of the cluster's own"
    assert "dc2 partitioned" in net("status").stdout
    assert sees(IPS[0], IPS[2:], "DN") and sees(IPS[2], IPS[:2], "DN")
    for ip in (IPS[0], IPS[2]):  # both sides keep serving LOCAL_QUORUM
        c, s = session(ip)
        write(s, CL.LOCAL_QUORUM)
        with pytest.raises(Unavailable):
            write(s, CL.EACH_QUORUM)
        c.shutdown()
    net("dc", "dc2", "up")
    assert sees(IPS[0], IPS, "UN") and sees(IPS[2], IPS, "UN")
    nothing_left(net)


def test_one_way_cut_loses_only_one_sides_messages(net):
    net("partition", "dc2", "dc1", "--one-way")
    rules = subprocess.run(["iptables", "-w", "-S"], capture_output=True,
                           text=True).stdout
    assert f"-s {IPS[2]}/32 -d {IPS[0]}/32 -p tcp -m tcp --dport 7000" \
        in rules
    assert f"-s {IPS[0]}/32 -d {IPS[2]}/32 -p tcp -m tcp --sport 7000" \
        in rules
    # dc2's gossip never reaches dc1, nor its answers to dc1's: each side
    # convicts the other, though dc1's messages still arrive.
    assert sees(IPS[0], IPS[2:], "DN")
    net("heal")
    assert sees(IPS[0], IPS, "UN")
    nothing_left(net)


def test_isolated_dc_answers_only_its_own_clients(net):
    net("dc", "dc2", "down", "--mode", "isolate")
    inside = net("status").stdout.split("its clients: ")[1].split(")")[0]
    assert inside == f"{BASE}253"
    with pytest.raises(NoHostAvailable):  # from 127.0.0.1: outside
        session(IPS[2])
    c, s = session(IPS[2], source=inside)
    write(s, CL.LOCAL_QUORUM)
    c.shutdown()
    c, s = session(IPS[0])  # dc1 keeps its clients
    write(s, CL.LOCAL_QUORUM)
    c.shutdown()
    assert sees(IPS[0], IPS[2:], "DN")
    net("dc", "dc2", "up")
    assert sees(IPS[0], IPS, "UN")
    nothing_left(net)


def timed_writes(s, cl, n, pause=0.0):
    out = []
    for i in range(n):
        t = time.monotonic()
        write(s, cl, k=100 + i)
        out.append(time.monotonic() - t)
        time.sleep(pause)
    return out


def test_wan_delay_adds_at_least_a_round_trip_to_each_quorum(net):
    c, s = session(IPS[0])
    timed_writes(s, CL.EACH_QUORUM, 3)  # connections up
    net("link", "dc1", "dc2", "--delay", "150ms", "--jitter", "10ms",
        "--loss", "1%")
    assert "delay 150ms jitter 10ms loss 1%" in tool(IPS[0], "netfault")
    assert "delay 150ms" in tool(IPS[3], "netfault")
    # A request there and its answer back: each waits 150 ms +- 10 ms.
    assert min(timed_writes(s, CL.EACH_QUORUM, 5)) >= 0.280
    assert IPS[0] not in tool(IPS[1], "netfault")  # dc1 to dc1 untouched
    net("link", "dc1", "dc2", "--clear")
    c.shutdown()
    nothing_left(net)


def test_flapping_link_holds_writes_sent_while_it_is_down(net):
    c, s = session(IPS[0])
    timed_writes(s, CL.EACH_QUORUM, 3)
    net("link", "dc1", "dc2", "--flap", "700ms/1000ms")
    assert "flap-down 700ms every 1000ms" in tool(IPS[0], "netfault")
    # Down 70% of the time: of 20 writes 100 ms apart, some are sent in a
    # down window and wait for the link, up to 0.7 s.
    took = timed_writes(s, CL.EACH_QUORUM, 20, pause=0.1)
    net("link", "dc1", "dc2", "--clear")
    c.shutdown()
    assert max(took) >= 0.2, took
    nothing_left(net)


def test_clock_skew_stamps_the_nodes_writes_ahead(net):
    net("node", "node1", "skew", "30s")
    assert "+30.000 s" in tool(IPS[0], "clockskew")
    c, s = session(IPS[0])
    s.use_client_timestamp = False  # the coordinator's clock
    write(s, CL.LOCAL_QUORUM, k=500)
    ts = s.execute("SELECT writetime(v) AS w FROM ks.t WHERE k = 500").one().w
    c.shutdown()
    assert ts / 1e6 >= time.time() + 25
    net("node", "node1", "skew", "0")
    assert "+0.000 s" in tool(IPS[0], "clockskew")
    # A restarted node gets its recorded skew back.
    net("node", "node2", "skew", "-5s")
    net("node", "node2", "stop")
    net("node", "node2", "start", timeout=120)
    assert "-5.000 s" in tool(IPS[1], "clockskew")
    net("heal")
    nothing_left(net)


def test_a_command_killed_midway_leaves_no_rule_after_the_next_one(net):
    # A process that applied a partition it owns, then died (SIGKILL):
    # its rules stay until the next command sweeps them.
    code = (
        "import os, signal, sys; sys.path.insert(0, sys.argv[1]); "
        "import cluster, cluster_net; c = cluster.Cluster('it'); "
        "cluster_net.add(c, {'kind': 'partition', 'a': 'dc1', 'b': 'dc2', "
        "'label': 'killed midway'}, owner=cluster_net.owner_self()); "
        "os.kill(os.getpid(), signal.SIGKILL)")
    r = subprocess.run([sys.executable, "-c", code,
                        str(SOURCE_DIR / "scripts")], env=net.env)
    assert r.returncode == -9
    assert our_chains()
    assert "killed midway" in (net.home / "it" / "netfaults.json").read_text()
    net("status")
    assert our_chains() == []
    nothing_left(net)


def test_rules_of_a_deleted_cluster_are_swept(net, tmp_path):
    # Another cluster (its own home) partitioned, then its directory
    # deleted without `remove`: the next command of any cluster sweeps
    # its hook and chain, and leaves ours alone.
    other = cluster_script(tmp_path)
    other("create", "gone", "-n", "1:1", "--base-ip", "127.0.33.")
    other("partition", "dc1", "dc2")
    chains = subprocess.run(["iptables", "-w", "-S"], capture_output=True,
                            text=True).stdout
    assert "-N CASSINI-gone-" in chains
    net("dc", "dc2", "down", "--mode", "partition")
    shutil.rmtree(other.home / "gone")
    net("status")
    chains = subprocess.run(["iptables", "-w", "-S"], capture_output=True,
                            text=True).stdout
    assert "CASSINI-gone-" not in chains
    assert "-N CASSINI-it-" in chains  # still ours, still wanted
    net("heal")
    nothing_left(net)


def test_remove_takes_the_clusters_rules_with_it(tmp_path):
    other = cluster_script(tmp_path)
    other("create", "gone", "-n", "1:1", "--base-ip", "127.0.34.")
    other("-C", "gone", "partition", "dc1", "dc2")
    other("-C", "gone", "link", "dc1", "dc2", "--delay", "5ms")
    assert "-N CASSINI-gone-" in subprocess.run(
        ["iptables", "-w", "-S"], capture_output=True, text=True).stdout
    other("-C", "gone", "remove")
    assert "CASSINI-gone-" not in subprocess.run(
        ["iptables", "-w", "-S"], capture_output=True, text=True).stdout
