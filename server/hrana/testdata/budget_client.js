// Drives @libsql/hrana-client (Hrana 3) against a sluice URL whose answers
// are capped (limits.max-response-bytes): http:// speaks the protobuf
// pipeline and cursor, ws:// WebSocket. Prints what it observed as one JSON
// object; the Go test (TestAnswerBudgetHranaClient) holds the expectations.
// Usage: node budget_client.js URL
const hrana = require("@libsql/hrana-client");

// rows returns a query of n rows of about 200 bytes each.
const rows = (n) =>
  `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < ${n}) SELECT i, printf('%0180d', i) AS pad FROM n`;

async function outcome(promise) {
  try {
    const r = await promise;
    return { ok: true, rows: r.rows.length };
  } catch (e) {
    return { ok: false, code: e.code, message: e.message };
  }
}

async function batch(s, useCursor, sqls) {
  const b = s.batch(useCursor);
  const steps = sqls.map((sql) => outcome(b.step().query(sql)));
  await b.execute().catch(() => {});
  return Object.assign({}, await Promise.all(steps));
}

async function main() {
  const url = process.argv[2];
  const client = url.startsWith("ws") ? hrana.openWs(url, undefined, 3) : hrana.openHttp(url, undefined, undefined, undefined, 3);
  const out = {};
  await client.getVersion(); // a WebSocket client opens a cursor only once it knows the version
  const s = client.openStream();
  const step = (what) => console.error("budget_client: " + what);
  step("big");
  out.big = await outcome(s.query(rows(20000)));
  step("after");
  out.after = String((await s.queryValue("SELECT 42")).value);
  step("fits");
  out.fits = await outcome(s.query(rows(800)));
  // Four statements that each fit, in one request: together they do not.
  step("pipeline");
  out.pipeline = await batch(s, false, [rows(400), rows(400), rows(400), rows(400)]);
  step("cursor");
  out.cursor = await batch(s, true, [rows(20000), "SELECT 7", rows(400), rows(400), rows(400), rows(400)]);
  step("cursorFits");
  out.cursorFits = await batch(s, true, [rows(800)]);
  step("stillServing");
  out.stillServing = String((await s.queryValue("SELECT 1")).value);
  s.close();
  client.close();
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.log(JSON.stringify({ fatal: String(e && e.stack || e) }));
  process.exit(1);
});
