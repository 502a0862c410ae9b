"""The Node.js cassandra-driver from npm (scripts/setup installs it under
.cache/node) against a real cassinid: the basics, then the data model
(UDTs, frozen and not, as plain objects both ways, types.Tuple,
types.Duration, counters as types.Long, SELECT JSON / INSERT JSON)."""
import json
import os
import subprocess

from conftest import SOURCE_DIR, default_yaml

ADDRESS = "127.0.3.21"  # a block of its own: suites run in parallel
MODULES = SOURCE_DIR / ".cache" / "node" / "node_modules"


def test_node_driver_works_without_special_options(make_node):
    n = make_node(default_yaml(listen_address=ADDRESS))
    n.start()
    assert n.wait_for_log("CQL clients on"), n.log()
    env = dict(os.environ, NODE_PATH=str(MODULES))
    r = subprocess.run(["node", str(SOURCE_DIR / "tests" / "integration" /
                                    "node_driver.js"), ADDRESS, "9042"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr + n.log()[-3000:]
    out = json.loads(r.stdout)
    assert out["protocol"] == 4  # negotiated down from the driver's v5
    assert out["rows"] == 30 and out["row3"] == ["v3", ["a", "b"]]
    assert out["paged"] == {"pages": 5, "rows": list(range(30))}
    assert out["streamed"] == 30
    assert out["batch"] == ["1=x", "2=y"]
    assert out["table"] == {"pk": ["k"], "ck": ["c"], "columns": 4}
    assert out["replicas"] == [ADDRESS + ":9042"]
    assert out["syntax"]["code"] == 0x2000
    assert out["invalid"] == {"code": 0x2200,
                              "message": "unconfigured table nope"}
    dm = out["datamodel"]
    pt = {"x": 2, "y": "b"}
    assert dm["udt"] == {
        "a": {"street": "ttl", "zip": 20}, "f": {"x": 1, "y": "a"},
        "pts": [pt, {"x": 3, "y": None}], "pm": {"m": {"x": 4, "y": "m"}},
        "a2": {"street": None, "zip": 2}}
    assert dm["tuple"] == {"isTuple": True, "length": 3,
                           "values": [7, "seven", {"x": 8, "y": "h"}]}
    assert dm["duration"] == {"isDuration": True, "parts": [1, 2, "3"],
                              "text": "1h30m"}
    zip_, street, ttl = dm["field"]  # ttl(a.f): Cassandra 5.0's
    assert (zip_, street) == (20, "ttl") and 0 < ttl <= 1000
    # frozen UDTs as clustering keys: Cassandra's order, bound in WHERE
    assert dm["ordered"] == [[{"x": 1, "y": "a"}, 3], [{"x": 1, "y": "z"}, 2],
                             [pt, 1]]
    assert dm["byKey"] == [2]
    assert dm["udtMeta"] == ["street", "zip"]
    assert dm["counter"] == {"1": [True, "13"], "2": [True, "100"]}
    assert dm["json"] == {
        "k": 1, "a": {"street": "ttl", "zip": 20}, "f": {"x": 1, "y": "a"},
        "pts": [pt, {"x": 3, "y": None}],
        "tp": [7, "seven", {"x": 8, "y": "h"}], "d": "1mo2d3ns"}
    assert dm["insertJson"] == {"a": {"street": "json", "zip": 3},
                                "tp": [1, "one", {"x": 0, "y": None}],
                                "d": "2d"}
