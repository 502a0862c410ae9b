"""CassandraAuthorizer on a real 2-node cluster (127.0.108.x) through the
DataStax driver: GRANT / REVOKE / LIST PERMISSIONS with Cassandra 4.1's
columns, resource names and messages, the Unauthorized checks on reads,
writes, DDL and role statements, inheritance through granted roles and
up the resource chain, the creator's permissions, DROP revoking what was
granted on the dropped resource, prepared statements checked at EXECUTE,
and a grant made on one node reaching the other's cache. No timing
thresholds: waits are "until it happens" with a ceiling that only guards
against hanging."""
import time

import pytest
from cassandra import InvalidRequest, Unauthorized
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import (EXEC_PROFILE_DEFAULT, Cluster,
                               ExecutionProfile, NoHostAvailable)
from cassandra.protocol import SyntaxException
from cassandra.policies import WhiteListRoundRobinPolicy

from clusters import cluster_script

BASE = "127.0.108."
N1, N2 = BASE + "1", BASE + "2"


def until(pred, what, ceiling=90):
    deadline = time.monotonic() + ceiling
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.3)
    pytest.fail(f"never happened: {what}")


def connect(ip, user, password):
    prof = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([ip]),
        request_timeout=30)
    c = Cluster([ip], protocol_version=4,
                auth_provider=PlainTextAuthProvider(user, password),
                execution_profiles={EXEC_PROFILE_DEFAULT: prof})
    return c, c.connect()


def can_login(ip, user, password):
    try:
        c, _ = connect(ip, user, password)
    except NoHostAvailable:
        return False
    c.shutdown()
    return True


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    run = cluster_script(tmp_path_factory.mktemp("authz"))
    run("create", "authz", "-n", "2", "--base-ip", BASE,
        "-c", "gossip_interval=250ms",
        "-c", "authenticator=PasswordAuthenticator",
        "-c", "authorizer=CassandraAuthorizer",
        "-c", "superuser_setup_delay=500ms")
    run("start")
    until(lambda: can_login(N1, "cassandra", "cassandra"),
          "the default superuser can log in")
    yield run
    run("-C", "authz", "remove", check=False)


@pytest.fixture(scope="module")
def admin(cluster):
    c, s = connect(N1, "cassandra", "cassandra")
    s.execute("CREATE KEYSPACE IF NOT EXISTS ks WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE IF NOT EXISTS ks.t (k int PRIMARY KEY, v int)")
    s.execute("CREATE TABLE IF NOT EXISTS ks.u (k int PRIMARY KEY, v int)")
    s.execute("INSERT INTO ks.t (k, v) VALUES (1, 1)")
    yield s
    c.shutdown()


def make_user(admin, name):
    admin.execute(f"CREATE ROLE IF NOT EXISTS {name} WITH PASSWORD = 'pw' "
                  "AND LOGIN = true")


@pytest.fixture
def user(admin, request):
    """A fresh login role (named after the test) and its session."""
    name = "u_" + request.node.name.replace("test_", "")[:40]
    admin.execute(f"DROP ROLE IF EXISTS {name}")
    make_user(admin, name)
    c, s = connect(N1, name, "pw")
    s.name = name
    yield s
    c.shutdown()


def refused(session, q, msg, exc=Unauthorized):
    with pytest.raises(exc) as e:
        session.execute(q)
    assert msg in str(e.value), str(e.value)


def perms(session, q):
    return sorted(tuple(r) for r in session.execute(q))


def test_reads_and_writes_need_select_and_modify(admin, user):
    u = user.name
    refused(user, "SELECT * FROM ks.t",
            f"User {u} has no SELECT permission on <table ks.t> or any of "
            "its parents")
    refused(user, "INSERT INTO ks.t (k, v) VALUES (2, 2)",
            f"User {u} has no MODIFY permission on <table ks.t> or any of "
            "its parents")
    admin.execute(f"GRANT SELECT ON KEYSPACE ks TO {u}")
    # invalidated on this node at once: the same session reads
    assert [tuple(r) for r in user.execute("SELECT * FROM ks.t")] == [(1, 1)]
    refused(user, "UPDATE ks.t SET v = 3 WHERE k = 1", "no MODIFY")
    refused(user, "DELETE FROM ks.t WHERE k = 1", "no MODIFY")
    refused(user, "TRUNCATE ks.t", "no MODIFY")
    refused(user, "BEGIN BATCH INSERT INTO ks.t (k, v) VALUES (5, 5); "
            "APPLY BATCH", "no MODIFY permission on <table ks.t>")
    admin.execute(f"GRANT MODIFY ON ks.t TO {u}")
    user.execute("INSERT INTO ks.t (k, v) VALUES (2, 2)")
    # a batch needs MODIFY on every table it writes
    refused(user, "BEGIN BATCH INSERT INTO ks.t (k, v) VALUES (6, 6); "
            "INSERT INTO ks.u (k, v) VALUES (6, 6); APPLY BATCH",
            f"User {u} has no MODIFY permission on <table ks.u>")
    user.execute("DELETE FROM ks.t WHERE k = 2")
    admin.execute(f"REVOKE SELECT ON KEYSPACE ks FROM {u}")
    refused(user, "SELECT * FROM ks.t", "no SELECT permission")


def test_list_permissions_columns_and_names(admin, user):
    u = user.name
    admin.execute(f"GRANT SELECT ON ALL KEYSPACES TO {u}")
    admin.execute(f"GRANT ALL ON ks.t TO {u}")
    rs = admin.execute(f"LIST ALL PERMISSIONS OF {u}")
    assert rs.column_names == ["role", "username", "resource", "permission"]
    # sorted as Cassandra sorts them: resource name, then permission
    assert [tuple(r) for r in rs] == [
        (u, u, "<all keyspaces>", "SELECT"),
        (u, u, "<table ks.t>", "ALTER"),
        (u, u, "<table ks.t>", "DROP"),
        (u, u, "<table ks.t>", "SELECT"),
        (u, u, "<table ks.t>", "MODIFY"),
        (u, u, "<table ks.t>", "AUTHORIZE"),
    ]
    # ON a resource lists it and its parents; NORECURSIVE only it
    assert perms(admin, f"LIST SELECT ON ks.t OF {u}") == [
        (u, u, "<all keyspaces>", "SELECT"),
        (u, u, "<table ks.t>", "SELECT")]
    assert perms(admin, f"LIST SELECT ON ks.t OF {u} NORECURSIVE") == [
        (u, u, "<table ks.t>", "SELECT")]
    # a user may list its own, not everyone's
    assert len(list(user.execute(f"LIST ALL PERMISSIONS OF {u}"))) == 6
    refused(user, "LIST ALL PERMISSIONS",
            "You are not authorized to view everyone's permissions")
    refused(user, "LIST ALL PERMISSIONS OF cassandra",
            "You are not authorized to view cassandra's permissions")
    admin.execute(f"REVOKE ALL ON ks.t FROM {u}")
    admin.execute(f"REVOKE SELECT ON ALL KEYSPACES FROM {u}")
    # nothing left: Cassandra answers without rows
    assert list(admin.execute(f"LIST ALL PERMISSIONS OF {u}")) == []


def test_grant_errors(admin, user):
    u = user.name
    refused(admin, f"GRANT CREATE ON ks.t TO {u}",
            "Resource type DataResource does not support any of the "
            "requested permissions", SyntaxException)
    refused(admin, f"GRANT SELECT ON ALL ROLES TO {u}",
            "Resource type RoleResource does not support any of the "
            "requested permissions", SyntaxException)
    refused(admin, f"GRANT SELECT ON ks.nope TO {u}",
            "Resource <table ks.nope> doesn't exist", InvalidRequest)
    refused(admin, f"GRANT SELECT ON KEYSPACE nope TO {u}",
            "Resource <keyspace nope> doesn't exist", InvalidRequest)
    refused(admin, "GRANT SELECT ON ks.t TO nobody",
            "Role nobody doesn't exist", InvalidRequest)
    refused(admin, "LIST ALL PERMISSIONS OF nobody",
            "<role nobody> doesn't exist", InvalidRequest)
    refused(admin, "LIST ALL PERMISSIONS ON ks.nope",
            "<table ks.nope> doesn't exist", InvalidRequest)
    refused(admin, f"GRANT SELECT ON t TO {u}",
            "No keyspace has been specified", InvalidRequest)
    refused(admin, f"GRANT EXECUTE ON ALL FUNCTIONS IN KEYSPACE system "
            f"TO {u}", "Altering permissions on builtin functions is not "
            "supported", InvalidRequest)


def test_grant_needs_authorize_and_the_permission(admin, user):
    u = user.name
    make_user(admin, "grant_target")
    refused(user, "GRANT SELECT ON ks.t TO grant_target",
            f"User {u} has no AUTHORIZE permission on <table ks.t> or any "
            "of its parents")
    admin.execute(f"GRANT AUTHORIZE ON KEYSPACE ks TO {u}")
    refused(user, "GRANT SELECT ON ks.t TO grant_target",
            f"User {u} has no SELECT permission on <table ks.t> or any of "
            "its parents")
    admin.execute(f"GRANT SELECT ON ks.t TO {u}")
    user.execute("GRANT SELECT ON ks.t TO grant_target")
    assert perms(admin, "LIST ALL PERMISSIONS OF grant_target") == [
        ("grant_target", "grant_target", "<table ks.t>", "SELECT")]
    # everyone's, and everyone's on one resource
    everyone = perms(admin, "LIST ALL PERMISSIONS")
    assert ("grant_target", "grant_target", "<table ks.t>", "SELECT") in \
        everyone
    assert (u, u, "<keyspace ks>", "AUTHORIZE") in everyone
    on_t = perms(admin, "LIST SELECT ON ks.t NORECURSIVE")
    assert ("grant_target", "grant_target", "<table ks.t>", "SELECT") in on_t
    assert all(r[2] == "<table ks.t>" and r[3] == "SELECT" for r in on_t)
    user.execute("REVOKE SELECT ON ks.t FROM grant_target")
    assert list(admin.execute("LIST ALL PERMISSIONS OF grant_target")) == []


def test_permissions_are_inherited_through_roles(admin, user):
    u = user.name
    admin.execute("DROP ROLE IF EXISTS writers")
    admin.execute("CREATE ROLE writers")
    admin.execute("GRANT MODIFY ON TABLE ks.u TO writers")
    refused(user, "INSERT INTO ks.u (k, v) VALUES (1, 1)", "no MODIFY")
    admin.execute(f"GRANT writers TO {u}")
    user.execute("INSERT INTO ks.u (k, v) VALUES (1, 1)")
    # the role's grants are listed under the role
    assert (("writers", "writers", "<table ks.u>", "MODIFY") in
            perms(admin, f"LIST ALL PERMISSIONS OF {u}"))
    admin.execute(f"REVOKE writers FROM {u}")
    refused(user, "INSERT INTO ks.u (k, v) VALUES (1, 1)", "no MODIFY")
    # dropping a role takes its permissions with it
    admin.execute(f"GRANT writers TO {u}")
    admin.execute("DROP ROLE writers")
    refused(user, "INSERT INTO ks.u (k, v) VALUES (1, 1)", "no MODIFY")
    admin.execute("CREATE ROLE writers")
    assert list(admin.execute("LIST ALL PERMISSIONS OF writers")) == []


def test_the_creator_gets_what_applies(admin, user):
    u = user.name
    admin.execute("DROP KEYSPACE IF EXISTS mine")
    refused(user, "CREATE KEYSPACE mine WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}",
            f"User {u} has no CREATE permission on <all keyspaces> or any "
            "of its parents")
    refused(user, "CREATE TABLE ks.x (k int PRIMARY KEY)",
            f"User {u} has no CREATE permission on <keyspace ks> or any of "
            "its parents")
    admin.execute(f"GRANT CREATE ON ALL KEYSPACES TO {u}")
    user.execute("CREATE KEYSPACE mine WITH replication = "
                 "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    # CREATE on the keyspace (its creator's) lets it make tables there
    user.execute("CREATE TABLE mine.t (k int PRIMARY KEY, v int)")
    user.execute("INSERT INTO mine.t (k, v) VALUES (1, 1)")
    assert len(list(user.execute("SELECT * FROM mine.t"))) == 1
    mine = perms(admin, f"LIST ALL PERMISSIONS OF {u}")
    for p in ("CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"):
        assert (u, u, "<keyspace mine>", p) in mine
    for p in ("ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"):
        assert (u, u, "<table mine.t>", p) in mine
    assert (u, u, "<all functions in mine>", "EXECUTE") in mine
    user.execute("ALTER TABLE mine.t ADD w int")
    # but not on what others made
    refused(user, "DROP TABLE ks.t",
            f"User {u} has no DROP permission on <table ks.t> or any of "
            "its parents")
    refused(user, "ALTER KEYSPACE ks WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}",
            f"User {u} has no ALTER permission on <keyspace ks>")
    user.execute("DROP KEYSPACE mine")
    # the drop took the permissions on the keyspace and its tables
    left = perms(admin, f"LIST ALL PERMISSIONS OF {u}")
    assert [r for r in left if "mine" in r[2]] == [], left


def test_drop_revokes_permissions_on_the_dropped_table(admin, user):
    u = user.name
    admin.execute("CREATE TABLE IF NOT EXISTS ks.gone (k int PRIMARY KEY)")
    admin.execute(f"GRANT SELECT ON ks.gone TO {u}")
    user.execute("SELECT * FROM ks.gone")
    admin.execute("DROP TABLE ks.gone")
    admin.execute("CREATE TABLE ks.gone (k int PRIMARY KEY)")
    # a new table of the same name does not inherit the old grant
    refused(user, "SELECT * FROM ks.gone", "no SELECT permission on "
            "<table ks.gone>")
    assert list(admin.execute(f"LIST ALL PERMISSIONS OF {u}")) == []


def test_role_statements_follow_the_permissions(admin, user):
    u = user.name
    admin.execute("DROP ROLE IF EXISTS made_by_user")
    refused(user, "CREATE ROLE made_by_user",
            f"User {u} has no CREATE permission on <all roles> or any of "
            "its parents")
    admin.execute(f"GRANT CREATE ON ALL ROLES TO {u}")
    user.execute("CREATE ROLE made_by_user")
    refused(user, "CREATE ROLE su WITH SUPERUSER = true",
            "Only superusers can create a role with superuser status")
    # its creator may alter, grant and drop it
    assert (u, u, "<role made_by_user>", "DROP") in \
        perms(admin, f"LIST ALL PERMISSIONS OF {u}")
    user.execute(f"GRANT made_by_user TO {u}")
    refused(user, "DROP ROLE cassandra",
            f"User {u} has no DROP permission on <role cassandra>")
    # DESCRIBE on <all roles> lists every role
    refused(user, "LIST ROLES OF cassandra",
            "You are not authorized to view roles granted to cassandra")
    admin.execute(f"GRANT DESCRIBE ON ALL ROLES TO {u}")
    assert "cassandra" in [r[0] for r in user.execute("LIST ROLES")]
    user.execute("DROP ROLE made_by_user")
    # dropping it revoked the permissions on it
    assert not [r for r in perms(admin, f"LIST ALL PERMISSIONS OF {u}")
                if "made_by_user" in r[2]]


def test_system_tables(admin, user):
    u = user.name
    # what drivers read is everyone's
    assert len(list(user.execute("SELECT * FROM system.local"))) == 1
    user.execute("SELECT * FROM system.peers")
    user.execute("SELECT * FROM system_schema.tables")
    refused(user, "SELECT * FROM system_auth.roles",
            f"User {u} has no SELECT permission on <table system_auth.roles>"
            " or any of its parents")
    refused(user, "SELECT * FROM system_auth.role_permissions",
            "no SELECT permission")
    # virtual tables other than the schema's need SELECT like any table
    refused(user, "SELECT * FROM system_views.settings",
            f"User {u} has no SELECT permission on <table "
            "system_views.settings>")
    user.execute("SELECT * FROM system_virtual_schema.tables")
    admin.execute(f"GRANT SELECT ON system_views.settings TO {u}")
    assert len(list(user.execute("SELECT * FROM system_views.settings"))) > 0
    # no one writes system_auth directly, not even a superuser
    refused(admin, "INSERT INTO system_auth.role_permissions (role, "
            "resource, permissions) VALUES ('x', 'data', {'SELECT'})",
            "system_auth tables are written by the role statements only")


def test_prepared_statements_are_checked_at_execute(admin, user):
    u = user.name
    admin.execute(f"GRANT SELECT ON ks.t TO {u}")
    ps = user.prepare("SELECT * FROM ks.t WHERE k = ?")
    assert [tuple(r) for r in user.execute(ps, [1])] == [(1, 1)]
    admin.execute(f"REVOKE SELECT ON ks.t FROM {u}")
    with pytest.raises(Unauthorized) as e:
        user.execute(ps, [1])
    assert f"User {u} has no SELECT permission on <table ks.t>" in \
        str(e.value)


def test_a_grant_reaches_the_other_node(admin):
    make_user(admin, "far")
    c, far = connect(N2, "far", "pw")
    try:
        refused(far, "SELECT * FROM ks.t", "no SELECT permission")
        # granted on node 1: node 2's cached entry expires (2 s validity)
        admin.execute("GRANT SELECT ON ks.t TO far")

        def reads():
            try:
                far.execute("SELECT * FROM ks.t")
                return True
            except Unauthorized:
                return False
        until(reads, "node 2 sees the grant")
        admin.execute("REVOKE SELECT ON ks.t FROM far")
        until(lambda: not reads(), "node 2 sees the revoke")
    finally:
        c.shutdown()


def test_the_superuser_lists_its_own(admin):
    # the default superuser bypasses the checks but still lists
    rows = perms(admin, "LIST ALL PERMISSIONS OF cassandra")
    assert all(r[0] == "cassandra" for r in rows)


def test_dropping_a_role_revokes_its_sessions_rights(admin, user):
    """A session stays open when its role is dropped, but what the role
    was granted is gone for it once the caches' validity has passed
    (permissions_validity, roles_validity: 2 s by default)."""
    admin.execute(f"GRANT SELECT ON ks.t TO {user.name}")

    def can_read():
        try:
            user.execute("SELECT v FROM ks.t WHERE k = 1")
            return True
        except Unauthorized:
            return False
    until(can_read, "the grant applies")
    admin.execute(f"DROP ROLE {user.name}")
    until(lambda: not can_read(), "the dropped role's session loses SELECT")
    refused(user, "SELECT v FROM ks.t WHERE k = 1",
            "has no SELECT permission on <table ks.t> or any of its "
            "parents")


def test_a_role_dropped_on_another_node_loses_its_rights(admin):
    """The same, with the session on node 2 and DROP ROLE on node 1: node
    2 has the role's grants cached and drops them when they expire (the
    validity period), not at once."""
    make_user(admin, "far_dropped")
    admin.execute("GRANT SELECT ON ks.t TO far_dropped")
    c, far = connect(N2, "far_dropped", "pw")
    try:
        def can_read():
            try:
                far.execute("SELECT v FROM ks.t WHERE k = 1")
                return True
            except Unauthorized:
                return False
        until(can_read, "node 2 applies the grant")
        admin.execute("DROP ROLE far_dropped")
        until(lambda: not can_read(), "node 2's session loses SELECT")
    finally:
        c.shutdown()
