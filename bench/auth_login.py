#!/usr/bin/python3
"""The cost of a PasswordAuthenticator login, and whether logins stall the
event loop.

Starts a 1-node cluster (127.0.91.1, or BENCH_IP; private CASSINI_HOME) with
PasswordAuthenticator and waits for the default superuser; then reports
one bcrypt check at cost 10 in this process (the system's libcrypt, the
same code the node runs), the AUTH_RESPONSE -> AUTH_SUCCESS time of 20
sequential logins over a raw socket, the whole of 20 new
authenticated connections (TCP connect, STARTUP, AUTHENTICATE,
AUTH_RESPONSE, AUTH_SUCCESS), and the latency of a query on a
logged-in connection alone and while 8 threads log in in a loop (the
bcrypt work runs on the node's auth workers, not on its loop).

Usage: flock /tmp/cassini-tests.lock /usr/bin/python3 bench/auth_login.py
(CASSINI_BIN_DIR: a build directory, default build/dev)
"""
import ctypes, os, socket, struct, subprocess, sys, tempfile, time, threading
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
env = dict(os.environ, CASSINI_HOME=tempfile.mkdtemp(prefix="auth-bench-"),
           CASSINI_BIN_DIR=os.environ.get("CASSINI_BIN_DIR", SRC + "/build/dev"))
def run(*a, check=True):
    r = subprocess.run(["/usr/bin/python3", SRC + "/scripts/cluster.py", *a], env=env, capture_output=True, text=True, timeout=180)
    if check and r.returncode: print(r.stdout, r.stderr); sys.exit(1)
IP = os.environ.get("BENCH_IP", "127.0.91.1")
def frame(op, body, stream=1): return struct.pack(">BBhBi", 4, 0, stream, op, len(body)) + body
def rd(s):
    h = b""
    while len(h) < 9: h += s.recv(9 - len(h))
    _, _, _, op, n = struct.unpack(">BBhBi", h); b = b""
    while len(b) < n: b += s.recv(n - len(b))
    return op, b
def st(x): x = x.encode(); return struct.pack(">H", len(x)) + x
def login(user, pw):
    s = socket.create_connection((IP, 9042), timeout=30)
    s.sendall(frame(1, struct.pack(">H", 1) + st("CQL_VERSION") + st("3.0.0"))); rd(s)
    t = b"\0" + user + b"\0" + pw
    t0 = time.perf_counter(); s.sendall(frame(0x0F, struct.pack(">i", len(t)) + t)); op, _ = rd(s); dt = time.perf_counter() - t0
    return s, op, dt
run("create", "meas", "-n", "1", "--base-ip", IP, "-c", "authenticator=PasswordAuthenticator", "-c", "superuser_setup_delay=300ms")
run("start")
try:
    for _ in range(200):
        try:
            s, op, _ = login(b"cassandra", b"cassandra"); s.close()
            if op == 0x10: break
        except OSError: pass
        time.sleep(0.3)
    lib = ctypes.CDLL("libcrypt.so.1"); lib.crypt.restype = ctypes.c_char_p
    t0 = time.perf_counter()
    for _ in range(10): lib.crypt(b"cassandra", b"$2a$10$H46haNkcbxlbamyj0OYZr.v4e5L08WTiQ1scrTs9Q3NYy.6B..x4O")
    bc = (time.perf_counter() - t0) / 10
    ds = []
    for _ in range(20):
        s, op, dt = login(b"cassandra", b"cassandra"); assert op == 0x10; s.close(); ds.append(dt)
    ds.sort()
    cs = []
    for _ in range(20):
        t0 = time.perf_counter(); s, op, _ = login(b"cassandra", b"cassandra"); cs.append(time.perf_counter() - t0); assert op == 0x10; s.close()
    cs.sort()
    print(f"bcrypt cost 10 in-process (libcrypt, python ctypes): {bc*1000:.1f} ms")
    print(f"AUTH_RESPONSE -> AUTH_SUCCESS, 20 sequential logins: median {ds[10]*1000:.1f} ms, max {ds[-1]*1000:.1f} ms")
    print(f"a new authenticated connection (connect .. AUTH_SUCCESS), 20 sequential: median {cs[10]*1000:.1f} ms, max {cs[-1]*1000:.1f} ms; median / bcrypt = {cs[10]/bc:.2f}")
    # the loop is not blocked: query latency on a logged-in connection during 8 concurrent logins
    s, op, _ = login(b"cassandra", b"cassandra")
    q = b"SELECT release_version FROM system.local"
    def query():
        t0 = time.perf_counter(); s.sendall(frame(7, struct.pack(">i", len(q)) + q + struct.pack(">HB", 1, 0), 5)); rd(s); return time.perf_counter() - t0
    base = sorted(query() for _ in range(20))[10]
    stop = False
    def storm():
        while not stop:
            c, _, _ = login(b"cassandra", b"cassandra"); c.close()
    ths = [threading.Thread(target=storm) for _ in range(8)]
    [t.start() for t in ths]
    time.sleep(0.5)
    during = sorted(query() for _ in range(40))
    stop = True; [t.join() for t in ths]
    print(f"query latency on a logged-in connection: median {base*1000:.2f} ms alone, median {during[20]*1000:.2f} ms / max {during[-1]*1000:.2f} ms during 8 concurrent login loops")
finally:
    run("-C", "meas", "remove", check=False)
