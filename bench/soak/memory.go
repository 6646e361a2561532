package soak

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// memorySample splits the server's memory by owner, from its /metrics: what
// the Go runtime holds mapped and what SQLite holds allocated. With RSS
// beside them a growing RSS points at its cause (the rest is the binary,
// thread stacks and the SQLite allocator's slack).
type memorySample struct {
	GoMapped int64 // bytes
	SQLite   int64 // bytes
}

var metricsClient = &http.Client{Timeout: 5 * time.Second}

func sampleMemory(ctx context.Context, base string) (memorySample, error) {
	var m memorySample
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return m, err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return m, fmt.Errorf("read the server's /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("read the server's /metrics: status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var into *int64
		switch name {
		case "sluice_go_memory_mapped_bytes":
			into = &m.GoMapped
		case "sluice_sqlite_memory_bytes":
			into = &m.SQLite
		default:
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return m, fmt.Errorf("metric %s: %q is not a number", name, value)
		}
		*into = int64(f)
	}
	return m, sc.Err()
}
