"""The TLS handshake boundary on the client and storage ports: garbage
before a ClientHello, a truncated handshake, a connection half-closed in
the middle of one, random bytes after a completed handshake, a plaintext
CQL frame to a TLS-only port and a ClientHello to a plaintext one. Each is
answered by a closed connection (after an alert or an error frame at
most); a connection stuck mid-handshake does not hold up the others, and
the node then serves a good client (a driver query; for the storage port,
a second TLS node joining). With `optional: true` both kinds of client
still work on the one port after the garbage. Garbage frames of the
native protocol (requests before STARTUP, SASL PLAIN tokens that do not
parse, oversized lengths, random bytes) run both in plaintext and over
TLS against a node with PasswordAuthenticator. Addresses 127.0.97.1-12."""
import os
import socket
import ssl
import struct
import subprocess
import time

import pytest
from cassandra import AuthenticationFailed
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster, NoHostAvailable

from conftest import (BUILD_DIR, Node, default_yaml, seeds_yaml,
                      wait_all_normal)

TOOL = BUILD_DIR / "node" / "cassini-tool"
CQL, STORAGE = 9042, 7000


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True)


def sign(d, name, ips):
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text(
        "subjectAltName=" + ",".join(f"IP:{ip}" for ip in ips) + "\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem",
            "-CAkey", "ca.key", "-CAcreateserial", "-out", f"{name}.crt",
            "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    pem = d / f"{name}.pem"
    pem.write_text((d / f"{name}.key").read_text() +
                   (d / f"{name}.crt").read_text())
    return {"pem": pem, "key": d / f"{name}.key", "crt": d / f"{name}.crt"}


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=boundary-ca",
            cwd=d)
    out = {"ca": d / "ca.pem"}
    for i in (1, 3, 4, 10, 11, 12):
        out[i] = sign(d, f"n{i}", [f"127.0.97.{i}"])
    return out


def context(certs, me=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(certs["ca"]))
    ctx.check_hostname = False
    if me:
        ctx.load_cert_chain(str(me["crt"]), str(me["key"]))
    return ctx


def hello_bytes():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing)
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    data = outgoing.read()
    assert data[0] == 0x16 and len(data) > 100  # a handshake record
    return data


def options_frame():
    """A native protocol v4 OPTIONS request, in plaintext."""
    return struct.pack(">BBhBI", 4, 0, 1, 0x05, 0)


def drain(s, timeout=10):
    """Reads until the node closes; what it sent before. Fails when the
    connection stays open."""
    s.settimeout(timeout)
    got = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except (ConnectionResetError, ssl.SSLError, ssl.SSLEOFError):
        pass
    except socket.timeout:
        pytest.fail(f"the node kept the connection open ({len(got)} "
                    "bytes read)")
    finally:
        s.close()
    return got


def raw(ip, port, src=None):
    return socket.create_connection((ip, port), timeout=10,
                                    source_address=(src, 0) if src else None)


def half_close(s):
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the node closed first


def garbage_not_starting_a_record():
    g = bytearray(os.urandom(4096))
    g[0] = 0x42  # neither a TLS record (0x16) nor a CQL version
    return bytes(g)


def query(ip, ctx=None):
    c = Cluster([ip], protocol_version=4, ssl_context=ctx,
                connect_timeout=5)
    try:
        s = c.connect()
        return s.execute("SELECT key FROM system.local").one().key
    finally:
        c.shutdown()


def start_client_node(make_node, ip, options):
    section = "\n" + "".join(f"  {k}: {v}\n" for k, v in options.items())
    keys = {"listen_address": ip, "rpc_address": ip,
            "seed_provider": seeds_yaml(ip)}
    if options:
        keys["client_encryption_options"] = section
    n = make_node(default_yaml(**keys))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    return n


def test_client_port_tls_only(make_node, certs):
    ip = "127.0.97.1"
    n = start_client_node(make_node, ip, {"enabled": "true",
                                          "keystore": str(certs[1]["pem"])})
    hello = hello_bytes()
    # a connection stuck half-way through its handshake stays open while
    # a good client is served
    stuck = raw(ip, CQL)
    stuck.sendall(hello[:len(hello) // 2])
    assert query(ip, context(certs)) == "local"
    stuck.close()
    # garbage before a ClientHello: an alert at most, then closed
    s = raw(ip, CQL)
    s.sendall(garbage_not_starting_a_record() + hello)
    got = drain(s)
    assert not got or got[0] == 0x15, got[:16]  # a TLS alert record
    # a truncated handshake, half-closed: closed
    s = raw(ip, CQL)
    s.sendall(hello[:len(hello) // 2])
    half_close(s)
    drain(s)
    # half-closed before the first byte
    s = raw(ip, CQL)
    s.shutdown(socket.SHUT_WR)
    got = drain(s)
    assert not got or got[0] == 0x15, got[:16]
    # a plaintext CQL frame: no SUPPORTED in plaintext, closed
    s = raw(ip, CQL)
    s.sendall(options_frame())
    got = drain(s)
    assert b"CQL_VERSION" not in got
    # random bytes after a completed handshake: closed
    for junk in (garbage_not_starting_a_record(),
                 struct.pack(">BBhBI", 4, 0, 1, 0x07, 0x7FFFFFFF)):
        s = context(certs).wrap_socket(raw(ip, CQL))
        assert s.version()  # the handshake completed
        s.sendall(junk)
        drain(s)
    assert "TLS error with client" in n.log()
    assert n.proc.poll() is None
    assert query(ip, context(certs)) == "local"


def test_client_port_plaintext_refuses_tls(make_node, certs):
    ip = "127.0.97.2"
    n = start_client_node(make_node, ip, {})
    s = raw(ip, CQL)
    s.sendall(hello_bytes())
    got = drain(s)
    # at most a protocol error frame, never a TLS record
    assert not got or got[0] != 0x16, got[:16]
    s = raw(ip, CQL)
    s.sendall(garbage_not_starting_a_record())
    drain(s)
    assert n.proc.poll() is None
    assert query(ip) == "local"


def test_client_port_optional(make_node, certs):
    ip = "127.0.97.3"
    n = start_client_node(make_node, ip, {"enabled": "true",
                                          "optional": "true",
                                          "keystore": str(certs[3]["pem"])})
    hello = hello_bytes()
    stuck = raw(ip, CQL)
    stuck.sendall(hello[:len(hello) // 2])
    for junk in (garbage_not_starting_a_record(),
                 b"\x16" + os.urandom(4095), hello[:len(hello) // 2]):
        s = raw(ip, CQL)
        s.sendall(junk)
        half_close(s)
        drain(s)
    s = raw(ip, CQL)
    s.shutdown(socket.SHUT_WR)
    assert drain(s) == b""
    s = context(certs).wrap_socket(raw(ip, CQL))
    s.sendall(garbage_not_starting_a_record())
    drain(s)
    # both kinds of client, while the stuck one is still open
    assert query(ip, context(certs)) == "local"
    assert query(ip) == "local"
    stuck.close()
    assert n.proc.poll() is None


def internode(make_node, certs, i, seed):
    ip = f"127.0.97.{i}"
    enc = {"internode_encryption": "all", "keystore": certs[i]["pem"],
           "truststore": certs["ca"], "require_client_auth": "true",
           "require_endpoint_verification": "true"}
    n = make_node(default_yaml(
        listen_address=ip, rpc_address=ip, gossip_interval="200ms",
        seed_provider=seeds_yaml(seed),
        server_encryption_options="\n" + "".join(
            f"  {k}: {v}\n" for k, v in enc.items())), name=ip)
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), \
        n.log() + n.stderr_path.read_text()
    return n


def plaintext_handshake():
    """Cassini's internode handshake (protobuf, length-prefixed), sent
    without TLS: cluster name, partitioner, version, host id, dc, rack,
    address, port."""
    def pb(field, data):
        return bytes([field << 3 | 2, len(data)]) + data
    body = (pb(1, b"Integration") +
            pb(2, b"org.apache.cassandra.dht.Murmur3Partitioner") +
            bytes([3 << 3, 1]) + pb(4, b"0" * 36) + pb(5, b"dc1") +
            pb(6, b"rack1") + pb(7, socket.inet_aton("127.0.97.12")) +
            bytes([8 << 3, 0xD8, 0x36]))
    return struct.pack(">I", len(body)) + body


def test_storage_port_tls(make_node, certs):
    ip = "127.0.97.10"
    n = internode(make_node, certs, 10, ip)
    hello = hello_bytes()
    stuck = raw(ip, STORAGE)
    stuck.sendall(hello[:len(hello) // 2])
    s = raw(ip, STORAGE)
    s.sendall(garbage_not_starting_a_record() + hello)
    drain(s)
    s = raw(ip, STORAGE)
    s.sendall(hello[:len(hello) // 2])
    half_close(s)
    drain(s)
    # a plaintext handshake to the TLS-only port
    s = raw(ip, STORAGE, src="127.0.97.12")
    s.sendall(plaintext_handshake())
    assert b"Integration" not in drain(s)
    # random bytes, and an oversized frame, after a completed mutual
    # handshake from an address the certificate names
    for junk in (garbage_not_starting_a_record(),
                 struct.pack(">I", 0xFFFFFFF0) + b"x" * 100):
        s = context(certs, certs[12]).wrap_socket(
            raw(ip, STORAGE, src="127.0.97.12"))
        assert s.version()
        s.sendall(junk)
        drain(s)
    assert "TLS handshake with internode peer" in n.log()
    assert "closing inbound connection from" in n.log()
    assert n.proc.poll() is None
    # a good peer still joins over TLS, while the stuck one is open
    m = internode(make_node, certs, 11, ip)
    wait_all_normal([ip, "127.0.97.11"])
    stuck.close()
    r = subprocess.run([str(TOOL), "-h", ip, "version"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stdout + r.stderr
    assert m.proc.poll() is None and n.proc.poll() is None


# ---- garbage frames of the native protocol, in plaintext and over TLS ------

def frame(opcode, body, stream=1, flags=0, length=None):
    n = len(body) if length is None else length
    return struct.pack(">BBhBi", 4, flags, stream, opcode, n) + body


def read_frame(s):
    head = b""
    while len(head) < 9:
        chunk = s.recv(9 - len(head))
        if not chunk:
            return None
        head += chunk
    _, _, _, opcode, n = struct.unpack(">BBhBi", head)
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        assert chunk, "closed inside a frame"
        body += chunk
    return opcode, body


def error_of(reply):
    opcode, body = reply
    assert opcode == 0x00, reply  # ERROR
    code, n = struct.unpack(">iH", body[:6])
    return code, body[6:6 + n].decode()


def string(text):
    return struct.pack(">H", len(text)) + text.encode()


STARTUP = frame(0x01, struct.pack(">H", 1) + string("CQL_VERSION") +
                string("3.0.0"))


def auth_response(token, stream=1):
    return frame(0x0F, struct.pack(">i", len(token)) + token, stream)


def closed(s):
    """The node closed the connection (nothing more than EOF)."""
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


@pytest.fixture(scope="module")
def auth_node(tmp_path_factory, certs):
    """Optional TLS and PasswordAuthenticator on one node: both kinds of
    connection reach the same SASL exchange."""
    ip = "127.0.97.4"
    tls = {"enabled": "true", "optional": "true",
           "keystore": str(certs[4]["pem"])}
    n = Node(tmp_path_factory.mktemp("auth_node"), default_yaml(
        listen_address=ip, rpc_address=ip, seed_provider=seeds_yaml(ip),
        authenticator="PasswordAuthenticator",
        client_encryption_options="\n" + "".join(
            f"  {k}: {v}\n" for k, v in tls.items())))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=60), n.log()
    yield n
    n.kill()


@pytest.mark.parametrize("transport", ["plaintext", "tls"])
def test_native_garbage_frames(auth_node, certs, transport):
    ip = "127.0.97.4"

    def conn():
        s = raw(ip, CQL)
        return context(certs).wrap_socket(s) if transport == "tls" else s

    # a request before STARTUP
    s = conn()
    s.sendall(frame(0x07, struct.pack(">i", 1) + b"x" + b"\0\1\0"))
    assert error_of(read_frame(s)) == (
        0x000A, "Unexpected message QUERY, expecting STARTUP or OPTIONS")
    assert closed(s)
    s.close()
    # SASL PLAIN tokens that do not parse: each refused, the exchange
    # goes on; then anything but AUTH_RESPONSE ends it
    s = conn()
    s.sendall(STARTUP)
    assert read_frame(s)[0] == 0x03  # AUTHENTICATE
    for i, (token, message) in enumerate([
            (b"\0cassandra\0", "Password must not be null"),
            (b"cassandra\0pw", "Authentication ID must not be null"),
            (b"", "Password must not be null"),
            (b"a\0b\0c\0d", "Credential format error: username or "
                            "password is empty or contains NUL(\\0) "
                            "character")]):
        s.sendall(auth_response(token, stream=i + 1))
        assert error_of(read_frame(s)) == (0x0100, message)
    s.sendall(frame(0x42, b"", stream=9))
    assert error_of(read_frame(s)) == (
        0x000A, "Unexpected message 0x42, expecting SASL_RESPONSE")
    assert closed(s)
    s.close()
    # a token length past its frame, and a frame over the size limit
    s = conn()
    s.sendall(STARTUP)
    read_frame(s)
    s.sendall(frame(0x0F, struct.pack(">i", 0x7FFFFFF0) + b"abc"))
    assert error_of(read_frame(s))[0] == 0x000A
    s.close()
    s = conn()
    s.sendall(frame(0x07, b"", length=0x7FFFFFF0))
    code, message = error_of(read_frame(s))
    assert code == 0x000A and "Request is too big" in message, message
    assert closed(s)
    s.close()
    # random bytes after STARTUP
    s = conn()
    s.sendall(STARTUP)
    read_frame(s)
    s.sendall(garbage_not_starting_a_record())
    drain(s)
    # still serving: a real login attempt is checked against system_auth
    s = conn()
    s.sendall(STARTUP)
    read_frame(s)
    s.sendall(auth_response(b"\0nobody\0x"))
    assert error_of(read_frame(s)) == (
        0x0100, "Provided username nobody and/or password are incorrect")
    s.close()
    assert auth_node.proc.poll() is None


def test_the_python_driver_logs_in_over_tls(auth_node, certs):
    """PlainTextAuthProvider over ssl_context, both at once: the default
    superuser (made superuser_setup_delay, 10 s, after start) logs in over
    TLS; a wrong password is AuthenticationFailed."""
    ip = "127.0.97.4"

    def session(password):
        c = Cluster([ip], protocol_version=4, ssl_context=context(certs),
                    auth_provider=PlainTextAuthProvider("cassandra",
                                                        password),
                    connect_timeout=5)
        return c, c.connect()
    deadline = time.monotonic() + 60
    while True:
        try:
            c, s = session("cassandra")
            break
        except NoHostAvailable:
            assert time.monotonic() < deadline, auth_node.log()
            time.sleep(0.5)
    try:
        rows = [r for r in s.execute("SELECT ssl_enabled, username FROM "
                                     "system_views.clients")
                if r.username == "cassandra"]
        assert rows and all(r.ssl_enabled for r in rows), rows
    finally:
        c.shutdown()
    with pytest.raises(NoHostAvailable) as e:
        session("wrong")[0].shutdown()
    errors = list(e.value.errors.values())
    assert errors and isinstance(errors[0], AuthenticationFailed), errors
