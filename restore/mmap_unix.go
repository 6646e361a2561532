//go:build unix

package restore

import (
	"os"

	"golang.org/x/sys/unix"
)

const mmapSupported = true

func mapFile(f *os.File, size int64) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// unmapFile flushes the mapping to the file (msync) and unmaps it; the
// caller's fsync then makes it durable.
func unmapFile(b []byte) error {
	if err := unix.Msync(b, unix.MS_SYNC); err != nil {
		_ = unix.Munmap(b)
		return err
	}
	return unix.Munmap(b)
}
