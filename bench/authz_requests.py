#!/usr/bin/python3
"""The cost of authentication and authorization per request.

Two 1-node clusters side by side (BENCH_IP, default 127.0.108.1, and the
next address; private CASSINI_HOMEs): one with AllowAllAuthenticator and
AllowAllAuthorizer (both off, the reference), one with
PasswordAuthenticator and CassandraAuthorizer, where the load's role (not
a superuser) reads through a SELECT grant on the keyspace, so every
request is checked against the cached permissions (table -> keyspace).
The load: single-row SELECTs over one raw connection with 64 requests in
flight, a fixed number of requests per run; ROUNDS runs on each node,
interleaved and alternating which goes first, so load from elsewhere on a
shared machine hits both alike; the figure is requests per second over
all runs, and the ratio. Also one read of the cache miss: the first
request of a freshly logged-in role.

Usage: flock /tmp/cassini-tests.lock /usr/bin/python3 bench/authz_requests.py
(CASSINI_BIN_DIR: a build directory, default build/dev; AUTHZ_BENCH_ROUNDS,
default 6)
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
IP2 = IP.rsplit(".", 1)[0] + "." + str(int(IP.rsplit(".", 1)[1]) + 1)
ROUNDS = int(os.environ.get("AUTHZ_BENCH_ROUNDS", "6"))
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
    def __init__(self, ip, user=None, pw=None):
        self.s = socket.create_connection((ip, 9042), timeout=30)
        self.buf = b""
        self.s.sendall(frame(1, struct.pack(">H", 1) + st("CQL_VERSION") +
                             st("3.0.0")))
        op, _ = self.read()
        if user is None:
            assert op == 0x02, op  # READY: no authenticator
            return
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


def setup(name, ip, secure):
    """A started node; (env, its load connection, first request's time)."""
    env = dict(os.environ,
               CASSINI_HOME=tempfile.mkdtemp(prefix="authz-bench-"),
               CASSINI_BIN_DIR=os.environ.get("CASSINI_BIN_DIR",
                                              SRC + "/build/dev"))
    conf = ["-c", "superuser_setup_delay=300ms"]
    if secure:
        conf += ["-c", "authenticator=PasswordAuthenticator",
                 "-c", "authorizer=CassandraAuthorizer"]
    run(env, "create", name, "-n", "1", "--base-ip", ip, *conf)
    envs.append((env, name))
    run(env, "start")
    for _ in range(300):
        try:
            admin = Conn(ip, b"cassandra", b"cassandra") if secure \
                else Conn(ip)
            break
        except (OSError, AssertionError):
            time.sleep(0.3)
    ok(admin, "CREATE KEYSPACE b WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    ok(admin, "CREATE TABLE b.t (k int PRIMARY KEY, v int)")
    ok(admin, "INSERT INTO b.t (k, v) VALUES (1, 1)")
    if secure:
        ok(admin, "CREATE ROLE loader WITH PASSWORD = 'pw' AND LOGIN = true")
        ok(admin, "GRANT SELECT ON KEYSPACE b TO loader")
        c = Conn(ip, b"loader", b"pw")
    else:
        c = Conn(ip)
    t0 = time.perf_counter()
    op, body = c.query("SELECT v FROM b.t WHERE k = 1")
    first = time.perf_counter() - t0
    assert op == 0x08, body
    return env, c, first


def load(c):
    """Seconds for N SELECTs, DEPTH in flight."""
    frames = [query_frame("SELECT v FROM b.t WHERE k = 1", i + 1)
              for i in range(DEPTH)]
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
    return time.perf_counter() - t0


envs = []
try:
    env_off, off, first_off = setup("authzoff", IP, False)
    env_on, on, first_on = setup("authzon", IP2, True)
    t = {"off": 0.0, "on": 0.0}
    for r in range(ROUNDS):
        for side in (("off", "on") if r % 2 == 0 else ("on", "off")):
            t[side] += load(off if side == "off" else on)
finally:
    for env, name in envs:
        run(env, "-C", name, "remove", check=False)
rate_off = N * ROUNDS / t["off"]
rate_on = N * ROUNDS / t["on"]
print(f"AllowAllAuthenticator + AllowAllAuthorizer: {rate_off:,.0f} SELECT/s "
      f"({ROUNDS} x {N:,}, {DEPTH} in flight, interleaved); first request "
      f"{first_off * 1000:.2f} ms")
print(f"PasswordAuthenticator + CassandraAuthorizer: {rate_on:,.0f} SELECT/s; "
      f"first request (permissions read into the cache) "
      f"{first_on * 1000:.2f} ms")
print(f"ratio: {rate_on / rate_off:.3f}")
