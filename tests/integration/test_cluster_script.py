"""scripts/cluster as a user drives it: create, start, status, pause,
kill, DC down/up, remove. Uses the test build's binaries and a private
CASSINI_HOME."""
import json
import os
import re
import subprocess
import time

from conftest import BUILD_DIR, SOURCE_DIR

import pytest


@pytest.fixture
def cluster(tmp_path):
    env = dict(os.environ, CASSINI_HOME=str(tmp_path / "home"),
               CASSINI_BIN_DIR=str(BUILD_DIR))

    def run(*args, check=True):
        r = subprocess.run(["/usr/bin/python3",
                            str(SOURCE_DIR / "scripts" / "cluster.py"), *args],
                           capture_output=True, text=True, env=env,
                           timeout=60)
        if check:
            assert r.returncode == 0, r.stderr
        return r

    yield run
    run("-C", "it", "remove", check=False)


def states(out):
    rows = [l.split() for l in out.splitlines()[2:] if l.strip()]
    return {r[0]: r[4] for r in rows}


def test_create_start_status_and_remove(cluster, tmp_path):
    out = cluster("create", "it", "-n", "2:1", "--racks", "2",
                  "--base-ip", "127.0.1.", "-c", "gossip_interval=250ms").stdout
    assert "Created cluster 'it' with 3 nodes" in out
    home = tmp_path / "home" / "clusters" / "it"
    yaml = (home / "node2" / "conf" / "node.yaml").read_text()
    assert "listen_address: 127.0.1.2" in yaml
    assert 'seeds: "127.0.1.1,127.0.1.3"' in yaml  # first node of each DC
    assert "gossip_interval: 250ms" in yaml
    assert (home / "node2" / "conf" / "rackdc.properties").read_text() \
        == "dc=dc1\nrack=rack2\n"
    assert (home / "node3" / "conf" / "rackdc.properties").read_text() \
        == "dc=dc2\nrack=rack1\n"

    out = cluster("start").stdout
    assert "3 of 3 nodes running" in out
    assert states(cluster("status").stdout) == {
        "node1": "running", "node2": "running", "node3": "running"}

    cluster("dc", "dc1", "down", "--mode", "pause")
    assert states(cluster("status").stdout) == {
        "node1": "paused", "node2": "paused", "node3": "running"}
    cluster("dc", "dc1", "up")
    cluster("node", "node3", "kill")
    assert states(cluster("status").stdout)["node3"] == "stopped"
    cluster("node", "node3", "start")
    assert "cassinid ready" in cluster("node", "node3", "log").stdout
    cluster("dc", "dc2", "down", "--mode", "stop")
    assert "shutdown complete (SIGTERM)" in \
        (home / "node3" / "logs" / "system.log").read_text()
    cluster("stop")
    assert set(states(cluster("status").stdout).values()) == {"stopped"}
    assert "* it" in cluster("list").stdout
    cluster("remove")
    assert not home.exists()


def token_choices(tmp_path, n):
    """{i: (how many nodes of dc1 node i's token choice saw, the rack of
    the next joiner it prepared for or None)}, from the log line each node
    writes when it chooses."""
    home = tmp_path / "home" / "clusters" / "it"
    seen = {}
    for i in range(1, n + 1):
        log = (home / f"node{i}" / "logs" / "system.log").read_text()
        m = re.search(r"chose 16 tokens \(allocator(?:, ready for the next "
                      r"joiner on (\S+))?\) after \d+ gossip "
                      r"rounds, with (\d+) other nodes of dc1", log)
        assert m, log[-2000:]
        seen[i] = (int(m.group(2)), m.group(1))
    return seen


def nodes_seen(tmp_path, n):
    """{i: how many nodes of dc1 node i's token choice saw}."""
    return {i: c[0] for i, c in token_choices(tmp_path, n).items()}


def test_nodes_started_together_choose_tokens_one_at_a_time(cluster,
                                                             tmp_path):
    """Every node of a new cluster starts at once; each must still choose
    its tokens seeing the tokens of the nodes ahead of it (same start
    second: lower addresses), or two allocations split the same ranges,
    and knowing the rack of the one behind it."""
    # The default gossip interval: a node waits four rounds before it
    # chooses, so nodes whose start the machine's load delays by up to
    # about two rounds are still seen.
    cluster("create", "it", "-n", "5", "--racks", "4", "--base-ip",
            "127.0.1.", "-s")
    # ... and prepare the ring for the joiner behind it (its rack is
    # known from gossip): rack2 after node1, ..., rack1 after node4.
    assert token_choices(tmp_path, 5) == {
        i: (i - 1, f"rack{i % 4 + 1}" if i < 5 else None)
        for i in range(1, 6)}


def generatetokens(*args):
    return subprocess.run([str(BUILD_DIR / "node" / "cassini-tool"),
                           "generatetokens", *args],
                          capture_output=True, text=True, timeout=120)


def test_generatetokens_output_and_errors():
    """Offline, as an operator runs it: a line per node in start order
    (round robin over the racks, full racks skipped, as Cassandra's),
    distinct tokens, the table with the floors, and one clear line for
    each bad argument."""
    r = generatetokens("-n", "5", "--racks", "1,4", "-t", "4")
    assert r.returncode == 0, r.stderr
    nodes = re.findall(r"^node(\d+) (rack\d): (\S+)$", r.stdout, re.M)
    assert [(int(i), rk) for i, rk, _ in nodes] == [
        (1, "rack1"), (2, "rack2"), (3, "rack2"), (4, "rack2"),
        (5, "rack2")]
    tokens = [int(t) for _, _, line in nodes for t in line.split(",")]
    assert len(tokens) == 20 and len(set(tokens)) == 20
    rows = re.findall(r"^ +(\d+)  (\S+) +([0-9.]+)%", r.stdout, re.M)
    assert [(n, lay) for n, lay, _ in rows] == [
        ("1", "1"), ("2", "1+1"), ("3", "1+2"), ("4", "1+3"), ("5", "1+4")]
    r = generatetokens("-n", "5", "--racks", "2,2,1")
    assert "(3 unequal racks: at least 100.0% whatever the tokens)" in \
        r.stdout
    r = generatetokens("-n", "5", "--racks", "2,1,1,1")
    assert "2+1+1+1" in r.stdout and "(at least 33.3% whatever" in r.stdout
    for args, message in [
            (["--racks", "1"], "-n NODES is required"),
            (["-n", "4", "--racks", "2,1"], "--racks adds up to 3 nodes, "
                                            "not 4"),
            (["-n", "3", "--racks", "1,2,"], "--racks wants node counts"),
            (["-n", "3", "--racks", "0,3"], "--racks wants node counts"),
            (["-n", "x"], "--nodes must be a number from 1 to 128, not 'x'"),
            (["-n", "3", "-t", "0"], "--tokens must be a number"),
            (["-n", "3", "--bogus", "1"], "unknown option '--bogus'")]:
        r = generatetokens(*args)
        assert r.returncode == 1 and message in r.stderr, (args, r.stderr)


def test_generated_tokens_balance_a_four_rack_dc(cluster, tmp_path):
    """`--generate-tokens` gives every node the initial_token of a plan
    (cassini-tool generatetokens, one per DC with the DC's number as seed):
    6 nodes on 4 racks (2+2+1+1, where a rack of two must replicate every
    range) own the shares the plan promised, within 10% of each other;
    dc2 gets its own plan."""
    plan = generatetokens("-n", "6", "--racks", "2,2,1,1", "--seed",
                          "1").stdout
    promised = float(re.search(r"^ +6  2\+2\+1\+1 +([0-9.]+)%", plan,
                               re.M).group(1))
    assert promised <= 10.0, plan
    cluster("create", "it", "-n", "6:2", "--racks", "4", "--base-ip",
            "127.0.1.", "--generate-tokens", "-s")
    home = tmp_path / "home" / "clusters" / "it"
    for i in range(1, 9):
        yaml = (home / f"node{i}" / "conf" / "node.yaml").read_text()
        if i <= 6:
            line = re.search(rf"^node{i} rack\d: (\S+)$", plan,
                             re.M).group(1)
            assert f"initial_token: '{line}'" in yaml
        else:
            assert "initial_token: '" in yaml
        assert "chose 16 tokens (initial_token)" in \
            (home / f"node{i}" / "logs" / "system.log").read_text()
    out = cluster("node", "node1", "tool", "status",
                  "class=NetworkTopologyStrategy,dc1=3,dc2=2").stdout
    dc1 = out.split("Datacenter: dc2")[0]
    owns = [float(m) for m in re.findall(r"^UN .* (\d+\.\d)% ", dc1, re.M)]
    assert len(owns) == 6, out
    assert max(owns) / min(owns) - 1 <= 0.10 + 0.002, out
    assert abs((max(owns) / min(owns) - 1) * 100 - promised) < 0.5, out
    assert out.count("\nUN ") == 8, out


def test_generated_tokens_differ_between_datacenters(cluster, tmp_path):
    """Two DCs of the same layout get different plans (each DC's number
    is its seed): the same plan twice would give their nodes the same
    tokens, which the second DC's nodes would refuse."""
    cluster("create", "it", "-n", "2:2", "--racks", "2", "--base-ip",
            "127.0.1.", "--generate-tokens")
    home = tmp_path / "home" / "clusters" / "it"
    tokens = {}
    for i in range(1, 5):
        yaml = (home / f"node{i}" / "conf" / "node.yaml").read_text()
        line = re.search(r"^initial_token: '(\S+)'$", yaml, re.M).group(1)
        tokens[i] = set(line.split(","))
        assert len(tokens[i]) == 16
    assert not (tokens[1] | tokens[2]) & (tokens[3] | tokens[4])


def test_node_started_late_waits_for_joiners_started_before_it(cluster,
                                                              tmp_path):
    """node3 starts with node1; node2, lower-addressed but started a second
    later, must still choose after node3 (joiners go in the order they
    started), not alongside it."""
    cluster("create", "it", "-n", "3", "--base-ip", "127.0.1.")
    cluster("node", "node1", "start")
    cluster("node", "node3", "start")
    time.sleep(1.2)  # a later gossip generation (whole seconds)
    cluster("node", "node2", "start")
    cluster("wait")
    assert nodes_seen(tmp_path, 3) == {1: 0, 3: 1, 2: 2}


def test_errors_are_one_clear_line(cluster, tmp_path):
    r = cluster("create", "it", "-n", "2", "-c", "num_tokens=0", check=False)
    assert r.returncode == 1
    assert "num_tokens: 0 is out of range" in r.stderr
    r = cluster("-C", "nope", "status", check=False)
    assert r.returncode == 1 and "no cluster named 'nope'" in r.stderr
    cluster("create", "it", "-n", "1", "--base-ip", "127.0.1.")
    r = cluster("node", "node7", "stop", check=False)
    assert "has no node 'node7'" in r.stderr
    r = cluster("dc", "dc9", "down", check=False)
    assert "has no datacenter 'dc9'" in r.stderr
    r = cluster("create", "it", "-n", "1", check=False)
    assert "already exists" in r.stderr
    r = cluster("create", "x", "-n", "3:a", check=False)
    assert "expected node counts per DC" in r.stderr
    # --base-ip as the first node's address numbers the nodes from it
    cluster("create", "sub", "-n", "2", "--base-ip", "127.0.1.60")
    spec = json.loads((tmp_path / "home" / "clusters" / "sub" / "cluster.json").read_text())
    assert [n["address"] for n in spec["nodes"]] == ["127.0.1.60",
                                                     "127.0.1.61"]
    cluster("add", "--dc", "dc1")
    spec = json.loads((tmp_path / "home" / "clusters" / "sub" / "cluster.json").read_text())
    assert spec["nodes"][-1]["address"] == "127.0.1.62"
    for bad in ("127.0.1.300", "127.0.1.x", "127.0.1", "127.0.1.0"):
        r = cluster("create", "y", "-n", "1", "--base-ip", bad, check=False)
        assert r.returncode == 1 and "--base-ip" in r.stderr, bad


def test_create_auth_tls(cluster, tmp_path):
    """--auth --tls: a CA, a certificate per node naming its address, and
    every node configured for internode TLS with mutual authentication
    (started and checked for encrypted connections in
    test_internode_tls.py; here: the files and the configuration)."""
    cluster("create", "it", "-n", "2:1", "--base-ip", "127.0.92.",
            "--auth", "--tls", "dc")
    home = tmp_path / "home" / "clusters" / "it"
    tls = home / "tls"
    for i in (1, 2, 3):
        yaml = (home / f"node{i}" / "conf" / "node.yaml").read_text()
        assert "internode_encryption: dc" in yaml
        assert f"keystore: {tls / f'node{i}.pem'}" in yaml
        assert "require_client_auth: true" in yaml
        assert "authenticator: PasswordAuthenticator" in yaml
        assert "authorizer: CassandraAuthorizer" in yaml
        text = subprocess.run(
            ["openssl", "x509", "-noout", "-text", "-in",
             str(tls / f"node{i}.pem")], capture_output=True, text=True,
            check=True).stdout
        assert f"IP Address:127.0.92.{i}" in text
        subprocess.run(["openssl", "verify", "-CAfile", str(tls / "ca.pem"),
                        str(tls / f"node{i}.crt")], check=True,
                       capture_output=True)
    cluster("-C", "it", "add")
    assert (tls / "node4.pem").exists()


def test_tls_cluster_admin_port_speaks_tls(cluster, tmp_path):
    """--tls puts the admin port under TLS too (jmx_encryption_options):
    the script's own tool calls (start waits on `status`) go over TLS with
    the cluster's CA and the node's name checked, and a plaintext
    cassini-tool is refused."""
    cluster("create", "sec", "-n", "1", "--base-ip", "127.0.91.60",
            "--auth", "--tls", "-c", "superuser_setup_delay=500ms")
    home = tmp_path / "home" / "clusters" / "sec"
    yaml = (home / "node1" / "conf" / "node.yaml").read_text()
    assert "jmx_encryption_options:\n  enabled: true" in yaml
    try:
        assert "1 of 1 nodes running" in cluster("start").stdout
        r = cluster("node", "node1", "tool", "status", check=False)
        for _ in range(100):  # the default superuser comes after 500 ms
            if r.returncode == 0:
                break
            time.sleep(0.1)
            r = cluster("node", "node1", "tool", "status", check=False)
        assert r.returncode == 0, r.stderr
        assert "UN" in r.stdout and "127.0.91.60" in r.stdout
        plain = subprocess.run(
            [str(BUILD_DIR / "node" / "cassini-tool"), "-h", "127.0.91.60", "-u", "cassandra", "-pw",
             "cassandra", "status"], capture_output=True, text=True,
            timeout=30)
        assert plain.returncode == 1
        assert "closed the connection" in plain.stderr, plain.stderr
    finally:
        cluster("-C", "sec", "remove", check=False)
