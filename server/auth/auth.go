// Package auth authenticates HTTP requests for sluice serve: static bearer
// tokens (read-write or read-only, optionally limited to some databases) and
// sqld-style Ed25519 JWTs (claim "a": "ro"/"rw", claim "id": a database).
// The middleware puts the Principal in the request context; every front end
// (JSON API, Hrana) is behind it.
//
// It imports only the standard library and golang-jwt.
package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// Access is what a principal may do.
type Access int

// Access levels.
const (
	ReadOnly Access = iota + 1
	ReadWrite
)

// ParseAccess parses "ro"/"read-only" or "rw"/"read-write" ("" = rw).
func ParseAccess(s string) (Access, error) {
	switch strings.ToLower(s) {
	case "", "rw", "read-write", "readwrite", "full-access":
		return ReadWrite, nil
	case "ro", "read-only", "readonly":
		return ReadOnly, nil
	}
	return 0, fmt.Errorf("unknown access %q: use rw or ro", s)
}

// Principal is an authenticated caller.
type Principal struct {
	Name      string   // for logs: "anonymous", "token #2", "jwt"
	Access    Access   //
	Databases []string // nil: every database
}

// CanRead reports whether p may read db.
func (p *Principal) CanRead(db string) bool {
	return p != nil && (p.Databases == nil || slices.Contains(p.Databases, db))
}

// CanWrite reports whether p may write db (and create or delete it).
func (p *Principal) CanWrite(db string) bool {
	return p.CanRead(db) && p.Access == ReadWrite
}

// Token is one configured static token.
type Token struct {
	Token     string
	Access    Access
	Databases []string
}

// Config configures an Authenticator.
type Config struct {
	Tokens       []Token
	JWTPublicKey string // PEM (PUBLIC KEY) or base64/base64url of the raw 32-byte Ed25519 key; "" = no JWTs
}

// Authenticator checks bearer credentials.
type Authenticator struct {
	tokens []Token
	jwtKey ed25519.PublicKey
}

// New validates cfg.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{}
	for i, t := range cfg.Tokens {
		if len(t.Token) < 8 {
			return nil, fmt.Errorf("token #%d is shorter than 8 characters: use a long random token", i+1)
		}
		if t.Access == 0 {
			t.Access = ReadWrite
		}
		a.tokens = append(a.tokens, t)
	}
	if cfg.JWTPublicKey != "" {
		k, err := parsePublicKey(cfg.JWTPublicKey)
		if err != nil {
			return nil, err
		}
		a.jwtKey = k
	}
	return a, nil
}

// Required reports whether requests must carry credentials.
func (a *Authenticator) Required() bool { return len(a.tokens) > 0 || a.jwtKey != nil }

func parsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	if blk, _ := pem.Decode([]byte(s)); blk != nil {
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("JWT public key: %w", err)
		}
		ek, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, errors.New("JWT public key is not an Ed25519 key")
		}
		return ek, nil
	}
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == ed25519.PublicKeySize {
			return ed25519.PublicKey(b), nil
		}
	}
	return nil, errors.New("JWT public key: expected a PEM PUBLIC KEY or the base64url of a 32-byte Ed25519 key")
}

// ErrUnauthorized: missing or invalid credentials.
var ErrUnauthorized = errors.New("unauthorized")

var anonymous = &Principal{Name: "anonymous", Access: ReadWrite}

// Authenticate returns the principal for an Authorization header value.
func (a *Authenticator) Authenticate(header string) (*Principal, error) {
	if !a.Required() {
		return anonymous, nil
	}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, fmt.Errorf("%w: send Authorization: Bearer <token>", ErrUnauthorized)
	}
	cred = strings.TrimSpace(cred)
	for i, t := range a.tokens {
		if subtle.ConstantTimeCompare([]byte(cred), []byte(t.Token)) == 1 {
			return &Principal{Name: fmt.Sprintf("token #%d", i+1), Access: t.Access, Databases: t.Databases}, nil
		}
	}
	if a.jwtKey != nil && strings.Count(cred, ".") == 2 {
		return a.verifyJWT(cred)
	}
	return nil, fmt.Errorf("%w: unknown token", ErrUnauthorized)
}

// claims are sqld's: "a" access ("ro"/"rw", absent = rw) and "id" the
// database (absent = every database).
type claims struct {
	A  string `json:"a,omitempty"`
	ID string `json:"id,omitempty"`
	jwt.RegisteredClaims
}

func (a *Authenticator) verifyJWT(tok string) (*Principal, error) {
	var c claims
	_, err := jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return a.jwtKey, nil },
		jwt.WithValidMethods([]string{"EdDSA"}))
	if err != nil {
		return nil, fmt.Errorf("%w: invalid JWT: %v", ErrUnauthorized, err)
	}
	acc, err := ParseAccess(c.A)
	if err != nil {
		return nil, fmt.Errorf("%w: JWT claim a: %v", ErrUnauthorized, err)
	}
	p := &Principal{Name: "jwt", Access: acc}
	if c.ID != "" {
		p.Databases = []string{c.ID}
	}
	return p, nil
}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the request's principal, or nil.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(ctxKey{}).(*Principal)
	return p
}

// Middleware authenticates every request; failures get onError (401).
func (a *Authenticator) Middleware(next http.Handler, onError func(w http.ResponseWriter, r *http.Request, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r.Header.Get("Authorization"))
		if err != nil {
			onError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}
