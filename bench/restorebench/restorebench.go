// Package restorebench measures restore time and peak memory at several
// database sizes: the 468,703-row single-row-insert workload (25MB) and larger
// databases of the same rows built in bulk, each replicated to one MinIO by
// sluice and by Litestream 0.5.17, then restored by each, beside the time to
// download one object of the database's size from that MinIO (the reference).
//
// It drives the sluice binary itself and the litestream binary as child
// processes, so both are measured the way users run them.
package restorebench

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/bench/storelatency"
	"github.com/sluicedb/sluice/internal/minioproc"
)

// Options configures a run.
type Options struct {
	Sizes   []Size // databases to build and restore; the 25MB one (RowByRowSize) is written row by row, the others in bulk
	Rows    int    // rows inserted one transaction at a time in the 25MB database (468,703)
	PerTx   int    // rows per transaction in the 25MB database
	Runs    int    // restores per tool; the median is reported
	Sluice  string
	WorkDir string
	Keep    bool // leave MinIO running and the work directory in place (for profiling)
	Out     io.Writer
	// StoreLatency, if not zero, puts a real bucket's latency in front of
	// MinIO for the restores and the reference download (not for building).
	StoreLatency storelatency.Spec
}

// Size is a database size to benchmark, as given on the command line.
type Size struct {
	Label string
	Bytes int64
}

// RowByRowSize is the single-row-insert service's database: its 468,703 rows in one-row transactions.
var RowByRowSize = Size{Label: "25MB", Bytes: 25e6}

// ParseSizes parses "25MB,250MB,1GB" (decimal units).
func ParseSizes(s string) ([]Size, error) {
	var out []Size
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		u := strings.ToUpper(f)
		mult := int64(1)
		switch {
		case strings.HasSuffix(u, "GB"):
			mult, u = 1e9, strings.TrimSuffix(u, "GB")
		case strings.HasSuffix(u, "MB"):
			mult, u = 1e6, strings.TrimSuffix(u, "MB")
		}
		n, err := strconv.ParseFloat(u, 64)
		if err != nil || n <= 0 || mult == 1 {
			return nil, fmt.Errorf("size %q: want e.g. 25MB or 1GB", f)
		}
		out = append(out, Size{Label: f, Bytes: int64(n * float64(mult))})
	}
	return out, nil
}

// seedRow is the single-row insert workload's JSON document, inserted once per row.
const seedRow = `{"age":10, "name":"yamada", "class":"A"}`

// bytesPerRow: the single-row-insert workload's 468,703 rows make a 23.2 MB database.
const bytesPerRow = 49.5

// result is one size's figures.
type result struct {
	size               Size
	rows               int
	dbBytes            int64
	tSluice, tLS, tGet []time.Duration
	rssSluice, rssLS   []int64 // peak RSS of each restore process, bytes
	sObjs, lObjs       int
	sBytes, lBytes     int64
}

// Run builds both replicas of each size, restores each Runs times and prints
// a table per size and a summary.
func Run(ctx context.Context, o Options) error {
	if o.Rows <= 0 {
		o.Rows = 468703
	}
	if o.PerTx <= 0 {
		o.PerTx = 1
	}
	if o.Runs <= 0 {
		o.Runs = 5
	}
	if len(o.Sizes) == 0 {
		o.Sizes = []Size{RowByRowSize}
	}
	litestream, err := exec.LookPath("litestream")
	if err != nil {
		return fmt.Errorf("litestream not found: run scripts/install-test-deps.sh")
	}
	dir, err := os.MkdirTemp(o.WorkDir, "sluice-bench-restore-")
	if err != nil {
		return err
	}
	if !o.Keep {
		defer os.RemoveAll(dir)
	}
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, format+"\n", args...) }

	say("starting MinIO…")
	m, err := minioproc.Start(ctx, filepath.Join(dir, "minio"))
	if err != nil {
		return err
	}
	if o.Keep {
		say("keeping %s; MinIO at %s (%s)", dir, m.Endpoint, strings.Join(m.Env(), " "))
		defer func() { select {} }()
	} else {
		defer m.Stop()
	}
	if err := m.CreateBucket(ctx, "bench"); err != nil {
		return err
	}
	var results []result
	for _, sz := range o.Sizes {
		r, err := runSize(ctx, o, m, litestream, filepath.Join(dir, sz.Label), sz, say)
		if err != nil {
			return fmt.Errorf("size %s: %w", sz.Label, err)
		}
		results = append(results, r)
	}
	say("")
	say("summary (medians; x = time / one GET of the database's bytes from the same MinIO; RSS = peak RSS of the restore process)")
	say("%-7s %9s %9s %11s %7s %11s %7s %11s %11s", "size", "db MB", "GET", "sluice", "x GET", "litestream", "x GET", "sluice RSS", "ls RSS")
	for _, r := range results {
		ms, ml, mg := median(r.tSluice), median(r.tLS), median(r.tGet)
		say("%-7s %9.1f %9s %11s %6.2fx %11s %6.2fx %8.0f MB %8.0f MB", r.size.Label, float64(r.dbBytes)/1e6, fmtDur(mg),
			fmtDur(ms), float64(ms)/float64(mg), fmtDur(ml), float64(ml)/float64(mg),
			float64(maxOf(r.rssSluice))/1e6, float64(maxOf(r.rssLS))/1e6)
	}
	say("targets: sluice <= 3x GET at every size, faster than litestream, <= 128 MB RSS at 1 GB")
	return nil
}

// runSize builds one size's replicas and measures the restores.
func runSize(ctx context.Context, o Options, m *minioproc.Server, litestream, dir string, sz Size, say func(string, ...any)) (result, error) {
	r := result{size: sz}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	env := append(os.Environ(), m.Env()...)
	// Litestream 0.5.17's S3 client fails when AWS_CA_BUNDLE is set.
	lsEnv := append(withoutEnv(os.Environ(), "AWS_CA_BUNDLE"), m.Env()...)
	prefix := "size-" + sz.Label
	sluiceURL, lsURL := m.URL("bench", prefix+"/sluice"), m.URL("bench", prefix+"/litestream")
	sluiceDB, lsDB := filepath.Join(dir, "sluice.db"), filepath.Join(dir, "litestream.db")

	if sz == RowByRowSize {
		r.rows = o.Rows
		say("[%s] building the single-row-insert database (%d rows, %d per transaction) while sluice replicates it…", sz.Label, o.Rows, o.PerTx)
		if err := buildWhileReplicating(ctx, m, prefix+"/sluice/", sluiceDB, o, exec.Command(o.Sluice, "replicate", sluiceDB, sluiceURL), env); err != nil {
			return r, fmt.Errorf("sluice replication: %w", err)
		}
		say("[%s] building the same database while Litestream replicates it…", sz.Label)
		if err := buildWhileReplicating(ctx, m, prefix+"/litestream/", lsDB, o, exec.Command(litestream, "replicate", lsDB, lsURL), lsEnv); err != nil {
			return r, fmt.Errorf("litestream replication: %w", err)
		}
	} else {
		bulkRows := int(float64(sz.Bytes) / bytesPerRow)
		r.rows = bulkRows + tailTxs*tailRows
		say("[%s] building a %d-row database in bulk…", sz.Label, bulkRows)
		start := time.Now()
		if err := buildBulk(filepath.Join(dir, "bulk.db"), bulkRows); err != nil {
			return r, err
		}
		say("[%s] built in %s; replicating it with sluice, then with Litestream (each then sees %d small transactions)…",
			sz.Label, time.Since(start).Round(time.Second), tailTxs)
		for _, c := range []struct {
			db  string
			cmd *exec.Cmd
			env []string
			who string
		}{{sluiceDB, exec.Command(o.Sluice, "replicate", sluiceDB, sluiceURL), env, "sluice/"},
			{lsDB, exec.Command(litestream, "replicate", lsDB, lsURL), lsEnv, "litestream/"}} {
			if err := copyFile(filepath.Join(dir, "bulk.db"), c.db); err != nil {
				return r, err
			}
			if err := replicateExisting(ctx, m, prefix+"/"+c.who, c.db, c.cmd, c.env); err != nil {
				return r, fmt.Errorf("%sreplication: %w", c.who, err)
			}
		}
		_ = os.Remove(filepath.Join(dir, "bulk.db"))
	}
	fi, err := os.Stat(sluiceDB)
	if err != nil {
		return r, err
	}
	r.dbBytes = fi.Size()
	if r.sObjs, r.sBytes, err = footprint(ctx, m, prefix+"/sluice/"); err != nil {
		return r, err
	}
	if r.lObjs, r.lBytes, err = footprint(ctx, m, prefix+"/litestream/"); err != nil {
		return r, err
	}
	_ = os.Remove(sluiceDB)
	_ = os.Remove(lsDB)

	// The reference: one object of the database's size, downloaded from the same MinIO.
	blobKey := prefix + "/floor/blob"
	if err := putRandom(ctx, m, filepath.Join(dir, "blob"), blobKey, r.dbBytes); err != nil {
		return r, fmt.Errorf("upload reference object: %w", err)
	}

	_, unproxy, err := storelatency.Front(m, o.StoreLatency)
	if err != nil {
		return r, err
	}
	defer func() {
		if s := unproxy(); s != "" {
			say("[%s] store latency added by the proxy (%s): %s", sz.Label, o.StoreLatency, s)
		}
	}()
	sluiceURL, lsURL = m.URL("bench", prefix+"/sluice"), m.URL("bench", prefix+"/litestream")
	for i := 0; i < o.Runs; i++ {
		sOut, lOut := filepath.Join(dir, fmt.Sprintf("s%d.db", i)), filepath.Join(dir, fmt.Sprintf("l%d.db", i))
		d, rss, err := timeCmd(ctx, env, o.Sluice, "restore", "-q", "-o", sOut, sluiceURL)
		if err != nil {
			return r, err
		}
		r.tSluice, r.rssSluice = append(r.tSluice, d), append(r.rssSluice, rss)
		d, rss, err = timeCmd(ctx, lsEnv, litestream, "restore", "-o", lOut, lsURL)
		if err != nil {
			return r, err
		}
		r.tLS, r.rssLS = append(r.tLS, d), append(r.rssLS, rss)
		start := time.Now()
		out, err := m.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bench"), Key: aws.String(blobKey)})
		if err != nil {
			return r, err
		}
		if _, err := io.Copy(io.Discard, out.Body); err != nil {
			return r, err
		}
		out.Body.Close()
		r.tGet = append(r.tGet, time.Since(start))
		if i == 0 {
			if err := sameRows(sOut, lOut, int64(r.rows)); err != nil {
				return r, err
			}
		}
		for _, p := range []string{sOut, lOut} {
			_ = os.Remove(p)
			_ = os.Remove(p + "-sluice") // the position record restore leaves beside the database
		}
	}

	ms, ml, mg := median(r.tSluice), median(r.tLS), median(r.tGet)
	say("")
	say("%s database: %d rows, %.1f MB; %d restores each, medians (all runs)", sz.Label, r.rows, float64(r.dbBytes)/1e6, o.Runs)
	say("%-36s %10s %10s   %s", "", "median", "peak RSS", "runs")
	say("%-36s %10s %10s   %s", "download one object of that size", fmtDur(mg), "", fmtDurs(r.tGet))
	say("%-36s %10s %7.0f MB   %s", "sluice restore", fmtDur(ms), float64(maxOf(r.rssSluice))/1e6, fmtDurs(r.tSluice))
	say("%-36s %10s %7.0f MB   %s", "litestream restore (0.5.17)", fmtDur(ml), float64(maxOf(r.rssLS))/1e6, fmtDurs(r.tLS))
	say("sluice / download   = %.2fx   (target <= 3x)", float64(ms)/float64(mg))
	say("litestream / sluice = %.2fx", float64(ml)/float64(ms))
	say("replica footprint: sluice %d objects, %.1f MB; litestream %d objects, %.1f MB", r.sObjs, float64(r.sBytes)/1e6, r.lObjs, float64(r.lBytes)/1e6)
	say("both restores verified: %d rows, integrity_check ok", r.rows)
	say("")
	return r, nil
}

// The bulk-built databases get tailTxs small transactions while replicated,
// so their restores apply incremental files over the snapshot, as real ones do.
const (
	tailTxs  = 20
	tailRows = 35
)

// buildBulk writes rows of the single-row-insert workload's JSON document in large transactions,
// generated inside SQLite so a 1 GB database takes seconds, not minutes.
func buildBulk(path string, rows int) error {
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range []string{"PRAGMA journal_mode=OFF", "PRAGMA synchronous=OFF",
		"CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON)"} {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	const batch = 1_000_000
	for done := 0; done < rows; done += batch {
		n := min(batch, rows-done)
		q := fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < %d)
			INSERT INTO t (json) SELECT '%s' FROM n`, n, seedRow)
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			return fmt.Errorf("bulk insert: %w", err)
		}
	}
	return nil
}

// replicateExisting starts the replicator on a database that already holds
// its data, waits until the replica stops growing (the snapshot is up), adds
// tailTxs small transactions, and stops it with SIGTERM.
func replicateExisting(ctx context.Context, m *minioproc.Server, prefix, path string, rep *exec.Cmd, env []string) error {
	var logs bytes.Buffer
	rep.Env, rep.Stdout, rep.Stderr = env, &logs, &logs
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenWAL)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range []string{"PRAGMA journal_mode=WAL", "PRAGMA busy_timeout=5000"} {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	done, stop, err := startReplicator(rep, &logs)
	if err != nil {
		return err
	}
	if err := waitStable(ctx, m, prefix, done); err != nil {
		_ = stop()
		return fmt.Errorf("%w\n%s", err, logs.String())
	}
	for i := 0; i < tailTxs; i++ {
		q := fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < %d)
			INSERT INTO t (json) SELECT '%s' FROM n`, tailRows, seedRow)
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			_ = stop()
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // one more interval so the replicator sees a quiet database
	return stop()
}

// waitStable waits until objects exist under prefix and their total size has
// not changed for two seconds.
// exited is the replicator's Wait result (capacity 1); what it reads is put back.
func waitStable(ctx context.Context, m *minioproc.Server, prefix string, exited chan error) error {
	deadline := time.Now().Add(10 * time.Minute)
	var last int64 = -1
	stableSince := time.Now()
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("replicator exited early: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
		_, b, err := footprint(ctx, m, prefix)
		if err != nil {
			return err
		}
		if b != last {
			last, stableSince = b, time.Now()
		} else if b > 0 && time.Since(stableSince) >= 2*time.Second {
			return nil
		}
	}
	return fmt.Errorf("the replica under %s never settled", prefix)
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// putRandom uploads size random bytes under key, staged in a file so the
// benchmark's own memory stays small.
func putRandom(ctx context.Context, m *minioproc.Server, path, key string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	defer f.Close()
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err = m.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String(key), Body: f, ContentLength: aws.Int64(size)})
	return err
}

// buildWhileReplicating inserts the rows in small transactions while the
// replicator runs, waits until the replica under prefix stops growing (a
// loaded machine can delay a replicator's first upload by seconds), then
// stops it with SIGTERM (which ships everything).
func buildWhileReplicating(ctx context.Context, m *minioproc.Server, prefix, path string, o Options, rep *exec.Cmd, env []string) error {
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range []string{"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA busy_timeout=5000",
		"CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON)"} {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	var logs bytes.Buffer
	rep.Env, rep.Stdout, rep.Stderr = env, &logs, &logs
	done, stop, err := startReplicator(rep, &logs)
	if err != nil {
		return err
	}

	ins, err := conn.Prepare("INSERT INTO t (json) VALUES (?)")
	if err != nil {
		stop()
		return err
	}
	for n := 0; n < o.Rows; {
		if err := sqlitex.Execute(conn, "BEGIN IMMEDIATE", nil); err != nil {
			stop()
			return err
		}
		for i := 0; i < o.PerTx && n < o.Rows; i, n = i+1, n+1 {
			ins.BindText(1, seedRow)
			if _, err := ins.Step(); err != nil {
				stop()
				return err
			}
			ins.Reset()
		}
		if err := sqlitex.Execute(conn, "COMMIT", nil); err != nil {
			stop()
			return err
		}
		if step := o.Rows / 5; step > 0 && n%step < o.PerTx && n < o.Rows {
			fmt.Fprintf(o.Out, "  %d of %d rows…\n", n, o.Rows)
		}
	}
	ins.Finalize()
	time.Sleep(1500 * time.Millisecond) // one more interval so both tools see a quiet database
	if err := waitStable(ctx, m, prefix, done); err != nil {
		_ = stop()
		return fmt.Errorf("%w\n%s", err, logs.String())
	}
	return stop()
}

func footprint(ctx context.Context, m *minioproc.Server, prefix string) (objects int, bytes int64, err error) {
	p := s3.NewListObjectsV2Paginator(m.Client(), &s3.ListObjectsV2Input{Bucket: aws.String("bench"), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return 0, 0, err
		}
		for _, o := range page.Contents {
			objects++
			bytes += aws.ToInt64(o.Size)
		}
	}
	return objects, bytes, nil
}

// timeCmd runs a command and returns its wall time and the peak RSS of the
// process (wait4's rusage, Maxrss in KiB on Linux).
func timeCmd(ctx context.Context, env []string, name string, args ...string) (time.Duration, int64, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss * 1024
	}
	return d, rss, nil
}

func maxOf(v []int64) int64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// sameRows checks both restored databases hold want rows and pass integrity_check.
func sameRows(a, b string, want int64) error {
	for _, p := range []string{a, b} {
		conn, err := sqlite.OpenConn(p, sqlite.OpenReadOnly)
		if err != nil {
			return err
		}
		var n int64
		var ok string
		err = sqlitex.ExecuteTransient(conn, "SELECT count(*) FROM t", &sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error { n = s.ColumnInt64(0); return nil }})
		if err == nil {
			err = sqlitex.ExecuteTransient(conn, "PRAGMA integrity_check", &sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error { ok = s.ColumnText(0); return nil }})
		}
		conn.Close()
		if err != nil {
			return fmt.Errorf("check %s: %w", p, err)
		}
		if n != want || ok != "ok" {
			return fmt.Errorf("restored %s: %d rows (want %d), integrity %q", filepath.Base(p), n, want, ok)
		}
	}
	return nil
}

func withoutEnv(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

func fmtDurs(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond))
	}
	return strings.Join(parts, " ") + " ms"
}

// startReplicator starts rep (whose output goes to logs) and returns a channel
// that receives its exit status and a stop function that SIGTERMs it and
// waits (killing it after two minutes).
func startReplicator(rep *exec.Cmd, logs *bytes.Buffer) (chan error, func() error, error) {
	if err := rep.Start(); err != nil {
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- rep.Wait() }()
	stop := func() error {
		_ = rep.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("%v\n%s", err, logs.String())
			}
			return nil
		case <-time.After(2 * time.Minute):
			_ = rep.Process.Kill()
			return fmt.Errorf("replicator did not stop\n%s", logs.String())
		}
	}
	return done, stop, nil
}
