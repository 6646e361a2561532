package restore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// built describes the database written by build.
type built struct {
	pos      ltx.Pos
	bytes    int64
	pageSize uint32
	commit   uint32
}

// decoded is one planned file after download and decoding. The base (the
// first file, starting at TXID 1) is decoded straight into the image; every
// other file keeps its pages in a slab to be laid over it, newest first.
type decoded struct {
	hdr     ltx.Header
	trailer ltx.Trailer
	pgnos   []uint32
	pages   slab // len(pgnos) pages, in pgnos order
}

// slab holds decoded pages in fixed-size chunks: growing one slice for a
// file of tens of MB would copy it over and over.
type slab struct {
	pageSize int
	chunks   [][]byte
	n        int // pages held
}

// slabChunkPages pages per chunk (1 MiB at 4 KiB pages).
const slabChunkPages = 256

// next returns room for one more page.
func (s *slab) next() []byte {
	i := s.n % slabChunkPages
	if i == 0 {
		s.chunks = append(s.chunks, make([]byte, slabChunkPages*s.pageSize))
	}
	c := s.chunks[len(s.chunks)-1]
	return c[i*s.pageSize : (i+1)*s.pageSize]
}

// page returns page j (0-based, in decode order).
func (s *slab) page(j int) []byte {
	c, i := s.chunks[j/slabChunkPages], j%slabChunkPages
	return c[i*s.pageSize : (i+1)*s.pageSize]
}

// builder shares the image between the download workers.
type builder struct {
	store replica.Store
	files []replica.LTXFile
	f     *os.File
	prog  *progress

	imgOnce  sync.Once
	imgReady chan struct{} // closed once img is allocated (sized by the last file's header)
	img      *image
	imgErr   error
	pageSize uint32
	commit   uint32
	present  bitmap // pages written by the base

	// newestDirect: the newest file, not the base, is decoded straight into
	// the image (when it is the larger of the two, as after a shutdown
	// compaction on a young replica), and the base goes to a slab. Only one
	// file ever writes the image during the downloads, so no page races.
	newestDirect bool
	newestSeen   bitmap
}

// build downloads and decodes files in parallel into the image, lays the
// newer files over the base (newest page wins), verifies the chain and the
// final database checksum, and writes the image to f.
func build(ctx context.Context, store replica.Store, files []replica.LTXFile, f *os.File, opts Options) (built, error) {
	b := &builder{store: store, files: files, f: f, imgReady: make(chan struct{})}
	b.newestDirect = len(files) > 1 && files[len(files)-1].Size > files[0].Size
	b.prog = &progress{fn: opts.Progress}
	for _, x := range files {
		b.prog.total += x.Size
	}

	results, err := b.fetchAll(ctx, opts.parallelism())
	if b.img != nil && err != nil {
		b.img.release()
	}
	if err != nil {
		return built{}, err
	}
	img := b.img
	if err := b.checkChain(results); err != nil {
		img.release()
		return built{}, err
	}
	if err := b.overlay(results); err != nil {
		img.release()
		return built{}, err
	}
	// Writing the image and checksumming it only read the buffer: overlap
	// them. On a checksum mismatch the temp file is discarded by the caller.
	// A mapped image's flush unmaps it, so there the checksum goes first.
	var sum ltx.Checksum
	flushed := make(chan error, 1)
	if img.mapped {
		sum = checksumImage(img.buf, b.pageSize)
		flushed <- img.flush()
	} else {
		go func() {
			// The fsync here is the one Restore needs; it overlaps the checksum.
			err := img.flush()
			if err == nil {
				err = img.f.Sync()
			}
			flushed <- err
		}()
		sum = checksumImage(img.buf, b.pageSize)
	}
	flushErr := <-flushed
	last := results[len(results)-1]
	if !last.hdr.NoChecksum() && sum != last.trailer.PostApplyChecksum {
		return built{}, fmt.Errorf("restore from %s: the rebuilt database's checksum %s differs from %s expected by %s "+
			"(chain %s..%s): the replica's files are inconsistent; restore to an earlier TXID or from another replica",
			store, sum, last.trailer.PostApplyChecksum, files[len(files)-1].Key, files[0].Key, files[len(files)-1].Key)
	} else if last.hdr.NoChecksum() {
		opts.logger().Debug("replica files carry no database checksum (Litestream 0.5's format); verified each file's checksum and the TXID chain",
			"replica", store.String(), "last", files[len(files)-1].Key)
	}
	if flushErr != nil {
		return built{}, fmt.Errorf("restore from %s: %w", store, flushErr)
	}
	b.prog.finish()
	return built{
		pos:      ltx.Pos{TXID: last.hdr.MaxTXID, PostApplyChecksum: sum},
		bytes:    b.prog.done,
		pageSize: b.pageSize,
		commit:   b.commit,
	}, nil
}

// fetchAll runs one worker per file, parallelism at a time. The last file
// starts first (its header sizes the image), then the base, then the rest.
func (b *builder) fetchAll(ctx context.Context, parallelism int) ([]decoded, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := len(b.files)
	order := []int{n - 1}
	if n > 1 {
		order = append(order, 0)
	}
	for i := 1; i < n-1; i++ {
		order = append(order, i)
	}

	results := make([]decoded, n)
	errs := make([]error, n)
	sem := make(chan struct{}, parallelism)
	var wg sync.WaitGroup
	for _, i := range order {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i], errs[i] = b.fetch(ctx, i)
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	// Report the first real error, not the cancellations it caused.
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
		if err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	if first != nil {
		return nil, first
	}
	return results, nil
}

// fetch downloads and decodes file i, verifying its file checksum.
func (b *builder) fetch(ctx context.Context, i int) (decoded, error) {
	file := b.files[i]
	rc, err := b.store.Get(ctx, file.Key)
	if err != nil {
		return decoded{}, fmt.Errorf("download %s from %s: %w", file.Key, b.store, err)
	}
	defer rc.Close()
	dec := ltx.NewDecoder(bufio.NewReaderSize(&countingReader{r: rc, p: b.prog}, 256<<10))
	corrupt := func(what string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("LTX file %s in %s is corrupt or truncated (%s: %v): restore to a TXID before %s, or from another replica",
			file.Key, b.store, what, err, file.MinTXID)
	}
	if err := dec.DecodeHeader(); err != nil {
		return decoded{}, corrupt("header", err)
	}
	hdr := dec.Header()
	if hdr.MinTXID != file.MinTXID || hdr.MaxTXID != file.MaxTXID {
		return decoded{}, fmt.Errorf("LTX file %s in %s holds TXIDs %s..%s, not what its name says; the replica is damaged",
			file.Key, b.store, hdr.MinTXID, hdr.MaxTXID)
	}
	if i == len(b.files)-1 {
		b.allocImage(hdr)
	}

	var d decoded
	switch {
	case i == 0 && !b.newestDirect:
		err = b.decodeBase(ctx, dec, hdr, file)
	case i == len(b.files)-1 && b.newestDirect:
		if err = b.decodeNewest(dec, hdr); err != nil {
			err = corrupt("pages", err)
		}
	default:
		d, err = decodeSlab(dec, hdr)
		if err != nil {
			err = corrupt("pages", err)
		} else if i == 0 {
			err = b.checkSnapshotPages(d.pgnos, hdr, file)
		}
	}
	if err != nil {
		return decoded{}, err
	}
	if err := dec.Close(); err != nil {
		return decoded{}, corrupt("checksum", err)
	}
	d.hdr, d.trailer = hdr, dec.Trailer()
	return d, nil
}

// allocImage sizes the image from the last file's header (its Commit is the
// restored database's size).
func (b *builder) allocImage(hdr ltx.Header) {
	b.imgOnce.Do(func() {
		b.pageSize, b.commit = hdr.PageSize, hdr.Commit
		b.img, b.imgErr = newImage(b.f, int64(hdr.Commit)*int64(hdr.PageSize))
		b.present = newBitmap(hdr.Commit)
		close(b.imgReady)
	})
}

// decodeBase decodes the snapshot at the start of the chain straight into the
// image. Snapshot pages come in order 1..Commit (the lock page skipped), so
// each page's slot is known before it is read.
func (b *builder) decodeBase(ctx context.Context, dec *ltx.Decoder, hdr ltx.Header, file replica.LTXFile) error {
	select {
	case <-b.imgReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	if b.imgErr != nil {
		return fmt.Errorf("restore from %s: %w", b.store, b.imgErr)
	}
	if hdr.PageSize != b.pageSize {
		return fmt.Errorf("LTX file %s in %s has page size %d but the newest file has %d: the replica mixes two databases",
			file.Key, b.store, hdr.PageSize, b.pageSize)
	}
	ps := int64(b.pageSize)
	lock := ltx.LockPgno(b.pageSize)
	scratch := make([]byte, ps)
	var ph ltx.PageHeader
	var last uint32
	for next := uint32(1); ; next++ {
		if next == lock {
			next++
		}
		buf := scratch // pages past the final size are decoded and dropped
		if next <= b.commit {
			buf = b.img.buf[int64(next-1)*ps : int64(next)*ps]
		}
		if err := dec.DecodePage(&ph, buf); err == io.EOF {
			break
		} else if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("LTX file %s in %s is corrupt or truncated (page after %d: %v): restore from another replica",
				file.Key, b.store, last, err)
		}
		if ph.Pgno != next {
			return fmt.Errorf("snapshot %s in %s holds page %d where page %d was expected: the file is damaged",
				file.Key, b.store, ph.Pgno, next)
		}
		if next <= b.commit {
			b.present.set(next)
		}
		last = next
	}
	if want := hdr.Commit; last != want && !(want == lock && last == lock-1) {
		return fmt.Errorf("snapshot %s in %s holds pages 1..%d but its header says the database has %d pages: the file is damaged",
			file.Key, b.store, last, hdr.Commit)
	}
	return nil
}

// decodeNewest decodes the newest file's pages into their image slots; every
// one of them is final (the newest file's Commit is the database's size).
func (b *builder) decodeNewest(dec *ltx.Decoder, hdr ltx.Header) error {
	b.newestSeen = newBitmap(b.commit)
	ps := int64(b.pageSize)
	scratch := make([]byte, ps)
	var ph ltx.PageHeader
	for {
		if err := dec.DecodePage(&ph, scratch); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if ph.Pgno <= b.commit {
			copy(b.img.buf[int64(ph.Pgno-1)*ps:int64(ph.Pgno)*ps], scratch)
			b.newestSeen.set(ph.Pgno)
		}
	}
}

// checkSnapshotPages holds a base decoded into a slab to what decodeBase
// checks while streaming: pages 1..Commit in order, the lock page skipped.
func (b *builder) checkSnapshotPages(pgnos []uint32, hdr ltx.Header, file replica.LTXFile) error {
	lock := ltx.LockPgno(hdr.PageSize)
	want := uint32(1)
	for _, p := range pgnos {
		if want == lock {
			want++
		}
		if p != want {
			return fmt.Errorf("snapshot %s in %s holds page %d where page %d was expected: the file is damaged", file.Key, b.store, p, want)
		}
		want++
	}
	if last := want - 1; last != hdr.Commit && !(hdr.Commit == lock && last == lock-1) {
		return fmt.Errorf("snapshot %s in %s holds pages 1..%d but its header says the database has %d pages: the file is damaged",
			file.Key, b.store, last, hdr.Commit)
	}
	return nil
}

// decodeSlab decodes every page of an incremental file into one slab.
func decodeSlab(dec *ltx.Decoder, hdr ltx.Header) (decoded, error) {
	d := decoded{pages: slab{pageSize: int(hdr.PageSize)}}
	var ph ltx.PageHeader
	for {
		page := d.pages.next()
		if err := dec.DecodePage(&ph, page); err == io.EOF {
			return d, nil
		} else if err != nil {
			return decoded{}, err
		}
		d.pages.n++
		d.pgnos = append(d.pgnos, ph.Pgno)
	}
}

// checkChain verifies that the files form one history: contiguous or
// overlapping TXIDs, one page size, and, where a file starts right after the
// previous one and both carry checksums, matching checksums at the joint.
func (b *builder) checkChain(results []decoded) error {
	if results[0].hdr.MinTXID != 1 {
		return fmt.Errorf("restore from %s: the first file %s does not start at TXID 1", b.store, b.files[0].Key)
	}
	for i := 1; i < len(results); i++ {
		prev, cur := results[i-1], results[i]
		prevKey, key := b.files[i-1].Key, b.files[i].Key
		if cur.hdr.PageSize != b.pageSize {
			return fmt.Errorf("LTX file %s in %s has page size %d but the newest file has %d: the replica mixes two databases",
				key, b.store, cur.hdr.PageSize, b.pageSize)
		}
		if cur.hdr.MinTXID > prev.hdr.MaxTXID+1 || cur.hdr.MaxTXID <= prev.hdr.MaxTXID {
			return fmt.Errorf("restore from %s: %s does not continue %s: TXIDs %s..%s are missing",
				b.store, key, prevKey, prev.hdr.MaxTXID+1, cur.hdr.MinTXID-1)
		}
		joint := cur.hdr.MinTXID == prev.hdr.MaxTXID+1
		if joint && !cur.hdr.NoChecksum() && !prev.hdr.NoChecksum() && cur.hdr.PreApplyChecksum != prev.trailer.PostApplyChecksum {
			return fmt.Errorf("restore from %s: checksum chain broken: %s ends at database checksum %s but %s starts from %s; "+
				"they belong to different histories (a forked or mixed replica): restore to TXID %d or from another replica",
				b.store, prevKey, prev.trailer.PostApplyChecksum, key, cur.hdr.PreApplyChecksum, prev.hdr.MaxTXID)
		}
	}
	return nil
}

// overlay writes the incremental files' pages over the base, newest file
// first, each page only the first time it is seen. A page is only taken from
// a file if no newer file shrank the database below it (a shrink followed by
// growth must rewrite the page). Every page 1..commit but the lock page must
// end up written.
func (b *builder) overlay(results []decoded) error {
	ps := int64(b.pageSize)
	seen := newBitmap(b.commit)
	limit := b.commit
	newest, oldest := len(results)-1, 1
	if b.newestDirect {
		// Already in the image; the base is a slab like the others.
		seen, newest, oldest = b.newestSeen, len(results)-2, 0
		limit = min(limit, results[len(results)-1].hdr.Commit)
	}
	for k := newest; k >= oldest; k-- {
		d := results[k]
		for j, pgno := range d.pgnos {
			if pgno > limit || seen.get(pgno) {
				continue
			}
			seen.set(pgno)
			copy(b.img.buf[int64(pgno-1)*ps:int64(pgno)*ps], d.pages.page(j))
		}
		limit = min(limit, d.hdr.Commit)
	}
	lock := ltx.LockPgno(b.pageSize)
	for pgno := uint32(1); pgno <= b.commit; pgno++ {
		if pgno == lock || seen.get(pgno) || (!b.newestDirect && pgno <= limit && b.present.get(pgno)) {
			continue
		}
		return fmt.Errorf("restore from %s: no file in the chain %s..%s holds page %d of the database's %d pages; "+
			"the replica's files are incomplete: restore from another replica",
			b.store, b.files[0].Key, b.files[len(b.files)-1].Key, pgno, b.commit)
	}
	return nil
}

// bitmap is one bit per page number.
type bitmap []uint64

func newBitmap(n uint32) bitmap       { return make(bitmap, n/64+1) }
func (m bitmap) set(pgno uint32)      { m[pgno/64] |= 1 << (pgno % 64) }
func (m bitmap) get(pgno uint32) bool { return m[pgno/64]&(1<<(pgno%64)) != 0 }
