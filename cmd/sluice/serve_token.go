package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicedb/sluice/server"
)

// generatedTokenFile is where serve keeps the token it generated for a data
// directory: a container started with no arguments (no token) keeps serving
// with the same token across restarts on the same volume.
const generatedTokenFile = ".sluice-token"

// ensureRemoteToken gives a server that listens beyond loopback with no
// credentials configured a token of its own instead of refusing to start:
// generated at first start, saved (0600) in the data directory, printed once
// in one line, and reused by later starts on that directory. It changes
// nothing when a token or JWT key is configured, when the address is
// loopback, or when unauthenticated remote access was asked for.
func ensureRemoteToken(cfg *server.Config, logger *slog.Logger) error {
	if len(cfg.Tokens) > 0 || cfg.JWTPublicKey != "" || cfg.JWTPublicKeyFile != "" ||
		cfg.AllowUnauthenticatedRemote || server.IsLoopback(cfg.Listen) {
		return nil
	}
	path := filepath.Join(cfg.DataDir, generatedTokenFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		tok := strings.TrimSpace(string(b))
		if len(tok) < 8 {
			return fmt.Errorf("%s holds no usable token (fewer than 8 characters): delete it to generate a new one, or pass -token", path)
		}
		cfg.Tokens = append(cfg.Tokens, server.TokenConfig{Token: tok})
		logger.Info("no token configured: using the token generated at this data directory's first start", "file", path, "addr", cfg.Listen)
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read the generated token %s: %w (pass -token to choose one)", path, err)
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("generate a token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("save the generated token in %s: %w (pass -token to choose one)", path, err)
	}
	_, werr := fmt.Fprintln(f, tok)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(path)
		return fmt.Errorf("save the generated token in %s: %w (pass -token to choose one)", path, err)
	}
	cfg.Tokens = append(cfg.Tokens, server.TokenConfig{Token: tok})
	// Printed once, on stderr beside the log: later starts only name the file.
	fmt.Fprintf(os.Stderr, "sluice serve: no token configured for %s: generated one and saved it in %s (shown only now); clients send \"Authorization: Bearer %s\"\n", cfg.Listen, path, tok)
	return nil
}
