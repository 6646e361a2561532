"""Drives libsql-client (the stock Python client, sync API, Hrana's JSON
pipeline) against a sluice URL whose answers are capped
(limits.max-response-bytes) and prints what it observed as one JSON object;
the Go test (TestAnswerBudgetPythonClient) holds the expectations.
Usage: python3 budget_client.py URL"""
import json
import sys

import libsql_client


def rows(n):
    return ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < %d) "
            "SELECT i, printf('%%0180d', i) AS pad FROM n" % n)


def outcome(fn):
    try:
        return {"ok": True, "rows": len(fn().rows)}
    except libsql_client.LibsqlError as e:
        return {"ok": False, "code": e.code, "message": str(e)}


def main():
    out = {}
    with libsql_client.create_client_sync(sys.argv[1]) as db:
        out["big"] = outcome(lambda: db.execute(rows(20000)))
        out["after"] = db.execute("SELECT 42").rows[0][0]
        out["fits"] = outcome(lambda: db.execute(rows(800)))
        # Four statements that each fit, in one batch: together they do not.
        out["batch"] = outcome(lambda: db.batch([rows(400)] * 4)[3])
    print(json.dumps(out))


main()
