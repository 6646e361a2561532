package engine

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
)

// slowStore takes its time over every conditional create, as a distant
// bucket does with a large file.
type slowStore struct {
	replica.Store
	delay time.Duration
}

func (s slowStore) PutIfAbsent(ctx context.Context, k string, r io.Reader, n int64) (replica.ObjectInfo, error) {
	time.Sleep(s.delay)
	return s.Store.PutIfAbsent(ctx, k, r, n)
}

// A large file's upload says it is still running while it runs, and that
// it shipped once done, without -v; a small one stays quiet.
func TestLargeUploadReportsProgress(t *testing.T) {
	defer func(size int64, every time.Duration) { largeFile, progressEvery = size, every }(largeFile, progressEvery)
	largeFile, progressEvery = 256<<10, 20*time.Millisecond

	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	for i := 0; i < 500; i++ { // about 500 KiB that does not compress: a large first snapshot
		a.exec("INSERT INTO t(v) VALUES (randomblob(1000))")
	}
	var logs testenv.Output
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	db := openDB(t, path, slowStore{newStore(t), 200 * time.Millisecond}, Options{Logger: log, UploadStall: time.Minute})
	sync1(t, db)
	out := logs.String()
	if n := strings.Count(out, "still uploading"); n < 3 {
		t.Errorf("a 200 ms upload reported %d times every 20 ms, want at least 3\n%s", n, out)
	}
	if !strings.Contains(out, "msg=shipped") || !strings.Contains(out, "took=") {
		t.Errorf("no line saying the large file shipped\n%s", out)
	}

	a.insert(1) // a small file: no report
	before := logs.String()
	sync1(t, db)
	if after := logs.String(); after != before {
		t.Errorf("a small upload was reported:\n%s", strings.TrimPrefix(after, before))
	}
}
