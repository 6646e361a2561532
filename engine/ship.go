package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// pendingFile is an encoded LTX file captured but not yet accepted by the
// store. Keeping the bytes (in a spool: memory up to a bound, then a temporary
// file) means a failed upload is retried with exactly the same content and
// TXID, and that captured frames never need the WAL again.
type pendingFile struct {
	txid  ltx.TXID
	data  *spool
	post  ltx.Pos
	pages int
	// uncertain is set when an attempt failed in a way that may still have
	// stored the object (a timeout, a cancelled request, a lost response).
	uncertain bool
}

// pageSource yields the pages of one LTX file in ascending pgno order.
type pageSource func(yield func(pgno uint32, data []byte) error) error

// encodeLTX writes one LTX file holding TXID txid to w, page by page.
// No rolling checksums go in the file (see state.go): Litestream 0.5.17's
// restore refuses files that carry them, so the caller keeps them.
func encodeLTX(w io.Writer, pageSize, commit uint32, txid ltx.TXID, pages pageSource) (int, error) {
	enc, err := ltx.NewEncoder(w)
	if err != nil {
		return 0, err
	}
	hdr := ltx.Header{
		Version:   ltx.Version,
		Flags:     ltx.HeaderFlagNoChecksum,
		PageSize:  pageSize,
		Commit:    commit,
		MinTXID:   txid,
		MaxTXID:   txid,
		Timestamp: time.Now().UnixMilli(),
	}
	if err := enc.EncodeHeader(hdr); err != nil {
		return 0, fmt.Errorf("encode LTX header of TXID %s: %w", txid, err)
	}
	n := 0
	err = pages(func(pgno uint32, data []byte) error {
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

// upload ships the pending file, if any. On a taken key the DB is fenced for
// good; on any other error the file stays pending for the next attempt.
func (db *DB) upload(ctx context.Context) error {
	p := db.pending
	if p == nil {
		return nil
	}
	f, err := putPending(ctx, db.store, p)
	if errors.Is(err, replica.ErrExists) && p.uncertain && db.storedIsOurs(ctx, p) {
		// An earlier attempt did land; only its answer was lost.
		err = nil
		f = replica.LTXFile{Level: 0, MinTXID: p.txid, MaxTXID: p.txid, Size: p.data.size, Key: replica.LTXKey(0, p.txid, p.txid)}
	}
	if errors.Is(err, replica.ErrExists) {
		db.fenced = fmt.Errorf("%w: database %s, TXID %s: %v; stop this writer and restore from the replica before writing again",
			ErrFenced, db.path, p.txid, err)
		db.dropPending()
		db.log.Error("replica fenced: another writer shipped the same TXID; this database stops shipping",
			"replica", db.store.String(), "txid", p.txid.String())
		return db.fenced
	} else if err != nil {
		p.uncertain = true
		db.log.Warn("upload failed; will retry the same TXID", "txid", p.txid.String(), "err", err)
		return fmt.Errorf("ship TXID %s of %s (will retry): %w", p.txid, db.path, err)
	}
	db.dropPending()
	db.setPos(p.post)
	if err := db.posFile.record(db.path, db.store.String(), p.post); err != nil {
		db.log.Warn("cannot record the shipped position; a restart will re-upload every page", "err", err)
	}
	db.log.Debug("shipped", "txid", p.txid.String(), "pages", p.pages, "bytes", p.data.size)
	if db.opts.OnShip != nil {
		db.opts.OnShip(f)
	}
	return nil
}

// storedIsOurs reports whether the object at p's key holds exactly p's bytes.
// The encoded file carries its own timestamp and checksums, so another
// writer's file for the same TXID cannot compare equal by accident.
func (db *DB) storedIsOurs(ctx context.Context, p *pendingFile) bool {
	rc, err := db.store.Get(ctx, replica.LTXKey(0, p.txid, p.txid))
	if err != nil {
		return false
	}
	defer rc.Close()
	return sameBytes(rc, p.data.reader())
}

// sameBytes compares two streams in bounded memory.
func sameBytes(a, b io.Reader) bool {
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		aEnd := ea == io.EOF || ea == io.ErrUnexpectedEOF
		bEnd := eb == io.EOF || eb == io.ErrUnexpectedEOF
		if (ea != nil && !aEnd) || (eb != nil && !bEnd) || aEnd != bEnd {
			return false
		}
		if aEnd {
			return true
		}
	}
}

// putPending uploads p with a conditional create, streaming it from its spool.
// A taken key is an error wrapping replica.ErrExists: another writer owns
// that TXID.
func putPending(ctx context.Context, s replica.Store, p *pendingFile) (replica.LTXFile, error) {
	key := replica.LTXKey(0, p.txid, p.txid)
	if _, err := s.PutIfAbsent(ctx, key, p.data.reader(), p.data.size); errors.Is(err, replica.ErrExists) {
		return replica.LTXFile{}, fmt.Errorf("%s in %s is already taken by another writer: %w", key, s, err)
	} else if err != nil {
		return replica.LTXFile{}, fmt.Errorf("upload %s to %s: %w", key, s, err)
	}
	return replica.LTXFile{Level: 0, MinTXID: p.txid, MaxTXID: p.txid, Size: p.data.size, Key: key}, nil
}

// dropPending forgets the pending file and releases what holds its bytes.
func (db *DB) dropPending() {
	if db.pending != nil {
		db.pending.data.close()
		db.pending = nil
	}
}
