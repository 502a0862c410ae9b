"""server_encryption_options: internode TLS between real cassinid
processes, with a cluster CA and per-node certificates made by the openssl
command. Mutual authentication (a node with another CA's certificate, a
peer without a certificate and a plaintext node cannot connect, so they
are never gossiped to nor in the ring), `dc` mode encrypting only the
connections across datacenters, and a plaintext peer refused where
encryption is required even when it claims to be in our datacenter
(CVE-2020-17516). Addresses 127.0.95.1-30 and 127.0.91.70-79."""
import socket
import ssl
import subprocess
import time

import pytest

from conftest import BUILD_DIR, default_yaml, seeds_yaml, wait_all_normal

TOOL = BUILD_DIR / "node" / "cassini-tool"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
            cwd=d)
    return d / f"{name}.pem"


def sign(d, ca, name, ips):
    """A key and a certificate naming `ips` signed by CA `ca`; the path
    of a PEM holding both."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text(
        "subjectAltName=" + ",".join(f"IP:{ip}" for ip in ips) + "\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem",
            "-CAkey", f"{ca}.key", "-CAcreateserial", "-out", f"{name}.crt",
            "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    pem = d / f"{name}.pem"
    pem.write_text((d / f"{name}.key").read_text() +
                   (d / f"{name}.crt").read_text())
    return pem


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    out = {"ca": make_ca(d, "cluster-ca"), "rogue_ca": make_ca(d, "rogue-ca")}
    for i in range(1, 31):
        ip = f"127.0.95.{i}"
        out[ip] = sign(d, "cluster-ca", f"node{i}", [ip])
    out["rogue"] = sign(d, "rogue-ca", "rogue", ["127.0.95.3"])
    out["client_key"] = d / "node1.key"
    out["client_crt"] = d / "node1.crt"
    return out


def encryption(mode, keystore, truststore, **extra):
    keys = {"internode_encryption": mode, "keystore": keystore,
            "truststore": truststore, "require_client_auth": "true",
            "require_endpoint_verification": "true", **extra}
    return "\n" + "".join(f"  {k}: {v}\n" for k, v in keys.items())


def node(make_node, ip, seed, enc=None, dc="dc1", rack="rack1"):
    keys = {"listen_address": ip, "rpc_address": ip,
            "gossip_interval": "200ms", "seed_provider": seeds_yaml(seed)}
    if enc:
        keys["server_encryption_options"] = enc
    n = make_node(default_yaml(**keys), name=ip,
                  rackdc=f"dc={dc}\nrack={rack}\n")
    n.start()
    return n


def tool(ip, *args):
    r = subprocess.run([str(TOOL), "-h", ip, *args], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout


def connections(ip):
    """{(direction, peer ip): 'encrypted' | 'plaintext'}"""
    out = {}
    for line in tool(ip, "internodeconnections").splitlines():
        parts = line.split()
        if parts and parts[0] in ("inbound", "outbound"):
            out[(parts[0], parts[1].rsplit(":", 1)[0])] = parts[2]
    return out


def wait_for(pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    return pred()


def status_ips(ip):
    return {line.split()[1] for line in tool(ip, "status").splitlines()
            if line[:2] in ("UN", "DN", "UJ", "DJ")}


def test_all_mutual_tls(make_node, certs):
    a, b = "127.0.95.1", "127.0.95.2"
    na = node(make_node, a, a, encryption("all", certs[a], certs["ca"]))
    assert na.wait_for_log("internode_encryption: all, peers need a "
                           "certificate", timeout=30), na.log()
    node(make_node, b, a, encryption("all", certs[b], certs["ca"]))
    wait_all_normal([a, b], timeout=40)
    conns = wait_for(lambda: len(connections(a)) >= 2 and connections(a))
    assert conns[("outbound", b)] == "encrypted", conns
    assert conns[("inbound", b)] == "encrypted", conns
    assert "TLSv1.3" in tool(a, "internodeconnections")

    # another CA's certificate: the TLS handshake fails both ways
    rogue = "127.0.95.3"
    nr = node(make_node, rogue, a,
              encryption("all", certs["rogue"], certs["rogue_ca"]))
    # a plaintext node
    plain = "127.0.95.4"
    npl = node(make_node, plain, a)
    assert na.wait_for_log(f"TLS handshake with internode peer {rogue}",
                           timeout=30), na.log()
    assert na.wait_for_log(f"refusing unencrypted internode connection "
                           f"from {plain}", timeout=30), na.log()
    # a TLS peer without a certificate
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(certs["ca"]))
    ctx.check_hostname = False
    mark = na.log_size()
    with socket.create_connection((a, 7000), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(raw) as s:
                s.sendall(b"\0\0\0\x10" + b"x" * 16)
                assert s.recv(100) == b""  # closed: not answered
    assert na.wait_for_log("TLS handshake with internode peer 127.0.95.",
                           since=mark, timeout=10), na.log()
    # neither joined nor is known to the cluster
    time.sleep(2)
    for ip in (a, b):
        assert status_ips(ip) == {a, b}, tool(ip, "status")
        info = tool(ip, "gossipinfo")
        assert rogue not in info and plain not in info, info
    assert "is now UP" not in nr.log() and "is now UP" not in npl.log()
    out = tool(a, "internodeconnections")
    assert "plaintext refused: 0" not in out, out


def test_endpoint_verification(make_node, certs):
    """A certificate from the cluster's CA naming another node's address
    does not let a node claim to be this one."""
    a, b = "127.0.95.5", "127.0.95.6"
    na = node(make_node, a, a, encryption("all", certs[a], certs["ca"]))
    assert na.wait_for_log("CQL clients on", timeout=30), na.log()
    # b shows node 7's certificate
    nb = node(make_node, b, a,
              encryption("all", certs["127.0.95.7"], certs["ca"]))
    assert na.wait_for_log("its certificate does not name 127.0.95.6",
                           timeout=30) or \
        nb.wait_for_log("certificate verify failed", timeout=5), \
        na.log() + nb.log()
    time.sleep(1)
    assert status_ips(a) == {a}, tool(a, "status")


def test_endpoint_verification_outbound(make_node, certs):
    """The connecting side checks too: a node reaching its seed refuses a
    certificate (from the cluster's CA) that names another address, so it
    never gossips with it. Without that check the two would see each
    other (the seed's inbound check passes: d's certificate names d)."""
    d, c = "127.0.91.70", "127.0.91.71"
    ca_dir = certs["ca"].parent
    own = sign(ca_dir, "cluster-ca", "node-d", [d])
    other = sign(ca_dir, "cluster-ca", "node-c-wrong", ["127.0.91.72"])
    nc = node(make_node, c, c, encryption("all", other, certs["ca"]))
    assert nc.wait_for_log("CQL clients on", timeout=30), nc.log()
    nd = node(make_node, d, f"{d},{c}", encryption("all", own, certs["ca"]))
    assert nd.wait_for_log(f"connection to {c}:7000 failed: TLS: ",
                           timeout=30), nd.log()
    assert "IP address mismatch" in nd.log(), nd.log()
    time.sleep(2)
    assert status_ips(d) == {d}, tool(d, "status")
    assert status_ips(c) == {c}, tool(c, "status")


def test_dc_mode_encrypts_across_dcs_only(make_node, certs):
    a, b, c = "127.0.95.10", "127.0.95.11", "127.0.95.12"
    enc = {ip: encryption("dc", certs[ip], certs["ca"]) for ip in (a, b, c)}
    na = node(make_node, a, a, enc[a], dc="dc1")
    assert na.wait_for_log("CQL clients on", timeout=30), na.log()
    node(make_node, b, a, enc[b], dc="dc1")
    node(make_node, c, a, enc[c], dc="dc2")
    wait_all_normal([a, b, c], timeout=40)

    def settled():
        conns = connections(a)
        want = {("outbound", b): "plaintext", ("inbound", b): "plaintext",
                ("outbound", c): "encrypted", ("inbound", c): "encrypted"}
        return all(conns.get(k) == v for k, v in want.items()) and conns
    conns = wait_for(settled, timeout=30)
    assert conns, connections(a)
    cc = connections(c)
    assert cc.get(("outbound", a)) == "encrypted", cc
    assert cc.get(("outbound", b)) == "encrypted", cc

    # a plaintext node claiming to be in dc1 is not believed
    liar = "127.0.95.13"
    nl = node(make_node, liar, a, dc="dc1")
    assert na.wait_for_log(f"refusing unencrypted internode connection "
                           f"from {liar}", timeout=30), na.log()
    assert "not known to be in our datacenter" in na.log()
    time.sleep(1)
    assert status_ips(a) == {a, b, c}, tool(a, "status")
    assert "is now UP" not in nl.log()


def test_rack_mode_encrypts_across_racks_only(make_node, certs):
    a, b, c = "127.0.91.75", "127.0.91.76", "127.0.91.77"
    d = certs["ca"].parent
    enc = {ip: encryption("rack", sign(d, "cluster-ca", f"r{ip}", [ip]),
                          certs["ca"]) for ip in (a, b, c)}
    na = node(make_node, a, a, enc[a], rack="rack1")
    assert na.wait_for_log("CQL clients on", timeout=30), na.log()
    node(make_node, b, a, enc[b], rack="rack1")
    node(make_node, c, a, enc[c], rack="rack2")
    wait_all_normal([a, b, c], timeout=40)

    def settled():
        conns = connections(a)
        want = {("outbound", b): "plaintext", ("inbound", b): "plaintext",
                ("outbound", c): "encrypted", ("inbound", c): "encrypted"}
        return all(conns.get(k) == v for k, v in want.items()) and conns
    assert wait_for(settled, timeout=30), connections(a)


def test_optional_enables_tls_on_a_running_cluster(make_node, certs):
    """docs/security.md's rolling enablement, its middle step: a node
    with `none` + `optional` + a keystore (plaintext out, TLS accepted
    in: the first pass) next to one with `all` + `optional` (TLS out,
    plaintext accepted in: the second pass) see each other, the second's
    connection to the first encrypted."""
    n, t = "127.0.91.78", "127.0.91.79"
    d = certs["ca"].parent
    keys = {ip: sign(d, "cluster-ca", f"o{ip}", [ip]) for ip in (n, t)}
    nn = node(make_node, n, n, encryption("none", keys[n], certs["ca"],
                                          optional="true"))
    assert nn.wait_for_log("internode_encryption: none, TLS peers "
                           "accepted (optional)", timeout=30), nn.log()
    node(make_node, t, n, encryption("all", keys[t], certs["ca"],
                                     optional="true"))
    wait_all_normal([n, t], timeout=40)

    def settled():
        conns = connections(t)
        want = {("outbound", n): "encrypted", ("inbound", n): "plaintext"}
        return all(conns.get(k) == v for k, v in want.items()) and conns
    assert wait_for(settled, timeout=30), connections(t)
    assert connections(n).get(("inbound", t)) == "encrypted", connections(n)


def test_bad_options_stop_the_node(make_node, certs):
    ip = "127.0.95.20"
    n = node(make_node, ip, ip, "\n  internode_encryption: all\n"
             f"  keystore: {certs[ip]}\n")
    assert n.proc.wait(timeout=30) != 0
    assert "a truststore" in n.log() + n.stderr_path.read_text()
