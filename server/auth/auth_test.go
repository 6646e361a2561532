package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

func TestTokensAndJWTs(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	a, err := New(Config{Tokens: []Token{{Token: "read-only-token", Access: ReadOnly, Databases: []string{"a"}}}, JWTPublicKey: pemKey})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate("Bearer read-only-token")
	if err != nil || p.Access != ReadOnly || !p.CanRead("a") || p.CanRead("b") || p.CanWrite("a") {
		t.Fatalf("static ro token: %+v %v", p, err)
	}
	sign := func(c jwt.MapClaims) string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c).SignedString(priv)
		return "Bearer " + s
	}
	if p, err := a.Authenticate(sign(jwt.MapClaims{"a": "rw", "id": "x"})); err != nil || !p.CanWrite("x") || p.CanRead("y") {
		t.Fatalf("jwt rw/x: %+v %v", p, err)
	}
	if p, err := a.Authenticate(sign(jwt.MapClaims{})); err != nil || !p.CanWrite("anything") {
		t.Fatalf("jwt without claims is full access (sqld): %+v %v", p, err)
	}
	for _, h := range []string{"", "Bearer", "Bearer nope-nope-nope", "Basic read-only-token", sign(jwt.MapClaims{"a": "admin"})} {
		if _, err := a.Authenticate(h); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%q: got %v, want ErrUnauthorized", h, err)
		}
	}
	hs, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"a": "rw"}).SignedString([]byte("k"))
	if _, err := a.Authenticate("Bearer " + hs); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("HS256 token accepted: %v", err)
	}
	if _, err := New(Config{Tokens: []Token{{Token: "short"}}}); err == nil {
		t.Fatal("a 5-character token was accepted")
	}
	if _, err := New(Config{JWTPublicKey: "not a key"}); err == nil {
		t.Fatal("garbage key accepted")
	}
	open, _ := New(Config{})
	if p, err := open.Authenticate(""); err != nil || !p.CanWrite("x") || open.Required() {
		t.Fatalf("no credentials configured: %+v %v", p, err)
	}
}
