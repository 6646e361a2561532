package restore

import (
	"encoding/binary"
	"hash/crc64"
	"math/rand/v2"
	"testing"
)

func TestCRCAppendEqualsCRCOfConcatenation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 4, 10, 512, 4096, 65536} {
		a, b := make([]byte, 1+rng.IntN(100)), make([]byte, n)
		for i := range a {
			a[i] = byte(rng.Uint32())
		}
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		want := crc64.Checksum(append(append([]byte{}, a...), b...), crcTable)
		got := crcAppend(crc64.Checksum(a, crcTable), crc64.Checksum(b, crcTable), shiftFor(n))
		if got != want {
			t.Fatalf("len(B)=%d: crcAppend %x, want %x", n, got, want)
		}
		var pg [4]byte
		binary.BigEndian.PutUint32(pg[:], 77)
		if s := crcAppend(crc64.Checksum(pg[:], crcTable), crc64.Checksum(b, crcTable), shiftFor(n)); ltxSum(s) != pageChecksum(77, b) {
			t.Fatalf("len %d: page checksum by appending differs", n)
		}
	}
}

func TestCRCUpdateEqualsStandardLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 5000; n += 1 + n/8 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		init := rng.Uint64()
		if got, want := crcUpdate(init, b), crc64.Update(init, crcTable, b); got != want {
			t.Fatalf("len %d: crcUpdate %x, want %x", n, got, want)
		}
	}
}
