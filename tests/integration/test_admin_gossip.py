"""cassini-tool's statusgossip / disablegossip / enablegossip on a real
two-node cluster: the peer marks a node that stops gossiping down and
takes it back once it gossips again. Addresses 127.0.100.21-22."""
import subprocess

import pytest

from clusters import state, wait_for
from conftest import BUILD_DIR, default_yaml, seeds_yaml

A, B = "127.0.100.21", "127.0.100.22"
TOOL = str(BUILD_DIR / "node" / "cassini-tool")


def tool(ip, *args):
    return subprocess.run([TOOL, "-h", ip, *args], capture_output=True,
                          text=True, timeout=30)


@pytest.fixture
def nodes(make_node):
    out = []
    for i, ip in enumerate((A, B)):
        n = make_node(default_yaml(listen_address=ip, rpc_address=ip,
                                   seed_provider=seeds_yaml(A),
                                   gossip_interval="250ms"),
                      name=f"node{i + 1}")
        n.start()
        assert n.wait_for_log("CQL clients on", timeout=60), n.log()
        out.append(n)
    assert wait_for(lambda: state(A, B) == "UN" and state(B, A) == "UN")
    return out


def test_gossip_off_and_on(nodes):
    assert tool(B, "statusgossip").stdout == "running\n"
    r = tool(B, "disablegossip")
    assert r.returncode == 0, r.stderr
    assert tool(B, "statusgossip").stdout == "not running\n"
    assert "Gossip active          : false" in tool(B, "info").stdout
    assert tool(B, "disablegossip").returncode == 0  # again: nothing to do
    assert wait_for(lambda: state(A, B) == "DN"), tool(A, "status").stdout
    r = tool(B, "enablegossip")
    assert r.returncode == 0, r.stderr
    assert tool(B, "statusgossip").stdout == "running\n"
    assert wait_for(lambda: state(A, B) == "UN"), tool(A, "status").stdout
    assert "STATUS_WITH_PORT" in tool(A, "gossipinfo").stdout
    for cmd in ("statusgossip", "disablegossip", "enablegossip"):
        r = tool(B, cmd, "x")
        assert r.returncode == 1 and f"usage: {cmd}" in r.stderr


def test_gossip_stays_off_after_drain(nodes):
    assert tool(B, "drain").returncode == 0
    assert tool(B, "statusgossip").stdout == "not running\n"
    r = tool(B, "enablegossip")
    assert r.returncode == 1 and "drained" in r.stderr
