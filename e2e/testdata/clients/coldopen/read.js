// @libsql/client against a database sluice serves before its restore has
// finished (cold open): a point query by key, one by id, and a 100-row range.
"use strict";
const { createClient } = require("@libsql/client");
const { recorder } = require("../common.js");

async function main() {
  const db = createClient({ url: process.env.DB_URL, authToken: process.env.LIBSQL_AUTH_TOKEN });
  const r = recorder();
  await r.step("byKey", async () => {
    const rs = await db.execute({ sql: "SELECT id, v FROM t WHERE k = ?", args: [process.env.KEY] });
    return rs.rows.map((row) => [Number(row.id), String(row.v)]);
  });
  await r.step("byId", async () => {
    const rs = await db.execute({ sql: "SELECT k, v FROM t WHERE id = ?", args: [Number(process.env.ID)] });
    return rs.rows.map((row) => [String(row.k), String(row.v)]);
  });
  await r.step("range", async () => {
    const rs = await db.execute({ sql: "SELECT count(*) AS n, sum(id) AS s FROM (SELECT id FROM t WHERE id >= ? ORDER BY id LIMIT 100)", args: [Number(process.env.ID)] });
    return [Number(rs.rows[0].n), Number(rs.rows[0].s)];
  });
  db.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
