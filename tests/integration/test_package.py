"""The Debian package as an operator meets it, installed into this machine
with dpkg: built from the test build with cpack, installed (the cassini
user, /etc/cassini, /var/lib/cassini), the installed cassinid started the
way the systemd unit starts it (no init system runs here: the unit's own
ExecStart and ExecStop, as its User=), answering CQL, its log rotated by
the packaged logrotate file, stopped with the unit's drain, upgraded in
place by a rebuilt package of another version (data and the edited
configuration kept), removed (data and configuration kept) and purged
(everything gone).

Whatever happens, the test leaves the machine as it found it: no process
of its own running, the package purged, its directories and user gone. It
refuses to run (skips) where a cassini package, user or directory is
already there, so it never touches an operator's install. The node uses
127.0.40.20.
"""
import os
import pathlib
import pwd
import shlex
import shutil
import signal
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster
from cassandra.query import SimpleStatement

from conftest import BUILD_DIR

ADDR = "127.0.40.20"
ETC = pathlib.Path("/etc/cassini")
STATE = pathlib.Path("/var/lib/cassini")
LOGS = pathlib.Path("/var/log/cassini")
UNIT = BUILD_DIR / "packaging" / "cassini.service"
CONFFILES = BUILD_DIR / "packaging" / "deb" / "conffiles"


def installed_version():
    r = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Status} "
                        "${Version}", "cassini"], capture_output=True,
                       text=True)
    return r.stdout.split() if r.returncode == 0 else []


def user_exists():
    try:
        pwd.getpwnam("cassini")
        return True
    except KeyError:
        return False


def why_not():
    """Why this machine cannot run the test, or None."""
    if os.geteuid() != 0:
        return "installing a package needs root"
    for tool in ("cpack", "dpkg", "dpkg-deb", "setpriv", "logrotate"):
        if not shutil.which(tool):
            return f"{tool} is not installed (scripts/setup installs it)"
    if not CONFFILES.exists() or \
            CONFFILES.read_text().split()[0] != "/etc/cassini/node.yaml":
        return "the build is not configured for the FHS layout"
    st = installed_version()
    if st and st[0] != "not-installed":
        return f"a cassini package is already here ({' '.join(st)})"
    if user_exists():
        return "a cassini user already exists"
    for d in (ETC, STATE, LOGS):
        if d.exists():
            return f"{d} already exists"
    return None


def dpkg(*args):
    """dpkg, waiting for its lock when another install holds it."""
    deadline = time.monotonic() + 120
    while True:
        r = subprocess.run(["dpkg", *args], capture_output=True, text=True,
                           env=dict(os.environ, DEBIAN_FRONTEND=
                                    "noninteractive"))
        if r.returncode == 0 or "lock" not in r.stderr or \
                time.monotonic() > deadline:
            assert r.returncode == 0, (args, r.stdout, r.stderr)
            return r.stdout
        time.sleep(1)


def build_package(out, release):
    r = subprocess.run(["cpack", "-G", "DEB", "--config",
                        str(BUILD_DIR / "CPackConfig.cmake"), "-B", str(out),
                        "-D", f"CPACK_DEBIAN_PACKAGE_RELEASE={release}"],
                       capture_output=True, text=True, timeout=300,
                       cwd=BUILD_DIR)
    assert r.returncode == 0, r.stdout + r.stderr
    debs = list(pathlib.Path(out).glob("cassini_*.deb"))
    assert len(debs) == 1, debs
    return debs[0]


def unit_path():
    """The unit file the installed package holds."""
    for line in dpkg("-L", "cassini").splitlines():
        if line.endswith("/systemd/system/cassini.service"):
            return pathlib.Path(line)
    raise AssertionError("the package has no cassini.service")


def unit_commands():
    """(User=, ExecStart argv, ExecStop argv) of the installed unit."""
    keys = {}
    for line in unit_path().read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            keys[k] = v
    stop = keys["ExecStop"].lstrip("-")
    return keys["User"], shlex.split(keys["ExecStart"]), shlex.split(stop)


def as_user(user, argv):
    """argv run as `user` in this process's place (setpriv execs, so the
    pid is the command's), as systemd's User= does."""
    return ["setpriv", f"--reuid={user}", f"--regid={user}",
            "--init-groups", "--", *argv]


class Service:
    """The installed node, started and stopped as its unit would."""

    def __init__(self, procs):
        self.procs = procs
        self.user, self.start_cmd, self.stop_cmd = unit_commands()
        self.proc = None

    def log(self):
        p = LOGS / "system.log"
        return p.read_text() if p.exists() else ""

    def start(self):
        mark = len(self.log())
        self.proc = subprocess.Popen(as_user(self.user, self.start_cmd),
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        self.procs.append(self.proc)
        deadline = time.monotonic() + 60
        while "CQL clients on" not in self.log()[mark:]:
            assert self.proc.poll() is None, \
                self.proc.stderr.read().decode() + self.log()[mark:]
            assert time.monotonic() < deadline, self.log()[mark:]
            time.sleep(0.1)

    def stop(self):
        """ExecStop (the drain), then SIGTERM, as systemd stops it."""
        mark = len(self.log())
        r = subprocess.run(as_user(self.user, self.stop_cmd),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=30) == 0, self.log()[mark:]
        log = self.log()[mark:]
        assert "draining" in log and "shutdown complete" in log, log


def session():
    c = Cluster([ADDR], protocol_version=4)
    return c, c.connect()


def edit_config():
    """What an operator changes before the first start."""
    y = ETC / "node.yaml"
    text = y.read_text()
    text = text.replace("cluster_name: 'Test Cluster'",
                        "cluster_name: 'Packaged'")
    text = text.replace("listen_address: 127.0.0.1",
                        f"listen_address: {ADDR}")
    text = text.replace('- seeds: "127.0.0.1:7000"', f'- seeds: "{ADDR}"')
    assert ADDR in text and "'Packaged'" in text
    y.write_text(text)


@pytest.fixture
def clean_machine():
    reason = why_not()
    if reason:
        pytest.skip(reason)
    procs = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    st = installed_version()
    if st and st[0] != "not-installed":
        subprocess.run(["dpkg", "-P", "cassini"], capture_output=True)
    for d in (ETC, STATE, LOGS):
        shutil.rmtree(d, ignore_errors=True)
    if user_exists():
        subprocess.run(["deluser", "--system", "--quiet", "cassini"],
                       capture_output=True)
    subprocess.run(["delgroup", "--system", "--quiet", "cassini"],
                   capture_output=True)


def test_install_run_upgrade_remove_purge(clean_machine, tmp_path):
    procs = clean_machine
    deb1 = build_package(tmp_path / "v1", 1)
    deb2 = build_package(tmp_path / "v2", 2)
    info = subprocess.run(["dpkg-deb", "-f", str(deb2), "Version"],
                          capture_output=True, text=True).stdout.strip()
    assert info.endswith("-2"), info

    # install: the user, the FHS layout, the unit
    dpkg("-i", str(deb1))
    assert installed_version()[0] == "installed"
    assert user_exists()
    user = pwd.getpwnam("cassini")
    for d in (STATE, LOGS):
        assert d.is_dir() and d.stat().st_uid == user.pw_uid, d
    assert (ETC / "node.yaml").is_file()
    assert (ETC / "rackdc.properties").is_file()
    assert pathlib.Path("/etc/logrotate.d/cassini").is_file()
    conffiles = dpkg("--status", "cassini")
    assert "/etc/cassini/node.yaml" in conffiles
    if shutil.which("systemd-analyze"):
        r = subprocess.run(["systemd-analyze", "verify", str(unit_path())],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    cassinid = unit_commands()[1][0]
    r = subprocess.run([cassinid, "-c", str(ETC), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

    # run it as the unit does, with the packaged config made this host's
    edit_config()
    svc = Service(procs)
    assert svc.user == "cassini"
    svc.start()
    cluster, s = session()
    assert s.execute("SELECT release_version FROM system.local").one()
    s.execute("CREATE KEYSPACE pkg WITH replication = "
              "{'class': 'NetworkTopologyStrategy', 'dc1': 1}")
    s.execute("CREATE TABLE pkg.t (k int PRIMARY KEY, v text)")
    for k in range(50):
        s.execute(SimpleStatement("INSERT INTO pkg.t (k, v) VALUES (%s, %s)",
                                  consistency_level=ConsistencyLevel.ONE),
                  (k, f"v{k}"))
    cluster.shutdown()
    assert (STATE / "data").is_dir()
    assert (STATE / "data").stat().st_uid == user.pw_uid

    # logrotate moves system.log away and HUPs the node: a fresh log
    r = subprocess.run(["logrotate", "-f", "-s", str(tmp_path / "lr.state"),
                        "/etc/logrotate.d/cassini"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (LOGS / "system.log.1").exists()
    deadline = time.monotonic() + 20
    while "reopened" not in svc.log():
        assert time.monotonic() < deadline, svc.log()
        time.sleep(0.1)
    assert svc.proc.poll() is None

    svc.stop()

    # upgrade in place: an edited conffile and the data stay
    dpkg("-i", str(deb2))
    assert installed_version() == ["installed", info]
    assert ADDR in (ETC / "node.yaml").read_text()
    assert not list(ETC.glob("*.dpkg-*")), list(ETC.iterdir())
    svc = Service(procs)
    svc.start()
    cluster, s = session()
    rows = s.execute("SELECT k, v FROM pkg.t").all()
    assert sorted((r.k, r.v) for r in rows) == \
        [(k, f"v{k}") for k in range(50)]
    cluster.shutdown()
    svc.stop()

    # remove keeps data, configuration and user
    dpkg("-r", "cassini")
    assert not pathlib.Path(cassinid).exists()
    assert installed_version()[0] == "config-files"
    assert ADDR in (ETC / "node.yaml").read_text()
    assert (STATE / "data").is_dir() and user_exists()

    # purge removes them all
    dpkg("-P", "cassini")
    st = installed_version()
    assert not st or st[0] == "not-installed", st
    for d in (ETC, STATE, LOGS):
        assert not d.exists(), d
    assert not pathlib.Path("/etc/logrotate.d/cassini").exists()
    assert not user_exists()
