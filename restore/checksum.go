package restore

import (
	"github.com/sluicedb/sluice/internal/crc64iso"
	"github.com/superfly/ltx"
)

// pageChecksum equals ltx.ChecksumPage without its per-call allocations:
// CRC-64/ISO of the big-endian page number followed by the page.
func pageChecksum(pgno uint32, page []byte) ltx.Checksum {
	return ltxSum(crc64iso.Page(pgno, page))
}

func ltxSum(crc uint64) ltx.Checksum { return ltx.ChecksumFlag | ltx.Checksum(crc) }
