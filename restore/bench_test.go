package restore

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/restore/restoretest"
)

// BenchmarkRestore23MB restores the single-row-insert workload's database (468,703 rows of its JSON
// insert, ~23 MB) from a file replica: one snapshot plus 20 incremental files.
// BenchmarkDownload23MB is the reference: reading the snapshot object once.
func seed001(b *testing.B) *restoretest.History { return seed001ForT(b) }

func seed001ForT(b testing.TB) *restoretest.History {
	b.Helper()
	h := restoretest.New(b, newStore(b), b.TempDir())
	h.Script(`CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 468000)
		INSERT INTO t (json) SELECT '{"age":10, "name":"yamada", "class":"A"}' FROM n;`)
	h.Ship(t0)
	for i := 0; i < 20; i++ {
		h.Script(fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 35)
			INSERT INTO t (json) SELECT '{"age":%d, "name":"yamada", "class":"A"}' FROM n;`, i))
		h.Ship(t0.Add(time.Duration(i+1) * time.Second))
	}
	return h
}

func BenchmarkRestore23MB(b *testing.B) {
	h := seed001(b)
	dir := b.TempDir()
	var res Result
	n := 0
	for b.Loop() {
		n++
		var err error
		res, err = Restore(context.Background(), h.Store, filepath.Join(dir, fmt.Sprintf("out-%d.db", n)), Options{})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(res.Pages) * int64(res.PageSize))
	b.ReportMetric(float64(len(res.Files)), "files")
}

func BenchmarkDownload23MB(b *testing.B) {
	h := seed001(b)
	snap := h.Files[0]
	for b.Loop() {
		rc, err := h.Store.Get(context.Background(), snap.Key)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			b.Fatal(err)
		}
		rc.Close()
	}
	b.SetBytes(snap.Size)
}
