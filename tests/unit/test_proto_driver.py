"""The native-protocol codec against the DataStax Python driver itself:
our responses decoded by the driver's ProtocolHandler, and requests encoded
by the driver's message classes decoded by our codec (cql_proto_cli)."""
import os
import pathlib
import struct
import subprocess

from cassandra import ConsistencyLevel
from cassandra.protocol import (BatchMessage, ExecuteMessage, OptionsMessage,
                                PrepareMessage, ProtocolHandler, QueryMessage,
                                RegisterMessage, StartupMessage)
from cassandra.query import BatchType

BUILD = pathlib.Path(os.environ["CASSINI_BUILD_DIR"])
CLI = BUILD / "tests" / "unit" / "cql_proto_cli"


def encoded():
    out = subprocess.run([str(CLI), "encode"], capture_output=True, text=True,
                         check=True).stdout
    return {name: bytes.fromhex(h) for name, h in
            (l.split() for l in out.splitlines())}


FRAMES = encoded()


def driver_decode(frame):
    version = frame[0] & 0x7f
    assert frame[0] & 0x80, "responses carry the direction bit"
    flags, stream, opcode = frame[1], struct.unpack(">h", frame[2:4])[0], \
        frame[4]
    (length,) = struct.unpack(">i", frame[5:9])
    body = frame[9:]
    assert len(body) == length
    msg = ProtocolHandler.decode_message(version, {}, stream, flags, opcode,
                                         body, None, None)
    return msg, stream


def test_ready_and_supported():
    msg, stream = driver_decode(FRAMES["ready"])
    assert type(msg).__name__ == "ReadyMessage" and stream == 1
    msg, _ = driver_decode(FRAMES["supported"])
    assert msg.cql_versions == ["3.4.5"]
    assert msg.options["COMPRESSION"] == ["lz4"]
    assert msg.options["PROTOCOL_VERSIONS"] == ["3/v3", "4/v4", "5/v5"]
    msg, _ = driver_decode(FRAMES["supported_nolz4"])
    # The driver reads options['COMPRESSION'] unconditionally: it must exist.
    assert msg.options["COMPRESSION"] == []


def test_version_refusal_has_the_text_drivers_downgrade_on():
    frame = FRAMES["version_error"]
    assert frame[0] == 0x84, "always a v4 frame"
    msg, stream = driver_decode(frame)
    assert stream == 7
    exc = msg.to_exception()
    assert type(exc).__name__ == "ProtocolException"
    assert "unsupported protocol version" in str(msg.summary_msg()) or \
        "unsupported protocol version" in msg.message
    assert msg.message == ("Invalid or unsupported protocol version (6); "
                           "supported versions are (3/v3, 4/v4, 5/v5)")


def test_errors_arrive_as_the_drivers_exception_classes():
    expect = {
        "server_error": ("ServerError", {}),
        "syntax_error": ("SyntaxException", {}),
        "invalid": ("InvalidRequest", {}),
        "unavailable": ("Unavailable", {"consistency": 4,
                                        "required_replicas": 2,
                                        "alive_replicas": 1}),
        "write_timeout": ("WriteTimeout", {"consistency": 4,
                                           "received_responses": 1,
                                           "required_responses": 2}),
        "read_timeout": ("ReadTimeout", {"consistency": 5,
                                         "received_responses": 1,
                                         "required_responses": 3,
                                         "data_retrieved": True}),
        "read_failure": ("ReadFailure", {"failures": 1,
                                         "data_retrieved": False}),
        "write_failure": ("WriteFailure", {"failures": 1}),
        "already_exists_table": ("AlreadyExists", {"keyspace": "ks",
                                                   "table": "kv"}),
        "already_exists_keyspace": ("AlreadyExists", {"keyspace": "ks",
                                                      "table": ""}),
    }
    for name, (cls, attrs) in expect.items():
        msg, _ = driver_decode(FRAMES[name])
        exc = msg.to_exception()
        assert type(exc).__name__ == cls, name
        for k, v in attrs.items():
            assert getattr(exc, k) == v, (name, k, getattr(exc, k))
    from cassandra.policies import WriteType
    msg, _ = driver_decode(FRAMES["write_timeout"])
    assert msg.to_exception().write_type == WriteType.BATCH_LOG
    msg, _ = driver_decode(FRAMES["unprepared"])
    assert type(msg).__name__ == "PreparedQueryNotFound"
    assert msg.info == b"\x0a\x0b"  # the id the driver re-prepares


def test_results_and_events():
    msg, _ = driver_decode(FRAMES["result_void"])
    assert msg.kind == 1
    msg, _ = driver_decode(FRAMES["result_set_keyspace"])
    assert msg.new_keyspace == "ks"
    msg, _ = driver_decode(FRAMES["result_schema_table"])
    assert msg.schema_change_event == {"change_type": "CREATED",
                                       "target_type": "TABLE",
                                       "keyspace": "ks", "table": "kv"}
    msg, _ = driver_decode(FRAMES["result_schema_keyspace"])
    assert msg.schema_change_event == {"change_type": "DROPPED",
                                       "target_type": "KEYSPACE",
                                       "keyspace": "ks"}
    msg, stream = driver_decode(FRAMES["event_topology"])
    assert stream == -1
    assert msg.event_type == "TOPOLOGY_CHANGE"
    assert msg.event_args == {"change_type": "NEW_NODE",
                              "address": ("127.0.0.2", 9042)}
    msg, _ = driver_decode(FRAMES["event_status"])
    assert msg.event_args["change_type"] == "DOWN"
    msg, _ = driver_decode(FRAMES["event_schema"])
    assert msg.event_args["table"] == "kv"


def test_rows_with_metadata_paging_and_collections():
    msg, _ = driver_decode(FRAMES["result_rows"])
    assert msg.column_names == ["k", "tags", "m"]
    assert [t.cql_parameterized_type() for t in msg.column_types] == \
        ["int", "set<varchar>", "map<varchar, int>"]
    assert msg.paging_state == b"PAGE"
    assert msg.parsed_rows == [(42, {"a"}, None)] or \
        list(msg.parsed_rows) == [(42, {"a"}, None)]
    assert msg.column_metadata[0][:2] == ("ks", "kv")
    msg, _ = driver_decode(FRAMES["result_rows_mixed"])
    assert [c[:3] for c in msg.column_metadata] == \
        [("ks", "kv", "k"), ("system", "local", "key")]


def test_prepared_carries_partition_key_indexes():
    msg, _ = driver_decode(FRAMES["result_prepared_insert"])
    assert msg.query_id == b"\x0a\x0b"
    assert msg.pk_indexes == [0]
    assert [c[2] for c in msg.bind_metadata] == ["k", "tags", "m"]
    assert not msg.column_metadata
    msg, _ = driver_decode(FRAMES["result_prepared_select"])
    assert [c[2] for c in msg.column_metadata] == ["k", "tags", "m"]


def our_decode(msg, stream=5, version=4):
    frame = ProtocolHandler.encode_message(msg, stream, version, None, False)
    r = subprocess.run([str(CLI), "decode", frame.hex()], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "left 0", "trailing bytes: " + r.stdout
    return lines


def test_startup_options_register_prepare():
    lines = our_decode(StartupMessage("3.4.5", {"DRIVER_NAME": "DataStax"}))
    assert "option CQL_VERSION=3.4.5" in lines
    assert "option DRIVER_NAME=DataStax" in lines
    assert our_decode(OptionsMessage())[0].endswith("opcode=5 length=0")
    lines = our_decode(RegisterMessage(["TOPOLOGY_CHANGE", "SCHEMA_CHANGE"]))
    assert lines[1:3] == ["event TOPOLOGY_CHANGE", "event SCHEMA_CHANGE"]
    lines = our_decode(PrepareMessage("INSERT INTO ks.kv (k) VALUES (?)"))
    assert lines[1] == "prepare INSERT INTO ks.kv (k) VALUES (?)"


def test_query_with_paging_and_timestamp_as_the_driver_sends_it():
    msg = QueryMessage("SELECT * FROM ks.kv", ConsistencyLevel.LOCAL_ONE,
                       fetch_size=5000, timestamp=1700000000000001,
                       paging_state=b"\x01\x02")
    lines = our_decode(msg, stream=300)
    assert "stream=300" in lines[0]
    assert lines[1] == "query SELECT * FROM ks.kv"
    assert ("params consistency=10 flags=44 values=0 page_size=5000 "
            "paging_state=0102 serial=8 timestamp=1700000000000001") == lines[2]


def test_execute_with_values_null_and_unset():
    params = [struct.pack(">i", 1), None, b"abc"]
    msg = ExecuteMessage(b"\xca\xfe", params, ConsistencyLevel.QUORUM,
                         serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL,
                         fetch_size=100)
    lines = our_decode(msg)
    assert lines[1] == "execute id=cafe"
    assert lines[2].startswith("params consistency=4 ")
    assert "values=3 page_size=100" in lines[2] and "serial=9" in lines[2]
    assert lines[3:6] == ["value 0 hex=00000001", "value 1 null",
                          "value 2 hex=616263"]
    # The driver's UNSET_VALUE becomes length -2 in v4.
    from cassandra.query import UNSET_VALUE
    msg = ExecuteMessage(b"\x01", [UNSET_VALUE], ConsistencyLevel.ONE)
    assert "value 0 unset" in our_decode(msg)


def test_batch_mixing_prepared_and_plain_statements():
    queries = [(False, "INSERT INTO ks.kv (k) VALUES (1)", []),
               (True, b"\xab\xcd", [struct.pack(">i", 7), None])]
    msg = BatchMessage(BatchType.UNLOGGED, queries, ConsistencyLevel.ALL,
                       timestamp=42)
    lines = our_decode(msg)
    assert lines[1] == "batch type=1 count=2 consistency=5 flags=32 timestamp=42"
    assert lines[2] == "statement query INSERT INTO ks.kv (k) VALUES (1)"
    assert lines[3] == "statement id=abcd"
    assert lines[4:6] == ["value 0 hex=00000007", "value 1 null"]


def test_protocol_v3_frames_decode_too():
    msg = QueryMessage("SELECT 1", ConsistencyLevel.ONE, fetch_size=10)
    lines = our_decode(msg, version=3)
    assert "version=3" in lines[0]
    assert "page_size=10" in lines[2]


def test_protocol_v5_requests_as_the_driver_sends_them():
    # [int] flags, the keyspace flag (0x80), PREPARE's flags and keyspace,
    # EXECUTE's result_metadata_id
    msg = QueryMessage("SELECT 1", ConsistencyLevel.ONE, fetch_size=10,
                       keyspace="ks5")
    lines = our_decode(msg, version=5)
    assert "version=5" in lines[0]
    assert lines[2] == ("params consistency=1 flags=132 values=0 "
                        "page_size=10 serial=8 keyspace=ks5")
    lines = our_decode(PrepareMessage("SELECT 1", keyspace="ks6"), version=5)
    assert lines[1:3] == ["prepare SELECT 1", "prepare keyspace=ks6"]
    lines = our_decode(PrepareMessage("SELECT 1"), version=5)
    assert lines[1] == "prepare SELECT 1" and len(lines) == 3
    msg = ExecuteMessage(b"\xca\xfe", [b"x"], ConsistencyLevel.ONE,
                         result_metadata_id=b"\x12\x34")
    lines = our_decode(msg, version=5)
    assert lines[1] == "execute id=cafe result_metadata_id=1234"
    assert lines[3] == "value 0 hex=78"
    queries = [(True, b"\xab", [struct.pack(">i", 7)])]
    msg = BatchMessage(BatchType.LOGGED, queries, ConsistencyLevel.ONE,
                       timestamp=9, keyspace="ks7")
    lines = our_decode(msg, version=5)
    assert lines[1] == ("batch type=0 count=1 consistency=1 flags=160 "
                        "timestamp=9 keyspace=ks7")


def test_protocol_v5_results_and_errors_as_the_driver_reads_them():
    msg, _ = driver_decode(FRAMES["result_prepared_select_v5"])
    assert msg.query_id == b"\x0a\x0b"
    assert len(msg.result_metadata_id) == 16
    assert [c[2] for c in msg.column_metadata] == ["k", "tags", "m"]
    rows, _ = driver_decode(FRAMES["result_rows_changed_v5"])
    assert rows.result_metadata_id == msg.result_metadata_id
    assert rows.paging_state == b"PAGE"
    assert rows.column_names == ["k", "tags", "m"]
    assert list(rows.parsed_rows) == [(42, None, None)]
    msg, _ = driver_decode(FRAMES["read_failure_v5"])
    exc = msg.to_exception()
    assert type(exc).__name__ == "ReadFailure"
    assert exc.failures == 2 and exc.data_retrieved
    assert exc.error_code_map == {"127.0.0.2": 1, "127.0.0.3": 0}
    msg, _ = driver_decode(FRAMES["write_failure_v5"])
    exc = msg.to_exception()
    assert exc.failures == 1 and exc.error_code_map == {"127.0.0.2": 1}
