# An application with an embedded replica (Python libsql): opens LOCAL
# synced from SYNC_URL with TOKEN, runs ACTION and prints one JSON line.
#   sync:  sync() and print the rows of t
#   write: write one row through the replica (the client sends it to the
#          primary), sync() and print the rows of t
#   churn: N times: write a 16 KB row through the replica and sync()
import json, os, sys

import libsql

local, url, token, action = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
try:
    conn = libsql.connect(local, sync_url=url, auth_token=token)
    conn.sync()
    if action == "write":
        conn.execute("INSERT INTO t(v) VALUES (?)", (sys.argv[5],))
        conn.commit()
        conn.sync()
    if action == "churn":
        for i in range(int(sys.argv[5])):
            conn.execute("INSERT INTO t(v) VALUES (hex(randomblob(8000)))")
            conn.commit()
            conn.sync()
    rows = conn.execute("SELECT id, v FROM t ORDER BY id").fetchall()
    check = conn.execute("PRAGMA integrity_check").fetchall()
    print(json.dumps({"rows": [[r[0], r[1]] for r in rows], "integrity": check[0][0]}))
except Exception as e:  # the test reads the message (401/403 and such)
    print(json.dumps({"error": str(e)}))
    sys.exit(1)
