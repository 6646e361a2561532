// Package push tells the instances that follow a database what its writer
// has shipped, as it ships it, so that a follower fetches a commit as soon
// as the bucket holds it instead of at its next poll, and a waiting
// instance learns at once that the writer released the lease.
//
// The writer's side is a Hub: each subscriber of a database gets a
// long-lived streaming HTTP answer of one line per event, "shipped N" once
// the store accepted TXID N's file, "released" once the lease object says
// released (after "lease ETAG JSON": the record the release wrote, which a
// waiter replaces without reading it), and an empty line as a keep-alive. The follower's side is a
// Client that keeps one such stream open to whoever holds the lease and
// reconnects after a cut. A line is only a hint: a follower still fetches
// the file from the bucket by name, so nothing the bucket does not hold is
// ever applied, and a follower that misses a line, or cannot reach the
// writer at all (instances that cannot reach each other), keeps polling.
//
// It imports lease (the writer's lease, whose release ends a stream) and
// the standard library.
package push

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/lease"
)

// Limits on subscribers: a subscriber holds one connection; past these a
// new one is refused (it keeps polling).
const (
	DefaultMaxPerDatabase = 16
	DefaultMax            = 256
	// keepAlive: an idle stream sends an empty line this often, so a
	// subscriber notices a dead writer within readIdle.
	keepAlive = 10 * time.Second
	readIdle  = 3 * keepAlive
	// queued events per subscriber; one that falls this far behind is cut
	// (it reconnects and polls meanwhile) rather than slowing the writer.
	queued = 256
)

// Hub fans each database's shipped TXIDs out to its subscribers.
type Hub struct {
	maxPerDB, max int

	mu     sync.Mutex
	subs   map[string]map[*sub]struct{}
	n      int
	closed chan struct{}
}

type sub struct {
	ch     chan uint64
	cut    chan struct{}    // closed when the subscriber fell behind
	waiter *lease.Successor // an instance waiting for the lease (nil: a follower)
	since  time.Time
}

// NewHub returns a hub with the given limits (<= 0: the defaults).
func NewHub(maxPerDB, max int) *Hub {
	if maxPerDB <= 0 {
		maxPerDB = DefaultMaxPerDatabase
	}
	if max <= 0 {
		max = DefaultMax
	}
	return &Hub{maxPerDB: maxPerDB, max: max, subs: map[string]map[*sub]struct{}{}, closed: make(chan struct{})}
}

// Shipped tells db's subscribers that TXID txid is in the bucket. It never
// blocks: it runs on the shipping goroutine.
func (h *Hub) Shipped(db string, txid uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[db] {
		select {
		case s.ch <- txid:
		default:
			delete(h.subs[db], s)
			h.n--
			close(s.cut)
		}
	}
}

// Subscribers returns how many streams are open.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Followed reports whether db has a subscriber: another instance keeps a
// copy of it current from this writer's pushes.
func (h *Hub) Followed(db string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[db]) > 0
}

// Successor returns the instance to hand db's lease to when this writer
// stops: of the subscribers waiting for the lease whose stream is open and
// whom accept takes, the one subscribed last (the newest instance of a
// deploy subscribes after the older ones).
func (h *Hub) Successor(db string, accept func(lease.Successor) bool) (lease.Successor, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var best *sub
	for s := range h.subs[db] {
		if s.waiter != nil && (accept == nil || accept(*s.waiter)) && (best == nil || s.since.After(best.since)) {
			best = s
		}
	}
	if best == nil {
		return lease.Successor{}, false
	}
	return *best.waiter, true
}

// Close ends every stream; none opens afterwards.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.closed:
	default:
		close(h.closed)
	}
}

// ErrFull is Serve's answer when the subscriber limits are reached.
type ErrFull struct{ Limit int }

func (e ErrFull) Error() string {
	return "this instance already streams to " + strconv.Itoa(e.Limit) + " subscribers; keep polling the bucket"
}

// ErrClosing is Serve's answer once the hub closed (the server stops).
var ErrClosing = errors.New("this instance is shutting down; subscribe to the lease holder")

func (h *Hub) add(db string, waiter *lease.Successor) (*sub, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n >= h.max {
		return nil, ErrFull{Limit: h.max}
	}
	if len(h.subs[db]) >= h.maxPerDB {
		return nil, ErrFull{Limit: h.maxPerDB}
	}
	s := &sub{ch: make(chan uint64, queued), cut: make(chan struct{}), waiter: waiter, since: time.Now()}
	if h.subs[db] == nil {
		h.subs[db] = map[*sub]struct{}{}
	}
	h.subs[db][s] = struct{}{}
	h.n++
	return s, nil
}

func (h *Hub) remove(db string, s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[db][s]; ok {
		delete(h.subs[db], s)
		h.n--
		if len(h.subs[db]) == 0 {
			delete(h.subs, db)
		}
	}
}

// Serve streams db's events to one subscriber while this instance holds
// l, db's lease (the caller checked access and that l is held). It ends
// with "released" once the release is written to the bucket, and without
// it when the lease is lost, the hub closes, the subscriber falls behind
// or goes away. A refused subscription is an ErrFull or ErrClosing,
// before any byte.
//
// waiter, if set, is the subscriber's word that it waits for the lease and
// who it is (the caller checked that it may write db): Successor may name
// it while its stream is open.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, db string, l *lease.Lease, waiter *lease.Successor) error {
	select {
	case <-h.closed:
		return ErrClosing
	default:
	}
	s, err := h.add(db, waiter)
	if err != nil {
		return err
	}
	defer h.remove(db, s)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return nil
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	var line []byte
	// pending appends every queued event: the last files shipped before a
	// release go out before "released".
	pending := func(line []byte) []byte {
		for {
			select {
			case txid := <-s.ch:
				line = strconv.AppendUint(append(line, "shipped "...), txid, 10)
				line = append(line, '\n')
			default:
				return line
			}
		}
	}
	released := func() {
		// The record the release wrote, with its ETag, then "released": a
		// waiter takes the lease by a conditional replace of that record.
		line := pending(nil)
		if rec, etag := l.ReleasedAs(); etag != "" && !strings.ContainsAny(etag, " \n") {
			if body, err := json.Marshal(rec); err == nil {
				line = append(append(append(append(line, "lease "...), etag...), ' '), body...)
				line = append(line, '\n')
			}
		}
		w.Write(append(line, "released\n"...))
		rc.Flush()
	}
	for {
		line = line[:0]
		select {
		case txid := <-s.ch:
			line = strconv.AppendUint(append(line, "shipped "...), txid, 10)
			line = pending(append(line, '\n')) // one write, one flush for what queued meanwhile
		case <-l.Released():
			released()
			return nil
		case <-l.Lost():
			// Release closes Lost before it writes the release: wait a
			// moment for the bucket's word rather than end without it.
			select {
			case <-l.Released():
				released()
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			case <-h.closed:
			}
			return nil
		case <-tick.C:
			line = append(line, '\n')
		case <-s.cut:
			return nil
		case <-h.closed:
			return nil
		case <-r.Context().Done():
			return nil
		}
		if _, err := w.Write(line); err != nil {
			return nil
		}
		if rc.Flush() != nil {
			return nil
		}
	}
}
