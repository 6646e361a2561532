package server

import (
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/hrana/proto"
)

// wsCounts bounds the WebSocket connections one credential (without
// credentials: one client address) holds at once: each may carry up to
// hrana.max-streams-per-connection streams, each with a worker, so a
// client opening hundreds of connections would otherwise cost the server
// tens of thousands of goroutines.
type wsCounts struct {
	max int // 0: no limit
	mu  sync.Mutex
	n   map[string]int
}

// wsSlot is one connection's hold on its credential's count, taken at its
// first successful hello and given back when the connection ends.
type wsSlot struct {
	c   *wsCounts
	key string
}

func (c *wsCounts) take(s *wsSlot, key string) *proto.Error {
	if c.max <= 0 || s.key != "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] >= c.max {
		return &proto.Error{Code: dberr.CodeUnavailable, Message: "this token has " + strconv.Itoa(c.n[key]) +
			" WebSocket connections open, its limit (limits.max-websockets-per-token): share streams on fewer connections"}
	}
	c.n[key]++
	s.key = key
	return nil
}

func (s *wsSlot) release() {
	if s.key == "" {
		return
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.c.n[s.key]--; s.c.n[s.key] <= 0 {
		delete(s.c.n, s.key)
	}
	s.key = ""
}

// wsKey is what a connection is counted by: its owner, else its address.
func wsKey(owner string, r *http.Request) string {
	if owner != "" {
		return owner
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}
