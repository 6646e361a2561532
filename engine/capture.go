package engine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/wal"
)

// errChangedWhileReading: a page read twice during one full read differed
// (the log was restarted under a read-mark-0 reader). The read is redone.
var errChangedWhileReading = errors.New("database changed while it was being read; retrying")

// capture turns the committed frames past the cursor into one pending LTX
// file. It runs right after rotateRead, under the new read transaction.
func (db *DB) capture() error {
	began := time.Now()
	if db.resyncWhy != "" {
		return db.resync(db.resyncWhy)
	}
	walFile, err := os.Open(db.walPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("open WAL %s: %w", db.walPath, err)
	}
	defer walFile.Close()

	wc := &walCapture{file: walFile}
	if done, err := db.locate(wc); done {
		return err
	}
	if done, err := db.readCommitted(wc); done {
		return err
	}
	if wc.commit == 0 { // nothing committed past the cursor
		return db.nothingCommitted(wc)
	}
	db.brokenAt = nil

	ship := db.pagesToShip(wc.offsets, wc.commit)
	if len(ship) == 0 && wc.commit == db.commit {
		// Only pages past the commit size changed: nothing to ship.
		db.advance(wc.end, wc.newGen, wc.offsets)
		return nil
	}
	if len(ship) == 0 { // a pure shrink still needs one page in the file
		ship = append(ship, 1)
	}
	return db.encodeCapture(wc, ship, began)
}

// walCapture is what one capture learns of the log, step by step: where
// reading starts (locate), then what the committed frames past it hold
// (readCommitted).
type walCapture struct {
	file   *os.File
	hdr    wal.Header
	newGen bool         // new salts since the cursor: the log restarted, read it from its first frame
	start  int64        // offset of the first frame to read
	sum    wal.Checksum // the checksum chain at start

	offsets map[uint32]int64 // each page's newest committed frame past start
	commit  uint32           // the database's size in pages after the last commit read; 0 if none
	end     cursor           // the cursor just past the last commit read
	stuck   bool             // reading stopped on a broken checksum at start itself
}

// locate reads the log's header and finds where this capture starts: at the
// cursor, or at the first frame of a new generation. done means capture
// ends here, with err (nil when there is nothing to read).
func (db *DB) locate(wc *walCapture) (done bool, err error) {
	hdr, err := wal.ReadHeader(wc.file)
	if errors.Is(err, io.EOF) || errors.Is(err, wal.ErrInvalidHeader) {
		// Truncated (or never written): by the read-transaction argument the
		// old log was fully captured.
		db.wcur, db.walIndex = cursor{}, map[uint32]int64{}
		return true, nil
	} else if err != nil {
		return true, fmt.Errorf("read WAL header of %s: %w", db.walPath, err)
	}
	if hdr.PageSize != db.pageSize {
		return true, db.resync(fmt.Sprintf("WAL page size %d differs from %d", hdr.PageSize, db.pageSize))
	}
	wc.hdr = hdr
	wc.start, wc.sum = db.wcur.off, db.wcur.sum
	wc.newGen = !db.wcur.ok || !hdr.SameSalts(db.wcur.hdr)
	if wc.newGen {
		wc.start, wc.sum = wal.HeaderSize, hdr.Checksum
		db.log.Debug("new WAL generation", "salt1", hdr.Salt1, "checkpoint_seq", hdr.CheckpointSeq)
	} else if st, err := wc.file.Stat(); err != nil {
		return true, fmt.Errorf("stat WAL %s: %w", db.walPath, err)
	} else if st.Size() < wc.start {
		return true, db.resync(fmt.Sprintf("WAL is %d bytes, shorter than the captured offset %d with the same salts", st.Size(), wc.start))
	}
	return false, nil
}

// readCommitted reads the committed frames past wc.start. Only each page's
// newest committed frame offset is kept, never page bytes: memory does not
// depend on how much the log holds. done means capture ends here, with err.
func (db *DB) readCommitted(wc *walCapture) (done bool, err error) {
	committed, err := db.committedFrames(wc.file)
	if errors.Is(err, wal.ErrIndexBusy) {
		return true, nil // SQLite is publishing a commit right now: take it next time
	} else if err != nil {
		return true, err
	}
	r, err := wal.NewReader(committed, wc.hdr, wc.start, wc.sum)
	if err != nil {
		return true, db.resync(err.Error())
	}
	defer r.Release()
	wc.offsets = map[uint32]int64{}
	txOffsets := map[uint32]int64{} // the frames of the transaction being read
	for {
		f, err := r.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			db.resyncWhy = "WAL read error"
			return true, fmt.Errorf("read WAL %s: %w", db.walPath, err)
		}
		db.stats.frames.Add(1)
		txOffsets[f.Pgno] = f.Offset
		if f.Commit != 0 {
			for p, off := range txOffsets {
				wc.offsets[p] = off
			}
			clear(txOffsets)
			wc.commit = f.Commit
		}
	}
	wc.end = cursor{ok: true, hdr: wc.hdr, off: r.CommitOffset(), sum: r.CommitChecksum()}
	wc.stuck = r.Stopped() == wal.StopChecksum && r.Offset() == wc.start
	return false, nil
}

// nothingCommitted ends a capture that found no commit past the cursor.
func (db *DB) nothingCommitted(wc *walCapture) error {
	if !wc.newGen && wc.stuck {
		// Usually a frame being written right now; if it is still broken
		// on the next capture, SQLite's log and ours disagree.
		if db.brokenAt != nil && *db.brokenAt == db.wcur {
			return db.resync("WAL checksum chain broken at the captured offset")
		}
		at := db.wcur
		db.brokenAt = &at
		return nil
	}
	db.brokenAt = nil
	if wc.newGen {
		db.wcur, db.walIndex = wc.end, map[uint32]int64{}
	}
	return nil
}

// pagesToShip lists, in order, every page this capture saw a frame of, plus
// the pages the database grew by without a frame of their own (the lock
// page aside, SQLite normally writes them all), which come from older frames
// of this log or from the DB file.
func (db *DB) pagesToShip(offsets map[uint32]int64, commit uint32) []uint32 {
	lock := ltx.LockPgno(db.pageSize)
	ship := make([]uint32, 0, len(offsets))
	for p := range offsets {
		if p <= commit && p != lock {
			ship = append(ship, p)
		}
	}
	for p := db.commit + 1; p <= commit; p++ {
		if _, ok := offsets[p]; !ok && p != lock {
			ship = append(ship, p)
		}
	}
	slices.Sort(ship)
	return ship
}

// encodeCapture encodes the pages to ship as the next pending file and makes
// the capture the captured state.
func (db *DB) encodeCapture(wc *walCapture, ship []uint32, began time.Time) error {
	// One view reads every page: this capture's frames, then the frames
	// captured before in the same generation, then the DB file. readPage
	// checks each frame's salts after reading it, so a log restarted under a
	// read-mark-0 reader is noticed and the page (by then in the DB file, see
	// the DB doc comment) read from there.
	v := &view{dbFile: db.dbFile, walFile: wc.file, pageSize: db.pageSize, index: wc.offsets, cur: wc.end}
	if !wc.newGen {
		v.older = db.walIndex
	}
	newSums := make([]ltx.Checksum, len(ship))
	src := func(yield func(uint32, []byte) error) error {
		buf := make([]byte, db.pageSize)
		for i, p := range ship {
			if err := v.readPage(p, buf); err != nil {
				return err
			}
			newSums[i] = pageChecksum(p, buf)
			if err := yield(p, buf); err != nil {
				return err
			}
		}
		return nil
	}
	txid := db.txid + 1
	data := newSpool(filepath.Dir(db.path), db.path)
	n, err := encodeLTX(data, db.pageSize, wc.commit, txid, captured(wc.start, wc.end), src)
	if err == nil {
		err = data.finish()
	}
	if err != nil {
		data.close()
		return fmt.Errorf("database %s: %w", db.path, err)
	}
	post := db.applyChecksums(ship, newSums, wc.commit)
	db.txid = txid
	db.advance(wc.end, wc.newGen, wc.offsets)
	db.setPending(&pendingFile{txid: txid, data: data, post: ltx.Pos{TXID: txid, PostApplyChecksum: post}, pages: n, captured: began})
	db.stats.captures.Add(1)
	return nil
}

// applyChecksums makes the shipped pages' checksums and the new size the
// captured state and returns the database checksum after them: the running
// XOR loses the replaced and cut-off pages and gains the shipped ones.
func (db *DB) applyChecksums(ship []uint32, newSums []ltx.Checksum, commit uint32) ltx.Checksum {
	x := db.xor
	for i, p := range ship {
		if p <= db.commit {
			x ^= db.checksums[p-1]
		}
		x ^= newSums[i]
	}
	for p := commit + 1; p <= db.commit; p++ {
		x ^= db.checksums[p-1]
	}
	if commit < db.commit {
		db.checksums = db.checksums[:commit]
	}
	for uint32(len(db.checksums)) < commit {
		db.checksums = append(db.checksums, 0)
	}
	for i, p := range ship {
		db.checksums[p-1] = newSums[i]
	}
	db.commit, db.xor = commit, x
	return ltx.ChecksumFlag | x
}

// advance moves the WAL cursor past newly captured frames.
func (db *DB) advance(end cursor, newGen bool, offsets map[uint32]int64) {
	if newGen {
		db.walIndex = map[uint32]int64{}
	}
	for p, off := range offsets {
		db.walIndex[p] = off
	}
	db.wcur = end
}

// resync reads the whole database under the read transaction and ships every
// page whose checksum differs from the captured state. It is exact whatever
// happened to the log; it only costs a full read.
func (db *DB) resync(reason string) error {
	db.log.Warn("resynchronising by full read", "reason", reason)
	db.stats.fullReads.Add(1)
	v, closeFiles, err := db.openView()
	if err != nil {
		db.resyncWhy = reason
		return err
	}
	defer closeFiles()
	if v.pageSize != db.pageSize {
		db.resyncWhy = reason
		return fmt.Errorf("database %s: page size changed from %d to %d; sluice cannot continue this replica: restore or start a new replica", db.path, db.pageSize, v.pageSize)
	}
	sums, err := v.checksums()
	if err != nil {
		db.resyncWhy = reason
		return err
	}
	var diff []uint32
	lock := ltx.LockPgno(v.pageSize)
	for p := uint32(1); p <= v.commit; p++ {
		if p != lock && (p > db.commit || sums[p-1] != db.checksums[p-1]) {
			diff = append(diff, p)
		}
	}
	if err := db.captureView(v, sums, diff, ltx.Pos{TXID: db.txid, PostApplyChecksum: ltx.ChecksumFlag | db.xor}); err != nil {
		db.resyncWhy = reason
		return err
	}
	db.resyncWhy, db.brokenAt = "", nil
	return nil
}

// allPages lists 1..commit without the lock page.
func allPages(commit, pageSize uint32) []uint32 {
	lock := ltx.LockPgno(pageSize)
	pgnos := make([]uint32, 0, commit)
	for p := uint32(1); p <= commit; p++ {
		if p != lock {
			pgnos = append(pgnos, p)
		}
	}
	return pgnos
}

// captureView makes the view the captured state and, unless nothing changed,
// encodes the listed pages (every page when pre.TXID is 0: a snapshot) as the
// file after pre. Each page is read again and must match its checksum.
func (db *DB) captureView(v *view, sums []ltx.Checksum, pgnos []uint32, pre ltx.Pos) error {
	began := time.Now()
	x := xorAll(sums)
	post := ltx.ChecksumFlag | x
	if pre.TXID == 0 {
		pgnos = allPages(v.commit, v.pageSize)
	}
	if pre.TXID != 0 && len(pgnos) == 0 && v.commit == db.commit && post == pre.PostApplyChecksum {
		db.adopt(v, sums, pre.TXID)
		return nil
	}
	last, err := v.lastFramePage()
	if err != nil {
		return fmt.Errorf("database %s: read the last frame of %s: %w", db.path, db.walPath, err)
	}
	if i, found := slices.BinarySearch(pgnos, last); last != 0 && !found {
		pgnos = slices.Insert(slices.Clip(pgnos), i, last)
	}
	if len(pgnos) == 0 {
		pgnos = []uint32{1}
	}
	txid := pre.TXID + 1
	src := func(yield func(uint32, []byte) error) error {
		buf := make([]byte, v.pageSize)
		for _, p := range pgnos {
			if err := v.readPage(p, buf); err != nil {
				return err
			}
			if pageChecksum(p, buf) != sums[p-1] {
				return errChangedWhileReading
			}
			if err := yield(p, buf); err != nil {
				return err
			}
		}
		return nil
	}
	data := newSpool(filepath.Dir(db.path), db.path)
	n, err := encodeLTX(data, v.pageSize, v.commit, txid, wholeLog(v.cur), src)
	if err == nil {
		err = data.finish()
	}
	if err != nil {
		data.close()
		return fmt.Errorf("database %s: %w", db.path, err)
	}
	db.adopt(v, sums, txid)
	db.setPending(&pendingFile{txid: txid, data: data, post: ltx.Pos{TXID: txid, PostApplyChecksum: post}, pages: n, captured: began})
	return nil
}

// adopt makes a full view the captured state at txid.
func (db *DB) adopt(v *view, sums []ltx.Checksum, txid ltx.TXID) {
	db.pageSize, db.commit, db.checksums, db.xor, db.txid = v.pageSize, v.commit, sums, xorAll(sums), txid
	db.wcur, db.walIndex = v.cur, v.index
}

// committedFrames bounds walFile to the frames the wal-index has published
// (mxFrame): frames past it may be the leftovers of a writer that died before
// publishing its commit, which SQLite never shows to readers and overwrites.
// Without a -shm file (exclusive locking mode) the whole file is used.
func (db *DB) committedFrames(walFile *os.File) (io.ReaderAt, error) {
	if db.shmFile == nil {
		return walFile, nil
	}
	hdr, err := wal.ReadHeader(walFile)
	if err != nil {
		return walFile, nil // no valid log: nothing will be read from it anyway
	}
	var mx uint32
	for attempt := 0; ; attempt++ {
		if mx, err = wal.ReadIndexMaxFrame(db.shmFile, hdr); !errors.Is(err, wal.ErrIndexBusy) || attempt == 20 {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	if err != nil {
		if errors.Is(err, wal.ErrIndexBusy) {
			return nil, err
		}
		return nil, fmt.Errorf("read the wal-index of %s: %w", db.path, err)
	}
	return io.NewSectionReader(walFile, 0, hdr.FrameOffset(int64(mx)+1)), nil
}
