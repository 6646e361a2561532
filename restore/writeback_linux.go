package restore

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing a range just written, so
// the fsync before the rename finds most of the file already on its way to
// disk instead of flushing it all at the end. Advisory: errors are ignored,
// the fsync still decides.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
