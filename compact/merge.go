package compact

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// merge streams inputs (a chain, oldest first) into one LTX file: a k-way merge
// by page number where the newest input's version of a page wins and pages
// past the last input's Commit are dropped, as ltx.Compactor does.
//
// It does not use ltx.Compactor because that copies the last input's
// post-apply checksum under the caller's header flags, which fails for
// Litestream 0.5 replicas (written with HeaderFlagNoChecksum) and for mixed
// ones (a Litestream history continued by sluice). Here the output carries
// database checksums whenever they are known: for a snapshot (MinTXID 1) the
// checksum is computed from its pages (and checked against the last input's
// when it has one); otherwise both the first input's pre-apply and the last
// input's post-apply checksums must be present.
func merge(ctx context.Context, store replica.Store, inputs []replica.LTXFile) ([]byte, ltx.Header, error) {
	rcs := make([]io.ReadCloser, 0, len(inputs))
	defer func() {
		for _, rc := range rcs {
			_ = rc.Close()
		}
	}()
	decs := make([]*ltx.Decoder, len(inputs))
	hdrs := make([]ltx.Header, len(inputs))
	for i, f := range inputs {
		rc, err := store.Get(ctx, f.Key)
		if err != nil {
			return nil, ltx.Header{}, fmt.Errorf("compaction input %s in %s: %w", f.Key, store, err)
		}
		rcs = append(rcs, rc)
		decs[i] = ltx.NewDecoder(bufio.NewReaderSize(rc, 64<<10))
		if err := decs[i].DecodeHeader(); err != nil {
			return nil, ltx.Header{}, fmt.Errorf("compaction input %s in %s has a corrupt header: %w", f.Key, store, err)
		}
		hdrs[i] = decs[i].Header()
		if i > 0 {
			if hdrs[i].PageSize != hdrs[0].PageSize {
				return nil, ltx.Header{}, fmt.Errorf("compaction inputs %s and %s in %s have different page sizes", inputs[0].Key, f.Key, store)
			}
			if hdrs[i].MinTXID > hdrs[i-1].MaxTXID+1 || hdrs[i].MaxTXID <= hdrs[i-1].MaxTXID {
				return nil, ltx.Header{}, fmt.Errorf("compaction inputs %s and %s in %s are not contiguous", inputs[i-1].Key, f.Key, store)
			}
		}
	}
	first, last := hdrs[0], hdrs[len(hdrs)-1]
	out := ltx.Header{
		Version:   ltx.Version,
		PageSize:  first.PageSize,
		Commit:    last.Commit,
		MinTXID:   first.MinTXID,
		MaxTXID:   last.MaxTXID,
		Timestamp: last.Timestamp,
	}
	// Outputs never carry rolling checksums: Litestream 0.5.17's restore
	// rejects any file that does (see engine/state.go). Inputs that carry
	// them are still verified below.
	snapshot := out.IsSnapshot()
	out.Flags = ltx.HeaderFlagNoChecksum

	var buf bytes.Buffer
	enc, err := ltx.NewEncoder(&buf)
	if err != nil {
		return nil, ltx.Header{}, err
	}
	if err := enc.EncodeHeader(out); err != nil {
		return nil, ltx.Header{}, fmt.Errorf("compact %s..%s in %s: %w", inputs[0].Key, inputs[len(inputs)-1].Key, store, err)
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
			return fmt.Errorf("compaction input %s in %s is corrupt: %w", inputs[i].Key, store, err)
		}
		return nil
	}
	for i := range heads {
		if err := fill(i); err != nil {
			return nil, ltx.Header{}, err
		}
	}
	sum := ltx.ChecksumFlag
	for {
		if err := ctx.Err(); err != nil {
			return nil, ltx.Header{}, err
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
					return nil, ltx.Header{}, fmt.Errorf("compact %s..%s in %s: page %d: %w", inputs[0].Key, inputs[len(inputs)-1].Key, store, pgno, err)
				}
				if snapshot {
					sum ^= ltx.ChecksumPage(pgno, heads[i].data)
				}
				written = true
			}
			if err := fill(i); err != nil {
				return nil, ltx.Header{}, err
			}
		}
	}
	for i, dec := range decs {
		if err := dec.Close(); err != nil {
			return nil, ltx.Header{}, fmt.Errorf("compaction input %s in %s is corrupt: %w", inputs[i].Key, store, err)
		}
	}
	lastTrailer := decs[len(decs)-1].Trailer()
	switch {
	case snapshot:
		sum |= ltx.ChecksumFlag
		if !last.NoChecksum() && lastTrailer.PostApplyChecksum != sum {
			return nil, ltx.Header{}, fmt.Errorf("snapshot of %s..%s in %s: the merged database's checksum %s differs from %s recorded by %s; "+
				"the replica's files are inconsistent, no snapshot written", inputs[0].Key, inputs[len(inputs)-1].Key, store, sum, lastTrailer.PostApplyChecksum, inputs[len(inputs)-1].Key)
		}
	}
	if err := enc.Close(); err != nil {
		return nil, ltx.Header{}, fmt.Errorf("compact %s..%s in %s: %w", inputs[0].Key, inputs[len(inputs)-1].Key, store, err)
	}
	return buf.Bytes(), out, nil
}
