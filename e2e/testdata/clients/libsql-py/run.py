"""PyPI libsql (the libSQL Python SDK) in remote mode against DB_URL (sluice's
http:// URL) or on the local file DB_FILE: DB-API use as an application has
it, with the implicit transactions of isolation_level DEFERRED (BEGIN before
a write, commit() and rollback() end it)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import libsql  # noqa: E402
from common import Recorder  # noqa: E402


def rows(cur):
    return {"columns": [d[0] for d in cur.description], "rows": [list(r) for r in cur.fetchall()]}


def main():
    target = os.environ["DB_URL"] if os.environ["DB_KIND"] == "sluice" else os.environ["DB_FILE"]
    c = libsql.connect(target)
    r = Recorder()

    def write(sql, params=()):
        cur = c.execute(sql, params)
        return {"rowcount": cur.rowcount, "lastrowid": cur.lastrowid}

    r.step("drop", lambda: (c.execute("DROP TABLE IF EXISTS notes"), c.commit(), "done")[-1])
    r.step("create", lambda: (c.executescript(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL UNIQUE, n REAL, raw BLOB, big INTEGER);"
        "CREATE INDEX notes_n ON notes(n);"), "done")[-1])
    r.step("insert", lambda: write("INSERT INTO notes (body, n, raw, big) VALUES (?, ?, ?, ?)",
                                   ("hello ü", 1.5, b"\x00\xff", 2**62 + 1)))
    r.step("in transaction after a write", lambda: c.in_transaction)
    r.step("commit", lambda: (c.commit(), c.in_transaction)[-1])
    r.step("executemany", lambda: (c.executemany("INSERT INTO notes (body, n) VALUES (?, ?)",
                                                 [("a", 1.0), ("b", None), ("c", 2.25)]), c.commit(), "done")[-1])
    r.step("select", lambda: rows(c.execute("SELECT id, body, n, raw, big, n * 2 AS twice FROM notes ORDER BY id")))
    r.step("unique violation", lambda: write("INSERT INTO notes (body) VALUES ('a')"))
    r.step("rollback after the violation", lambda: (c.rollback(), c.in_transaction)[-1])
    r.step("rolled back write", lambda: (write("INSERT INTO notes (body) VALUES ('gone')"), c.rollback(),
                                         rows(c.execute("SELECT count(*) AS n FROM notes")))[-1])
    # rowcount only: after an UPDATE sqlite3-style cursors keep the connection's
    # last INSERT rowid, which a server (sqld too) reports for INSERTs alone.
    r.step("update", lambda: (write("UPDATE notes SET n = coalesce(n, 0) + 1"), c.commit())[0]["rowcount"])
    r.step("syntax error", lambda: rows(c.execute("SELEC 1")))
    r.step("after errors", lambda: rows(c.execute("SELECT body, typeof(n) AS t FROM notes ORDER BY body")))
    r.step("table_info", lambda: rows(c.execute("PRAGMA table_info(notes)")))
    c.close()


main()
