package ws_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/server"
)

// wsServer starts sluice serve's handler with cfg (data dir, listen and
// durability filled in) and the databases names; it returns the base URL
// and the server.
func wsServer(t *testing.T, cfg server.Config, names ...string) (string, *server.Server) {
	t.Helper()
	dir := t.TempDir()
	store, err := file.New(filepath.Join(dir, "replica"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.Listen, cfg.Durability = filepath.Join(dir, "data"), "127.0.0.1:0", "sync"
	srv, err := server.NewWithStore(cfg, store, slog.New(slog.DiscardHandler), "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := srv.Host().Create(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(srv.Handler())
	closed := false
	t.Cleanup(func() {
		hs.Close()
		if !closed {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = srv.Close(ctx)
		}
	})
	return hs.URL, srv
}

// wsClient is a raw Hrana-over-WebSocket client (JSON subprotocols).
type wsClient struct {
	t *testing.T
	c *websocket.Conn
}

func dialWS(t *testing.T, url, subprotocol string, header http.Header) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL(url), &websocket.DialOptions{Subprotocols: []string{subprotocol}, HTTPHeader: header})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	if c.Subprotocol() != subprotocol {
		t.Fatalf("subprotocol %q, want %q", c.Subprotocol(), subprotocol)
	}
	return &wsClient{t: t, c: c}
}

func (w *wsClient) send(v any) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, w.c, v); err != nil {
		w.t.Fatalf("send: %v", err)
	}
}

func (w *wsClient) recv() map[string]any {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var m map[string]any
	if err := wsjson.Read(ctx, w.c, &m); err != nil {
		w.t.Fatalf("receive: %v", err)
	}
	return m
}

func (w *wsClient) hello(jwt any) map[string]any {
	w.t.Helper()
	w.send(map[string]any{"type": "hello", "jwt": jwt})
	return w.recv()
}

// req sends a request and returns its response message.
func (w *wsClient) req(id int, r map[string]any) map[string]any {
	w.t.Helper()
	w.send(map[string]any{"type": "request", "request_id": id, "request": r})
	m := w.recv()
	if m["request_id"] != float64(id) {
		w.t.Fatalf("response to request %d: %v", id, m)
	}
	return m
}

func (w *wsClient) ok(id int, r map[string]any) map[string]any {
	w.t.Helper()
	m := w.req(id, r)
	if m["type"] != "response_ok" {
		w.t.Fatalf("request %v: %v", r, m)
	}
	return m["response"].(map[string]any)
}

func (w *wsClient) fails(id int, r map[string]any) (code, message string) {
	w.t.Helper()
	m := w.req(id, r)
	if m["type"] != "response_error" {
		w.t.Fatalf("request %v: %v, want an error", r, m)
	}
	e := m["error"].(map[string]any)
	code, _ = e["code"].(string)
	return code, e["message"].(string)
}

// closed waits for the server to close the connection and returns the code.
func (w *wsClient) closed(within time.Duration) (websocket.StatusCode, string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		_, _, err := w.c.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Reason
		}
		w.t.Fatalf("connection not closed by the server: %v", err)
	}
}

func openStream(id int) map[string]any { return map[string]any{"type": "open_stream", "stream_id": id} }

func wsExec(stream int, sql string) map[string]any {
	return map[string]any{"type": "execute", "stream_id": stream, "stmt": map[string]any{"sql": sql}}
}

func firstValue(t *testing.T, resp map[string]any) any {
	t.Helper()
	rows := resp["result"].(map[string]any)["rows"].([]any)
	return rows[0].([]any)[0].(map[string]any)["value"]
}

// The hrana3 JSON flow: streams are independent connection states, stored
// SQL is connection-wide, cursors page through a batch, get_autocommit and
// describe answer.
func TestWebSocketHrana3JSON(t *testing.T) {
	url, _ := wsServer(t, server.Config{}, "w3")
	w := dialWS(t, url+"/db/w3", "hrana3", nil)
	if m := w.hello(nil); m["type"] != "hello_ok" {
		t.Fatalf("hello: %v", m)
	}
	w.ok(1, openStream(1))
	w.ok(2, openStream(2))
	w.ok(3, wsExec(1, "CREATE TABLE t (x)"))
	w.ok(4, wsExec(1, "BEGIN"))
	w.ok(5, wsExec(1, "INSERT INTO t VALUES (1), (2), (3)"))
	if r := w.ok(6, map[string]any{"type": "get_autocommit", "stream_id": 1}); r["is_autocommit"] != false {
		t.Fatalf("autocommit inside BEGIN: %v", r)
	}
	if r := w.ok(7, map[string]any{"type": "get_autocommit", "stream_id": 2}); r["is_autocommit"] != true {
		t.Fatalf("another stream's autocommit: %v", r)
	}
	if v := firstValue(t, w.ok(8, wsExec(2, "SELECT count(*) FROM t"))); v != "0" {
		t.Fatalf("stream 2 sees stream 1's uncommitted rows: %v", v)
	}
	w.ok(9, wsExec(1, "COMMIT"))
	w.ok(10, map[string]any{"type": "store_sql", "sql_id": 7, "sql": "SELECT count(*) FROM t"})
	stored := map[string]any{"type": "execute", "stream_id": 2, "stmt": map[string]any{"sql_id": 7}}
	if v := firstValue(t, w.ok(11, stored)); v != "3" {
		t.Fatalf("stored SQL on stream 2 after the commit: %v", v)
	}
	w.ok(12, map[string]any{"type": "close_sql", "sql_id": 7})
	if code, _ := w.fails(13, stored); code != "SQL_ID_NOT_FOUND" {
		t.Fatalf("closed SQL id: %s", code)
	}
	d := w.ok(14, map[string]any{"type": "describe", "stream_id": 2, "sql": "SELECT x AS y FROM t WHERE x > ?"})["result"].(map[string]any)
	if len(d["params"].([]any)) != 1 || d["is_readonly"] != true {
		t.Fatalf("describe: %v", d)
	}
	w.ok(15, map[string]any{"type": "open_cursor", "stream_id": 2, "cursor_id": 1, "batch": map[string]any{"steps": []any{
		map[string]any{"stmt": map[string]any{"sql": "SELECT x FROM t ORDER BY x"}},
		map[string]any{"stmt": map[string]any{"sql": "SELECT nope"}},
	}}})
	var types []string
	for i := 0; ; i++ {
		r := w.ok(16+i, map[string]any{"type": "fetch_cursor", "cursor_id": 1, "max_count": 2})
		for _, e := range r["entries"].([]any) {
			types = append(types, e.(map[string]any)["type"].(string))
		}
		if r["done"] == true {
			break
		}
		if i > 10 {
			t.Fatal("cursor never done")
		}
	}
	if got := strings.Join(types, ","); got != "step_begin,row,row,row,step_end,step_error" {
		t.Fatalf("cursor entries: %s", got)
	}
	w.ok(40, map[string]any{"type": "close_cursor", "cursor_id": 1})
	w.ok(41, map[string]any{"type": "sequence", "stream_id": 2, "sql": "INSERT INTO t VALUES (4); INSERT INTO t VALUES (5)"})
	w.ok(42, map[string]any{"type": "close_stream", "stream_id": 1})
	if code, _ := w.fails(43, wsExec(2, "SELECT 1; SELECT 2")); code != "SQL_MANY_STATEMENTS" {
		t.Fatalf("two statements: %s", code)
	}
	if v := firstValue(t, w.ok(44, wsExec(2, "SELECT count(*) FROM t"))); v != "5" {
		t.Fatalf("rows: %v", v)
	}
	w.req(45, wsExec(1, "SELECT 1")) // stream 1 is closed: a protocol error
	if code, _ := w.closed(5 * time.Second); code != websocket.StatusProtocolError {
		t.Fatalf("request on a closed stream: close code %d, want %d", code, websocket.StatusProtocolError)
	}
}

// Requests before the hello, requests newer than the negotiated version and
// messages of the wrong frame type break the protocol: the connection closes.
func TestWebSocketProtocolViolationsClose(t *testing.T) {
	url, _ := wsServer(t, server.Config{}, "pv")
	cases := []struct {
		name, proto string
		run         func(w *wsClient)
	}{
		{"request before hello", "hrana3", func(w *wsClient) {
			w.send(map[string]any{"type": "request", "request_id": 1, "request": openStream(1)})
		}},
		{"sequence on hrana1", "hrana1", func(w *wsClient) {
			w.hello(nil)
			w.ok(1, openStream(1))
			w.send(map[string]any{"type": "request", "request_id": 2, "request": map[string]any{"type": "sequence", "stream_id": 1, "sql": "SELECT 1"}})
		}},
		{"cursor on hrana2", "hrana2", func(w *wsClient) {
			w.hello(nil)
			w.send(map[string]any{"type": "request", "request_id": 2, "request": map[string]any{"type": "fetch_cursor", "cursor_id": 1, "max_count": 1}})
		}},
		{"binary frame on JSON", "hrana3", func(w *wsClient) {
			if err := w.c.Write(context.Background(), websocket.MessageBinary, []byte{1, 2}); err != nil {
				t.Fatal(err)
			}
		}},
		{"not JSON", "hrana2", func(w *wsClient) {
			if err := w.c.Write(context.Background(), websocket.MessageText, []byte("{")); err != nil {
				t.Fatal(err)
			}
		}},
		{"stream opened twice", "hrana2", func(w *wsClient) {
			w.hello(nil)
			w.ok(1, openStream(1))
			w.send(map[string]any{"type": "request", "request_id": 2, "request": openStream(1)})
		}},
		{"unknown message", "hrana3", func(w *wsClient) { w.send(map[string]any{"type": "bye"}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := dialWS(t, url+"/db/pv", c.proto, nil)
			w.t = t
			c.run(w)
			if code, reason := w.closed(5 * time.Second); code != websocket.StatusProtocolError {
				t.Fatalf("close code %d (%s), want %d", code, reason, websocket.StatusProtocolError)
			}
		})
	}
	// The server still serves.
	w := dialWS(t, url, "hrana2", http.Header{"x-namespace": {"pv"}})
	w.hello(nil)
	w.ok(1, openStream(1))
	if v := firstValue(t, w.ok(2, wsExec(1, "SELECT 7"))); v != "7" {
		t.Fatalf("after the violations: %v", v)
	}
}

func wsURL(httpURL string) string { return "ws" + strings.TrimPrefix(httpURL, "http") }
