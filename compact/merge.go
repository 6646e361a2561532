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
	if remote > 0 {
		if err := c.budget.Acquire(ctx, remote); err != nil {
			return ltx.Header{}, claim{}, err
		}
		defer c.budget.Release(remote)
	}
	ctx, wd, stop := replica.WithWatchdog(ctx, c.cfg.CallTimeout)
	defer stop()

	// Open every input and read its header at once: a group's requests are
	// already paid for in the budget, and one round trip per group instead of
	// one per input is what makes a backlog of thousands finish quickly.
	rcs := make([]io.Closer, len(srcs))
	defer func() {
		for _, rc := range rcs {
			if rc != nil {
				_ = rc.Close()
			}
		}
	}()
	bufs := make([]*bufio.Reader, len(srcs))
	defer func() {
		for _, br := range bufs {
			if br != nil {
				br.Reset(nil)
				inputBufs.Put(br)
			}
		}
	}()
	decs := make([]*ltx.Decoder, len(srcs))
	hdrs := make([]ltx.Header, len(srcs))
	errs := make([]error, len(srcs))
	var wg sync.WaitGroup
	for i, s := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r io.Reader
			if s.body != nil {
				r = bytes.NewReader(s.body)
			} else if s.path != "" {
				f, err := os.Open(s.path)
				if err != nil {
					errs[i] = fmt.Errorf("compact: reopen intermediate %s: %w", s.name, err)
					return
				}
				rcs[i], r = f, f
			} else {
				rc, err := c.store.Get(ctx, s.file.Key)
				if err != nil {
					errs[i] = fmt.Errorf("compaction input %s in %s: %w", s.name, c.store, c.inputErr(ctx, s, replica.Stalled(ctx, err)))
					return
				}
				wd.Touch()
				rcs[i], r = rc, wd.Reader(rc)
			}
			bufs[i] = inputBufs.Get().(*bufio.Reader)
			bufs[i].Reset(r)
			decs[i] = ltx.NewDecoder(bufs[i])
			if err := decs[i].DecodeHeader(); err != nil && ctx.Err() != nil {
				errs[i] = fmt.Errorf("compaction input %s in %s cannot be read: %w", s.name, c.store, replica.Stalled(ctx, err))
				return
			} else if err != nil {
				errs[i] = fmt.Errorf("compaction input %s in %s has a corrupt header: %w", s.name, c.store, c.inputErr(ctx, s, err))
				return
			}
			hdrs[i] = decs[i].Header()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return ltx.Header{}, claim{}, err // the first is enough: the others are usually the same cause
		}
	}
	for i := 1; i < len(srcs); i++ {
		if hdrs[i].PageSize != hdrs[0].PageSize {
			return ltx.Header{}, claim{}, fmt.Errorf("compaction inputs %s and %s in %s have different page sizes", srcs[0].name, srcs[i].name, c.store)
		}
		if hdrs[i].MinTXID > hdrs[i-1].MaxTXID+1 || hdrs[i].MaxTXID <= hdrs[i-1].MaxTXID {
			return ltx.Header{}, claim{}, fmt.Errorf("compaction inputs %s and %s in %s are not contiguous", srcs[i-1].name, srcs[i].name, c.store)
		}
	}
	first, last := hdrs[0], hdrs[len(hdrs)-1]
	out := ltx.Header{
		Version:   ltx.Version,
		Flags:     ltx.HeaderFlagNoChecksum,
		PageSize:  first.PageSize,
		Commit:    last.Commit,
		MinTXID:   first.MinTXID,
		MaxTXID:   last.MaxTXID,
		Timestamp: last.Timestamp,
	}
	snapshot := out.IsSnapshot()
	span := fmt.Sprintf("%s..%s", srcs[0].name, srcs[len(srcs)-1].name)

	bw := bufio.NewWriterSize(w, 64<<10)
	enc := ltxenc.New(bw)
	defer enc.Release()
	if err := enc.EncodeHeader(out); err != nil {
		return ltx.Header{}, claim{}, fmt.Errorf("compact %s in %s: %w", span, c.store, err)
	}

	// One buffered page per input; the smallest page number goes next and
	// the newest input holding it wins.
	type head struct {
		hdr  ltx.PageHeader
		data []byte
		eof  bool
	}
	heads := make([]head, len(decs))
	fill := func(i int) error {
		if heads[i].data == nil {
			heads[i].data = make([]byte, first.PageSize)
		}
		err := decs[i].DecodePage(&heads[i].hdr, heads[i].data)
		if err == io.EOF {
			heads[i].eof = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("compaction input %s in %s is corrupt or unreadable: %w", srcs[i].name, c.store, c.inputErr(ctx, srcs[i], replica.Stalled(ctx, err)))
		}
		return nil
	}
	for i := range heads {
		if err := fill(i); err != nil {
			return ltx.Header{}, claim{}, err
		}
	}
	sum := ltx.ChecksumFlag
	for {
		if err := ctx.Err(); err != nil {
			return ltx.Header{}, claim{}, replica.Stalled(ctx, err)
		}
		var pgno uint32
		for i := range heads {
			if !heads[i].eof && (pgno == 0 || heads[i].hdr.Pgno < pgno) {
				pgno = heads[i].hdr.Pgno
			}
		}
		if pgno == 0 {
			break
		}
		written := false
		for i := len(heads) - 1; i >= 0; i-- {
			if heads[i].eof || heads[i].hdr.Pgno != pgno {
				continue
			}
			if !written && pgno <= out.Commit {
				if err := enc.EncodePage(ltx.PageHeader{Pgno: pgno}, heads[i].data); err != nil {
					return ltx.Header{}, claim{}, fmt.Errorf("compact %s in %s: page %d: %w", span, c.store, pgno, err)
				}
				if snapshot {
					sum ^= ltx.ChecksumFlag | ltx.Checksum(crc64iso.Page(pgno, heads[i].data))
				}
				written = true
			}
			if err := fill(i); err != nil {
				return ltx.Header{}, claim{}, err
			}
		}
	}
	for i, dec := range decs {
		if err := dec.Close(); err != nil {
			return ltx.Header{}, claim{}, fmt.Errorf("compaction input %s in %s is corrupt: %w", srcs[i].name, c.store, c.inputErr(ctx, srcs[i], replica.Stalled(ctx, err)))
		}
	}
	newest := claim{known: !last.NoChecksum(), sum: decs[len(decs)-1].Trailer().PostApplyChecksum}
	if lastSrc := srcs[len(srcs)-1]; lastSrc.claim != nil {
		newest = *lastSrc.claim
	}
	if snapshot {
		sum |= ltx.ChecksumFlag
		if newest.known && newest.sum != sum {
			return ltx.Header{}, claim{}, fmt.Errorf("snapshot of %s in %s: the merged database's checksum %s differs from %s recorded by %s; "+
				"the replica's files are inconsistent, no snapshot written", span, c.store, sum, newest.sum, srcs[len(srcs)-1].name)
		}
	}
	if err := enc.Close(); err != nil {
		return ltx.Header{}, claim{}, fmt.Errorf("compact %s in %s: %w", span, c.store, err)
	}
	if err := bw.Flush(); err != nil {
		return ltx.Header{}, claim{}, fmt.Errorf("compact %s: write merge output: %w", span, err)
	}
	return out, newest, nil
}
