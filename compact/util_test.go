package compact

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/restore/restoretest"
)

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fastTempDir is a temp directory on tmpfs when the machine has one: the
// file store fsyncs every object, and an hour of simulated writes is
// thousands of objects; durability is not what these tests check.
func fastTempDir(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "sluice-compact-test-")
		if err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func readAll(t testing.TB, s interface {
	Get(context.Context, string) (io.ReadCloser, error)
}, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertLatestRestored restores store's newest state and requires it to be
// h's newest state, byte for byte; context says after what.
func assertLatestRestored(t *testing.T, store replica.Store, h *restoretest.History, context string) {
	t.Helper()
	h.RecordHash()
	out, res := restoreAt(t, store, restore.Options{})
	if res.Pos.TXID != h.Pos().TXID || restoretest.FileHash(t, out) != h.Hashes[h.Pos().TXID] {
		t.Fatal(strings.TrimSpace("latest state not restored exactly " + context))
	}
}
