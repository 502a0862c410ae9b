"""CQL literal conversion (client/cql/cql_values.c) against the DataStax
driver's own serializers for the same values."""
import datetime
import decimal
import os
import pathlib
import random
import subprocess
import uuid
from collections import OrderedDict

from cassandra import cqltypes, util

BUILD = pathlib.Path(os.environ["CASSINI_BUILD_DIR"])
CLI = BUILD / "tests" / "unit" / "cql_values_cli"

T = {
    "int": cqltypes.Int32Type, "bigint": cqltypes.LongType,
    "smallint": cqltypes.ShortType, "tinyint": cqltypes.ByteType,
    "varint": cqltypes.IntegerType, "decimal": cqltypes.DecimalType,
    "double": cqltypes.DoubleType, "float": cqltypes.FloatType,
    "text": cqltypes.UTF8Type, "ascii": cqltypes.AsciiType,
    "boolean": cqltypes.BooleanType, "blob": cqltypes.BytesType,
    "timestamp": cqltypes.DateType, "date": cqltypes.SimpleDateType,
    "time": cqltypes.TimeType, "inet": cqltypes.InetAddressType,
    "uuid": cqltypes.UUIDType, "timeuuid": cqltypes.TimeUUIDType,
    "duration": cqltypes.DurationType,
}


def run(cases):
    inp = "".join(f"{t}\t{lit}\n" for t, lit in cases)
    out = subprocess.run([str(CLI)], input=inp, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert len(out) == len(cases)
    return out


def driver(typ, value):
    if ":" in typ:
        kind, *args = typ.split(":")
        sub = [T[a] for a in args]
        ct = {"list": cqltypes.ListType, "set": cqltypes.SetType,
              "map": cqltypes.MapType}[kind].apply_parameters(sub)
        return ct.serialize(value, 4).hex()
    return T[typ].serialize(value, 4).hex()


def check(cases):
    """cases: (type, literal, python value)"""
    got = run([(t, lit) for t, lit, _ in cases])
    for (t, lit, value), g in zip(cases, got):
        assert g == driver(t, value), f"{t} {lit}: {g}"


def test_integers_and_varints():
    cases = [("int", "42", 42), ("int", "-2147483648", -2**31),
             ("int", "2147483647", 2**31 - 1), ("bigint", "-1", -1),
             ("bigint", "9223372036854775807", 2**63 - 1),
             ("smallint", "-32768", -32768), ("tinyint", "127", 127),
             ("double", "3", 3.0), ("float", "-7", -7.0)]
    rng = random.Random(5)
    for _ in range(300):
        v = rng.choice([rng.randint(-300, 300), rng.randint(-2**70, 2**70),
                        rng.randint(-2**200, 2**200), -128, 128, 255, -129,
                        256, 0, -1, 127, 32767, -32769])
        cases.append(("varint", str(v), v))
    check(cases)


def test_decimals_and_floats():
    cases = []
    for lit in ["1.5e3", "-0.001", "123", "0", "1E+10", "-12.34e-5",
                "100.00", "3.14159265358979323846264338327950288"]:
        cases.append(("decimal", lit, decimal.Decimal(lit)))
    for lit in ["1.25", "-0.1", "1e300", "2.5E-3", "Infinity", "-Infinity"]:
        cases.append(("double", lit, float(lit)))
        if "300" not in lit:
            cases.append(("float", lit, float(lit)))
    check(cases)


def test_dates_times_and_timestamps():
    utc = datetime.timezone.utc
    cases = [
        ("timestamp", "'2024-01-31 13:45:00+0100'",
         datetime.datetime(2024, 1, 31, 12, 45, tzinfo=utc)),
        ("timestamp", "'2024-01-31T13:45:00.123Z'",
         datetime.datetime(2024, 1, 31, 13, 45, 0, 123000, tzinfo=utc)),
        ("timestamp", "'2024-02-29'", datetime.datetime(2024, 2, 29,
                                                         tzinfo=utc)),
        ("timestamp", "'1969-07-20 20:17:40'",
         datetime.datetime(1969, 7, 20, 20, 17, 40, tzinfo=utc)),
        ("timestamp", "'2000-01-01 00:00-05:30'",
         datetime.datetime(2000, 1, 1, 5, 30, tzinfo=utc)),
        ("timestamp", "1700000000000", 1700000000000),
        ("date", "'2024-02-29'", datetime.date(2024, 2, 29)),
        ("date", "'1900-01-01'", datetime.date(1900, 1, 1)),
        ("date", "'1970-01-01'", datetime.date(1970, 1, 1)),
        ("time", "'13:45:00.123456789'", util.Time("13:45:00.123456789")),
        ("time", "'00:00:01'", util.Time("00:00:01")),
        ("time", "3600000000000", 3600000000000),
    ]
    check(cases)


def test_text_uuid_inet_blob_boolean():
    u = uuid.UUID("550e8400-e29b-41d4-a716-446655440000")
    tu = uuid.UUID("e2a5d6e0-c03a-11ee-8080-808080808080")
    cases = [
        ("text", "'héllo wörld'", "héllo wörld"),
        ("text", "'it''s'", "it's"), ("text", "$$raw 'x'$$", "raw 'x'"),
        ("ascii", "'plain'", "plain"),
        ("uuid", str(u), u), ("timeuuid", str(tu), tu),
        ("inet", "'10.0.0.1'", "10.0.0.1"), ("inet", "'::1'", "::1"),
        ("blob", "0xCAFEbabe", bytes.fromhex("cafebabe")),
        ("blob", "0x", b""), ("boolean", "true", True),
        ("boolean", "FALSE", False),
    ]
    check(cases)


def test_collections_sort_and_deduplicate():
    cases = [
        ("list:int", "[3, 1, 2, 1]", [3, 1, 2, 1]),
        ("set:text", "{'b', 'a', 'b'}", ["a", "b"]),
        ("set:int", "{}", []),
        ("map:text:int", "{'b': 1, 'a': 2, 'b': 3}",
         OrderedDict([("a", 2), ("b", 3)])),
        ("map:text:int", "{}", OrderedDict()),
        ("list:text", "[]", []),
    ]
    check(cases)


def test_errors_use_cassandras_words():
    got = run([("int", "'x'"), ("int", "99999999999"), ("text", "1"),
               ("timeuuid", "550e8400-e29b-41d4-a716-446655440000"),
               ("blob", "'x'"), ("blob", "0xabc"), ("timestamp", "'2024-13-01'"),
               ("date", "'2023-02-29'"), ("inet", "'nope'"),
               ("list:int", "{1}"), ("set:int", "{1: 2}"),
               ("list:int", "[1, null]"), ("int", "now()"),
               ("tinyint", "128"), ("ascii", "'é'"), ("int", "null"),
               ("time", "'25:00:00'"), ("uuid", "1.5")])
    assert got == [
        'ERR Invalid STRING constant (x) for "v" of type int',
        "ERR Unable to make int from '99999999999'",
        'ERR Invalid INTEGER constant (1) for "v" of type text',
        "ERR Invalid version for TimeUUID type.",
        'ERR Invalid STRING constant (x) for "v" of type blob',
        "ERR cannot parse '0xabc' as hex bytes",
        "ERR Unable to coerce '2024-13-01' to a formatted date (long)",
        "ERR Unable to coerce '2023-02-29' to a formatted date (long)",
        "ERR Unable to make inet address from 'nope'",
        "ERR Invalid set literal for v of type list<int>",
        "ERR Invalid map literal for v of type set<int>",
        "ERR null is not supported inside collections",
        "ERR Type error: cannot assign result of function system.now "
        "(type timeuuid) to v (type int)",
        "ERR Unable to make byte from '128'",
        "ERR Invalid ASCII character in string literal: "
        "java.nio.charset.UnmappableCharacterException: Input length = 1",
        "NULL",
        "ERR Timestamp format must be hh:mm:ss[.fffffffff]",
        'ERR Invalid FLOAT constant (1.5) for "v" of type uuid',
    ]


def test_functions_use_the_statement_clock():
    got = run([("timeuuid", "now()"), ("timeuuid", "now()"),
               ("timestamp", "toTimestamp(now())"),
               ("timestamp", "currentTimestamp()"),
               ("date", "toDate(now())"), ("time", "currentTime()"),
               ("bigint", "toUnixTimestamp(now())"), ("uuid", "uuid()"),
               ("uuid", "now()")])
    t1, t2 = uuid.UUID(hex=got[0]), uuid.UUID(hex=got[1])
    assert t1.version == 1 and t2.version == 1 and t1 != t2
    assert util.unix_time_from_uuid1(t1) == 1706702400.0
    assert t2.time == t1.time + 1  # same clock: one 100 ns tick later
    assert got[2] == got[3] == driver("timestamp", 1706702400000)
    assert got[4] == driver("date", datetime.date(2024, 1, 31))
    assert got[5] == driver("time", 12 * 3600 * 10**9)
    assert got[6] == driver("bigint", 1706702400000)
    assert uuid.UUID(hex=got[7]).version == 4
    assert uuid.UUID(hex=got[8]).version == 1


def test_duration_literals_are_cassandras():
    """Duration.from's forms, against the driver's DurationType encoding
    (three zig-zag vints: months, days, nanoseconds)."""
    D = util.Duration
    h, m, s_, ms = 3600 * 10**9, 60 * 10**9, 10**9, 10**6
    check([
        ("duration", "1h30m", D(0, 0, h + 30 * m)),
        ("duration", "1y3mo2w4d", D(15, 18, 0)),
        ("duration", "12h30m15s250ms7us3ns",
         D(0, 0, 12 * h + 30 * m + 15 * s_ + 250 * ms + 7000 + 3)),
        ("duration", "1µs", D(0, 0, 1000)),
        ("duration", "2MO", D(2, 0, 0)),
        ("duration", "-1d2h", D(0, -1, -2 * h)),
        ("duration", "P1Y2M3DT4H5M6S", D(14, 3, 4 * h + 5 * m + 6 * s_)),
        ("duration", "PT10M", D(0, 0, 10 * m)),
        ("duration", "P2W", D(0, 14, 0)),
        ("duration", "-P0001-02-03T04:05:06",
         D(-14, -3, -(4 * h + 5 * m + 6 * s_))),
        ("duration", "0s", D(0, 0, 0)),
    ])
    got = run([("duration", "1h1h"), ("duration", "1s1h"),
               ("duration", "7"), ("duration", "'1h'"),
               ("duration", "2147483648mo"), ("int", "1h")])
    assert got == [
        "ERR Invalid duration. The hours are specified multiple times",
        "ERR Invalid duration. The seconds should be after hours",
        "ERR Unable to convert '7' to a duration",
        'ERR Invalid STRING constant (1h) for "v" of type duration',
        "ERR Invalid duration. The total number of months must be less "
        "or equal to 2147483647",
        'ERR Invalid DURATION constant (1h) for "v" of type int',
    ]
