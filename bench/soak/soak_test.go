package soak

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// windows builds full 10-second windows with the given values of one resource.
func windows(values ...float64) []Window {
	out := make([]Window, len(values))
	for i, v := range values {
		out[i] = Window{Index: i + 1, End: time.Duration(i+1) * 10 * time.Second, FDs: int(v), L0Backlog: int(v), Shipped: 100}
	}
	return out
}

func fds(w Window) float64 { return float64(w.FDs) }

func TestGrowthRule(t *testing.T) {
	g := growth{Resource: "descriptors", From: 20 * time.Second, Ratio: 1.5, Slack: 10, Unit: 1}
	for _, tc := range []struct {
		name   string
		values []float64
		ok     bool
		judged bool
	}{
		// The warm-up (first two windows) is left out, whatever it holds.
		{"plateau", []float64{5, 900, 100, 104, 98, 120, 101, 99, 110, 100, 103}, true, true},
		{"sawtooth", []float64{0, 0, 100, 160, 90, 150, 100, 155, 95, 160, 100}, true, true},
		{"leak", []float64{0, 0, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200}, false, true},
		{"jump late", []float64{0, 0, 100, 100, 100, 100, 100, 100, 100, 2048, 2048}, false, true},
		{"too short", []float64{0, 0, 100, 2048}, true, false},
	} {
		v := g.judge(windows(tc.values...), fds)
		if v.OK != tc.ok || v.Judged != tc.judged {
			t.Errorf("%s: ok %v judged %v, want %v %v (%s)", tc.name, v.OK, v.Judged, tc.ok, tc.judged, v.Detail)
		}
	}
	// The failure names the window holding the late peak.
	v := g.judge(windows(0, 0, 100, 100, 100, 100, 100, 100, 100, 2048, 100), fds)
	if v.OK || v.Window != 10 || !strings.Contains(v.Detail, "window 10") {
		t.Errorf("late jump: %+v", v)
	}
}

func TestCeilingRule(t *testing.T) {
	// Each window ships 100 files: the 30 s before a window's end shipped 300.
	c := ceiling{Resource: "level-0 backlog", From: 20 * time.Second, Span: 30 * time.Second, Slack: 10}
	backlog := func(w Window) float64 { return float64(w.L0Backlog) }
	if v := c.judge(windows(5000, 0, 300, 200, 100, 300, 200, 100), backlog); !v.OK || v.Limit != 310 || v.Window != 3 {
		t.Errorf("a compactor keeping up: %+v", v)
	}
	v := c.judge(windows(0, 0, 300, 350, 400, 450), backlog)
	if v.OK || v.Window != 6 || v.Limit != 310 {
		t.Errorf("a stalled compactor: %+v", v)
	}
	// A backlog built fast and compacted while writes slowed down is
	// measured against what was shipped, not against the slower rate.
	ws := windows(0, 0, 250, 280, 100, 50)
	for i, n := range []int64{100, 100, 100, 100, 10, 10} {
		ws[i].Shipped = n
	}
	if v := c.judge(ws, backlog); !v.OK {
		t.Errorf("a slowdown: %+v", v)
	}
	if r := medianShipping(ws, c.From); r != 10 {
		t.Errorf("median shipping %v files/s, want 10", r)
	}
}

func TestAcksCheck(t *testing.T) {
	const dbs = 3
	a := newAcks(2)
	keys := make([]map[int64]bool, dbs)
	for i := range keys {
		keys[i] = map[int64]bool{}
	}
	// VU 0 sent 10 inserts, 8 acknowledged; VU 1 sent 5, all acknowledged.
	// Every acknowledged row is restored, and one whose answer was lost.
	for vu, sent := range []uint64{10, 5} {
		a.sent[vu] = sent
		for it := uint64(0); it < sent; it++ {
			if vu == 0 && it >= 8 {
				if it == 8 {
					keys[dbFor(vu, it, dbs)][rowKey(vu, it)] = true
				}
				continue
			}
			a.acked[vu] = append(a.acked[vu], uint32(it))
			keys[dbFor(vu, it, dbs)][rowKey(vu, it)] = true
		}
	}
	names := []string{"a", "b", "c"}
	c := a.check(keys, names)
	if c.Acked != 13 || c.Present != 13 || c.Unacked != 1 || c.Foreign != 0 || c.Missing != "" {
		t.Fatalf("all present: %+v", c)
	}
	// A lost acknowledged write is named; a row in the wrong database is foreign.
	lost := rowKey(1, 3)
	delete(keys[dbFor(1, 3, dbs)], lost)
	keys[(dbFor(1, 4, dbs)+1)%dbs][rowKey(1, 4)] = true
	c = a.check(keys, names)
	if c.Present != 12 || c.Foreign != 1 || !strings.Contains(c.Missing, "VU 1, insert #3") {
		t.Fatalf("one lost, one foreign: %+v", c)
	}
}

func TestDBForSpreads(t *testing.T) {
	seen := map[int]int{}
	for vu := 0; vu < 50; vu++ {
		for it := uint64(0); it < 200; it++ {
			seen[dbFor(vu, it, 100)]++
		}
	}
	if len(seen) != 100 {
		t.Fatalf("10,000 inserts reached %d of 100 databases", len(seen))
	}
	for db, n := range seen {
		if n < 50 || n > 150 {
			t.Fatalf("database %d got %d of 10,000 inserts (want about 100)", db, n)
		}
	}
}

// The probe counts this process's own established connections to a port,
// and not the accepting side's sockets, from the real /proc.
func TestSampleProcCountsOwnConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	before, err := sampleProc(os.Getpid(), port)
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	after, err := sampleProc(os.Getpid(), port)
	if err != nil {
		t.Fatal(err)
	}
	// Dialled and accepted sockets are both ours, but only the dialled ones
	// have the listener's port as their remote port.
	if before.StoreConns != 0 || after.StoreConns != 3 {
		t.Fatalf("connections to port %d: %d before, %d after dialling 3", port, before.StoreConns, after.StoreConns)
	}
	if after.FDs < before.FDs+3 || after.RSS <= 0 {
		t.Fatalf("descriptors %d -> %d, RSS %d", before.FDs, after.FDs, after.RSS)
	}
	for _, c := range conns {
		c.Close()
	}
}

func TestRunRefusesAnUnknownDurability(t *testing.T) {
	_, err := Run(t.Context(), Options{Duration: time.Second, Connections: 1, Databases: 1, Durability: "fast", WorkDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "sync or async") {
		t.Fatalf("durability \"fast\": %v, want a usage error naming sync and async", err)
	}
}
