// Package restorebench measures restore speed on seed 001's database: the same
// 468,703-row insert workload replicated to one MinIO by sluice and by
// Litestream 0.5.17, then restored by each, beside the time to download one
// object of the database's size from that MinIO (the floor).
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
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/internal/minioproc"
)

// Options configures a run.
type Options struct {
	Rows    int // rows inserted (seed 001: 468,703)
	PerTx   int // rows per transaction
	Runs    int // restores per tool; the median is reported
	Sluice  string
	WorkDir string
	Keep    bool // leave MinIO running and the work directory in place (for profiling)
	Out     io.Writer
}

// seedRow is seed 001's JSON document, inserted once per row.
const seedRow = `{"age":10, "name":"yamada", "class":"A"}`

// Run builds both replicas, restores each Runs times and prints the table.
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
		defer func() { say("replicas: %s %s", m.URL("bench", "sluice"), m.URL("bench", "litestream")); select {} }()
	} else {
		defer m.Stop()
	}
	if err := m.CreateBucket(ctx, "bench"); err != nil {
		return err
	}
	env := append(os.Environ(), m.Env()...)
	// Litestream 0.5.17's S3 client fails when AWS_CA_BUNDLE is set.
	lsEnv := append(withoutEnv(os.Environ(), "AWS_CA_BUNDLE"), m.Env()...)

	sluiceURL, lsURL := m.URL("bench", "sluice"), m.URL("bench", "litestream")
	sluiceDB, lsDB := filepath.Join(dir, "sluice.db"), filepath.Join(dir, "litestream.db")

	say("building seed 001's database (%d rows, %d per transaction) while sluice replicates it…", o.Rows, o.PerTx)
	if err := buildWhileReplicating(ctx, sluiceDB, o, exec.Command(o.Sluice, "replicate", sluiceDB, sluiceURL), env); err != nil {
		return fmt.Errorf("sluice replication: %w", err)
	}
	say("building the same database while Litestream replicates it…")
	if err := buildWhileReplicating(ctx, lsDB, o, exec.Command(litestream, "replicate", lsDB, lsURL), lsEnv); err != nil {
		return fmt.Errorf("litestream replication: %w", err)
	}
	fi, err := os.Stat(sluiceDB)
	if err != nil {
		return err
	}
	size := fi.Size()
	sObjs, sBytes, err := footprint(ctx, m, "sluice/")
	if err != nil {
		return err
	}
	lObjs, lBytes, err := footprint(ctx, m, "litestream/")
	if err != nil {
		return err
	}

	// The floor: one object of the database's size, downloaded from the same MinIO.
	blob := make([]byte, size)
	_, _ = rand.Read(blob)
	if _, err := m.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String("floor/blob"), Body: bytes.NewReader(blob)}); err != nil {
		return fmt.Errorf("upload floor object: %w", err)
	}

	var tSluice, tLS, tGet []time.Duration
	for i := 0; i < o.Runs; i++ {
		d, err := timeCmd(ctx, env, o.Sluice, "restore", "-q", "-o", filepath.Join(dir, fmt.Sprintf("s%d.db", i)), sluiceURL)
		if err != nil {
			return err
		}
		tSluice = append(tSluice, d)
		d, err = timeCmd(ctx, lsEnv, litestream, "restore", "-o", filepath.Join(dir, fmt.Sprintf("l%d.db", i)), lsURL)
		if err != nil {
			return err
		}
		tLS = append(tLS, d)
		start := time.Now()
		out, err := m.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bench"), Key: aws.String("floor/blob")})
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, out.Body); err != nil {
			return err
		}
		out.Body.Close()
		tGet = append(tGet, time.Since(start))
	}
	if err := sameRows(filepath.Join(dir, "s0.db"), filepath.Join(dir, "l0.db"), int64(o.Rows)); err != nil {
		return err
	}

	ms, ml, mg := median(tSluice), median(tLS), median(tGet)
	say("")
	say("seed 001 database: %d rows, %.1f MB; %d restores each, medians (all runs)", o.Rows, float64(size)/1e6, o.Runs)
	say("%-36s %10s   %s", "", "median", "runs")
	say("%-36s %10s   %s", "download one object of that size", fmtDur(mg), fmtDurs(tGet))
	say("%-36s %10s   %s", "sluice restore", fmtDur(ms), fmtDurs(tSluice))
	say("%-36s %10s   %s", "litestream restore (0.5.17)", fmtDur(ml), fmtDurs(tLS))
	say("")
	say("sluice / download   = %.2fx   (target <= 3x)", float64(ms)/float64(mg))
	say("litestream / sluice = %.2fx", float64(ml)/float64(ms))
	say("replica footprint: sluice %d objects, %.1f MB; litestream %d objects, %.1f MB", sObjs, float64(sBytes)/1e6, lObjs, float64(lBytes)/1e6)
	say("both restores verified: %d rows, integrity_check ok", o.Rows)
	return nil
}

// buildWhileReplicating inserts the rows in small transactions while the
// replicator runs, then stops it with SIGTERM (which ships everything).
func buildWhileReplicating(ctx context.Context, path string, o Options, rep *exec.Cmd, env []string) error {
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
	if err := rep.Start(); err != nil {
		return err
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

func timeCmd(ctx context.Context, env []string, name string, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return d, nil
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
