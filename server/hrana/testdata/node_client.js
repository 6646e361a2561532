// Drives @libsql/client (the stock JS client) against a sluice Hrana endpoint
// and prints what it observed as one JSON object; the Go test
// (TestNodeClient) holds the expectations. Usage: node node_client.js URL
const { createClient } = require("@libsql/client");

const hex = (buf) => Buffer.from(buf).toString("hex");

async function rejection(promise) {
  try {
    await promise;
    return { rejected: false };
  } catch (e) {
    return { rejected: true, name: e.name, code: e.code, message: e.message };
  }
}

async function main() {
  const url = process.argv[2];
  const db = createClient({ url, intMode: "bigint" });
  const out = {};

  await db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, i INTEGER, f REAL, s TEXT UNIQUE, b BLOB, n)");
  const big = 2n ** 60n + 1n;
  const ins = await db.execute({
    sql: "INSERT INTO t (i, f, s, b, n) VALUES (?, ?, ?, ?, ?)",
    args: [big, 1.25, "text ü \"q\"", new Uint8Array([0, 1, 2, 255]), null],
  });
  out.insert = { rowsAffected: ins.rowsAffected, lastInsertRowid: String(ins.lastInsertRowid) };

  const row = (await db.execute("SELECT i, f, s, b, n, typeof(i) AS ti FROM t WHERE id = 1")).rows[0];
  out.values = {
    i: String(row.i), iType: typeof row.i, f: row.f, s: row.s, b: hex(row.b), n: row.n, ti: row.ti,
  };

  // JS numbers travel as floats; SQLite keeps them integers in an INTEGER column.
  await db.execute({ sql: "INSERT INTO t (i, s) VALUES (?, ?)", args: [7, "seven"] });
  out.floatIntoInteger = (await db.execute("SELECT typeof(i) AS t FROM t WHERE s = 'seven'")).rows[0].t;

  await db.execute({ sql: "INSERT INTO t (i, s) VALUES (:i, $s)", args: { i: 8n, s: "eight" } });
  await db.execute({ sql: "INSERT INTO t (i, s) VALUES (@i, :s)", args: { "@i": 9n, ":s": "nine" } });
  out.named = (await db.execute("SELECT group_concat(i) AS g FROM t WHERE s IN ('eight', 'nine')")).rows[0].g;

  const batch = await db.batch([
    { sql: "INSERT INTO t (i, s) VALUES (?, ?)", args: [10n, "ten"] },
    { sql: "INSERT INTO t (i, s) VALUES (?, ?)", args: [11n, "eleven"] },
    "SELECT count(*) AS c FROM t",
  ], "write");
  out.batch = { results: batch.length, count: String(batch[2].rows[0].c) };

  out.batchError = await rejection(db.batch([
    { sql: "INSERT INTO t (i, s) VALUES (?, ?)", args: [12n, "twelve"] },
    { sql: "INSERT INTO t (i, s) VALUES (?, ?)", args: [13n, "ten"] },
  ], "write"));
  out.afterBatchError = String((await db.execute("SELECT count(*) AS c FROM t WHERE s = 'twelve'")).rows[0].c);

  const tx = await db.transaction("write");
  await tx.execute({ sql: "INSERT INTO t (i, s) VALUES (?, ?)", args: [20n, "twenty"] });
  const inTx = await tx.execute("SELECT count(*) AS c FROM t WHERE s = 'twenty'");
  await tx.commit();
  out.txCommit = {
    seenInside: String(inTx.rows[0].c),
    after: String((await db.execute("SELECT count(*) AS c FROM t WHERE s = 'twenty'")).rows[0].c),
  };

  const tx2 = await db.transaction("write");
  await tx2.execute({ sql: "INSERT INTO t (i, s) VALUES (?, ?)", args: [21n, "twentyone"] });
  await tx2.rollback();
  out.txRollback = String((await db.execute("SELECT count(*) AS c FROM t WHERE s = 'twentyone'")).rows[0].c);

  const rtx = await db.transaction("read");
  const rcount = await rtx.execute("SELECT count(*) AS c FROM t");
  out.readTx = { count: String(rcount.rows[0].c), write: await rejection(rtx.execute("DELETE FROM t")) };
  await rtx.rollback();

  out.constraint = await rejection(db.execute({ sql: "INSERT INTO t (s) VALUES (?)", args: ["ten"] }));
  out.syntax = await rejection(db.execute("SELEKT 1"));
  out.stillServing = String((await db.execute("SELECT 1 AS one")).rows[0].one);

  await db.executeMultiple("CREATE TABLE m (x); INSERT INTO m VALUES (1); INSERT INTO m VALUES (2);");
  out.executeMultiple = String((await db.execute("SELECT sum(x) AS s FROM m")).rows[0].s);

  db.close();
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error("node client script failed:", e);
  process.exit(1);
});
