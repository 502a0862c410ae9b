"""Native protocol v5 on the connection server (client/proto/server.c): the
DataStax driver's own v5 connection (segments, with and without LZ4), and
raw sockets speaking segments made with the driver's SegmentCodec for what
no driver sends (several envelopes in one segment, corrupt CRCs)."""
import io
import struct
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.protocol import QueryMessage, ResultMessage
from cassandra.segment import SegmentCodec

import test_cql_server as base
from test_cql_server import error_text, frame, query, server  # noqa: F401

try:
    import lz4.block  # noqa: F401
    HAVE_LZ4 = True
except ImportError:
    HAVE_LZ4 = False

STARTUP5 = frame(0x01, struct.pack(">H", 1) + struct.pack(">H", 11)
                 + b"CQL_VERSION" + struct.pack(">H", 5) + b"3.4.5",
                 version=5)


def qbody(text, flags=0, extra=b""):
    q = text.encode()
    return struct.pack(">i", len(q)) + q + struct.pack(">Hi", 1, flags) \
        + extra


def segments(data):
    buf = io.BytesIO()
    SegmentCodec().encode(buf, data)
    return buf.getvalue()


class Reader:
    """Reads v5 segments from a socket and yields envelopes."""

    def __init__(self, sock):
        self.sock, self.raw, self.env = sock, b"", b""
        self.codec = SegmentCodec()
        self.segments = 0  # segments decoded so far

    def _fill(self, n):
        while len(self.raw) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                return False
            self.raw += chunk
        return True

    def envelope(self):
        while True:
            if len(self.env) >= 9:
                (length,) = struct.unpack(">i", self.env[5:9])
                if len(self.env) >= 9 + length:
                    e, self.env = self.env[:9 + length], \
                        self.env[9 + length:]
                    version, flags, stream, opcode, _ = \
                        struct.unpack(">BBhBi", e[:9])
                    return version, stream, opcode, e[9:]
            if not self._fill(6):
                return None
            hdr = self.codec.decode_header(io.BytesIO(self.raw[:6]))
            if not self._fill(hdr.segment_length):
                return None
            seg = self.codec.decode(io.BytesIO(self.raw[6:]), hdr)
            self.raw = self.raw[hdr.segment_length:]
            self.segments += 1
            self.env += seg.payload


def v5_socket(s):
    sock = s.raw()
    sock.sendall(STARTUP5)
    # READY itself is not in a segment: the switch comes after it
    version, stream, opcode, _ = base.read_frame(sock)
    assert (version, opcode) == (0x85, 0x02)
    return sock, Reader(sock)


@pytest.mark.parametrize("compression", [False, True])
def test_the_driver_speaks_v5_with_segments(server, compression):
    if compression and not HAVE_LZ4:
        pytest.skip("python3-lz4 is not installed")
    s = server()
    c = s.connect(version=5, compression=compression)
    assert c.protocol_version == 5
    assert c._is_checksumming_enabled
    assert (c.compressor is not None) == compression
    assert isinstance(query(c, "VOID"), ResultMessage)
    # a reply of 300 KB: one envelope in three segments
    r = query(c, "ROWS 300000")
    assert len(r.parsed_rows[0][0]) == 300000
    assert query(c, "USE ks").new_keyspace == "ks"
    assert query(c, "KEYSPACE").parsed_rows[0][0] == "ks"
    # the v5 keyspace flag names the keyspace of one request only
    r = c.wait_for_response(QueryMessage("KEYSPACE", ConsistencyLevel.ONE,
                                         keyspace="other"), timeout=5)
    assert r.parsed_rows[0][0] == "other"
    assert query(c, "KEYSPACE").parsed_rows[0][0] == "ks"
    # a request over 128 KiB: split by the driver, joined by the server
    big = QueryMessage("VOID", ConsistencyLevel.ONE)
    big.query_params = [b"x" * 200000]
    assert isinstance(c.wait_for_response(big, timeout=5), ResultMessage)
    seen = []
    c.register_watchers({"SCHEMA_CHANGE": seen.append}, register_timeout=5)
    other = s.connect(version=5, compression=compression)
    query(other, "EVENT")
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.02)
    assert seen and seen[0]["table"] == "t"
    c.close()
    other.close()
    assert s.stop()["inflight_bytes"] == "0"


def test_several_envelopes_in_one_segment_and_back_pressure(server):
    s = server("--max-requests", "4")
    sock, reader = v5_socket(s)
    # 50 slow queries in one self-contained segment: read 4 at a time
    envs = b"".join(frame(0x07, qbody("SLOW 10"), version=5, stream=i)
                    for i in range(50))
    sock.sendall(segments(envs))
    streams = set()
    for _ in range(50):
        version, stream, opcode, _ = reader.envelope()
        assert (version, opcode) == (0x85, 0x08)
        streams.add(stream)
    assert streams == set(range(50))
    # segments cut anywhere are put back together
    data = segments(frame(0x07, qbody("VOID"), version=5, stream=77))
    for b in data:
        sock.sendall(bytes([b]))
    assert reader.envelope()[1:3] == (77, 0x08)
    assert s.stop()["inflight_bytes"] == "0"


def test_replies_of_one_turn_share_a_segment(server):
    # 50 quick queries in one segment are answered in one turn of the
    # loop: their replies go out packed, not one segment each (each
    # segment costs a driver two checksums)
    s = server()
    sock, reader = v5_socket(s)
    envs = b"".join(frame(0x07, qbody("VOID"), version=5, stream=i)
                    for i in range(50))
    sock.sendall(segments(envs))
    streams = set()
    for _ in range(50):
        version, stream, opcode, _ = reader.envelope()
        assert (version, opcode) == (0x85, 0x08)
        streams.add(stream)
    assert streams == set(range(50))
    assert reader.segments <= 5, reader.segments
    assert s.stop()["inflight_bytes"] == "0"


@pytest.mark.parametrize("where", ["header", "payload"])
def test_a_corrupt_crc_closes_the_connection(server, where):
    s = server()
    sock, reader = v5_socket(s)
    data = bytearray(segments(frame(0x07, qbody("VOID"), version=5,
                                    stream=5)))
    data[1 if where == "header" else 10] ^= 0x04
    sock.sendall(bytes(data))
    version, stream, opcode, body = reader.envelope()
    assert (version, opcode) == (0x85, 0x00)
    code, text = error_text(body)
    assert code == 0x000A
    assert "Invalid CRC in segment " + where in text
    base.assert_closed(sock)
    assert int(s.stop()["protocol_errors"]) == 1


def test_v5_envelope_rules(server):
    s = server()
    # an envelope of another version on a v5 connection
    sock, reader = v5_socket(s)
    sock.sendall(segments(frame(0x07, qbody("VOID"), version=4, stream=2)))
    _, _, opcode, body = reader.envelope()
    assert opcode == 0x00
    assert "Invalid message version. Got 4" in error_text(body)[1]
    base.assert_closed(sock)
    # the envelope compression flag belongs to v4
    sock, reader = v5_socket(s)
    sock.sendall(segments(frame(0x07, qbody("VOID"), version=5, flags=1)))
    _, _, opcode, body = reader.envelope()
    assert "protocol v5 compresses segments" in error_text(body)[1]
    base.assert_closed(sock)
    # OPTIONS before STARTUP are plain envelopes, SUPPORTED lists v5
    sock = s.raw()
    sock.sendall(frame(0x05, version=5))
    version, _, opcode, body = base.read_frame(sock)
    assert (version, opcode) == (0x85, 0x06)
    assert b"5/v5" in body
    sock.sendall(STARTUP5)
    assert base.read_frame(sock)[2] == 0x02
    reader = Reader(sock)
    sock.sendall(segments(frame(0x07, qbody("VOID"), version=5, stream=4)))
    assert reader.envelope()[1:3] == (4, 0x08)
