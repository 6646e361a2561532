package coldopen

import (
	"context"
	"fmt"
	"testing"
	"time"

	filestore "github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/restore/restoretest"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// A state built from a snapshot and later files, some pages overwritten,
// reads the same through the view as through a restore of it, and the view
// fetches pages on demand: a point query reads a few pages, not the file.
func TestViewAnswersAsTheRestoredFileDoes(t *testing.T) {
	dir := t.TempDir()
	store, err := filestore.New(dir + "/replica")
	if err != nil {
		t.Fatal(err)
	}
	h := restoretest.New(t, store, t.TempDir())
	h.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
	h.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 20000)
		INSERT INTO t SELECT i, printf('row %d ', i) || hex(randomblob(100)) FROM n`)
	h.Ship(time.Now())
	h.Exec("UPDATE t SET v = 'changed ' || id WHERE id % 1000 = 7")
	h.Ship(time.Now())
	h.Exec("DELETE FROM t WHERE id > 19990")
	h.Ship(time.Now())

	ctx := context.Background()
	pages, err := restore.OpenPages(ctx, store, restore.Options{}, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	if pages.Files() != 3 {
		t.Fatalf("plan of %d files, want 3", pages.Files())
	}
	indexReqs := pages.Requests()
	v, err := Open(pages, Options{ReadAhead: 16 << 10, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	query := func(q string) string {
		t.Helper()
		var out string
		err := v.Read(ctx, func(c sqlconn.Conn) error {
			var err error
			out, err = scalar(c, q)
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return out
	}
	if got := query("SELECT v FROM t WHERE id = 12007"); got != "changed 12007" {
		t.Fatalf("row 12007 = %q, want the updated value", got)
	}
	st := v.Stats()
	t.Logf("point query: %d requests (%d for the page indexes), %d bytes of a %d-byte database, %d pages fetched", st.Requests, indexReqs, st.Bytes, pages.Size(), st.Fetched)
	if st.Bytes > pages.Size()/4 {
		t.Fatalf("a point query fetched %d bytes of a %d-byte database", st.Bytes, pages.Size())
	}
	if got := query("SELECT count(*) || ' ' || sum(id) || ' ' || sum(length(v)) FROM t"); got == "" {
		t.Fatal("empty aggregate")
	}
	out := t.TempDir() + "/restored.db"
	if _, err := restore.Restore(ctx, store, out, restore.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"SELECT count(*) || ' ' || sum(id) || ' ' || sum(length(v)) FROM t",
		"SELECT group_concat(v) FROM t WHERE id % 1000 = 7",
		"SELECT max(id) FROM t",
		"PRAGMA integrity_check",
	} {
		want := fileScalar(t, out, q)
		if got := query(q); got != want {
			t.Errorf("%s: view %q, restored file %q", q, got, want)
		}
	}
	st = v.Stats()
	t.Logf("after full scans: %d hits, %d misses, %d fetched, %d evictions (cache bound 1 MiB of a %d-byte database)", st.Hits, st.Misses, st.Fetched, st.Evictions, pages.Size())
	if st.Evictions == 0 {
		t.Errorf("a full scan of a %d-byte database evicted nothing from a 1 MiB cache", pages.Size())
	}
	err = v.Read(ctx, func(c sqlconn.Conn) error { _, err := scalar(c, "DELETE FROM t"); return err })
	if err == nil {
		t.Fatal("a write on the view succeeded")
	}
}

func scalar(c sqlconn.Conn, q string) (string, error) {
	res, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: q, WantRows: true})
	if err != nil || len(res.Rows) == 0 {
		return "", err
	}
	v := res.Rows[0][0]
	switch v.Type {
	case sqlconn.Integer:
		return fmt.Sprint(v.Int), nil
	case sqlconn.Text:
		return v.Text, nil
	}
	return fmt.Sprint(v), nil
}

// fileScalar runs q on a local file.
func fileScalar(t *testing.T, path, q string) string {
	t.Helper()
	h, err := sqlconn.Open(path, sqlconn.OwnReader, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var out string
	if err := h.Call(func(c sqlconn.Conn) error { out, err = scalar(c, q); return err }); err != nil {
		t.Fatalf("%s on %s: %v", q, path, err)
	}
	return out
}
