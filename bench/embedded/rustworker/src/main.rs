//! One application with an embedded replica (the libsql crate), driven by
//! sluice-bench embedded over stdin/stdout, one JSON line each way, exactly
//! as worker.js is: a local replica of the database (reads: local) and a
//! remote connection to the same database (reads: Hrana), so both are
//! measured from the same client. Point reads use one prepared statement
//! on either connection, as an application's hot path would.
use libsql::{Builder, Connection, Database};
use serde_json::{json, Value as J};
use std::io::{BufRead, Write};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

type Res<T> = Result<T, String>;

fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() * 1000.0
}

fn out(v: J) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{v}");
    let _ = o.flush();
}

/// xorshift64: random ids without another crate.
struct Rng(u64);

impl Rng {
    fn id(&mut self, max: i64) -> i64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        1 + (self.0 % max.max(1) as u64) as i64
    }
}

async fn replica(path: &str, url: &str, token: &str) -> Res<Database> {
    let db = Builder::new_remote_replica(path, url.to_string(), token.to_string())
        .connector(hyper::client::HttpConnector::new())
        .build()
        .await
        .map_err(|e| e.to_string())?;
    db.sync().await.map_err(|e| e.to_string())?;
    Ok(db)
}

async fn open_remote(url: &str, token: &str) -> Res<Connection> {
    let db = Builder::new_remote(url.to_string(), token.to_string())
        .connector(hyper::client::HttpConnector::new())
        .build()
        .await
        .map_err(|e| e.to_string())?;
    db.connect().map_err(|e| e.to_string())
}

async fn max_id(conn: &Connection) -> Res<i64> {
    let mut rows = conn.query("SELECT max(id) FROM t", ()).await.map_err(|e| e.to_string())?;
    let row = rows.next().await.map_err(|e| e.to_string())?.ok_or("no max(id)")?;
    row.get::<i64>(0).map_err(|e| e.to_string())
}

async fn reads(conn: &Connection, n: usize, max: i64, rng: &mut Rng, what: &str) -> Res<J> {
    let stmt = conn.prepare("SELECT v FROM t WHERE id = ?1").await.map_err(|e| e.to_string())?;
    let mut lat = Vec::with_capacity(n);
    let start = now_ms();
    for _ in 0..n {
        let id = rng.id(max);
        let t = Instant::now();
        let mut rows = stmt.query([id]).await.map_err(|e| e.to_string())?;
        let v = match rows.next().await.map_err(|e| e.to_string())? {
            Some(row) => row.get::<String>(0).map_err(|e| e.to_string())?,
            None => return Err(format!("row {id} missing ({what})")),
        };
        drop(rows);
        stmt.reset();
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        if v.is_empty() {
            return Err(format!("row {id} empty ({what})"));
        }
    }
    Ok(json!({"lat": lat, "ms": now_ms() - start}))
}

struct App {
    path: String,
    token: String,
    wait_url: String,
    sync_url: String,
    far_url: String,
    replica: Database,
    local: Connection,
    waiting: Option<(Database, Connection)>,
    rng: Rng,
}

impl App {
    async fn handle(&mut self, cmd: &J) -> Res<Option<J>> {
        let num = |k: &str| cmd[k].as_f64().unwrap_or(0.0);
        match cmd["op"].as_str().unwrap_or_default() {
            "reads" => {
                let where_ = cmd["where"].as_str().unwrap_or_default();
                let (n, max) = (num("n") as usize, num("maxId") as i64);
                // A remote connection holds a Hrana stream, which the
                // server (as sqld) expires after 10 s idle: a new one per
                // command.
                let url = match where_ {
                    "local" => return reads(&self.local, n, max, &mut self.rng, where_).await.map(Some),
                    "far" if !self.far_url.is_empty() => &self.far_url,
                    "remote" => &self.sync_url,
                    _ => return Err(format!("no connection for reads {where_}")),
                };
                let conn = open_remote(url, &self.token).await?;
                reads(&conn, n, max, &mut self.rng, where_).await.map(Some)
            }
            "follow" => {
                // sync() in a loop for ms: after each, the newest id visible
                // locally and when. With wait, a second replica (its own
                // file) synced through the waiting URL.
                if cmd["wait"].as_bool().unwrap_or(false) && self.waiting.is_none() {
                    let db = replica(&format!("{}-wait", self.path), &self.wait_url, &self.token).await?;
                    let conn = db.connect().map_err(|e| e.to_string())?;
                    self.waiting = Some((db, conn));
                }
                let (db, conn) = match (&self.waiting, cmd["wait"].as_bool().unwrap_or(false)) {
                    (Some((db, conn)), true) => (db, conn),
                    _ => (&self.replica, &self.local),
                };
                let (mut points, mut sync_ms) = (vec![], vec![]);
                let end = now_ms() + num("ms");
                while now_ms() < end {
                    let t = now_ms();
                    db.sync().await.map_err(|e| e.to_string())?;
                    let m = max_id(conn).await?;
                    let seen = now_ms();
                    sync_ms.push(seen - t);
                    points.push(json!([seen, m]));
                    if num("intervalMs") > 0.0 {
                        tokio::time::sleep(std::time::Duration::from_secs_f64(num("intervalMs") / 1000.0)).await;
                    }
                }
                Ok(Some(json!({"points": points, "syncMs": sync_ms})))
            }
            "sync" => {
                let mut sync_ms = vec![];
                for _ in 0..(num("n") as usize).max(1) {
                    let t = now_ms();
                    self.replica.sync().await.map_err(|e| e.to_string())?;
                    sync_ms.push(now_ms() - t);
                }
                Ok(Some(json!({"syncMs": sync_ms, "maxId": max_id(&self.local).await?})))
            }
            "quit" => Ok(None),
            op => Err(format!("unknown op {op:?}")),
        }
    }
}

async fn start(args: &[String]) -> Res<(App, f64)> {
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let t0 = now_ms();
    let replica = replica(&arg(1), &arg(2), &arg(3)).await?;
    let local = replica.connect().map_err(|e| e.to_string())?;
    let app = App {
        path: arg(1),
        token: arg(3),
        wait_url: arg(4),
        sync_url: arg(2),
        far_url: arg(5),
        replica,
        local,
        waiting: None,
        rng: Rng(0x9E37_79B9_7F4A_7C15 ^ std::process::id() as u64),
    };
    Ok((app, now_ms() - t0))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // Several threads: the crate opens a replica's connection inside
    // tokio::task::block_in_place.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut app = match rt.block_on(start(&args)) {
        Ok((app, ms)) => {
            out(json!({"ready": true, "bootstrapMs": ms}));
            app
        }
        Err(e) => {
            out(json!({"error": e}));
            std::process::exit(1);
        }
    };
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let cmd: J = match serde_json::from_str(&line) {
            Ok(c) => c,
            Err(e) => {
                out(json!({"error": e.to_string()}));
                continue;
            }
        };
        match rt.block_on(app.handle(&cmd)) {
            Ok(Some(v)) => out(v),
            Ok(None) => break,
            Err(e) => out(json!({"error": e})),
        }
    }
}
