package suite

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// ListOptions configures the LIST benchmark: LIST latency against object count.
type ListOptions struct {
	Store    replica.Store
	Counts   []int // object counts, ascending (default 1000, 5000, 15000)
	Parallel []int // concurrent listers (default 1, 8, 32)
	Runs     int   // sequential LISTs per count (the median is reported)
	Out      io.Writer
}

// ListRow is one measurement.
type ListRow struct {
	Objects  int
	Listers  int
	Median   time.Duration
	Max      time.Duration
	Listed   int
	Failures int
}

// List creates objects under a scratch prefix, times LIST at each count,
// sequentially and with parallel listers, and deletes them afterwards.
func List(ctx context.Context, o ListOptions) ([]ListRow, error) {
	if len(o.Counts) == 0 {
		o.Counts = []int{1000, 5000, 15000}
	}
	if len(o.Parallel) == 0 {
		o.Parallel = []int{1, 8, 32}
	}
	if o.Runs <= 0 {
		o.Runs = 5
	}
	sort.Ints(o.Counts)
	var tag [6]byte
	_, _ = rand.Read(tag[:])
	prefix := "sluice-bench-list-" + hex.EncodeToString(tag[:]) + "/"
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, format+"\n", args...) }
	var created []string
	defer func() {
		if len(created) == 0 {
			return
		}
		say("deleting %d scratch objects under %s…", len(created), prefix)
		for i := 0; i < len(created); i += 1000 {
			_ = o.Store.Delete(context.WithoutCancel(ctx), created[i:min(i+1000, len(created))]...)
		}
	}()

	var rows []ListRow
	for _, n := range o.Counts {
		say("creating objects %d…%d under %s%s", len(created), n, o.Store, prefix)
		keys, err := createObjects(ctx, o.Store, prefix, len(created), n)
		created = append(created, keys...)
		if err != nil {
			return rows, err
		}
		for _, p := range o.Parallel {
			row := ListRow{Objects: n, Listers: p}
			var (
				mu   sync.Mutex
				lats []time.Duration
			)
			runs := o.Runs
			if p > 1 {
				runs = 1 // each of the p listers lists once, all at the same time
			}
			for r := 0; r < runs; r++ {
				var wg sync.WaitGroup
				for i := 0; i < p; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						start := time.Now()
						objs, err := o.Store.List(ctx, prefix)
						d := time.Since(start)
						mu.Lock()
						defer mu.Unlock()
						if err != nil || len(objs) != n {
							row.Failures++
							return
						}
						row.Listed = len(objs)
						lats = append(lats, d)
					}()
				}
				wg.Wait()
			}
			if len(lats) > 0 {
				sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
				row.Median, row.Max = lats[len(lats)/2], lats[len(lats)-1]
			}
			rows = append(rows, row)
		}
	}
	say("\nsluice bench list — LIST latency against the number of objects (%s)\n", o.Store)
	say("| %8s | %8s | %10s | %10s | %8s |", "objects", "listers", "median", "max", "failures")
	say("|%s:|%s:|%s:|%s:|%s:|", dashes(9), dashes(9), dashes(11), dashes(11), dashes(9))
	for _, r := range rows {
		say("| %8d | %8d | %10s | %10s | %8d |", r.Objects, r.Listers, r.Median.Round(100*time.Microsecond), r.Max.Round(100*time.Microsecond), r.Failures)
	}
	say("\nA LIST grows with the prefix it walks; sluice never lists on its write path: the next file's name follows from the last TXID.")
	return rows, nil
}

// createObjects puts objects from..to-1 with 32 uploads in flight.
func createObjects(ctx context.Context, st replica.Store, prefix string, from, to int) ([]string, error) {
	keys := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		keys = append(keys, fmt.Sprintf("%sobj-%08d", prefix, i))
	}
	body := bytes.Repeat([]byte("x"), 128)
	work := make(chan string)
	errc := make(chan error, 32)
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				if _, err := st.Put(ctx, k, bytes.NewReader(body), int64(len(body))); err != nil {
					select {
					case errc <- fmt.Errorf("put %s: %w", k, err):
					default:
					}
				}
			}
		}()
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errc:
		return keys, err
	default:
		return keys, nil
	}
}
