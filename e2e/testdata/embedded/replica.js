// An application with an embedded replica (@libsql/client): opens LOCAL
// synced from SYNC_URL with TOKEN, runs ACTION and prints one JSON line,
// as replica.py does.
"use strict";
const { createClient } = require("@libsql/client");

async function main() {
  const [local, url, token, action, value] = process.argv.slice(2);
  try {
    const db = createClient({ url: "file:" + local, syncUrl: url, authToken: token });
    await db.sync();
    if (action === "write") {
      await db.execute({ sql: "INSERT INTO t(v) VALUES (?)", args: [value] });
      await db.sync();
    }
    if (action === "churn") {
      for (let i = 0; i < Number(value); i++) {
        await db.execute("INSERT INTO t(v) VALUES (hex(randomblob(8000)))");
        await db.sync();
      }
    }
    const rs = await db.execute("SELECT id, v FROM t ORDER BY id");
    const check = await db.execute("PRAGMA integrity_check");
    console.log(JSON.stringify({ rows: rs.rows.map((r) => [Number(r.id), r.v]), integrity: check.rows[0][0] }));
    db.close();
  } catch (e) {
    console.log(JSON.stringify({ error: String(e && e.message ? e.message : e) }));
    process.exitCode = 1;
  }
}
main();
