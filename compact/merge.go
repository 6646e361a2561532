package compact

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/internal/crc64iso"
	"github.com/sluicedb/sluice/internal/ltxenc"
	"github.com/sluicedb/sluice/replica"
)

// claim is what the newest original input of a merge says the database's
// checksum is after it (known=false for files written without checksums).
// Intermediate files carry no checksums, so a claim travels beside them.
type claim struct {
	known bool
	sum   ltx.Checksum
}

// source is one input of a merge group: a store object or an intermediate
// file of an earlier round.
type source struct {
	name  string          // for messages
	file  replica.LTXFile // store input (Key != "")
	path  string          // intermediate file
	body  []byte          // store input found in Config.Bodies: no GET
	claim *claim          // intermediate: inherited from its newest input
}

// merge merges inputs (a chain, oldest first) into one LTX file in a scratch
// file, which it returns rewound with its size. At most FanIn inputs are open
// at once: longer chains are merged in rounds, each group of FanIn into an
// intermediate scratch file, so a backlog of thousands of level-0 files takes
// neither thousands of connections nor thousands of descriptors. Nothing is
// held in memory beyond one page and one read buffer per open input.
func (c *Compactor) merge(ctx context.Context, inputs []replica.LTXFile) (*os.File, int64, ltx.Header, error) {
	srcs := make([]source, len(inputs))
	for i, f := range inputs {
		srcs[i] = source{name: f.Key, file: f}
	}
	var scratch []*os.File // intermediates not yet consumed
	defer func() {
		for _, f := range scratch {
			removeTemp(f)
		}
	}()
	fanIn := c.cfg.FanIn
	for len(srcs) > fanIn {
		var next []source
		var made []*os.File
		for i := 0; i < len(srcs); i += fanIn {
			group := srcs[i:min(i+fanIn, len(srcs))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			out, err := tempFile(c.cfg.TempDir)
			if err != nil {
				return nil, 0, ltx.Header{}, err
			}
			made = append(made, out)
			scratch = append(scratch, out)
			hdr, cl, err := c.mergeGroup(ctx, group, out)
			if err == nil {
				err = out.Close() // reopened by name: a round never holds more descriptors than FanIn
			}
			if err != nil {
				return nil, 0, ltx.Header{}, err
			}
			next = append(next, source{name: fmt.Sprintf("%s..%s (merged)", group[0].name, group[len(group)-1].name),
				path: out.Name(), claim: &cl, file: replica.LTXFile{MinTXID: hdr.MinTXID, MaxTXID: hdr.MaxTXID}})
		}
		// The previous round's intermediates are consumed.
		kept := scratch[:0]
		for _, f := range scratch {
			if contains(made, f) {
				kept = append(kept, f)
			} else {
				removeTemp(f)
			}
		}
		scratch = kept
		srcs = next
	}
	out, err := tempFile(c.cfg.TempDir)
	if err != nil {
		return nil, 0, ltx.Header{}, err
	}
	hdr, _, err := c.mergeGroup(ctx, srcs, out)
	if err != nil {
		removeTemp(out)
		return nil, 0, ltx.Header{}, err
	}
	size, err := out.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = out.Seek(0, io.SeekStart)
	}
	if err != nil {
		removeTemp(out)
		return nil, 0, ltx.Header{}, fmt.Errorf("compact: rewind merge output: %w", err)
	}
	return out, size, hdr, nil
}

// inputErr classes a failure to read a store input as damage to that
// object where it is (see replica.Damaged); intermediates are local files.
func (c *Compactor) inputErr(ctx context.Context, s source, err error) error {
	if s.path != "" || s.file.Key == "" {
		return err
	}
	return replica.Damaged(ctx, c.store, s.file.Key, err)
}

func contains(fs []*os.File, f *os.File) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

// inputBufs holds the read buffers of merge inputs: a busy server merges
// thousands of inputs a minute, and a fresh 64 KiB each was most of its
// garbage after the LTX encoders.
var inputBufs = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// mergeGroup streams srcs (a chain, oldest first, at most FanIn) into w: a
// k-way merge by page number where the newest input's version of a page wins
// and pages past the last input's Commit are dropped, as ltx.Compactor does.
//
// It does not use ltx.Compactor because that copies the last input's
// post-apply checksum under the caller's header flags, which fails for
// Litestream 0.5 replicas (written with HeaderFlagNoChecksum) and for mixed
// ones (a Litestream history continued by sluice). Outputs never carry
// rolling checksums (Litestream 0.5.17's restore rejects files that do); for
// a snapshot (MinTXID 1) the checksum is computed from its pages and checked
// against the newest input's claim when it has one.
//
// The group's store inputs take their budget slots in one step and share one
// watchdog: the merge as a whole must make progress, while an input whose
// pages come late in page order may rightly sit unread for a while.
func (c *Compactor) mergeGroup(ctx context.Context, srcs []source, w io.Writer) (ltx.Header, claim, error) {
	release, err := c.reserve(ctx, srcs)
	if err != nil {
		return ltx.Header{}, claim{}, err
	}
	defer release()
	ctx, wd, stop := replica.WithWatchdog(ctx, c.cfg.CallTimeout)
	defer stop()

	g := c.openGroup(ctx, wd, srcs)
	defer g.close()
	if err := g.firstErr(); err != nil {
		return ltx.Header{}, claim{}, err // the first is enough: the others are usually the same cause
	}
	out, err := c.outputHeader(srcs, g.hdrs)
	if err != nil {
		return ltx.Header{}, claim{}, err
	}
	span := fmt.Sprintf("%s..%s", srcs[0].name, srcs[len(srcs)-1].name)

	bw := bufio.NewWriterSize(w, 64<<10)
	enc := ltxenc.New(bw)
	defer enc.Release()
	if err := enc.EncodeHeader(out); err != nil {
		return ltx.Header{}, claim{}, fmt.Errorf("compact %s in %s: %w", span, c.store, err)
	}
	sum, err := g.mergePages(enc, out, span)
	if err != nil {
		return ltx.Header{}, claim{}, err
	}
	newest, err := g.finish()
	if err != nil {
		return ltx.Header{}, claim{}, err
	}
	if out.IsSnapshot() && newest.known && newest.sum != sum {
		return ltx.Header{}, claim{}, fmt.Errorf("snapshot of %s in %s: the merged database's checksum %s differs from %s recorded by %s; "+
			"the replica's files are inconsistent, no snapshot written", span, c.store, sum, newest.sum, srcs[len(srcs)-1].name)
	}
	if err := enc.Close(); err != nil {
		return ltx.Header{}, claim{}, fmt.Errorf("compact %s in %s: %w", span, c.store, err)
	}
	if err := bw.Flush(); err != nil {
		return ltx.Header{}, claim{}, fmt.Errorf("compact %s: write merge output: %w", span, err)
	}
	return out, newest, nil
}

// reserve takes the bodies of srcs held in Config.Bodies and, for the store
// inputs left, their budget slots in one step; release gives the slots back.
func (c *Compactor) reserve(ctx context.Context, srcs []source) (release func(), err error) {
	remote := 0
	for i, s := range srcs {
		if s.path != "" {
			continue
		}
		if body, ok := c.cfg.Bodies.take(c, s.file.Key); ok {
			srcs[i].body = body
			continue
		}
		remote++
	}
	if remote == 0 {
		return func() {}, nil
	}
	if err := c.budget.Acquire(ctx, remote); err != nil {
		return nil, err
	}
	return func() { c.budget.Release(remote) }, nil
}

// group is the open inputs of one merge: input i's reader, its read buffer,
// its decoder (header read) and the page it has buffered next.
type group struct {
	c     *Compactor
	ctx   context.Context
	srcs  []source
	rcs   []io.Closer
	bufs  []*bufio.Reader
	decs  []*ltx.Decoder
	hdrs  []ltx.Header
	errs  []error
	heads []head
}

// head is an input's next page in page order.
type head struct {
	hdr  ltx.PageHeader
	data []byte
	eof  bool
}

// openGroup opens every input and reads its header at once: a group's
// requests are already paid for in the budget, and one round trip per group
// instead of one per input is what makes a backlog of thousands finish
// quickly. Failures are in firstErr; close releases what was opened.
func (c *Compactor) openGroup(ctx context.Context, wd *replica.Watchdog, srcs []source) *group {
	n := len(srcs)
	g := &group{c: c, ctx: ctx, srcs: srcs, rcs: make([]io.Closer, n), bufs: make([]*bufio.Reader, n),
		decs: make([]*ltx.Decoder, n), hdrs: make([]ltx.Header, n), errs: make([]error, n)}
	var wg sync.WaitGroup
	for i := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.errs[i] = g.open(i, wd)
		}()
	}
	wg.Wait()
	return g
}

// open opens input i and decodes its header.
func (g *group) open(i int, wd *replica.Watchdog) error {
	c, ctx, s := g.c, g.ctx, g.srcs[i]
	var r io.Reader
	if s.body != nil {
		r = bytes.NewReader(s.body)
	} else if s.path != "" {
		f, err := os.Open(s.path)
		if err != nil {
			return fmt.Errorf("compact: reopen intermediate %s: %w", s.name, err)
		}
		g.rcs[i], r = f, f
	} else {
		rc, err := c.store.Get(ctx, s.file.Key)
		if err != nil {
			return fmt.Errorf("compaction input %s in %s: %w", s.name, c.store, c.inputErr(ctx, s, replica.Stalled(ctx, err)))
		}
		wd.Touch()
		g.rcs[i], r = rc, wd.Reader(rc)
	}
	g.bufs[i] = inputBufs.Get().(*bufio.Reader)
	g.bufs[i].Reset(r)
	g.decs[i] = ltx.NewDecoder(g.bufs[i])
	if err := g.decs[i].DecodeHeader(); err != nil && ctx.Err() != nil {
		return fmt.Errorf("compaction input %s in %s cannot be read: %w", s.name, c.store, replica.Stalled(ctx, err))
	} else if err != nil {
		return fmt.Errorf("compaction input %s in %s has a corrupt header: %w", s.name, c.store, c.inputErr(ctx, s, err))
	}
	g.hdrs[i] = g.decs[i].Header()
	return nil
}

func (g *group) firstErr() error {
	for _, err := range g.errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// close returns the read buffers to their pool and closes the readers.
func (g *group) close() {
	for _, br := range g.bufs {
		if br != nil {
			br.Reset(nil)
			inputBufs.Put(br)
		}
	}
	for _, rc := range g.rcs {
		if rc != nil {
			_ = rc.Close()
		}
	}
}

// outputHeader checks that the inputs' headers form one chain of one page
// size and returns the merged file's header.
func (c *Compactor) outputHeader(srcs []source, hdrs []ltx.Header) (ltx.Header, error) {
	for i := 1; i < len(srcs); i++ {
		if hdrs[i].PageSize != hdrs[0].PageSize {
			return ltx.Header{}, fmt.Errorf("compaction inputs %s and %s in %s have different page sizes", srcs[0].name, srcs[i].name, c.store)
		}
		if hdrs[i].MinTXID > hdrs[i-1].MaxTXID+1 || hdrs[i].MaxTXID <= hdrs[i-1].MaxTXID {
			return ltx.Header{}, fmt.Errorf("compaction inputs %s and %s in %s are not contiguous", srcs[i-1].name, srcs[i].name, c.store)
		}
	}
	first, last := hdrs[0], hdrs[len(hdrs)-1]
	return ltx.Header{
		Version:   ltx.Version,
		Flags:     ltx.HeaderFlagNoChecksum,
		PageSize:  first.PageSize,
		Commit:    last.Commit,
		MinTXID:   first.MinTXID,
		MaxTXID:   last.MaxTXID,
		Timestamp: last.Timestamp,
	}, nil
}

// mergePages writes every page up to out.Commit to enc, each from the newest
// input holding it, with one buffered page per input: the smallest page
// number goes next. For a snapshot it returns the database checksum of the
// pages written.
func (g *group) mergePages(enc *ltxenc.Encoder, out ltx.Header, span string) (ltx.Checksum, error) {
	g.heads = make([]head, len(g.decs))
	for i := range g.heads {
		if err := g.fill(i); err != nil {
			return 0, err
		}
	}
	sum := ltx.ChecksumFlag
	for {
		if err := g.ctx.Err(); err != nil {
			return 0, replica.Stalled(g.ctx, err)
		}
		pgno := g.lowest()
		if pgno == 0 {
			return sum | ltx.ChecksumFlag, nil
		}
		if err := g.mergePage(enc, out, span, pgno, &sum); err != nil {
			return 0, err
		}
	}
}

// mergePage writes page pgno from the newest input holding it, unless it
// lies past out.Commit, adds it to a snapshot's checksum sum, and moves every
// input holding it on to its next page.
func (g *group) mergePage(enc *ltxenc.Encoder, out ltx.Header, span string, pgno uint32, sum *ltx.Checksum) error {
	written := false
	for i := len(g.heads) - 1; i >= 0; i-- {
		h := &g.heads[i]
		if h.eof || h.hdr.Pgno != pgno {
			continue
		}
		if !written && pgno <= out.Commit {
			if err := enc.EncodePage(ltx.PageHeader{Pgno: pgno}, h.data); err != nil {
				return fmt.Errorf("compact %s in %s: page %d: %w", span, g.c.store, pgno, err)
			}
			if out.IsSnapshot() {
				*sum ^= ltx.ChecksumFlag | ltx.Checksum(crc64iso.Page(pgno, h.data))
			}
			written = true
		}
		if err := g.fill(i); err != nil {
			return err
		}
	}
	return nil
}

// lowest is the smallest page number buffered, 0 once every input is read.
func (g *group) lowest() uint32 {
	var pgno uint32
	for i := range g.heads {
		if !g.heads[i].eof && (pgno == 0 || g.heads[i].hdr.Pgno < pgno) {
			pgno = g.heads[i].hdr.Pgno
		}
	}
	return pgno
}

// fill buffers input i's next page.
func (g *group) fill(i int) error {
	h := &g.heads[i]
	if h.data == nil {
		h.data = make([]byte, g.hdrs[0].PageSize)
	}
	err := g.decs[i].DecodePage(&h.hdr, h.data)
	if err == io.EOF {
		h.eof = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("compaction input %s in %s is corrupt or unreadable: %w", g.srcs[i].name, g.c.store, g.c.inputErr(g.ctx, g.srcs[i], replica.Stalled(g.ctx, err)))
	}
	return nil
}

// finish verifies every input's trailer and returns the newest input's claim.
func (g *group) finish() (claim, error) {
	for i, dec := range g.decs {
		if err := dec.Close(); err != nil {
			return claim{}, fmt.Errorf("compaction input %s in %s is corrupt: %w", g.srcs[i].name, g.c.store, g.c.inputErr(g.ctx, g.srcs[i], replica.Stalled(g.ctx, err)))
		}
	}
	n := len(g.decs)
	newest := claim{known: !g.hdrs[n-1].NoChecksum(), sum: g.decs[n-1].Trailer().PostApplyChecksum}
	if lastSrc := g.srcs[n-1]; lastSrc.claim != nil {
		newest = *lastSrc.claim
	}
	return newest, nil
}
