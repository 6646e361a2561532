package server

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/replica/replicaurl"
	_ "github.com/tursodatabase/libsql-client-go/libsql"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// A WebSocket stream whose connection state changed (a pragma, a TEMP
// table) keeps a session of its own, but holds no transaction: idling longer
// than the transaction timeout must not end it. Each case runs against a
// server replicating to a directory and to MinIO (sync), and is compared
// with the same statements on a local file.

const wsIdle = time.Second

// serveOn serves with store, cfg changed by mod, and the databases names;
// it returns the base URL.
func serveOn(t *testing.T, store replica.Store, mod func(*Config), names ...string) string {
	t.Helper()
	cfg := Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Durability = "sync"
	cfg.Compaction.Disabled = true
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewWithStore(cfg, store, slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), "test")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close(context.Background())
	})
	for _, n := range names {
		if _, err := s.Host().Create(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	return ts.URL
}

// eachStore runs fn against a server (see serveOn) replicating to a local
// directory and against one replicating to MinIO.
func eachStore(t *testing.T, mod func(*Config), names []string, fn func(t *testing.T, base string)) {
	t.Run("file", func(t *testing.T) {
		store, err := file.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		fn(t, serveOn(t, store, mod, names...))
	})
	t.Run("minio", func(t *testing.T) {
		m := testenv.MinIO(t)
		store, err := replicaurl.Open(context.Background(), m.URL(m.NewBucket(t), ""))
		if err != nil {
			t.Fatal(err)
		}
		fn(t, serveOn(t, store, mod, names...))
	})
}

// shortTxTimeout makes the transaction timeout well under wsIdle, so that a
// stream whose state alone were counted as a transaction would be ended by
// the idle second.
func shortTxTimeout(c *Config) { c.Hrana.TxTimeout = Duration(wsIdle / 3) }

// The statements of each stream, the idle second, then what each stream is
// asked; the answers must be the local file's.
var wsStateCases = []struct {
	name  string
	setup []string
	after []string
}{
	{"foreign keys off", []string{"PRAGMA foreign_keys=OFF"}, []string{"SELECT 1", "PRAGMA foreign_keys"}},
	{"temp table", []string{"CREATE TEMP TABLE scratch (x)", "INSERT INTO scratch VALUES (41), (1)"}, []string{"SELECT 1", "SELECT sum(x) FROM scratch"}},
}

// localAnswers runs setup then after on one connection to a local file and
// returns the first value of each statement of after.
func localAnswers(t *testing.T, setup, after []string) []string {
	t.Helper()
	conn, err := sqlite.OpenConn(filepath.Join(t.TempDir(), "local.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range setup {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			t.Fatalf("local %s: %v", q, err)
		}
	}
	var out []string
	for _, q := range after {
		var v string
		err := sqlitex.ExecuteTransient(conn, q, &sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error {
			v = s.ColumnText(0)
			return nil
		}})
		if err != nil {
			t.Fatalf("local %s: %v", q, err)
		}
		out = append(out, v)
	}
	return out
}

// At the protocol level: one hrana3 connection, a stream per case and one
// with an open transaction; after the idle second the state streams answer
// as a local connection does and only the transaction is rolled back.
func TestWebSocketStreamStateOutlivesTheTransactionTimeout(t *testing.T) {
	eachStore(t, shortTxTimeout, []string{"st"}, func(t *testing.T, base string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/db/st/", &websocket.DialOptions{Subprotocols: []string{"hrana3"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		id := 0
		call := func(req map[string]any) map[string]any {
			t.Helper()
			id++
			if err := wsjson.Write(ctx, c, map[string]any{"type": "request", "request_id": id, "request": req}); err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := wsjson.Read(ctx, c, &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		exec := func(stream int, q string) map[string]any {
			return call(map[string]any{"type": "execute", "stream_id": stream, "stmt": map[string]any{"sql": q}})
		}
		if err := wsjson.Write(ctx, c, map[string]any{"type": "hello", "jwt": nil}); err != nil {
			t.Fatal(err)
		}
		var hello map[string]any
		if err := wsjson.Read(ctx, c, &hello); err != nil || hello["type"] != "hello_ok" {
			t.Fatalf("hello: %v %v", hello, err)
		}
		txStream := len(wsStateCases) + 1
		for i := 1; i <= txStream; i++ {
			if m := call(map[string]any{"type": "open_stream", "stream_id": i}); m["type"] != "response_ok" {
				t.Fatalf("open_stream %d: %v", i, m)
			}
		}
		for i, tc := range wsStateCases {
			for _, q := range tc.setup {
				if m := exec(i+1, q); m["type"] != "response_ok" {
					t.Fatalf("%s: %s: %v", tc.name, q, m)
				}
			}
		}
		for _, q := range []string{"CREATE TABLE IF NOT EXISTS held (x)", "BEGIN", "INSERT INTO held VALUES (1)"} {
			if m := exec(txStream, q); m["type"] != "response_ok" {
				t.Fatalf("%s: %v", q, m)
			}
		}
		time.Sleep(wsIdle)
		for i, tc := range wsStateCases {
			want := localAnswers(t, tc.setup, tc.after)
			for j, q := range tc.after {
				m := exec(i+1, q)
				if m["type"] != "response_ok" {
					t.Fatalf("%s, %s idle: %s: %v (a local connection answers %s)", tc.name, wsIdle, q, m["error"], want[j])
				}
				row := m["response"].(map[string]any)["result"].(map[string]any)["rows"].([]any)[0].([]any)
				if got := fmt.Sprint(row[0].(map[string]any)["value"]); got != want[j] {
					t.Fatalf("%s: %s = %s, a local connection answers %s", tc.name, q, got, want[j])
				}
			}
			t.Logf("%s: %d statements after %s idle answered as on a local file", tc.name, len(tc.after), wsIdle)
		}
		// The open transaction still times out: the guard spares state, not transactions.
		m := exec(txStream, "SELECT 1")
		if e, _ := m["error"].(map[string]any); m["type"] != "response_error" || e["code"] != "TRANSACTION_TIMEOUT" {
			t.Fatalf("a transaction idle past the timeout: %v, want TRANSACTION_TIMEOUT", m)
		}
	})
}

// Through a real client: libsql-client-go over WebSocket, whose database/sql
// pool reuses one connection (one stream) for later statements.
func TestGoClientPooledConnectionKeepsItsPragmaOverWebSocket(t *testing.T) {
	eachStore(t, shortTxTimeout, []string{"st"}, func(t *testing.T, base string) {
		db, err := sql.Open("libsql", "ws"+strings.TrimPrefix(base, "http")+"/db/st/")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1) // every statement on the pooled connection
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, tc := range wsStateCases {
			for _, q := range tc.setup {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %s: %v", tc.name, q, err)
				}
			}
		}
		time.Sleep(wsIdle)
		var setup []string
		for _, tc := range wsStateCases {
			setup = append(setup, tc.setup...)
		}
		var after []string
		for _, tc := range wsStateCases {
			after = append(after, tc.after...)
		}
		want := localAnswers(t, setup, after)
		for i, q := range after {
			var got string
			if err := db.QueryRowContext(ctx, q).Scan(&got); err != nil {
				t.Fatalf("%s after %s idle: %v (a local connection answers %s)", q, wsIdle, err, want[i])
			}
			if got != want[i] {
				t.Fatalf("%s = %s, a local connection answers %s", q, got, want[i])
			}
		}
		t.Logf("%d statements on the pooled connection after %s idle answered as on a local file", len(after), wsIdle)
	})
}
