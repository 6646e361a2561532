// Where two mechanisms meet, through @libsql/client over Hrana HTTP and
// WebSocket (or a local file: URL, the reference): a trigger whose body holds
// CASE ... END sent as one statement; the codes of unique and foreign-key
// violations (applications compare e.code, as sqld sends it); and 300
// clients writing at once to a schema whose foreign key is DEFERRABLE
// INITIALLY DEFERRED (as Django declares them), 100 of them violating it.
"use strict";
const { createClient } = require("@libsql/client");
const { recorder, resultSet, errorText } = require("../common.js");

const local = process.env.DB_KIND === "local";

async function open(url) {
  const db = createClient({ url, intMode: "number" });
  // A served database has foreign keys on, as sqld does; a local file
  // opened by the client does not necessarily.
  if (local) await db.execute("PRAGMA foreign_keys=ON");
  return db;
}

const trigger = (name, table) =>
  `CREATE TRIGGER ${name} AFTER INSERT ON ${table} BEGIN UPDATE ${table} SET a = CASE WHEN b > 0 THEN 1 ELSE 0 END; END;`;

// codeOf records what an application sees of a failed statement.
async function codeOf(p) {
  try {
    await p;
    return { ok: true };
  } catch (e) {
    return { code: e.code, message: errorText(e) };
  }
}

async function transport(r, name, url) {
  const db = await open(url);
  const q = (sql, args) => db.execute({ sql, args: args || [] }).then(resultSet);
  const t = `t_${name}`, p = `p_${name}`, c = `c_${name}`, ci = `ci_${name}`, u = `u_${name}`;
  await r.step(`${name} setup`, async () => {
    for (const tb of [c, ci, p, t, u]) await db.execute(`DROP TABLE IF EXISTS ${tb}`);
    await db.execute(`CREATE TABLE ${t} (a INTEGER, b INTEGER)`);
    await db.execute(`CREATE TABLE ${p} (id INTEGER PRIMARY KEY)`);
    await db.execute(`CREATE TABLE ${c} (id INTEGER PRIMARY KEY, pid INTEGER REFERENCES ${p}(id) DEFERRABLE INITIALLY DEFERRED)`);
    await db.execute(`CREATE TABLE ${ci} (id INTEGER PRIMARY KEY, pid INTEGER REFERENCES ${p}(id))`);
    await db.execute(`CREATE TABLE ${u} (x INTEGER UNIQUE)`);
    await db.execute(`INSERT INTO ${p} VALUES (1)`);
    return true;
  });
  await r.step(`${name} trigger with CASE END`, () => q(trigger(`tr_${name}`, t)));
  await r.step(`${name} trigger fires`, async () => {
    await db.execute(`INSERT INTO ${t} (b) VALUES (5)`);
    await db.execute(`INSERT INTO ${t} (b) VALUES (-1)`);
    return q(`SELECT a, b FROM ${t} ORDER BY rowid`);
  });
  await r.step(`${name} trigger in the schema`, () =>
    q(`SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' AND name = 'tr_${name}'`));
  await r.step(`${name} unique violation`, async () => {
    await db.execute(`INSERT INTO ${u} VALUES (1)`);
    return codeOf(db.execute(`INSERT INTO ${u} VALUES (1)`));
  });
  await r.step(`${name} foreign key violation`, () => codeOf(db.execute(`INSERT INTO ${ci} VALUES (1, 99)`)));
  await r.step(`${name} deferred foreign key violation`, () => codeOf(db.execute(`INSERT INTO ${c} VALUES (1, 99)`)));
  await r.step(`${name} deferred foreign key violation in a batch`, () =>
    codeOf(db.batch([`INSERT INTO ${c} VALUES (2, 1)`, `INSERT INTO ${c} VALUES (3, 98)`], "write")));
  await r.step(`${name} rows after the violations`, () => q(`SELECT (SELECT count(*) FROM ${c}), (SELECT count(*) FROM ${ci}), (SELECT count(*) FROM ${u})`));
  db.close();
}

// concurrent: 300 clients at once, 100 inserting a child whose parent never
// comes, 200 inserting into another table.
async function concurrent(r, url) {
  const setup = await open(url);
  await setup.execute("DROP TABLE IF EXISTS cc");
  await setup.execute("DROP TABLE IF EXISTS pp");
  await setup.execute("DROP TABLE IF EXISTS vv");
  await setup.execute("CREATE TABLE pp (id INTEGER PRIMARY KEY)");
  await setup.execute("CREATE TABLE cc (id INTEGER PRIMARY KEY, pid INTEGER REFERENCES pp(id) DEFERRABLE INITIALLY DEFERRED)");
  await setup.execute("CREATE TABLE vv (id INTEGER PRIMARY KEY, x INTEGER)");
  await setup.execute("INSERT INTO pp VALUES (1)");
  const clients = [];
  for (let i = 0; i < 300; i++) clients.push(await open(url));
  const outcomes = await Promise.all(clients.map((db, i) => {
    const violator = i % 3 === 0;
    const sql = violator ? `INSERT INTO cc VALUES (${i + 1}, ${1000 + i})` : `INSERT INTO vv VALUES (${i + 1}, ${i})`;
    return codeOf(db.execute(sql)).then((o) => ({ violator, ...o }));
  }));
  for (const db of clients) db.close();
  await r.step("concurrent outcomes", () => {
    const tally = {};
    for (const o of outcomes) {
      const key = (o.violator ? "violator " : "valid ") + (o.ok ? "ok" : o.code + ": " + o.message);
      tally[key] = (tally[key] || 0) + 1;
    }
    return tally;
  });
  await r.step("concurrent rows", () => setup.execute("SELECT (SELECT count(*) FROM vv), (SELECT count(*) FROM cc)").then(resultSet));
  // The ids the server acknowledged, for the driver to find in the replica.
  await r.step("concurrent acknowledged", () => outcomes.filter((o) => o.ok).length);
  setup.close();
}

// phaseURL gives each phase a file of its own when the reference is a local
// file: a connection of the local client whose statement failed may hold
// the file's lock until it is closed, which says nothing of the server.
function phaseURL(url, phase) {
  return local ? url.replace(/\.db$/, `-${phase}.db`) : url;
}

async function main() {
  const r = recorder();
  await transport(r, "http", phaseURL(process.env.DB_URL, "http"));
  await transport(r, "ws", phaseURL(process.env.DB_WS_URL, "ws"));
  await concurrent(r, phaseURL(process.env.DB_URL, "concurrent"));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
