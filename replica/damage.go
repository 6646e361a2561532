package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/superfly/ltx"
)

// ErrDamaged classes an object of the replica that is corrupt (a checksum
// that does not match, a header that does not parse, a range other than its
// name says), truncated, or missing while the history needs it. Retrying
// cannot help: only another copy of the data can (another level, or the
// writer's local database).
var ErrDamaged = errors.New("replica object damaged")

// DamageError names one damaged object (or, for a gap, the missing range).
type DamageError struct {
	Key   string // the object's key, or the key the missing TXIDs would have at level 0
	Store string // the replica, for messages
	What  string // "corrupt", "truncated" or "missing"
	Err   error  // the cause as met
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("%s object %s in %s: %v", e.What, e.Key, e.Store, e.Err)
}

func (e *DamageError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrDamaged) true.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// Damaged classifies err, met while reading the object key of s to its end,
// as damage (a *DamageError) or returns it unchanged: a stalled, cancelled
// or unavailable read says nothing about the object.
func Damaged(ctx context.Context, s Store, key string, err error) error {
	if err == nil || ctx.Err() != nil || errors.Is(err, ErrStalled) || errors.Is(err, ErrUnavailable) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var de *DamageError
	if errors.As(err, &de) {
		return err
	}
	what := "corrupt"
	switch {
	case errors.Is(err, ErrNotFound):
		what = "missing"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		what = "truncated"
	case Permanent(err):
		return err // credentials, bucket: not the object's fault
	}
	return &DamageError{Key: key, Store: s.String(), What: what, Err: err}
}

// CheckLTX reads the whole object f from s and verifies it: its header
// names the range its key does, every page decodes and the file checksum
// matches. A failure of the object itself is a *DamageError; a failure to
// read it (the store did not answer) is returned as is. body, if not nil,
// receives the bytes read. stall > 0 abandons a read that makes no progress
// for that long (an error matching ErrStalled).
func CheckLTX(ctx context.Context, s Store, f LTXFile, body *bytes.Buffer, stall time.Duration) (ltx.Header, ltx.Trailer, error) {
	var wd *Watchdog
	if stall > 0 {
		var stop func()
		ctx, wd, stop = WithWatchdog(ctx, stall)
		defer stop()
	}
	rc, err := s.Get(ctx, f.Key)
	if err != nil {
		return ltx.Header{}, ltx.Trailer{}, Damaged(ctx, s, f.Key, Stalled(ctx, err))
	}
	defer rc.Close()
	var r io.Reader = rc
	if wd != nil {
		wd.Touch()
		r = wd.Reader(rc)
	}
	if body != nil {
		r = io.TeeReader(rc, body)
	}
	hdr, tr, err := DecodeLTX(r)
	if err == nil && (hdr.MinTXID != f.MinTXID || hdr.MaxTXID != f.MaxTXID) {
		err = fmt.Errorf("it holds TXIDs %s..%s, not what its name says", hdr.MinTXID, hdr.MaxTXID)
	}
	if err != nil {
		return hdr, tr, Damaged(ctx, s, f.Key, Stalled(ctx, err))
	}
	return hdr, tr, nil
}

// DecodeLTX reads one LTX file from r to its end and verifies its
// structure and file checksum.
func DecodeLTX(r io.Reader) (ltx.Header, ltx.Trailer, error) {
	dec := ltx.NewDecoder(r)
	if err := dec.DecodeHeader(); err != nil {
		return ltx.Header{}, ltx.Trailer{}, err
	}
	hdr := dec.Header()
	page := make([]byte, hdr.PageSize)
	var ph ltx.PageHeader
	for {
		if err := dec.DecodePage(&ph, page); err == io.EOF {
			break
		} else if err != nil {
			return hdr, ltx.Trailer{}, fmt.Errorf("after page %d: %w", ph.Pgno, err)
		}
	}
	if err := dec.Close(); err != nil {
		return hdr, ltx.Trailer{}, err
	}
	return hdr, dec.Trailer(), nil
}
