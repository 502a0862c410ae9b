"""The C client's token-aware routing on a real 3-node cluster agrees with
the DataStax driver's token map: same token for every key, and the same
primary replica. Nodes on 127.0.8.11-13."""
import subprocess
import time

import pytest
from cassandra.cluster import Cluster

from conftest import BUILD_DIR, default_yaml

ADDRESSES = ["127.0.8.11", "127.0.8.12", "127.0.8.13"]
ROUTE = BUILD_DIR / "tests" / "unit" / "cql_route_cli"


def yaml(address):
    return default_yaml(listen_address=address,
                        gossip_interval="250ms") + (
        "seed_provider:\n"
        "  - class_name: org.apache.cassandra.locator.SimpleSeedProvider\n"
        "    parameters:\n"
        f"      - seeds: \"{ADDRESSES[0]}\"\n")


@pytest.fixture
def nodes(make_node):
    ns = []
    for i, a in enumerate(ADDRESSES):
        n = make_node(yaml(a), name=f"node{i + 1}")
        n.start()
        ns.append(n)
    for n in ns:
        assert n.wait_for_log("CQL clients on", timeout=30), n.log()
    yield ns
    for n in ns:
        n.kill()


def test_client_routes_to_the_drivers_primary_replica(nodes):
    cluster = Cluster([ADDRESSES[0]])
    s = cluster.connect()
    deadline = time.monotonic() + 60
    while len(cluster.metadata.all_hosts()) < 3:
        assert time.monotonic() < deadline, "driver never saw 3 hosts"
        time.sleep(0.2)
        cluster.refresh_nodes()
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE ks.t (k blob PRIMARY KEY, v int)")
    assert cluster.control_connection.wait_for_schema_agreement()
    cluster.refresh_schema_metadata()
    keys = [f"key{i:04d}" for i in range(200)] + ["\u00e9t\u00e9"]
    out = subprocess.run([str(ROUTE), ADDRESSES[0], "3",
                          "SELECT v FROM ks.t WHERE k = ?", *keys],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "hosts 3", out.stdout
    token_map = cluster.metadata.token_map
    owners = set()
    for line in lines[1:]:
        key, token, address = line.rsplit(" ", 2)
        raw = key.encode()
        assert int(token) == token_map.token_class.from_key(raw).value, key
        replicas = cluster.metadata.get_replicas("ks", raw)
        assert [h.address for h in replicas] == [address], key
        owners.add(address)
    assert owners == set(ADDRESSES)  # 200 keys reach every node
    cluster.shutdown()
