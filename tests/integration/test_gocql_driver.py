"""gocql (Debian's golang-github-gocql-gocql-dev, built offline by Debian's
Go with GOPATH=/usr/share/gocode) against a real cassinid, with no special
options: the basics, then the data model (UDTs as maps and as structs with
cql tags, frozen and not, tuples, durations, counters, MapScanCAS and
ScanCAS)."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import SOURCE_DIR, default_yaml

ADDRESS = "127.0.3.31"  # a block of its own: suites run in parallel


def test_gocql_works_without_special_options(make_node, tmp_path):
    if not shutil.which("go"):
        pytest.fail("go is missing: scripts/setup installs golang-go")
    n = make_node(default_yaml(listen_address=ADDRESS))
    n.start()
    assert n.wait_for_log("CQL clients on"), n.log()
    env = dict(os.environ, GOPATH="/usr/share/gocode", GO111MODULE="off",
               GOFLAGS="", GOCACHE=str(tmp_path / "gocache"),
               HOME=str(tmp_path))
    exe = tmp_path / "gocql_driver"
    b = subprocess.run(["go", "build", "-o", str(exe),
                        str(SOURCE_DIR / "tests" / "integration" /
                            "gocql_driver.go")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert b.returncode == 0, b.stderr
    r = subprocess.run([str(exe), ADDRESS], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr + n.log()[-3000:]
    out = json.loads(r.stdout)
    assert out["release"]
    assert out["row3"] == ["v3", ["a", "b"]]
    assert out["paged"] == list(range(30))
    assert out["batch"] == 2
    assert out["table"] == {"pk": 1, "ck": 1, "columns": 4}
    assert out["syntax"] == 0x2000
    assert out["invalid"] == {"code": 0x2200,
                              "message": "unconfigured table nope"}
    assert out["unavailable"] == {"required": 3, "alive": 1}
    assert out["truncated"] == 0
    # user types: a non-frozen one as a map (a field update seen), frozen
    # ones as tagged structs, in lists and maps; a field deleted reads as
    # the zero value
    addr = {"Street": "p", "Zip": 1}
    assert out["udt_map"] == {"street": "main", "zip": 20}
    assert out["udt_struct"] == {"Street": "frozen", "Zip": 5}
    assert out["udt_list"] == [addr, {"Street": "q", "Zip": 2}]
    assert out["udt_in_map"] == {"m": {"Street": "mm", "Zip": 3}}
    assert out["udt_struct2"] == {"Street": "", "Zip": 2}
    assert out["mapscan"] == {"a": {"street": "main", "zip": 20},
                              "tp[0]": 7, "tp[1]": "seven"}
    assert out["tuple"] == [7, "seven"]
    assert out["duration"] == {"Months": 1, "Days": 2, "Nanoseconds": 3}
    assert out["duration2"] == {"Months": 0, "Days": 0,
                                "Nanoseconds": 5400 * 10**9}
    assert out["counter"] == {"1": 13, "2": 100}
    # INSERT IF NOT EXISTS twice: applied, then not with the row as it is;
    # a failed condition hands back the current value
    assert out["cas"] == {"applied": [True, False, False, True],
                          "first": {},
                          "second": {"k": 1, "n": 1, "v": "first"},
                          "old": "first"}
