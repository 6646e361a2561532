package netdelay_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sluicedb/sluice/bench/netdelay"
)

// echo is a loopback server that answers every line with the same line.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// echoThrough starts a proxy with rtt in front of an echo server and
// returns it with one connection through it.
func echoThrough(t *testing.T, rtt time.Duration) (*netdelay.Proxy, *echoConn) {
	t.Helper()
	p, err := netdelay.Start(echo(t), rtt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return p, &echoConn{c: c, r: bufio.NewReader(c)}
}

type echoConn struct {
	c net.Conn
	r *bufio.Reader
}

// roundTrip sends line (ending in a newline) and reads it back, timed.
func (e *echoConn) roundTrip(t *testing.T, line []byte) ([]byte, time.Duration) {
	t.Helper()
	start := time.Now()
	if _, err := e.c.Write(line); err != nil {
		t.Fatal(err)
	}
	got, err := e.r.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	return got, time.Since(start)
}

func TestEveryRoundTripTakesTheDelayAndKeepsTheBytes(t *testing.T) {
	const rtt = 20 * time.Millisecond
	p, c := echoThrough(t, rtt)
	var took []time.Duration
	for i := range 5 {
		line := bytes.Repeat([]byte{'a' + byte(i)}, 100<<10) // larger than one read
		line = append(line, '\n')
		got, d := c.roundTrip(t, line)
		took = append(took, d)
		if !bytes.Equal(got, line) {
			t.Fatalf("round trip %d: %d bytes came back changed", i, len(got))
		}
	}
	for i, d := range took {
		if d < rtt {
			t.Errorf("round trip %d took %s, less than the %s delay", i, d, rtt)
		}
	}
	t.Logf("round trips through a %s proxy: %v", rtt, took)
	if n := p.Accepted(); n != 1 {
		t.Fatalf("the proxy counts %d connections; one was made", n)
	}
}

// A round trip of a millisecond takes about a millisecond, not the two a
// timer that wakes late would make of it.
func TestAShortRoundTripIsNotRoundedUp(t *testing.T) {
	const rtt = time.Millisecond
	_, c := echoThrough(t, rtt)
	var took []time.Duration
	for range 31 {
		_, d := c.roundTrip(t, []byte("ping\n"))
		took = append(took, d)
	}
	slices.Sort(took)
	median := took[len(took)/2]
	t.Logf("%s round trips: median %s, fastest %s, slowest %s", rtt, median, took[0], took[len(took)-1])
	if took[0] < rtt || median > rtt+900*time.Microsecond {
		t.Fatalf("%s round trips took %s at the fastest and %s at the median; want at least %s and about that", rtt, took[0], median, rtt)
	}
}

func TestCloseEndsOpenConnections(t *testing.T) {
	p, err := netdelay.Start(echo(t), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with a connection open")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	// Ended: an end of file or a reset (the echo's answer may be unread).
	if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the client's connection did not end: %v", err)
	}
}
