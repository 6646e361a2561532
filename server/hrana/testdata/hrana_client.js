// Drives @libsql/hrana-client (the protocol library under @libsql/client) at
// Hrana 3 against a sluice URL: http:// or https:// speaks Hrana over HTTP
// (protobuf when the server offers /v3-protobuf), ws:// or wss:// Hrana over
// WebSocket (hrana3-protobuf when the server accepts it). Prints what it
// observed as one JSON object; the Go tests hold the expectations.
// Usage: node hrana_client.js URL [JWT]
const hrana = require("@libsql/hrana-client");
const { WebSocket } = require("@libsql/isomorphic-ws");

const hex = (buf) => Buffer.from(buf).toString("hex");

async function rejection(promise) {
  try {
    await promise;
    return { rejected: false };
  } catch (e) {
    return { rejected: true, name: e.name, code: e.code, message: e.message };
  }
}

// subprotocol reports what the server picks among hrana-client's own offer.
function subprotocol(url) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, ["hrana3-protobuf", "hrana3", "hrana2", "hrana1"]);
    ws.onopen = () => { resolve(ws.protocol); ws.close(); };
    ws.onerror = (e) => resolve("error: " + e.message);
  });
}

async function main() {
  const url = process.argv[2];
  const jwt = process.argv[3];
  const ws = url.startsWith("ws");
  const client = ws ? hrana.openWs(url, jwt, 3) : hrana.openHttp(url, jwt, undefined, undefined, 3);
  client.intMode = "bigint";
  const out = {};
  out.version = await client.getVersion();
  out.encoding = ws ? await subprotocol(url) : client._endpoint.encoding;

  const s = client.openStream();
  await s.run("CREATE TABLE h (id INTEGER PRIMARY KEY, i INTEGER, f REAL, t TEXT UNIQUE, b BLOB, n)");
  const ins = await s.run(["INSERT INTO h (i, f, t, b, n) VALUES (?, ?, ?, ?, ?)",
    [2n ** 62n + 3n, -0.5, "tëxt", new Uint8Array([0, 255, 7]), null]]);
  out.insert = { affected: ins.affectedRowCount, rowid: String(ins.lastInsertRowid) };
  const row = await s.queryRow("SELECT i, f, t, b, n, 1e999 AS inf, -1e999 AS ninf FROM h");
  out.values = {
    i: String(row.row.i), f: row.row.f, t: row.row.t, b: hex(row.row.b), n: row.row.n,
    inf: String(row.row.inf), ninf: String(row.row.ninf), cols: row.columnNames,
  };
  out.named = (await s.queryValue(["SELECT :a || @b", { a: "x", "@b": "y" }])).value;

  const d = await s.describe("SELECT t AS name FROM h WHERE i = ?");
  out.describe = { params: d.paramNames.length, col: d.columns[0].name, readonly: d.isReadonly };

  await s.sequence("INSERT INTO h (t) VALUES ('s1'); INSERT INTO h (t) VALUES ('s2')");
  out.afterSequence = String((await s.queryValue("SELECT count(*) FROM h")).value);

  const sql = ws ? client.storeSql("SELECT count(*) FROM h WHERE t LIKE ?") : s.storeSql("SELECT count(*) FROM h WHERE t LIKE ?");
  out.stored = String((await s.queryValue([sql, ["s%"]])).value);
  sql.close();

  for (const useCursor of [false, true]) {
    const b = s.batch(useCursor);
    const a = b.step().run("INSERT INTO h (t) VALUES ('dup')");
    const dup = b.step().run("INSERT INTO h (t) VALUES ('dup')");
    const q = b.step().query("SELECT t FROM h ORDER BY id");
    const errs = [];
    dup.catch((e) => errs.push(e.code));
    a.catch(() => {});
    const executed = b.execute();
    const rows = await q;
    await executed.catch(() => {});
    out[useCursor ? "cursorBatch" : "batch"] = { rows: rows.rows.length, dupError: errs[0] };
    await s.run("DELETE FROM h WHERE t = 'dup'");
  }

  await s.run("BEGIN");
  out.autocommitInTx = await s.getAutocommit();
  await s.run("INSERT INTO h (t) VALUES ('rolled back')");
  await s.run("ROLLBACK");
  out.autocommitAfter = await s.getAutocommit();
  out.afterRollback = String((await s.queryValue("SELECT count(*) FROM h WHERE t = 'rolled back'")).value);

  out.constraint = await rejection(s.run("INSERT INTO h (t) VALUES ('s1')"));
  out.many = await rejection(s.run("SELECT 1; SELECT 2"));
  out.missingArg = await rejection(s.run("SELECT ?"));
  out.stillServing = String((await s.queryValue("SELECT 1")).value);
  s.close();
  client.close();
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
