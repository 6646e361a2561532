package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/bench/scenario"
	"github.com/sluicedb/sluice/bench/targets"
	"github.com/sluicedb/sluice/internal/minioproc"
)

// rig is what a soak runs against: MinIO, sluice serve on it, the databases.
type rig struct {
	minio     *minioproc.Server
	minioPort int
	srv       *targets.Server
	prefix    string // the server's replica root in the bucket
	root      string // the same in MinIO's data directory
	names     []string
	work      string
}

// startRig starts MinIO and sluice serve (o.Durability) replicating to it,
// and creates the databases with the soak table.
func startRig(ctx context.Context, o Options) (g *rig, err error) {
	g = &rig{work: o.WorkDir}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	if g.minio, err = minioproc.Start(ctx, filepath.Join(o.WorkDir, "minio")); err != nil {
		return g, err
	}
	if err = g.minio.CreateBucket(ctx, bucket); err != nil {
		return g, err
	}
	ep, err := url.Parse(g.minio.Endpoint)
	if err != nil {
		return g, err
	}
	if g.minioPort, err = strconv.Atoi(ep.Port()); err != nil {
		return g, fmt.Errorf("MinIO endpoint %s: %w", g.minio.Endpoint, err)
	}
	env := &targets.Env{Sluice: o.Sluice, Dir: o.WorkDir, MinIO: g.minio, Bucket: bucket}
	if o.ServeConfig != "" {
		env.ServeArgs = []string{"-config", o.ServeConfig}
	}
	if g.srv, err = env.StartSluice(ctx, o.Durability); err != nil {
		return g, err
	}
	u, err := url.Parse(g.srv.Replica)
	if err != nil {
		return g, err
	}
	g.prefix = strings.Trim(u.Path, "/")
	g.root = filepath.Join(g.minio.Dir(), "data", bucket, g.prefix)

	g.names = make([]string, o.Databases)
	for i := range g.names {
		g.names[i] = "soak"
		if o.Databases > 1 {
			g.names[i] = fmt.Sprintf("soak-%0*d", len(strconv.Itoa(o.Databases-1)), i)
		}
	}
	if err := createDatabases(ctx, g.srv.URL, g.names); err != nil {
		return g, fmt.Errorf("%w\n%s", err, g.srv.Logs())
	}
	return g, nil
}

func (g *rig) close() {
	if g.srv != nil {
		g.srv.Crash()
	}
	if g.minio != nil {
		g.minio.Stop()
	}
}

// stopAndCount stops the server with SIGTERM, as an orchestrator would, and
// checks the data directory's object count against a real LIST now that
// nothing changes.
func (g *rig) stopAndCount(ctx context.Context, out io.Writer, rep *Report) error {
	took, err := g.srv.Terminate(2 * time.Minute)
	rep.SIGTERMExitS = took.Seconds()
	fmt.Fprintf(out, "SIGTERM -> exit: %s\n", took.Round(time.Millisecond))
	if err != nil {
		rep.fail("server: %v", err)
	}
	end, err := scanMinIO(g.root, true)
	if err != nil {
		return err
	}
	listed, err := listObjects(ctx, g.minio.Client(), bucket, g.prefix)
	if err != nil {
		return err
	}
	rep.ObjectsCounted, rep.ObjectsListed = end.Objects, listed
	fmt.Fprintf(out, "objects in the bucket at the end: %d by LIST, %d counted in MinIO's data directory\n", listed, end.Objects)
	if end.Husks > 0 {
		// The per-window counts included these: say by how much they may be high.
		fmt.Fprintf(out, "  %d empty object directories left by deletes (counted as objects by the per-window scans)\n", end.Husks)
	}
	if listed != end.Objects {
		rep.fail("objects: LIST finds %d, MinIO's data directory %d: the per-window object counts are not trustworthy", listed, end.Objects)
	}
	return nil
}

// restoreAndCheck restores every database with `sluice restore` and checks
// the copies against the acknowledgements.
func (g *rig) restoreAndCheck(ctx context.Context, out io.Writer, rep *Report, a *acks) {
	start := time.Now()
	keys, err := restoreAll(ctx, g.srv, g.names, filepath.Join(g.work, "restored"))
	took := time.Since(start)
	rep.RestoreS = took.Seconds()
	if err != nil {
		rep.fail("restore: %v", err)
		return
	}
	rep.checkRestore(a.check(keys, g.names))
	c := rep.Check
	fmt.Fprintf(out, "restore of %d database(s) with `sluice restore`: %s; every acknowledged write present: %d of %d\n",
		len(g.names), took.Round(time.Millisecond), c.Present, c.Acked)
	fmt.Fprintf(out, "  restored rows %d: %d acknowledged, %d whose answer was an error or never came (at most %d allowed), %d foreign\n",
		c.Rows, c.Present, c.Unacked, rep.Unknown, c.Foreign)
}

func createDatabases(ctx context.Context, base string, names []string) error {
	s := &scenario.Scenario{Schema: []string{"CREATE TABLE IF NOT EXISTS " + table + " (k INTEGER PRIMARY KEY, body TEXT NOT NULL)"}}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     atomic.Int64
	)
	for range min(8, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) {
					return
				}
				t := &scenario.Target{BaseURL: base, DB: names[i], Protocol: scenario.JSON}
				if err := t.Setup(ctx, s); err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// restoreAll restores every database into dir and reads its keys.
func restoreAll(ctx context.Context, srv *targets.Server, names []string, dir string) ([]map[int64]bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	keys := make([]map[int64]bool, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	var next atomic.Int64
	for range min(4, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) {
					return
				}
				out := filepath.Join(dir, names[i]+".db")
				if err := srv.Restore(ctx, names[i], out); err != nil {
					errs[i] = fmt.Errorf("database %s: %w", names[i], err)
					continue
				}
				keys[i], errs[i] = readKeys(out)
				os.Remove(out)
			}
		}()
	}
	wg.Wait()
	return keys, errors.Join(errs...)
}

// insertBody is one insert of key k.
func insertBody(k int64) []byte {
	var b bytes.Buffer
	b.WriteString(`{"sql":"INSERT INTO ` + table + ` (k, body) VALUES (?, ?)","params":[`)
	b.WriteString(strconv.FormatInt(k, 10))
	b.WriteString(`,"` + payload + `"]}`)
	return b.Bytes()
}
