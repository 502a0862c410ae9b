"""Helpers for tests that run real clusters through scripts/cluster, as a
user does: the test build's binaries, a private CASSINI_HOME, the stock
DataStax driver pinned to one node with FallthroughRetryPolicy (so every
server answer reaches the test unchanged), and cassini-tool."""
import os
import subprocess
import time

from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import (FallthroughRetryPolicy,
                                WhiteListRoundRobinPolicy)
from cassandra.query import SimpleStatement

from conftest import BUILD_DIR, SOURCE_DIR

TOOL = str(BUILD_DIR / "node" / "cassini-tool")


def cluster_script(tmp_path):
    """run(*args): scripts/cluster with the test build under tmp_path."""
    env = dict(os.environ, CASSINI_HOME=str(tmp_path / "home"),
               CASSINI_BIN_DIR=str(BUILD_DIR))

    def run(*args, check=True, timeout=120):
        r = subprocess.run(["/usr/bin/python3",
                            str(SOURCE_DIR / "scripts" / "cluster.py"), *args],
                           capture_output=True, text=True, env=env,
                           timeout=timeout)
        if check:
            assert r.returncode == 0, r.stdout + r.stderr
        return r

    run.home = tmp_path / "home" / "clusters"
    run.env = env
    return run


def session(ip):
    """(cluster, session) talking to `ip` only."""
    prof = ExecutionProfile(
        retry_policy=FallthroughRetryPolicy(), request_timeout=30,
        load_balancing_policy=WhiteListRoundRobinPolicy([ip]))
    c = Cluster([ip], protocol_version=4,
                execution_profiles={EXEC_PROFILE_DEFAULT: prof})
    return c, c.connect()


def tool_run(ip, *args, timeout=300):
    """cassini-tool against `ip`; the CompletedProcess."""
    return subprocess.run([TOOL, "-h", ip, *args], capture_output=True,
                          text=True, timeout=timeout)


def tool(ip, *args):
    """cassini-tool against `ip`, which must succeed; its stdout."""
    r = tool_run(ip, *args, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def run_at(s, cql, cl, params=None):
    return s.execute(SimpleStatement(cql, consistency_level=cl), params)


def state(ip, of):
    """`of`'s two-letter state (UN, DN, ...) in `ip`'s status output."""
    for line in tool_run(ip, "status", timeout=30).stdout.splitlines():
        parts = line.split()
        if len(parts) > 1 and parts[1] == of:
            return parts[0]
    return None


def wait_for(pred, timeout=60, step=0.25):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def all_up(ips, timeout=60):
    """Waits until every node in `ips` lists every one of them UN."""
    assert wait_for(lambda: all(state(ip, o) == "UN" for ip in ips
                                for o in ips), timeout=timeout)


def rf3_table(c, s, ks="ks"):
    """Creates keyspace `ks` (SimpleStrategy, RF 3) and its table
    t (k int PRIMARY KEY, v text), then waits for schema agreement; `c`
    is the session's cluster."""
    s.execute("CREATE KEYSPACE %s WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 3}" % ks)
    s.execute("CREATE TABLE %s.t (k int PRIMARY KEY, v text)" % ks)
    assert c.control_connection.wait_for_schema_agreement(wait_time=30)


def alone(cluster, node, ip, check, nodes=("node1", "node2", "node3")):
    """Stops the other nodes, runs check(session) against `ip` (the node
    `node`) alone, then starts them again: what one replica holds."""
    others = [n for n in nodes if n != node]
    for o in others:
        cluster("node", o, "stop")
    c, s = session(ip)
    try:
        check(s)
    finally:
        c.shutdown()
    for o in others:
        cluster("node", o, "start", timeout=180)
