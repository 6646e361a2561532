package replica

import (
	"context"
	"fmt"

	"github.com/superfly/ltx"
)

// ListNewestLTXEager is ListNewestLTX for a caller whose first answer waits
// on it (a cold open): all of level 0 is listed beside the upper levels,
// and whichever ends first is used, the whole of level 0 (one round trip
// where ListNewestLTX takes two, when level 0 is short) or, once the upper
// levels are known, only the level-0 files past them (when level 0 holds
// thousands of files and its full listing pages on). The other is
// cancelled. The result is the same listing ListNewestLTX gives.
func ListNewestLTXEager(ctx context.Context, s Store) ([][]LTXFile, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type listed struct {
		objs []ObjectInfo
		err  error
	}
	whole := make(chan listed, 1)
	go func() {
		objs, err := ListAfter(ctx, s, LTXLevelPrefix(0), "")
		whole <- listed{objs, err}
	}()
	upper, err := ListAfter(ctx, s, LTXDir+"/", LTXLevelPrefix(0)+"~") // '~' sorts after every file name
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s, err)
	}
	levels := byLevel(upper)
	after := ""
	if covered := coveredAbove(levels); covered > 0 {
		after = LTXKey(0, covered, covered)
	}
	past := make(chan listed, 1)
	go func() {
		objs, err := ListAfter(ctx, s, LTXLevelPrefix(0), after)
		past <- listed{objs, err}
	}()
	var l0 []ObjectInfo
	select {
	case r := <-whole:
		if r.err == nil {
			for _, o := range r.objs {
				if o.Key > after {
					l0 = append(l0, o)
				}
			}
			break
		}
		r = <-past // the full listing failed: the short one decides
		if r.err != nil {
			return nil, fmt.Errorf("list %s: %w", s, r.err)
		}
		l0 = r.objs
	case r := <-past:
		if r.err != nil {
			return nil, fmt.Errorf("list %s: %w", s, r.err)
		}
		l0 = r.objs
	}
	levels[0] = byLevel(l0)[0]
	return levels, nil
}

// coveredAbove is the highest TXID levels 1..9 reach.
func coveredAbove(levels [][]LTXFile) (covered ltx.TXID) {
	for _, files := range levels[1:] {
		for _, f := range files {
			covered = max(covered, f.MaxTXID)
		}
	}
	return covered
}
