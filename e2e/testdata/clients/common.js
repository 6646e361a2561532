// Shared by the Node scripts of the client conformance suite: each step's
// outcome is printed as a JSON line under its name, so the
// Go driver can compare a run against sluice with the same run on a local file.
"use strict";

// errorText keeps what a user reads from SQLite (the message without the
// client's "SQLITE_CODE: " or "SQLite error: " prefixes, which differ between a
// local file and any server).
function errorText(e) {
  if (e && e.cause) return errorText(e.cause); // ORMs wrap the client's error
  let m = String((e && e.message) || e);
  for (;;) {
    const next = m.replace(/^SQLITE_[A-Z0-9_]+: /, "").replace(/^SQLite error: /, "");
    if (next === m) return m;
    m = next;
  }
}

// plain turns client values (bigint, ArrayBuffer, Date, Row objects) into JSON.
function plain(v) {
  if (typeof v === "bigint") return { bigint: v.toString() };
  if (v instanceof ArrayBuffer) return { blob: Buffer.from(v).toString("hex") };
  if (ArrayBuffer.isView(v)) return { blob: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("hex") };
  if (v instanceof Date) return { date: v.toISOString() };
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === "object") {
    const o = {};
    for (const k of Object.keys(v)) o[k] = plain(v[k]);
    return o;
  }
  if (typeof v === "number" && !Number.isFinite(v)) return { number: String(v) };
  return v;
}

// STEP_TIMEOUT_MS bounds one step, so a hung request shows as that step's
// error and the script goes on to the next.
const STEP_TIMEOUT_MS = 15000;

// recorder prints each step's outcome as a JSON line as soon as it is known,
// so the driver sees every finished step even if the script is killed.
function recorder() {
  let hung = null; // after a step hangs, the connection is suspect: later steps are not run
  return {
    async step(name, fn) {
      if (hung) {
        process.stdout.write(JSON.stringify({ step: name, error: "not run: step " + JSON.stringify(hung) + " hung" }) + "\n");
        return;
      }
      let timer;
      const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => {
          hung = name;
          reject(new Error("step timed out after " + STEP_TIMEOUT_MS / 1000 + "s"));
        }, STEP_TIMEOUT_MS);
      });
      let line;
      try {
        line = { step: name, ok: plain(await Promise.race([fn(), timeout])) };
      } catch (e) {
        line = { step: name, error: errorText(e) };
      } finally {
        clearTimeout(timer);
      }
      process.stdout.write(JSON.stringify(line) + "\n");
    },
    // done ends the process: a client stuck on a hung request must not keep it alive.
    done() {
      process.exit(0);
    },
  };
}

// resultSet is what an application sees of a @libsql/client ResultSet.
function resultSet(rs) {
  return {
    columns: rs.columns,
    columnTypes: rs.columnTypes,
    rows: rs.rows.map((r) => Array.from(r)),
    rowsAffected: rs.rowsAffected,
  };
}

module.exports = { recorder, errorText, plain, resultSet };
