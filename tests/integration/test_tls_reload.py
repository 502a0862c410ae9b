"""Certificate hot reloading (Cassandra 4.1's SSLFactory): with
ssl_hot_reload_period short, a keystore swapped on disk (a certificate from
another CA) is served to new client and internode connections while an
established driver session keeps working; a broken file keeps the previous
certificate and logs an error. Addresses 127.0.91.40-41."""
import os
import socket
import ssl
import subprocess

import pytest
from cassandra.cluster import Cluster, NoHostAvailable

from conftest import default_yaml, seeds_yaml


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
            cwd=d)
    return d / f"{name}.pem"


def sign(d, ca, name, ip):
    """A key and certificate for `ip` signed by `ca`: the PEM text."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text(f"subjectAltName=IP:{ip}\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem",
            "-CAkey", f"{ca}.key", "-CAcreateserial", "-out",
            f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    return (d / f"{name}.key").read_text() + (d / f"{name}.crt").read_text()


def swap(path, text):
    """As a deployment tool does: a new file renamed over the old one."""
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    os.replace(tmp, path)


def peer_cn(ip, port, ca):
    """The common name of the certificate a new TLS connection is shown;
    raises ssl.SSLError when it does not chain to `ca`."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(str(ca))
    with socket.create_connection((ip, port), timeout=5) as sock:
        with ctx.wrap_socket(sock) as t:
            subject = dict(x[0] for x in t.getpeercert()["subject"])
            return subject["commonName"]


def driver_ctx(ca):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(str(ca))
    return ctx


def test_swapped_certificates_reach_new_connections(make_node, tmp_path):
    ip = "127.0.91.40"
    d = tmp_path / "certs"
    d.mkdir()
    ca1, ca2 = make_ca(d, "ca1"), make_ca(d, "ca2")
    client_ks, server_ks = d / "client-ks.pem", d / "server-ks.pem"
    client_ks.write_text(sign(d, "ca1", "client-v1", ip))
    server_ks.write_text(sign(d, "ca1", "server-v1", ip))
    n = make_node(default_yaml(
        listen_address=ip, rpc_address=ip, seed_provider=seeds_yaml(ip),
        ssl_hot_reload_period="1s",
        client_encryption_options=f"\n  enabled: true\n"
                                  f"  keystore: {client_ks}\n",
        server_encryption_options=f"\n  internode_encryption: all\n"
                                  f"  keystore: {server_ks}\n"
                                  f"  truststore: {ca1}\n"))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    assert peer_cn(ip, 9042, ca1) == "client-v1"
    assert peer_cn(ip, 7000, ca1) == "server-v1"
    c = Cluster([ip], protocol_version=4, ssl_context=driver_ctx(ca1),
                connect_timeout=5)
    s = c.connect()
    try:
        s.execute("CREATE KEYSPACE t WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE t.t (k int PRIMARY KEY, v int)")
        s.execute("INSERT INTO t.t (k, v) VALUES (1, 1)")

        # a new CA's certificate on both ports
        mark = n.log_size()
        swap(client_ks, sign(d, "ca2", "client-v2", ip))
        swap(server_ks, sign(d, "ca2", "server-v2", ip))
        for section in ("client_encryption_options",
                        "server_encryption_options"):
            assert n.wait_for_log("SSL certificates have been updated. "
                                  "Resetting the ssl contexts for new "
                                  f"connections. ({section})",
                                  timeout=30, since=mark), n.log()
        assert peer_cn(ip, 9042, ca2) == "client-v2"
        assert peer_cn(ip, 7000, ca2) == "server-v2"
        with pytest.raises(ssl.SSLError):
            peer_cn(ip, 9042, ca1)
        # the session made before the swap still runs on its connections
        for k in range(2, 20):
            s.execute("INSERT INTO t.t (k, v) VALUES (%s, %s)", (k, k))
        assert s.execute("SELECT count(*) FROM t.t").one()[0] == 19
        # a new driver trusting only the old CA does not get in
        with pytest.raises(NoHostAvailable):
            Cluster([ip], protocol_version=4, ssl_context=driver_ctx(ca1),
                    connect_timeout=5).connect()
        c2 = Cluster([ip], protocol_version=4, ssl_context=driver_ctx(ca2),
                     connect_timeout=5)
        try:
            assert c2.connect().execute(
                "SELECT v FROM t.t WHERE k = 5").one().v == 5
        finally:
            c2.shutdown()

        # a broken file: the previous certificate stays, an error is logged
        mark = n.log_size()
        swap(client_ks, "-----BEGIN PRIVATE KEY-----\nbroken\n")
        assert n.wait_for_log("Failed to hot reload the SSL Certificates! "
                              "Please check the certificate files. "
                              "(client_encryption_options: keystore",
                              timeout=30, since=mark), n.log()
        assert peer_cn(ip, 9042, ca2) == "client-v2"
        assert s.execute("SELECT v FROM t.t WHERE k = 7").one().v == 7
        # and the next good file is taken
        mark = n.log_size()
        swap(client_ks, sign(d, "ca1", "client-v3", ip))
        assert n.wait_for_log("(client_encryption_options)", timeout=30,
                              since=mark), n.log()
        assert peer_cn(ip, 9042, ca1) == "client-v3"
    finally:
        c.shutdown()
