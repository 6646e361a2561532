// Package netdelay puts a network round trip between clients and a loopback
// server: a TCP proxy that holds every byte for half the round trip in each
// direction, as a link between two hosts would, without limiting bandwidth
// or reordering. Benchmarks point an application's remote connection at it
// to compare local work with work that crosses a real network.
// It imports only the standard library.
package netdelay

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Proxy forwards every connection made to Addr to its target, each byte
// delivered RTT/2 after it was read.
type Proxy struct {
	Addr string // host:port to dial instead of the target
	RTT  time.Duration

	target string
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool

	accepted atomic.Int64
}

// Accepted is how many connections the proxy has forwarded. A connection's
// handshake is not delayed (the proxy's own kernel answers it), so a client
// that opens one per request would pay one more round trip per request on
// a real network than it does here.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Start listens on a free loopback port and forwards to target (host:port).
func Start(target string, rtt time.Duration) (*Proxy, error) {
	if rtt < 0 {
		return nil, errors.New("netdelay: a negative round trip")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), RTT: rtt, target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(in, out)
	}
}

// serve forwards both directions of one connection until both end.
func (p *Proxy) serve(in, out net.Conn) {
	defer p.wg.Done()
	var both sync.WaitGroup
	both.Add(1)
	go func() {
		defer both.Done()
		p.pipe(out, in)
	}()
	p.pipe(in, out)
	both.Wait()
	in.Close()
	out.Close()
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}

// track remembers a connection pair so that Close can end it; false once
// the proxy is closed.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// chunk is what one read returned, and when.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst, each chunk written RTT/2 after it was read. The
// reader never waits for the writer (up to a bounded backlog), so a
// stream's bytes are late by the delay, not slowed by it.
func (p *Proxy) pipe(dst, src net.Conn) {
	backlog := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range backlog {
			sleepUntil(c.at.Add(p.RTT / 2))
			if _, err := dst.Write(c.b); err != nil {
				src.Close() // the reader stops at its next read
				for range backlog {
				}
				return
			}
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // the other side sees EOF after the delayed bytes
		} else {
			dst.Close()
		}
	}()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			backlog <- chunk{b: buf[:n], at: time.Now()}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			break
		}
	}
	close(backlog)
	<-done
}

// sleepUntil returns at t. It sleeps in the kernel (nanosleep): Go's own
// timers wake about a millisecond late on some machines, which would double
// a round trip of a millisecond.
func sleepUntil(t time.Time) {
	for d := time.Until(t); d > 0; d = time.Until(t) {
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil) // interrupted: the loop sleeps the rest
	}
}

// Close stops accepting and ends every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}
