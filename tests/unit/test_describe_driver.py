"""Server-side DESCRIBE (Cassandra 4.0, CASSANDRA-14825, what cqlsh 4.x
sends) against the DataStax driver's own schema formatter: the driver builds
its metadata from our system_schema tables, and export_as_string() of a
keyspace or table must read exactly like the create_statement we return.

Where Cassandra's DESCRIBE and the driver's formatter disagree we follow
Cassandra, and the comparison adjusts the driver's text (only there):

* Cassandra prints "AND extensions = {}" (TableParams.appendCqlTo); the
  driver drops `extensions` from the options it formats.
* After the primary key Cassandra lists static columns, then regular ones,
  and within each simple columns before non-frozen collections
  (ColumnMetadata's comparison order); the driver lists them by name, in
  system_schema.columns order. Tables whose names sort the same way compare
  as is; test_column_order_is_cassandras checks a table where they differ.

No whitespace is normalised."""
import os
import pathlib
import subprocess

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Cluster
from cassandra.query import SimpleStatement

BUILD = pathlib.Path(os.environ["CASSINI_BUILD_DIR"])
SERVER = BUILD / "tests" / "unit" / "cql_exec_server"

ELEMENT_COLUMNS = ["keyspace_name", "type", "name", "create_statement"]
LIST_COLUMNS = ["keyspace_name", "type", "name"]
EXTENSIONS = "\n    AND extensions = {}"


@pytest.fixture
def server():
    proc = subprocess.Popen([str(SERVER)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    port = int(proc.stdout.readline().split()[1])
    clusters = []

    def connect():
        cluster = Cluster(["127.0.0.1"], port=port)
        clusters.append(cluster)
        return cluster, cluster.connect()
    try:
        yield connect
    finally:
        for c in clusters:
            c.shutdown()
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def session(server):
    return server()


SCHEMA = [
    "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
    "'replication_factor': 1}",
    "CREATE TABLE ks.simple (k int PRIMARY KEY, v text)",
    # Compound partition key, clustering DESC/ASC, a static column, frozen
    # and non-frozen collections, named so that the driver's by-name order
    # is also Cassandra's.
    "CREATE TABLE ks.events (day date, sensor text, ts timeuuid, seq int, "
    "a_static text static, b_val double, c_frozen frozen<map<text, int>>, "
    "d_tags set<text>, e_list list<int>, f_map map<int, text>, "
    "PRIMARY KEY ((day, sensor), ts, seq)) "
    "WITH CLUSTERING ORDER BY (ts DESC, seq ASC) "
    "AND default_time_to_live = 3600 AND comment = 'it''s a \"test\"'",
    # Quoted identifiers: upper case, spaces, a double quote, reserved words.
    'CREATE TABLE ks."QuotedTable" ("Key" text, "select" int, '
    '"with""quote" int, PRIMARY KEY ("Key", "select")) '
    "WITH gc_grace_seconds = 100 AND bloom_filter_fp_chance = 0.001 "
    "AND crc_check_chance = 0.5 AND speculative_retry = 'ALWAYS' "
    "AND read_repair = 'NONE' "
    "AND caching = {'keys': 'NONE', 'rows_per_partition': 'ALL'} "
    "AND memtable_flush_period_in_ms = 60000 "
    "AND min_index_interval = 64 AND max_index_interval = 4096",
    "CREATE TABLE ks.\"order\" (k int, c int, PRIMARY KEY (k, c)) "
    "WITH compression = {'enabled': 'false'} "
    "AND compaction = {'class': 'TimeWindowCompactionStrategy', "
    "'compaction_window_unit': 'HOURS', 'compaction_window_size': 2}",
    "CREATE TABLE ks.deflated (k bigint, v blob, PRIMARY KEY (k)) "
    "WITH compression = {'class': 'DeflateCompressor', "
    "'chunk_length_in_kb': 64} "
    "AND compaction = {'class': 'SizeTieredCompactionStrategy', "
    "'min_threshold': 2, 'max_threshold': 8}",
    "CREATE KEYSPACE \"Other\" WITH replication = {'class': "
    "'NetworkTopologyStrategy', 'dc1': 3} "
    "AND durable_writes = false",
    'CREATE TABLE "Other".t (k uuid PRIMARY KEY, i inet, d decimal, '
    "t timestamp, s smallint, y tinyint, vi varint, tm time, b boolean, "
    "f float, a ascii)",
]

TABLES = {"ks": ["deflated", "events", "order", "QuotedTable", "simple"],
          "Other": ["t"]}


def create(s):
    for q in SCHEMA:
        s.execute(q)


def rows(s, q):
    rs = s.execute(q)
    return rs.column_names, list(rs)


def test_describe_keyspace_matches_driver_export(session):
    cluster, s = session
    create(s)
    cluster.refresh_schema_metadata()
    for ks, tables in TABLES.items():
        meta = cluster.metadata.keyspaces[ks]
        names, got = rows(s, 'DESCRIBE KEYSPACE "%s"' % ks
                          if ks != ks.lower() else "DESCRIBE KEYSPACE " + ks)
        assert names == ELEMENT_COLUMNS
        quoted = '"%s"' % ks if ks != ks.lower() else ks
        assert [(r.keyspace_name, r.type) for r in got] == \
            [(quoted, "keyspace")] + [(quoted, "table")] * len(tables)
        # Tables by name, ignoring case (SchemaElement.NAME_COMPARATOR).
        assert [r.name for r in got[1:]] == \
            ['"%s"' % t if t in ("order", "QuotedTable") else t
             for t in tables]
        assert got[0].create_statement == meta.as_cql_query() + ";"
        for r, t in zip(got[1:], tables):
            ours = r.create_statement
            assert ours.count(EXTENSIONS) == 1
            assert ours.replace(EXTENSIONS, "") == \
                meta.tables[t].export_as_string(), t
        # The whole keyspace, as the driver exports it.
        assert "\n\n".join(r.create_statement.replace(EXTENSIONS, "")
                           for r in [got[0]] + sorted(
                               got[1:], key=lambda r: r.name.strip('"'))) \
            == meta.export_as_string()


def test_table_text(session):
    cluster, s = session
    create(s)
    _, got = rows(s, "DESCRIBE TABLE ks.events")
    assert len(got) == 1
    assert got[0].create_statement == """CREATE TABLE ks.events (
    day date,
    sensor text,
    ts timeuuid,
    seq int,
    a_static text static,
    b_val double,
    c_frozen frozen<map<text, int>>,
    d_tags set<text>,
    e_list list<int>,
    f_map map<int, text>,
    PRIMARY KEY ((day, sensor), ts, seq)
) WITH CLUSTERING ORDER BY (ts DESC, seq ASC)
    AND additional_write_policy = '99p'
    AND bloom_filter_fp_chance = 0.01
    AND caching = {'keys': 'ALL', 'rows_per_partition': 'NONE'}
    AND cdc = false
    AND comment = 'it''s a "test"'
    AND compaction = {'class': 'org.apache.cassandra.db.compaction.\
SizeTieredCompactionStrategy', 'max_threshold': '32', 'min_threshold': '4'}
    AND compression = {'chunk_length_in_kb': '16', 'class': \
'org.apache.cassandra.io.compress.LZ4Compressor'}
    AND crc_check_chance = 1.0
    AND default_time_to_live = 3600
    AND extensions = {}
    AND gc_grace_seconds = 864000
    AND max_index_interval = 2048
    AND memtable_flush_period_in_ms = 0
    AND min_index_interval = 128
    AND read_repair = 'BLOCKING'
    AND speculative_retry = '99p';"""
    _, got = rows(s, 'DESCRIBE TABLE ks."QuotedTable"')
    text = got[0].create_statement
    assert text.startswith('CREATE TABLE ks."QuotedTable" (\n'
                           '    "Key" text,\n    "select" int,\n'
                           '    "with""quote" int,\n'
                           '    PRIMARY KEY ("Key", "select")\n'
                           ') WITH CLUSTERING ORDER BY ("select" ASC)\n')
    # Java's Double.toString: 0.001 stays plain (1.0E-4 would not).
    assert "\n    AND bloom_filter_fp_chance = 0.001\n" in text
    _, got = rows(s, 'DESCRIBE TABLE ks."order"')
    assert "\n    AND compression = {'enabled': 'false'}\n" in \
        got[0].create_statement


def test_column_order_is_cassandras(session):
    cluster, s = session
    create(s)
    s.execute("CREATE TABLE ks.mixed (k int, c int, z_s int static, "
              "a int, b list<int>, y_s set<int> static, x frozen<set<int>>, "
              "PRIMARY KEY (k, c))")
    cluster.refresh_schema_metadata()
    ours = rows(s, "DESCRIBE TABLE ks.mixed")[1][0].create_statement
    cassandra_order = ["    k int,", "    c int,", "    z_s int static,",
                       "    y_s set<int> static,", "    a int,",
                       "    x frozen<set<int>>,", "    b list<int>,"]
    lines = ours.split("\n")
    assert lines[1:8] == cassandra_order
    driver = cluster.metadata.keyspaces["ks"].tables["mixed"] \
        .export_as_string().split("\n")
    assert sorted(driver[1:8]) == sorted(cassandra_order)
    driver[1:8] = cassandra_order
    assert "\n".join(lines).replace(EXTENSIONS, "") == "\n".join(driver)


def test_listings(server):
    cluster, s = server()
    create(s)
    names, got = rows(s, "DESCRIBE KEYSPACES")
    assert names == LIST_COLUMNS
    assert [(r.keyspace_name, r.type, r.name) for r in got] == [
        (k, "keyspace", k) for k in [
            "ks", '"Other"', "system", "system_auth", "system_distributed",
            "system_schema", "system_traces", "system_views",
            "system_virtual_schema"]]
    names, got = rows(s, "DESCRIBE TABLES")
    assert names == LIST_COLUMNS
    listed = [(r.keyspace_name, r.name) for r in got]
    assert listed[:6] == [("ks", "deflated"), ("ks", "events"),
                          ("ks", '"order"'), ("ks", '"QuotedTable"'),
                          ("ks", "simple"), ('"Other"', "t")]
    assert ("system_schema", "tables") in listed
    assert {r.type for r in got} == {"table"}
    for kind in ("TYPES", "FUNCTIONS", "AGGREGATES"):
        names, got = rows(s, "DESCRIBE " + kind)
        assert (names, got) == (LIST_COLUMNS, [])
    # With a current keyspace the listings stay in it.
    _, s2 = server()
    s2.execute("USE ks")
    assert [r.name for r in rows(s2, "DESC TABLES")[1]] == \
        ["deflated", "events", '"order"', '"QuotedTable"', "simple"]
    assert len(rows(s2, "DESCRIBE KEYSPACES")[1]) == 9


def test_schema_and_generic_forms(server):
    cluster, s = server()
    create(s)
    names, schema = rows(s, "DESCRIBE SCHEMA")
    assert names == ELEMENT_COLUMNS
    assert [(r.keyspace_name, r.type, r.name) for r in schema] == [
        ("ks", "keyspace", "ks"), ("ks", "table", "deflated"),
        ("ks", "table", "events"), ("ks", "table", '"order"'),
        ("ks", "table", '"QuotedTable"'), ("ks", "table", "simple"),
        ('"Other"', "keyspace", '"Other"'), ('"Other"', "table", "t")]
    full = rows(s, "DESC FULL SCHEMA")[1]
    assert full[:len(schema)] == schema
    system = {r.keyspace_name for r in full[len(schema):]}
    assert system == {"system", "system_auth", "system_distributed",
                      "system_schema", "system_traces", "system_views",
                      "system_virtual_schema"}
    # the virtual ones for reference only, inside a comment
    assert all(r.create_statement.startswith(
        "/*\nWarning: " if r.keyspace_name in ("system_views",
                                               "system_virtual_schema")
        else "CREATE ") for r in full)
    ks = rows(s, "DESCRIBE KEYSPACE ks")[1]
    assert rows(s, "DESCRIBE ks")[1] == ks
    only = rows(s, "DESCRIBE ONLY KEYSPACE ks")[1]
    assert only == ks[:1]
    simple = rows(s, "DESCRIBE TABLE ks.simple")[1]
    assert rows(s, "DESCRIBE ks.simple")[1] == simple
    assert rows(s, "DESC COLUMNFAMILY ks.simple")[1] == simple
    _, s2 = server()
    s2.execute("USE ks")
    assert rows(s2, "DESCRIBE simple")[1] == simple
    assert rows(s2, "DESCRIBE TABLE simple")[1] == simple
    assert rows(s2, "DESCRIBE KEYSPACE")[1] == ks
    assert rows(s2, 'DESCRIBE "Other"')[1][0].name == '"Other"'


@pytest.mark.parametrize("query,message", [
    ("DESCRIBE TABLE simple", "No keyspace specified and no current keyspace"),
    ("DESCRIBE KEYSPACE", "No keyspace specified and no current keyspace"),
    ("DESCRIBE KEYSPACE nope", "'nope' not found in keyspaces"),
    ("DESCRIBE TABLE ks.nope", "Table 'nope' not found in keyspace 'ks'"),
    ("DESCRIBE TABLE nope.t", "'nope' not found in keyspaces"),
    ("DESCRIBE nope", "'nope' not found in keyspaces"),
    ("DESCRIBE ks.nope", "'nope' not found in keyspace 'ks'"),
    ("DESCRIBE TYPE ks.address", "User defined type 'address' not found in "
     "'ks'"),
    ("DESCRIBE FUNCTION ks.f", "User defined function 'f' not found in 'ks'"),
    ("DESCRIBE AGGREGATE ks.a", "User defined aggregate 'a' not found in "
     "'ks'"),
    ("DESCRIBE INDEX ks.i", "Table for existing index 'i' not found in 'ks'"),
    ("DESCRIBE MATERIALIZED VIEW ks.v", "Materialized view 'v' not found in "
     "'ks'"),
])
def test_not_found_is_invalid(session, query, message):
    _, s = session
    create(s)
    with pytest.raises(InvalidRequest, match=message.replace("'", ".")):
        s.execute(query)


def test_with_internals(session):
    _, s = session
    create(s)
    tid = s.execute("SELECT id FROM system_schema.tables WHERE "
                    "keyspace_name = 'ks' AND table_name = 'events'").one().id
    text = rows(s, "DESCRIBE TABLE ks.events WITH INTERNALS")[1][0] \
        .create_statement
    assert ") WITH ID = %s\n    AND CLUSTERING ORDER BY (ts DESC, seq ASC)\n" \
        "    AND additional_write_policy = '99p'\n" % tid in text
    plain = rows(s, "DESCRIBE TABLE ks.events")[1][0].create_statement
    assert text.replace("ID = %s\n    AND " % tid, "") == plain
    # Dropped columns: in the CREATE, then dropped at their time (and
    # added again when they were), as Cassandra renders them.
    s.execute("ALTER TABLE ks.simple DROP v USING TIMESTAMP 1700000000000001")
    assert "v text" not in \
        rows(s, "DESCRIBE TABLE ks.simple")[1][0].create_statement
    sid = s.execute("SELECT id FROM system_schema.tables WHERE "
                    "keyspace_name = 'ks' AND table_name = 'simple'").one().id
    text = rows(s, "DESCRIBE TABLE ks.simple WITH INTERNALS")[1][0] \
        .create_statement
    head = text.split(") WITH ")[0]
    assert head.endswith("    v text\n"), text
    assert text.endswith(
        ";\nALTER TABLE ks.simple DROP v USING TIMESTAMP 1700000000000001;")
    assert "ID = %s" % sid in text
    s.execute("ALTER TABLE ks.simple ADD v text")
    text = rows(s, "DESCRIBE TABLE ks.simple WITH INTERNALS")[1][0] \
        .create_statement
    assert text.count("    v text") == 1
    assert text.endswith(
        ";\nALTER TABLE ks.simple DROP v USING TIMESTAMP 1700000000000001;"
        "\nALTER TABLE ks.simple ADD v text;")


def test_cluster(server):
    cluster, s = server()
    names, got = rows(s, "DESCRIBE CLUSTER")
    assert names == ["cluster", "partitioner", "snitch"]
    assert [tuple(r) for r in got] == \
        [("Driver Test", "Murmur3Partitioner", "SimpleSnitch")]
    # Under USE of a non-system keyspace Cassandra adds the ranges: each
    # range's end token -> its replicas as "address:storage_port", keys in
    # text order (a map serializes sorted). The driver's token map agrees.
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': "
              "'SimpleStrategy', 'replication_factor': 1}")
    s.execute("USE ks")
    names, got = rows(s, "DESCRIBE CLUSTER")
    assert names == ["cluster", "partitioner", "snitch", "range_ownership"]
    owned = got[0].range_ownership
    assert list(owned) == ["-6148914691236517206", "0",
                           "6148914691236517205"]
    cluster.refresh_schema_metadata()
    tm = cluster.metadata.token_map
    for token, replicas in owned.items():
        want = tm.get_replicas("ks", tm.token_class(int(token)))
        assert replicas == ["%s:7000" % h.address for h in want]
    s.execute("USE system")
    assert rows(s, "DESCRIBE CLUSTER")[0] == \
        ["cluster", "partitioner", "snitch"]


def test_paging(session):
    """Rows page by offset as Cassandra's DESCRIBE pages them; a full page
    always announces more, and a schema change between pages is refused."""
    _, s = session
    create(s)
    whole = rows(s, "DESCRIBE FULL SCHEMA")[1]
    assert len(whole) > 7
    paged = s.execute(SimpleStatement("DESCRIBE FULL SCHEMA", fetch_size=3))
    assert paged.has_more_pages and len(paged.current_rows) == 3
    assert list(paged) == whole
    exact = s.execute(SimpleStatement("DESCRIBE KEYSPACE ks", fetch_size=3))
    assert len(exact.current_rows) == 3 and exact.has_more_pages
    exact.fetch_next_page()
    assert len(exact.current_rows) == 3 and exact.has_more_pages
    exact.fetch_next_page()
    assert exact.current_rows == [] and not exact.has_more_pages
    first = s.execute(SimpleStatement("DESCRIBE SCHEMA", fetch_size=2))
    s.execute("CREATE TABLE ks.later (k int PRIMARY KEY)")
    with pytest.raises(InvalidRequest, match="The schema has changed since "
                       "the previous page of the DESCRIBE statement"):
        first.fetch_next_page()


def test_statements_recreate_the_schema(session):
    """What DESCRIBE prints is CQL we accept, and it recreates the same
    schema: drop every keyspace, run the statements, describe again."""
    _, s = session
    create(s)
    first = rows(s, "DESCRIBE SCHEMA")[1]
    s.execute("DROP KEYSPACE ks")
    s.execute('DROP KEYSPACE "Other"')
    assert rows(s, "DESCRIBE SCHEMA")[1] == []
    for r in first:
        s.execute(r.create_statement)
    assert rows(s, "DESCRIBE SCHEMA")[1] == first
