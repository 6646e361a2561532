"""Drives libsql-client (the stock Python client, sync API) over Hrana over
WebSocket (a ws:// or wss:// URL), the only transport on which it offers
interactive transactions, and prints what it observed as one JSON object; the
Go tests hold the expectations. Usage: python3 python_ws_client.py URL [TOKEN]"""
import json
import sys

import libsql_client


def rejection(fn):
    try:
        fn()
        return {"rejected": False}
    except libsql_client.LibsqlError as e:
        return {"rejected": True, "code": e.code, "message": str(e)}


def count(db, s):
    return db.execute("SELECT count(*) FROM w WHERE s = ?", [s]).rows[0][0]


def main():
    url = sys.argv[1]
    token = sys.argv[2] if len(sys.argv) > 2 else None
    out = {}
    with libsql_client.create_client_sync(url, auth_token=token) as db:
        db.execute("CREATE TABLE w (id INTEGER PRIMARY KEY, i INTEGER, f REAL, s TEXT UNIQUE, b BLOB, n)")
        rs = db.execute("INSERT INTO w (i, f, s, b, n) VALUES (?, ?, ?, ?, ?)",
                        [2**60 + 1, 1.25, "text ü", b"\x00\x01\x02\xff", None])
        out["insert"] = {"rows_affected": rs.rows_affected, "last_insert_rowid": rs.last_insert_rowid}
        row = db.execute("SELECT i, f, s, b, n FROM w WHERE id = 1").rows[0]
        out["values"] = {"i": str(row[0]), "f": row[1], "s": row[2], "b": bytes(row[3]).hex(), "n": row[4]}
        out["named"] = db.execute("SELECT :a + :b", {"a": 2, "b": 3}).rows[0][0]
        results = db.batch([
            ("INSERT INTO w (i, s) VALUES (?, ?)", [10, "ten"]),
            "SELECT count(*) FROM w",
        ])
        out["batch"] = {"results": len(results), "count": results[1].rows[0][0]}

        # BEGIN; INSERT; ROLLBACK: seen inside the transaction, never after.
        tx = db.transaction()
        tx.execute("INSERT INTO w (s) VALUES ('rolled back')")
        out["rollback"] = {"inside": tx.execute("SELECT count(*) FROM w WHERE s = 'rolled back'").rows[0][0]}
        tx.rollback()
        out["rollback"]["after"] = count(db, "rolled back")

        tx = db.transaction()
        tx.execute("INSERT INTO w (s) VALUES ('committed')")
        out["commit"] = {"inside": tx.execute("SELECT count(*) FROM w WHERE s = 'committed'").rows[0][0]}
        tx.commit()
        out["commit"]["after"] = count(db, "committed")

        tx = db.transaction()
        out["tx_error"] = rejection(lambda: tx.execute("INSERT INTO w (s) VALUES ('ten')"))
        tx.execute("INSERT INTO w (s) VALUES ('after error')")
        tx.rollback()
        out["after_tx_error"] = count(db, "after error")

        out["constraint"] = rejection(lambda: db.execute("INSERT INTO w (s) VALUES ('ten')"))
        out["syntax"] = rejection(lambda: db.execute("SELEKT 1"))
        out["still_serving"] = db.execute("SELECT 1").rows[0][0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
