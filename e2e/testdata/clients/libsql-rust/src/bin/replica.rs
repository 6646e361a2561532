//! An application with an embedded replica (the libsql crate's remote
//! replica, which takes libSQL's HTTP sync when the server answers /info):
//! opens LOCAL synced from URL with TOKEN, runs ACTION and prints one JSON
//! line, as the Python and JavaScript applications beside the embedded
//! replica tests do.
//!   sync:  sync() and print the rows of t
//!   write: write one row through the replica (the crate sends it to the
//!          primary), sync() and print the rows of t
//!   churn: N times: write a 16 KB row through the replica and sync()
use libsql::{Builder, Value};
use serde_json::{json, Value as J};

fn show(v: Value) -> J {
    match v {
        Value::Null => J::Null,
        Value::Integer(i) => json!(i),
        Value::Real(f) => json!(f),
        Value::Text(s) => json!(s),
        Value::Blob(b) => json!(b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
    }
}

async fn run(local: &str, url: &str, token: &str, action: &str, arg: &str) -> libsql::Result<J> {
    let db = Builder::new_remote_replica(local, url.to_string(), token.to_string())
        .connector(hyper::client::HttpConnector::new())
        .build()
        .await?;
    db.sync().await?;
    let conn = db.connect()?;
    match action {
        "write" => {
            conn.execute("INSERT INTO t(v) VALUES (?1)", [arg]).await?;
            db.sync().await?;
        }
        "churn" => {
            for _ in 0..arg.parse::<usize>().expect("churn takes a count") {
                conn.execute("INSERT INTO t(v) VALUES (hex(randomblob(8000)))", ()).await?;
                db.sync().await?;
            }
        }
        _ => {}
    }
    let mut rows = conn.query("SELECT id, v FROM t ORDER BY id", ()).await?;
    let mut out = vec![];
    while let Some(r) = rows.next().await? {
        out.push(json!([show(r.get_value(0)?), show(r.get_value(1)?)]));
    }
    let mut check = conn.query("PRAGMA integrity_check", ()).await?;
    let integrity = match check.next().await? {
        Some(r) => r.get::<String>(0)?,
        None => String::new(),
    };
    Ok(json!({"rows": out, "integrity": integrity}))
}

// A runtime of several threads: the crate opens a synced connection inside
// tokio::task::block_in_place.
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or_default();
    match run(arg(1), arg(2), arg(3), arg(4), arg(5)).await {
        Ok(v) => println!("{v}"),
        Err(e) => {
            println!("{}", json!({"error": e.to_string()}));
            std::process::exit(1);
        }
    }
}
