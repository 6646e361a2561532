package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/superfly/ltx"
)

// ListLTX lists the LTX files of one level, sorted by MinTXID then MaxTXID.
// Keys under the level that are not LTX files are ignored.
func ListLTX(ctx context.Context, s Store, level int) ([]LTXFile, error) {
	objs, err := s.List(ctx, LTXLevelPrefix(level))
	if err != nil {
		return nil, fmt.Errorf("list level %d of %s: %w", level, s, err)
	}
	files := make([]LTXFile, 0, len(objs))
	for _, o := range objs {
		lvl, min, max, err := ParseLTXKey(o.Key)
		if err != nil || lvl != level {
			continue
		}
		files = append(files, LTXFile{Level: lvl, MinTXID: min, MaxTXID: max, Size: o.Size, Key: o.Key})
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].MinTXID != files[j].MinTXID {
			return files[i].MinTXID < files[j].MinTXID
		}
		return files[i].MaxTXID < files[j].MaxTXID
	})
	return files, nil
}

// ListAllLTX lists every level (0..9), lowest level first, each sorted as
// ListLTX sorts. It is one LIST of the whole ltx/ tree: on an object store
// one request answers sooner than ten, even in parallel. A restore of the
// newest state needs less (ListNewestLTX).
func ListAllLTX(ctx context.Context, s Store) ([][]LTXFile, error) {
	objs, err := s.List(ctx, LTXDir+"/")
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s, err)
	}
	return byLevel(objs), nil
}

// ListNewestLTX lists what rebuilding the newest state takes without paging
// through level 0, which holds a file per shipped transaction until
// retention removes it (thousands on a busy database): levels 1..9, then
// only the level-0 files past the highest TXID those cover. The level-0
// files it leaves out are all covered by an upper level's file, but not
// necessarily by one chain: when a plan from this listing fails, list all.
func ListNewestLTX(ctx context.Context, s Store) ([][]LTXFile, error) {
	upper, err := ListAfter(ctx, s, LTXDir+"/", LTXLevelPrefix(0)+"~") // '~' sorts after every file name
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s, err)
	}
	levels := byLevel(upper)
	var covered ltx.TXID
	for _, files := range levels[1:] {
		for _, f := range files {
			covered = max(covered, f.MaxTXID)
		}
	}
	after := ""
	if covered > 0 {
		after = LTXKey(0, covered, covered)
	}
	l0, err := ListAfter(ctx, s, LTXLevelPrefix(0), after)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s, err)
	}
	levels[0] = byLevel(l0)[0]
	return levels, nil
}

// byLevel parses LTX keys (skipping others) into levels 0..9, each sorted
// by MinTXID, then MaxTXID.
func byLevel(objs []ObjectInfo) [][]LTXFile {
	levels := make([][]LTXFile, MaxLevel+1)
	for _, o := range objs {
		lvl, min, max, err := ParseLTXKey(o.Key)
		if err != nil {
			continue
		}
		levels[lvl] = append(levels[lvl], LTXFile{Level: lvl, MinTXID: min, MaxTXID: max, Size: o.Size, Key: o.Key})
	}
	for _, files := range levels {
		sort.Slice(files, func(i, j int) bool {
			if files[i].MinTXID != files[j].MinTXID {
				return files[i].MinTXID < files[j].MinTXID
			}
			return files[i].MaxTXID < files[j].MaxTXID
		})
	}
	return levels
}

// ReadHeader fetches and decodes the header of one LTX file.
func ReadHeader(ctx context.Context, s Store, f LTXFile) (ltx.Header, error) {
	rc, err := s.GetRange(ctx, f.Key, 0, ltx.HeaderSize)
	if err != nil {
		return ltx.Header{}, fmt.Errorf("read header of %s in %s: %w", f.Key, s, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return ltx.Header{}, fmt.Errorf("read header of %s in %s: %w", f.Key, s, err)
	}
	var hdr ltx.Header
	if err := hdr.UnmarshalBinary(b); err != nil {
		return ltx.Header{}, fmt.Errorf("corrupt LTX header in %s in %s: %w", f.Key, s, err)
	}
	return hdr, nil
}

// ReadTrailer fetches and decodes the trailer (post-apply and file checksums)
// of one LTX file, whose size must be known.
func ReadTrailer(ctx context.Context, s Store, f LTXFile) (ltx.Trailer, error) {
	if f.Size < ltx.HeaderSize+ltx.TrailerSize {
		return ltx.Trailer{}, fmt.Errorf("LTX file %s in %s is truncated (%d bytes)", f.Key, s, f.Size)
	}
	rc, err := s.GetRange(ctx, f.Key, f.Size-ltx.TrailerSize, ltx.TrailerSize)
	if err != nil {
		return ltx.Trailer{}, fmt.Errorf("read trailer of %s in %s: %w", f.Key, s, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return ltx.Trailer{}, fmt.Errorf("read trailer of %s in %s: %w", f.Key, s, err)
	}
	var t ltx.Trailer
	if err := t.UnmarshalBinary(b); err != nil {
		return ltx.Trailer{}, fmt.Errorf("corrupt LTX trailer in %s in %s: %w", f.Key, s, err)
	}
	return t, nil
}

// Latest returns the LTX file with the highest MaxTXID across all levels
// (on ties, the lowest level), or ok=false for an empty replica.
func Latest(levels [][]LTXFile) (f LTXFile, ok bool) {
	for _, files := range levels {
		for _, x := range files {
			if !ok || x.MaxTXID > f.MaxTXID {
				f, ok = x, true
			}
		}
	}
	return f, ok
}

// LatestPos returns the replica's current position: the highest TXID and the
// database checksum after it. An empty replica returns the zero Pos.
// It LISTs levels 1..9 and the level-0 files past them (ListNewestLTX: the
// highest TXID is among those, and a new lease holder opening a database
// does not page through level 0), so it belongs to start-up, never to the
// hot path.
func LatestPos(ctx context.Context, s Store) (ltx.Pos, error) {
	levels, err := ListNewestLTX(ctx, s)
	if err != nil {
		return ltx.Pos{}, err
	}
	return PosOf(ctx, s, levels)
}

// PosOf is LatestPos from a listing the caller already has (ListNewestLTX):
// one range GET of the newest file's trailer, no LIST.
func PosOf(ctx context.Context, s Store, levels [][]LTXFile) (ltx.Pos, error) {
	f, ok := Latest(levels)
	if !ok {
		return ltx.Pos{}, nil
	}
	t, err := ReadTrailer(ctx, s, f)
	if err != nil {
		return ltx.Pos{}, err
	}
	return ltx.Pos{TXID: f.MaxTXID, PostApplyChecksum: t.PostApplyChecksum}, nil
}

// PutLTX uploads an encoded LTX file with a conditional create. If the key is
// already taken it returns an error wrapping ErrExists: another writer owns
// that TXID and the caller must stop writing (ARCHITECTURE.md, invariant 2).
func PutLTX(ctx context.Context, s Store, level int, min, max ltx.TXID, data []byte) (LTXFile, error) {
	key := LTXKey(level, min, max)
	info, err := s.PutIfAbsent(ctx, key, bytes.NewReader(data), int64(len(data)))
	if errors.Is(err, ErrExists) {
		return LTXFile{}, fmt.Errorf("%s in %s is already taken by another writer: %w", key, s, err)
	} else if err != nil {
		return LTXFile{}, fmt.Errorf("upload %s to %s: %w", key, s, err)
	}
	_ = info
	return LTXFile{Level: level, MinTXID: min, MaxTXID: max, Size: int64(len(data)), Key: key}, nil
}
