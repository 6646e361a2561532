package restore

import (
	"context"
	"errors"
	"fmt"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// fileError: one replica file could not be used (damaged, truncated or
// unreadable). Restore then plans again without it, so the other levels
// covering its TXIDs take its place.
type fileError struct {
	file replica.LTXFile
	err  error
}

func (e *fileError) Error() string { return e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// Is makes a file that failed for its own sake (not the store's) match
// replica.ErrDamaged.
func (e *fileError) Is(target error) bool {
	return target == replica.ErrDamaged && !errors.Is(e.err, replica.ErrUnavailable) &&
		!errors.Is(e.err, replica.ErrStalled) && !errors.Is(e.err, context.DeadlineExceeded)
}

// errLocal marks failures of the local output file (a full disk, say): no
// other replica file can help with those.
var errLocal = errors.New("restored database")

// blameFile attributes err, met while reading file, to that file, unless it
// is a cancellation or a local failure.
func blameFile(ctx context.Context, file replica.LTXFile, err error) error {
	if err == nil || ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, errLocal) || errors.Is(err, errNotReady) {
		return err
	}
	var fe *fileError
	if errors.As(err, &fe) {
		return err
	}
	return &fileError{file: file, err: err}
}

// without returns files minus the one with key.
func without(files []replica.LTXFile, key string) []replica.LTXFile {
	out := make([]replica.LTXFile, 0, len(files))
	for _, f := range files {
		if f.Key != key {
			out = append(out, f)
		}
	}
	return out
}

// noFallback explains that no other file covers what the damaged ones held.
func noFallback(damaged []*fileError, target ltx.TXID, planErr error) error {
	last := damaged[len(damaged)-1]
	return fmt.Errorf("%w; no other level covers TXIDs %s..%s of the damaged file %s (level %d), "+
		"so the state at TXID %s cannot be rebuilt: restore to TXID %d at most, or from another replica: %w",
		planErr, last.file.MinTXID, last.file.MaxTXID, last.file.Key, last.file.Level, target, last.file.MinTXID-1, last)
}

// DamagedKey names the replica object a restore error blames, if any: the
// last file found damaged, truncated or unreadable for its own sake.
func DamagedKey(err error) (string, bool) {
	var fe *fileError
	if errors.As(err, &fe) && errors.Is(err, replica.ErrDamaged) {
		return fe.file.Key, true
	}
	return "", false
}
