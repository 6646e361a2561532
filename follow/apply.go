package follow

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicedb/sluice/internal/sqliteconn"
	"github.com/superfly/ltx"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/replica"
)

// Applying pages to a live database without sqlite_dbpage.
//
// The local copy is in rollback-journal mode, so every reader holds a SHARED
// lock on the database file for the length of its read transaction. The
// dedicated connection's BEGIN EXCLUSIVE takes PENDING (no new readers) and
// then EXCLUSIVE once the current readers finish (new readers wait on their
// busy timeout, for milliseconds). While EXCLUSIVE is held nobody reads the
// file, so pages are written with plain pwrites through this package's one
// descriptor. Before the lock is dropped the header's file change counter
// (bytes 24..27) is incremented: every connection compares it at the start of
// its next read transaction and drops its page cache when it moved. The
// header's database size (28..31) is set to the new size, and
// version-valid-for (92..95) to the new counter so SQLite trusts that size.
// COMMIT then releases the lock; the connection changed nothing itself, so
// there is no journal to write or replay. Page 1 of a WAL-mode leader says
// "WAL" in bytes 18..19; they are set back to 1 (rollback journal) so that no
// connection here looks for a WAL.

// Offsets in the SQLite database header (page 1).
const (
	hdrWriteVersion  = 18
	hdrReadVersion   = 19
	hdrChangeCounter = 24
	hdrDatabaseSize  = 28
	hdrVersionValid  = 92
	hdrSize          = 100
)

type page struct {
	pgno uint32
	data []byte
}

// applyNext fetches and applies TXID pos+1's level-0 file; false if the
// replica has no such file (yet).
func (f *Follower) applyNext(ctx context.Context) (bool, error) {
	next := f.Pos().TXID + 1
	start := time.Now()
	data, ok, err := f.fetch(ctx, next)
	if err != nil || !ok {
		return false, err
	}
	f.fetchTook = time.Since(start)
	return true, f.applyFile(ctx, next, data)
}

// fetch reads TXID txid's level-0 file; false if the replica has none.
func (f *Follower) fetch(ctx context.Context, txid ltx.TXID) ([]byte, bool, error) {
	key := replica.LTXKey(0, txid, txid)
	rc, err := f.store.Get(ctx, key)
	if errors.Is(err, replica.ErrNotFound) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("follow %s: fetch %s: %w", f.store, key, err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, false, fmt.Errorf("follow %s: read %s: %w", f.store, key, err)
	}
	return data, true, nil
}

// maxPrefetch bounds the files fetched at once when the writer said that
// several are shipped.
const maxPrefetch = 8

// applyHinted fetches the files from pos+1 up to the writer's hint with
// up to maxPrefetch GETs in flight, a new one started as soon as one is
// applied (no batch waits for its slowest GET), and applies each, in
// order, as soon as it arrived, up to the first one the bucket does not
// hold. Each is checked exactly as applyNext checks one: the hint only
// decides what is fetched at once.
func (f *Follower) applyHinted(ctx context.Context) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // fetches past a miss are abandoned
	type got struct {
		data []byte
		ok   bool
		err  error
		took time.Duration
	}
	pos := f.Pos().TXID
	next := pos + 1 // the next TXID to fetch
	var inFlight []chan got
	applied := 0
	for {
		for hint := ltx.TXID(f.hint.Load()); len(inFlight) < maxPrefetch && next <= hint; next++ {
			ch := make(chan got, 1) // never blocks: a fetch past a miss is dropped
			txid := next
			go func() {
				start := time.Now()
				data, ok, err := f.fetch(ctx, txid)
				ch <- got{data, ok, err, time.Since(start)}
			}()
			inFlight = append(inFlight, ch)
		}
		if len(inFlight) == 0 {
			return applied, nil
		}
		r := <-inFlight[0]
		inFlight = inFlight[1:]
		if r.err != nil || !r.ok {
			return applied, r.err
		}
		txid := pos + 1 + ltx.TXID(applied)
		if f.Pos().TXID != txid-1 { // a restore moved the copy
			return applied, nil
		}
		f.fetchTook = r.took
		if err := f.applyFile(ctx, txid, r.data); err != nil {
			return applied, err
		}
		applied++
	}
}

// applyFile checks data as TXID next's file and applies its pages.
func (f *Follower) applyFile(ctx context.Context, next ltx.TXID, data []byte) error {
	key := replica.LTXKey(0, next, next)
	hdr, pages, err := decodeFile(data)
	if err == nil && (hdr.MinTXID != next || hdr.MaxTXID != next) {
		err = fmt.Errorf("it holds TXIDs %s-%s, expected %s only", hdr.MinTXID, hdr.MaxTXID, next)
	}
	if err != nil {
		return fmt.Errorf("follow %s: %s is not a valid LTX file; the replica is damaged: %w", f.store, key,
			&replica.DamageError{Key: key, Store: f.store.String(), What: "corrupt", Err: err})
	}
	if hdr.PageSize != f.pageSize {
		f.log.Info("the page size changed; restoring again", "from", f.pageSize, "to", hdr.PageSize)
		return f.rerestore(ctx)
	}
	start := time.Now()
	err = f.locked(func() error {
		for _, p := range pages {
			if p.pgno > hdr.Commit {
				continue // freed by this very commit (the file shrank)
			}
			if p.pgno == 1 && len(p.data) >= hdrSize {
				f.leaderHeader = bytes.Clone(p.data[:hdrSize])
			}
			if err := f.writePage(p.pgno, p.data); err != nil {
				return err
			}
		}
		return f.finishCommit(hdr.Commit)
	})
	if err != nil {
		return err
	}
	f.applied.Add(1)
	file := replica.LTXFile{Level: 0, MinTXID: next, MaxTXID: next, Size: int64(len(data)), Key: key}
	f.noteVerified(file)
	if f.opts.OnApplied != nil {
		f.opts.OnApplied(file, data)
	}
	// No rolling checksum: sluice's and Litestream's files carry none (see engine/state.go).
	f.setPos(ltx.Pos{TXID: next}, time.UnixMilli(hdr.Timestamp))
	// Where a follower's lag goes: the writer's push to the fetch's start,
	// the fetch, the apply under the lock.
	args := []any{"txid", next, "pages", len(pages), "commit", hdr.Commit, "locked", time.Since(start)}
	if f.fetchTook > 0 {
		args = append(args, "fetch", f.fetchTook, "hint", f.hint.Load())
		if at := f.hintAt.Load(); at > 0 && f.hint.Load() >= uint64(next) {
			args = append(args, "since_push", time.Since(time.Unix(0, at)))
		}
		f.fetchTook = 0
	}
	f.log.Debug("applied", args...)
	return nil
}

// decodeFile decodes a whole LTX file, verifying its file checksum before
// any page is used.
func decodeFile(data []byte) (ltx.Header, []page, error) {
	dec := ltx.NewDecoder(bytes.NewReader(data))
	if err := dec.DecodeHeader(); err != nil {
		return ltx.Header{}, nil, err
	}
	hdr := dec.Header()
	var pages []page
	for {
		var ph ltx.PageHeader
		buf := make([]byte, hdr.PageSize)
		err := dec.DecodePage(&ph, buf)
		if err == io.EOF {
			break
		} else if err != nil {
			return hdr, nil, err
		}
		pages = append(pages, page{pgno: ph.Pgno, data: buf})
	}
	if err := dec.Close(); err != nil {
		return hdr, nil, err
	}
	return hdr, pages, nil
}

// rerestore restores the replica's latest state beside the live copy and
// copies it into the live file under the lock (readers keep their
// connections; renaming would leave them on the old inode).
func (f *Follower) rerestore(ctx context.Context) error {
	tmp, res, err := f.restoreToTemp(ctx)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	src, err := os.Open(tmp)
	if err != nil {
		return fmt.Errorf("follow %s: open restored copy %s: %w", f.store, tmp, err)
	}
	defer src.Close() // no SQLite connection is open on the temp file
	f.pageSize = res.PageSize
	buf := make([]byte, res.PageSize)
	err = f.locked(func() error {
		for pgno := uint32(1); pgno <= res.Pages; pgno++ {
			if _, err := src.ReadAt(buf, int64(pgno-1)*int64(res.PageSize)); err != nil {
				return fmt.Errorf("follow %s: read restored copy %s: %w", f.store, tmp, err)
			}
			if err := f.writePage(pgno, buf); err != nil {
				return err
			}
		}
		return f.finishCommit(res.Pages)
	})
	if err != nil {
		return err
	}
	f.restores.Add(1)
	f.setPos(res.Pos, time.Time{})
	return nil
}

// locked runs fn while the dedicated connection holds the EXCLUSIVE lock.
func (f *Follower) locked(fn func() error) error {
	if f.lock == nil {
		return ErrClosed
	}
	if err := sqlitex.ExecuteTransient(f.lock, "BEGIN EXCLUSIVE", nil); err != nil {
		return fmt.Errorf("follow %s: lock %s for applying (readers held it longer than %s): %w", f.store, f.path, f.opts.BusyTimeout, err)
	}
	ferr := fn()
	if err := sqlitex.ExecuteTransient(f.lock, "COMMIT", nil); err != nil {
		_ = sqlitex.ExecuteTransient(f.lock, "ROLLBACK", nil)
		return errors.Join(ferr, fmt.Errorf("follow %s: unlock %s: %w", f.store, f.path, err))
	}
	return ferr
}

func (f *Follower) writePage(pgno uint32, data []byte) error {
	if pgno == 1 && len(data) >= hdrSize {
		data = bytes.Clone(data)
		data[hdrWriteVersion], data[hdrReadVersion] = 1, 1
	}
	if _, err := f.file.WriteAt(data, int64(pgno-1)*int64(f.pageSize)); err != nil {
		return fmt.Errorf("follow %s: write page %d of %s: %w", f.store, pgno, f.path, err)
	}
	return nil
}

// finishCommit truncates the file to commit pages and bumps the change
// counter so every connection drops its cache (the caller holds the lock).
func (f *Follower) finishCommit(commit uint32) error {
	size := int64(commit) * int64(f.pageSize)
	if commit < f.commit || f.commit == 0 {
		if err := f.file.Truncate(size); err != nil {
			return fmt.Errorf("follow %s: truncate %s to %d pages: %w", f.store, f.path, commit, err)
		}
	}
	f.commit = commit
	var hdr [hdrSize]byte
	if _, err := f.file.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("follow %s: read the header of %s: %w", f.store, f.path, err)
	}
	counter := binary.BigEndian.Uint32(hdr[hdrChangeCounter:]) + 1
	binary.BigEndian.PutUint32(hdr[hdrChangeCounter:], counter)
	binary.BigEndian.PutUint32(hdr[hdrDatabaseSize:], commit)
	binary.BigEndian.PutUint32(hdr[hdrVersionValid:], counter)
	hdr[hdrWriteVersion], hdr[hdrReadVersion] = 1, 1
	if _, err := f.file.WriteAt(hdr[:], 0); err != nil {
		return fmt.Errorf("follow %s: write the header of %s: %w", f.store, f.path, err)
	}
	return nil
}

// setRollbackMode marks a restored (WAL-mode) file as a rollback-journal
// database, before any connection opens it.
func setRollbackMode(path string) error {
	file, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("follow: open restored copy %s: %w", path, err)
	}
	_, err = file.WriteAt([]byte{1, 1}, hdrWriteVersion)
	return errors.Join(err, file.Close())
}

// readHeader reads the database header of the file at path.
func readHeader(path string) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("follow: open restored copy %s: %w", path, err)
	}
	defer file.Close()
	hdr := make([]byte, hdrSize)
	if _, err := file.ReadAt(hdr, 0); err != nil {
		return nil, fmt.Errorf("follow: read the header of %s: %w", path, err)
	}
	return hdr, nil
}

func openLockConn(path string, busy time.Duration) (*sqlite.Conn, error) {
	conn, err := sqliteconn.Open(path, sqlite.OpenReadWrite)
	if err != nil {
		return nil, fmt.Errorf("follow: open %s: %w", path, err)
	}
	conn.SetBusyTimeout(busy)
	return conn, nil
}

func dirOf(path string) string  { return filepath.Dir(path) }
func baseOf(path string) string { return filepath.Base(path) }
