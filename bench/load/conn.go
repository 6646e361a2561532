package load

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Failure kinds that are not an HTTP status.
const (
	FailTimeout = "timeout"
	FailConnect = "connect error"
	FailConn    = "connection error"
)

// outcome is what one request came to.
type outcome struct {
	status  int    // 0 if no answer was read
	failure string // "" on success
	sent    bool   // the request reached the wire (its effect is unknown if there was no answer)
}

// vuConn is one VU's keep-alive connection and its reusable buffers.
type vuConn struct {
	conn    net.Conn
	addr    string
	br      *bufio.Reader
	body    bytes.Buffer
	timeout time.Duration
}

func (c *vuConn) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// do sends req and reads the whole answer. It never retries: a retried write
// could be applied twice and spoil -verify's count.
func (c *vuConn) do(req *Request) outcome {
	if c.conn == nil || c.addr != req.addr {
		c.close()
		conn, err := net.DialTimeout("tcp", req.addr, c.timeout)
		if err != nil {
			return outcome{failure: classify(err, FailConnect)}
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		c.conn, c.addr = conn, req.addr
		if c.br == nil {
			c.br = bufio.NewReaderSize(conn, 32<<10)
		} else {
			c.br.Reset(conn)
		}
	}
	_ = c.conn.SetDeadline(time.Now().Add(c.timeout))
	if _, err := c.conn.Write(req.raw); err != nil {
		c.close()
		return outcome{failure: classify(err, FailConn), sent: true}
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.close()
		return outcome{failure: classify(err, FailConn), sent: true}
	}
	c.body.Reset()
	_, err = c.body.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.close()
		return outcome{status: resp.StatusCode, failure: classify(err, FailConn), sent: true}
	}
	if resp.Close {
		c.close()
	}
	o := outcome{status: resp.StatusCode, sent: true}
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		o.failure = "http " + strconv.Itoa(resp.StatusCode)
	case req.Check != nil:
		o.failure = req.Check(c.body.Bytes())
	}
	return o
}

func classify(err error, otherwise string) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return FailTimeout
	}
	return otherwise
}
