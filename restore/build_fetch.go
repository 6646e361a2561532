package restore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// fetch streams file k, writes the pages it owns and verifies its checksum.
func (b *builder) fetch(ctx context.Context, k int) error {
	if k == b.lead {
		// However the lead ends, no one waits on it any more: after a
		// success every page it holds is on disk (this runs after its
		// writer closed), after a failure the restore is failing anyway.
		defer b.advanceLead(math.MaxUint32)
	}
	rc, err := b.openBody(ctx, k)
	if err != nil {
		return err
	}
	defer rc.Close()
	ra := newReadAhead(&countingReader{r: rc, p: b.prog})
	defer ra.Close()
	ff := &fileFetch{b: b, ctx: ctx, k: k, lead: k == b.lead, file: b.files[k]}
	if err := ff.open(bufio.NewReaderSize(ra, 64<<10)); err != nil {
		return err
	}
	if err := ff.startWriter(); err != nil {
		return err
	}
	defer ff.w.close() // on early returns; a second close is a no-op
	if err := ff.copyPages(); err != nil {
		return err
	}
	if err := ff.w.close(); err != nil {
		return err
	}
	if err := ff.checkEnd(); err != nil {
		return err
	}
	trailer, err := ff.src.finish()
	if err != nil {
		return ff.corrupt("checksum", err)
	}
	b.hdrs[k], b.trailers[k], b.sums[k] = ff.hdr, trailer, ff.sum&^ltx.ChecksumFlag
	return nil
}

// openBody opens file k's bytes: from memory when reading its page index read
// it whole, else from the store.
func (b *builder) openBody(ctx context.Context, k int) (io.ReadCloser, error) {
	file := b.files[k]
	if k != 0 && k != b.lead && file.Size <= indexTail {
		// Read whole with its page index, unless the budget was spent.
		if err := b.waitReady(ctx); err != nil {
			return nil, err
		}
	}
	if whole := b.whole[k]; whole != nil {
		b.whole[k] = nil // decoded once, then left to the collector
		return io.NopCloser(bytes.NewReader(whole)), nil
	}
	rc, err := b.store.Get(ctx, file.Key)
	if err != nil {
		return nil, fmt.Errorf("download %s from %s: %w", file.Key, b.store, err)
	}
	return rc, nil
}

// fileFetch is one file's fetch: its decoder, the writer its pages go to,
// and what it has decoded and written so far. Only its own goroutine uses it.
type fileFetch struct {
	b    *builder
	ctx  context.Context
	k    int
	lead bool // k is the lead file
	file replica.LTXFile

	src     pageSource
	hdr     ltx.Header
	lock    uint32 // the lock page at the file's page size
	w       *runWriter
	scratch []byte // where the pages this file does not write are decoded

	write bool         // the page being decoded goes to w (set by dst)
	prev  uint32       // the last page decoded
	sum   ltx.Checksum // XOR of the checksums of the pages written (the lead's go to leadSums)
}

// corrupt is the error for a file that cannot be decoded, unless the
// restore was cancelled.
func (ff *fileFetch) corrupt(what string, err error) error {
	if ff.ctx.Err() != nil {
		return ff.ctx.Err()
	}
	return fmt.Errorf("LTX file %s in %s is corrupt or truncated (%s: %v): restore to a TXID before %s, or from another replica",
		ff.file.Key, ff.b.store, what, err, ff.file.MinTXID)
}

// open reads the file's header and checks that it holds the TXIDs its name says.
func (ff *fileFetch) open(br *bufio.Reader) error {
	bd, err := newBlockDecoder(br)
	switch {
	case errors.Is(err, errLegacyFormat):
		ff.src, err = newLegacyDecoder(io.MultiReader(bytes.NewReader(bd.raw), br))
	case err == nil:
		ff.src = bd
	}
	if err != nil {
		return ff.corrupt("header", err)
	}
	ff.hdr = ff.src.header()
	if ff.hdr.MinTXID != ff.file.MinTXID || ff.hdr.MaxTXID != ff.file.MaxTXID {
		return fmt.Errorf("LTX file %s in %s holds TXIDs %s..%s, not what its name says; the replica is damaged",
			ff.file.Key, ff.b.store, ff.hdr.MinTXID, ff.hdr.MaxTXID)
	}
	ff.lock = ltx.LockPgno(ff.hdr.PageSize)
	ff.scratch = make([]byte, ff.hdr.PageSize)
	return nil
}

func (ff *fileFetch) checkPageSize() error {
	if ff.hdr.PageSize != ff.b.pageSize {
		return fmt.Errorf("LTX file %s in %s has page size %d but the newest file has %d: the replica mixes two databases",
			ff.file.Key, ff.b.store, ff.hdr.PageSize, ff.b.pageSize)
	}
	return nil
}

// startWriter opens the file's writer. The lead's starts at once, the
// others' once the page owners are known.
func (ff *fileFetch) startWriter() error {
	b, pageSize := ff.b, ff.hdr.PageSize
	if ff.lead {
		// The lead does not wait for the newest file's header: it checks
		// the page size once its pages are written.
		b.leadSums = make([]ltx.Checksum, int(ff.hdr.Commit)+1)
		b.leadWrote = newBitmap(ff.hdr.Commit)
		// One writer, so runs land in page order and the mark is exact.
		ff.w = newRunWriter(b.f, pageSize, 1, func(end int64) { b.advanceLead(uint32(end / int64(pageSize))) })
		return nil
	}
	if err := b.waitReady(ff.ctx); err != nil {
		return err
	}
	if err := ff.checkPageSize(); err != nil {
		return err
	}
	ff.w = newRunWriter(b.f, pageSize, runWriterWorkers, nil)
	return nil
}

// dst is where page pgno is decoded: a page to write straight into the
// write buffer, the others into scratch (the file's checksum covers them
// too). A later file's version of a page the lead holds waits for the lead
// to pass it, so that it lands last.
func (ff *fileFetch) dst(pgno uint32) ([]byte, error) {
	b := ff.b
	ff.write = false
	switch {
	case ff.lead:
		if pgno > ff.hdr.Commit {
			return ff.scratch, nil
		}
	case pgno > b.commit:
		return ff.scratch, nil
	case b.owner[pgno] != int32(ff.k):
		return ff.scratch, nil
	case ff.k > b.lead && b.leadHolds(pgno):
		if err := b.waitLead(ff.ctx, pgno); err != nil {
			return nil, err
		}
	}
	ff.write = true
	return ff.w.slot(pgno), nil
}

// copyPages decodes every page of the file, writing those it owns.
func (ff *fileFetch) copyPages() error {
	b := ff.b
	dst := ff.dst // one method value, not one per page
	for {
		pgno, pageSum, err := ff.src.next(dst)
		if err == io.EOF {
			return nil
		} else if err != nil {
			return ff.corrupt(fmt.Sprintf("page after %d", ff.prev), err)
		}
		if err := ff.checkOrder(pgno); err != nil {
			return err
		}
		ff.prev = pgno
		if !ff.write {
			continue
		}
		if ff.lead {
			b.leadSums[pgno] = pageSum
			b.leadWrote.setAtomic(pgno)
			continue
		}
		ff.sum ^= pageSum
		b.written.setAtomic(pgno)
	}
}

// checkOrder checks that a snapshot holds pages 1..Commit in order (the lock
// page skipped) and that the lead's pages ascend, as LTX requires: the lead's
// mark assumes it.
func (ff *fileFetch) checkOrder(pgno uint32) error {
	if ff.k == 0 {
		want := ff.prev + 1
		if want == ff.lock {
			want++
		}
		if pgno != want {
			return fmt.Errorf("snapshot %s in %s holds page %d where page %d was expected: the file is damaged",
				ff.file.Key, ff.b.store, pgno, want)
		}
	}
	if ff.lead && pgno <= ff.prev {
		return ff.corrupt("page order", fmt.Errorf("page %d after page %d", pgno, ff.prev))
	}
	return nil
}

// checkEnd runs once every page is written: the lead's page size against
// the newest file's (known by then, or the restore failed), and a snapshot's
// last page against its size.
func (ff *fileFetch) checkEnd() error {
	if ff.lead {
		if err := ff.b.waitSized(ff.ctx); err != nil {
			return err
		}
		if err := ff.checkPageSize(); err != nil {
			return err
		}
	}
	if ff.k == 0 {
		if want := ff.hdr.Commit; ff.prev != want && !(want == ff.lock && ff.prev == ff.lock-1) {
			return fmt.Errorf("snapshot %s in %s holds pages 1..%d but its header says the database has %d pages: the file is damaged",
				ff.file.Key, ff.b.store, ff.prev, ff.hdr.Commit)
		}
	}
	return nil
}
