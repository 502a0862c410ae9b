"""Garbage on the storage and admin ports: random bytes, an oversized
length, a handshake from another cluster. Each is logged and the connection
closed; the node keeps serving. Each test runs twice: in plaintext (one
node on 127.0.19.1, a block of its own: suites run in parallel; it shared
127.0.3.1 with test_cql_node), and over TLS (127.0.91.61: internode TLS
with mutual authentication and jmx_encryption_options on the admin port,
the garbage sent inside a completed handshake, with a certificate of the
node's CA)."""
import os
import socket
import ssl
import struct
import subprocess

import pytest

from conftest import BUILD_DIR, Node, default_yaml

TOOL = BUILD_DIR / "node" / "cassini-tool"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True)


def make_certs(d, ip):
    """A CA and a key + certificate naming `ip`, for the node and for our
    side (the node asks for one: require_client_auth)."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=garbage-ca", cwd=d)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", "node.key", "-out", "node.csr", "-subj",
            "/CN=garbage-node", cwd=d)
    (d / "node.ext").write_text(f"subjectAltName=IP:{ip}\n")
    openssl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey",
            "ca.key", "-CAcreateserial", "-out", "node.crt", "-days", "2",
            "-extfile", "node.ext", cwd=d)
    (d / "node.pem").write_text((d / "node.key").read_text() +
                                (d / "node.crt").read_text())


class Target:
    """The node and how to reach it: plaintext or TLS sockets, and
    cassini-tool's arguments."""

    def __init__(self, node, addr, certs=None):
        self.node, self.addr, self.certs = node, addr, certs

    def proc_poll(self):
        return self.node.proc.poll()

    def connect(self, port):
        s = socket.create_connection((self.addr, port), timeout=10)
        if not self.certs:
            return s
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(str(self.certs / "ca.pem"))
        ctx.check_hostname = False
        ctx.load_cert_chain(str(self.certs / "node.crt"),
                            str(self.certs / "node.key"))
        return ctx.wrap_socket(s)  # the handshake completes here

    def tool_args(self):
        args = ["-h", self.addr]
        if self.certs:
            args += ["--ssl", "--truststore", str(self.certs / "ca.pem")]
        return args


@pytest.fixture(params=["plaintext", "tls"])
def node(request, tmp_path):
    tls = request.param == "tls"
    addr = "127.0.91.61" if tls else "127.0.19.1"
    extra = {}
    certs = None
    if tls:
        certs = tmp_path / "certs"
        certs.mkdir()
        make_certs(certs, addr)
        extra["server_encryption_options"] = (
            "\n  internode_encryption: all"
            f"\n  keystore: {certs / 'node.pem'}"
            f"\n  truststore: {certs / 'ca.pem'}"
            "\n  require_client_auth: true")
        extra["jmx_encryption_options"] = (
            "\n  enabled: true"
            f"\n  keystore: {certs / 'node.pem'}")
    n = Node(tmp_path / "node1", default_yaml(
        listen_address=addr,
        seed_provider="[{class_name: SimpleSeedProvider, parameters: "
                      f"[{{seeds: '{addr}'}}]}}]",
        cluster_name="'Garbage'", **extra))
    n.start()
    assert n.wait_for_log("cassinid ready", timeout=30), n.log()
    yield Target(n, addr, certs)
    n.kill()


def pb_string(field, text):
    data = text.encode()
    return bytes([field << 3 | 2, len(data)]) + data


def pb_varint(field, value):
    out = bytes([field << 3])
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def handshake(cluster):
    body = (pb_string(1, cluster) +
            pb_string(2, "org.apache.cassandra.dht.Murmur3Partitioner") +
            pb_varint(3, 1) + pb_string(4, "0" * 36) + pb_string(5, "dc1") +
            pb_string(6, "rack1") + bytes([7 << 3 | 2, 4]) +
            socket.inet_aton("127.0.19.9") + pb_varint(8, 7000))
    return struct.pack(">I", len(body)) + body


def send(t, port, data, wait_close=True):
    s = t.connect(port)
    s.sendall(data)
    got = b""
    if wait_close:
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        except (ConnectionResetError, socket.timeout, ssl.SSLError):
            pass
    s.close()
    return got


def serving(t):
    r = subprocess.run([str(TOOL), *t.tool_args(), "version"],
                       capture_output=True, text=True, timeout=10)
    return r.returncode == 0 and t.proc_poll() is None


def test_garbage_on_storage_port(node):
    send(node, 7000, os.urandom(4096))
    send(node, 7000, struct.pack(">I", 0xFFFFFFF0) + b"x" * 100)
    reply = send(node, 7000, handshake("Another Cluster"))
    # The node answers with its own handshake, then closes.
    assert b"Garbage" in reply
    assert node.node.wait_for_log(
        "cluster name 'Another Cluster' is not ours")
    assert node.node.wait_for_log("closing inbound connection from")
    # A valid handshake then an envelope over the size limit (64 MiB).
    send(node, 7000,
         handshake("Garbage") + struct.pack(">I", 65 * 1024 * 1024))
    assert node.node.wait_for_log("internode_max_message_size")
    assert serving(node)


def test_garbage_on_admin_port(node):
    send(node, 7199, os.urandom(2048))
    send(node, 7199, struct.pack(">I", 0x7FFFFFFF))
    send(node, 7199, struct.pack(">I", 5) + b"\xff\xff\xff\xff\xff")
    assert node.node.wait_for_log("closing admin connection from")
    assert serving(node)


def listeners(port):
    """Local addresses listening on `port`, from /proc/net/tcp."""
    found = []
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        ip, p = local.split(":")
        if state == "0A" and int(p, 16) == port:
            found.append(socket.inet_ntoa(struct.pack("<I", int(ip, 16))))
    return found


def test_ports_bind_the_listen_address_not_a_wildcard(node):
    for port in (7000, 7199):
        found = listeners(port)
        assert node.addr in found
        assert "0.0.0.0" not in found
