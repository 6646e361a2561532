package followers_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/followers"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// A view reads what the writer shipped once it reaches the read's
// bookmark, refuses writes and sessions as needing the writer, and stops
// serving when its copy is dropped.
func TestViewReadsAtItsBookmarkAndSendsWritesToTheWriter(t *testing.T) {
	ctx := context.Background()
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	writer, err := dbhost.New(dbhost.Options{DataDir: t.TempDir(), Store: store, Replication: dbhost.EngineReplication(log, nil), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writer.Close(ctx) })
	db, err := writer.Get(ctx, dbhost.DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	bm, err := db.Write(ctx, func(c sqlconn.Conn) error {
		_, err := c.Exec(ctx, sqlconn.Stmt{SQL: "CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (41)"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	set := followers.New(followers.Options{DataDir: dir, Store: store, Logger: log,
		PollInterval: 10 * time.Millisecond, BookmarkWait: 2 * time.Second})
	t.Cleanup(set.Close)
	v, err := set.View(ctx, dbhost.DefaultDatabase, bm)
	if err != nil {
		t.Fatal(err)
	}
	if v.Bookmark() < bm || dbhost.CurrentBookmark(v) != v.Bookmark() {
		t.Fatalf("view at %d (current %d), want at least %d", v.Bookmark(), dbhost.CurrentBookmark(v), bm)
	}
	var n int64
	if _, err := v.Read(ctx, func(c sqlconn.Conn) error {
		res, err := c.Exec(ctx, sqlconn.Stmt{SQL: "SELECT n FROM t", WantRows: true})
		if err == nil && len(res.Rows) == 1 {
			n = res.Rows[0][0].Int
		}
		return err
	}); err != nil || n != 41 {
		t.Fatalf("read: %d, %v", n, err)
	}
	if !followers.StatementsReadOnly(ctx, v, []string{"SELECT n FROM t"}) ||
		followers.StatementsReadOnly(ctx, v, []string{"INSERT INTO t VALUES (1)"}) {
		t.Fatal("StatementsReadOnly disagrees with SQLite")
	}
	if _, err := v.Write(ctx, func(sqlconn.Conn) error { return nil }); !followers.IsNeedsWriter(err) || !errors.Is(err, dberr.ErrNotLeader) {
		t.Fatalf("write on a view: %v", err)
	}
	if _, err := v.Session(ctx); !followers.IsNeedsWriter(err) {
		t.Fatalf("session on a view: %v", err)
	}
	if st := set.Stats(); len(st) != 1 || st[0].Name != dbhost.DefaultDatabase {
		t.Fatalf("stats: %+v", st)
	}

	set.Drop(dbhost.DefaultDatabase)
	if _, err := os.Stat(filepath.Join(dir, dbhost.DefaultDatabase+".follower")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the dropped copy's file: %v", err)
	}
	if _, err := v.Read(ctx, func(sqlconn.Conn) error { return nil }); !errors.Is(err, dberr.ErrUnavailable) {
		t.Fatalf("read on a dropped copy: %v", err)
	}
	set.Close()
	if _, err := set.View(ctx, dbhost.DefaultDatabase, 0); !errors.Is(err, dberr.ErrUnavailable) {
		t.Fatalf("view after Close: %v", err)
	}
}

func TestViewOfADatabaseNowhereIsNotFound(t *testing.T) {
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	set := followers.New(followers.Options{DataDir: t.TempDir(), Store: store, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(set.Close)
	if _, err := set.View(context.Background(), "missing", 0); !errors.Is(err, dberr.ErrNotFound) {
		t.Fatalf("view of a database nowhere: %v", err)
	}
	if _, err := set.View(context.Background(), "../x", 0); err == nil {
		t.Fatal("view of an invalid name succeeded")
	}
}
