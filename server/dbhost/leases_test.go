package dbhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/httperr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

func leasedHost(t *testing.T, store replica.Store, id string) *Host {
	return newHost(t, store, t.TempDir(), func(o *Options) {
		o.Lease = &lease.Options{Holder: id, URL: "http://" + id, TTL: time.Second, Poll: 50 * time.Millisecond}
	})
}

func getWithin(t *testing.T, h *Host, name string, d time.Duration) Database {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		db, err := h.Get(context.Background(), name)
		if err == nil {
			return db
		}
		if time.Now().After(deadline) {
			t.Fatalf("database %s not writable here within %s: %v", name, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// One writer at a time; the waiter takes over on release, with every row.
func TestLeaseOneWriterAndHandoff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(*testing.T) replica.Store
	}{{"file", func(t *testing.T) replica.Store { return newFileStore(t) }}, {"minio", newMinIOStore}} {
		t.Run(tc.name, func(t *testing.T) {
			store := tc.store(t)
			a, b := leasedHost(t, store, "a"), leasedHost(t, store, "b")
			dbA, err := a.Get(context.Background(), DefaultDatabase)
			if err != nil {
				t.Fatal(err)
			}
			write(t, dbA, "CREATE TABLE t(x)")
			_, err = b.Get(context.Background(), DefaultDatabase)
			var nl *NotLeaderError
			if !errors.As(err, &nl) || nl.Leader.URL != "http://a" {
				t.Fatalf("b.Get = %v, want NotLeaderError naming http://a", err)
			}
			var e *dberr.Error
			if !errors.As(err, &e) || httperr.Status(e) != 503 {
				t.Fatalf("NotLeaderError is not a 503 *dberr.Error: %v", err)
			}
			for i := 0; i < 20; i++ {
				write(t, dbA, "INSERT INTO t VALUES (1)")
			}
			closed := time.Now()
			if err := a.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			dbB := getWithin(t, b, DefaultDatabase, 3*time.Second)
			if gap := time.Since(closed); gap > 2*time.Second {
				t.Errorf("handoff took %s after the release", gap)
			}
			if n := queryInt(t, dbB, "SELECT count(*) FROM t"); n != 20 {
				t.Fatalf("b sees %d rows after taking over, want 20", n)
			}
			write(t, dbB, "INSERT INTO t VALUES (2)")
			if n := restoredCount(t, store, DefaultDatabase, "SELECT count(*) FROM t"); n != 21 {
				t.Fatalf("bucket has %d rows, want 21", n)
			}
			rec, _, _ := lease.Read(context.Background(), replica.Sub(store, DefaultDatabase))
			if rec.Holder != "b" || rec.Epoch != 2 {
				t.Fatalf("lease after handoff = %+v", rec)
			}
		})
	}
}

// A holder whose lease is taken stops acknowledging writes, drops its local
// copy and waits on the new holder.
func TestLeaseLossStopsWritesAndDropsLocalCopy(t *testing.T) {
	store := newFileStore(t)
	a := leasedHost(t, store, "a")
	dbA, err := a.Get(context.Background(), DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dbA, "CREATE TABLE t(x)")
	body, _ := json.Marshal(lease.Record{Holder: "intruder", URL: "http://intruder", Epoch: 7, Expires: time.Now().Add(time.Hour)})
	if _, err := replica.Sub(store, DefaultDatabase).Put(context.Background(), lease.Key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		_, err := dbA.Write(context.Background(), func(c sqlconn.Conn) error {
			_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO t VALUES (1)"})
			return err
		})
		var e *dberr.Error
		if errors.As(err, &e) && httperr.Status(e) == 503 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still accepted after the lease was taken: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		_, err := a.Get(context.Background(), DefaultDatabase)
		var nl *NotLeaderError
		_, statErr := os.Stat(filepath.Join(a.opts.DataDir, DefaultDatabase+".db"))
		if errors.As(err, &nl) && nl.Leader.Holder == "intruder" && errors.Is(statErr, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after losing the lease: Get = %v, local file: %v", err, statErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
