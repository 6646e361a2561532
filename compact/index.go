package compact

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// entry is one LTX file the compactor knows of, with the time it was
// written: the object's ModTime for files found by the start-up listing (they
// may be Litestream's), the pass's clock for files announced by Notify or
// written by the compactor itself.
//
// A replica under sustained writes holds hundreds of thousands of objects
// until retention removes them, and the index holds one entry each: the key
// is derived from the level and TXIDs rather than stored, unless the
// object's name is not the canonical one.
type entry struct {
	Level            int
	MinTXID, MaxTXID ltx.TXID
	Size             int64
	writtenNs        int64
	oddKey           string // set only when the key is not replica.LTXKey's
}

func newEntry(f replica.LTXFile, written time.Time) entry {
	e := entry{Level: f.Level, MinTXID: f.MinTXID, MaxTXID: f.MaxTXID, Size: f.Size, writtenNs: written.UnixNano()}
	if f.Key != replica.LTXKey(f.Level, f.MinTXID, f.MaxTXID) {
		e.oddKey = f.Key
	}
	return e
}

// Key is the object's key in the store.
func (e entry) Key() string {
	if e.oddKey != "" {
		return e.oddKey
	}
	return replica.LTXKey(e.Level, e.MinTXID, e.MaxTXID)
}

func (e entry) file() replica.LTXFile {
	return replica.LTXFile{Level: e.Level, MinTXID: e.MinTXID, MaxTXID: e.MaxTXID, Size: e.Size, Key: e.Key()}
}

func (e entry) written() time.Time { return time.Unix(0, e.writtenNs) }

// index is the compactor's in-memory copy of the replica's LTX listing: one
// LIST per level at start, then kept current by Notify and the compactor's own
// writes and deletes, so steady state never LISTs (ARCHITECTURE.md, invariant 4).
type index struct {
	levels [replica.MaxLevel + 1][]entry // each sorted by MinTXID, then MaxTXID
}

func (c *Compactor) loadIndex(ctx context.Context) (*index, error) {
	// The levels are listed at once: on a real bucket a LIST is a round
	// trip, and a new lease holder's first acknowledgement waits for this
	// index (CheckTail).
	listed := make([][]replica.ObjectInfo, replica.MaxLevel+1)
	errs := make([]error, replica.MaxLevel+1)
	var wg sync.WaitGroup
	for level := range listed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[level] = c.callWithin(ctx, 4*c.cfg.CallTimeout, func(ctx context.Context) (err error) {
				listed[level], err = c.store.List(ctx, replica.LTXLevelPrefix(level))
				return err
			})
		}()
	}
	wg.Wait()
	idx := &index{}
	for level, objs := range listed {
		if errs[level] != nil {
			return nil, errs[level]
		}
		for _, o := range objs {
			lvl, min, max, err := replica.ParseLTXKey(o.Key)
			if err != nil || lvl != level {
				continue
			}
			idx.add(newEntry(replica.LTXFile{Level: lvl, MinTXID: min, MaxTXID: max, Size: o.Size, Key: o.Key}, o.ModTime))
		}
	}
	return idx, nil
}

func (idx *index) add(e entry) {
	lvl := idx.levels[e.Level]
	i := sort.Search(len(lvl), func(i int) bool {
		if lvl[i].MinTXID != e.MinTXID {
			return lvl[i].MinTXID > e.MinTXID
		}
		return lvl[i].MaxTXID >= e.MaxTXID
	})
	if i < len(lvl) && lvl[i].MinTXID == e.MinTXID && lvl[i].MaxTXID == e.MaxTXID {
		return // already known (Notify after a listing that saw it)
	}
	lvl = append(lvl, entry{})
	copy(lvl[i+1:], lvl[i:])
	lvl[i] = e
	idx.levels[e.Level] = lvl
}

func (idx *index) remove(keys map[string]bool) {
	for level, files := range idx.levels {
		kept := files[:0]
		for _, f := range files {
			if !keys[f.Key()] {
				kept = append(kept, f)
			}
		}
		idx.levels[level] = kept
	}
}

// find returns the file with key.
func (idx *index) find(key string) (replica.LTXFile, bool) {
	for _, files := range idx.levels {
		for _, f := range files {
			if f.Key() == key {
				return f.file(), true
			}
		}
	}
	return replica.LTXFile{}, false
}

// maxTXID is the highest TXID held at level (0 if empty).
func (idx *index) maxTXID(level int) ltx.TXID {
	var m ltx.TXID
	for _, f := range idx.levels[level] {
		m = max(m, f.MaxTXID)
	}
	return m
}

// spans are the TXID ranges level's files cover together, merged where
// they touch or overlap, in order.
func (idx *index) spans(level int) [][2]ltx.TXID {
	var out [][2]ltx.TXID
	for _, f := range idx.levels[level] { // sorted by MinTXID
		if n := len(out); n > 0 && f.MinTXID <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], f.MaxTXID)
			continue
		}
		out = append(out, [2]ltx.TXID{f.MinTXID, f.MaxTXID})
	}
	return out
}

// newest is the file with the highest MaxTXID at level.
func (idx *index) newest(level int) (entry, bool) {
	var best entry
	ok := false
	for _, f := range idx.levels[level] {
		if !ok || f.MaxTXID > best.MaxTXID {
			best, ok = f, true
		}
	}
	return best, ok
}

func (idx *index) all() []replica.LTXFile {
	var out []replica.LTXFile
	for _, files := range idx.levels {
		for _, f := range files {
			out = append(out, f.file())
		}
	}
	return out
}

func (idx *index) entries() []entry {
	var out []entry
	for _, files := range idx.levels {
		out = append(out, files...)
	}
	return out
}

// Stats is the replica's footprint as the compactor knows it.
type Stats struct {
	Objects  int
	Bytes    int64
	PerLevel [replica.MaxLevel + 1]int
}

func (idx *index) stats() Stats {
	var s Stats
	for level, files := range idx.levels {
		s.PerLevel[level] = len(files)
		s.Objects += len(files)
		for _, f := range files {
			s.Bytes += f.Size
		}
	}
	return s
}
