"""SELECT JSON, INSERT JSON, toJson() and fromJson() through the stock
DataStax driver on two cassinid processes (RF 2): a prepared INSERT JSON ?
is described as one text marker named [json]; rows written as JSON through
one node read back through the other as JSON the json module parses to the
values written, paged, before and after a flush; DEFAULT UNSET keeps what
DEFAULT NULL clears. Addresses: 127.0.106.x, this suite's own."""
import json
import subprocess

import pytest
from cassandra import ConsistencyLevel, FunctionFailure
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

from conftest import BUILD_DIR, default_yaml, seeds_yaml, wait_all_normal

IPS = ["127.0.106.5", "127.0.106.6"]
ALL = ConsistencyLevel.ALL


def connect(ip):
    pinned = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([ip]),
        consistency_level=ALL)
    cluster = Cluster([ip], protocol_version=4,
                      execution_profiles={EXEC_PROFILE_DEFAULT: pinned})
    return cluster, cluster.connect()


def doc(i):
    return {"k": i, "c": i % 3, "v": f"v\"{i}\n",
            "l": [i, i + 1], "m": {str(i): i * 1.5},
            "ts": "2024-01-02 03:04:05.678Z", "b": f"0x{i:04x}",
            "n": str(10 ** 30 + i)}


def test_json_round_trips_across_nodes_pages_and_flushes(make_node):
    nodes = []
    for i, ip in enumerate(IPS):
        n = make_node(default_yaml(listen_address=ip, gossip_interval="200ms",
                                   seed_provider=seeds_yaml(IPS[0])),
                      name=f"n{i}")
        n.start()
        nodes.append(n)
    for n in nodes:
        assert n.wait_for_log("CQL clients on", timeout=30), n.log()
    wait_all_normal(IPS)
    c1, s1 = connect(IPS[0])
    s1.execute("CREATE KEYSPACE j WITH replication = {'class': "
               "'SimpleStrategy', 'replication_factor': 2}")
    s1.execute("CREATE TABLE j.t (k int, c int, v text, l list<int>, "
               "m map<int, double>, ts timestamp, b blob, n varint, "
               "PRIMARY KEY (k, c))")
    assert c1.control_connection.wait_for_schema_agreement()

    ins = s1.prepare("INSERT INTO j.t JSON ?")
    assert [(c.name, c.type.typename) for c in ins.column_metadata] == \
        [("[json]", "varchar")]
    for i in range(7):
        s1.execute(ins, [json.dumps(doc(i))])

    c2, s2 = connect(IPS[1])
    tool = BUILD_DIR / "node" / "cassini-tool"
    for flushed in (False, True):
        st = SimpleStatement("SELECT JSON * FROM j.t", fetch_size=2)
        got = {}
        for row in s2.execute(st):
            assert len(row) == 1
            d = json.loads(row[0])
            got[d["k"]] = d
        assert sorted(got) == list(range(7)), (flushed, got)
        for i, d in got.items():
            want = doc(i)
            want["n"] = int(want["n"])   # varint comes back a number
            want["m"] = {str(i): i * 1.5}
            assert d == want, (flushed, d, want)
        if not flushed:
            for ip in IPS:
                r = subprocess.run([str(tool), "-h", ip, "flush", "j"],
                                   capture_output=True, text=True,
                                   timeout=60)
                assert r.returncode == 0, r.stdout + r.stderr

    # toJson() in a selection and fromJson() in writes, through node 2
    row = s2.execute("SELECT toJson(m), toJson(l), toJson(n) FROM j.t "
                     "WHERE k = 3 AND c = 0").one()
    assert tuple(row) == ('{"3": 4.5}', "[3, 4]",
                          str(10 ** 30 + 3))
    up = s2.prepare("UPDATE j.t SET l = fromJson(?) WHERE k = ? AND c = ?")
    assert [c.name for c in up.column_metadata][0] == "arg0(system.fromjson)"
    s2.execute(up, ["[9, 8]", 3, 0])
    assert s1.execute("SELECT l FROM j.t WHERE k = 3 AND c = 0").one().l \
        == [9, 8]
    # a fromJson() that fails is a FunctionFailure naming the function,
    # whichever node coordinates (through the LWT path too)
    for q in ("UPDATE j.t SET l = fromJson('[1, \"x\"]') "
              "WHERE k = 3 AND c = 0",
              "UPDATE j.t SET l = fromJson('[1, \"x\"]') "
              "WHERE k = 3 AND c = 0 IF EXISTS"):
        with pytest.raises(FunctionFailure) as e:
            s2.execute(q)
        assert (e.value.keyspace, e.value.function, e.value.arg_types) == \
            ("system", "fromjson", ["text"])
        assert "execution of 'system.fromjson[text]' failed: " \
            "org.apache.cassandra.serializers.MarshalException: " \
            "Unable to make int from 'x'" in str(e.value)

    # DEFAULT UNSET leaves v; DEFAULT NULL clears it
    s1.execute("INSERT INTO j.t JSON '{\"k\": 1, \"c\": 1, \"n\": 5}' "
               "DEFAULT UNSET")
    r = s2.execute("SELECT v, n FROM j.t WHERE k = 1 AND c = 1").one()
    assert (r.v, r.n) == ('v"1\n', 5)
    s1.execute("INSERT INTO j.t JSON '{\"k\": 1, \"c\": 1}'")
    r = s2.execute("SELECT v, n FROM j.t WHERE k = 1 AND c = 1").one()
    assert (r.v, r.n) == (None, None)
    c1.shutdown()
    c2.shutdown()
