// @libsql/client against a past state of a sluice database: DB_URL is
// http://HOST/db/NAME@POINT/ as createClient takes it unchanged. Prints the
// ids the state holds (one statement, and a read batch) and what a write
// there answers.
"use strict";
const { createClient } = require("@libsql/client");
const { recorder } = require("../common.js");

async function main() {
  const db = createClient({ url: process.env.DB_URL, authToken: process.env.LIBSQL_AUTH_TOKEN });
  const r = recorder();
  await r.step("ids", async () => (await db.execute("SELECT id FROM t ORDER BY id")).rows.map((row) => Number(row.id)));
  await r.step("batch", async () => {
    const rs = await db.batch(["SELECT count(*) AS n FROM t", "SELECT max(id) AS m FROM t"], "read");
    return [Number(rs[0].rows[0].n), Number(rs[1].rows[0].m)];
  });
  await r.step("write", async () => {
    try {
      await db.execute("INSERT INTO t(v) VALUES ('past')");
      return "written";
    } catch (e) {
      return { code: e.code, message: String(e.message) };
    }
  });
  db.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
