"""cassinid as an operator runs it: start, run, SIGTERM, bad configs."""
import signal
import socket
import subprocess

from conftest import CASSINID, default_yaml, seeds_yaml


def run(*args, timeout=10):
    return subprocess.run([str(CASSINID), *args], capture_output=True,
                          text=True, timeout=timeout)


def test_version_and_help():
    r = run("--version")
    assert r.returncode == 0
    assert r.stdout.startswith("cassinid ")
    r = run("--help")
    assert r.returncode == 0 and "-c, --conf DIR" in r.stdout
    r = run()
    assert r.returncode == 2
    assert "missing -c CONF_DIR" in r.stderr


def test_starts_and_stops_cleanly_on_sigterm(make_node):
    node = make_node()
    pidfile = node.home / "cassinid.pid"
    node.start("-p", str(pidfile))
    assert node.wait_for_log("cassinid ready"), node.log()
    assert node.proc.poll() is None, "cassinid exited early"
    assert pidfile.read_text().strip() == str(node.proc.pid)
    # Its directories exist and belong to this cluster.
    assert (node.home / "data" / "commitlog").is_dir()
    assert (node.home / "data" / "data" / "cassini-cluster").read_text() \
        == "Integration\n"
    assert node.stop(signal.SIGTERM, timeout=5) == 0
    log = node.log()
    assert "shutting down (SIGTERM)" in log
    assert "shutdown complete" in log
    assert not pidfile.exists()


def test_sigint_also_stops_cleanly(make_node):
    node = make_node()
    node.start()
    assert node.wait_for_log("cassinid ready")
    assert node.stop(signal.SIGINT) == 0
    assert "shutting down (SIGINT)" in node.log()


def one_line_error(node):
    """Starts the node expecting a configuration refusal: exit 2, one line."""
    proc = node.start()
    assert proc.wait(timeout=10) == 2
    node.stderr_file.close()
    err = node.stderr_path.read_text()
    assert err.count("\n") == 1, err
    return err


def test_unknown_key_is_refused_with_file_line_and_key(make_node):
    node = make_node(default_yaml() + "num_token: 16\n")
    err = one_line_error(node)
    assert "node.yaml:4: unknown key 'num_token'" in err
    assert "did you mean 'num_tokens'?" in err


def test_out_of_range_value_is_refused(make_node):
    node = make_node(default_yaml(phi_convict_threshold="42"))
    err = one_line_error(node)
    assert "phi_convict_threshold: 42 is out of range (5 to 16)" in err


def test_bad_unit_is_refused(make_node):
    node = make_node(default_yaml(write_request_timeout="2 seconds"))
    err = one_line_error(node)
    assert "write_request_timeout: invalid duration '2 seconds'" in err


def test_data_directory_of_another_cluster_is_refused(make_node, tmp_path):
    node = make_node()
    node.start()
    assert node.wait_for_log("cassinid ready")
    assert node.stop() == 0
    # Same home, new cluster name.
    (node.conf / "node.yaml").write_text(
        default_yaml(cluster_name="'Other'"))
    err = one_line_error(node)
    assert "belongs to cluster 'Integration', not 'Other'" in err


def test_second_process_on_same_data_is_refused(make_node):
    node = make_node()
    node.start()
    assert node.wait_for_log("cassinid ready")
    r = run("-c", str(node.conf))
    assert r.returncode == 1
    assert "is in use by another cassinid (pid %d)" % node.proc.pid in r.stderr
    assert node.stop() == 0


def test_unwritable_log_directory_is_a_clear_runtime_error(make_node, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    node = make_node(default_yaml(log_directory=str(blocker / "logs")))
    proc = node.start()
    assert proc.wait(timeout=10) == 1
    node.stderr_file.close()
    assert "log_directory" in node.stderr_path.read_text()


def test_sighup_reopens_the_log_after_rotation(make_node):
    """logrotate moves system.log away and sends SIGHUP: the node goes on
    in a new system.log (before, SIGHUP killed it). cassini-tool -c finds
    the node's admin endpoint from its node.yaml (the unit drains with
    it)."""
    node = make_node(default_yaml(listen_address="127.0.40.1"))
    node.start()
    assert node.wait_for_log("cassinid ready"), node.log()
    rotated = node.log_path.with_name("system.log.1")
    node.log_path.rename(rotated)
    node.proc.send_signal(signal.SIGHUP)
    assert node.wait_for_log("reopened"), rotated.read_text()
    assert node.proc.poll() is None
    assert "reopened" not in rotated.read_text()
    tool = CASSINID.parent / "cassini-tool"
    r = subprocess.run([str(tool), "-c", str(node.conf), "version"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and r.stdout.startswith("ReleaseVersion"), r
    assert node.stop(signal.SIGTERM, timeout=10) == 0
    assert "shutdown complete" in node.log()


def test_the_log_names_the_internode_listen_address(make_node):
    """The start-up line names the address internode messaging listens on
    (it once printed uninitialised bytes, which made system.log invalid
    UTF-8 for the tests that read it)."""
    node = make_node(default_yaml(listen_address="127.0.40.2"))
    node.start()
    assert node.wait_for_log("cassinid ready"), node.log()
    raw = node.log_path.read_bytes()
    raw.decode("utf-8")  # every byte is text
    assert b"internode messaging listening on 127.0.40.2:7000\n" in raw, raw
    assert node.stop(signal.SIGTERM, timeout=10) == 0


def test_a_start_that_fails_after_tokens_exits_1(make_node):
    """The CQL port taken by another process: the node stops once it has
    chosen its tokens and cannot serve, and says so with its exit code."""
    ip = "127.0.85.41"
    s = socket.socket()
    s.bind((ip, 9042))
    s.listen(1)
    try:
        node = make_node(default_yaml(listen_address=ip, rpc_address=ip,
                                      seed_provider=seeds_yaml(ip)))
        proc = node.start()
        assert proc.wait(timeout=60) == 1, node.log()
        assert "cannot listen for CQL clients" in node.log()
    finally:
        s.close()
