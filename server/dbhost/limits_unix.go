//go:build unix

package dbhost

import "syscall"

// descriptorLimit is this process's soft limit on open files (0: unknown).
func descriptorLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}
