package restore

import (
	"encoding/binary"
	"hash/crc64"

	"github.com/superfly/ltx"
)

var crcTable = crc64.MakeTable(crc64.ISO)

// pageChecksum equals ltx.ChecksumPage without its per-call allocations:
// CRC-64/ISO of the big-endian page number followed by the page.
func pageChecksum(pgno uint32, page []byte) ltx.Checksum {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], pgno)
	return ltx.ChecksumFlag | ltx.Checksum(crc64.Update(crc64.Update(0, crcTable, n[:]), crcTable, page))
}

func ltxSum(crc uint64) ltx.Checksum { return ltx.ChecksumFlag | ltx.Checksum(crc) }
