"""gocql (Debian's golang-github-gocql-gocql-dev, built offline by Debian's
Go with GOPATH=/usr/share/gocode) against a real cassinid, with no special
options."""
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
