// @libsql/client against DB_URL (sluice's http:// URL or a local file: URL):
// the everyday calls of an application, the schema statements a migration tool
// sends twice, introspection pragmas, and a table-recreating migrate() that must
// keep the children of an ON DELETE CASCADE foreign key.
"use strict";
const { createClient } = require("@libsql/client");
const { recorder, resultSet } = require("../common.js");

async function main() {
  const db = createClient({ url: process.env.DB_URL, intMode: "bigint" });
  const r = recorder();
  const q = (sql, args) => db.execute({ sql, args: args || [] }).then(resultSet);

  await r.step("drop if exists", () =>
    db.batch(["DROP VIEW IF EXISTS v_items", "DROP INDEX IF EXISTS items_price", "DROP TRIGGER IF EXISTS items_touch",
      "DROP TABLE IF EXISTS child", "DROP TABLE IF EXISTS parent", "DROP TABLE IF EXISTS items"], "write").then((rs) => rs.length));
  await r.step("create", () =>
    db.batch([
      "CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, price REAL, data BLOB, created DATETIME, flag BOOLEAN, n)",
      "CREATE INDEX IF NOT EXISTS items_price ON items(price)",
      "CREATE VIEW IF NOT EXISTS v_items AS SELECT id, name FROM items",
      "CREATE TRIGGER IF NOT EXISTS items_touch AFTER UPDATE ON items BEGIN SELECT 1; END",
    ], "write").then((rs) => rs.length));
  await r.step("create again", () => q("CREATE INDEX IF NOT EXISTS items_price ON items(price)"));
  await r.step("insert", async () => {
    const rs = await db.execute({
      sql: "INSERT INTO items (name, price, data, created, flag, n) VALUES (?, ?, ?, ?, ?, ?)",
      args: ["apple ü", 1.25, new Uint8Array([0, 1, 255]), "2024-05-06 07:08:09", 1, null],
    });
    return { rowsAffected: rs.rowsAffected, lastInsertRowid: rs.lastInsertRowid };
  });
  await r.step("insert named", () =>
    db.execute({ sql: "INSERT INTO items (name, price, n) VALUES (:name, :price, :n)", args: { name: "pear", price: 2, n: 9007199254740993n } })
      .then((rs) => ({ rowsAffected: rs.rowsAffected, lastInsertRowid: rs.lastInsertRowid })));
  await r.step("select", () => q("SELECT * FROM items ORDER BY id"));
  await r.step("select view", () => q("SELECT * FROM v_items ORDER BY id"));
  await r.step("select expressions", () => q("SELECT 1 AS a, 2 AS a, 'x' || 'y', NULL, 1.5, x'00ff', 9223372036854775807"));
  await r.step("join duplicate names", async () => {
    const rs = await db.execute("SELECT a.id, b.id, a.name FROM items a JOIN items b ON b.id = a.id + 1");
    return { columns: rs.columns, id: rs.rows[0].id, first: rs.rows[0][0], second: rs.rows[0][1] };
  });
  await r.step("unique violation", () => q("INSERT INTO items (name) VALUES ('pear')"));
  await r.step("not null violation", () => q("INSERT INTO items (price) VALUES (3)"));
  await r.step("syntax error", () => q("SELEC 1"));
  await r.step("no such table", () => q("SELECT * FROM nope"));
  await r.step("table_info", () => q("PRAGMA table_info(items)"));
  await r.step("table_xinfo", () => q("PRAGMA table_xinfo('items')"));
  await r.step("index_list", () => q("PRAGMA index_list(items)"));
  await r.step("index_info", () => q("PRAGMA index_info(items_price)"));
  await r.step("pragma_table_info", () => q("SELECT name, type, pk FROM pragma_table_info('items') ORDER BY cid"));
  await r.step("schema", () => q("SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE '\\_%' ESCAPE '\\' ORDER BY type, name"));
  await r.step("temp table in a batch", () =>
    db.batch(["CREATE TEMP TABLE scratch (x)", "INSERT INTO scratch VALUES (1), (2)", "SELECT sum(x) AS s FROM scratch", "DROP TABLE temp.scratch"], "write")
      .then((rs) => resultSet(rs[2])));
  await r.step("transaction committed", async () => {
    const tx = await db.transaction("write");
    try {
      await tx.execute("INSERT INTO items (name) VALUES ('committed')");
      const inside = resultSet(await tx.execute("SELECT count(*) AS c FROM items"));
      await tx.commit();
      return inside;
    } finally {
      tx.close();
    }
  });

  // A parent with ON DELETE CASCADE children, then migrate() recreates the
  // parent table the way SQLite's documentation prescribes: foreign keys off,
  // copy, drop, rename, foreign keys on. The children must survive.
  await r.step("foreign_keys default", () => q("PRAGMA foreign_keys"));
  await r.step("fk setup", async () => {
    const stmts = [
      "PRAGMA foreign_keys=ON",
      "CREATE TABLE parent (id INTEGER PRIMARY KEY, name TEXT)",
      "CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parent(id) ON DELETE CASCADE, v TEXT)",
      "INSERT INTO parent (id, name) VALUES (1, 'one'), (2, 'two')",
    ];
    for (let i = 0; i < 103; i++) stmts.push({ sql: "INSERT INTO child (parent_id, v) VALUES (?, ?)", args: [1 + (i % 2), "c" + i] });
    await db.batch(stmts, "write");
    return q("SELECT count(*) AS children FROM child");
  });
  await r.step("fk migrate", async () => {
    await db.migrate([
      "CREATE TABLE parent_new (id INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT '')",
      "INSERT INTO parent_new (id, name) SELECT id, name FROM parent",
      "DROP TABLE parent",
      "ALTER TABLE parent_new RENAME TO parent",
    ]);
    return q("SELECT count(*) AS children FROM child");
  });
  await r.step("fk check", () => q("PRAGMA foreign_key_check"));
  await r.step("fk list", () => q("PRAGMA foreign_key_list(child)"));
  await r.step("fk cascade still works", async () => {
    await db.batch(["PRAGMA foreign_keys=ON", "DELETE FROM parent WHERE id = 2"], "write");
    return q("SELECT count(*) AS children FROM child");
  });
  db.close();
  r.done();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
