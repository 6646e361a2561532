// Two @libsql/client clients, as two processes of an application would be:
// one sends statements that are only comments or empty, alone and inside an
// interactive transaction, and sets connection state (a pragma, a TEMP
// trigger); the other keeps writing and reading. Locally each client has its own
// connection, so nothing of the first reaches the second and nothing stays locked.
"use strict";
const { createClient } = require("@libsql/client");
const { recorder, resultSet, errorText } = require("../common.js");

// noop is the outcome of a statement with nothing to run: an empty result
// (sqld) or the local binding's SQLITE_OK error "not an error" count the same,
// since neither ran anything; anything else is reported as it is.
function noop(p) {
  return p.then(
    (rs) => ([].concat(rs).every((x) => x.rows.length === 0 && x.columns.length === 0) ? "no-op" : [].concat(rs).map(resultSet)),
    (e) => {
      if (errorText(e) === "not an error") return "no-op";
      throw e;
    },
  );
}

async function main() {
  const db = createClient({ url: process.env.DB_URL, intMode: "bigint" });
  const other = createClient({ url: process.env.DB_URL, intMode: "bigint" });
  const r = recorder();
  const q = (c, sql) => c.execute(sql).then(resultSet);

  await r.step("create", () => db.batch(["CREATE TABLE IF NOT EXISTS m (id INTEGER PRIMARY KEY, v TEXT)", "CREATE TABLE IF NOT EXISTS m_log (v TEXT)"], "write").then((rs) => rs.length));
  await r.step("case_sensitive_like set by one client", () => q(db, "PRAGMA case_sensitive_like=ON").then((rs) => rs.rows.length));
  await r.step("LIKE in another client", () => q(other, "SELECT 'a' LIKE 'A' AS matched"));
  await r.step("temp trigger of one client", () =>
    q(db, "CREATE TEMP TRIGGER IF NOT EXISTS m_copy AFTER INSERT ON main.m BEGIN INSERT INTO m_log VALUES (new.v); END")
      .then(() => "created", (e) => errorText(e)));
  await r.step("insert by another client", () =>
    other.batch(["DELETE FROM m_log", "INSERT INTO m (v) VALUES ('plain')", "SELECT count(*) AS copied FROM m_log"], "write")
      .then((rs) => resultSet(rs[2])));
  await r.step("schema seen by another client", () => q(other, "SELECT type, name FROM sqlite_master WHERE name LIKE 'm%' ORDER BY name"));
  await r.step("comment only", () => noop(db.execute("-- just a comment")));
  await r.step("block comment only", () => noop(db.execute("/* c */")));
  await r.step("semicolon only", () => noop(db.execute(";")));
  await r.step("empty", () => noop(db.execute("")));
  await r.step("comment in a batch", () => noop(db.batch(["-- x", "/* c */"], "write")));
  for (const bad of ["-- x", "/* c */", ";", "SELEC 1", "INSERT INTO nope VALUES (1)"]) {
    await r.step("transaction with " + JSON.stringify(bad), async () => {
      const tx = await db.transaction("write");
      let inner;
      try {
        await tx.execute("INSERT INTO m (v) VALUES ('in tx')");
        inner = await noop(tx.execute(bad)).catch((e) => errorText(e));
        await tx.rollback();
      } finally {
        tx.close();
      }
      return inner;
    });
    await r.step("another client writes after " + JSON.stringify(bad), () => q(other, "INSERT INTO m (v) VALUES ('other')").then((rs) => rs.rowsAffected));
  }
  await r.step("rows", () => q(db, "SELECT v, count(*) AS n FROM m GROUP BY v ORDER BY v"));
  await r.step("cleanup", () => q(db, "DELETE FROM m"));
  db.close();
  other.close();
  r.done();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
