package inspect

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// Level summarizes the files of one level.
type Level struct {
	Level   int       `json:"level"`
	Files   int       `json:"files"`
	MinTXID ltx.TXID  `json:"min_txid"`
	MaxTXID ltx.TXID  `json:"max_txid"`
	Bytes   int64     `json:"bytes"`
	Oldest  time.Time `json:"oldest"` // creation time of the oldest file
	Newest  time.Time `json:"newest"`
}

// Range is a run of consecutive restorable TXIDs, First..Last, every one of
// which `restore -txid` rebuilds. FirstTime and LastTime are the commit times
// recorded in the LTX headers: `restore -timestamp T` picks the newest point
// whose time is at or before T.
type Range struct {
	First     ltx.TXID  `json:"first_txid"`
	Last      ltx.TXID  `json:"last_txid"`
	Points    int       `json:"points"`
	FirstTime time.Time `json:"first_time"`
	LastTime  time.Time `json:"last_time"`
}

// Summary describes a replica.
type Summary struct {
	Replica string  `json:"replica"`
	Levels  []Level `json:"levels"`
	Files   int     `json:"files"`
	Bytes   int64   `json:"bytes"`
	// Oldest and Newest are the creation times of the oldest and newest files.
	Oldest time.Time `json:"oldest"`
	Newest time.Time `json:"newest"`

	// The newest TXID any file reaches, and whether a chain of files
	// rebuilds it (false: the replica has a gap; Latest is the newest
	// point that can be restored).
	MaxTXID           ltx.TXID  `json:"max_txid"`
	MaxTXIDRestorable bool      `json:"max_txid_restorable"`
	Latest            ltx.TXID  `json:"latest_restorable_txid"`
	LatestTime        time.Time `json:"latest_time"`
	PageSize          uint32    `json:"page_size"`
	Pages             uint32    `json:"pages"`
	DatabaseBytes     int64     `json:"database_bytes"` // the database at Latest: pages × page size
	Footprint         float64   `json:"footprint"`      // Bytes / DatabaseBytes
	RestorePoints     int       `json:"restore_points"`
	RestoreRanges     []Range   `json:"restore_ranges"`
}

// Summarize lists every level of s and reads the headers it needs (the ends
// of each run of restore points), parallelism at a time. An empty replica is
// ErrEmpty.
func Summarize(ctx context.Context, s replica.Store, parallelism int) (Summary, error) {
	files, err := Files(ctx, s, AllLevels)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{Replica: s.String()}
	if len(files) == 0 {
		return sum, fmt.Errorf("%s: %w", s, ErrEmpty)
	}
	sum.Levels = levels(files)
	for _, f := range files {
		sum.Files++
		sum.Bytes += f.Size
		sum.MaxTXID = max(sum.MaxTXID, f.MaxTXID)
		if sum.Oldest.IsZero() || f.Created.Before(sum.Oldest) {
			sum.Oldest = f.Created
		}
		if f.Created.After(sum.Newest) {
			sum.Newest = f.Created
		}
	}

	points := RestorePoints(files)
	sum.RestorePoints = len(points)
	if len(points) == 0 {
		return sum, nil // no snapshot: nothing restorable, which the caller reports
	}
	sum.Latest = points[len(points)-1]
	sum.MaxTXIDRestorable = sum.Latest == sum.MaxTXID
	ranges := runs(points)

	// One header per distinct range end, from the smallest file ending there.
	byMax := map[ltx.TXID]File{}
	for _, f := range files {
		if cur, ok := byMax[f.MaxTXID]; !ok || f.Size < cur.Size {
			byMax[f.MaxTXID] = f
		}
	}
	var want []File
	seen := map[ltx.TXID]bool{}
	for _, r := range ranges {
		for _, t := range []ltx.TXID{r.First, r.Last} {
			if !seen[t] {
				seen[t] = true
				want = append(want, byMax[t])
			}
		}
	}
	hdrs, err := readHeaders(ctx, s, want, parallelism)
	if err != nil {
		return sum, err
	}
	byTXID := map[ltx.TXID]ltx.Header{}
	for _, h := range hdrs {
		byTXID[h.MaxTXID] = h
	}
	for i := range ranges {
		ranges[i].FirstTime = time.UnixMilli(byTXID[ranges[i].First].Timestamp).UTC()
		ranges[i].LastTime = time.UnixMilli(byTXID[ranges[i].Last].Timestamp).UTC()
	}
	sum.RestoreRanges = ranges
	latest := byTXID[sum.Latest]
	sum.LatestTime = time.UnixMilli(latest.Timestamp).UTC()
	sum.PageSize, sum.Pages = latest.PageSize, latest.Commit
	sum.DatabaseBytes = int64(latest.PageSize) * int64(latest.Commit)
	if sum.DatabaseBytes > 0 {
		sum.Footprint = float64(sum.Bytes) / float64(sum.DatabaseBytes)
	}
	return sum, nil
}

// levels groups files (sorted by level) into per-level summaries.
func levels(files []File) []Level {
	var out []Level
	for _, f := range files {
		if len(out) == 0 || out[len(out)-1].Level != f.Level {
			out = append(out, Level{Level: f.Level, MinTXID: f.MinTXID, Oldest: f.Created, Newest: f.Created})
		}
		l := &out[len(out)-1]
		l.Files++
		l.Bytes += f.Size
		l.MinTXID = min(l.MinTXID, f.MinTXID)
		l.MaxTXID = max(l.MaxTXID, f.MaxTXID)
		if f.Created.Before(l.Oldest) {
			l.Oldest = f.Created
		}
		if f.Created.After(l.Newest) {
			l.Newest = f.Created
		}
	}
	return out
}

// RestorePoints returns, ascending, every TXID a chain of files rebuilds:
// the chain starts at a file beginning at TXID 1 and each next file begins at
// or before the TXID after the current one and ends past it (restore's plan
// accepts the same chains, overlaps included). Each file's end is reachable
// only from ends below it, so one pass in order of MaxTXID settles them all.
func RestorePoints(files []File) []ltx.TXID {
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].MaxTXID < sorted[j].MaxTXID })
	reached := []ltx.TXID{0} // ascending; 0 is the empty database
	for _, f := range sorted {
		if f.MinTXID == 0 || f.MaxTXID < f.MinTXID || f.MaxTXID == reached[len(reached)-1] {
			continue
		}
		// Is some reached TXID r in [MinTXID-1, MaxTXID-1]?
		i := sort.Search(len(reached), func(i int) bool { return reached[i] >= f.MinTXID-1 })
		if i < len(reached) && reached[i] < f.MaxTXID {
			reached = append(reached, f.MaxTXID)
		}
	}
	return reached[1:]
}

// runs groups ascending points into runs of consecutive TXIDs.
func runs(points []ltx.TXID) []Range {
	var out []Range
	for _, p := range points {
		if n := len(out); n > 0 && out[n-1].Last+1 == p {
			out[n-1].Last = p
			out[n-1].Points++
			continue
		}
		out = append(out, Range{First: p, Last: p, Points: 1})
	}
	return out
}
