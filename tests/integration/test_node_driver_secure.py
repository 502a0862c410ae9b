"""The Node.js cassandra-driver (npm, under .cache/node) against a node
with PasswordAuthenticator and client TLS (issue #28's driver test):
PlainTextAuthProvider over TLS with the test CA logs in and works, a wrong
password is an AuthenticationError, and a plaintext connection to the TLS
port fails. Address 127.0.98.1."""
import json
import os
import subprocess

from conftest import SOURCE_DIR, default_yaml, seeds_yaml
from test_client_tls import certs, openssl, sign  # noqa: F401 (fixture)

IP = "127.0.98.1"
MODULES = SOURCE_DIR / ".cache" / "node" / "node_modules"


def test_node_driver_with_password_and_tls(make_node, tmp_path):
    d = tmp_path / "certs"
    d.mkdir()
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=cassini-test-ca",
            cwd=d)
    pem = sign(d, "node", "cassini-node", f"subjectAltName=IP:{IP}\n")
    tls = (f"\n  enabled: true\n  keystore: {pem}\n")
    n = make_node(default_yaml(listen_address=IP, rpc_address=IP,
                               seed_provider=seeds_yaml(IP),
                               authenticator="PasswordAuthenticator",
                               superuser_setup_delay="200ms",
                               client_encryption_options=tls))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    assert n.wait_for_log("Created default superuser role", timeout=60), \
        n.log()
    env = dict(os.environ, NODE_PATH=str(MODULES))
    r = subprocess.run(["node", str(SOURCE_DIR / "tests" / "integration" /
                                    "node_driver_secure.js"), IP, "9042",
                        str(d / "ca.pem")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr + n.log()[-3000:]
    out = json.loads(r.stdout)
    assert [True, "cassandra"] in out["clients"], out
    assert out["row"] == "a"
    wrong = out["wrong_password"]
    assert wrong["name"] == "NoHostAvailableError"
    assert wrong["inner"] == ["AuthenticationError"], wrong
    assert "Provided username cassandra and/or password are incorrect" \
        in wrong["message"]
    assert out["plaintext"] != "connected"
    assert out["plaintext"]["name"] == "NoHostAvailableError"
