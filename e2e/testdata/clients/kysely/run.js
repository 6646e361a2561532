// Kysely with @libsql/kysely-libsql (given a @libsql/client of the pinned
// version): its Migrator, run twice, then the queries of an application,
// against DB_URL (sluice or a local file).
"use strict";
const { createClient } = require("@libsql/client");
const { Kysely, sql } = require("kysely");
const { Migrator } = require("kysely/migration");
const { LibsqlDialect } = require("@libsql/kysely-libsql");
const { recorder } = require("../common.js");

const migrations = {
  "001_people": {
    async up(db) {
      await db.schema.createTable("person")
        .addColumn("id", "integer", (c) => c.primaryKey().autoIncrement())
        .addColumn("first_name", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.defaultTo(sql`'2024-01-01 00:00:00'`).notNull())
        .execute();
      await db.schema.createTable("pet")
        .addColumn("id", "integer", (c) => c.primaryKey())
        .addColumn("name", "text", (c) => c.notNull().unique())
        .addColumn("owner_id", "integer", (c) => c.references("person.id").onDelete("cascade").notNull())
        .execute();
      await db.schema.createIndex("pet_owner").on("pet").column("owner_id").execute();
    },
    async down(db) {
      await db.schema.dropTable("pet").execute();
      await db.schema.dropTable("person").execute();
    },
  },
  "002_nickname": {
    async up(db) {
      await db.schema.alterTable("person").addColumn("nickname", "text").execute();
    },
    async down(db) {
      await db.schema.alterTable("person").dropColumn("nickname").execute();
    },
  },
};

function outcome(res) {
  return { error: res.error ? String(res.error.message || res.error) : null, results: (res.results || []).map((m) => m.migrationName + ":" + m.direction + ":" + m.status) };
}

async function main() {
  const client = createClient({ url: process.env.DB_URL });
  const db = new Kysely({ dialect: new LibsqlDialect({ client }) });
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const r = recorder();
  const run = process.env.RUN || "1";

  await r.step("migrate to latest", async () => outcome(await migrator.migrateToLatest()));
  await r.step("migrate to latest again", async () => outcome(await migrator.migrateToLatest()));
  await r.step("introspect tables", async () =>
    (await db.introspection.getTables()).map((t) => ({ name: t.name, columns: t.columns.map((c) => [c.name, c.dataType, c.isNullable, c.isAutoIncrementing, c.hasDefaultValue]) })));
  await r.step("insert", async () => {
    await db.deleteFrom("pet").execute();
    await db.deleteFrom("person").execute();
    const p = await db.insertInto("person").values({ first_name: "Jennifer", nickname: "Jen" }).returning(["id", "first_name", "created_at"]).executeTakeFirstOrThrow();
    await db.insertInto("pet").values([{ name: "Catto", owner_id: p.id }, { name: "Doggo", owner_id: p.id }]).execute();
    return { first_name: p.first_name, created_at: p.created_at };
  });
  await r.step("select join", () =>
    db.selectFrom("pet").innerJoin("person", "person.id", "pet.owner_id")
      .select(["pet.name", "person.first_name", "person.nickname"]).orderBy("pet.name").execute());
  await r.step("unique violation", () => db.insertInto("pet").values({ name: "Catto", owner_id: 1 }).execute());
  await r.step("transaction", () =>
    db.transaction().execute(async (trx) => {
      const person = await trx.insertInto("person").values({ first_name: "Tx" + run }).returning("first_name").executeTakeFirstOrThrow();
      const n = await trx.selectFrom("person").select((eb) => eb.fn.countAll().as("n")).executeTakeFirstOrThrow();
      return { person, n: Number(n.n) };
    }));
  await r.step("migrate down and up", async () => {
    const down = outcome(await migrator.migrateDown());
    const up = outcome(await migrator.migrateToLatest());
    return { down, up };
  });
  await db.destroy();
  r.done();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
