// The Node.js cassandra-driver (npm) against a real cassinid: connect with
// protocol negotiation, DDL, prepared statements, paging, streaming,
// batches, schema metadata, token-aware replicas and error codes. Prints
// one JSON object; test_node_driver.py checks it.
'use strict';
const cassandra = require('cassandra-driver');

async function main() {
  const [host, port] = process.argv.slice(2);
  const client = new cassandra.Client({
    contactPoints: [`${host}:${port}`], localDataCenter: 'dc1' });
  const out = {};
  await client.connect();
  out.protocol = client.controlConnection.protocolVersion;
  await client.execute("CREATE KEYSPACE ks WITH replication = " +
    "{'class': 'SimpleStrategy', 'replication_factor': 1}");
  await client.execute("CREATE TABLE ks.t (k int, c int, v text, " +
    "s set<text>, PRIMARY KEY (k, c))");
  const ins = "INSERT INTO ks.t (k, c, v, s) VALUES (?, ?, ?, ?)";
  for (let i = 0; i < 30; i++)
    await client.execute(ins, [1, i, `v${i}`, ['a', 'b']], { prepare: true });
  const r = await client.execute("SELECT * FROM ks.t WHERE k = ?", [1],
                                 { prepare: true });
  out.rows = r.rowLength;
  out.row3 = [r.rows[3].v, r.rows[3].s];

  let pageState, seen = [], pages = 0;
  do {
    const res = await client.execute("SELECT c FROM ks.t WHERE k = 1", [],
      { prepare: true, fetchSize: 7, pageState });
    pages++;
    res.rows.forEach(x => seen.push(x.c));
    pageState = res.pageState;
  } while (pageState);
  out.paged = { pages, rows: seen };

  let streamed = 0;
  await new Promise((ok, bad) => client
    .stream("SELECT c FROM ks.t", [], { prepare: true, fetchSize: 4 })
    .on('readable', function () { while (this.read()) streamed++; })
    .on('end', ok).on('error', bad));
  out.streamed = streamed;

  await client.batch([
    { query: "INSERT INTO ks.t (k, c, v) VALUES (?, ?, ?)",
      params: [2, 1, 'x'] },
    { query: "UPDATE ks.t SET v = ? WHERE k = ? AND c = ?",
      params: ['y', 2, 2] }], { prepare: true });
  const b = await client.execute("SELECT c, v FROM ks.t WHERE k = 2");
  out.batch = b.rows.map(x => `${x.c}=${x.v}`);

  const md = await client.metadata.getTable('ks', 't');
  out.table = { pk: md.partitionKeys.map(c => c.name),
                ck: md.clusteringKeys.map(c => c.name),
                columns: md.columns.length };
  out.replicas = client.getReplicas('ks', Buffer.from([0, 0, 0, 1]))
    .map(h => h.address);
  for (const [name, q] of [['syntax', 'SELEC x'],
                           ['invalid', 'SELECT * FROM ks.nope']]) {
    try {
      await client.execute(q);
      out[name] = 'no error';
    } catch (e) {
      out[name] = { code: e.code, message: e.message };
    }
  }
  out.datamodel = await datamodel(client);
  await client.shutdown();
  console.log(JSON.stringify(out));
}

// UDTs (frozen and not) as plain objects both ways, tuples as
// types.Tuple, durations as types.Duration, counters as types.Long,
// SELECT JSON / INSERT JSON, and the driver's UDT metadata.
async function datamodel(client) {
  const T = cassandra.types;
  const p = { prepare: true };
  const out = {};
  await client.execute("CREATE TYPE ks.addr (street text, zip int)");
  await client.execute("CREATE TYPE ks.point (x int, y text)");
  await client.execute("CREATE TABLE ks.dm (k int PRIMARY KEY, a addr, " +
    "f frozen<point>, pts list<frozen<point>>, " +
    "pm map<text, frozen<point>>, tp tuple<int, text, frozen<point>>, " +
    "d duration)");
  await client.execute("INSERT INTO ks.dm (k, a, f, pts, pm, tp, d) " +
    "VALUES (?, ?, ?, ?, ?, ?, ?)",
    [1, { street: 'main', zip: 10 }, { x: 1, y: 'a' },
     [{ x: 2, y: 'b' }, { x: 3 }], { m: { x: 4, y: 'm' } },
     new T.Tuple(7, 'seven', { x: 8, y: 'h' }),
     new T.Duration(1, 2, T.Long.fromNumber(3))], p);
  await client.execute("UPDATE ks.dm SET a.zip = ? WHERE k = ?", [20, 1], p);
  await client.execute("UPDATE ks.dm USING TTL 1000 SET a.street = ? " +
    "WHERE k = ?", ['ttl', 1], p);
  // a non-prepared row with literals, and a field deletion
  await client.execute("INSERT INTO ks.dm (k, a, d) VALUES (2, " +
    "{street: 'lit', zip: 2}, 1h30m)");
  await client.execute("DELETE a.street FROM ks.dm WHERE k = 2");
  const rows = {};
  for (const r of (await client.execute("SELECT * FROM ks.dm", [], p)).rows)
    rows[r.k] = r;
  const r1 = rows[1];
  out.udt = { a: r1.a, f: r1.f, pts: r1.pts, pm: r1.pm,
              a2: rows[2].a };
  out.tuple = { isTuple: r1.tp instanceof T.Tuple, length: r1.tp.length,
                values: r1.tp.values() };
  out.duration = { isDuration: r1.d instanceof T.Duration,
                   parts: [r1.d.months, r1.d.days,
                           r1.d.nanoseconds.toString()],
                   text: rows[2].d.toString() };
  const sel = await client.execute(
    "SELECT a.zip, a.street, ttl(a.street) FROM ks.dm WHERE k = ?", [1], p);
  out.field = sel.rows[0].values();
  // a UDT as a bind in a WHERE clause (a frozen clustering key)
  await client.execute("CREATE TABLE ks.byp (k int, c frozen<point>, " +
    "v int, PRIMARY KEY (k, c))");
  for (const [i, c] of [[1, { x: 2, y: 'b' }], [2, { x: 1, y: 'z' }],
                        [3, { x: 1, y: 'a' }]])
    await client.execute("INSERT INTO ks.byp (k, c, v) VALUES (1, ?, ?)",
                         [c, i], p);
  out.ordered = (await client.execute(
    "SELECT c, v FROM ks.byp WHERE k = 1")).rows.map(x => [x.c, x.v]);
  out.byKey = (await client.execute(
    "SELECT v FROM ks.byp WHERE k = 1 AND c = ?", [{ x: 1, y: 'z' }],
    p)).rows.map(x => x.v);

  const udt = await client.metadata.getUdt('ks', 'addr');
  out.udtMeta = udt.fields.map(f => f.name);

  await client.execute("CREATE TABLE ks.ctr (k int PRIMARY KEY, n counter)");
  for (let i = 1; i <= 5; i++)
    await client.execute("UPDATE ks.ctr SET n = n + ? WHERE k = ?",
                         [T.Long.fromNumber(i), 1], p);
  await client.execute("UPDATE ks.ctr SET n = n - 3 WHERE k = 1");
  await client.batch([
    { query: "UPDATE ks.ctr SET n = n + ? WHERE k = ?",
      params: [T.Long.fromNumber(100), 2] },
    { query: "UPDATE ks.ctr SET n = n + ? WHERE k = ?",
      params: [T.Long.fromNumber(1), 1] }], { prepare: true, counter: true });
  const ctr = {};
  for (const r of (await client.execute("SELECT k, n FROM ks.ctr")).rows)
    ctr[r.k] = [r.n instanceof T.Long, r.n.toString()];
  out.counter = ctr;

  const j = await client.execute(
    "SELECT JSON k, a, f, pts, tp, d FROM ks.dm WHERE k = ?", [1], p);
  out.json = JSON.parse(j.rows[0]['[json]']);
  await client.execute("INSERT INTO ks.dm JSON ?", [JSON.stringify(
    { k: 3, a: { street: 'json', zip: 3 }, tp: [1, 'one', { x: 0 }],
      d: '2d' })], p);
  const r3 = (await client.execute("SELECT a, tp, d FROM ks.dm WHERE k = 3",
                                   [], p)).rows[0];
  out.insertJson = { a: r3.a, tp: r3.tp.values(), d: r3.d.toString() };
  return out;
}

main().catch(e => { console.error(e); process.exit(1); });
