"""Drives libsql-client (the stock Python client, sync API) against a sluice
Hrana endpoint and prints what it observed as one JSON object; the Go test
(TestPythonClient) holds the expectations. Usage: python3 python_client.py URL"""
import json
import sys

import libsql_client


def rejection(fn):
    try:
        fn()
        return {"rejected": False}
    except libsql_client.LibsqlError as e:
        return {"rejected": True, "code": e.code, "message": str(e)}


def main():
    url = sys.argv[1]
    out = {}
    with libsql_client.create_client_sync(url) as db:
        db.execute("CREATE TABLE p (id INTEGER PRIMARY KEY, i INTEGER, f REAL, s TEXT UNIQUE, b BLOB, n)")
        big = 2**60 + 1
        rs = db.execute("INSERT INTO p (i, f, s, b, n) VALUES (?, ?, ?, ?, ?)",
                        [big, 1.25, "text ü", b"\x00\x01\x02\xff", None])
        out["insert"] = {"rows_affected": rs.rows_affected, "last_insert_rowid": rs.last_insert_rowid}
        row = db.execute("SELECT i, f, s, b, n FROM p WHERE id = 1").rows[0]
        out["values"] = {"i": str(row[0]), "f": row[1], "s": row[2], "b": bytes(row[3]).hex(), "n": row[4]}

        db.execute("INSERT INTO p (i, s) VALUES (:i, :s)", {"i": 8, "s": "eight"})
        db.execute("INSERT INTO p (i, s) VALUES (?, ?)", [7.0, "seven"])
        out["named"] = db.execute("SELECT i FROM p WHERE s = 'eight'").rows[0][0]
        out["float_into_integer"] = db.execute("SELECT typeof(i) FROM p WHERE s = 'seven'").rows[0][0]

        results = db.batch([
            ("INSERT INTO p (i, s) VALUES (?, ?)", [10, "ten"]),
            ("INSERT INTO p (i, s) VALUES (?, ?)", [11, "eleven"]),
            "SELECT count(*) FROM p",
        ])
        out["batch"] = {"results": len(results), "count": results[2].rows[0][0]}
        out["batch_error"] = rejection(lambda: db.batch([
            ("INSERT INTO p (i, s) VALUES (?, ?)", [12, "twelve"]),
            ("INSERT INTO p (i, s) VALUES (?, ?)", [13, "ten"]),
        ]))
        out["after_batch_error"] = db.execute("SELECT count(*) FROM p WHERE s = 'twelve'").rows[0][0]

        out["constraint"] = rejection(lambda: db.execute("INSERT INTO p (s) VALUES ('ten')"))
        out["syntax"] = rejection(lambda: db.execute("SELEKT 1"))
        out["transaction"] = rejection(lambda: db.transaction())
        out["still_serving"] = db.execute("SELECT 1").rows[0][0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
