package dbhost

import (
	"context"
	"os"
	"testing"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

func newMinIOStore(t *testing.T) replica.Store {
	minio := testenv.MinIO(t)
	s, err := replicaurl.Open(context.Background(), minio.URL(minio.NewBucket(t), "srv"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMinIORestartRestoresAndContinues(t *testing.T) {
	store := newMinIOStore(t)
	dir := t.TempDir()
	h := newHost(t, store, dir, nil)
	db, err := h.Get(context.Background(), DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE t(x)")
	for i := 0; i < 5; i++ {
		write(t, db, "INSERT INTO t VALUES (1)")
	}
	pos, err := replica.LatestPos(context.Background(), replica.Sub(store, DefaultDatabase))
	t.Logf("latest pos %v err %v", pos, err)
	objs, _ := store.List(context.Background(), "")
	for _, o := range objs {
		t.Logf("%s %d", o.Key, o.Size)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir)
	h2 := newHost(t, store, dir, nil)
	db2, err := h2.Get(context.Background(), DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	write(t, db2, "INSERT INTO t VALUES (1)")
	if got := restoredCount(t, store, DefaultDatabase, "SELECT count(*) FROM t"); got != 6 {
		t.Fatalf("bucket rows = %d, want 6", got)
	}
}
