// @libsql/client sending statements that are only comments or empty, alone
// and inside an interactive transaction, then writing from a second client:
// SQLite answers them without harm, and nothing stays locked.
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

  await r.step("create", () => q(db, "CREATE TABLE IF NOT EXISTS m (id INTEGER PRIMARY KEY, v TEXT)"));
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
