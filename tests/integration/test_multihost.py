"""A 3:3 cluster on six hosts, each a network namespace of its own, with
the stock driver in the root namespace as a client on another machine.

The network (created and removed here; every address in 10.231.0.0/16,
used only inside these namespaces and on the test's own bridge):

  public  cmhpub bridge: host i has 10.231.0.i on eth0, the root
          namespace (the driver) 10.231.0.254. Every node's
          broadcast_address and broadcast_rpc_address.
  dc1     cmhdc1 bridge, hosts 1-3: 10.231.1.i on eth1 (listen_address).
  dc2     cmhdc2 bridge, hosts 4-6: 10.231.2.i and fd31:2::i on eth1;
          the nodes take fd31:2::i (listen_interface: eth1,
          listen_interface_prefer_ipv6).

The public network stands for the routed network between sites: the
private subnets are reached across it (a route for 10.231.0.0/16 on eth0),
so a node's connection from its listen address to another DC's public
address is answered. Every node binds the CQL port to 0.0.0.0, listens on
its broadcast address too (listen_on_broadcast_address) and has
prefer_local=true: the nodes of a DC talk on their private network, DCs on
the public one. Cutting dc2's public links (its hosts' WAN) is a DC loss
for dc1 and its clients, while dc2's nodes still see each other.

Leftovers of a killed run (namespaces cassini-mh-*, links cmh*) are swept
before and after. Needs root (CI runs as root); skipped elsewhere.
"""
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import Unavailable
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import DCAwareRoundRobinPolicy
from cassandra.query import SimpleStatement

from conftest import BUILD_DIR

NS_PREFIX = "cassini-mh-"
LINK_PREFIX = "cmh"
HOSTS = range(1, 7)
CASSINID = BUILD_DIR / "node" / "cassinid"
TOOL = BUILD_DIR / "node" / "cassini-tool"


def ns(i):
    return f"{NS_PREFIX}{i}"


def pub(i):
    return f"10.231.0.{i}"


def dc_of(i):
    return "dc1" if i <= 3 else "dc2"


def private(i):
    """The address node i listens on (what prefer_local connects to)."""
    return f"10.231.1.{i}" if i <= 3 else f"fd31:2::{i}"


def sh(*argv, check=True):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check:
        assert r.returncode == 0, (argv, r.stdout, r.stderr)
    return r


def sweep():
    """Removes this test's namespaces (and what runs in them) and links."""
    for line in sh("ip", "netns", "list").stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(NS_PREFIX):
            continue
        for pid in sh("ip", "netns", "pids", name,
                      check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        sh("ip", "netns", "del", name, check=False)
    for line in sh("ip", "-o", "link", "show").stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(LINK_PREFIX):
            sh("ip", "link", "del", name, check=False)


def make_network():
    for br in ("cmhpub", "cmhdc1", "cmhdc2"):
        sh("ip", "link", "add", br, "type", "bridge")
        sh("ip", "link", "set", br, "up")
    sh("ip", "addr", "add", "10.231.0.254/24", "dev", "cmhpub")
    for i in HOSTS:
        n = ns(i)
        sh("ip", "netns", "add", n)
        for side, bridge, inner in (("p", "cmhpub", "eth0"),
                                    ("d", "cmh" + dc_of(i), "eth1")):
            outer = f"cmh{i}{side}"
            sh("ip", "link", "add", outer, "type", "veth", "peer", "name",
               outer + "n")
            sh("ip", "link", "set", outer + "n", "netns", n)
            sh("ip", "-n", n, "link", "set", outer + "n", "name", inner)
            sh("ip", "link", "set", outer, "master", bridge, "up")
            sh("ip", "-n", n, "link", "set", inner, "up")
        sh("ip", "-n", n, "link", "set", "lo", "up")
        sh("ip", "-n", n, "addr", "add", f"{pub(i)}/24", "dev", "eth0")
        sh("ip", "-n", n, "route", "add", "10.231.0.0/16", "dev", "eth0")
        if i <= 3:
            sh("ip", "-n", n, "addr", "add", f"10.231.1.{i}/24", "dev",
               "eth1")
        else:
            sh("ip", "-n", n, "addr", "add", f"10.231.2.{i}/24", "dev",
               "eth1")
            sh("ip", "-n", n, "-6", "addr", "add", f"fd31:2::{i}/64", "dev",
               "eth1", "nodad")


def node_yaml(i):
    where = (f"listen_address: {private(i)}\n" if i <= 3 else
             "listen_interface: eth1\nlisten_interface_prefer_ipv6: true\n")
    return (f"cluster_name: 'Multihost'\n"
            f"num_tokens: 8\n"
            f"{where}"
            f"broadcast_address: {pub(i)}\n"
            f"listen_on_broadcast_address: true\n"
            f"rpc_address: 0.0.0.0\n"
            f"broadcast_rpc_address: {pub(i)}\n"
            f"admin_address: {pub(i)}\n"
            f"seed_provider:\n"
            f"  - class_name: SimpleSeedProvider\n"
            f"    parameters:\n"
            f"      - seeds: \"{pub(1)},{pub(4)}\"\n"
            f"endpoint_snitch: GossipingPropertyFileSnitch\n"
            f"gossip_interval: 250ms\n"
            f"ring_delay: 1000ms\n")


class Host:
    def __init__(self, i, root):
        self.i = i
        self.home = root / f"host{i}"
        conf = self.home / "conf"
        conf.mkdir(parents=True)
        (conf / "node.yaml").write_text(node_yaml(i))
        (conf / "rackdc.properties").write_text(
            f"dc={dc_of(i)}\nrack=rack{(i - 1) % 3 + 1}\nprefer_local=true\n")
        self.stderr = open(self.home / "stderr.txt", "wb")
        # ip netns exec execs the command: the pid is cassinid's
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns(i), str(CASSINID), "-c", str(conf)],
            stdout=subprocess.DEVNULL, stderr=self.stderr)

    def log(self):
        p = self.home / "logs" / "system.log"
        return p.read_text() if p.exists() else ""

    def tool(self, *args):
        """cassini-tool inside the host (works while its links are cut)."""
        return subprocess.run(["ip", "netns", "exec", ns(self.i), str(TOOL),
                               "-h", pub(self.i), *args],
                              capture_output=True, text=True, timeout=30)

    def states(self):
        """{address: 'UN'/'DN'/...} as this node's status lists them."""
        out = {}
        for line in self.tool("status").stdout.splitlines():
            parts = line.split()
            if len(parts) > 1 and parts[1].startswith("10.231."):
                out[parts[1]] = parts[0]
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def sees(host, want):
    """Whether `host` lists every address of `want` in its state."""
    st = host.states()
    return all(st.get(a) == s for a, s in want.items())


def all_up():
    return {pub(i): "UN" for i in HOSTS}


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("network namespaces need root and iproute2")
    sweep()
    started = []
    try:
        make_network()
        root = tmp_path_factory.mktemp("multihost")
        for i in HOSTS:
            started.append(Host(i, root))
        try:
            wait_for(lambda: all(sees(h, all_up()) for h in started), 120,
                     "every node to list all six UN")
        except AssertionError:
            raise AssertionError("\n".join(
                f"--- host{h.i}: {h.states()}\n{h.log()[-3000:]}"
                for h in started))
        yield started
    finally:
        for h in started:
            h.stop()
        sweep()


def session(contact, dc):
    prof = ExecutionProfile(
        load_balancing_policy=DCAwareRoundRobinPolicy(local_dc=dc),
        request_timeout=20)
    c = Cluster([contact], protocol_version=4,
                execution_profiles={EXEC_PROFILE_DEFAULT: prof})
    return c, c.connect()


def at(s, cql, cl, params=None):
    return s.execute(SimpleStatement(cql, consistency_level=cl), params)


def ss_peers(i):
    """Addresses host i has internode connections open to."""
    out = sh("ip", "netns", "exec", ns(i), "ss", "-Htn", "state",
             "established", "( dport = :7000 )").stdout
    return {line.split()[-1].rsplit(":", 1)[0].strip("[]")
            for line in out.splitlines() if line.strip()}


def test_the_driver_finds_every_node_by_its_broadcast_addresses(hosts):
    cluster, s = session(pub(1), "dc1")
    try:
        found = {h.address: h for h in cluster.metadata.all_hosts()}
        assert set(found) == {pub(i) for i in HOSTS}, found
        for i in HOSTS:
            assert found[pub(i)].datacenter == dc_of(i)
        # node1's own rows: it binds 0.0.0.0 and tells 10.231.0.1
        local = s.execute("SELECT broadcast_address, listen_address, "
                          "rpc_address FROM system.local",
                          host=found[pub(1)]).one()
        assert (local.broadcast_address, local.listen_address,
                local.rpc_address) == (pub(1), private(1), pub(1))
        peers = {r.peer: r for r in s.execute(
            "SELECT peer, native_address, native_port, preferred_ip "
            "FROM system.peers_v2", host=found[pub(1)])}
        assert set(peers) == {pub(i) for i in HOSTS if i != 1}
        for i in HOSTS:
            if i == 1:
                continue
            r = peers[pub(i)]
            assert (r.native_address, r.native_port) == (pub(i), 9042)
            # prefer_local: dc1's peers are reached on their listen address
            assert r.preferred_ip == (private(i) if i <= 3 else None), r
    finally:
        cluster.shutdown()
    # dc2's node4 as a client of dc2 sees it: it listens on IPv6
    cluster, s = session(pub(4), "dc2")
    try:
        found = {h.address: h for h in cluster.metadata.all_hosts()}
        assert set(found) == {pub(i) for i in HOSTS}, found
        local = s.execute("SELECT broadcast_address, listen_address, "
                          "rpc_address FROM system.local",
                          host=found[pub(4)]).one()
        assert (local.broadcast_address, local.listen_address,
                local.rpc_address) == (pub(4), private(4), pub(4))
        old = {r.peer: (r.rpc_address, r.preferred_ip) for r in s.execute(
            "SELECT peer, rpc_address, preferred_ip FROM system.peers",
            host=found[pub(4)])}
        assert old == {pub(i): (pub(i), private(i) if i > 3 else None)
                       for i in HOSTS if i != 4}
    finally:
        cluster.shutdown()
    # the connections themselves: inside a DC on the private addresses
    # (IPv6 in dc2), across DCs on the public ones
    wait_for(lambda: {private(2), private(3)} <= ss_peers(1) and
             not {pub(2), pub(3)} & ss_peers(1), 30,
             f"host1's connections to dc1 on 10.231.1.x: {ss_peers(1)}")
    wait_for(lambda: {private(5), private(6)} <= ss_peers(4), 30,
             f"host4's connections to dc2 on fd31:2::x: {ss_peers(4)}")
    assert {pub(4), pub(5), pub(6)} & ss_peers(1), ss_peers(1)


def test_local_quorum_reads_and_writes_in_each_dc(hosts):
    c1, s1 = session(pub(1), "dc1")
    c2, s2 = session(pub(4), "dc2")
    try:
        s1.execute("CREATE KEYSPACE mh WITH replication = {'class': "
                   "'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 3}")
        s1.execute("CREATE TABLE mh.kv (k int PRIMARY KEY, v text)")
        wait_for(lambda: cluster_agrees(c1), 30, "schema agreement")
        ins = "INSERT INTO mh.kv (k, v) VALUES (%s, %s)"
        for k in range(60):
            at(s1, ins, CL.EACH_QUORUM if k < 30 else CL.LOCAL_QUORUM,
               (k, f"dc1-{k}"))
        for k in range(60, 90):
            at(s2, ins, CL.LOCAL_QUORUM, (k, f"dc2-{k}"))
        got1 = {r.k for r in at(s1, "SELECT k FROM mh.kv", CL.LOCAL_QUORUM)}
        assert got1 >= set(range(60)), got1
        # what each DC wrote at LOCAL_QUORUM reaches the other in the
        # background; EACH_QUORUM's rows are there at once
        got2 = {r.k for r in at(s2, "SELECT k FROM mh.kv WHERE k IN "
                                "(0, 10, 29)", CL.LOCAL_QUORUM)}
        assert got2 == {0, 10, 29}
        wait_for(lambda: len(at(s2, "SELECT k FROM mh.kv",
                                CL.LOCAL_QUORUM).all()) == 90 and
                 len(at(s1, "SELECT k FROM mh.kv",
                        CL.LOCAL_QUORUM).all()) == 90, 30,
                 "every row in both DCs")
    finally:
        c1.shutdown()
        c2.shutdown()


def cluster_agrees(cluster):
    try:
        return cluster.control_connection.wait_for_schema_agreement(
            wait_time=5)
    except Exception:
        return False


def links(ips, state):
    for i in ips:
        sh("ip", "link", "set", f"cmh{i}p", state)


def test_cutting_a_dcs_links_is_a_dc_loss(hosts):
    by = {h.i: h for h in hosts}
    c1, s1 = session(pub(1), "dc1")
    try:
        links((4, 5, 6), "down")
        dc2_down = {pub(i): "DN" for i in (4, 5, 6)}
        for i in (1, 2, 3):
            wait_for(lambda: sees(by[i], dc2_down), 60,
                     f"node{i} to see dc2 down: {by[i].states()}")
        # dc2 is cut off from dc1 only: on its private network (prefer
        # local) its nodes still see each other
        for i in (4, 5, 6):
            want = {pub(j): ("UN" if j > 3 else "DN") for j in HOSTS}
            wait_for(lambda: sees(by[i], want), 60,
                     f"node{i}: dc2 up, dc1 down: {by[i].states()}")
        # the STATUS_CHANGE DOWN events name dc2's broadcast_rpc_address,
        # the address the driver knows those hosts by
        dc2 = [h for h in c1.metadata.all_hosts() if h.datacenter == "dc2"]
        assert len(dc2) == 3
        wait_for(lambda: not any(h.is_up for h in dc2), 30,
                 f"the driver to mark dc2 down: {[h.is_up for h in dc2]}")
        ins = "INSERT INTO mh.kv (k, v) VALUES (%s, %s)"
        for k in range(100, 140):
            at(s1, ins, CL.LOCAL_QUORUM, (k, f"cut-{k}"))
        rows = at(s1, "SELECT k, v FROM mh.kv WHERE k IN (100, 139)",
                  CL.LOCAL_QUORUM).all()
        assert {(r.k, r.v) for r in rows} == {(100, "cut-100"),
                                               (139, "cut-139")}
        for cl in (CL.QUORUM, CL.EACH_QUORUM):
            with pytest.raises(Unavailable):
                at(s1, ins, cl, (999, "no"))
    finally:
        links((4, 5, 6), "up")
        c1.shutdown()
    for h in hosts:
        wait_for(lambda: sees(h, all_up()), 90,
                 f"node{h.i} to see all UN again: {h.states()}")
    # the writes dc2 missed arrive as hints
    c2, s2 = session(pub(4), "dc2")
    try:
        want = {(k, f"cut-{k}") for k in range(100, 140)}
        wait_for(lambda: want <= {(r.k, r.v) for r in at(
            s2, "SELECT k, v FROM mh.kv", CL.LOCAL_QUORUM)}, 90,
            "dc2 to receive the hints of the writes made while cut off")
    finally:
        c2.shutdown()
