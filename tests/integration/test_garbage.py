"""Garbage on the storage and admin ports: random bytes, an oversized
length, a handshake from another cluster. Each is logged and the connection
closed; the node keeps serving. One node on 127.0.19.1, a block of its own:
suites run in parallel (it shared 127.0.3.1 with test_cql_node)."""
import os
import socket
import struct
import subprocess

import pytest

from conftest import BUILD_DIR, Node, default_yaml

TOOL = BUILD_DIR / "node" / "cassini-tool"
ADDR = "127.0.19.1"


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path / "node1", default_yaml(
        listen_address=ADDR,
        seed_provider="[{class_name: SimpleSeedProvider, parameters: "
                      "[{seeds: '127.0.19.1'}]}]",
        cluster_name="'Garbage'"))
    n.start()
    assert n.wait_for_log("cassinid ready")
    yield n
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


def send(port, data, wait_close=True):
    s = socket.create_connection((ADDR, port), timeout=10)
    s.sendall(data)
    got = b""
    if wait_close:
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        except (ConnectionResetError, socket.timeout):
            pass
    s.close()
    return got


def serving(node):
    r = subprocess.run([str(TOOL), "-h", ADDR, "version"],
                       capture_output=True, text=True, timeout=10)
    return r.returncode == 0 and node.proc.poll() is None


def test_garbage_on_storage_port(node):
    send(7000, os.urandom(4096))
    send(7000, struct.pack(">I", 0xFFFFFFF0) + b"x" * 100)
    reply = send(7000, handshake("Another Cluster"))
    # The node answers with its own handshake, then closes.
    assert b"Garbage" in reply
    assert node.wait_for_log("cluster name 'Another Cluster' is not ours")
    assert node.wait_for_log("closing inbound connection from")
    # A valid handshake then an envelope over the size limit (64 MiB).
    send(7000, handshake("Garbage") + struct.pack(">I", 65 * 1024 * 1024))
    assert node.wait_for_log("internode_max_message_size")
    assert serving(node)


def test_garbage_on_admin_port(node):
    send(7199, os.urandom(2048))
    send(7199, struct.pack(">I", 0x7FFFFFFF))
    send(7199, struct.pack(">I", 5) + b"\xff\xff\xff\xff\xff")
    assert node.wait_for_log("closing admin connection from")
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
        assert ADDR in found
        assert "0.0.0.0" not in found
