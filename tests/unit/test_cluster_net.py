"""scripts/cluster_net.py without a cluster or the kernel: the chain is
named after the cluster and its directory and fits iptables' limit, the
rules each fault asks for, the refusal without root, owners that died.
Its addresses are only written into rules (test-addresses: none)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] /
                       "scripts"))

import cluster_net as net  # noqa: E402


class FakeNode:
    def __init__(self, name, address, dc):
        self.name, self.address, self.dc = name, address, dc


class FakeCluster:
    def __init__(self, d, name="it", layout=(2, 2), base="127.0.9.",
                 overrides=None):
        self.name, self.dir = name, pathlib.Path(d)
        self.spec = {"base_ip": base, "overrides": overrides or {}}
        self.nodes, i = [], 0
        for dcn, count in enumerate(layout, start=1):
            for _ in range(count):
                i += 1
                self.nodes.append(FakeNode(f"node{i}", f"{base}{i}",
                                           f"dc{dcn}"))

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)


def test_chain_is_named_after_the_cluster_and_its_directory(tmp_path):
    a = FakeCluster(tmp_path / "a" / "it")
    b = FakeCluster(tmp_path / "b" / "it")
    long = FakeCluster(tmp_path / "c", name="a-very-long-cluster-name-x" * 3)
    assert net.chain_name(a).startswith("CASSINI-it-")
    assert net.chain_name(a) != net.chain_name(b)  # same name, other home
    assert net.chain_name(a) == net.chain_name(FakeCluster(tmp_path / "a" /
                                                           "it"))
    for c in (a, long):
        assert len(net.chain_name(c)) <= 28  # iptables' limit


def test_partition_rules_cut_the_storage_port_both_ways(tmp_path):
    c = FakeCluster(tmp_path, overrides={"storage_port": "7100"})
    rules = net.kernel_rules(c, [{"kind": "partition", "a": "dc1",
                                  "b": "dc2"}], "CH")
    assert len(rules) == 8  # 2 x 2 pairs, both directions
    assert "-A CH -s 127.0.9.1/32 -d 127.0.9.3/32 -p tcp -m multiport " \
           "--ports 7100 -j DROP" in rules
    assert "-A CH -s 127.0.9.3/32 -d 127.0.9.1/32 -p tcp -m multiport " \
           "--ports 7100 -j DROP" in rules
    assert not any("9042" in r for r in rules)  # clients still get in


def test_one_way_cut_drops_only_the_connections_a_opens_to_b(tmp_path):
    c = FakeCluster(tmp_path)
    rules = net.kernel_rules(c, [{"kind": "partition", "a": "node1",
                                  "b": "node3", "one_way": True}], "CH")
    assert rules == [
        "-A CH -s 127.0.9.1/32 -d 127.0.9.3/32 -p tcp --dport 7000 -j DROP",
        "-A CH -s 127.0.9.3/32 -d 127.0.9.1/32 -p tcp --sport 7000 -j DROP"]


def test_isolate_lets_only_the_dcs_own_clients_in(tmp_path):
    c = FakeCluster(tmp_path)
    assert net.client_address(c, "dc2") == "127.0.9.253"
    rules = net.kernel_rules(c, [{"kind": "isolate", "a": "dc2", "b": None,
                                  "dc": "dc2"}], "CH")
    assert "-A CH ! -s 127.0.9.253/32 -d 127.0.9.3/32 -p tcp --dport 9042 " \
           "-j DROP" in rules
    assert "-A CH -s 127.0.9.4/32 ! -d 127.0.9.253/32 -p tcp --sport 9042 " \
           "-j DROP" in rules
    assert sum("multiport" in r for r in rules) == 8


def test_links_and_skew_make_no_kernel_rules(tmp_path):
    c = FakeCluster(tmp_path)
    assert net.kernel_rules(c, [{"kind": "link", "a": "dc1", "b": "dc2",
                                 "args": ["--delay", "1ms"]},
                                {"kind": "skew", "node": "node1",
                                 "offset": "1s"}], "CH") == []


def test_names_must_be_nodes_or_datacenters(tmp_path):
    c = FakeCluster(tmp_path)
    assert [n.name for n in net.resolve_set(c, "dc2,node1")] == \
        ["node1", "node3", "node4"]
    with pytest.raises(net.FaultError, match="neither a node nor a "
                       "datacenter"):
        net.resolve_set(c, "dc7")


def test_partitions_are_refused_without_root(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(net.FaultError, match="needs root"):
        net.need_root("a partition")
    c = FakeCluster(tmp_path)
    with pytest.raises(net.FaultError, match="needs root"):
        net.sync_kernel(c, [{"kind": "partition", "a": "dc1", "b": "dc2"}])


def test_an_owner_that_died_is_not_alive():
    p = subprocess.Popen(["sleep", "30"])
    owner = net.owner_self(p.pid)
    assert net.owner_alive(owner)
    p.kill()
    p.wait()
    assert not net.owner_alive(owner)
    assert net.owner_alive(net.owner_self())
    # A pid reused by another process has another start time.
    assert not net.owner_alive({"pid": os.getpid(), "start": "0"})


def test_faults_file_round_trips(tmp_path):
    c = FakeCluster(tmp_path)
    with net.Faults(c) as f:
        f.entries = [{"kind": "skew", "node": "node1", "offset": "1s",
                      "label": "clock skew node1 1s", "since": 1.0}]
        f.save()
    assert json.loads((tmp_path / "netfaults.json").read_text())[
        "faults"][0]["node"] == "node1"
    with net.Faults(c) as f:
        assert len(f.entries) == 1
        f.entries = []
        f.save()
    assert not (tmp_path / "netfaults.json").exists()
