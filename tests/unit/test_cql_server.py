"""The CQL connection server (client/proto/server.c) against the DataStax driver's
own connection class, plus raw sockets for what no driver would send."""
import os
import pathlib
import socket
import struct
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel, InvalidRequest
from cassandra.cluster import DefaultConnection
from cassandra.connection import (DefaultEndPoint, ProtocolError,
                                  ProtocolVersionUnsupported)
from cassandra.protocol import QueryMessage, RegisterMessage, ResultMessage

BUILD = pathlib.Path(os.environ["CASSINI_BUILD_DIR"])
DefaultConnection.initialize_reactor()  # Cluster() normally does this
SERVER = BUILD / "tests" / "unit" / "cql_test_server"


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([str(SERVER), *args],
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.port = int(line.split()[1])

    def connect(self, version=4, compression=True):
        return DefaultConnection.factory(
            DefaultEndPoint("127.0.0.1", self.port), 5,
            protocol_version=version, compression=compression)

    def raw(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        return s

    def stop(self):
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=10)
        assert self.proc.returncode == 0, err
        # The last line holds the counters; earlier lines are the log.
        return dict(kv.split("=") for kv in err.splitlines()[-1].split())


@pytest.fixture
def server():
    servers = []

    def start(*args):
        s = Server(*args)
        servers.append(s)
        return s

    yield start
    for s in servers:
        if s.proc.poll() is None:
            s.proc.kill()


def query(conn, text):
    return conn.wait_for_response(QueryMessage(text, ConsistencyLevel.ONE),
                                  timeout=5)


def test_versions_above_5_are_refused_so_drivers_downgrade(server):
    s = server()
    for v in (66, 65, 6):
        with pytest.raises((ProtocolVersionUnsupported, ProtocolError)) as e:
            s.connect(version=v)
        assert "unsupported protocol version" in str(e.value).lower() or \
            isinstance(e.value, ProtocolVersionUnsupported)
    for v in (3, 4, 5):
        c = s.connect(version=v)
        assert isinstance(query(c, "VOID"), ResultMessage)
        c.close()
    stats = s.stop()
    assert stats["inflight_bytes"] == "0"


def test_lz4_is_negotiated_and_large_rows_round_trip(server):
    s = server()
    c = s.connect()
    assert c.compressor is not None, "the driver should have negotiated lz4"
    r = query(c, "ROWS 200000")
    assert len(r.parsed_rows[0][0]) == 200000
    assert r.parsed_rows[0][0][:3] == "abc"
    c.close()
    c = s.connect(compression=False)
    assert c.compressor is None
    assert len(query(c, "ROWS 70000").parsed_rows[0][0]) == 70000
    c.close()


def test_errors_use_and_slow_replies_keep_stream_order(server):
    s = server()
    c = s.connect()
    # (wait_for_response defuncts its own connection on any error reply;
    # the Session layer does not, so ask for the error as a value.)
    ok, err = c.wait_for_responses(QueryMessage("NOPE", ConsistencyLevel.ONE),
                                   timeout=5, fail_on_error=False)[0]
    assert not ok
    with pytest.raises(InvalidRequest, match="unknown test statement: NOPE"):
        raise err
    assert not c.is_defunct
    assert query(c, "USE ks").new_keyspace == "ks"
    assert query(c, "KEYSPACE").parsed_rows[0][0] == "ks"
    # A slow request does not hold up a fast one on the same connection.
    c.send_msg(QueryMessage("SLOW 300", ConsistencyLevel.ONE),
               c.get_request_id(), lambda *_: None)
    t0 = time.monotonic()
    query(c, "VOID")
    assert time.monotonic() - t0 < 0.3
    time.sleep(0.4)
    c.close()


def test_register_and_events(server):
    s = server()
    listener = s.connect()
    seen = []
    listener.register_watchers({"SCHEMA_CHANGE": seen.append},
                               register_timeout=5)
    other = s.connect()
    query(other, "EVENT")
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.02)
    assert seen and seen[0]["table"] == "t"
    with pytest.raises(Exception):
        listener.wait_for_response(RegisterMessage(["NO_SUCH_EVENT"]),
                                   timeout=5)


def frame(opcode, body=b"", version=4, stream=1, flags=0):
    return struct.pack(">BBhBi", version, flags, stream, opcode, len(body)) \
        + body


def read_frame(sock):
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        if not chunk:
            return None
        head += chunk
    version, flags, stream, opcode, length = struct.unpack(">BBhBi", head)
    body = bytearray()
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            return None
        body += chunk
    return version, stream, opcode, bytes(body)


def error_text(body):
    code, n = struct.unpack(">iH", body[:6])
    return code, body[6:6 + n].decode()


def assert_closed(sock):
    sock.settimeout(5)
    assert sock.recv(1) == b""


STARTUP = frame(0x01, struct.pack(">H", 1) + struct.pack(">H", 11)
                + b"CQL_VERSION" + struct.pack(">H", 5) + b"3.4.5")


def test_nothing_but_options_and_startup_before_startup(server):
    s = server()
    sock = s.raw()
    sock.sendall(frame(0x05))  # OPTIONS is fine
    assert read_frame(sock)[2] == 0x06
    q = struct.pack(">i", 4) + b"VOID" + struct.pack(">HB", 1, 0)
    sock.sendall(frame(0x07, q, stream=9))
    version, stream, opcode, body = read_frame(sock)
    assert (version, stream, opcode) == (0x84, 9, 0x00)
    assert error_text(body) == (0x000A, "Unexpected message QUERY, "
                                "expecting STARTUP or OPTIONS")
    assert_closed(sock)


def test_garbage_oversized_and_wrong_version_frames(server):
    s = server("--max-frame", "1024")
    sock = s.raw()
    sock.sendall(frame(0x07, b"", stream=3)[:5] + struct.pack(">i", 4096))
    version, stream, opcode, body = read_frame(sock)
    assert stream == 3
    assert error_text(body) == (0x000A, "Request is too big: length 4096 "
                                "exceeds maximum allowed length 1024.")
    assert_closed(sock)

    sock = s.raw()
    sock.sendall(b"\x42\x00\x00\x07\x05\x00\x00\x00\x00")
    version, stream, opcode, body = read_frame(sock)
    assert version == 0x84 and stream == 7
    assert error_text(body)[1] == ("Invalid or unsupported protocol version "
                                   "(66); supported versions are (3/v3, 4/v4, 5/v5)")
    assert_closed(sock)

    sock = s.raw()
    sock.sendall(bytes(range(256)) * 4)
    assert read_frame(sock)[2] == 0x00  # an ERROR, then closed
    assert_closed(sock)

    # A truncated body inside a well-framed STARTUP.
    sock = s.raw()
    sock.sendall(frame(0x01, b"\x00\x05\x00\x02ab"))
    assert error_text(read_frame(sock)[3])[0] == 0x000A
    assert_closed(sock)

    # The server is still serving.
    c = s.connect()
    assert isinstance(query(c, "VOID"), ResultMessage)
    stats = s.stop()
    assert int(stats["protocol_errors"]) >= 4


def test_startup_validation(server):
    s = server()
    sock = s.raw()
    body = struct.pack(">H", 2) + struct.pack(">H", 11) + b"CQL_VERSION" \
        + struct.pack(">H", 5) + b"3.4.5" + struct.pack(">H", 11) \
        + b"COMPRESSION" + struct.pack(">H", 6) + b"snappy"
    sock.sendall(frame(0x01, body))
    assert error_text(read_frame(sock)[3]) == \
        (0x000A, "Unknown compression algorithm: snappy")
    sock = s.raw()
    sock.sendall(frame(0x01, struct.pack(">H", 0)))
    assert error_text(read_frame(sock)[3])[1] == \
        "Missing value CQL_VERSION in STARTUP message"
    sock = s.raw()
    sock.sendall(STARTUP)
    assert read_frame(sock)[2] == 0x02  # READY
    sock.sendall(STARTUP)
    assert "already initialized" in error_text(read_frame(sock)[3])[1]


def test_connection_limit_and_handshake_timeout(server):
    s = server("--max-connections", "2", "--handshake-ms", "300")
    a, b = s.connect(), s.connect()
    sock = s.raw()
    assert_closed(sock)  # the third is refused
    a.close()
    time.sleep(0.2)
    lazy = s.raw()      # connects, never says STARTUP
    lazy.settimeout(5)
    t0 = time.monotonic()
    assert lazy.recv(1) == b""
    assert time.monotonic() - t0 < 4
    b.close()
    stats = s.stop()
    assert stats["refused"] == "1"


def test_back_pressure_with_many_requests_in_flight(server):
    s = server("--max-requests", "4")
    sock = s.raw()
    sock.sendall(STARTUP)
    assert read_frame(sock)[2] == 0x02
    # 50 slow queries pipelined: the server reads 4 at a time, yet every
    # one is answered.
    body = struct.pack(">i", 7) + b"SLOW 20" + struct.pack(">HB", 1, 0)
    sock.sendall(b"".join(frame(0x07, body, stream=i) for i in range(50)))
    streams = set()
    for _ in range(50):
        version, stream, opcode, _ = read_frame(sock)
        assert opcode == 0x08
        streams.add(stream)
    assert streams == set(range(50))
    stats = s.stop()
    assert stats["inflight_bytes"] == "0"


def test_client_closing_with_requests_in_flight(server):
    s = server()
    sock = s.raw()
    sock.sendall(STARTUP)
    read_frame(sock)
    body = struct.pack(">i", 8) + b"SLOW 200" + struct.pack(">HB", 1, 0)
    sock.sendall(b"".join(frame(0x07, body, stream=i) for i in range(10)))
    sock.close()
    time.sleep(0.5)  # replies arrive for a closed connection: dropped
    c = s.connect()
    assert isinstance(query(c, "VOID"), ResultMessage)
    stats = s.stop()
    assert stats["inflight_bytes"] == "0"


def test_a_reader_slower_than_the_replies_gets_every_byte(server):
    # Replies are written once per loop turn; what the kernel does not take
    # waits for the socket to drain, and past the output high-water mark
    # (4 MiB) the server stops reading requests until it does.
    s = server()
    sock = s.raw()
    sock.sendall(STARTUP)
    read_frame(sock)
    n, size = 12, 1 << 20
    q = b"ROWS %d" % size
    body = struct.pack(">i", len(q)) + q + struct.pack(">HB", 1, 0)
    sock.sendall(b"".join(frame(0x07, body, stream=i) for i in range(n)))
    time.sleep(0.3)  # the server fills the socket while nobody reads
    value = bytes(ord("a") + i % 26 for i in range(size))
    for i in range(n):
        _, stream, opcode, reply = read_frame(sock)
        assert (stream, opcode) == (i, 0x08)
        assert reply.endswith(struct.pack(">i", size) + value)
    # The connection still answers after draining.
    q = struct.pack(">i", 4) + b"VOID" + struct.pack(">HB", 1, 0)
    sock.sendall(frame(0x07, q, stream=99))
    assert read_frame(sock)[1:3] == (99, 0x08)
    stats = s.stop()
    assert stats["inflight_bytes"] == "0"


def test_frames_cut_anywhere_are_put_back_together(server):
    # Reads land in one buffer shared by every connection; a frame that
    # arrives in pieces (or behind one held back by flow control) must be
    # kept by its own connection. Two connections interleave their pieces.
    s = server("--max-requests", "2")
    socks, pieces = [s.raw(), s.raw()], []
    for q in (b"VOID", b"SLOW 5"):
        body = struct.pack(">i", len(q)) + q + struct.pack(">HB", 1, 0)
        data = STARTUP + b"".join(frame(0x07, body, stream=i)
                                  for i in range(20))
        # Pieces of 1, 2, ... 13 bytes: headers and bodies both split.
        cut, i, w = [], 0, 1
        while i < len(data):
            cut.append(data[i:i + w])
            i += w
            w = w % 13 + 1
        pieces.append(cut)
    while any(pieces):
        for sock, cut in zip(socks, pieces):
            if cut:
                sock.sendall(cut.pop(0))
        time.sleep(0.001)
    for sock in socks:
        assert read_frame(sock)[2] == 0x02  # READY
        streams = [read_frame(sock)[1:3] for _ in range(20)]
        assert sorted(streams) == [(i, 0x08) for i in range(20)]
    stats = s.stop()
    assert stats["inflight_bytes"] == "0"


def test_idle_connections_are_closed_and_busy_ones_kept(server):
    # native_transport_idle_timeout: requests push the deadline back.
    s = server("--idle-ms", "400")
    busy, idle = s.raw(), s.raw()
    for sock in (busy, idle):
        sock.sendall(STARTUP)
        assert read_frame(sock)[2] == 0x02
    q = struct.pack(">i", 4) + b"VOID" + struct.pack(">HB", 1, 0)
    start = time.monotonic()
    for i in range(12):  # 1.2 s of a request every 100 ms
        busy.sendall(frame(0x07, q, stream=i))
        assert read_frame(busy)[1:3] == (i, 0x08)
        time.sleep(0.1)
    assert read_frame(idle) is None  # closed by the server meanwhile
    assert time.monotonic() - start < 5
    busy.settimeout(10)
    assert read_frame(busy) is None  # and the busy one once it idles
