"""PyPI libsql-client against DB_WS_URL (sluice's ws:// URL, the only
transport on which this client has interactive transactions, or a local
file: URL): execute, batch and an interactive transaction."""
import asyncio
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import libsql_client  # noqa: E402
from common import Recorder  # noqa: E402


def rs(r):
    return {"columns": list(r.columns), "rows": [list(row) for row in r.rows]}


async def main():
    r = Recorder()
    async with libsql_client.create_client(os.environ["DB_WS_URL"]) as c:
        await r.astep("drop", lambda: _q(c, "DROP TABLE IF EXISTS notes"))
        await r.astep("create", lambda: _batch(c, [
            "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT UNIQUE, n REAL, raw BLOB)",
            "CREATE INDEX IF NOT EXISTS notes_n ON notes(n)",
        ]))
        await r.astep("insert", lambda: _insert(c))
        await r.astep("select", lambda: _q(c, "SELECT id, body, n, raw, 1 AS id FROM notes ORDER BY id"))
        await r.astep("unique violation", lambda: _q(c, "INSERT INTO notes (body) VALUES ('hello')"))
        await r.astep("interactive transaction", lambda: _transaction(c))
        await r.astep("after the transaction", lambda: _q(c, "SELECT body FROM notes ORDER BY id"))
        await r.astep("table_info", lambda: _q(c, "PRAGMA table_info(notes)"))


async def _insert(c):
    res = await c.execute("INSERT INTO notes (body, n, raw) VALUES (?, ?, ?)", ["hello", 1.5, b"\x00\xff"])
    return {"rows_affected": res.rows_affected, "last_insert_rowid": res.last_insert_rowid}


async def _batch(c, stmts):
    return [rs(x) for x in await c.batch(stmts)]


async def _q(c, sql):
    return rs(await c.execute(sql))


async def _transaction(c):
    tx = c.transaction()
    try:
        await tx.execute("INSERT INTO notes (body) VALUES ('kept')")
        inside = rs(await tx.execute("SELECT count(*) AS n FROM notes"))
        await tx.commit()
    finally:
        tx.close()
    tx = c.transaction()
    try:
        await tx.execute("INSERT INTO notes (body) VALUES ('rolled back')")
        await tx.rollback()
    finally:
        tx.close()
    return inside


asyncio.run(main())
