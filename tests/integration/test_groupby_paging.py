"""GROUP BY through the stock Python driver on a 3-node cluster in two
datacenters (2:1), as a user pages it:

- range and single-partition GROUP BY at every small fetch_size give the
  groups of a model (per group: count, sum, min, max, the first row's
  value), each once and in order, with LIMIT and PER PARTITION LIMIT
  counting groups across pages, at ONE and QUORUM, whichever node
  coordinates; a page never ends inside a group (every group's count is
  whole), and the driver sees a paging state only while groups remain;
- NetworkTopologyStrategy's replication_factor shorthand expands to both
  datacenters (with a per-datacenter override), in system_schema and in
  the driver's metadata.

Nodes live on 127.0.105.x."""
import random

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra.query import SimpleStatement

from clusters import cluster_script, session

BASE = "127.0.105."


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    run = cluster_script(tmp_path_factory.mktemp("gb"))
    run("create", "gb", "-n", "2:1", "--base-ip", BASE, "-s", timeout=300)
    yield run
    run("-C", "gb", "remove", check=False)


def model_groups(rows, prefix):
    """Groups of (k, c1, c2, v) rows sorted in clustering order within
    each key: {key: [(group key, count, sum, min, max, first v)]}."""
    out = {}
    for k in sorted({r[0] for r in rows}):
        part = sorted(r for r in rows if r[0] == k)
        groups = []
        for r in part:
            g = r[:1 + prefix]
            if groups and groups[-1][0] == g:
                _, n, s, lo, hi, first = groups[-1]
                groups[-1] = (g, n + 1, s + r[3], min(lo, r[3]),
                              max(hi, r[3]), first)
            else:
                groups.append((g, 1, r[3], r[3], r[3], r[3]))
        out[k] = groups
    return out


def page_through(s, cql, fetch, cl, params=None):
    """Every row of every page, and the pages' sizes."""
    st = SimpleStatement(cql, fetch_size=fetch, consistency_level=cl)
    rs = s.execute(st, params)
    rows, sizes = [], []
    while True:
        page = list(rs.current_rows)
        rows += page
        sizes.append(len(page))
        if not rs.has_more_pages:
            break
        rs.fetch_next_page()
    return rows, sizes


def test_group_by_pages(cluster):
    c, s = session(BASE + "1")
    try:
        s.execute("CREATE KEYSPACE gb WITH replication = {'class': "
                  "'NetworkTopologyStrategy', 'replication_factor': 2, "
                  "'dc2': 1}")
        s.execute("CREATE TABLE gb.t (k int, c1 int, c2 int, v int, "
                  "PRIMARY KEY (k, c1, c2))")
        assert c.control_connection.wait_for_schema_agreement(wait_time=30)
        rng = random.Random(25)
        rows = set()
        for k in range(12):
            for c1 in range(rng.randint(0, 5)):
                for c2 in range(rng.randint(1, 4)):
                    rows.add((k, c1, c2, rng.randint(-50, 50)))
        ins = s.prepare("INSERT INTO gb.t (k, c1, c2, v) VALUES (?, ?, ?, ?)")
        ins.consistency_level = CL.ALL
        for r in rows:
            s.execute(ins, r)
        rows = sorted(rows)
        by_k = model_groups(rows, 0)
        by_c1 = model_groups(rows, 1)
        # token order of the keys, as the unpaged range read gives them
        order = [r.k for r in s.execute(SimpleStatement(
            "SELECT DISTINCT k FROM gb.t", fetch_size=None))]
        assert sorted(order) == sorted(by_k)

        def want(groups, ppl=None, limit=None):
            out = []
            for k in order:
                out += groups[k][:ppl]
            return out[:limit]

        sel = "SELECT k, c1, count(*), sum(v), min(v), max(v), v FROM gb.t"
        cases = [(sel + " GROUP BY k", want(by_k)),
                 (sel + " GROUP BY k, c1", want(by_c1)),
                 (sel + " GROUP BY k, c1 LIMIT 7", want(by_c1, limit=7)),
                 (sel + " GROUP BY k, c1 PER PARTITION LIMIT 2",
                  want(by_c1, ppl=2)),
                 (sel + " GROUP BY k, c1 PER PARTITION LIMIT 1 LIMIT 5",
                  want(by_c1, ppl=1, limit=5))]
        big = max(by_c1, key=lambda k: len(by_c1[k]))
        cases.append((sel + " WHERE k = %d GROUP BY c1" % big, by_c1[big]))
        cases.append((sel + " WHERE k IN (%d, 3, 5) GROUP BY k, c1" % big,
                      [g for k in sorted({big, 3, 5})
                       for g in by_c1.get(k, [])]))
        for coord in ("1", "2", "3"):
            cc, cs = session(BASE + coord)
            try:
                for cql, groups in cases:
                    expect = [(g[0][0], g[0][1] if len(g[0]) > 1 else
                               next(r[1] for r in rows if r[0] == g[0][0]),
                               g[1], g[2], g[3], g[4], g[5])
                              for g in groups]
                    for fetch in (1, 2, 3, 7, None):
                        for cl in (CL.ONE, CL.QUORUM):
                            got, sizes = page_through(cs, cql, fetch, cl)
                            got = [tuple(r) for r in got]
                            assert got == expect, (cql, fetch, coord)
                            if fetch:
                                # full pages of groups, the last one
                                # maybe short (or empty)
                                assert all(n == fetch for n in sizes[:-1])
                                assert sizes[-1] <= fetch
            finally:
                cc.shutdown()
    finally:
        c.shutdown()


def test_nts_replication_factor_expands(cluster):
    c, s = session(BASE + "1")
    try:
        s.execute("CREATE KEYSPACE nts1 WITH replication = {'class': "
                  "'NetworkTopologyStrategy', 'replication_factor': 2}")
        s.execute("CREATE KEYSPACE nts2 WITH replication = {'class': "
                  "'NetworkTopologyStrategy', 'replication_factor': 2, "
                  "'dc2': 1}")
        s.execute("CREATE KEYSPACE nts3 WITH replication = {'class': "
                  "'NetworkTopologyStrategy', 'dc1': 1, 'dc2': 0}")
        assert c.control_connection.wait_for_schema_agreement(wait_time=30)

        def repl(ks):
            return s.execute("SELECT replication FROM system_schema."
                             "keyspaces WHERE keyspace_name = %s",
                             (ks,)).one().replication

        nts = "org.apache.cassandra.locator.NetworkTopologyStrategy"
        assert repl("nts1") == {"class": nts, "dc1": "2", "dc2": "2"}
        assert repl("nts2") == {"class": nts, "dc1": "2", "dc2": "1"}
        # NetworkTopologyStrategy.prepareOptions drops datacenters at 0
        assert repl("nts3") == {"class": nts, "dc1": "1"}
        # an ALTER's replication_factor keeps the datacenters named before
        s.execute("ALTER KEYSPACE nts3 WITH replication = {'class': "
                  "'NetworkTopologyStrategy', 'replication_factor': 3}")
        assert repl("nts3") == {"class": nts, "dc1": "1", "dc2": "3"}
        # SimpleStrategy to NTS with only the class keeps its factor
        s.execute("CREATE KEYSPACE nts4 WITH replication = {'class': "
                  "'SimpleStrategy', 'replication_factor': 2}")
        s.execute("ALTER KEYSPACE nts4 WITH replication = {'class': "
                  "'NetworkTopologyStrategy'}")
        assert repl("nts4") == {"class": nts, "dc1": "2", "dc2": "2"}
        assert c.control_connection.wait_for_schema_agreement(wait_time=30)
        c.refresh_schema_metadata()
        strat = c.metadata.keyspaces["nts2"].replication_strategy
        assert strat.dc_replication_factors == {"dc1": 2, "dc2": 1}
        ddl = c.metadata.keyspaces["nts1"].export_as_string()
        assert "'dc1': '2'" in ddl and "'dc2': '2'" in ddl
    finally:
        c.shutdown()
