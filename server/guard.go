package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/hrana/ws"
)

// capListener accepts at most limit connections at once. One more is told
// so (503 naming the limit, unless TLS would garble it) and closed at once,
// rather than left waiting in the backlog where it would look like a hang.
type capListener struct {
	net.Listener
	slots   chan struct{}
	tls     bool
	refused atomic.Int64
}

func newCapListener(ln net.Listener, limit int, tls bool) net.Listener {
	if limit <= 0 {
		return ln
	}
	return &capListener{Listener: ln, slots: make(chan struct{}, limit), tls: tls}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
		}
		l.refused.Add(1)
		if !l.tls {
			msg := `{"error":{"code":"UNAVAILABLE","message":"the server has ` + strconv.Itoa(cap(l.slots)) +
				` connections open, its limit (limits.max-connections); retry shortly"}}` + "\n"
			c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
				strconv.Itoa(len(msg)) + "\r\n\r\n" + msg))
		}
		c.Close()
	}
}

type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// guardHTTP bounds what one request may hold: its body must arrive within
// the body read timeout (else 408 naming limits.body-read-timeout), and its
// answer is written in pieces, each of which the client must take within
// the write timeout (else the connection is dropped), so that a client that
// stops reading frees the answer it pinned. WebSocket upgrades pass as they
// are: their connections keep their own deadlines.
func (s *Server) guardHTTP(next http.Handler) http.Handler {
	lim := s.lim
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ws.IsUpgrade(r) {
			next.ServeHTTP(w, r)
			return
		}
		g := &guardWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: time.Duration(lim.WriteTimeout),
			r: r, max: int64(lim.MaxResponseBytes)}
		if g.timeout > 0 {
			// The previous answer on this connection left its deadline;
			// this request's clock starts at its first write.
			g.rc.SetWriteDeadline(time.Time{})
		}
		if lim.BodyReadTimeout > 0 && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			// Only while the body is read: once it ended, the connection's
			// read side watches for the client going away and must not time out.
			if g.rc.SetReadDeadline(time.Now().Add(time.Duration(lim.BodyReadTimeout))) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, g: g, r: r, limit: time.Duration(lim.BodyReadTimeout)}
			}
		}
		next.ServeHTTP(g, r)
	})
}

// guardWriter writes answers in pieces under a write deadline each, and
// drops what a handler writes after the body timed out (the 408 is out).
type guardWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	r        *http.Request
	timeout  time.Duration
	timedOut bool
	wrote    bool
	// max caps an answer that declares its length (Hrana's pipelines, the
	// JSON API's answers; the JSON API also stops building one past it):
	// a larger one is replaced by SQLITE_TOOBIG naming the limit, and
	// dropped rather than held for a client that may never read it.
	max      int64
	tooLarge bool
}

const writePiece = 64 << 10

func (g *guardWriter) WriteHeader(code int) {
	if g.timedOut || g.tooLarge || g.wrote {
		return
	}
	g.wrote = true
	if g.max > 0 && code < 300 {
		if n, err := strconv.ParseInt(g.Header().Get("Content-Length"), 10, 64); err == nil && n > g.max {
			g.tooLarge = true
			g.Header().Del("Content-Length")
			writeError(g.ResponseWriter, g.r, dberr.New(dberr.CodeTooBig, "the answer is "+units.FormatSize(n)+
				", larger than the server's limit of "+units.FormatSize(g.max)+" (limits.max-response-bytes): select fewer rows or columns, or page with LIMIT"))
			return
		}
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *guardWriter) Write(b []byte) (int, error) {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	if g.timedOut || g.tooLarge {
		return len(b), nil
	}
	if g.timeout <= 0 {
		return g.ResponseWriter.Write(b)
	}
	n := 0
	for len(b) > 0 {
		p := b[:min(len(b), writePiece)]
		g.rc.SetWriteDeadline(time.Now().Add(g.timeout))
		m, err := g.ResponseWriter.Write(p)
		n += m
		if err != nil {
			return n, err
		}
		b = b[len(p):]
	}
	return n, nil
}

func (g *guardWriter) Flush() {
	if g.timeout > 0 {
		g.rc.SetWriteDeadline(time.Now().Add(g.timeout))
	}
	g.rc.Flush()
}

func (g *guardWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// deadlineBody ends the body's read deadline at its end, and answers 408
// itself when the deadline passes first.
type deadlineBody struct {
	io.ReadCloser
	g     *guardWriter
	r     *http.Request
	limit time.Duration
	done  bool
}

func (d *deadlineBody) Read(p []byte) (int, error) {
	n, err := d.ReadCloser.Read(p)
	if err == nil || d.done {
		return n, err
	}
	d.done = true
	if errors.Is(err, os.ErrDeadlineExceeded) {
		d.timeout()
		return n, err
	}
	d.g.rc.SetReadDeadline(time.Time{})
	return n, err
}

// timeout answers 408 unless the handler already answered, closes the
// body (so the server does not wait for the rest of it) and the connection.
func (d *deadlineBody) timeout() {
	g := d.g
	if !g.wrote {
		g.Header().Set("Connection", "close")
		writeError(g.ResponseWriter, d.r, dberr.New(dberr.CodeTimeout,
			"the request body did not arrive within "+d.limit.String()+" (limits.body-read-timeout)"))
	}
	g.timedOut = true
	d.ReadCloser.Close()
}

// refuseBody is for an answer given without reading the request's body
// (no credentials, too large): the body is closed unread and the
// connection with it, so the answer goes out at once instead of after the
// server drained a body that may never end.
//
// Only a body of unknown length (chunked) needs it: the server never reads
// more than 256 KiB of a declared one after the answer, and closing that
// one early would reset the client before it read the answer.
func refuseBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength >= 0 {
		return
	}
	w.Header().Set("Connection", "close")
	// Closing a chunked body reads up to 256 KiB of it: make that fail at once.
	http.NewResponseController(w).SetReadDeadline(time.Now())
	r.Body.Close()
}
