package suite

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicedb/sluice/bench/targets"
	"github.com/sluicedb/sluice/server/dbhost"
)

// barePut returns a function that sends one conditional PUT (If-None-Match: *)
// of size bytes to the run's MinIO under a fresh key, as sluice ships a
// transaction file.
func barePut(ctx context.Context, env *targets.Env, size int) func() error {
	client := env.MinIO.Client()
	body := bytes.Repeat([]byte{'x'}, size)
	var seq atomic.Int64
	prefix := fmt.Sprintf("bare-put/%d-", time.Now().UnixNano())
	return func() error {
		_, err := client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(env.Bucket), Key: aws.String(fmt.Sprintf("%s%d", prefix, seq.Add(1))),
			Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(size)), IfNoneMatch: aws.String("*"),
		})
		if err != nil {
			return fmt.Errorf("bare PUT: %w", err)
		}
		return nil
	}
}

// barePuts is the floor of a sync write: bare conditional PUTs of size bytes,
// one at a time, for d. It returns the p50 and p99 in milliseconds.
func barePuts(ctx context.Context, env *targets.Env, size int, d time.Duration) (p50, p99 float64, err error) {
	put := barePut(ctx, env, size)
	for i := 0; i < 20; i++ { // warm the connection
		if err := put(); err != nil {
			return 0, 0, err
		}
	}
	var lat []float64
	for end := time.Now().Add(d); time.Now().Before(end); {
		start := time.Now()
		if err := put(); err != nil {
			return 0, 0, err
		}
		lat = append(lat, float64(time.Since(start).Microseconds())/1000)
	}
	sort.Float64s(lat)
	return lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], nil
}

// storePutRate is the most uploads the store takes on this machine with
// nothing else running: bare conditional PUTs of size bytes from as many
// goroutines as sluice serve keeps uploads in flight by default, for d. It
// is the ceiling of any row whose writes each need an upload of their own.
func storePutRate(ctx context.Context, env *targets.Env, size int, d time.Duration) (perSecond float64, inFlight int, err error) {
	inFlight = dbhost.DefaultMaxUploads
	put := barePut(ctx, env, size)
	var (
		done  atomic.Int64
		first error
		once  sync.Once
		wg    sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if err := put(); err != nil {
					once.Do(func() { first = err })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, inFlight, first
	}
	return float64(done.Load()) / time.Since(start).Seconds(), inFlight, nil
}
