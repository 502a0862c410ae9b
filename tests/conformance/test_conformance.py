"""The CQL conformance suite: statement sequences with the rows or the
error Cassandra 4.1 answers, run through the stock DataStax driver against
a real cassinid.

Cases live in tests/conformance/<area>.cql, one file per CQL area (types,
dml, select, paging, collections, statics, ttl, batch, ddl, errors, ...).
CTest runs each area as its own test (`conformance_<area>`), each against
a node of its own; by hand:

    CASSINI_BUILD_DIR=build/dev CASSINI_CONFORMANCE_AREA=select \\
        /usr/bin/python3 -m pytest -q tests/conformance/test_conformance.py

(without CASSINI_CONFORMANCE_AREA every area runs against one node).

The format (see tests/conformance/README.md):

    === a case title                 starts a case (a fresh keyspace, USEd)
    -- a comment
    CREATE TABLE t (k int PRIMARY KEY, v int);   a statement (ends with ;)
    SELECT * FROM t WHERE k = ?;
    @ (1,)                           prepare it, execute with these values
    > (1, 2)                         an expected row, in order
    >cols k, v                       the expected column names
    > -                              no rows
    ! InvalidRequest: message        the expected error (class: message)

`$ks` in a statement, a message or an expected row's strings is the
case's keyspace.

Statements without an expectation must succeed (a SELECT's rows are then
not checked). After every case the node must still be alive.
"""
import datetime
import decimal
import ipaddress
import math
import os
import pathlib
import re
import subprocess
import sys
import uuid

import pytest
from cassandra import (AlreadyExists, FunctionFailure, InvalidRequest,
                       ReadFailure, ReadTimeout, Unauthorized, Unavailable,
                       WriteFailure, WriteTimeout)
from cassandra.cluster import Cluster, NoHostAvailable
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.protocol import (ConfigurationException, ProtocolException,
                                ServerError, SyntaxException)
from cassandra.query import UNSET_VALUE, BatchStatement, SimpleStatement
from cassandra.util import Date, Duration, Time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] /
                       "integration"))
from conftest import BUILD_DIR, Node, default_yaml  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
TOOL = BUILD_DIR / "node" / "cassini-tool"

# One loopback address per area, so CTest runs areas in parallel.
AREAS = sorted(p.stem for p in HERE.glob("*.cql"))
BLOCK = os.environ.get("CASSINI_CONFORMANCE_BLOCK", "127.0.70.")

ERRORS = {c.__name__: c for c in (
    AlreadyExists, ConfigurationException, FunctionFailure, InvalidRequest,
    ProtocolException,
    ReadFailure, ReadTimeout, ServerError, SyntaxException, Unauthorized,
    Unavailable, WriteFailure, WriteTimeout)}

# Names an expected row or a bound value may use.
VALUES = {
    "UNSET": UNSET_VALUE, "UUID": uuid.UUID, "Decimal": decimal.Decimal,
    "datetime": datetime.datetime, "date": datetime.date,
    "Date": Date, "Time": Time, "Duration": Duration,
    "inet": ipaddress.ip_address, "nan": float("nan"),
    "inf": float("inf"), "set": set, "frozenset": frozenset,
}


class Step:
    def __init__(self, line, cql):
        self.line = line
        self.cql = cql
        self.binds = None
        self.raw = False
        self.fetch = None
        self.rows = None      # list of tuples; [] for "no rows"
        self.columns = None
        self.types = None     # CQL type names of the result's columns
        self.error = None     # (class name, message or None)
        self.directive = None


class Case:
    def __init__(self, area, title, line):
        self.area = area
        self.title = title
        self.line = line
        self.steps = []

    def __repr__(self):
        return f"{self.area}.cql:{self.line}: {self.title}"


def split_top(text):
    """`a, f(b, c), map<int, text>` -> its items: commas inside (), <>
    or [] do not split."""
    items, depth, cur = [], 0, ""
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
        else:
            cur += ch
    items.append(cur.strip())
    return items

def parse(path):
    cases = []
    case = None
    pending = []       # lines of a statement not yet ended with ;
    pending_line = 0
    lines = path.read_text().splitlines()
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip()
        where = f"{path.name}:{n}"
        if pending:
            pending.append(line)
            if line.endswith(";"):
                text = "\n".join(pending)[:-1]
                case.steps.append(Step(pending_line, text))
                pending = []
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("--"):
            continue
        if stripped.startswith("==="):
            case = Case(path.stem, stripped[3:].strip(), n)
            cases.append(case)
            continue
        assert case is not None, f"{where}: a line before the first ==="
        last = case.steps[-1] if case.steps else None
        if stripped.startswith("%"):
            st = Step(n, None)
            st.directive = stripped[1:].split()
            case.steps.append(st)
        elif stripped.startswith("@"):
            assert last and last.cql, f"{where}: @ without a statement"
            words = stripped[1:].strip()
            if words.startswith("fetch"):
                last.fetch = int(words.split()[1])
                continue
            for via in ("rawquery", "rawbatch", "raw"):
                if words.startswith(via):
                    last.raw = via
                    words = words[len(via):].strip()
                    break
            last.binds = eval(words, {"__builtins__": {"__import__": __import__}}, dict(VALUES))
            assert isinstance(last.binds, (tuple, list)), \
                f"{where}: @ takes a tuple of values"
        elif stripped.startswith(">types"):
            assert last and last.cql, f"{where}: >types without a statement"
            last.types = split_top(stripped[6:])
        elif stripped.startswith(">cols"):
            assert last and last.cql, f"{where}: >cols without a statement"
            last.columns = split_top(stripped[5:])
        elif stripped.startswith(">"):
            assert last and last.cql, f"{where}: > without a statement"
            text = stripped[1:].strip()
            if last.rows is None:
                last.rows = []
            if text != "-":
                row = eval(text, {"__builtins__": {"__import__": __import__}}, dict(VALUES))
                if not isinstance(row, tuple):
                    row = (row,)
                last.rows.append(row)
        elif stripped.startswith("!"):
            assert last and last.cql, f"{where}: ! without a statement"
            cls, _, msg = stripped[1:].strip().partition(":")
            assert cls.strip() in ERRORS, f"{where}: unknown error {cls}"
            msg = msg.strip()
            if len(msg) >= 2 and msg[0] == msg[-1] == '"':
                msg = msg[1:-1]  # "quoted": kept as is (trailing spaces)
            last.error = (cls.strip(), msg or None)
        else:
            pending = [line]
            pending_line = n
            if line.endswith(";"):
                case.steps.append(Step(n, line[:-1]))
                pending = []
    assert not pending, f"{path.name}: a statement without its ;"
    return cases


def same(a, b):
    """Expected value `a` against the driver's `b`."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=1e-6)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and hasattr(b, "items"):
        return dict(a) == dict(b.items())
    if isinstance(a, (set, frozenset)) and b is not None and \
            not isinstance(b, (str, bytes)):
        try:
            return set(a) == set(b)
        except TypeError:
            return False
    if isinstance(a, str) and isinstance(b, (ipaddress.IPv4Address,
                                             ipaddress.IPv6Address)):
        return a == str(b)
    return a == b


def message_of(e):
    m = re.search(r'message="(.*)"', str(e), re.S)
    if m:
        return m.group(1)
    return getattr(e, "message", str(e))


def unwrap(e):
    """NoHostAvailable hides the server's answer (a ServerError makes the
    driver try the next host): the first error it carries."""
    if isinstance(e, NoHostAvailable) and e.errors:
        return next(iter(e.errors.values()))
    return e


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    area = os.environ.get("CASSINI_CONFORMANCE_AREA")
    index = AREAS.index(area) + 1 if area in AREAS else 1
    address = BLOCK + str(index)
    home = tmp_path_factory.mktemp("conformance")
    n = Node(home, default_yaml(listen_address=address))
    n.start()
    assert n.wait_for_log("CQL clients on", timeout=30), n.log()
    cluster = Cluster([address],
                      load_balancing_policy=WhiteListRoundRobinPolicy(
                          [address]))
    session = cluster.connect()
    yield n, address, session
    cluster.shutdown()
    n.kill()


def selected_cases(area):
    areas = [area] if area else AREAS
    out = []
    for a in areas:
        out.extend(parse(HERE / f"{a}.cql"))
    return out


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        area = os.environ.get("CASSINI_CONFORMANCE_AREA")
        cases = selected_cases(area)
        metafunc.parametrize("case", cases, ids=[
            f"{c.area}:{c.line}:{c.title}" for c in cases])


def run_step(session, address, keyspace, st):
    cql = st.cql.replace("$ks", keyspace) if st.cql else None
    if st.directive:
        verb = st.directive[0]
        if verb in ("flush", "compact"):
            r = subprocess.run([str(TOOL), "-h", address, verb, keyspace],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stdout + r.stderr
            return
        raise AssertionError(f"unknown directive %{verb}")
    try:
        if st.raw == "rawquery":
            # QUERY with serialized values (drivers interpolate instead)
            future = session._create_response_future(
                SimpleStatement(cql), None, False, None, 10)
            future.message.query_params = list(st.binds)
            future.send_request()
            result = future.result()
        elif st.binds is not None:
            prepared = session.prepare(cql)
            if st.raw:
                bound = prepared.bind([None] * len(prepared.column_metadata))
                bound.values = list(st.binds)
                stmt = bound
                if st.raw == "rawbatch":  # a BATCH of this one statement
                    stmt = BatchStatement()
                    stmt.add(bound)
            else:
                stmt = prepared.bind(st.binds)
            if st.fetch is not None:
                stmt.fetch_size = st.fetch or None  # 0: no paging
            result = session.execute(stmt)
        else:
            stmt = SimpleStatement(cql, fetch_size=st.fetch or None)
            result = session.execute(stmt)
        rows = [tuple(r) for r in result]
        names = list(result.column_names or [])
    except Exception as e:  # noqa: BLE001 - every error is judged here
        e = unwrap(e)
        if st.error is None:
            raise AssertionError(
                f"line {st.line}: {st.cql!r} failed: "
                f"{type(e).__name__}: {message_of(e)}") from None
        cls, msg = st.error
        if msg is not None:
            msg = msg.replace("$ks", keyspace)
        assert type(e).__name__ == cls or isinstance(e, ERRORS[cls]), \
            (f"line {st.line}: {st.cql!r}: expected {cls}, got "
             f"{type(e).__name__}: {message_of(e)}")
        if msg is not None:
            got = message_of(e)
            if msg.endswith("..."):
                assert got.startswith(msg[:-3]), \
                    f"line {st.line}: message {got!r}, expected {msg!r}"
            else:
                assert got == msg, \
                    f"line {st.line}: message {got!r}, expected {msg!r}"
        return
    assert st.error is None, \
        f"line {st.line}: {st.cql!r} succeeded, expected {st.error}"
    if st.columns is not None:
        assert names == st.columns, \
            f"line {st.line}: columns {names}, expected {st.columns}"
    if st.types is not None:
        types = [t.cql_parameterized_type()
                 for t in (result.column_types or [])]
        assert types == st.types, \
            f"line {st.line}: types {types}, expected {st.types}"
    if st.rows is not None:
        want = [with_keyspace(e, keyspace) for e in st.rows]
        assert len(rows) == len(want) and all(
            same(e, g) for e, g in zip(want, rows)), \
            f"line {st.line}: {st.cql!r}\n  got      {rows}\n  expected {want}"


def with_keyspace(value, keyspace):
    """An expected value with `$ks` in its strings made the keyspace."""
    if isinstance(value, str):
        return value.replace("$ks", keyspace)
    if isinstance(value, tuple):
        return tuple(with_keyspace(v, keyspace) for v in value)
    if isinstance(value, list):
        return [with_keyspace(v, keyspace) for v in value]
    return value


counter = iter(range(1, 1 << 30))


def test_case(node, case):
    n, address, session = node
    keyspace = f"c{next(counter)}"
    session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.set_keyspace(keyspace)
    try:
        for st in case.steps:
            run_step(session, address, keyspace, st)
    finally:
        assert n.proc.poll() is None, f"the node died: {n.log()[-3000:]}"
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
