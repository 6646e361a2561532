package suite

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluicedb/sluice/bench/targets"
	"github.com/sluicedb/sluice/internal/minioproc"
)

// startEnv prepares what every multi-target benchmark needs: a scratch
// directory, the peer app's binary and a MinIO with the "bench" bucket.
// cleanup stops MinIO and removes the directory.
func startEnv(ctx context.Context, sluice, bench, name string, out io.Writer) (env *targets.Env, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "sluice-bench-"+name+"-")
	if err != nil {
		return nil, nil, err
	}
	env = &targets.Env{Sluice: sluice, Bench: bench, Dir: dir, Bucket: "bench"}
	fail := func(err error) (*targets.Env, func(), error) {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	if env.Peer, err = targets.PeerBinary(ctx, sluice, dir); err != nil {
		return fail(err)
	}
	fmt.Fprintln(out, "starting MinIO…")
	m, err := minioproc.Start(ctx, filepath.Join(dir, "minio"))
	if err != nil {
		return fail(err)
	}
	if err := m.CreateBucket(ctx, env.Bucket); err != nil {
		m.Stop()
		return fail(err)
	}
	env.MinIO = m
	return env, func() { m.Stop(); os.RemoveAll(dir) }, nil
}
