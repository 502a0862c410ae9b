"""client_encryption_options: the stock python driver over TLS (PEM
keystore and truststore made with the openssl command), system_views.clients
showing each session's protocol and cipher, accepted_protocols and
cipher_suites by Cassandra's names, optional TLS on the same port, client
certificates, and a broken keystore refused at start. Addresses
127.0.85.30-35."""
import logging
import socket
import ssl
import subprocess

import pytest
from cassandra.cluster import Cluster, NoHostAvailable

from conftest import BUILD_DIR, default_yaml, seeds_yaml


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True)


def sign(d, name, cn, ext=None):
    """A P-256 key and a certificate for `cn` signed by the test CA;
    returns the path of a PEM holding both."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={cn}", cwd=d)
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem",
            "-CAkey", "ca.key", "-CAcreateserial", "-out", f"{name}.crt",
            "-days", "2"]
    if ext:
        (d / f"{name}.ext").write_text(ext)
        args += ["-extfile", f"{name}.ext"]
    openssl(*args, cwd=d)
    pem = d / f"{name}.pem"
    pem.write_text((d / f"{name}.key").read_text() +
                   (d / f"{name}.crt").read_text())
    return pem


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=cassini-test-ca",
            cwd=d)
    node = sign(d, "node", "cassini-node", "subjectAltName=IP:127.0.85.30,"
                "IP:127.0.85.31,IP:127.0.85.32,IP:127.0.85.33,"
                "IP:127.0.85.34\n")
    client = sign(d, "client", "cassini-client")
    return {"dir": d, "ca": d / "ca.pem", "node": node,
            "client_key": d / "client.key", "client_crt": d / "client.crt"}


def start(make_node, ip, options):
    section = "\n" + "".join(f"  {k}: {v}\n" for k, v in options.items())
    n = make_node(default_yaml(listen_address=ip, rpc_address=ip,
                               seed_provider=seeds_yaml(ip),
                               client_encryption_options=section))
    n.start()
    return n


def tls_context(certs, client_cert=False, maximum=None, minimum=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(certs["ca"]))
    ctx.check_hostname = False  # the driver connects by address
    if client_cert:
        ctx.load_cert_chain(str(certs["client_crt"]),
                            str(certs["client_key"]))
    if maximum:
        ctx.maximum_version = maximum
    if minimum:
        ctx.minimum_version = minimum
    return ctx


def connect(ip, ctx=None):
    c = Cluster([ip], protocol_version=4, ssl_context=ctx,
                connect_timeout=5)
    return c, c.connect()


def my_client_rows(s):
    return list(s.execute("SELECT ssl_enabled, ssl_protocol, "
                          "ssl_cipher_suite, driver_name "
                          "FROM system_views.clients"))


def test_tls_only(make_node, certs, caplog):
    ip = "127.0.85.30"
    n = start(make_node, ip, {"enabled": "true",
                              "keystore": str(certs["node"])})
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    assert "clients speak TLS (" in n.log()
    c, s = connect(ip, tls_context(certs))
    try:
        assert s.execute("SELECT release_version FROM system.local").one()
        rows = my_client_rows(s)
        assert rows and all(r.ssl_enabled for r in rows), rows
        assert {r.ssl_protocol for r in rows} == {"TLSv1.3"}
        assert all(r.ssl_cipher_suite.startswith("TLS_") for r in rows)
        # data round trips through TLS records, large values included
        s.execute("CREATE KEYSPACE t WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE t.t (k int PRIMARY KEY, v blob)")
        big = bytes(range(256)) * 4096
        s.execute("INSERT INTO t.t (k, v) VALUES (1, %s)",
                  (bytearray(big),))
        assert s.execute("SELECT v FROM t.t WHERE k = 1").one().v == big
    finally:
        c.shutdown()
    # a plain client does not get in, and the node says so at once: it
    # closes a connection whose first bytes are no TLS record. The driver
    # (3.x) logs that close but still reports its connect_timeout
    # (OperationTimedOut: it does not wake its connect on a close), so the
    # check is the close it logs, for the driver, and the socket below
    caplog.set_level(logging.DEBUG, logger="cassandra.io")
    mark = n.log_size()
    with pytest.raises(NoHostAvailable):
        connect(ip)
    closes = [r for r in caplog.records
              if r.name.startswith("cassandra.io") and
              "closed by server" in r.getMessage()]
    assert closes, [r.getMessage() for r in caplog.records]
    # on the wire: a CQL OPTIONS frame first gets a TLS alert at most
    # (never a CQL answer), then end of stream; the socket timeout is a
    # ceiling that only stops a hang from passing as a refusal
    with socket.create_connection((ip, 9042), timeout=30) as sk:
        sk.sendall(bytes([4, 0, 0, 1, 5, 0, 0, 0, 0]))
        got = b""
        while True:
            chunk = sk.recv(4096)  # socket.timeout: the node never closed
            if not chunk:
                break
            got += chunk
    assert got == b"" or got[0] == 0x15, got  # 0x15: a TLS alert record
    # closed for what it sent (not by the handshake timeout)
    assert n.wait_for_log("wrong version number", since=mark), n.log()[mark:]
    # nor one that does not trust the node's CA
    other = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    other.check_hostname = False
    with pytest.raises(NoHostAvailable):
        connect(ip, other)
    assert "TLS error with client" in n.log()


def test_protocols_and_cipher_suites(make_node, certs):
    ip = "127.0.85.31"
    n = start(make_node, ip, {
        "enabled": "true", "keystore": str(certs["node"]),
        "accepted_protocols": "[TLSv1.2]",
        "cipher_suites": "[TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]"})
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    c, s = connect(ip, tls_context(certs))
    try:
        rows = my_client_rows(s)
        assert {(r.ssl_protocol, r.ssl_cipher_suite) for r in rows} == \
            {("TLSv1.2", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")}
    finally:
        c.shutdown()
    with pytest.raises(NoHostAvailable):
        connect(ip, tls_context(certs, minimum=ssl.TLSVersion.TLSv1_3))


def test_optional_serves_both(make_node, certs):
    ip = "127.0.85.32"
    n = start(make_node, ip, {"enabled": "true", "optional": "true",
                              "keystore": str(certs["node"])})
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    c1, s1 = connect(ip, tls_context(certs))
    c2, s2 = connect(ip)
    try:
        rows = my_client_rows(s1)
        assert {r.ssl_enabled for r in rows} == {True, False}, rows
        assert s2.execute("SELECT key FROM system.local").one().key == \
            "local"
    finally:
        c1.shutdown()
        c2.shutdown()


def test_client_certificates(make_node, certs):
    ip = "127.0.85.33"
    n = start(make_node, ip, {"enabled": "true",
                              "keystore": str(certs["node"]),
                              "require_client_auth": "true",
                              "truststore": str(certs["ca"])})
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    with pytest.raises(NoHostAvailable):
        connect(ip, tls_context(certs))
    c, s = connect(ip, tls_context(certs, client_cert=True))
    try:
        assert s.execute("SELECT key FROM system.local").one()
    finally:
        c.shutdown()


@pytest.mark.parametrize("options,message", [
    ({"enabled": "true"}, "keystore: a PEM file with the key"),
    ({"enabled": "true", "keystore": "/nonexistent.pem"},
     "keystore /nonexistent.pem: no certificate"),
    ({"enabled": "true", "keystore": "CA", "require_client_auth": "true"},
     "no private key"),
    ({"enabled": "true", "keystore": "NODE", "require_client_auth": "true"},
     "require_client_auth needs a truststore"),
    ({"enabled": "true", "keystore": "NODE",
      "cipher_suites": "[TLS_NO_SUCH_SUITE]"},
     "unknown or disabled cipher suite 'TLS_NO_SUCH_SUITE'"),
    ({"enabled": "true", "keystore": "NODE",
      "accepted_protocols": "[SSLv3]"}, "unknown protocol 'SSLv3'"),
])
def test_bad_options_refused_at_start(make_node, certs, options, message):
    options = {k: {"CA": str(certs["ca"]), "NODE": str(certs["node"])}
               .get(v, v) for k, v in options.items()}
    n = start(make_node, "127.0.85.34", options)
    assert n.proc.wait(timeout=60) != 0
    log = n.log() + n.stderr_path.read_text()
    assert "client_encryption_options: " in log and message in log, log


def test_store_type_jks_refused(make_node):
    n = start(make_node, "127.0.85.35", {"enabled": "true",
                                         "store_type": "JKS"})
    assert n.proc.wait(timeout=30) != 0
    err = n.stderr_path.read_text() + n.log()
    assert "store_type" in err and "PEM" in err, err


def test_stress_and_the_c_client_over_tls(make_node, certs):
    """cassini-stress (the C client) speaks TLS with cassandra-stress's
    -transport truststore=..., verifying the node's certificate."""
    ip = "127.0.85.34"
    n = start(make_node, ip, {"enabled": "true",
                              "keystore": str(certs["node"])})
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    base = [str(BUILD_DIR / "node" / "cassini-stress"), "write", "n=500",
            "cl=ONE", "-node", ip, "-schema", "replication(factor=1)",
            "-rate", "threads=4", "-col", "size=3000"]
    r = subprocess.run(base + ["-transport", f"truststore={certs['ca']}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Op rate" in r.stdout
    stress = str(BUILD_DIR / "node" / "cassini-stress")
    r = subprocess.run([stress, "read", "n=500", "cl=ONE", "-node", ip,
                        "-col", "size=3000", "-transport",
                        f"truststore={certs['ca']}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    # plaintext against a TLS-only node, and a truststore without the
    # node's CA: no connection
    r = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    r = subprocess.run(base + ["-transport",
                               f"truststore={certs['client_crt']}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "certificate verify failed" in r.stdout + r.stderr, \
        r.stdout + r.stderr
