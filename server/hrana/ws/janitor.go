package ws

import (
	"time"

	"github.com/coder/websocket"
)

// janitor closes the connection when it idles, when no hello came, or when
// its credential expired, and rolls back transactions past TxTimeout.
func (c *conn) janitor() {
	idleTimeout := c.srv.cfg.IdleTimeout
	tick := max(min(c.srv.streams.Config().TxTimeout, idleTimeout, time.Second)/10, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-t.C:
			c.mu.Lock()
			idle := c.busy == 0 && now.Sub(c.lastActive) > idleTimeout
			noHello := !c.helloDone && now.Sub(c.started) > helloTimeout
			expired := !c.expires.IsZero() && now.After(c.expires)
			live := make([]*connStream, 0, len(c.live))
			for st := range c.live {
				live = append(live, st)
			}
			c.mu.Unlock()
			switch {
			case noHello:
				c.closeWith(websocket.StatusPolicyViolation, "no hello within "+helloTimeout.String())
			case expired:
				c.closeWith(websocket.StatusPolicyViolation, "the credential expired: reconnect, or send a hello with a fresh JWT before it expires")
			case idle:
				c.closeWith(websocket.StatusGoingAway, "idle for "+idleTimeout.String())
			}
			for _, st := range live {
				c.expireTx(st, now)
			}
		}
	}
}

// expireTx rolls back st's transaction once it is open longer than
// TxTimeout, since it holds the database's writer; the stream then answers
// every request with the timeout until it is closed.
func (c *conn) expireTx(st *connStream, now time.Time) {
	if !st.mu.TryLock() {
		return // a request is running: its own deadline covers it
	}
	defer st.mu.Unlock()
	if st.s != nil {
		c.srv.streams.ExpireTx(st.s, now)
	}
}

// teardown ends every stream once the connection is gone: queued requests
// are dropped, transactions rolled back, quota slots returned.
func (c *conn) teardown() {
	for _, st := range c.streams {
		if st.jobs != nil {
			close(st.jobs)
		}
	}
	c.workers.Wait()
	c.mu.Lock()
	live := make([]*connStream, 0, len(c.live))
	for st := range c.live {
		live = append(live, st)
	}
	c.mu.Unlock()
	for _, st := range live {
		c.endStream(st)
	}
	c.awaitCloseHandshake() // the client hears why before the connection drops
	_ = c.ws.CloseNow()
}
