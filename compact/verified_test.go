package compact

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
)

// keyReads counts the reads of each key.
type keyReads struct {
	replica.Store
	mu    sync.Mutex
	reads map[string]int
}

func (s *keyReads) note(k string) {
	s.mu.Lock()
	s.reads[k]++
	s.mu.Unlock()
}

func (s *keyReads) Get(ctx context.Context, k string) (io.ReadCloser, error) {
	s.note(k)
	return s.Store.Get(ctx, k)
}

func (s *keyReads) GetRange(ctx context.Context, k string, o, n int64) (io.ReadCloser, error) {
	s.note(k)
	return s.Store.GetRange(ctx, k, o, n)
}

// The check of the unmerged files reads none a restore just verified, and
// still reads, confirms and reports a damaged one the restore did not
// verify (it left it out, or failed on it); a verified key listed with
// another size is read again.
func TestTailCheckSkipsWhatARestoreVerified(t *testing.T) {
	ctx := context.Background()
	fs, _ := newStore(t)
	shippedHistory(t, fs, 10, 8, 5)
	res, err := restore.Restore(ctx, fs, filepath.Join(t.TempDir(), "r.db"), restore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l0, _ := replica.ListLTX(ctx, fs, 0)
	if len(res.Files) != len(l0) {
		t.Fatalf("restore read %d files, want the %d of level 0", len(res.Files), len(l0))
	}

	// Clean: nothing left to read.
	reads := &keyReads{Store: fs, reads: map[string]int{}}
	c := New(reads, Config{OnDamage: func(de *replica.DamageError) { t.Errorf("reported %s", de.Key) }}, nil)
	c.Verified(res.Files)
	if err := c.CheckTail(ctx); err != nil {
		t.Fatal(err)
	}
	if len(reads.reads) != 0 {
		t.Errorf("the check read %v, all verified by the restore", reads.reads)
	}

	// A damaged file the restore did not verify, and one verified file
	// listed with another size: both are read, the damaged one reported.
	victim, resized := l0[4], l0[6]
	body := readAll(t, fs, victim.Key)
	body[len(body)-20] ^= 1 // in the trailer's file checksum
	if _, err := fs.Put(ctx, victim.Key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	var verified []replica.LTXFile
	for _, f := range res.Files {
		switch f.Key {
		case victim.Key:
			continue
		case resized.Key:
			f.Size++
		}
		verified = append(verified, f)
	}
	reads = &keyReads{Store: fs, reads: map[string]int{}}
	var reported []string
	c = New(reads, Config{OnDamage: func(de *replica.DamageError) { reported = append(reported, de.Key) }}, nil)
	c.Verified(verified)
	if err := c.CheckTail(ctx); err != nil {
		t.Fatal(err)
	}
	if len(reported) != 1 || reported[0] != victim.Key {
		t.Fatalf("reported %v, want [%s]", reported, victim.Key)
	}
	if reads.reads[victim.Key] == 0 || reads.reads[resized.Key] != 1 || len(reads.reads) != 2 {
		t.Fatalf("the check read %v; want the damaged %s (confirmed) and the resized %s once, nothing else", reads.reads, victim.Key, resized.Key)
	}
	t.Logf("reads: %v", reads.reads)
}
