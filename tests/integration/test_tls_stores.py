"""PKCS#12 keystores and truststores (made with the openssl command) for
client_encryption_options and server_encryption_options, by name (.p12) and
by store_type: PKCS12; a wrong password and a JKS keystore refused at start
with what to do. Addresses 127.0.91.42-45."""
import socket
import ssl
import subprocess

from cassandra.cluster import Cluster

from conftest import default_yaml, seeds_yaml


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True)


def make_certs(d, ip):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=stores-ca", cwd=d)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", "node.key", "-out", "node.csr",
            "-subj", "/CN=p12-node", cwd=d)
    (d / "node.ext").write_text(f"subjectAltName=IP:{ip}\n")
    openssl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey",
            "ca.key", "-CAcreateserial", "-out", "node.crt", "-days", "2",
            "-extfile", "node.ext", cwd=d)
    # the node's key and certificate with the CA in its chain
    openssl("pkcs12", "-export", "-inkey", "node.key", "-in", "node.crt",
            "-certfile", "ca.pem", "-name", "node", "-passout",
            "pass:p12secret", "-out", "node.p12", cwd=d)
    # the same under a name that does not tell: store_type says
    (d / "node.keystore").write_bytes((d / "node.p12").read_bytes())
    # a truststore of the CA certificate only
    openssl("pkcs12", "-export", "-nokeys", "-in", "ca.pem", "-passout",
            "pass:trustme", "-out", "ca.p12", cwd=d)


def start(make_node, ip, client, server=None):
    def section(opts):
        return "\n" + "".join(f"  {k}: {v}\n" for k, v in opts.items())
    keys = dict(listen_address=ip, rpc_address=ip,
                seed_provider=seeds_yaml(ip),
                client_encryption_options=section(client))
    if server:
        keys["server_encryption_options"] = section(server)
    n = make_node(default_yaml(**keys), name=ip)
    n.start()
    return n


def peer_cn(ip, port, ca, cert=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(str(ca))
    if cert:
        ctx.load_cert_chain(*cert)
    with socket.create_connection((ip, port), timeout=5) as sock:
        with ctx.wrap_socket(sock) as t:
            return dict(x[0] for x in t.getpeercert()["subject"])[
                "commonName"]


def test_pkcs12_keystores_and_truststore(make_node, tmp_path):
    ip = "127.0.91.42"
    make_certs(tmp_path, ip)
    n = start(make_node, ip,
              {"enabled": "true", "keystore": tmp_path / "node.p12",
               "keystore_password": "p12secret"},
              {"internode_encryption": "all", "store_type": "PKCS12",
               "keystore": tmp_path / "node.keystore",
               "keystore_password": "p12secret",
               "truststore": tmp_path / "ca.p12",
               "truststore_password": "trustme",
               "require_client_auth": "true"})
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    ca = tmp_path / "ca.pem"
    assert peer_cn(ip, 9042, ca) == "p12-node"
    # internode: mutual TLS against the PKCS#12 truststore
    cert = (str(tmp_path / "node.crt"), str(tmp_path / "node.key"))
    assert peer_cn(ip, 7000, ca, cert) == "p12-node"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(str(ca))
    c = Cluster([ip], protocol_version=4, ssl_context=ctx, connect_timeout=5)
    try:
        assert c.connect().execute(
            "SELECT release_version FROM system.local").one()
    finally:
        c.shutdown()


def test_wrong_pkcs12_password_refused(make_node, tmp_path):
    ip = "127.0.91.43"
    make_certs(tmp_path, ip)
    n = start(make_node, ip, {"enabled": "true",
                              "keystore": tmp_path / "node.p12",
                              "keystore_password": "wrong"})
    assert n.proc.wait(timeout=60) != 0
    log = n.log() + n.stderr_path.read_text()
    assert ("client_encryption_options: keystore" in log and
            "cannot open the PKCS#12 file (a wrong keystore_password?)"
            in log), log


def test_jks_keystore_refused(make_node, tmp_path):
    ip = "127.0.91.44"
    # a JKS file starts with the magic number 0xFEEDFEED
    (tmp_path / "node.jks").write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    n = start(make_node, ip, {"enabled": "true",
                              "keystore": tmp_path / "node.jks"})
    assert n.proc.wait(timeout=60) != 0
    log = n.log() + n.stderr_path.read_text()
    assert "a JKS keystore, which is not read: use PKCS12" in log, log
    assert "or PEM" in log, log


def test_store_type_jks_refused(make_node, tmp_path):
    n = start(make_node, "127.0.91.45", {"enabled": "true",
                                         "store_type": "JKS"})
    assert n.proc.wait(timeout=30) != 0
    err = n.stderr_path.read_text() + n.log()
    assert ("client_encryption_options.store_type: JKS keystores are not "
            "read; use PKCS12" in err and "or PEM" in err), err
