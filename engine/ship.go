package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	hdr := ltx.Header{
		Version:          ltx.Version,
		PageSize:         pageSize,
		Commit:           commit,
		MinTXID:          txid,
		MaxTXID:          txid,
		Timestamp:        time.Now().UnixMilli(),
		PreApplyChecksum: pre,
	}
	if txid == 1 {
		hdr.PreApplyChecksum = 0 // a snapshot has no predecessor
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
	enc.SetPostApplyChecksum(post)
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
	if errors.Is(err, replica.ErrExists) {
		db.fenced = fmt.Errorf("%w: database %s, TXID %s: %v; stop this writer and restore from the replica before writing again",
			ErrFenced, db.path, p.txid, err)
		db.pending = nil
		db.log.Error("replica fenced: another writer shipped the same TXID; this database stops shipping",
			"db", db.path, "replica", db.store.String(), "txid", p.txid.String())
		return db.fenced
	} else if err != nil {
		db.log.Warn("upload failed; will retry the same TXID", "db", db.path, "txid", p.txid.String(), "err", err)
		return fmt.Errorf("ship TXID %s of %s (will retry): %w", p.txid, db.path, err)
	}
	db.pending = nil
	db.pos = p.post
	db.log.Debug("shipped", "db", db.path, "txid", p.txid.String(), "pages", p.pages, "bytes", len(p.data))
	if db.opts.OnShip != nil {
		db.opts.OnShip(f)
	}
	return nil
}
