package file_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
)

func TestErrorClassification(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ok, _ := file.New(filepath.Join(dir, "ok"))
	if err := replica.Probe(ctx, ok); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if objs, _ := ok.List(ctx, ""); len(objs) != 0 {
		t.Fatalf("probe left objects behind: %v", objs)
	}
	// A root below a regular file can never be created.
	if err := os.WriteFile(filepath.Join(dir, "plain"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad, _ := file.New(filepath.Join(dir, "plain", "replica"))
	err := replica.Probe(ctx, bad)
	if !errors.Is(err, replica.ErrNoBucket) || !replica.Permanent(err) {
		t.Fatalf("root under a file: got %v, want a permanent ErrNoBucket", err)
	}
	if os.Geteuid() != 0 { // root ignores permissions
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		s, _ := file.New(filepath.Join(ro, "replica"))
		if err := replica.Probe(ctx, s); !errors.Is(err, replica.ErrAccessDenied) {
			t.Fatalf("read-only parent: got %v, want ErrAccessDenied", err)
		}
	}
}
