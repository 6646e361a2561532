package dbhost

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
)

// A new lease holder taking over from a holder that released the lease at a
// shipped position opens the copy AdoptCopy gives it (in serve, its
// follower's) instead of restoring, and only after checking the copy's
// pages against the released checksum: an exact copy is opened with no
// restore; a copy with one changed byte is dropped and the database restored,
// so no write lands on a state the bucket does not hold.
func TestAdoptedCopyIsCheckedAgainstTheReleasedChecksum(t *testing.T) {
	for _, tampered := range []bool{false, true} {
		t.Run(map[bool]string{false: "exact", true: "tampered"}[tampered], func(t *testing.T) {
			store := newMinIOStore(t)
			const rows = 30
			a := leasedHost(t, store, "a")
			dbA, err := a.Get(context.Background(), DefaultDatabase)
			if err != nil {
				t.Fatal(err)
			}
			write(t, dbA, "CREATE TABLE t(x INTEGER, pad TEXT)")
			for i := 1; i <= rows; i++ {
				write(t, dbA, fmt.Sprintf("INSERT INTO t VALUES (%d, '%s')", i, strings.Repeat("p", 50)))
			}
			var restores, adopted atomic.Int64
			var askedAt atomic.Uint64
			b := newHost(t, store, t.TempDir(), func(o *Options) {
				o.Lease = &lease.Options{Holder: "b", URL: "http://b", TTL: time.Second, Poll: 50 * time.Millisecond}
				inner := o.Replication.Restore
				o.Replication.Restore = func(ctx context.Context, s replica.Store, path string) error {
					restores.Add(1)
					return inner(ctx, s, path)
				}
				o.AdoptCopy = func(ctx context.Context, name, path string, txid uint64) ([]replica.LTXFile, uint64, bool) {
					// A copy built from the replica's own files, as a follower's is.
					askedAt.Store(txid)
					res, err := restore.Restore(ctx, replica.Sub(store, name), path, restore.Options{})
					if err != nil {
						t.Errorf("build the copy: %v", err)
						return nil, 0, false
					}
					if tampered {
						flipByteIn(t, path, int64(res.PageSize)+int64(res.PageSize)/2) // inside page 2: a row
					}
					adopted.Add(1)
					return nil, uint64(res.Pos.TXID), true
				}
			})
			if _, err := b.Get(context.Background(), DefaultDatabase); err == nil {
				t.Fatal("b opened the database while a holds its lease")
			}
			if err := a.Close(context.Background()); err != nil { // releases at its shipped position
				t.Fatal(err)
			}
			dbB := getWithin(t, b, DefaultDatabase, 10*time.Second)
			write(t, dbB, fmt.Sprintf("INSERT INTO t VALUES (%d, 'b')", rows+1))
			if adopted.Load() != 1 || askedAt.Load() == 0 {
				t.Fatalf("AdoptCopy ran %d times, asked for TXID %d; want once, at the released position", adopted.Load(), askedAt.Load())
			}
			wantRestores := map[bool]int64{false: 0, true: 1}[tampered]
			if n := restores.Load(); n != wantRestores {
				t.Errorf("b restored %d times, want %d (tampered=%v)", n, wantRestores, tampered)
			}
			sum := queryInt(t, dbB, "SELECT sum(x) FROM t")
			if want := int64((rows + 1) * (rows + 2) / 2); sum != want {
				t.Fatalf("sum(x) = %d on the new holder, want %d: it wrote on a copy that differs from the bucket", sum, want)
			}
			if n := restoredCount(t, store, DefaultDatabase, "SELECT count(*) FROM t WHERE length(pad) = 50 OR pad = 'b'"); n != rows+1 {
				t.Fatalf("restored %d intact rows, want %d", n, rows+1)
			}
		})
	}
}

// flipByteIn inverts one byte of the file at path.
func flipByteIn(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}
