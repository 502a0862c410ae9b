#!/usr/bin/python3
"""The cost of CassandraAuthorizer's per-request checks.

Runs the same load twice on a 1-node cluster (127.0.108.1, or BENCH_IP; private
CASSINI_HOME), PasswordAuthenticator both times: with AllowAllAuthorizer,
then with CassandraAuthorizer, where the load's role (not a superuser)
reads through a SELECT grant on the keyspace, so every request is checked
against the cached permissions (table -> keyspace). The load: single-row
SELECTs over one raw connection with 64 requests in flight, for a fixed
number of requests; the figure is requests per second, and the ratio of
the two runs. Also one read of the cache miss: the first request of a
freshly logged-in role.

Usage: flock /tmp/cassini-tests.lock /usr/bin/python3 bench/authz_requests.py
(CASSINI_BIN_DIR: a build directory, default build/dev)
"""
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IP = os.environ.get("BENCH_IP", "127.0.108.1")
N = int(os.environ.get("AUTHZ_BENCH_REQUESTS", "200000"))
DEPTH = 64


def run(env, *a, check=True):
    r = subprocess.run(["/usr/bin/python3", SRC + "/scripts/cluster.py", *a],
                       env=env, capture_output=True, text=True, timeout=180)
    if check and r.returncode:
        print(r.stdout, r.stderr)
        sys.exit(1)


def frame(op, body, stream=1):
    return struct.pack(">BBhBi", 4, 0, stream, op, len(body)) + body


class Conn:
    def __init__(self, user, pw):
        self.s = socket.create_connection((IP, 9042), timeout=30)
        self.buf = b""
        self.s.sendall(frame(1, struct.pack(">H", 1) + st("CQL_VERSION") +
                             st("3.0.0")))
        self.read()
        t = b"\0" + user + b"\0" + pw
        self.s.sendall(frame(0x0F, struct.pack(">i", len(t)) + t))
        op, body = self.read()
        assert op == 0x10, body

    def read(self):
        while len(self.buf) < 9 or \
                len(self.buf) < 9 + struct.unpack(">i", self.buf[5:9])[0]:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise OSError("closed")
            self.buf += chunk
        n = struct.unpack(">i", self.buf[5:9])[0]
        op, body = self.buf[4], self.buf[9:9 + n]
        self.buf = self.buf[9 + n:]
        return op, body

    def query(self, q, stream=1):
        self.s.sendall(query_frame(q, stream))
        return self.read()


def st(x):
    x = x.encode()
    return struct.pack(">H", len(x)) + x


def query_frame(q, stream):
    q = q.encode()
    return frame(0x07, struct.pack(">i", len(q)) + q + struct.pack(">HB", 1, 0),
                 stream)


def ok(c, q):
    op, body = c.query(q)
    assert op == 0x08, (q, body)


def measure(authorizer):
    env = dict(os.environ,
               CASSINI_HOME=tempfile.mkdtemp(prefix="authz-bench-"),
               CASSINI_BIN_DIR=os.environ.get("CASSINI_BIN_DIR",
                                              SRC + "/build/dev"))
    run(env, "create", "authzb", "-n", "1", "--base-ip", IP,
        "-c", "authenticator=PasswordAuthenticator",
        "-c", f"authorizer={authorizer}",
        "-c", "superuser_setup_delay=300ms")
    run(env, "start")
    try:
        for _ in range(300):
            try:
                admin = Conn(b"cassandra", b"cassandra")
                break
            except (OSError, AssertionError):
                time.sleep(0.3)
        ok(admin, "CREATE KEYSPACE b WITH replication = {'class': "
                  "'SimpleStrategy', 'replication_factor': 1}")
        ok(admin, "CREATE TABLE b.t (k int PRIMARY KEY, v int)")
        ok(admin, "INSERT INTO b.t (k, v) VALUES (1, 1)")
        ok(admin, "CREATE ROLE loader WITH PASSWORD = 'pw' AND LOGIN = true")
        if authorizer == "CassandraAuthorizer":
            ok(admin, "GRANT SELECT ON KEYSPACE b TO loader")
        c = Conn(b"loader", b"pw")
        t0 = time.perf_counter()
        op, body = c.query("SELECT v FROM b.t WHERE k = 1")
        first = time.perf_counter() - t0
        assert op == 0x08, body
        frames = [query_frame("SELECT v FROM b.t WHERE k = 1", i + 1)
                  for i in range(DEPTH)]
        best = 0
        for _ in range(3):
            sent = done = 0
            t0 = time.perf_counter()
            while sent < DEPTH:
                c.s.sendall(frames[sent])
                sent += 1
            while done < N:
                op, body = c.read()
                assert op == 0x08, body
                done += 1
                if sent < N:
                    c.s.sendall(frames[sent % DEPTH])
                    sent += 1
            best = max(best, N / (time.perf_counter() - t0))
        return best, first
    finally:
        run(env, "-C", "authzb", "remove", check=False)


allow, first_a = measure("AllowAllAuthorizer")
cass, first_c = measure("CassandraAuthorizer")
print(f"AllowAllAuthorizer:  {allow:,.0f} SELECT/s (best of 3 x {N:,}, "
      f"{DEPTH} in flight); first request {first_a * 1000:.2f} ms")
print(f"CassandraAuthorizer: {cass:,.0f} SELECT/s; first request (permissions "
      f"read into the cache) {first_c * 1000:.2f} ms")
print(f"ratio: {cass / allow:.3f}")
