package restore

import (
	"encoding/binary"
	"hash/crc64"
	"runtime"
	"sync"

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

// checksumImage is LTX's rolling database checksum of img (ChecksumFlag | XOR
// of every page's checksum, the lock page excluded), computed on every core.
func checksumImage(img []byte, pageSize uint32) ltx.Checksum {
	ps := int(pageSize)
	n := uint32(len(img) / ps)
	lock := ltx.LockPgno(pageSize)
	workers := uint32(runtime.GOMAXPROCS(0))
	if n < 256 || workers < 1 {
		workers = 1
	}
	per := (n + workers - 1) / workers
	sums := make([]ltx.Checksum, workers)
	var wg sync.WaitGroup
	for w := uint32(0); w < workers; w++ {
		first, last := w*per+1, min((w+1)*per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sum ltx.Checksum
			for pgno := first; pgno <= last; pgno++ {
				if pgno != lock {
					off := int(pgno-1) * ps
					sum ^= pageChecksum(pgno, img[off:off+ps])
				}
			}
			sums[w] = sum
		}()
	}
	wg.Wait()
	sum := ltx.ChecksumFlag
	for _, s := range sums {
		sum ^= s
	}
	return sum | ltx.ChecksumFlag
}
