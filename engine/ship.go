package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/internal/ltxenc"
	"github.com/sluicedb/sluice/replica"
)

// pendingFile is an encoded LTX file captured but not yet accepted by the
// store. Keeping the bytes (in a spool: memory up to a bound, then a temporary
// file) means a failed upload is retried with exactly the same content and
// TXID, and that captured frames never need the WAL again.
type pendingFile struct {
	txid     ltx.TXID
	data     *spool
	post     ltx.Pos
	pages    int
	captured time.Time // when its capture began (reported for large files)
	// uncertain is set when an attempt failed in a way that may still have
	// stored the object (a timeout, a cancelled request, a lost response).
	uncertain bool
}

// pageSource yields the pages of one LTX file in ascending pgno order.
type pageSource func(yield func(pgno uint32, data []byte) error) error

// encodeLTX writes one LTX file holding TXID txid to w, page by page.
// No rolling checksums go in the file (see state.go): Litestream 0.5.17's
// restore refuses files that carry them, so the caller keeps them.
// from is the part of the WAL the file was captured from (see walRange).
func encodeLTX(w io.Writer, pageSize, commit uint32, txid ltx.TXID, from walRange, pages pageSource) (int, error) {
	return encodeRange(w, pageSize, commit, txid, txid, from, pages)
}

// encodeRange is encodeLTX for a file holding TXIDs min..max (a snapshot:
// 1..max with every page, which records no WAL range: Litestream takes its
// position from level 0 only).
func encodeRange(w io.Writer, pageSize, commit uint32, min, txid ltx.TXID, from walRange, pages pageSource) (int, error) {
	enc := ltxenc.New(w)
	defer enc.Release()
	hdr := ltx.Header{
		Version:   ltx.Version,
		Flags:     ltx.HeaderFlagNoChecksum,
		PageSize:  pageSize,
		Commit:    commit,
		MinTXID:   min,
		MaxTXID:   txid,
		Timestamp: time.Now().UnixMilli(),
		WALOffset: from.off,
		WALSize:   from.size,
		WALSalt1:  from.salt1,
		WALSalt2:  from.salt2,
	}
	if err := enc.EncodeHeader(hdr); err != nil {
		return 0, fmt.Errorf("encode LTX header of TXID %s: %w", txid, err)
	}
	n := 0
	err := pages(func(pgno uint32, data []byte) error {
		n++
		return enc.EncodePage(ltx.PageHeader{Pgno: pgno}, data)
	})
	if err != nil {
		return 0, fmt.Errorf("encode LTX pages of TXID %s: %w", txid, err)
	}
	if err := enc.Close(); err != nil {
		return 0, fmt.Errorf("encode LTX file of TXID %s: %w", txid, err)
	}
	return n, nil
}

// uploadAttempts is how many times one upload call tries the pending file
// when attempts stall, before it gives the error to its caller (which
// retries on its own schedule).
const uploadAttempts = 3

// upload ships the pending file, if any. On a taken key the DB is fenced for
// good; on any other error the file stays pending for the next attempt.
//
// Each attempt has a watchdog (Options.UploadStall) so a request stuck behind
// a saturated or hung connection is abandoned and retried instead of holding
// every write until the caller's deadline. An abandoned attempt may still
// have landed, so the file is marked uncertain: a later ErrExists is resolved
// by reading the object back, never by re-uploading under another name.
func (db *DB) upload(ctx context.Context) error {
	p := db.pending
	if p == nil {
		return nil
	}
	f, err := db.attempt(ctx, p)
	if errors.Is(err, ErrFenced) {
		db.fenced = err
		db.dropPending()
		return db.fenced
	} else if err != nil {
		return err
	}
	body := p.data.small()
	db.dropPending()
	db.setPos(p.post) // before setPending(nil): Captured never goes back
	db.setPending(nil)
	if err := db.posFile.record(db.path, db.store.String(), p.post); err != nil {
		db.log.Warn("cannot record the shipped position; a restart will re-upload every page", "err", err)
	}
	if p.data.size >= largeFile {
		db.log.Info("shipped", "txid", p.txid.String(), "pages", p.pages, "mib", mib(p.data.size),
			"took", time.Since(p.captured).Round(time.Millisecond).String())
	} else {
		db.log.Debug("shipped", "txid", p.txid.String(), "pages", p.pages, "bytes", p.data.size)
	}
	if db.opts.OnShip != nil {
		db.opts.OnShip(f, body)
	}
	return nil
}

// uploadOnce makes one conditional create of p under a stall watchdog.
func (db *DB) uploadOnce(ctx context.Context, p *pendingFile) (replica.LTXFile, error) {
	ctx, wd, stop := replica.WithWatchdog(ctx, db.opts.UploadStall)
	defer stop()
	key := replica.LTXKey(0, p.txid, p.txid)
	if p.data.size >= largeFile {
		defer db.reportUpload(p)()
	}
	_, err := db.store.PutIfAbsent(ctx, key, wd.Reader(p.data.reader()), p.data.size)
	if errors.Is(err, replica.ErrExists) {
		return replica.LTXFile{}, fmt.Errorf("%s in %s is already taken by another writer: %w", key, db.store, err)
	} else if err != nil {
		return replica.LTXFile{}, fmt.Errorf("upload %s to %s: %w", key, db.store, replica.Stalled(ctx, err))
	}
	return replica.LTXFile{Level: 0, MinTXID: p.txid, MaxTXID: p.txid, Size: p.data.size, Key: key}, nil
}

// storedIsOurs reports whether the object at p's key holds exactly p's bytes.
// The encoded file carries its own timestamp and checksums, so another
// writer's file for the same TXID cannot compare equal by accident. An error
// means the answer is unknown (the object could not be read).
func (db *DB) storedIsOurs(ctx context.Context, p *pendingFile) (bool, error) {
	ctx, wd, stop := replica.WithWatchdog(ctx, db.opts.UploadStall)
	defer stop()
	rc, err := db.store.Get(ctx, replica.LTXKey(0, p.txid, p.txid))
	if err != nil {
		return false, replica.Stalled(ctx, err)
	}
	defer rc.Close()
	same, err := sameBytes(wd.Reader(rc), p.data.reader())
	return same, replica.Stalled(ctx, err)
}

// sameBytes compares the stored object a with the spooled file b in bounded
// memory. An error reading a means the answer is unknown.
func sameBytes(a, b io.Reader) (bool, error) {
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(a, ba)
		aEnd := ea == io.EOF || ea == io.ErrUnexpectedEOF
		if ea != nil && !aEnd {
			return false, ea
		}
		nb, eb := io.ReadFull(b, bb)
		bEnd := eb == io.EOF || eb == io.ErrUnexpectedEOF
		if eb != nil && !bEnd {
			return false, eb
		}
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) || aEnd != bEnd {
			return false, nil
		}
		if aEnd {
			return true, nil
		}
	}
}

// dropPending forgets the pending file and releases what holds its bytes;
// after an upload, setPending(nil) also says nothing waits.
func (db *DB) dropPending() {
	if db.pending != nil {
		db.pending.data.close()
		db.pending = nil // what Unshipped says stays: it did not reach the store
	}
}

// setPending makes p the file waiting for the store (nil: none) and
// publishes its size for Unshipped, which must not wait for db.mu: an upload
// holds it until the store answers.
func (db *DB) setPending(p *pendingFile) {
	db.pending = p
	if p == nil {
		db.unshippedBytes.Store(0)
		db.unshippedPages.Store(0)
		db.pendingTXID.Store(0)
		return
	}
	db.unshippedBytes.Store(p.data.size)
	db.unshippedPages.Store(int64(p.pages))
	db.pendingTXID.Store(uint64(p.txid))
}

// Captured is the newest TXID captured so far, shipped or still waiting for
// the store, without waiting for an upload in flight: every commit not in
// it ships as a later TXID, the next capture's being Captured()+1.
func (db *DB) Captured() ltx.TXID {
	if t := db.pendingTXID.Load(); t != 0 {
		return ltx.TXID(t)
	}
	return db.Pos().TXID
}

// Unshipped is the size and page count of the captured file waiting for the
// store (zero when everything captured was shipped), without waiting for an
// upload in flight.
func (db *DB) Unshipped() (bytes, pages int64) {
	return db.unshippedBytes.Load(), db.unshippedPages.Load()
}

// CaptureMark places the latest capture in time: every commit that ended
// before Began is in TXID (or an earlier one), every commit that began after
// Drawn is in a later one; one between the two may be in either. The
// server's write path uses it to give a commit its bookmark before the
// upload that carries it is over.
type CaptureMark struct {
	Began, Drawn time.Time
	TXID         ltx.TXID
}

// markCapture records the boundary of the capture about to run (under mu).
func (db *DB) markCapture(began, drawn time.Time) {
	db.capMu.Lock()
	db.capMark = CaptureMark{Began: began, Drawn: drawn, TXID: db.txid + 1}
	db.capMu.Unlock()
}

// LastCapture is the latest capture's mark (zero before the first), without
// waiting for an upload in flight.
func (db *DB) LastCapture() CaptureMark {
	db.capMu.Lock()
	defer db.capMu.Unlock()
	return db.capMark
}
