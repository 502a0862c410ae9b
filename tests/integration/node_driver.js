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
  await client.shutdown();
  console.log(JSON.stringify(out));
}

main().catch(e => { console.error(e); process.exit(1); });
