package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/internal/testenv"
)

// rollbackReplica is one kind of replica both tools write: its URL, the
// environment each tool needs, and a direct look at its LTX objects.
type rollbackReplica struct {
	url       string
	sluiceEnv []string
	lsEnv     []string
	keys      func(t *testing.T) []string // LTX objects, as ltx/<level>/<name>
	open      func(t *testing.T, key string) io.ReadCloser
}

func rollbackReplicas(t *testing.T) map[string]func(t *testing.T) rollbackReplica {
	return map[string]func(t *testing.T) rollbackReplica{
		"file": func(t *testing.T) rollbackReplica {
			dir := filepath.Join(t.TempDir(), "replica")
			return rollbackReplica{
				url: "file://" + dir, lsEnv: os.Environ(),
				keys: func(t *testing.T) []string { return ltxFiles(t, dir) },
				open: func(t *testing.T, key string) io.ReadCloser {
					f, err := os.Open(filepath.Join(dir, key))
					if err != nil {
						t.Fatal(err)
					}
					return f
				},
			}
		},
		"s3": func(t *testing.T) rollbackReplica {
			m := testenv.MinIO(t)
			bucket := m.NewBucket(t)
			return rollbackReplica{
				url: m.URL(bucket, "app"), sluiceEnv: m.Env(), lsEnv: litestreamEnv(m),
				keys: func(t *testing.T) []string {
					// Litestream's S3 layout: <prefix>/<level as %04x>/<file>.
					var keys []string
					for _, k := range listKeys(t, m, bucket) {
						var level int
						var name string
						if rel, ok := strings.CutPrefix(k, "app/"); ok && len(rel) > 5 && rel[4] == '/' {
							if _, err := fmt.Sscanf(rel[:4], "%04x", &level); err == nil {
								name = rel[5:]
							}
						}
						if strings.HasSuffix(name, ".ltx") {
							keys = append(keys, fmt.Sprintf("ltx/%d/%s", level, name))
						}
					}
					return keys
				},
				open: func(t *testing.T, key string) io.ReadCloser {
					var level int
					var name string
					if _, err := fmt.Sscanf(strings.ReplaceAll(key, "/", " "), "ltx %d %s", &level, &name); err != nil {
						t.Fatalf("bad key %s: %v", key, err)
					}
					s3key := fmt.Sprintf("app/%04x/%s", level, name)
					out, err := m.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(s3key)})
					if err != nil {
						t.Fatal(err)
					}
					return out.Body
				},
			}
		},
	}
}

// phase is one stretch of writes under one replicator, with the rows the
// database holds at its end.
type phase struct {
	tool string
	rows int
}

// check restores the replica with both tools and requires each copy to hold
// exactly the live database's rows (content and integrity compared).
func (r rollbackReplica) check(t *testing.T, live string, ph phase, n int) {
	t.Helper()
	dir := t.TempDir()
	bySluice := filepath.Join(dir, "by-sluice.db")
	mustSluice(t, r.sluiceEnv, "restore", "-integrity-check", "-o", bySluice, r.url)
	byLitestream := filepath.Join(dir, "by-litestream.db")
	r.litestream(t, "restore", "-o", byLitestream, r.url)
	gotS, gotL := sameDB(t, live, bySluice), sameDB(t, live, byLitestream)
	t.Logf("phase %d (%s wrote): %d rows written in all; sluice restore %d, litestream restore %d", n, ph.tool, ph.rows, gotS, gotL)
	if gotS != int64(ph.rows) || gotL != int64(ph.rows) {
		t.Fatalf("phase %d (%s): restored %d (sluice) and %d (litestream) rows, want %d", n, ph.tool, gotS, gotL, ph.rows)
	}
}

func (r rollbackReplica) litestream(t *testing.T, args ...string) {
	t.Helper()
	out, err := runWithEnv(litestreamPath(t), r.lsEnv, args...)
	if err != nil {
		t.Fatalf("litestream %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func runWithEnv(bin string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// replicateWithSluice runs `sluice replicate` while an application writes rows
// more rows, then stops it with SIGTERM.
func (r rollbackReplica) replicateWithSluice(t *testing.T, db string, rows int) {
	t.Helper()
	side := start(t, r.sluiceEnv, sluiceBin, "replicate", "-interval", "100ms", db, r.url)
	time.Sleep(300 * time.Millisecond)
	if err := writer(t, db, rows, 5, time.Millisecond).wait(t, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	stopSidecar(t, side)
}

// replicateWithLitestream runs `litestream replicate` while an application
// writes rows more rows, then stops it with SIGTERM (Litestream ships what is
// left on the way out). Any error it logs fails the test: an error on every
// sync is how it "replicates nothing".
func (r rollbackReplica) replicateWithLitestream(t *testing.T, db string, rows int) {
	t.Helper()
	ls := start(t, nil, "env", append(envArgs(r.lsEnv), litestreamPath(t), "replicate", db, r.url)...)
	// Litestream opens the database at its first sync, a second or so after
	// it starts; stopped before that, it exits having shipped nothing. As
	// sluice wrote last, opening it always fetches sluice's newest file.
	waitFor(t, ls, "fetched latest L0 file from replica", time.Minute)
	if err := writer(t, db, rows, 5, time.Millisecond).wait(t, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	_ = ls.cmd.Process.Signal(syscall.SIGTERM)
	err := ls.wait(t, time.Minute)
	out := ls.out.String()
	failed := err != nil
	for _, line := range strings.Split(out, "\n") {
		// Its background compaction can fail when shutdown closes the
		// database under it; that costs nothing, the next run redoes it.
		failed = failed || strings.Contains(line, "level=ERROR") && !strings.Contains(line, `msg="compaction failed"`)
	}
	if failed {
		t.Fatalf("litestream replicate (exit %v) logged errors:\n%s", err, out)
	}
}

// firstFileAfter describes how Litestream took over: the first level-0 file
// it wrote after TXID txid holds every page (it started a new snapshot) or
// only what changed (it continued from the WAL offset sluice recorded).
func (r rollbackReplica) firstFileAfter(t *testing.T, txid uint64) string {
	t.Helper()
	key := "ltx/0/" + ltx.FormatFilename(ltx.TXID(txid+1), ltx.TXID(txid+1))
	if !slices.Contains(r.keys(t), key) {
		t.Fatalf("Litestream wrote no TXID %d; the replica holds %v", txid+1, r.keys(t))
	}
	rc := r.open(t, key)
	defer rc.Close()
	dec := ltx.NewDecoder(rc)
	if err := dec.DecodeHeader(); err != nil {
		t.Fatal(err)
	}
	pages := 0
	buf := make([]byte, dec.Header().PageSize)
	for {
		var ph ltx.PageHeader
		if err := dec.DecodePage(&ph, buf); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pages++
	}
	if uint32(pages) >= dec.Header().Commit-1 {
		return "a new snapshot"
	}
	return "continued from the WAL"
}

// maxTXID is the newest TXID of any LTX object.
func (r rollbackReplica) maxTXID(t *testing.T) uint64 {
	t.Helper()
	var m uint64
	for _, k := range r.keys(t) {
		_, hi := ltxRange(t, k)
		m = max(m, hi)
	}
	return m
}

// Rolling back from sluice to Litestream, on another host: sluice writes,
// `litestream restore` then `litestream replicate` continue the replica from
// the restored copy (its new WAL cannot be the one sluice read: Litestream
// must start a new snapshot), then `sluice restore` and `sluice replicate`
// take it over again on a third. After every phase, both tools restore every
// row written so far.
func TestLitestreamContinuesAReplicaSluiceWroteAfterRestore(t *testing.T) {
	t.Parallel()
	for name, mk := range rollbackReplicas(t) {
		t.Run(name, func(t *testing.T) {
			r := mk(t)
			dir := t.TempDir()
			first := filepath.Join(dir, "app.db")
			if err := writer(t, first, 5, 5, 0).wait(t, time.Minute); err != nil {
				t.Fatal(err)
			}

			r.replicateWithSluice(t, first, 600)
			r.check(t, first, phase{"sluice", 605}, 1)

			second := filepath.Join(dir, "second", "app.db")
			if err := os.MkdirAll(filepath.Dir(second), 0o755); err != nil {
				t.Fatal(err)
			}
			r.litestream(t, "restore", "-o", second, r.url)
			before := r.maxTXID(t)
			r.replicateWithLitestream(t, second, 500)
			r.tookOver(t, before, "a new snapshot")
			r.check(t, second, phase{"litestream", 1105}, 2)

			// And back to sluice on a third host, from its own restore.
			third := filepath.Join(dir, "third", "app.db")
			mustSluice(t, r.sluiceEnv, "restore", "-o", third, r.url)
			r.replicateWithSluice(t, third, 400)
			r.check(t, third, phase{"sluice", 1505}, 3)
		})
	}
}

// Rolling back from sluice to Litestream on the same host: Litestream
// replicates the database sluice was replicating, first without its state
// folder (.<db>-litestream), later with the stale one it left, sluice taking
// over in between and after. While the application keeps the database open
// (the WAL sluice read is still there) Litestream continues from the WAL
// offset sluice recorded; once it closed it (SQLite deleted the WAL with the
// last connection) Litestream starts a new snapshot. After every phase both
// tools restore every row written so far.
func TestLitestreamContinuesAReplicaSluiceWroteOnTheSameHost(t *testing.T) {
	t.Parallel()
	for _, app := range []struct {
		name     string
		open     bool
		takeover string
	}{{"app-open", true, "continued from the WAL"}, {"app-closed", false, "a new snapshot"}} {
		for name, mk := range rollbackReplicas(t) {
			t.Run(app.name+"/"+name, func(t *testing.T) {
				r := mk(t)
				db := filepath.Join(t.TempDir(), "app.db")
				if err := writer(t, db, 5, 5, 0).wait(t, time.Minute); err != nil {
					t.Fatal(err)
				}
				if app.open {
					holdOpen(t, db)
				}
				state := filepath.Join(filepath.Dir(db), ".app.db-litestream")
				total := 5
				for i, p := range []phase{{"sluice", 600}, {"litestream", 500}, {"sluice", 400}, {"litestream", 300}, {"sluice", 200}} {
					total += p.rows
					if p.tool == "sluice" {
						r.replicateWithSluice(t, db, p.rows)
					} else {
						_, err := os.Stat(state)
						if stale := err == nil; stale != (i > 1) {
							t.Fatalf("Litestream's state folder present: %v before phase %d", stale, i+1)
						}
						before := r.maxTXID(t)
						r.replicateWithLitestream(t, db, p.rows)
						r.tookOver(t, before, app.takeover)
					}
					r.check(t, db, phase{p.tool, total}, i+1)
				}
			})
		}
	}
}

// tookOver requires that Litestream's first file after TXID before was
// written the way named.
func (r rollbackReplica) tookOver(t *testing.T, before uint64, want string) {
	t.Helper()
	got := r.firstFileAfter(t, before)
	t.Logf("litestream took over at TXID %d with %s", before+1, got)
	if got != want {
		t.Fatalf("litestream took over at TXID %d with %s, want %s", before+1, got, want)
	}
}

// holdOpen keeps a connection to db open for the rest of the test, as a
// running application does: the last connection to close would checkpoint
// and delete the WAL.
func holdOpen(t *testing.T, db string) {
	t.Helper()
	p := start(t, nil, "python3", "-c", `
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
db.execute("SELECT count(*) FROM t").fetchone()
print("open", flush=True)
time.sleep(3600)
`, db)
	waitFor(t, p, "open", 30*time.Second)
}

// Retention has deleted every level-0 file compaction covers (as it does
// minutes after an idle spell) before Litestream takes the replica over on
// the same host: the newest level-0 file, which Litestream takes its position
// from, is still there, so Litestream continues at the next TXID rather than
// at TXID 1 behind the old snapshot, where restores would not see its rows.
func TestLitestreamContinuesAReplicaAfterSluiceRetention(t *testing.T) {
	t.Parallel()
	r := rollbackReplicas(t)["file"](t)
	db := filepath.Join(t.TempDir(), "app.db")
	if err := writer(t, db, 5, 5, 0).wait(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	holdOpen(t, db)
	side := start(t, nil, sluiceBin, "replicate", "-interval", "100ms",
		"-l0-retention", "1s", "-retention", "2s", "-snapshot-interval", "1s", db, r.url)
	time.Sleep(300 * time.Millisecond)
	if err := writer(t, db, 300, 5, time.Millisecond).wait(t, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	level0 := func() (n int) {
		for _, k := range r.keys(t) {
			if strings.HasPrefix(k, "ltx/0/") {
				n++
			}
		}
		return n
	}
	// Compacted: a level above 0 exists (retention may already have removed
	// level 1's files, leaving the snapshot level).
	compacted := func() bool {
		for _, k := range r.keys(t) {
			if strings.HasPrefix(k, "ltx/") && !strings.HasPrefix(k, "ltx/0/") {
				return true
			}
		}
		return false
	}
	// Level-1 compaction and retention run on 30 s boundaries. Wait for both:
	// before the first upload level 0 holds no more than one file either.
	deadline := time.Now().Add(3 * time.Minute)
	waited := time.Now()
	for (level0() > 1 || !compacted()) && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	t.Logf("compaction and retention took %s; the replica holds %v", time.Since(waited).Round(time.Second), r.keys(t))
	stopSidecar(t, side)
	if n := level0(); n != 1 {
		t.Fatalf("after retention level 0 holds %d files, want the newest only; the replica holds %v", n, r.keys(t))
	}
	r.check(t, db, phase{"sluice", 305}, 1)

	before := r.maxTXID(t)
	r.replicateWithLitestream(t, db, 200)
	r.tookOver(t, before, "continued from the WAL")
	r.check(t, db, phase{"litestream", 505}, 2)
}
