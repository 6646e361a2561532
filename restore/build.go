package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

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

// builder writes the planned files' pages straight to their offsets in the
// output file. Which file supplies each page (the newest one holding it) is
// decided from the page indexes, so every file can be streamed in parallel and
// no page is ever held in memory beyond a small write buffer: memory does not
// grow with the database. The lead file (the largest, usually the bulk of
// the bytes) waits for nothing: it writes every page it holds as its bytes
// arrive (pages past the database's final size are cut off at the end), and
// a later file writes a page the lead also holds only once the lead has
// passed that offset, so the newer version lands last. Files older than the
// lead own no page it holds.
type builder struct {
	store replica.Store
	files []replica.LTXFile
	f     *os.File
	prog  *progress
	log   *slog.Logger

	sized     chan struct{} // closed once commit and pageSize are known (or prepare failed)
	sizedOnce sync.Once
	ready     chan struct{} // closed once owner is known too
	readyErr  error
	pageSize  uint32
	commit    uint32  // the restored database's size in pages (the newest file's Commit)
	owner     []int32 // owner[pgno]: the newest file holding pgno; 0 (the base) where no later file has it
	written   bitmap  // pages written by their owners other than the lead, set atomically

	// The lead file and its progress: every page it holds up to leadMark is on disk.
	lead      int
	leadMark  atomic.Uint32
	leadMu    sync.Mutex
	leadCond  *sync.Cond
	leadSums  []ltx.Checksum // leadSums[pgno]: the checksum of the lead's version; sized by the lead's own header
	leadWrote bitmap         // pages the lead wrote
	leadHas   bitmap         // pages in the lead's page index; nil when the lead is the base (it holds every page)

	// whole[k]: file k's bytes, when reading its page index read it all
	// (small files, within wholeFileBudget): it is decoded from memory.
	whole       [][]byte
	cachedBytes atomic.Int64

	hdrs     []ltx.Header
	trailers []ltx.Trailer
	sums     []ltx.Checksum // per file: XOR of the checksums of the pages it wrote
}

// build streams files into f, verifies every file's checksum, the TXID chain,
// that every page was written and the final database checksum. f is not
// fsynced.
func build(ctx context.Context, store replica.Store, files []replica.LTXFile, f *os.File, opts Options) (built, error) {
	n := len(files)
	b := &builder{store: store, files: files, f: f, sized: make(chan struct{}), ready: make(chan struct{}),
		whole: make([][]byte, n), hdrs: make([]ltx.Header, n), trailers: make([]ltx.Trailer, n), sums: make([]ltx.Checksum, n)}
	b.prog = &progress{fn: opts.Progress}
	for _, x := range files {
		b.prog.total += x.Size
	}
	b.log = opts.logger()
	b.leadCond = sync.NewCond(&b.leadMu)
	for k, f := range files {
		if f.Size > files[b.lead].Size {
			b.lead = k
		}
	}
	if err := b.run(ctx, opts.parallelism()); err != nil {
		return built{}, err
	}
	// Sized once every page is written: the lead wrote its pages before it
	// knew the database's final size, and may have passed it.
	if err := b.f.Truncate(int64(b.commit) * int64(b.pageSize)); err != nil {
		return built{}, fmt.Errorf("size temp file %s of the %w: %w", b.f.Name(), errLocal, err)
	}
	if err := b.checkChain(); err != nil {
		return built{}, err
	}
	if err := b.checkPages(); err != nil {
		return built{}, err
	}
	// The lead's share of the database checksum: the pages no later file replaced.
	lead := int32(b.lead)
	lock := ltx.LockPgno(b.pageSize)
	for pgno := uint32(1); pgno <= b.commit; pgno++ {
		if b.owner[pgno] == lead && pgno != lock && b.leadWrote.has(pgno) {
			b.sums[lead] ^= b.leadSums[pgno]
		}
	}
	b.sums[lead] &^= ltx.ChecksumFlag
	sum := ltx.ChecksumFlag
	for _, s := range b.sums {
		sum ^= s
	}
	sum |= ltx.ChecksumFlag
	last := b.hdrs[n-1]
	if !last.NoChecksum() && sum != b.trailers[n-1].PostApplyChecksum {
		return built{}, fmt.Errorf("restore from %s: the rebuilt database's checksum %s differs from %s expected by %s "+
			"(chain %s..%s): the replica's files are inconsistent; restore to an earlier TXID or from another replica",
			store, sum, b.trailers[n-1].PostApplyChecksum, files[n-1].Key, files[0].Key, files[n-1].Key)
	} else if last.NoChecksum() {
		opts.logger().Debug("replica files carry no database checksum (Litestream 0.5's format); verified each file's checksum and the TXID chain",
			"replica", store.String(), "last", files[n-1].Key)
	}
	b.prog.finish()
	return built{
		pos:      ltx.Pos{TXID: last.MaxTXID, PostApplyChecksum: sum},
		bytes:    b.prog.done,
		pageSize: b.pageSize,
		commit:   b.commit,
	}, nil
}

// run reads the page indexes and streams the bodies at the same time: the
// bodies' first bytes arrive while the indexes are read, and their pages are
// written once the owners are known.
func (b *builder) run(ctx context.Context, parallelism int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := len(b.files)
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		errs[n] = b.prepare(ctx, parallelism)
		b.log.Debug("restore page owners known", "indexes", n-1, "took", time.Since(start))
		b.readyErr = errs[n]
		b.sizedOnce.Do(func() { close(b.sized) })
		close(b.ready)
		if errs[n] != nil {
			cancel()
		}
	}()
	// The lead first (it holds a slot the others may wait on), then newest to oldest.
	order := []int{b.lead}
	for i := n - 1; i >= 0; i-- {
		if i != b.lead {
			order = append(order, i)
		}
	}
	sem := make(chan struct{}, parallelism)
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
			start := time.Now()
			if errs[i] = blameFile(ctx, b.files[i], b.fetch(ctx, i)); errs[i] != nil {
				cancel()
			}
			if i == b.lead {
				b.log.Debug("restore lead file written", "file", b.files[i].Key, "bytes", b.files[i].Size, "took", time.Since(start))
			}
		}()
	}
	wg.Wait()
	// Report the first real error, not the cancellations it caused.
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, errNotReady) {
			return err
		}
		if err != nil && first == nil && !errors.Is(err, errNotReady) {
			first = err
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	return first
}

var errNotReady = errors.New("page owners unknown")

const (
	indexParallelism = 4        // index reads in flight per download in flight
	wholeFileBudget  = 16 << 20 // bytes of small files kept from their index reads
)

// prepare reads the newest file's header (the database's size and page size)
// and the page index of every file after the base, and records for each page
// the newest file that holds it.
func (b *builder) prepare(ctx context.Context, parallelism int) error {
	n := len(b.files)
	hdr, err := replica.ReadHeader(ctx, b.store, b.files[n-1])
	if err != nil {
		return blameFile(ctx, b.files[n-1], err)
	}
	b.pageSize, b.commit = hdr.PageSize, hdr.Commit
	b.owner = make([]int32, int(hdr.Commit)+1)
	b.written = newBitmap(hdr.Commit)
	if b.lead != 0 {
		b.leadHas = newBitmap(hdr.Commit)
	}
	b.sizedOnce.Do(func() { close(b.sized) })
	errs := make([]error, n)
	// Index reads are small range reads: more run at once than downloads.
	sem := make(chan struct{}, min(indexParallelism*parallelism, 64))
	var wg sync.WaitGroup
	for k := 1; k < n; k++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			whole, err := readPageNumbers(ctx, b.store, b.files[k], func(pgno uint32) {
				if pgno <= b.commit {
					atomicMax(&b.owner[pgno], int32(k))
					if k == b.lead {
						b.leadHas.set(pgno) // only this goroutine writes it
					}
				}
			})
			// Not the lead's: it is downloaded without waiting for the indexes.
			if whole != nil && k != b.lead && b.cachedBytes.Add(int64(len(whole))) <= wholeFileBudget {
				b.whole[k] = whole
			}
			errs[k] = blameFile(ctx, b.files[k], err)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func atomicMax(p *int32, v int32) {
	for {
		old := atomic.LoadInt32(p)
		if old >= v || atomic.CompareAndSwapInt32(p, old, v) {
			return
		}
	}
}

// waitReady waits until the page owners are known.
func (b *builder) waitReady(ctx context.Context) error {
	select {
	case <-b.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if b.readyErr != nil {
		return errNotReady
	}
	return nil
}

// waitSized waits until the database's size and page size are known.
func (b *builder) waitSized(ctx context.Context) error {
	select {
	case <-b.sized:
	case <-ctx.Done():
		return ctx.Err()
	}
	if b.owner == nil {
		return errNotReady
	}
	return nil
}

// leadHolds reports whether the lead file holds page pgno (a newer file's
// version of it must then land after the lead's). Valid once ready.
func (b *builder) leadHolds(pgno uint32) bool { return b.leadHas == nil || b.leadHas.get(pgno) }

// waitLead waits until the lead has passed page pgno (or ended), or ctx
// ends (the restore failed elsewhere, perhaps in the lead itself).
func (b *builder) waitLead(ctx context.Context, pgno uint32) error {
	if b.leadMark.Load() >= pgno {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		// A barrier, not a critical section: once it passes, a waiter is
		// either before its ctx check or in Wait.
		b.leadMu.Lock()
		//lint:ignore SA2001 the empty section is the barrier above
		b.leadMu.Unlock()
		b.leadCond.Broadcast()
	})
	defer stop()
	b.leadMu.Lock()
	defer b.leadMu.Unlock()
	for b.leadMark.Load() < pgno {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.leadCond.Wait()
	}
	return nil
}

// advanceLead records that the lead has written every page it holds up to pgno.
func (b *builder) advanceLead(pgno uint32) {
	b.leadMu.Lock()
	b.leadMark.Store(max(b.leadMark.Load(), pgno))
	b.leadMu.Unlock()
	b.leadCond.Broadcast()
}

// checkChain verifies that the files form one history: contiguous or
// overlapping TXIDs and, where a file starts right after the previous one and
// both carry checksums, matching checksums at the joint.
func (b *builder) checkChain() error {
	if b.hdrs[0].MinTXID != 1 {
		return fmt.Errorf("restore from %s: the first file %s does not start at TXID 1", b.store, b.files[0].Key)
	}
	for i := 1; i < len(b.hdrs); i++ {
		prev, cur := b.hdrs[i-1], b.hdrs[i]
		prevKey, key := b.files[i-1].Key, b.files[i].Key
		if cur.MinTXID > prev.MaxTXID+1 || cur.MaxTXID <= prev.MaxTXID {
			return fmt.Errorf("restore from %s: %s does not continue %s: TXIDs %s..%s are missing",
				b.store, key, prevKey, prev.MaxTXID+1, cur.MinTXID-1)
		}
		joint := cur.MinTXID == prev.MaxTXID+1
		if joint && !cur.NoChecksum() && !prev.NoChecksum() && cur.PreApplyChecksum != b.trailers[i-1].PostApplyChecksum {
			return fmt.Errorf("restore from %s: checksum chain broken: %s ends at database checksum %s but %s starts from %s; "+
				"they belong to different histories (a forked or mixed replica): restore to TXID %d or from another replica",
				b.store, prevKey, b.trailers[i-1].PostApplyChecksum, key, cur.PreApplyChecksum, prev.MaxTXID)
		}
	}
	return nil
}

// checkPages verifies that every page 1..commit but the lock page was written,
// and that no page came from a file older than a shrink of the database below
// it (a shrink followed by growth must rewrite the page in a later file).
func (b *builder) checkPages() error {
	n := len(b.files)
	// limits[k]: the smallest size the database had after file k.
	limits := make([]uint32, n)
	limit := b.commit
	for k := n - 1; k >= 0; k-- {
		limits[k] = limit
		limit = min(limit, b.hdrs[k].Commit)
	}
	lock := ltx.LockPgno(b.pageSize)
	for pgno := uint32(1); pgno <= b.commit; pgno++ {
		if pgno == lock {
			continue
		}
		owner := b.owner[pgno]
		wrote := b.written.get(pgno)
		if owner == int32(b.lead) {
			wrote = b.leadWrote.has(pgno)
		}
		if !wrote || pgno > limits[owner] {
			return fmt.Errorf("restore from %s: no file in the chain %s..%s holds page %d of the database's %d pages; "+
				"the replica's files are incomplete: restore from another replica",
				b.store, b.files[0].Key, b.files[n-1].Key, pgno, b.commit)
		}
	}
	return nil
}

// runWriter gathers consecutive pages into runs and hands each run to
// writers on other goroutines, which write it with one positional write:
// decoding a file and writing it proceed side by side, and files are written
// without a shared offset. A few buffers per file bound its memory.
type runWriter struct {
	f        *os.File
	pageSize int64
	cur      []byte
	off      int64 // file offset of cur[0]
	workers  int
	written  func(end int64) // if set, called with each run's end offset once written (in order with one worker)
	runs     chan run
	free     chan []byte
	wg       sync.WaitGroup
	errs     []error
	closed   bool
}

type run struct {
	off int64
	b   []byte
}

const (
	runWriterSize    = 512 << 10 // bytes per run buffer
	runWriterBuffers = 4
	runWriterWorkers = 2
)

func newRunWriter(f *os.File, pageSize uint32, workers int, written func(end int64)) *runWriter {
	size := max(runWriterSize, int(pageSize))
	w := &runWriter{f: f, pageSize: int64(pageSize), workers: workers, written: written, runs: make(chan run),
		free: make(chan []byte, runWriterBuffers), errs: make([]error, workers)}
	for range runWriterBuffers {
		w.free <- getBuf(&runBufPool, size)[:0]
	}
	w.cur = <-w.free
	for g := range workers {
		w.wg.Add(1)
		go w.write(g)
	}
	return w
}

func (w *runWriter) write(g int) {
	defer w.wg.Done()
	for r := range w.runs {
		if w.errs[g] == nil {
			if _, err := w.f.WriteAt(r.b, r.off); err != nil {
				w.errs[g] = fmt.Errorf("write %s (the %w): %w", w.f.Name(), errLocal, err)
			} else {
				startWriteback(w.f, r.off, int64(len(r.b)))
				if w.written != nil {
					w.written(r.off + int64(len(r.b)))
				}
			}
		}
		w.free <- r.b[:0]
	}
}

// slot returns the place in the write buffer for page pgno, to be filled
// before the next call.
func (w *runWriter) slot(pgno uint32) []byte {
	off := int64(pgno-1) * w.pageSize
	if len(w.cur) > 0 && (off != w.off+int64(len(w.cur)) || int64(len(w.cur))+w.pageSize > int64(cap(w.cur))) {
		w.flush()
	}
	if len(w.cur) == 0 {
		w.off = off
	}
	n := len(w.cur)
	w.cur = w.cur[:n+int(w.pageSize)]
	return w.cur[n:]
}

func (w *runWriter) flush() {
	if len(w.cur) == 0 {
		return
	}
	w.runs <- run{off: w.off, b: w.cur}
	w.cur = <-w.free
}

// close writes what remains and waits for the writers.
func (w *runWriter) close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.flush()
	close(w.runs)
	w.wg.Wait()
	// Every buffer is back: the current one and the rest in free.
	putBuf(&runBufPool, w.cur[:cap(w.cur)])
	for range runWriterBuffers - 1 {
		b := <-w.free
		putBuf(&runBufPool, b[:cap(b)])
	}
	return errors.Join(w.errs...)
}

// bitmap is one bit per page number.
type bitmap []uint64

func newBitmap(n uint32) bitmap       { return make(bitmap, n/64+1) }
func (m bitmap) get(pgno uint32) bool { return m[pgno/64]&(1<<(pgno%64)) != 0 }
func (m bitmap) set(pgno uint32)      { m[pgno/64] |= 1 << (pgno % 64) }

// has is get for a page number that may lie past the bitmap's size.
func (m bitmap) has(pgno uint32) bool { return int(pgno/64) < len(m) && m.get(pgno) }
func (m bitmap) setAtomic(pgno uint32) {
	atomic.OrUint64(&m[pgno/64], 1<<(pgno%64))
}
