package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// Snapshot ships what is committed, then uploads the whole database at the
// shipped TXID as a level-9 snapshot (TXIDs 1..N). It is how a writer heals
// a damaged replica from its local file, the truth in sync mode: the newest
// state, and every later one, then restores from the snapshot without the
// damaged object. The pages are the captured state's, each checked against
// its recorded checksum, so the snapshot is exactly the state at N.
//
// A snapshot of that range already in the store (compaction got there
// first) is the same state and is taken as it is.
func (db *DB) Snapshot(ctx context.Context) (replica.LTXFile, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.usable(); err != nil {
		return replica.LTXFile{}, err
	}
	if err := db.syncLocked(ctx); err != nil {
		return replica.LTXFile{}, err
	}
	if db.txid == 0 || db.pending != nil {
		return replica.LTXFile{}, fmt.Errorf("database %s: nothing shipped to snapshot", db.path)
	}
	began := time.Now()
	walFile, err := os.Open(db.walPath)
	if errors.Is(err, fs.ErrNotExist) {
		walFile = nil
	} else if err != nil {
		return replica.LTXFile{}, fmt.Errorf("open WAL %s: %w", db.walPath, err)
	}
	if walFile != nil {
		defer walFile.Close()
	}
	v := &view{dbFile: db.dbFile, walFile: walFile, pageSize: db.pageSize, commit: db.commit, index: db.walIndex, cur: db.wcur}
	src := func(yield func(uint32, []byte) error) error {
		buf := make([]byte, v.pageSize)
		for _, p := range allPages(v.commit, v.pageSize) {
			if err := v.readPage(p, buf); err != nil {
				return err
			}
			if pageChecksum(p, buf) != db.checksums[p-1] {
				return fmt.Errorf("page %d no longer matches the shipped state; retried at the next heal", p)
			}
			if err := yield(p, buf); err != nil {
				return err
			}
		}
		return nil
	}
	data := newSpool(filepath.Dir(db.path), db.path)
	defer data.close()
	n, err := encodeRange(data, db.pageSize, db.commit, 1, db.txid, walRange{}, src)
	if err == nil {
		err = data.finish()
	}
	if err != nil {
		return replica.LTXFile{}, fmt.Errorf("snapshot of %s at TXID %s: %w", db.path, db.txid, err)
	}
	key := replica.LTXKey(replica.SnapshotLevel, 1, db.txid)
	f := replica.LTXFile{Level: replica.SnapshotLevel, MinTXID: 1, MaxTXID: db.txid, Size: data.size, Key: key}
	uctx, wd, stop := replica.WithWatchdog(ctx, db.opts.UploadStall)
	_, err = db.store.PutIfAbsent(uctx, key, wd.Reader(data.reader()), data.size)
	err = replica.Stalled(uctx, err)
	stop()
	if errors.Is(err, replica.ErrExists) {
		info, serr := db.store.Stat(ctx, key)
		if serr != nil {
			return replica.LTXFile{}, fmt.Errorf("snapshot %s exists in %s but cannot be read: %w", key, db.store, serr)
		}
		f.Size = info.Size
	} else if err != nil {
		return replica.LTXFile{}, fmt.Errorf("upload snapshot %s to %s: %w", key, db.store, err)
	}
	db.log.Info("uploaded a snapshot of the local database", "key", key, "pages", n, "bytes", f.Size,
		"took", time.Since(began).Round(time.Millisecond).String())
	return f, nil
}
