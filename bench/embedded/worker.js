// One application with an embedded replica (@libsql/client), driven by
// sluice-bench embedded over stdin/stdout, one JSON line each way. It keeps
// a local replica of the database (reads: local) and a remote client of the
// same database (reads: Hrana; with a fifth argument, also through a proxy
// that adds a network round trip), so both are measured from the same client.
"use strict";
const { createClient } = require("@libsql/client");
const readline = require("readline");

const [local, syncUrl, token, waitUrl, farUrl] = process.argv.slice(2);
const now = () => performance.timeOrigin + performance.now(); // wall clock, ms
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

async function main() {
  const t0 = now();
  const replica = createClient({ url: "file:" + local, syncUrl, authToken: token });
  await replica.sync();
  const remote = createClient({ url: syncUrl, authToken: token });
  const far = farUrl ? createClient({ url: farUrl, authToken: token }) : null;
  out({ ready: true, bootstrapMs: now() - t0 });
  let waiting = null;
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const cmd = JSON.parse(line);
    try {
      if (cmd.op === "reads") {
        // Point reads by random id: microseconds each, and the rate.
        const db = { local: replica, remote, far }[cmd.where];
        if (!db) throw new Error(`no client for reads ${cmd.where}`);
        const lat = [];
        const start = now();
        for (let i = 0; i < cmd.n; i++) {
          const id = 1 + Math.floor(Math.random() * cmd.maxId);
          const t = process.hrtime.bigint();
          const rs = await db.execute({ sql: "SELECT v FROM t WHERE id = ?", args: [id] });
          lat.push(Number(process.hrtime.bigint() - t) / 1000);
          if (rs.rows.length !== 1) throw new Error(`row ${id} missing (${cmd.where})`);
        }
        out({ lat, ms: now() - start });
      } else if (cmd.op === "follow") {
        // sync() in a loop for cmd.ms: after each, the newest id visible
        // locally and when it became visible. With cmd.wait, on a second
        // replica (its own file) synced through the waiting URL, whose
        // sync() answers when the next transaction is shipped.
        let db = replica;
        if (cmd.wait) {
          if (!waiting) {
            waiting = createClient({ url: "file:" + local + "-wait", syncUrl: waitUrl, authToken: token });
            await waiting.sync();
          }
          db = waiting;
        }
        const points = [];
        const syncMs = [];
        const end = now() + cmd.ms;
        while (now() < end) {
          const t = now();
          await db.sync();
          const rs = await db.execute("SELECT max(id) AS m FROM t");
          const seen = now();
          syncMs.push(seen - t);
          points.push([seen, Number(rs.rows[0].m)]);
          if (cmd.intervalMs > 0) await new Promise((r) => setTimeout(r, cmd.intervalMs));
        }
        out({ points, syncMs });
      } else if (cmd.op === "sync") {
        const syncMs = [];
        for (let i = 0; i < (cmd.n || 1); i++) {
          const t = now();
          await replica.sync();
          syncMs.push(now() - t);
        }
        const rs = await replica.execute("SELECT max(id) AS m FROM t");
        out({ syncMs, maxId: Number(rs.rows[0].m) });
      } else if (cmd.op === "quit") {
        break;
      }
    } catch (e) {
      out({ error: String(e && e.message ? e.message : e) });
    }
  }
  replica.close();
  remote.close();
  if (far) far.close();
  if (waiting) waiting.close();
}
main().catch((e) => {
  out({ error: String(e && e.message ? e.message : e) });
  process.exitCode = 1;
});
