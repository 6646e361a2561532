// The application's first schema: a parent with ON DELETE CASCADE children.
const { sqliteTable, integer, text, real, index } = require("drizzle-orm/sqlite-core");

const parent = sqliteTable("parent", {
  id: integer("id").primaryKey(),
  name: text("name"),
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
