package restore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/pierrec/lz4/v4"
	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// Pages reads one state of a replica page by page, without restoring it:
// the plan a restore would follow, and from the planned files' page indexes
// where the newest version of every page lies (file, offset, size). A
// cold-opened database answers its first queries through it while the full
// restore runs.
//
// Pages read this way are decoded (LZ4) but not verified against the files'
// checksums, which cover whole files: the restore that runs beside it
// verifies everything.
type Pages struct {
	store    replica.Store
	files    []replica.LTXFile
	whole    [][]byte // files small enough that reading their index read them whole
	pageSize uint32
	commit   uint32
	txid     ltx.TXID
	loc      []pageLoc // loc[pgno]; index 0 unused

	// head: the base snapshot's first bytes, read beside the page indexes
	// (SQLite reads page 1 and the schema's first pages before anything)
	// until Warm hands them over.
	headMu sync.Mutex
	head   []byte

	requests, bytes atomic.Int64
}

// pageLoc is where a page's newest version lies: file is an index into
// Pages.files, or -1 (no file holds the page).
type pageLoc struct {
	off  int64
	size uint32
	file int32
}

// wholeBudget bounds the small files kept in memory whole.
const wholeBudget = 8 << 20

// indexReadsPerDownload is how many page-index reads run at once per
// download that Options.Parallelism allows.
const indexReadsPerDownload = 4

// OpenPages plans the state opts names (as Restore would), reads the
// planned files' page indexes and the newest file's header, in parallel,
// and returns the state's page map. Its cost: the LISTs of a plan, and one
// or two range reads per planned file; with head > 0 also the first head
// bytes of the base snapshot, in parallel (see Warm). An empty replica
// matches ErrNoReplica.
func OpenPages(ctx context.Context, store replica.Store, opts Options, head int64) (*Pages, error) {
	plan, err := planFiles(ctx, store, opts, true)
	if err != nil {
		return nil, err
	}
	return openPlanned(ctx, store, opts, plan, head)
}

// openPlanned is OpenPages once the plan is made.
func openPlanned(ctx context.Context, store replica.Store, opts Options, plan []replica.LTXFile, head int64) (*Pages, error) {
	n := len(plan)
	p := &Pages{store: store, files: plan, whole: make([][]byte, n)}
	idx := make([][]indexEntry, n)
	var hdr ltx.Header
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	// Index reads are small and each costs a round trip (after a crash,
	// one per transaction the previous writer left unmerged): more of them
	// in flight than bulk downloads.
	sem := make(chan struct{}, indexReadsPerDownload*opts.parallelism())
	for i := range plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			idx[i], p.whole[i], errs[i] = p.readIndex(ctx, plan[i])
		}()
	}
	if base := plan[0]; base.Size > indexTail && head > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Best effort: pages not read here are fetched when asked for.
			p.head, _ = p.get(ctx, base, 0, min(head, base.Size))
		}()
	}
	wg.Add(1)
	go func() { // the newest file's header: the state's size and page size
		defer wg.Done()
		b, err := p.get(ctx, plan[n-1], 0, ltx.HeaderSize)
		if err == nil {
			if err = hdr.UnmarshalBinary(b); err == nil {
				err = hdr.Validate()
			}
		}
		if err != nil {
			errs[n] = fmt.Errorf("read header of %s from %s: %w", plan[n-1].Key, store, err)
		}
	}()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	p.pageSize, p.commit, p.txid = hdr.PageSize, hdr.Commit, hdr.MaxTXID
	p.loc = make([]pageLoc, int(p.commit)+1)
	for i := range p.loc {
		p.loc[i].file = -1
	}
	for k, entries := range idx { // oldest first: a newer file's entry replaces an older one's
		for _, e := range entries {
			if e.pgno <= p.commit {
				p.loc[e.pgno] = pageLoc{off: e.off, size: e.size, file: int32(k)}
			}
		}
	}
	for k, w := range p.whole {
		// Small files come whole with their index: check them as a restore
		// does before serving any of their pages.
		if w != nil {
			if err := verifyWhole(w); err != nil {
				return nil, fmt.Errorf("LTX file %s in %s is corrupt or truncated (%v): %w", plan[k].Key, store, err, errDamagedReplica)
			}
		}
	}
	var kept int64
	for k, w := range p.whole {
		if kept += int64(len(w)); kept > wholeBudget {
			p.whole[k] = nil
		}
	}
	lock := ltx.LockPgno(p.pageSize)
	for pgno := uint32(1); pgno <= p.commit; pgno++ {
		if p.loc[pgno].file < 0 && pgno != lock {
			return nil, fmt.Errorf("plan from %s (%s..%s): no file holds page %d of %d: %w",
				store, plan[0].Key, plan[n-1].Key, pgno, p.commit, errDamagedReplica)
		}
	}
	return p, nil
}

// PageSize is the database's page size in bytes.
func (p *Pages) PageSize() uint32 { return p.pageSize }

// Size is the database's size in bytes.
func (p *Pages) Size() int64 { return int64(p.commit) * int64(p.pageSize) }

// TXID is the state's TXID.
func (p *Pages) TXID() ltx.TXID { return p.txid }

// Files is how many files the plan holds.
func (p *Pages) Files() int { return len(p.files) }

// Requests and Bytes count the store's range reads and the bytes they
// returned, index reads included.
func (p *Pages) Requests() int64 { return p.requests.Load() }
func (p *Pages) Bytes() int64    { return p.bytes.Load() }

// Fetch reads the newest version of page pgno and, in the same range read,
// the pages stored after it in the same file up to ahead bytes of that file
// (read-ahead: SQLite's B-tree pages written together lie together), and
// calls fn with each page read that is its page's newest version, pgno's
// first. fn must not keep page. The lock page holds no data and is not
// read: fn gets zeros.
func (p *Pages) Fetch(ctx context.Context, pgno uint32, ahead int64, fn func(pgno uint32, page []byte)) error {
	if pgno == 0 || pgno > p.commit {
		return fmt.Errorf("page %d is outside the database (%d pages)", pgno, p.commit)
	}
	l := p.loc[pgno]
	if l.file < 0 { // the lock page
		fn(pgno, make([]byte, p.pageSize))
		return nil
	}
	f := p.files[l.file]
	n := max(int64(l.size), ahead)
	n = min(n, f.Size-l.off)
	var buf []byte
	if w := p.whole[l.file]; w != nil {
		buf = w[l.off : l.off+n]
	} else {
		var err error
		if buf, err = p.get(ctx, f, l.off, n); err != nil {
			return fmt.Errorf("read page %d from %s in %s: %w", pgno, f.Key, p.store, err)
		}
	}
	got, err := p.decodeRun(buf, l.file, l.off, pgno, fn)
	if err != nil {
		return err
	}
	if !got {
		return fmt.Errorf("page %d not found at offset %d of %s (%s): %w", pgno, l.off, f.Key, p.store, errDamagedReplica)
	}
	return nil
}

// Warm calls fn with the pages read with the page indexes (the start of the
// base snapshot, see OpenPages' head) that are their pages' newest
// versions, once; it reads nothing.
func (p *Pages) Warm(fn func(pgno uint32, page []byte)) {
	p.headMu.Lock()
	head := p.head
	p.head = nil
	p.headMu.Unlock()
	if len(head) > ltx.HeaderSize {
		_, _ = p.decodeRun(head[ltx.HeaderSize:], 0, ltx.HeaderSize, 0, fn)
	}
}

// decodeRun decodes the page frames in buf, which starts at offset off of
// file k, and calls fn with each one that is its page's newest version; it
// stops at the first frame cut off by buf's end. want (0: none) must be the
// first frame: got says it was decoded, and an error is its failure.
func (p *Pages) decodeRun(buf []byte, k int32, off int64, want uint32, fn func(pgno uint32, page []byte)) (got bool, err error) {
	f := p.files[k]
	page := make([]byte, p.pageSize)
	for pos := int64(0); pos+ltx.PageHeaderSize <= int64(len(buf)); {
		var ph ltx.PageHeader
		if err := ph.UnmarshalBinary(buf[pos : pos+ltx.PageHeaderSize]); err != nil || ph.IsZero() {
			break
		}
		mine := ph.Pgno <= p.commit && p.loc[ph.Pgno].file == k && p.loc[ph.Pgno].off == off+pos
		var next int64
		if ph.Flags&ltx.PageHeaderFlagSize == 0 { // legacy: an LZ4 frame, its length only in the index
			if !mine {
				break
			}
			next = pos + int64(p.loc[ph.Pgno].size)
			if next > int64(len(buf)) {
				break
			}
			if _, err := io.ReadFull(lz4.NewReader(bytes.NewReader(buf[pos+ltx.PageHeaderSize:next])), page); err != nil {
				if ph.Pgno == want {
					return false, fmt.Errorf("page %d in %s (%s): decompress: %w", want, f.Key, p.store, err)
				}
				break
			}
		} else {
			if pos+ltx.PageHeaderSize+4 > int64(len(buf)) {
				break
			}
			size := int64(binary.BigEndian.Uint32(buf[pos+ltx.PageHeaderSize:]))
			next = pos + ltx.PageHeaderSize + 4 + size
			if next > int64(len(buf)) {
				break
			}
			if mine {
				m, err := lz4.UncompressBlock(buf[pos+ltx.PageHeaderSize+4:next], page)
				if err != nil || m != len(page) {
					if ph.Pgno == want {
						return false, fmt.Errorf("page %d in %s (%s): decompressed %d bytes of %d: %v: %w", want, f.Key, p.store, m, len(page), err, errDamagedReplica)
					}
					break
				}
			}
		}
		if mine {
			got = got || ph.Pgno == want
			fn(ph.Pgno, page)
		}
		if want != 0 && !got { // the asked-for page is the range's first
			break
		}
		pos = next
	}
	return got, nil
}

// get is one counted range read.
func (p *Pages) get(ctx context.Context, f replica.LTXFile, off, n int64) ([]byte, error) {
	rc, err := p.store.GetRange(ctx, f.Key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	p.requests.Add(1)
	b := make([]byte, n)
	m, err := io.ReadFull(rc, b)
	p.bytes.Add(int64(m))
	if err != nil {
		return nil, fmt.Errorf("bytes %d..%d of %d: %w", off, off+n, f.Size, err)
	}
	return b, nil
}

type indexEntry struct {
	pgno uint32
	size uint32
	off  int64
}

// readIndex reads file's page index (as readPageNumbers does) with each
// page's offset and size; a file no larger than indexTail comes back whole.
func (p *Pages) readIndex(ctx context.Context, file replica.LTXFile) ([]indexEntry, []byte, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("LTX file %s in %s has a damaged page index (%s): %w",
			file.Key, p.store, fmt.Sprintf(format, args...), errDamagedReplica)
	}
	const foot = 8 + ltx.TrailerSize
	if file.Size < ltx.HeaderSize+foot {
		return nil, nil, bad("file is %d bytes", file.Size)
	}
	// A page index takes about 1% of a file whose pages compress to a few
	// hundred bytes or more: reading that much of the end at once saves the
	// second round trip for a large file's index (the first answer waits on it).
	n0 := min(file.Size, max(indexTail, min(file.Size/100, 8<<20)))
	tail, err := p.get(ctx, file, file.Size-n0, n0)
	if err != nil {
		return nil, nil, fmt.Errorf("read page index of %s from %s: %w", file.Key, p.store, err)
	}
	var whole []byte
	if int64(len(tail)) == file.Size {
		whole = tail
	}
	n := binary.BigEndian.Uint64(tail[len(tail)-foot:])
	if n == 0 || n > uint64(file.Size-ltx.HeaderSize-foot) {
		return nil, nil, bad("index size %d", n)
	}
	var idx []byte
	if int(n)+foot <= len(tail) {
		idx = tail[len(tail)-foot-int(n) : len(tail)-foot]
	} else if idx, err = p.get(ctx, file, file.Size-foot-int64(n), int64(n)); err != nil {
		return nil, nil, fmt.Errorf("read page index of %s from %s: %w", file.Key, p.store, err)
	}
	var out []indexEntry
	for len(idx) > 0 {
		pgno, k := binary.Uvarint(idx)
		if k <= 0 {
			return nil, nil, bad("page number")
		}
		idx = idx[k:]
		if pgno == 0 {
			return out, whole, nil
		}
		off, k1 := binary.Uvarint(idx)
		if k1 <= 0 {
			return nil, nil, bad("offset of page %d", pgno)
		}
		size, k2 := binary.Uvarint(idx[k1:])
		if k2 <= 0 {
			return nil, nil, bad("size of page %d", pgno)
		}
		idx = idx[k1+k2:]
		if pgno > 1<<32-1 || size > 1<<31 || int64(off)+int64(size) > file.Size {
			return nil, nil, bad("entry of page %d: offset %d size %d", pgno, off, size)
		}
		out = append(out, indexEntry{pgno: uint32(pgno), size: uint32(size), off: int64(off)})
	}
	return nil, nil, bad("no end marker")
}

// verifyWhole decodes an LTX file held in memory and checks its checksums.
func verifyWhole(b []byte) error {
	br := bufio.NewReader(bytes.NewReader(b))
	var src pageSource
	bd, err := newBlockDecoder(br)
	switch {
	case errors.Is(err, errLegacyFormat):
		src, err = newLegacyDecoder(io.MultiReader(bytes.NewReader(bd.raw), br))
	case err == nil:
		src = bd
	}
	if err != nil {
		return err
	}
	page := make([]byte, src.header().PageSize)
	for {
		_, _, err := src.next(func(uint32) ([]byte, error) { return page, nil })
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	_, err = src.finish()
	return err
}
