"""Shared fixtures for integration tests against real cassinid processes.

Run through CTest (which sets CASSINI_BUILD_DIR) or by hand:
  CASSINI_BUILD_DIR=build/test /usr/bin/python3 -m pytest tests/integration
"""
import contextlib
import os
import pathlib
import signal
import subprocess
import time

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get(
    "CASSINI_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("CASSINI_BUILD_DIR",
                                        SOURCE_DIR / "build" / "test"))
CASSINID = BUILD_DIR / "node" / "cassinid"


class Node:
    """One cassinid with its own home directory (conf/, data/, logs/)."""

    def __init__(self, home, yaml_text, rackdc="dc=dc1\nrack=rack1\n"):
        self.home = pathlib.Path(home)
        self.conf = self.home / "conf"
        self.conf.mkdir(parents=True, exist_ok=True)
        (self.conf / "node.yaml").write_text(yaml_text)
        if rackdc is not None:
            (self.conf / "rackdc.properties").write_text(rackdc)
        self.proc = None
        self.stderr_path = self.home / "stderr.txt"

    @property
    def log_path(self):
        return self.home / "logs" / "system.log"

    def log(self):
        return self.log_path.read_text() if self.log_path.exists() else ""

    def start(self, *extra):
        self.stderr_file = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([str(CASSINID), "-c", str(self.conf),
                                      *extra],
                                     stdout=subprocess.DEVNULL,
                                     stderr=self.stderr_file)
        return self.proc

    def log_size(self):
        return len(self.log())

    def wait_for_log(self, text, timeout=30.0, since=0):
        """Waits for `text` in the log after offset `since` (log_size()
        before a restart, so an earlier run's line does not count). The
        default allows a loaded 2-core machine a node's start: four gossip
        rounds to choose tokens, then the settling of gossip."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log()[since:]:
                return True
            if self.proc and self.proc.poll() is not None:
                return text in self.log()[since:]
            time.sleep(0.05)
        return False

    def stop(self, sig=signal.SIGTERM, timeout=5.0):
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.stderr_file.close()

    def restart(self, sig=signal.SIGTERM):
        """Stops the node with `sig` (SIGTERM: clean, SIGKILL: a crash),
        starts it again, waits for CQL; returns the log of the new run."""
        self.proc.send_signal(sig)
        self.proc.wait(timeout=10)
        self.stderr_file.close()
        mark = self.log_size()
        self.start()
        assert self.wait_for_log("CQL clients on", since=mark), self.log()
        return self.log()[mark:]

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def seeds_yaml(*ips):
    """A seed_provider value for default_yaml naming `ips`."""
    return ("\n  - class_name: SimpleSeedProvider\n"
            "    parameters:\n"
            f"      - seeds: \"{','.join(ips)}\"")


def wait_all_normal(ips, timeout=30.0):
    """Until every node of `ips` lists all of them UN in cassini-tool
    status (UP and holding tokens: "is now UP" in a log comes before a
    new node has chosen its tokens)."""
    tool = BUILD_DIR / "node" / "cassini-tool"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        outs = [subprocess.run([str(tool), "-h", ip, "status"],
                               capture_output=True, text=True,
                               timeout=10).stdout for ip in ips]
        if all(sum(line.startswith("UN ") for line in o.splitlines()) ==
               len(ips) for o in outs):
            return
        time.sleep(0.1)
    raise AssertionError(f"not every node of {ips} lists them all UN: "
                         f"{outs}")


def default_yaml(**overrides):
    keys = {
        "cluster_name": "'Integration'",
        "listen_address": "127.0.0.1",
        "endpoint_snitch": "GossipingPropertyFileSnitch",
    }
    keys.update(overrides)
    return "".join(f"{k}: {v}\n" for k, v in keys.items())


@pytest.fixture
def make_node(tmp_path):
    nodes = []

    def make(yaml_text=None, name="node1", **kw):
        node = Node(tmp_path / name, yaml_text or default_yaml(), **kw)
        nodes.append(node)
        return node

    yield make
    for n in nodes:
        n.kill()


@contextlib.contextmanager
def one_node_session(make_node, address, keyspace):
    """One node on `address` (default_yaml), started, and a driver session
    to it with `keyspace` made (SimpleStrategy, replication_factor 1); the
    driver is shut down on leaving. For a suite's `session` fixture:
        with one_node_session(make_node, ADDRESS, "ks") as s:
            s.execute("CREATE TABLE ks.t ...")
            yield s
    """
    from cassandra.cluster import Cluster
    n = make_node(default_yaml(listen_address=address))
    n.start()
    assert n.wait_for_log("CQL clients on"), n.log()
    cluster = Cluster([address], protocol_version=4)
    try:
        s = cluster.connect()
        s.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        yield s
    finally:
        cluster.shutdown()
