"""cassini-tool compact waits for the major compaction to end however long
it takes, as nodetool compact blocks (the node says at once that the
command runs on, and the tool stops counting its answer timeout). The
compaction is held on the node (`compactionfault hold`, test clusters
only) well past the tool's answer timeout, which
CASSINI_TOOL_ANSWER_TIMEOUT_MS shortens so the test need not wait out
the default 10 s. Address 127.0.125.1."""
import os
import re
import subprocess
import time

from clusters import TOOL, session, tool_run, wait_for
from conftest import default_yaml, seeds_yaml

import pytest

IP = "127.0.125.1"
SHORT_MS = "200"


def tool(*args):
    r = tool_run(IP, *args, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.fixture
def node(make_node):
    n = make_node(default_yaml(listen_address=IP, rpc_address=IP,
                               seed_provider=seeds_yaml(IP),
                               test_fault_injection="true"))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    return n


def sstables(table):
    out = tool("tablestats", "cw", table)
    m = re.search(r"SSTable count: (\d+)", out)
    assert m, out
    return int(m.group(1))


def test_compact_waits_for_a_long_major_compaction(node):
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE cw WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE cw.t (k int PRIMARY KEY, v int)")
        for r in range(2):
            for k in range(50):
                s.execute("INSERT INTO cw.t (k, v) VALUES (%s, %s)",
                          (k, r))
            tool("flush", "cw", "t")
        assert sstables("t") == 2
    finally:
        cluster.shutdown()
    tool("compactionfault", "hold")
    env = dict(os.environ, CASSINI_TOOL_ANSWER_TIMEOUT_MS=SHORT_MS)
    p = subprocess.Popen([TOOL, "-h", IP, "compact", "cw", "t"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        # the compaction runs (held before its merge) ...
        assert wait_for(lambda: "cw" in tool("compactionstats"),
                        timeout=30), tool("compactionstats")
        # ... for far longer than the tool's answer timeout: a tool
        # that counted it would have given up by now
        time.sleep(5 * int(SHORT_MS) / 1000)
        assert p.poll() is None, p.communicate()
        tool("compactionfault", "release")
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, out + err
        assert out == "" and err == "", out + err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert sstables("t") == 1
    # a command answered at once still is (the timeout is for the first
    # answer only)
    r = subprocess.run([TOOL, "-h", IP, "compactionfault", "bogus"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "usage: compactionfault" in r.stderr, \
        r.stdout + r.stderr
