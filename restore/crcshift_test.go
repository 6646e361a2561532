package restore

import (
	"encoding/binary"
	"hash/crc64"
	"math/rand/v2"
	"testing"

	"github.com/sluicedb/sluice/internal/crc64iso"
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
		want := crc64.Checksum(append(append([]byte{}, a...), b...), crc64iso.Table)
		got := crcAppend(crc64.Checksum(a, crc64iso.Table), crc64.Checksum(b, crc64iso.Table), shiftFor(n))
		if got != want {
			t.Fatalf("len(B)=%d: crcAppend %x, want %x", n, got, want)
		}
		var pg [4]byte
		binary.BigEndian.PutUint32(pg[:], 77)
		if s := crcAppend(crc64.Checksum(pg[:], crc64iso.Table), crc64.Checksum(b, crc64iso.Table), shiftFor(n)); ltxSum(s) != pageChecksum(77, b) {
			t.Fatalf("len %d: page checksum by appending differs", n)
		}
	}
}
