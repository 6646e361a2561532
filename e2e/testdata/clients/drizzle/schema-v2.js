// The second schema: parent.name becomes NOT NULL with a default, which
// SQLite can only do by recreating the table (drizzle-kit turns foreign keys
// off around the copy so the children stay).
const { sqliteTable, integer, text, real, index } = require("drizzle-orm/sqlite-core");

const parent = sqliteTable("parent", {
  id: integer("id").primaryKey(),
  name: text("name").notNull().default(""),
});

const child = sqliteTable("child", {
  id: integer("id").primaryKey(),
  parentId: integer("parent_id").notNull().references(() => parent.id, { onDelete: "cascade" }),
  v: text("v"),
  score: real("score"),
  createdAt: integer("created_at", { mode: "timestamp" }),
  done: integer("done", { mode: "boolean" }).default(false),
}, (t) => [index("child_parent").on(t.parentId)]);

module.exports = { parent, child };
