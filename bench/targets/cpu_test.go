package targets

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func rusageCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The kernel's own account of this process (getrusage) is the reference.
func TestCPUTimeAgreesWithTheKernelsAccount(t *testing.T) {
	before, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	start := rusageCPU(t)
	x := 0
	for rusageCPU(t)-start < 300*time.Millisecond {
		x++
	}
	spent := rusageCPU(t) - start
	after, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts in 10 ms ticks; allow a few at each end.
	if d := after - before; d < spent-50*time.Millisecond || d > spent+200*time.Millisecond {
		t.Errorf("CPUTime grew by %s while getrusage counted %s (%d iterations)", d, spent, x)
	}
	if _, err := CPUTime(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
