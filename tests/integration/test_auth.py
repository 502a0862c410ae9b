"""PasswordAuthenticator and CassandraRoleManager on a real 2-node cluster
(127.0.90.x), through the DataStax driver's PlainTextAuthProvider and a raw
socket for the wire details: logins, refusals with Cassandra's messages,
role statements and LIST ROLES as Cassandra 4.1 answers them, a role made
on one node logging in on the other, and the default superuser's
replacement. No timing thresholds: waits are "until it happens" with a
ceiling that only guards against hanging."""
import ctypes
import shlex
import socket
import struct
import subprocess
import time

import pytest
from cassandra import AuthenticationFailed, InvalidRequest, Unauthorized
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import (EXEC_PROFILE_DEFAULT, Cluster,
                               ExecutionProfile, NoHostAvailable)
from cassandra.policies import WhiteListRoundRobinPolicy

from clusters import cluster_script, tool_run
from conftest import BUILD_DIR, SOURCE_DIR

BASE = "127.0.90."
N1, N2 = BASE + "1", BASE + "2"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    run = cluster_script(tmp_path_factory.mktemp("auth"))
    run("create", "auth", "-n", "2", "--base-ip", BASE,
        "-c", "gossip_interval=250ms",
        "-c", "authenticator=PasswordAuthenticator",
        "-c", "superuser_setup_delay=500ms")
    run("start")
    # the default superuser comes once the nodes see each other
    until(lambda: can_login(N1, "cassandra", "cassandra"),
          "the default superuser can log in")
    yield run
    run("-C", "auth", "remove", check=False)


def until(pred, what, ceiling=90):
    deadline = time.monotonic() + ceiling
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.3)
    pytest.fail(f"never happened: {what}")


def connect(ip, user=None, password=None):
    prof = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([ip]),
        request_timeout=30)
    auth = PlainTextAuthProvider(user, password) if user else None
    c = Cluster([ip], protocol_version=4, auth_provider=auth,
                execution_profiles={EXEC_PROFILE_DEFAULT: prof})
    return c, c.connect()


def can_login(ip, user, password):
    try:
        c, _ = connect(ip, user, password)
    except NoHostAvailable:
        return False
    c.shutdown()
    return True


def login_error(ip, user, password):
    """The driver's error for a refused login, as text."""
    with pytest.raises(NoHostAvailable) as e:
        c, _ = connect(ip, user, password)
        c.shutdown()
    errors = list(e.value.errors.values())
    assert errors and isinstance(errors[0], AuthenticationFailed), errors
    return str(errors[0])


@pytest.fixture(scope="module")
def admin(cluster):
    c, s = connect(N1, "cassandra", "cassandra")
    yield s
    c.shutdown()


# ---- the wire ---------------------------------------------------------------

def frame(opcode, body, stream=1):
    return struct.pack(">BBhBi", 4, 0, stream, opcode, len(body)) + body


def read_frame(sock):
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        if not chunk:
            return None
        head += chunk
    _, _, stream, opcode, n = struct.unpack(">BBhBi", head)
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        assert chunk, "the node closed the connection mid-frame"
        body += chunk
    return opcode, body


def string(s):
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def startup(sock):
    sock.sendall(frame(0x01, struct.pack(">H", 1) + string("CQL_VERSION") +
                       string("3.0.0")))
    return read_frame(sock)


def error_of(body):
    code, = struct.unpack(">i", body[:4])
    n, = struct.unpack(">H", body[4:6])
    return code, body[6:6 + n].decode()


def test_startup_is_answered_with_authenticate(cluster):
    with socket.create_connection((N1, 9042), timeout=10) as s:
        opcode, body = startup(s)
        assert opcode == 0x03  # AUTHENTICATE
        assert body[2:].decode() == \
            "org.apache.cassandra.auth.PasswordAuthenticator"


def test_a_request_before_authentication_is_a_protocol_error(cluster):
    with socket.create_connection((N1, 9042), timeout=10) as s:
        startup(s)
        q = b"SELECT * FROM system.local"
        s.sendall(frame(0x07, struct.pack(">i", len(q)) + q +
                        struct.pack(">HB", 1, 0)))
        opcode, body = read_frame(s)
        assert opcode == 0x00
        assert error_of(body) == (
            0x000A, "Unexpected message QUERY, expecting SASL_RESPONSE")
        assert read_frame(s) is None  # and the connection is closed


def test_sasl_plain_over_the_wire(cluster):
    with socket.create_connection((N1, 9042), timeout=30) as s:
        startup(s)
        token = b"\0cassandra\0wrong"
        sent = time.monotonic()
        s.sendall(frame(0x0F, struct.pack(">i", len(token)) + token))
        opcode, body = read_frame(s)
        # a refusal is answered after its delay (500 ms, a timer: a lower
        # bound that load can only lengthen)
        assert time.monotonic() - sent >= 0.45
        assert opcode == 0x00
        assert error_of(body) == (
            0x0100, "Provided username cassandra and/or password are "
                    "incorrect")
        # the connection stays in the SASL exchange: a retry may succeed
        token = b"\0cassandra\0cassandra"
        s.sendall(frame(0x0F, struct.pack(">i", len(token)) + token,
                        stream=2))
        opcode, body = read_frame(s)
        assert opcode == 0x10  # AUTH_SUCCESS
        q = b"SELECT release_version FROM system.local"
        s.sendall(frame(0x07, struct.pack(">i", len(q)) + q +
                        struct.pack(">HB", 1, 0), stream=3))
        opcode, _ = read_frame(s)
        assert opcode == 0x08  # RESULT


def test_malformed_token(cluster):
    with socket.create_connection((N1, 9042), timeout=30) as s:
        startup(s)
        token = b"\0cassandra\0"
        s.sendall(frame(0x0F, struct.pack(">i", len(token)) + token))
        opcode, body = read_frame(s)
        assert error_of(body) == (0x0100, "Password must not be null")


# ---- the driver -------------------------------------------------------------

def test_login_ok_and_the_stored_hash_is_bcrypt(admin):
    row = admin.execute("SELECT role, can_login, is_superuser, member_of, "
                        "salted_hash FROM system_auth.roles "
                        "WHERE role = 'cassandra'").one()
    assert row.role == "cassandra" and row.can_login and row.is_superuser
    assert row.member_of is None
    h = row.salted_hash
    assert h.startswith("$2a$10$") and len(h) == 60
    # the system's libcrypt reads it, as Cassandra's jBCrypt would
    lib = ctypes.CDLL("libcrypt.so.1")
    lib.crypt.restype = ctypes.c_char_p
    assert lib.crypt(b"cassandra", h.encode()) == h.encode()


def test_the_default_superuser_is_created_with_a_warning(cluster):
    logs = "".join((cluster.home / "auth" / f"node{i}" / "logs" /
                    "system.log").read_text() for i in (1, 2))
    assert "Created default superuser role 'cassandra'" in logs
    assert "The default superuser 'cassandra' has the password " \
        "'cassandra'" in logs


def test_wrong_password_and_unknown_user(cluster):
    assert "Provided username cassandra and/or password are incorrect" in \
        login_error(N1, "cassandra", "nope")
    assert "Provided username nobody and/or password are incorrect" in \
        login_error(N1, "nobody", "x")


def test_no_credentials(cluster):
    with pytest.raises(NoHostAvailable) as e:
        c, _ = connect(N1)
        c.shutdown()
    err = list(e.value.errors.values())[0]
    assert isinstance(err, AuthenticationFailed)
    assert "requires authentication" in str(err)


def test_system_auth_is_written_by_role_statements_only(admin):
    with pytest.raises(Unauthorized) as e:
        admin.execute("INSERT INTO system_auth.roles (role, is_superuser, "
                      "can_login) VALUES ('sneaky', true, true)")
    assert "written by the role statements only" in str(e.value)
    with pytest.raises(Unauthorized):
        admin.execute("TRUNCATE system_auth.roles")


def roles(session, q="LIST ROLES"):
    rs = session.execute(q)
    return rs.column_names, [tuple(r) for r in rs]


def test_role_statements_and_list_roles(admin):
    admin.execute("CREATE ROLE alice WITH PASSWORD = 'a1' AND LOGIN = true")
    admin.execute("CREATE ROLE staff")
    admin.execute("CREATE ROLE IF NOT EXISTS staff")
    with pytest.raises(InvalidRequest) as e:
        admin.execute("CREATE ROLE staff")
    assert "staff already exists" in str(e.value)
    cols, rows = roles(admin)
    assert cols == ["role", "super", "login", "options", "datacenters"]
    assert ("alice", False, True, {}, "ALL") in [
        (r[0], r[1], r[2], r[3] or {}, r[4]) for r in rows]
    names = [r[0] for r in rows]
    assert names == sorted(names)
    assert {"alice", "staff", "cassandra"} <= set(names)

    admin.execute("CREATE ROLE ops")
    admin.execute("GRANT ops TO staff")
    admin.execute("GRANT staff TO alice")
    with pytest.raises(InvalidRequest) as e:
        admin.execute("GRANT alice TO ops")  # a cycle
    assert "alice is a member of ops" in str(e.value)
    with pytest.raises(InvalidRequest) as e:
        admin.execute("GRANT ops TO alice")  # already has it
    assert "alice is a member of ops" in str(e.value)
    with pytest.raises(InvalidRequest) as e:
        admin.execute("GRANT ghost TO alice")
    assert "ghost doesn't exist" in str(e.value)
    _, rows = roles(admin, "LIST ROLES OF alice")
    assert [r[0] for r in rows] == ["alice", "ops", "staff"]
    _, rows = roles(admin, "LIST ROLES OF alice NORECURSIVE")
    assert [r[0] for r in rows] == ["alice", "staff"]
    members = admin.execute("SELECT member FROM system_auth.role_members "
                            "WHERE role = 'staff'").all()
    assert [m.member for m in members] == ["alice"]
    row = admin.execute("SELECT member_of FROM system_auth.roles "
                        "WHERE role = 'alice'").one()
    assert row.member_of == {"staff"}

    with pytest.raises(InvalidRequest) as e:
        admin.execute("REVOKE ops FROM alice")
    assert "alice is not a member of ops" in str(e.value)
    admin.execute("REVOKE staff FROM alice")
    _, rows = roles(admin, "LIST ROLES OF alice")
    assert [r[0] for r in rows] == ["alice"]

    with pytest.raises(InvalidRequest) as e:
        admin.execute("ALTER ROLE ghost WITH LOGIN = true")
    assert "ghost doesn't exist" in str(e.value)
    admin.execute("ALTER ROLE IF EXISTS ghost WITH LOGIN = true")
    with pytest.raises(InvalidRequest) as e:
        admin.execute("CREATE ROLE x WITH OPTIONS = {'a': 'b'}")
    assert "CassandraRoleManager doesn't support OPTIONS" in str(e.value)
    with pytest.raises(Unauthorized) as e:
        admin.execute("ALTER ROLE cassandra WITH SUPERUSER = false")
    assert "alter your own superuser status" in str(e.value)

    admin.execute("DROP ROLE ops")
    _, rows = roles(admin, "LIST ROLES OF staff")
    assert [r[0] for r in rows] == ["staff"]  # the grant went with it
    with pytest.raises(InvalidRequest) as e:
        admin.execute("DROP ROLE ops")
    assert "ops doesn't exist" in str(e.value)
    admin.execute("DROP ROLE IF EXISTS ops")
    with pytest.raises(InvalidRequest) as e:
        admin.execute("DROP ROLE cassandra")
    assert "Cannot DROP primary role for current login" in str(e.value)


def test_a_non_superuser(admin):
    admin.execute("CREATE ROLE IF NOT EXISTS bob WITH PASSWORD = 'b1' "
                  "AND LOGIN = true")
    c, bob = connect(N1, "bob", "b1")
    try:
        with pytest.raises(Unauthorized) as e:
            bob.execute("CREATE ROLE mallory")
        assert "User bob has no CREATE permission on <all roles> or any " \
               "of its parents" in str(e.value)
        with pytest.raises(Unauthorized) as e:
            bob.execute("ALTER ROLE bob WITH SUPERUSER = true")
        assert "alter your own superuser status" in str(e.value)
        with pytest.raises(Unauthorized) as e:
            bob.execute("ALTER ROLE cassandra WITH PASSWORD = 'x'")
        assert "User bob has no ALTER permission on <role cassandra>" in \
            str(e.value)
        with pytest.raises(Unauthorized):
            bob.execute("DROP ROLE cassandra")
        with pytest.raises(Unauthorized):
            bob.execute("GRANT cassandra TO bob")
        # bob sees the roles he has, and changes his own password
        _, rows = roles(bob)
        assert [r[0] for r in rows] == ["bob"]
        bob.execute("ALTER ROLE bob WITH PASSWORD = 'b2'")
    finally:
        c.shutdown()
    assert "Provided username bob" in login_error(N1, "bob", "b1")
    assert can_login(N1, "bob", "b2")
    admin.execute("ALTER ROLE bob WITH LOGIN = false")
    assert "bob is not permitted to log in" in login_error(N1, "bob", "b2")


def test_legacy_user_statements(admin):
    admin.execute("CREATE USER IF NOT EXISTS carol WITH PASSWORD 'c1'")
    admin.execute("CREATE USER dave WITH PASSWORD 'd1' SUPERUSER")
    rs = admin.execute("LIST USERS")
    assert rs.column_names == ["name", "super", "datacenters"]
    users = {r.name: r.super for r in rs}
    assert users["carol"] is False and users["dave"] is True
    assert "staff" not in users  # no LOGIN: not a user
    assert can_login(N1, "carol", "c1")
    admin.execute("ALTER USER carol WITH PASSWORD 'c2'")
    assert can_login(N1, "carol", "c2")
    admin.execute("DROP USER dave")
    assert "dave" not in {r.name for r in admin.execute("LIST USERS")}


def test_a_role_made_on_one_node_logs_in_on_the_other(admin):
    admin.execute("CREATE ROLE erin WITH PASSWORD = 'e1' AND LOGIN = true")
    until(lambda: can_login(N2, "erin", "e1"), "erin logs in on node2")
    c, s = connect(N2, "erin", "e1")
    try:
        assert s.execute("SELECT role FROM system_auth.roles WHERE "
                         "role = 'erin'").one().role == "erin"
    finally:
        c.shutdown()


def test_admin_port_needs_a_superuser(admin, tmp_path):
    """With PasswordAuthenticator every cassini-tool command needs a
    superuser's credentials (-u/-pw or nodetool's password file)."""
    r = tool_run(N1, "status", timeout=30)
    assert r.returncode == 1 and r.stdout == "", r.stdout
    assert "Authentication failed! Credentials required" in r.stderr
    r = tool_run(N1, "-u", "cassandra", "-pw", "wrong", "stopdaemon",
                 timeout=30)
    assert r.returncode == 1
    assert "Provided username cassandra and/or password are incorrect" \
        in r.stderr, r.stderr
    admin.execute("CREATE ROLE IF NOT EXISTS opsuser WITH PASSWORD = 'o1' "
                  "AND LOGIN = true")
    r = tool_run(N1, "-u", "opsuser", "-pw", "o1", "drain", timeout=30)
    assert r.returncode == 1
    assert "opsuser is not a superuser" in r.stderr, r.stderr
    r = tool_run(N1, "-u", "cassandra", "-pw", "cassandra", "status",
                 timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("UN ") == 2, r.stdout
    pwf = tmp_path / "jmxremote.password"
    pwf.write_text("# user password\nopsuser o1\ncassandra cassandra\n")
    r = tool_run(N1, "-u", "cassandra", "--password-file", str(pwf),
                 "version", timeout=30)
    assert r.returncode == 0 and "ReleaseVersion" in r.stdout, r.stderr
    # a superuser through a granted role
    admin.execute("CREATE ROLE IF NOT EXISTS supers WITH SUPERUSER = true")
    admin.execute("GRANT supers TO opsuser")
    r = tool_run(N1, "-u", "opsuser", "-pwf", str(pwf), "version",
                 timeout=30)
    assert r.returncode == 0, r.stderr
    admin.execute("DROP ROLE opsuser")
    admin.execute("DROP ROLE supers")


def test_stress_and_the_c_client_log_in(cluster):
    """cassini-stress (the C client) sends credentials as
    cassandra-stress's -mode user= password=; without them it cannot
    connect."""
    stress = str(BUILD_DIR / "node" / "cassini-stress")
    base = [stress, "write", "n=200", "cl=ONE", "-node", N1,
            "-schema", "replication(factor=1)", "-rate", "threads=4"]
    r = subprocess.run(base + ["-mode", "user=cassandra",
                               "password=cassandra"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Op rate" in r.stdout
    r = subprocess.run(base + ["-mode", "user=cassandra", "password=no"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "incorrect" in r.stdout + r.stderr, r.stdout + r.stderr
    r = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "asks for authentication" in r.stdout + r.stderr, \
        r.stdout + r.stderr


def test_system_auth_replication_is_altered_like_a_keyspace(admin):
    admin.execute("ALTER KEYSPACE system_auth WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 2}")
    row = admin.execute("SELECT replication FROM system_schema.keyspaces "
                        "WHERE keyspace_name = 'system_auth'").one()
    assert row.replication["replication_factor"] == "2"
    # the roles reach their new replicas by repair, as in Cassandra
    r = tool_run(N1, "-u", "cassandra", "-pw", "cassandra", "repair",
                 "system_auth", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    with pytest.raises(Unauthorized):
        admin.execute("ALTER KEYSPACE system WITH replication = "
                      "{'class': 'SimpleStrategy', 'replication_factor': 2}")


def test_replacing_the_default_superuser(cluster, admin):
    """docs/security.md's procedure: a new superuser, then the default
    one dropped; a restart does not bring it back."""
    admin.execute("CREATE ROLE root WITH PASSWORD = 'r00t' AND "
                  "SUPERUSER = true AND LOGIN = true")
    c, root = connect(N1, "root", "r00t")
    try:
        root.execute("DROP ROLE cassandra")
    finally:
        c.shutdown()
    assert "Provided username cassandra" in \
        login_error(N1, "cassandra", "cassandra")
    log = cluster.home / "auth" / "node1" / "logs" / "system.log"
    mark = len(log.read_text())
    cluster("-C", "auth", "node", "node1", "stop")
    cluster("-C", "auth", "node", "node1", "start")
    until(lambda: can_login(N1, "root", "r00t"), "root logs in again")
    # past the setup delay the node looked for roles and found some
    until(lambda: "the default superuser is not created" in
          log.read_text()[mark:], "node1's default role setup ran")
    assert "Created default superuser" not in log.read_text()[mark:]
    assert not can_login(N1, "cassandra", "cassandra")


def test_credentials_cache(tmp_path):
    """credentials_validity: a node serves logins from the credentials it
    cached until they expire, so a password changed on another node is
    seen there only then (as Cassandra's CredentialsCache); the node that
    ran the change drops its cache at once."""
    run = cluster_script(tmp_path)
    a, b = "127.0.96.1", "127.0.96.2"
    run("create", "creds", "-n", "2", "--base-ip", "127.0.96.", "--auth",
        "-c", "gossip_interval=250ms", "-c", "superuser_setup_delay=500ms",
        "-c", "credentials_validity=1h",
        "-c", "credentials_update_interval=1h")
    try:
        run("start")
        until(lambda: can_login(b, "cassandra", "cassandra"),
              "the default superuser logs in on node2")
        c, s = connect(a, "cassandra", "cassandra")
        try:
            s.execute("ALTER ROLE cassandra WITH PASSWORD = 'changed'")
        finally:
            c.shutdown()
        assert can_login(a, "cassandra", "changed")
        assert not can_login(a, "cassandra", "cassandra")
        # node2 still has the credentials it read before the change
        assert can_login(b, "cassandra", "cassandra")
        assert not can_login(b, "cassandra", "changed")
    finally:
        run("-C", "creds", "remove", check=False)


def test_the_default_superuser_is_read_at_quorum(tmp_path):
    """Roles are read at LOCAL_ONE, the default superuser `cassandra` at
    QUORUM (as Cassandra's CassandraRoleManager): with system_auth at RF 2
    and one of the two nodes down, another role still logs in on the
    other, `cassandra` does not (a LOCAL_ONE read would let it in). The
    credentials cache is off so each login reads."""
    run = cluster_script(tmp_path)
    a, b = "127.0.91.73", "127.0.91.74"
    run("create", "quorum", "-n", "2", "--base-ip", a, "--auth",
        "-c", "gossip_interval=250ms", "-c", "superuser_setup_delay=500ms",
        "-c", "credentials_validity=0ms",
        "-c", "auth_bcrypt_gensalt_log2_rounds=5")
    try:
        run("start")
        until(lambda: can_login(a, "cassandra", "cassandra"),
              "the default superuser logs in")
        c, s = connect(a, "cassandra", "cassandra")
        try:
            s.execute("ALTER KEYSPACE system_auth WITH replication = "
                      "{'class': 'SimpleStrategy', "
                      "'replication_factor': 2}")
            s.execute("CREATE ROLE alice WITH PASSWORD = 'a' AND "
                      "LOGIN = true")
            # the admin port takes superusers: one read at LOCAL_ONE
            s.execute("CREATE ROLE root WITH PASSWORD = 'r' AND "
                      "LOGIN = true AND SUPERUSER = true")
            # new hashes have the configured cost
            h = s.execute("SELECT salted_hash FROM system_auth.roles "
                          "WHERE role = 'alice'").one().salted_hash
            assert h.startswith("$2a$05$"), h
        finally:
            c.shutdown()
        r = tool_run(a, "-u", "cassandra", "-pw", "cassandra", "repair",
                     "system_auth", timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert can_login(a, "alice", "a")
        run("-C", "quorum", "node", "node2", "stop")
        until(lambda: any(line.startswith("DN") and b in line for line in
                          tool_run(a, "-u", "root", "-pw", "r", "status",
                                   timeout=30)
                          .stdout.splitlines()),
              "node1 sees node2 down")
        assert can_login(a, "alice", "a")
        assert "Unable to perform authentication" in \
            login_error(a, "cassandra", "cassandra")
    finally:
        run("-C", "quorum", "remove", check=False)


def service_stop_command(conf_dir):
    """The packaged unit's ExecStop (packaging/cassini.service.in) with its
    directories made this test's."""
    for line in (SOURCE_DIR / "packaging" /
                 "cassini.service.in").read_text().splitlines():
        if line.startswith("ExecStop="):
            cmd = line[len("ExecStop="):].lstrip("-")
            break
    else:
        raise AssertionError("the unit has no ExecStop")
    assert "$" not in cmd  # systemd would expand it
    cmd = cmd.replace("@CASSINI_CONF_DIR@", str(conf_dir))
    cmd = cmd.replace("@CASSINI_BIN_DIR@", str(BUILD_DIR / "node"))
    return shlex.split(cmd)


def test_the_service_drains_with_its_password_file(cluster):
    """The unit's stop drains a node with PasswordAuthenticator using the
    password file next to node.yaml (without one the admin port refuses
    it, and SIGTERM alone stops the node). Last here: it drains node2."""
    conf = cluster.home / "auth" / "node2" / "conf"
    assert (conf / "node.yaml").exists()
    pwf = conf / "jmxremote.password"
    r = subprocess.run(service_stop_command(conf), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1
    assert "Credentials required" in r.stderr, r.stderr
    # a superuser's credentials: the default one, or the one that
    # replaced it (test_replacing_the_default_superuser)
    user, password = next((u, p) for u, p in (("cassandra", "cassandra"),
                                              ("root", "r00t"))
                          if can_login(N1, u, p))
    pwf.write_text(f"{user} {password}\n")
    pwf.chmod(0o600)
    r = subprocess.run(service_stop_command(conf), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    log = (cluster.home / "auth" / "node2" / "logs" /
           "system.log").read_text()
    assert "draining" in log, log[-2000:]
