package embedded

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// writer inserts one row per commit through the JSON API, recording when
// each was acknowledged.
type writer struct {
	c     *client
	next  int64
	every time.Duration
	mu    sync.Mutex
	acks  []ack
}

type ack struct {
	id int64
	at float64 // wall clock, ms (as the replicas' worker reports)
}

func (w *writer) insert() error {
	id := w.next
	if _, err := w.c.query("INSERT INTO t(id, v) VALUES (?, ?)", id, fmt.Sprintf("written-%d", id)); err != nil {
		return err
	}
	w.next++
	w.mu.Lock()
	w.acks = append(w.acks, ack{id: id, at: float64(time.Now().UnixNano()) / 1e6})
	w.mu.Unlock()
	return nil
}

func (w *writer) run(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := w.insert(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

func (w *writer) acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acks)
}

func (w *writer) since(t time.Time) []ack {
	ms := float64(t.UnixNano()) / 1e6
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []ack
	for _, a := range w.acks {
		if a.at >= ms {
			out = append(out, a)
		}
	}
	return out
}
