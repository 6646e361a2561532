//! The libsql crate in remote mode (Hrana over HTTP) running a script of
//! steps from the test: each step prints one JSON line with its outcome, in
//! the shape the test's local-file runner prints for the same step.
use libsql::{params::Params, Builder, Value};
use serde_json::{json, Value as J};

fn to_value(v: &J) -> Value {
    match v {
        J::Null => Value::Null,
        J::Bool(b) => Value::Integer(*b as i64),
        J::Number(n) if n.is_i64() => Value::Integer(n.as_i64().unwrap()),
        J::Number(n) => Value::Real(n.as_f64().unwrap()),
        J::String(s) => Value::Text(s.clone()),
        J::Object(o) => {
            let hex = o["blob"].as_str().unwrap_or_default();
            Value::Blob((0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect())
        }
        J::Array(_) => panic!("arrays are not parameters"),
    }
}

// Each value with its SQLite type, so a REAL 1.0 and an INTEGER 1 differ.
fn show(v: Value) -> J {
    match v {
        Value::Null => J::Null,
        Value::Integer(i) => json!(format!("integer:{i}")),
        Value::Real(f) => json!(format!("real:{f:?}")),
        Value::Text(s) => json!(format!("text:{s}")),
        Value::Blob(b) => json!(format!("blob:{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>())),
    }
}

async fn query(conn: &libsql::Connection, sql: &str, params: Params) -> libsql::Result<J> {
    let mut rows = conn.query(sql, params).await?;
    let n = rows.column_count();
    let cols: Vec<J> = (0..n).map(|i| json!(rows.column_name(i).unwrap_or_default())).collect();
    let mut out = vec![];
    while let Some(row) = rows.next().await? {
        let mut r = vec![];
        for i in 0..n {
            r.push(show(row.get_value(i)?));
        }
        out.push(J::Array(r));
    }
    Ok(json!({"columns": cols, "rows": out}))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let url = std::env::var("DB_URL").expect("DB_URL");
    let script: Vec<J> = serde_json::from_str(&std::fs::read_to_string(std::env::var("SCRIPT").expect("SCRIPT")).unwrap()).unwrap();
    let db = Builder::new_remote(url, String::new()).connector(hyper::client::HttpConnector::new()).build().await.expect("open the remote database");
    let conn = db.connect().expect("connect");
    for st in script {
        let name = st["step"].as_str().unwrap();
        let sql = st["sql"].as_str().unwrap_or_default();
        let params = || Params::Positional(st["params"].as_array().map(|a| a.iter().map(to_value).collect()).unwrap_or_default());
        let res: libsql::Result<J> = match st["kind"].as_str().unwrap() {
            "exec" => conn.execute(sql, params()).await.map(|n| json!(n)),
            "query" => query(&conn, sql, params()).await,
            "batch" => conn.execute_batch(sql).await.map(|_| json!("done")),
            "tx" => async {
                let tx = conn.transaction().await?;
                for q in st["sqls"].as_array().unwrap() {
                    tx.execute(q.as_str().unwrap(), ()).await?;
                }
                let n = query(&tx, "SELECT count(*) AS n FROM logs", Params::None).await?;
                if st["rollback"].as_bool().unwrap_or(false) { tx.rollback().await? } else { tx.commit().await? }
                Ok(n)
            }
            .await,
            k => panic!("unknown step kind {k}"),
        };
        let line = match res {
            Ok(v) => json!({"step": name, "ok": v}),
            Err(e) => json!({"step": name, "error": e.to_string()}),
        };
        println!("{line}");
    }
}
