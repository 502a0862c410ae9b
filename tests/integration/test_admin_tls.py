"""TLS on the admin port (jmx_encryption_options, Cassandra 5.0's section)
with cassini-tool's --ssl/--truststore/--keystore/--check-hostname and -c
CONF_DIR, and hostname verification in the C client (cassini-stress
-transport check-hostname=true). Addresses 127.0.91.46-47."""
import subprocess

import pytest

from conftest import BUILD_DIR, default_yaml, seeds_yaml

TOOL = str(BUILD_DIR / "node" / "cassini-tool")
STRESS = str(BUILD_DIR / "node" / "cassini-stress")
A, B = "127.0.91.46", "127.0.91.47"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True)


def sign(d, ca, name, san=None):
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}", cwd=d)
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem",
            "-CAkey", f"{ca}.key", "-CAcreateserial", "-out", f"{name}.crt",
            "-days", "2"]
    if san:
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
        args += ["-extfile", f"{name}.ext"]
    openssl(*args, cwd=d)
    pem = d / f"{name}.pem"
    pem.write_text((d / f"{name}.key").read_text() +
                   (d / f"{name}.crt").read_text())
    return pem


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    for ca in ("ca", "rogue"):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{ca}.key",
                "-out", f"{ca}.pem", "-days", "2", "-subj", f"/CN={ca}",
                cwd=d)
    return {"dir": d, "ca": d / "ca.pem", "rogue": d / "rogue.pem",
            "a": sign(d, "ca", "node-a", f"IP:{A}"),
            "b": sign(d, "ca", "node-b", f"IP:{B}"),
            "elsewhere": sign(d, "ca", "elsewhere", "IP:127.0.91.99"),
            "client": sign(d, "ca", "tool-client")}


def start(make_node, ip, jmx, client):
    def section(opts):
        return "\n" + "".join(f"  {k}: {v}\n" for k, v in opts.items())
    n = make_node(default_yaml(listen_address=ip, rpc_address=ip,
                               seed_provider=seeds_yaml(ip),
                               jmx_encryption_options=section(jmx),
                               client_encryption_options=section(client)),
                  name=ip)
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    return n


def tool(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True,
                          timeout=30)


def stress(ip, *transport):
    return subprocess.run([STRESS, "write", "n=200", "cl=ONE", "-node", ip,
                           "-schema", "replication(factor=1)",
                           "-transport", *transport],
                          capture_output=True, text=True, timeout=60)


def test_admin_port_over_tls(make_node, certs):
    """Node A: the admin port's certificate names A and wants a client
    certificate; the client port's certificate names another address."""
    n = start(make_node, A,
              {"enabled": "true", "keystore": certs["a"],
               "require_client_auth": "true", "truststore": certs["ca"]},
              {"enabled": "true", "keystore": certs["elsewhere"]})
    assert "admin endpoint listening on 127.0.91.46:7199 (TLS" in n.log()
    ca, client = str(certs["ca"]), str(certs["client"])
    ok = tool("-h", A, "--truststore", ca, "--keystore", client,
              "--check-hostname", "version")
    assert ok.returncode == 0 and "ReleaseVersion" in ok.stdout, \
        ok.stdout + ok.stderr
    # plaintext gets nothing; TLS without a client certificate neither
    r = tool("-h", A, "version")
    assert r.returncode == 1 and "closed the connection" in r.stderr, \
        r.stderr
    r = tool("-h", A, "--truststore", ca, "version")
    assert r.returncode == 1, r.stdout + r.stderr
    # a truststore without the node's CA
    r = tool("-h", A, "--truststore", str(certs["rogue"]), "--keystore",
             client, "version")
    assert r.returncode == 1 and "certificate verify failed" in r.stderr, \
        r.stderr
    # -c CONF_DIR: the node's own jmx_encryption_options (its truststore,
    # its keystore as the client certificate)
    r = tool("-c", str(n.conf), "version")
    assert r.returncode == 0 and "ReleaseVersion" in r.stdout, r.stderr
    # the C client: the chain verifies, the name does not
    r = stress(A, f"truststore={ca}")
    assert r.returncode == 0, r.stdout + r.stderr
    r = stress(A, f"truststore={ca}", "check-hostname=true")
    assert r.returncode != 0
    assert "certificate verify failed" in r.stdout + r.stderr, \
        r.stdout + r.stderr


def test_hostname_verification(make_node, certs):
    """Node B: the other way round."""
    start(make_node, B, {"enabled": "true", "keystore": certs["elsewhere"]},
          {"enabled": "true", "keystore": certs["b"]})
    ca = str(certs["ca"])
    r = tool("-h", B, "--truststore", ca, "version")
    assert r.returncode == 0, r.stderr
    r = tool("-h", B, "--truststore", ca, "--check-hostname", "version")
    assert r.returncode == 1 and "certificate verify failed" in r.stderr, \
        r.stderr
    assert "IP address mismatch" in r.stderr, r.stderr
    r = stress(B, f"truststore={ca}", "check-hostname=true")
    assert r.returncode == 0, r.stdout + r.stderr
