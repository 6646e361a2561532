package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// ProbePrefix holds the short-lived objects of Probe, beside the LTX tree
// under sluice's own directory: Litestream never reads it and no LTX key can
// take its name.
const ProbePrefix = SluiceDir + "/probe/"

// Probe checks that the store can be listed and written: it lists
// ProbePrefix, creates one small object there and deletes it. Errors wrap the
// backend's classification (see Permanent).
func Probe(ctx context.Context, s Store) error {
	if _, err := s.List(ctx, ProbePrefix); err != nil {
		return err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := ProbePrefix + hex.EncodeToString(b[:])
	const body = "sluice probe: safe to delete\n"
	if _, err := s.PutIfAbsent(ctx, key, strings.NewReader(body), int64(len(body))); err != nil {
		return err
	}
	if err := s.Delete(ctx, key); err != nil {
		return fmt.Errorf("delete probe object: %w", err)
	}
	return nil
}

// Ping is the cheap check of an idle store: one metadata read (HEAD) of a
// key that does not exist. It proves the store answers and accepts the
// credentials, not that it takes writes (Probe does).
func Ping(ctx context.Context, s Store) error {
	_, err := s.Stat(ctx, ProbePrefix+"ping")
	if err == nil || errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
