package replica_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// A watched body that was seekable stays seekable (a store rewinds and signs
// it in place instead of copying it first), and reads at an offset count as
// progress like sequential ones.
func TestWatchdogReaderKeepsSeekableBodiesSeekable(t *testing.T) {
	ctx, wd, stop := replica.WithWatchdog(context.Background(), 100*time.Millisecond)
	defer stop()
	data := bytes.Repeat([]byte("sluice"), 1000)
	r := wd.Reader(bytes.NewReader(data))
	rs, ok := r.(io.ReadSeeker)
	if !ok {
		t.Fatal("a watched bytes.Reader is no longer an io.ReadSeeker")
	}
	ra, ok := r.(io.ReaderAt)
	if !ok {
		t.Fatal("a watched bytes.Reader is no longer an io.ReaderAt")
	}
	buf := make([]byte, 6)
	for i := range 10 { // 300 ms of reads at offsets, each within the timeout
		if _, err := ra.ReadAt(buf, int64(6*i)); err != nil || string(buf) != "sluice" {
			t.Fatalf("ReadAt %d: %q, %v", 6*i, buf, err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("reads at offsets did not count as progress: %v", context.Cause(ctx))
	}
	if _, err := rs.Seek(int64(len(data)-6), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(rs); err != nil || string(b) != "sluice" {
		t.Fatalf("read after Seek: %q, %v", b, err)
	}
	time.Sleep(300 * time.Millisecond)
	if !errors.Is(context.Cause(ctx), replica.ErrStalled) {
		t.Fatalf("no progress for 300 ms: cause %v, want ErrStalled", context.Cause(ctx))
	}
	if _, ok := wd.Reader(io.MultiReader(strings.NewReader("x"))).(io.Seeker); ok {
		t.Fatal("an unseekable body became seekable")
	}
}
