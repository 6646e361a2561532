package ws_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/sluicedb/sluice/server"
)

// The hello authenticates with the server's tokens: none or a wrong one is
// hello_error and the connection closes; a read-only token stays read-only
// on every stream; a token for another database is refused; a later hello
// cannot switch identities; the upgrade's Authorization header serves when
// the hello carries no token.
func TestWebSocketHelloAuthenticates(t *testing.T) {
	url, _ := wsServer(t, server.Config{Tokens: []server.TokenConfig{
		{Token: "rw-token-123", Access: "rw"},
		{Token: "ro-token-123", Access: "ro"},
		{Token: "elsewhere-123", Databases: []string{"other"}},
	}}, "auth", "other")
	u := url + "/db/auth"

	for _, jwt := range []any{nil, "", "wrong-token-1", "elsewhere-123"} {
		w := dialWS(t, u, "hrana2", nil)
		m := w.hello(jwt)
		if m["type"] != "hello_error" {
			t.Fatalf("hello with %v: %v", jwt, m)
		}
		if code, _ := w.closed(5 * time.Second); code != websocket.StatusPolicyViolation {
			t.Fatalf("after hello_error: close code %d", code)
		}
	}

	rw := dialWS(t, u, "hrana2", nil)
	if m := rw.hello("rw-token-123"); m["type"] != "hello_ok" {
		t.Fatalf("rw hello: %v", m)
	}
	rw.ok(1, openStream(1))
	rw.ok(2, wsExec(1, "CREATE TABLE t (x)"))

	ro := dialWS(t, u, "hrana2", nil)
	if m := ro.hello("ro-token-123"); m["type"] != "hello_ok" {
		t.Fatalf("ro hello: %v", m)
	}
	ro.ok(1, openStream(1))
	ro.ok(2, openStream(2))
	if v := firstValue(t, ro.ok(3, wsExec(1, "SELECT count(*) FROM t"))); v != "0" {
		t.Fatalf("read-only read: %v", v)
	}
	for i, sql := range []string{"INSERT INTO t VALUES (1)", "CREATE TABLE u (y)", "DROP TABLE t"} {
		if code, msg := ro.fails(10+i, wsExec(2, sql)); !strings.HasPrefix(code, "SQLITE_READONLY") && code != "FORBIDDEN" {
			t.Fatalf("read-only %s: %s %s", sql, code, msg)
		}
	}
	ro.ok(20, wsExec(2, "BEGIN"))
	if code, _ := ro.fails(21, wsExec(2, "INSERT INTO t VALUES (2)")); !strings.HasPrefix(code, "SQLITE_READONLY") && code != "FORBIDDEN" {
		t.Fatal("read-only write inside a transaction succeeded")
	}
	ro.ok(22, wsExec(2, "ROLLBACK"))
	if m := ro.hello("rw-token-123"); m["type"] != "hello_error" {
		t.Fatalf("switching to a read-write token on a read-only connection: %v", m)
	}
	ro.closed(5 * time.Second)
	if v := firstValue(t, rw.ok(3, wsExec(1, "SELECT count(*) FROM t"))); v != "0" {
		t.Fatalf("rows written through the read-only token: %v", v)
	}
	if m := rw.hello("rw-token-123"); m["type"] != "hello_ok" {
		t.Fatalf("renewing the same credential: %v", m)
	}

	hdr := dialWS(t, u, "hrana3", http.Header{"Authorization": {"Bearer ro-token-123"}})
	if m := hdr.hello(nil); m["type"] != "hello_ok" {
		t.Fatalf("hello with the upgrade's Authorization header: %v", m)
	}
	hdr.ok(1, openStream(1))
	if code, _ := hdr.fails(2, wsExec(1, "INSERT INTO t VALUES (3)")); !strings.HasPrefix(code, "SQLITE_READONLY") && code != "FORBIDDEN" {
		t.Fatal("the header's read-only token wrote")
	}
}

// A connection authenticated with a JWT closes when the JWT expires.
func TestWebSocketClosesWhenTheJWTExpires(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	url, _ := wsServer(t, server.Config{JWTPublicKey: base64.RawURLEncoding.EncodeToString(pub)}, "jwtdb")
	tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"a": "rw", "exp": time.Now().Add(2 * time.Second).Unix()}).SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	w := dialWS(t, url+"/db/jwtdb", "hrana3", nil)
	if m := w.hello(tok); m["type"] != "hello_ok" {
		t.Fatalf("hello: %v", m)
	}
	w.ok(1, openStream(1))
	w.ok(2, wsExec(1, "SELECT 1"))
	start := time.Now()
	code, reason := w.closed(10 * time.Second)
	if code != websocket.StatusPolicyViolation || time.Since(start) > 5*time.Second {
		t.Fatalf("close %d %q after %s", code, reason, time.Since(start))
	}
}
