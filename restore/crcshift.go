package restore

import (
	"sync"

	"github.com/sluicedb/sluice/internal/crc64iso"
)

// A CRC over A followed by B equals shift(crc(A), len(B)) XOR crc(B), where
// shift feeds len(B) zero bytes through the CRC register (the pre- and
// post-inversion of Go's CRC-64 cancel out). This lets one CRC pass over a
// page serve both checksums LTX defines over it: the file checksum (the page
// inside the whole file's byte stream) and the page checksum (the page after
// its 4-byte number), each then costing eight table lookups instead of a
// second pass over the page.

// crcShift applies the zero-byte operator for one fixed length n as eight
// byte-indexed tables.
type crcShift [8][256]uint64

var crcShifts sync.Map // n -> *crcShift

// shiftFor returns the operator feeding n zero bytes, built once per n.
func shiftFor(n int) *crcShift {
	if s, ok := crcShifts.Load(n); ok {
		return s.(*crcShift)
	}
	// The image of each of the 64 register bits after n zero bytes.
	var basis [64]uint64
	for i := range basis {
		r := uint64(1) << i
		for range n {
			r = crc64iso.Table[byte(r)] ^ (r >> 8)
		}
		basis[i] = r
	}
	s := new(crcShift)
	for j := range 8 {
		for b := range 256 {
			var v uint64
			for bit := range 8 {
				if b&(1<<bit) != 0 {
					v ^= basis[8*j+bit]
				}
			}
			s[j][b] = v
		}
	}
	actual, _ := crcShifts.LoadOrStore(n, s)
	return actual.(*crcShift)
}

// apply returns the register r after the operator's zero bytes.
func (s *crcShift) apply(r uint64) uint64 {
	return s[0][byte(r)] ^ s[1][byte(r>>8)] ^ s[2][byte(r>>16)] ^ s[3][byte(r>>24)] ^
		s[4][byte(r>>32)] ^ s[5][byte(r>>40)] ^ s[6][byte(r>>48)] ^ s[7][byte(r>>56)]
}

// crcAppend returns the CRC of A||B from crc(A), crc(B) and the operator for len(B).
func crcAppend(crcA, crcB uint64, shiftB *crcShift) uint64 {
	return shiftB.apply(crcA) ^ crcB
}
