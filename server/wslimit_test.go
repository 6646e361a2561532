package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// A token holding its limit of WebSocket connections gets hello_error
// naming the limit on the next one; closing one lets a new one in, and
// another token is not affected.
func TestWebSocketsPerToken(t *testing.T) {
	_, base := serveReal(t, func(c *Config) { c.Limits.MaxWebSocketsPerToken = 2 })
	url := "ws" + strings.TrimPrefix(base, "http") + "/"
	hello := func(token string) (*websocket.Conn, map[string]any) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"hrana3"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := wsjson.Write(ctx, c, map[string]any{"type": "hello", "jwt": token}); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := wsjson.Read(ctx, c, &m); err != nil {
			t.Fatal(err)
		}
		return c, m
	}
	a, m := hello("limits-rw-token")
	defer a.CloseNow()
	if m["type"] != "hello_ok" {
		t.Fatalf("first: %v", m)
	}
	b, m := hello("limits-rw-token")
	defer b.CloseNow()
	if m["type"] != "hello_ok" {
		t.Fatalf("second: %v", m)
	}
	c, m := hello("limits-rw-token")
	c.CloseNow()
	if m["type"] != "hello_error" || !strings.Contains(m["error"].(map[string]any)["message"].(string), "limits.max-websockets-per-token") {
		t.Fatalf("third connection of one token: %v", m)
	}
	o, m := hello("limits-other-rw")
	o.CloseNow()
	if m["type"] != "hello_ok" {
		t.Fatalf("another token: %v", m)
	}
	a.Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, m := hello("limits-rw-token")
		d.CloseNow()
		if m["type"] == "hello_ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after closing one connection: %v", m)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
