package ltxenc

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/superfly/ltx"
)

// file is one LTX file's content: a header and its pages in order.
type file struct {
	hdr   ltx.Header
	pgnos []uint32
	pages [][]byte
	post  ltx.Checksum
}

func randomFile(r *rand.Rand) file {
	pageSize := uint32(512) << r.IntN(8) // 512 .. 64 KiB
	commit := uint32(1 + r.IntN(40))
	lock := ltx.LockPgno(pageSize)
	snapshot := r.IntN(3) == 0
	f := file{hdr: ltx.Header{
		Version:   ltx.Version,
		Flags:     ltx.HeaderFlagNoChecksum,
		PageSize:  pageSize,
		Commit:    commit,
		MinTXID:   1,
		MaxTXID:   ltx.TXID(1 + r.IntN(5)),
		Timestamp: r.Int64N(1 << 40),
	}}
	if !snapshot {
		f.hdr.MinTXID = ltx.TXID(2 + r.IntN(100))
		f.hdr.MaxTXID = f.hdr.MinTXID + ltx.TXID(r.IntN(5))
	}
	if r.IntN(2) == 0 {
		f.hdr.Flags = 0
		f.post = ltx.ChecksumFlag | ltx.Checksum(r.Uint64()>>1)
		if !snapshot {
			f.hdr.PreApplyChecksum = ltx.ChecksumFlag | ltx.Checksum(r.Uint64()>>1)
		}
	}
	for pgno := uint32(1); pgno <= commit; pgno++ {
		if pgno == lock || (!snapshot && r.IntN(3) != 0) {
			continue
		}
		page := make([]byte, pageSize)
		switch r.IntN(3) {
		case 0: // incompressible
			for i := range page {
				page[i] = byte(r.Uint32())
			}
		case 1: // a row or two in an empty page
			copy(page[r.IntN(int(pageSize)-16):], "a row of text..")
		}
		f.pgnos = append(f.pgnos, pgno)
		f.pages = append(f.pages, page)
	}
	if len(f.pgnos) == 0 {
		f.pgnos, f.pages = []uint32{commit}, [][]byte{make([]byte, pageSize)}
		if commit == lock {
			f.pgnos[0] = commit - 1
		}
	}
	return f
}

// encoder is what both encoders offer.
type encoder interface {
	EncodeHeader(ltx.Header) error
	EncodePage(ltx.PageHeader, []byte) error
	SetPostApplyChecksum(ltx.Checksum)
	Close() error
}

func encode(t *testing.T, enc encoder, f file) {
	t.Helper()
	if err := enc.EncodeHeader(f.hdr); err != nil {
		t.Fatal(err)
	}
	for i, pgno := range f.pgnos {
		if err := enc.EncodePage(ltx.PageHeader{Pgno: pgno}, f.pages[i]); err != nil {
			t.Fatal(err)
		}
	}
	if f.post != 0 {
		enc.SetPostApplyChecksum(f.post)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
}

// The files must be those superfly/ltx writes, byte for byte, however
// often an encoder is reused: Litestream and every LTX reader read them.
func TestEncoderWritesWhatLTXWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		f := randomFile(r)
		var want, got bytes.Buffer
		ref, err := ltx.NewEncoder(&want)
		if err != nil {
			t.Fatal(err)
		}
		encode(t, ref, f)
		enc := New(&got)
		encode(t, enc, f)
		if enc.N() != int64(got.Len()) {
			t.Fatalf("file %d: N() = %d, wrote %d", i, enc.N(), got.Len())
		}
		if enc.Trailer() != ref.Trailer() {
			t.Fatalf("file %d: trailer %+v, want %+v", i, enc.Trailer(), ref.Trailer())
		}
		enc.Release()
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("file %d (%d pages of %d bytes, snapshot %v): %d bytes differ from superfly/ltx's %d",
				i, len(f.pgnos), f.hdr.PageSize, f.hdr.IsSnapshot(), got.Len(), want.Len())
		}
		if !f.hdr.NoChecksum() {
			continue // the random post-apply checksum is not the pages' own
		}
		dec := ltx.NewDecoder(bytes.NewReader(got.Bytes()))
		if err := dec.Verify(); err != nil {
			t.Fatalf("file %d: superfly/ltx's decoder refuses it: %v", i, err)
		}
	}
}

func TestEncoderRefusesWhatLTXRefuses(t *testing.T) {
	hdr := ltx.Header{Version: ltx.Version, Flags: ltx.HeaderFlagNoChecksum, PageSize: 4096, Commit: 10, MinTXID: 5, MaxTXID: 5}
	page := make([]byte, 4096)
	for _, tc := range []struct {
		name  string
		hdr   ltx.Header
		pgnos []uint32
		size  int
	}{
		{"out of order", hdr, []uint32{3, 2}, 4096},
		{"repeated page", hdr, []uint32{3, 3}, 4096},
		{"beyond the commit size", hdr, []uint32{11}, 4096},
		{"short page", hdr, []uint32{1}, 100},
		{"snapshot with a gap", ltx.Header{Version: ltx.Version, Flags: ltx.HeaderFlagNoChecksum, PageSize: 4096, Commit: 10, MinTXID: 1, MaxTXID: 1}, []uint32{1, 3}, 4096},
	} {
		enc := New(&bytes.Buffer{})
		if err := enc.EncodeHeader(tc.hdr); err != nil {
			t.Fatal(err)
		}
		var err error
		for _, pgno := range tc.pgnos {
			if err = enc.EncodePage(ltx.PageHeader{Pgno: pgno}, page[:tc.size]); err != nil {
				break
			}
		}
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
		enc.Release()
	}
}

func BenchmarkEncode(b *testing.B) {
	f := randomFile(rand.New(rand.NewPCG(3, 4)))
	var buf bytes.Buffer
	b.Run("ltxenc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			enc := New(&buf)
			encodeB(b, enc, f)
			enc.Release()
		}
	})
	b.Run("superfly-ltx", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			enc, _ := ltx.NewEncoder(&buf)
			encodeB(b, enc, f)
		}
	})
}

func encodeB(b *testing.B, enc encoder, f file) {
	_ = enc.EncodeHeader(f.hdr)
	for i, pgno := range f.pgnos {
		_ = enc.EncodePage(ltx.PageHeader{Pgno: pgno}, f.pages[i])
	}
	if err := enc.Close(); err != nil {
		b.Fatal(err)
	}
}
