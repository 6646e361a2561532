package crc64iso

import (
	"hash/crc64"
	"math/rand"
	"testing"

	"github.com/superfly/ltx"
)

// Every length up to a few blocks past each boundary, at every alignment,
// from random registers, equals hash/crc64.
func TestUpdateEqualsHashCRC64(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	buf := make([]byte, 1200)
	rng.Read(buf)
	for n := 0; n <= 1100; n++ {
		for off := 0; off < 16; off += 3 {
			p := buf[off : off+n]
			c := rng.Uint64()
			if got, want := Update(c, p), crc64.Update(c, Table, p); got != want {
				t.Fatalf("len %d offset %d init %#x: %#x, hash/crc64 %#x", n, off, c, got, want)
			}
		}
	}
	big := make([]byte, 5<<20+7)
	rng.Read(big)
	if got, want := Checksum(big), crc64.Checksum(big, Table); got != want {
		t.Fatalf("5 MiB: %#x, hash/crc64 %#x", got, want)
	}
	// Split anywhere, the running CRC is the same.
	for _, cut := range []int{0, 1, 63, 64, 65, 4096, len(big) - 1} {
		if got := Update(Update(0, big[:cut]), big[cut:]); got != crc64.Checksum(big, Table) {
			t.Fatalf("split at %d: %#x", cut, got)
		}
	}
}

// A single flipped bit anywhere changes the checksum (the folded path sees
// every byte).
func TestUpdateSeesEveryBit(t *testing.T) {
	p := make([]byte, 4096)
	rand.New(rand.NewSource(2)).Read(p)
	base := Checksum(p)
	for i := 0; i < len(p)*8; i += 37 {
		p[i/8] ^= 1 << (i % 8)
		if Checksum(p) == base {
			t.Fatalf("flipping bit %d left the checksum unchanged", i)
		}
		p[i/8] ^= 1 << (i % 8)
	}
}

func TestPageAndDigestMatchLTX(t *testing.T) {
	page := make([]byte, 4096)
	rand.New(rand.NewSource(3)).Read(page)
	if got, want := ltx.ChecksumFlag|ltx.Checksum(Page(12345, page)), ltx.ChecksumPage(12345, page); got != want {
		t.Fatalf("Page: %s, ltx %s", got, want)
	}
	d := New()
	if got, want := ltx.ChecksumPageWithHasher(d, 7, page), ltx.ChecksumPage(7, page); got != want {
		t.Fatalf("Digest through ltx: %s, ltx %s", got, want)
	}
	h := crc64.New(Table)
	h.Write(page)
	d.Reset()
	d.Write(page)
	if string(d.Sum([]byte("x"))) != string(h.Sum([]byte("x"))) || d.Size() != h.Size() {
		t.Fatalf("Sum %x, hash/crc64 %x", d.Sum(nil), h.Sum(nil))
	}
}

func TestTablesAloneEqualHashCRC64(t *testing.T) {
	p := make([]byte, 300)
	rand.New(rand.NewSource(4)).Read(p)
	for n := range p {
		if got, want := ^updateTables(^uint64(5), p[:n]), crc64.Update(5, Table, p[:n]); got != want {
			t.Fatalf("len %d: %#x, want %#x", n, got, want)
		}
	}
}

func BenchmarkUpdate4KiB(b *testing.B) {
	p := make([]byte, 4096)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		Update(0, p)
	}
}

func BenchmarkHashCRC64_4KiB(b *testing.B) {
	p := make([]byte, 4096)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		crc64.Update(0, Table, p)
	}
}
