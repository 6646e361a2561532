package replica_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore/restoretest"
)

// CheckLTX tells a sound object from a corrupt, a truncated, a misnamed and
// a missing one, each a *DamageError naming the key.
func TestCheckLTXClassifiesDamage(t *testing.T) {
	ctx := context.Background()
	s, err := file.New(filepath.Join(t.TempDir(), "replica"))
	if err != nil {
		t.Fatal(err)
	}
	hdr := ltx.Header{Version: ltx.Version, Flags: ltx.HeaderFlagNoChecksum, PageSize: 4096, Commit: 1, MinTXID: 2, MaxTXID: 2, Timestamp: 1}
	good := restoretest.Encode(t, hdr, []restoretest.Page{{Pgno: 1, Data: bytes.Repeat([]byte{7}, 4096)}}, 0)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 1
	put := func(key string, b []byte) replica.LTXFile {
		if _, err := s.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
		_, min, max, _ := replica.ParseLTXKey(key)
		return replica.LTXFile{MinTXID: min, MaxTXID: max, Key: key, Size: int64(len(b))}
	}
	cases := map[string]struct {
		f    replica.LTXFile
		what string
	}{
		"sound":     {put(replica.LTXKey(0, 2, 2), good), ""},
		"corrupt":   {put("a/"+replica.LTXKey(0, 2, 2), flipped), "corrupt"},
		"truncated": {put("b/"+replica.LTXKey(0, 2, 2), good[:len(good)/2]), "truncated"},
		"misnamed":  {put(replica.LTXKey(0, 3, 3), good), "corrupt"},
		"missing":   {replica.LTXFile{MinTXID: 4, MaxTXID: 4, Key: replica.LTXKey(0, 4, 4)}, "missing"},
	}
	for name, c := range cases {
		var buf bytes.Buffer
		_, _, err := replica.CheckLTX(ctx, s, c.f, &buf, 0)
		var de *replica.DamageError
		switch {
		case c.what == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.what == "" && !bytes.Equal(buf.Bytes(), good):
			t.Errorf("%s: body not handed back", name)
		case c.what != "" && (!errors.As(err, &de) || de.What != c.what || de.Key != c.f.Key || !errors.Is(err, replica.ErrDamaged)):
			t.Errorf("%s: %v; want %s damage naming %s", name, err, c.what, c.f.Key)
		}
	}
}
