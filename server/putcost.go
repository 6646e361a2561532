package server

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// S3's list price for PUT (and COPY, POST, LIST) requests: $0.005 per 1,000.
const usdPerThousandPuts = 0.005

// putCounter counts every PUT request sluice makes to the replica (the
// write path's uploads, compaction, leases): what a bucket bills for them.
type putCounter struct {
	replica.Store
	puts atomic.Int64
}

func (s *putCounter) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	s.puts.Add(1)
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

func (s *putCounter) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (replica.ObjectInfo, error) {
	s.puts.Add(1)
	return s.Store.PutIfMatch(ctx, key, r, size, etag)
}

func (s *putCounter) Put(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	s.puts.Add(1)
	return s.Store.Put(ctx, key, r, size)
}

// putCost turns the PUT count into the figures /metrics reports.
type putCost struct {
	store *putCounter
	acked atomic.Int64 // writes acknowledged
	start time.Time
}

// perThousandWrites is PUT requests per 1,000 acknowledged writes since the
// server started (0 before the first write).
func (c *putCost) perThousandWrites() float64 {
	acked := c.acked.Load()
	if acked == 0 {
		return 0
	}
	return float64(c.store.puts.Load()) * 1000 / float64(acked)
}

// monthlyUSD is what the PUT requests would cost in 30 days on S3 at the
// average rate since the server started.
func (c *putCost) monthlyUSD(now time.Time) float64 {
	up := now.Sub(c.start).Seconds()
	if up <= 0 {
		return 0
	}
	perSecond := float64(c.store.puts.Load()) / up
	return perSecond * 30 * 24 * 3600 / 1000 * usdPerThousandPuts
}

// GetInfo keeps the wrapped store's one-request read of an object and its
// ETag (replica.InfoGetter) visible through the counter.
func (s *putCounter) GetInfo(ctx context.Context, key string) (io.ReadCloser, replica.ObjectInfo, error) {
	return replica.GetInfo(ctx, s.Store, key)
}
