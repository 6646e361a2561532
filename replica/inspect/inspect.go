// Package inspect describes what a replica holds without restoring it: its
// LTX files, a summary per level, the database size they rebuild, and the
// restore points (TXIDs and times) that `sluice restore -txid` and
// `-timestamp` accept.
//
// It imports replica and github.com/superfly/ltx only; it reads listings and
// LTX headers (ranged reads of the first 100 bytes), never whole files.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// ErrEmpty: the replica holds no LTX file.
var ErrEmpty = errors.New("replica holds no LTX file")

// File is one LTX file of a replica. Created is the store's modification
// time of the object (when it was uploaded or compacted), as Litestream's
// `ltx` command shows it.
type File struct {
	Level   int       `json:"level"`
	MinTXID ltx.TXID  `json:"min_txid"`
	MaxTXID ltx.TXID  `json:"max_txid"`
	Size    int64     `json:"size"`
	Created time.Time `json:"timestamp"`
	Key     string    `json:"-"`
}

// AllLevels passed to Files lists every level.
const AllLevels = -1

// Files lists the LTX files of one level (or AllLevels), lowest level first,
// then by TXID range.
func Files(ctx context.Context, s replica.Store, level int) ([]File, error) {
	if level != AllLevels && (level < 0 || level > replica.MaxLevel) {
		return nil, fmt.Errorf("level %d: want 0..%d", level, replica.MaxLevel)
	}
	levels := []int{level}
	if level == AllLevels {
		levels = levels[:0]
		for l := 0; l <= replica.MaxLevel; l++ {
			levels = append(levels, l)
		}
	}
	perLevel := make([][]File, len(levels))
	errs := make([]error, len(levels))
	var wg sync.WaitGroup
	for i, l := range levels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			perLevel[i], errs[i] = listLevel(ctx, s, l)
		}()
	}
	wg.Wait()
	// One store problem fails every level alike: say it once.
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	var out []File
	for _, fs := range perLevel {
		out = append(out, fs...)
	}
	return out, nil
}

func listLevel(ctx context.Context, s replica.Store, level int) ([]File, error) {
	objs, err := s.List(ctx, replica.LTXLevelPrefix(level))
	if err != nil {
		return nil, fmt.Errorf("list level %d of %s: %w", level, s, err)
	}
	var out []File
	for _, o := range objs {
		l, min, max, err := replica.ParseLTXKey(o.Key)
		if err != nil || l != level {
			continue // not an LTX file: something else stored under the level
		}
		out = append(out, File{Level: l, MinTXID: min, MaxTXID: max, Size: o.Size, Created: o.ModTime.UTC(), Key: o.Key})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].MinTXID != out[j].MinTXID {
			return out[i].MinTXID < out[j].MinTXID
		}
		return out[i].MaxTXID < out[j].MaxTXID
	})
	return out, nil
}

// readHeaders fetches the headers of files, parallelism at a time.
func readHeaders(ctx context.Context, s replica.Store, files []File, parallelism int) ([]ltx.Header, error) {
	hdrs := make([]ltx.Header, len(files))
	errs := make([]error, len(files))
	sem := make(chan struct{}, max(parallelism, 1))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			hdrs[i], errs[i] = replica.ReadHeader(ctx, s, replica.LTXFile{Level: f.Level, MinTXID: f.MinTXID, MaxTXID: f.MaxTXID, Size: f.Size, Key: f.Key})
		}()
	}
	wg.Wait()
	return hdrs, errors.Join(errs...)
}
