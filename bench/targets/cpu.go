package targets

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/PID/stat's CPU times; it is
// 100 on every architecture Linux supports.
const clockTicks = 100

// CPUTime is the user and system CPU time process pid has used so far (its
// own, not its children's), from /proc/PID/stat.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("CPU time of process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces: count
	// fields after its closing parenthesis. utime and stime are fields 14, 15.
	end := strings.LastIndexByte(string(b), ')')
	if end < 0 {
		return 0, fmt.Errorf("CPU time of process %d: unreadable /proc/%d/stat", pid, pid)
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("CPU time of process %d: /proc/%d/stat has %d fields after the name", pid, pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("CPU time of process %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
