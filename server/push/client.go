package push

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/lease"
)

// Path is the stream's route under an instance's URL, for database name.
func Path(name string) string { return "/v1/databases/" + url.PathEscape(name) + "/shipped" }

// Events are what a Client hears. Any may be nil; they run on the
// Client's goroutine and must be quick.
type Events struct {
	Shipped  func(txid uint64) // the writer shipped TXID txid (a hint: fetch it by name)
	Released func()            // the writer released the lease (in the bucket already)
	// ReleasedAs, if set, hears the release instead of Released, with the
	// record the bucket holds since and its ETag when the writer said them
	// (rec nil otherwise): a waiter replaces it without reading it first.
	ReleasedAs func(rec *lease.Record, etag string)
	Ended      func() // an open stream ended without "released": look again
}

// Client subscribes to writers' streams.
type Client struct {
	// Token returns the bearer token sent to name's writer ("" sends none):
	// one of the tokens every instance is configured with.
	Token func(name string) string
	// Self is this instance's own URL: never subscribed to.
	Self   string
	Logger *slog.Logger
	HTTP   *http.Client // [a client with a 2 s dial and header timeout]
}

var defaultHTTP = &http.Client{Transport: &http.Transport{
	Proxy:                 nil, // instances talk directly
	DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 15 * time.Second}).DialContext,
	ResponseHeaderTimeout: 2 * time.Second,
	MaxIdleConnsPerHost:   4,
	IdleConnTimeout:       30 * time.Second,
}}

// maxLine bounds a line of the stream: a lease record is a few hundred bytes.
const maxLine = 4096

// Backoff between attempts: from minWait, doubling to maxWait; a stream
// that stayed up resets it.
const (
	minWait = 50 * time.Millisecond
	maxWait = 10 * time.Second
)

// Follow keeps a stream of name's events open until ctx ends. holder
// returns the URL of name's writer ("" when none is known: wait and ask
// again); it is asked again before every attempt, so a new writer is
// found after a hand-over. Failures only delay: the caller keeps polling.
func (c *Client) Follow(ctx context.Context, name string, holder func(ctx context.Context) (string, error), ev Events) {
	c.FollowAs(ctx, name, holder, ev, nil)
}

// HeaderWaiter carries a subscriber's word that it waits for the lease, as
// a JSON lease.Successor: the writer may hand it the lease when it stops.
const HeaderWaiter = "Sluice-Lease-Waiter"

// FollowAs is Follow by an instance waiting for name's lease (waiter; nil:
// a follower), which the writer may hand it to when it stops: the record
// then names waiter, and ReleasedAs hears it.
func (c *Client) FollowAs(ctx context.Context, name string, holder func(ctx context.Context) (string, error), ev Events, waiter *lease.Successor) {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("db", name)
	wait := minWait
	failing := false
	for ctx.Err() == nil {
		u, err := holder(ctx)
		up := false
		if err == nil && u != "" && strings.TrimRight(u, "/") != strings.TrimRight(c.Self, "/") {
			var opened time.Time
			opened, err = c.stream(ctx, strings.TrimRight(u, "/")+Path(name), name, ev, waiter)
			if !opened.IsZero() {
				up = true
				if failing {
					log.Info("following the writer's pushes again", "writer", u)
					failing = false
				}
				if time.Since(opened) > 2*time.Second {
					wait = minWait
				}
			}
		}
		if err != nil && ctx.Err() == nil && !failing && !up {
			failing = true
			log.Info("cannot follow the writer's pushes; polling the bucket meanwhile", "writer", u, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, maxWait)
	}
}

// stream runs one subscription; opened is when it was accepted (zero if
// it was not).
func (c *Client) stream(ctx context.Context, u, name string, ev Events, waiter *lease.Successor) (opened time.Time, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return time.Time{}, err
	}
	if c.Token != nil {
		if tok := c.Token(name); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	if waiter != nil {
		if b, err := json.Marshal(waiter); err == nil {
			req.Header.Set(HeaderWaiter, string(b))
		}
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return time.Time{}, fmt.Errorf("%s answered %s", u, resp.Status)
	}
	opened = time.Now()
	// A writer that stops sending (even keep-alives) is dead to us.
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	go func() {
		t := time.NewTicker(readIdle / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if time.Since(time.Unix(0, last.Load())) > readIdle {
					cancel()
					return
				}
			}
		}
	}()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 256), maxLine)
	var releasedRec *lease.Record
	var releasedTag string
	for sc.Scan() {
		last.Store(time.Now().UnixNano())
		line := sc.Text()
		switch {
		case line == "":
		case line == "released":
			switch {
			case ev.ReleasedAs != nil:
				ev.ReleasedAs(releasedRec, releasedTag)
			case ev.Released != nil:
				ev.Released()
			}
			return opened, nil
		case strings.HasPrefix(line, "lease "):
			// "lease ETAG JSON": the record the release wrote, just before "released".
			etag, body, ok := strings.Cut(strings.TrimPrefix(line, "lease "), " ")
			var rec lease.Record
			if ok && etag != "" && json.Unmarshal([]byte(body), &rec) == nil {
				releasedRec, releasedTag = &rec, etag
			}
		case strings.HasPrefix(line, "shipped "):
			txid, err := strconv.ParseUint(strings.TrimPrefix(line, "shipped "), 10, 64)
			if err != nil {
				return opened, fmt.Errorf("%s sent %q: not a TXID", u, line)
			}
			if ev.Shipped != nil {
				ev.Shipped(txid)
			}
		}
		// Unknown lines are skipped: a newer writer may say more.
	}
	if ev.Ended != nil {
		ev.Ended()
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return opened, err
	}
	return opened, nil
}
