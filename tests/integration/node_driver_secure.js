// The Node.js cassandra-driver (npm) against a cassinid with
// PasswordAuthenticator and client TLS: PlainTextAuthProvider over
// sslOptions with the cluster's CA, a wrong password, and a plaintext
// connection to the TLS port. Prints one JSON object;
// test_node_driver_secure.py checks it.
'use strict';
const fs = require('fs');
const cassandra = require('cassandra-driver');

function client(host, port, user, password, ca) {
  const o = {
    contactPoints: [`${host}:${port}`], localDataCenter: 'dc1',
    authProvider: new cassandra.auth.PlainTextAuthProvider(user, password),
    socketOptions: { connectTimeout: 5000 },
  };
  if (ca)
    o.sslOptions = { ca: [fs.readFileSync(ca)], rejectUnauthorized: true,
                     // the certificate names the address, not a host name
                     checkServerIdentity: () => undefined };
  return new cassandra.Client(o);
}

// What a failed connect says: the error per host, by class name.
async function failure(c) {
  try {
    await c.connect();
    return 'connected';
  } catch (e) {
    const inner = e.innerErrors ? Object.values(e.innerErrors) : [];
    return { name: e.name, inner: inner.map(x => x.name),
             message: inner.map(x => x.message).join('; ') };
  } finally {
    await c.shutdown();
  }
}

async function main() {
  const [host, port, ca] = process.argv.slice(2);
  const out = {};
  const c = client(host, port, 'cassandra', 'cassandra', ca);
  await c.connect();
  const r = await c.execute(
    "SELECT ssl_enabled, username FROM system_views.clients");
  out.clients = r.rows.map(x => [x.ssl_enabled, x.username]);
  await c.execute("CREATE KEYSPACE ks WITH replication = " +
    "{'class': 'SimpleStrategy', 'replication_factor': 1}");
  await c.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)");
  await c.execute("INSERT INTO ks.t (k, v) VALUES (?, ?)", [1, 'a'],
                  { prepare: true });
  out.row = (await c.execute("SELECT v FROM ks.t WHERE k = 1")).rows[0].v;
  await c.shutdown();
  out.wrong_password = await failure(
    client(host, port, 'cassandra', 'nope', ca));
  out.plaintext = await failure(
    client(host, port, 'cassandra', 'cassandra', null));
  console.log(JSON.stringify(out));
}

main().catch(e => { console.error(e); process.exit(1); });
