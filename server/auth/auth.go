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
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

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
	// ID identifies the credential (a hash of the static token, the JWT's
	// subject, or a hash of a JWT without one), never the secret itself.
	// Streams and quotas are keyed by it.
	ID string
	// Expires is when the credential stops being valid (a JWT's exp); zero
	// for static tokens. Long-lived connections close then.
	Expires time.Time
}

// Key is the identity a stream is bound to: the credential and the access
// it grants, so that a read-only token cannot continue a stream opened with
// a read-write one, even for the same subject.
func (p *Principal) Key() string {
	if p == nil {
		return anonymous.Key()
	}
	return fmt.Sprintf("%s|%d|%s", p.ID, p.Access, strings.Join(p.Databases, ","))
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
	// JWTMaxLifetime rejects a JWT valid for longer than this (from its iat,
	// or from now when it has none). Zero: DefaultJWTMaxLifetime; negative: no limit.
	JWTMaxLifetime time.Duration
	// JWTAllowNoExp accepts JWTs without an exp claim (they never expire).
	JWTAllowNoExp bool
}

// JWTClockSkew is how far in the future a JWT's iat may be: the issuer's
// clock may run a little ahead of the server's.
const JWTClockSkew = time.Minute

// DefaultJWTMaxLifetime bounds how long a leaked JWT stays usable.
const DefaultJWTMaxLifetime = 7 * 24 * time.Hour

// Authenticator checks bearer credentials.
type Authenticator struct {
	tokens     []Token
	jwtKey     ed25519.PublicKey
	maxLife    time.Duration
	allowNoExp bool
}

// New validates cfg.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{maxLife: cfg.JWTMaxLifetime, allowNoExp: cfg.JWTAllowNoExp}
	if a.maxLife == 0 {
		a.maxLife = DefaultJWTMaxLifetime
	}
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

var anonymous = &Principal{Name: "anonymous", Access: ReadWrite, ID: "anonymous"}

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
			return &Principal{Name: fmt.Sprintf("token #%d", i+1), Access: t.Access, Databases: t.Databases, ID: "token:" + digest(t.Token)}, nil
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
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{"EdDSA"})}
	if !a.allowNoExp {
		opts = append(opts, jwt.WithExpirationRequired())
	}
	_, err := jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return a.jwtKey, nil }, opts...)
	if err != nil {
		if errors.Is(err, jwt.ErrTokenRequiredClaimMissing) {
			return nil, fmt.Errorf("%w: the JWT has no exp claim and would never expire: mint it with an expiry (at most %s) or set jwt_allow_no_exp: true", ErrUnauthorized, a.maxLife)
		}
		return nil, fmt.Errorf("%w: invalid JWT: %v", ErrUnauthorized, err)
	}
	now := time.Now()
	if c.IssuedAt != nil && c.IssuedAt.Time.After(now.Add(JWTClockSkew)) {
		// Its lifetime would be judged from a moment that has not come:
		// iat ten years ahead with exp an hour later lives ten years.
		return nil, fmt.Errorf("%w: the JWT's iat is %s in the future, more than the %s of clock skew allowed: check the issuer's clock",
			ErrUnauthorized, c.IssuedAt.Time.Sub(now).Round(time.Second), JWTClockSkew)
	}
	if a.maxLife > 0 && c.ExpiresAt != nil {
		from := now // what is left of it from now, or its whole life if issued before
		if c.IssuedAt != nil && c.IssuedAt.Time.Before(now) {
			from = c.IssuedAt.Time
		}
		if life := c.ExpiresAt.Sub(from); life > a.maxLife {
			return nil, fmt.Errorf("%w: the JWT is valid for %s, longer than the server's maximum of %s (jwt-max-lifetime): mint a shorter-lived token or raise jwt-max-lifetime",
				ErrUnauthorized, life.Round(time.Second), a.maxLife)
		}
	}
	acc, err := ParseAccess(c.A)
	if err != nil {
		return nil, fmt.Errorf("%w: JWT claim a: %v", ErrUnauthorized, err)
	}
	id := "jwt:" + digest(tok)
	if c.Subject != "" {
		id = "jwt-sub:" + c.Subject
	}
	p := &Principal{Name: "jwt", Access: acc, ID: id}
	if c.ExpiresAt != nil {
		p.Expires = c.ExpiresAt.Time
	}
	if c.ID != "" {
		p.Databases = []string{c.ID}
	}
	return p, nil
}

// digest names a secret without revealing it.
func digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:16])
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
