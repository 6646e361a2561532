// drizzle-kit push (twice), the drizzle-orm queries of an application, a
// table-recreating push that must keep the children of an ON DELETE CASCADE
// foreign key, and drizzle-kit pull, against DB_URL (sluice or a local file).
"use strict";
const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
const { createClient } = require("@libsql/client");
const { drizzle } = require("drizzle-orm/libsql");
const { eq, sql, count } = require("drizzle-orm");
const { recorder } = require("../common.js");

const work = process.cwd();

// kit runs drizzle-kit with a config for schema file and reports what a user
// would check: the exit status and whether it saw changes to apply.
function kit(command, schema) {
  const config = path.join(work, "drizzle.config.js");
  fs.writeFileSync(config, "module.exports = " + JSON.stringify({
    dialect: "turso",
    schema: path.join(__dirname, schema || "schema-v1.js"),
    out: path.join(work, "pulled"),
    dbCredentials: { url: process.env.DB_URL },
  }) + ";\n");
  const args = [command, "--config", config];
  if (command === "push") args.push("--force");
  const res = spawnSync("drizzle-kit", args, { encoding: "utf8", timeout: 30000, env: process.env });
  const output = (res.stdout || "") + (res.stderr || "");
  if (res.status !== 0) throw new Error("drizzle-kit " + command + " exited " + res.status + ": " + output.slice(-600));
  return { changes: !/No changes detected/.test(output) };
}

async function main() {
  const r = recorder();
  await r.step("push", () => kit("push", "schema-v1.js"));
  await r.step("push again", () => kit("push", "schema-v1.js"));

  const client = createClient({ url: process.env.DB_URL });
  const { parent, child } = require("./schema-v1.js");
  const db = drizzle(client);
  await r.step("seed", async () => {
    await db.delete(child);
    await db.delete(parent);
    await db.insert(parent).values([{ id: 1, name: "one" }, { id: 2, name: null }]);
    const rows = [];
    for (let i = 0; i < 103; i++) {
      rows.push({ parentId: 1 + (i % 2), v: "c" + i, score: i / 4, createdAt: new Date(Date.UTC(2024, 0, 1, 0, 0, i)), done: i % 3 === 0 });
    }
    await db.insert(child).values(rows);
    return db.select({ n: count() }).from(child);
  });
  await r.step("select join", () =>
    db.select({ parentId: parent.id, childId: child.id, name: parent.name, v: child.v, createdAt: child.createdAt, done: child.done })
      .from(child).innerJoin(parent, eq(child.parentId, parent.id)).orderBy(child.id).limit(3));
  await r.step("aggregate", () =>
    db.select({ parentId: child.parentId, n: count(), total: sql`sum(${child.score})` }).from(child).groupBy(child.parentId).orderBy(child.parentId));
  await r.step("unique violation", () => db.insert(parent).values({ id: 1, name: "dup" }));
  await r.step("update returning", () => db.update(parent).set({ name: "uno" }).where(eq(parent.id, 1)).returning());

  await r.step("push recreating parent", () => kit("push", "schema-v2.js"));
  await r.step("children after the recreate", () => db.select({ n: count() }).from(child));
  await r.step("parents after the recreate", () => db.select().from(parent).orderBy(parent.id));
  await r.step("push v2 again", () => kit("push", "schema-v2.js"));
  await r.step("pull", () => {
    kit("pull", "schema-v2.js");
    const dir = path.join(work, "pulled");
    const out = {};
    for (const f of ["schema.ts", "relations.ts"]) {
      if (fs.existsSync(path.join(dir, f))) out[f] = fs.readFileSync(path.join(dir, f), "utf8");
    }
    return out;
  });
  // Back to the first schema, so a second run starts where the first did.
  await r.step("push back to v1", () => kit("push", "schema-v1.js"));
  await r.step("children at the end", () => db.select({ n: count() }).from(child));
  client.close();
  r.done();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
