package soak

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procSample is what /proc says about the server process at one moment.
type procSample struct {
	RSS        int64 // bytes
	FDs        int   // open descriptors
	StoreConns int   // established TCP connections to the store's port
}

// sampleProc reads the RSS, the open descriptors and the established TCP
// connections to storePort of process pid. The connections are the process's
// own: the socket inodes among its descriptors, matched against the
// namespace-wide /proc/PID/net/tcp{,6} tables.
func sampleProc(pid, storePort int) (procSample, error) {
	var s procSample
	dir := "/proc/" + strconv.Itoa(pid)
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return s, fmt.Errorf("read %s/status (has the server exited?): %w", dir, err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return s, fmt.Errorf("parse VmRSS %q of %s/status: %w", rest, dir, err)
			}
			s.RSS = kb << 10
		}
	}
	fds, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return s, fmt.Errorf("list %s/fd: %w", dir, err)
	}
	s.FDs = len(fds)
	sockets := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(dir + "/fd/" + fd.Name())
		if err != nil {
			continue // closed since the listing
		}
		if inode, ok := strings.CutPrefix(target, "socket:["); ok {
			sockets[strings.TrimSuffix(inode, "]")] = true
		}
	}
	for _, table := range []string{"tcp", "tcp6"} {
		raw, err := os.ReadFile(dir + "/net/" + table)
		if err != nil {
			if table == "tcp6" && os.IsNotExist(err) {
				continue
			}
			return s, fmt.Errorf("read %s/net/%s: %w", dir, table, err)
		}
		s.StoreConns += countEstablished(raw, storePort, sockets)
	}
	return s, nil
}

// tcpEstablished is the kernel's code for ESTABLISHED in /proc/net/tcp.
const tcpEstablished = "01"

// countEstablished counts the rows of a /proc/net/tcp table that are
// ESTABLISHED, connect to remotePort and belong to one of sockets (inodes).
func countEstablished(table []byte, remotePort int, sockets map[string]bool) int {
	port := fmt.Sprintf(":%04X", remotePort)
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(table))
	sc.Buffer(make([]byte, 4096), 1<<20)
	for first := true; sc.Scan(); first = false {
		if first {
			continue // header
		}
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != tcpEstablished || !strings.HasSuffix(f[2], port) {
			continue
		}
		if sockets[f[9]] {
			n++
		}
	}
	return n
}
