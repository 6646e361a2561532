package replica

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/superfly/ltx"
)

// Litestream v0.5's object layout: <root>/ltx/<level>/<minTXID>-<maxTXID>.ltx.
// Level 0 holds one file per shipped transaction, levels 1..8 compactions of
// the level below, level 9 full snapshots (MinTXID 1).
const (
	LTXDir        = "ltx"
	SnapshotLevel = 9
	MaxLevel      = SnapshotLevel
)

// SluiceDir holds sluice's own objects (lease, metadata) beside the LTX tree,
// under a name Litestream never reads.
const SluiceDir = "sluice"

// LTXLevelPrefix is the key prefix ("ltx/<level>/") of one level.
func LTXLevelPrefix(level int) string {
	return LTXDir + "/" + strconv.Itoa(level) + "/"
}

// LTXKey is the key of the LTX file holding TXIDs min..max at level.
func LTXKey(level int, min, max ltx.TXID) string {
	return LTXLevelPrefix(level) + ltx.FormatFilename(min, max)
}

// ParseLTXKey parses a key produced by LTXKey.
func ParseLTXKey(key string) (level int, min, max ltx.TXID, err error) {
	parts := strings.Split(key, "/")
	if len(parts) < 3 || parts[len(parts)-3] != LTXDir {
		return 0, 0, 0, fmt.Errorf("not an LTX key: %q", key)
	}
	level, err = strconv.Atoi(parts[len(parts)-2])
	if err != nil || level < 0 || level > MaxLevel {
		return 0, 0, 0, fmt.Errorf("invalid LTX level in key %q", key)
	}
	min, max, err = ltx.ParseFilename(parts[len(parts)-1])
	if err != nil {
		return 0, 0, 0, fmt.Errorf("invalid LTX file name in key %q: %w", key, err)
	}
	return level, min, max, nil
}

// LTXFile is one LTX object found in a store.
type LTXFile struct {
	Level   int
	MinTXID ltx.TXID
	MaxTXID ltx.TXID
	Size    int64
	Key     string
}
