"""The slow query log (slow_query_log_timeout): SELECTs slower than the
timeout are reported every 5 s in Cassandra's words, gathered by their
text, with how often, how slow and how many rows; fast ones and writes
are not. Address 127.0.85.7."""
import re
import time

from cassandra.query import SimpleStatement

from clusters import session
from conftest import default_yaml, seeds_yaml

IP = "127.0.85.7"


def slow_count(log, text):
    """How many slow runs of `text` the reports counted."""
    count = 0
    for m in re.finditer(r"<%s>, (time \d+ msec|was slow (\d+) times)"
                         % re.escape(text), log):
        count += int(m.group(2)) if m.group(2) else 1
    return count


def test_slow_selects_are_logged(make_node):
    # 1 ms: a scan of a few thousand rows is always slower than that,
    # a read of one missing key is not reported twice over
    n = make_node(default_yaml(listen_address=IP, rpc_address=IP,
                               seed_provider=seeds_yaml(IP),
                               slow_query_log_timeout="1ms"))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    cluster, s = session(IP)
    try:
        s.execute("CREATE KEYSPACE q WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE q.t (k int PRIMARY KEY, v text)")
        ins = s.prepare("INSERT INTO q.t (k, v) VALUES (?, ?)")
        for k in range(3000):
            s.execute(ins, (k, "v" * 100))
        scan = SimpleStatement("SELECT k, v FROM q.t", fetch_size=5000)
        for _ in range(3):
            assert len(list(s.execute(scan))) == 3000
        # the three may fall into one report or two (5 s windows)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            seen = slow_count(n.log(), "SELECT k, v FROM q.t")
            if seen >= 3:
                break
            time.sleep(0.5)
        assert seen == 3, n.log()[-3000:]
        log = n.log()
        assert "operations were slow in the last 5000 msecs:" in log
        assert "WARN  [monitoring]" in log
        assert "msec - slow timeout 1 msec, 3000 rows" in log
        # each report's figures are its own: avg within min and max
        for m in re.finditer(r"avg/min/max (\d+)/(\d+)/(\d+) msec", log):
            avg, lo, hi = map(int, m.groups())
            assert lo <= avg <= hi, m.group(0)
        assert "INSERT INTO" not in log[log.find("were slow"):]
    finally:
        cluster.shutdown()


def test_off_when_zero(make_node):
    n = make_node(default_yaml(listen_address="127.0.85.8",
                               rpc_address="127.0.85.8",
                               seed_provider=seeds_yaml("127.0.85.8"),
                               slow_query_log_timeout="0ms"))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    cluster, s = session("127.0.85.8")
    try:
        s.execute("CREATE KEYSPACE q WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE q.t (k int PRIMARY KEY, v text)")
        for k in range(500):
            s.execute("INSERT INTO q.t (k, v) VALUES (%s, 'x')", (k,))
        list(s.execute("SELECT * FROM q.t"))
        time.sleep(6)
        assert "were slow" not in n.log()
    finally:
        cluster.shutdown()
