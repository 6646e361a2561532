package restore

import (
	"encoding/binary"

	"github.com/superfly/ltx"
)

// pageChecksum equals ltx.ChecksumPage without its per-call allocations:
// CRC-64/ISO of the big-endian page number followed by the page.
func pageChecksum(pgno uint32, page []byte) ltx.Checksum {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], pgno)
	return ltxSum(crcUpdate(crcUpdate(0, n[:]), page))
}

func ltxSum(crc uint64) ltx.Checksum { return ltx.ChecksumFlag | ltx.Checksum(crc) }
