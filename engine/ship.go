package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// pendingFile is an encoded LTX file captured but not yet accepted by the
// store. Keeping the bytes means a failed upload is retried with exactly the
// same content and TXID, and that captured frames never need the WAL again.
type pendingFile struct {
	txid  ltx.TXID
	data  []byte
	post  ltx.Pos
	pages int
	// uncertain is set when an attempt failed in a way that may still have
	// stored the object (a timeout, a cancelled request, a lost response).
	uncertain bool
}

// pageSource yields the pages of one LTX file in ascending pgno order.
type pageSource func(yield func(pgno uint32, data []byte) error) error

// encodeLTX builds one LTX file holding TXID txid.
func encodeLTX(pageSize, commit uint32, txid ltx.TXID, pre, post ltx.Checksum, pages pageSource) ([]byte, int, error) {
	var buf bytes.Buffer
	enc, err := ltx.NewEncoder(&buf)
	if err != nil {
		return nil, 0, err
	}
	// No rolling checksums in the file (see state.go): Litestream 0.5.17's
	// restore refuses files that carry them. pre and post stay in memory.
	_ = pre
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
		return nil, 0, fmt.Errorf("encode LTX header of TXID %s: %w", txid, err)
	}
	n := 0
	err = pages(func(pgno uint32, data []byte) error {
		n++
		return enc.EncodePage(ltx.PageHeader{Pgno: pgno}, data)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("encode LTX pages of TXID %s: %w", txid, err)
	}
	_ = post
	if err := enc.Close(); err != nil {
		return nil, 0, fmt.Errorf("encode LTX file of TXID %s: %w", txid, err)
	}
	return buf.Bytes(), n, nil
}

// mapSource yields the pages of a map in ascending order.
func mapSource(pages map[uint32][]byte) pageSource {
	return func(yield func(uint32, []byte) error) error {
		pgnos := make([]uint32, 0, len(pages))
		for p := range pages {
			pgnos = append(pgnos, p)
		}
		sort.Slice(pgnos, func(i, j int) bool { return pgnos[i] < pgnos[j] })
		for _, p := range pgnos {
			if err := yield(p, pages[p]); err != nil {
				return err
			}
		}
		return nil
	}
}

// upload ships the pending file, if any. On a taken key the DB is fenced for
// good; on any other error the file stays pending for the next attempt.
func (db *DB) upload(ctx context.Context) error {
	p := db.pending
	if p == nil {
		return nil
	}
	f, err := replica.PutLTX(ctx, db.store, 0, p.txid, p.txid, p.data)
	if errors.Is(err, replica.ErrExists) && p.uncertain && db.storedIsOurs(ctx, p) {
		// An earlier attempt did land; only its answer was lost.
		err = nil
		f = replica.LTXFile{Level: 0, MinTXID: p.txid, MaxTXID: p.txid, Size: int64(len(p.data)), Key: replica.LTXKey(0, p.txid, p.txid)}
	}
	if errors.Is(err, replica.ErrExists) {
		db.fenced = fmt.Errorf("%w: database %s, TXID %s: %v; stop this writer and restore from the replica before writing again",
			ErrFenced, db.path, p.txid, err)
		db.pending = nil
		db.log.Error("replica fenced: another writer shipped the same TXID; this database stops shipping",
			"replica", db.store.String(), "txid", p.txid.String())
		return db.fenced
	} else if err != nil {
		p.uncertain = true
		db.log.Warn("upload failed; will retry the same TXID", "txid", p.txid.String(), "err", err)
		return fmt.Errorf("ship TXID %s of %s (will retry): %w", p.txid, db.path, err)
	}
	db.pending = nil
	db.setPos(p.post)
	if err := db.posFile.record(db.path, db.store.String(), p.post); err != nil {
		db.log.Warn("cannot record the shipped position; a restart will re-upload every page", "err", err)
	}
	db.log.Debug("shipped", "txid", p.txid.String(), "pages", p.pages, "bytes", len(p.data))
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
	got, err := io.ReadAll(io.LimitReader(rc, int64(len(p.data))+1))
	return err == nil && bytes.Equal(got, p.data)
}
