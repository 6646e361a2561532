package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

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
	exp := time.Now().Add(time.Hour).Unix()
	if p, err := a.Authenticate(sign(jwt.MapClaims{"a": "rw", "id": "x", "exp": exp})); err != nil || !p.CanWrite("x") || p.CanRead("y") {
		t.Fatalf("jwt rw/x: %+v %v", p, err)
	}
	if p, err := a.Authenticate(sign(jwt.MapClaims{"exp": exp})); err != nil || !p.CanWrite("anything") {
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

func TestJWTLifetime(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	sign := func(c jwt.MapClaims) string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c).SignedString(priv)
		return "Bearer " + s
	}
	now := time.Now()
	strict, err := New(Config{JWTPublicKey: pemKey, JWTMaxLifetime: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		claims jwt.MapClaims
		want   string // "" = accepted, else a fragment of the error
	}{
		{"no exp", jwt.MapClaims{"a": "ro"}, "no exp claim"},
		{"exp within the lifetime", jwt.MapClaims{"iat": now.Unix(), "exp": now.Add(23 * time.Hour).Unix()}, ""},
		{"exp beyond the lifetime (iat)", jwt.MapClaims{"iat": now.Unix(), "exp": now.Add(48 * time.Hour).Unix()}, "longer than the server's maximum"},
		{"exp beyond the lifetime (no iat)", jwt.MapClaims{"exp": now.Add(48 * time.Hour).Unix()}, "longer than the server's maximum"},
		{"expired", jwt.MapClaims{"exp": now.Add(-time.Minute).Unix()}, "expired"},
		// Issued ten years ahead, one hour long by its own claims: it would live ten years.
		{"iat in the future", jwt.MapClaims{"iat": now.AddDate(10, 0, 0).Unix(), "exp": now.AddDate(10, 0, 0).Add(time.Hour).Unix()}, "in the future"},
		{"iat a little ahead (clock skew)", jwt.MapClaims{"iat": now.Add(20 * time.Second).Unix(), "exp": now.Add(time.Hour).Unix()}, ""},
		{"iat an hour ago, a day left", jwt.MapClaims{"iat": now.Add(-time.Hour).Unix(), "exp": now.Add(23*time.Hour + 30*time.Minute).Unix()}, "jwt-max-lifetime"},
	}
	for _, c := range cases {
		_, err := strict.Authenticate(sign(c.claims))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: rejected: %v", c.name, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// Opting in accepts a JWT without exp; the default lifetime applies otherwise.
	lax, _ := New(Config{JWTPublicKey: pemKey, JWTAllowNoExp: true})
	if _, err := lax.Authenticate(sign(jwt.MapClaims{"a": "rw"})); err != nil {
		t.Fatalf("jwt_allow_no_exp: %v", err)
	}
	if _, err := lax.Authenticate(sign(jwt.MapClaims{"exp": now.Add(DefaultJWTMaxLifetime + time.Hour).Unix()})); err == nil {
		t.Fatal("a JWT beyond the default maximum lifetime was accepted")
	}
}

func TestPrincipalKeysDifferByCredentialAndAccess(t *testing.T) {
	a, _ := New(Config{Tokens: []Token{{Token: "token-one-rw"}, {Token: "token-two-ro", Access: ReadOnly}}})
	p1, _ := a.Authenticate("Bearer token-one-rw")
	p2, _ := a.Authenticate("Bearer token-two-ro")
	again, _ := a.Authenticate("Bearer token-one-rw")
	if p1.Key() == p2.Key() || p1.Key() != again.Key() || strings.Contains(p1.Key(), "token-one-rw") {
		t.Fatalf("keys: %q %q %q", p1.Key(), p2.Key(), again.Key())
	}
}
