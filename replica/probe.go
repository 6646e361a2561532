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

// Probe checks that the store can be listed and written, and that it
// honours conditional writes: it lists ProbePrefix, creates one small object
// there, tries to create it again (which must fail with ErrExists) and
// deletes it. A store that ignores If-None-Match would let two instances
// overlapping in a deploy both extend the history, which is exactly what
// the conditional creates of LTX files and leases are there to prevent:
// such a store fails with ErrNoConditionalWrites. Errors wrap the backend's
// classification (see Permanent).
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
	_, again := s.PutIfAbsent(ctx, key, strings.NewReader(body), int64(len(body)))
	if err := s.Delete(ctx, key); err != nil {
		return fmt.Errorf("delete probe object: %w", err)
	}
	switch {
	case again == nil:
		return &StoreError{Kind: ErrNoConditionalWrites, Cause: "a second create-if-absent of one key succeeded",
			Fix: "use a store that honours If-None-Match (AWS S3, GCS, Azure, MinIO): without it sluice cannot fence a second writer"}
	case !errors.Is(again, ErrExists):
		return again
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
