# One application with an embedded replica (PyPI libsql), driven by
# sluice-bench embedded over stdin/stdout exactly as worker.js is: a local
# replica of the database (reads: local) and a remote connection to the
# same database (reads: Hrana; with a fifth argument, also through a proxy
# that adds a network round trip), so both are measured from the same client.
import json
import random
import sys
import time

import libsql

local, sync_url, token = sys.argv[1], sys.argv[2], sys.argv[3]
wait_url = sys.argv[4] if len(sys.argv) > 4 else ""
far_url = sys.argv[5] if len(sys.argv) > 5 else ""


def out(o):
    sys.stdout.write(json.dumps(o) + "\n")
    sys.stdout.flush()


def now_ms():
    return time.time() * 1000


def main():
    t0 = now_ms()
    replica = libsql.connect(local, sync_url=sync_url, auth_token=token)
    replica.sync()
    out({"ready": True, "bootstrapMs": now_ms() - t0})
    waiting = None
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            op = cmd["op"]
            if op == "reads":
                # A remote connection holds a Hrana stream, which the server
                # (as sqld) expires after 10 s idle: a new one per command.
                url = {"remote": sync_url, "far": far_url}.get(cmd["where"])
                db = replica if cmd["where"] == "local" else libsql.connect(url, auth_token=token) if url else None
                if db is None:
                    raise Exception("no connection for reads %s" % cmd["where"])
                lat = []
                start = now_ms()
                for _ in range(cmd["n"]):
                    i = random.randint(1, cmd["maxId"])
                    t = time.perf_counter_ns()
                    rows = db.execute("SELECT v FROM t WHERE id = ?", (i,)).fetchall()
                    lat.append((time.perf_counter_ns() - t) / 1000)
                    if len(rows) != 1:
                        raise Exception("row %d missing (%s)" % (i, cmd["where"]))
                out({"lat": lat, "ms": now_ms() - start})
            elif op == "follow":
                # With cmd["wait"], a second replica (its own file) synced
                # through the waiting URL, as worker.js does.
                db = replica
                if cmd.get("wait"):
                    if waiting is None:
                        waiting = libsql.connect(local + "-wait", sync_url=wait_url, auth_token=token)
                        waiting.sync()
                    db = waiting
                points, sync_ms = [], []
                end = now_ms() + cmd["ms"]
                while now_ms() < end:
                    t = now_ms()
                    db.sync()
                    m = db.execute("SELECT max(id) FROM t").fetchone()[0]
                    seen = now_ms()
                    sync_ms.append(seen - t)
                    points.append([seen, m])
                    if cmd.get("intervalMs", 0) > 0:
                        time.sleep(cmd["intervalMs"] / 1000)
                out({"points": points, "syncMs": sync_ms})
            elif op == "sync":
                sync_ms = []
                for _ in range(cmd.get("n", 1)):
                    t = now_ms()
                    replica.sync()
                    sync_ms.append(now_ms() - t)
                m = replica.execute("SELECT max(id) FROM t").fetchone()[0]
                out({"syncMs": sync_ms, "maxId": m})
            elif op == "quit":
                break
        except Exception as e:  # the driver reads the message
            out({"error": str(e)})


try:
    main()
except Exception as e:
    out({"error": str(e)})
    sys.exit(1)
