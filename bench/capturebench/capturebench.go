// Package capturebench measures a sidecar under a writer that never pauses:
// the same load (small transactions of ~1 KB rows, as fast as one connection
// can commit) replicated to one MinIO by `sluice replicate` and, in a separate
// run, by `litestream replicate` (0.5.17), printed side by side: peak RSS, CPU
// per GB of WAL, replication lag per 30 s window, the WAL's peak size and the
// time from SIGTERM to exit.
//
// The writer runs in this process; each replicator is a child process, run
// the way users run it. It imports minioproc and superfly/ltx, never engine:
// it sees the replicators only from outside.
package capturebench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/superfly/ltx"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/bench/storelatency"
	"github.com/sluicedb/sluice/internal/minioproc"
)

// Options configures a run.
type Options struct {
	// StoreLatency, if not zero, puts a real bucket's latency in front of
	// MinIO for both replicators and the lag probe.
	StoreLatency storelatency.Spec
	Duration     time.Duration // how long the writer writes (default 60s)
	RowBytes     int           // bytes per row (default 1024)
	RowsPerTx    int           // rows per transaction (default 1)
	Window       time.Duration // lag statistics window (default 30s)
	Poll         time.Duration // bucket poll period, the lag's resolution (default 100ms)
	Tools        []string      // "sluice", "litestream" (default both)
	Sluice       string        // the sluice binary
	LogDir       string        // if set: each replicator's output goes to LogDir/<tool>.log too (sluice with -v)
	WorkDir      string
	Out          io.Writer
}

func (o *Options) defaults() {
	if o.Duration <= 0 {
		o.Duration = 60 * time.Second
	}
	if o.RowBytes <= 0 {
		o.RowBytes = 1024
	}
	if o.RowsPerTx <= 0 {
		o.RowsPerTx = 1
	}
	if o.Window <= 0 {
		o.Window = 30 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 100 * time.Millisecond
	}
	if len(o.Tools) == 0 {
		o.Tools = []string{"sluice", "litestream"}
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
}

// result is what one replicator did under the load.
type result struct {
	tool       string
	commits    int64
	walBytes   int64 // WAL written by the writer (frames × frame size)
	walPeak    int64 // largest size of the -wal file seen
	dbBytes    int64
	peakRSS    int64 // bytes (getrusage ru_maxrss of the replicator)
	cpu        time.Duration
	stop       time.Duration // SIGTERM to exit
	longest    time.Duration // the writer's longest commit
	windows    []window
	missing    int64 // commits before SIGTERM not in the bucket after exit
	objects    int
	fullReads  int // sluice's "resynchronising by full read" log lines
	exitErr    error
	logTail    string
	writerRate float64 // commits per second
}

type window struct {
	from, to time.Duration
	n        int
	p50, p99 time.Duration
}

// Run measures each tool in turn on a fresh database and prints the table.
func Run(ctx context.Context, o Options) error {
	o.defaults()
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, format+"\n", args...) }
	dir, err := os.MkdirTemp(o.WorkDir, "sluice-bench-capture-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	say("starting MinIO…")
	m, err := minioproc.Start(ctx, filepath.Join(dir, "minio"))
	if err != nil {
		return err
	}
	defer m.Stop()
	if err := m.CreateBucket(ctx, "bench"); err != nil {
		return err
	}
	_, unproxy, err := storelatency.Front(m, o.StoreLatency)
	if err != nil {
		return err
	}
	defer func() {
		if s := unproxy(); s != "" {
			fmt.Fprintf(o.Out, "store latency added by the proxy (%s): %s\n", o.StoreLatency, s)
		}
	}()

	var results []*result
	for _, tool := range o.Tools {
		db := filepath.Join(dir, tool, "app.db")
		if err := os.MkdirAll(filepath.Dir(db), 0o755); err != nil {
			return err
		}
		cmd, err := replicatorCmd(tool, o, m, db, dir)
		if err != nil {
			return err
		}
		say("%s: writer flat out for %s (%d-byte rows, %d per transaction)…", tool, o.Duration, o.RowBytes, o.RowsPerTx)
		r, err := measure(ctx, o, m, tool, db, cmd)
		if err != nil {
			return fmt.Errorf("%s: %w", tool, err)
		}
		if r.exitErr != nil {
			say("%s exited with %v; its log ends:\n%s", tool, r.exitErr, r.logTail)
		}
		results = append(results, r)
	}
	report(o, results)
	// sluice promises every commit before SIGTERM is shipped: fail if not.
	// The reference's losses are reported, not failed on.
	for _, r := range results {
		if r.missing == 0 && r.exitErr == nil {
			continue
		}
		if r.tool == "sluice" {
			return fmt.Errorf("%s: %d commits made before SIGTERM are missing from the bucket after exit (exit: %v)", r.tool, r.missing, r.exitErr)
		}
		say("%s: %d commits made before SIGTERM are missing from the bucket after exit (exit: %v)", r.tool, r.missing, r.exitErr)
	}
	return nil
}

// replicatorCmd builds the child process for tool, both at a 1 s sync interval.
func replicatorCmd(tool string, o Options, m *minioproc.Server, db, dir string) (*exec.Cmd, error) {
	switch tool {
	case "sluice":
		args := []string{"replicate", "-interval", "1s", db, m.URL("bench", "sluice")}
		if o.LogDir != "" {
			args = append([]string{args[0], "-v"}, args[1:]...)
		}
		cmd := exec.Command(o.Sluice, args...)
		cmd.Env = append(os.Environ(), m.Env()...)
		return cmd, nil
	case "litestream":
		bin, err := litestreamBinary()
		if err != nil {
			return nil, err
		}
		cfg := filepath.Join(dir, "litestream.yml")
		yml := fmt.Sprintf(`dbs:
  - path: %s
    replicas:
      - type: s3
        bucket: bench
        path: litestream
        endpoint: %s
        region: %s
        force-path-style: true
        sync-interval: 1s
`, db, m.Endpoint, minioproc.Region)
		if err := os.WriteFile(cfg, []byte(yml), 0o644); err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "replicate", "-config", cfg)
		// Litestream 0.5.17's S3 client fails when AWS_CA_BUNDLE is set.
		cmd.Env = append(withoutEnv(os.Environ(), "AWS_CA_BUNDLE"), m.Env()...)
		return cmd, nil
	}
	return nil, fmt.Errorf("unknown tool %q (want sluice or litestream)", tool)
}

// litestreamBinary finds the litestream executable itself, not a wrapper
// script (a pyenv shim would stand between the signal and the process, and
// its own memory would be measured).
func litestreamBinary() (string, error) {
	p, err := exec.LookPath("litestream")
	if err != nil {
		return "", errors.New("litestream not found: run scripts/install-test-deps.sh")
	}
	if b, err := os.ReadFile(p); err == nil && bytes.HasPrefix(b, []byte("#!")) {
		if out, err := exec.Command("pyenv", "which", "litestream").Output(); err == nil {
			return strings.TrimSpace(string(out)), nil
		}
	}
	return p, nil
}

// measure runs the writer and the replicator, then stops the replicator with
// SIGTERM while the writer still writes.
func measure(ctx context.Context, o Options, m *minioproc.Server, tool, path string, cmd *exec.Cmd) (*result, error) {
	w, err := newWriter(path, o)
	if err != nil {
		return nil, err
	}
	defer w.close()
	var logs tailBuffer
	var out io.Writer = &logs
	if o.LogDir != "" {
		f, err := os.Create(filepath.Join(o.LogDir, tool+".log"))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		out = io.MultiWriter(&logs, f)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	mon := &monitor{client: m.Client(), prefix: tool + "/0000/", clockPgno: w.clockPgno, seen: map[string]bool{}}
	monCtx, stopMon := context.WithCancel(ctx)
	defer stopMon()
	monDone := make(chan struct{})
	var walPeak atomic.Int64
	go func() {
		defer close(monDone)
		t := time.NewTicker(o.Poll)
		defer t.Stop()
		for {
			if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > walPeak.Load() {
				walPeak.Store(st.Size())
			}
			mon.poll(monCtx)
			select {
			case <-monCtx.Done():
				return
			case <-t.C:
			}
		}
	}()

	// Let the replicator take its first snapshot of the (empty) database.
	time.Sleep(2 * time.Second)
	start := time.Now()
	writeCtx, stopWriting := context.WithCancel(ctx)
	defer stopWriting()
	writerDone := make(chan error, 1)
	go func() { writerDone <- w.run(writeCtx, start) }()

	var exitErr error
	select {
	case <-time.After(o.Duration):
	case exitErr = <-exited:
		stopWriting()
		<-writerDone
		stopMon()
		<-monDone
		return nil, fmt.Errorf("exited during the run: %v\n%s", exitErr, logs.tail(3000))
	}
	sigAt := time.Now()
	lastBefore := w.committed.Load() // every commit up to here must reach the bucket
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case exitErr = <-exited:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		exitErr = <-exited
		exitErr = fmt.Errorf("did not exit within 2 minutes of SIGTERM (killed): %v", exitErr)
	}
	stop := time.Since(sigAt)
	stopWriting()
	if err := <-writerDone; err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	stopMon()
	<-monDone
	mon.poll(ctx) // everything shipped before exit
	r := &result{tool: tool, commits: lastBefore, walPeak: walPeak.Load(), stop: stop, exitErr: exitErr, logTail: logs.tail(3000)}
	r.walBytes = w.walBytes(lastBefore)
	r.longest = w.longest // the writer has stopped: no race
	r.writerRate = float64(lastBefore) / sigAt.Sub(start).Seconds()
	if st, err := os.Stat(path); err == nil {
		r.dbBytes = st.Size()
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.peakRSS = ru.Maxrss * 1024
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	r.fullReads = logs.fullReads()
	r.objects = len(mon.seen)
	if r.objects == 0 && mon.lastErr != nil {
		return nil, fmt.Errorf("could not read the replica: %w", mon.lastErr)
	}
	r.windows, r.missing = lagWindows(w, mon.observations(), lastBefore, start, o.Window, sigAt)
	return r, nil
}

// writer commits as fast as one connection can: RowsPerTx random rows, plus
// one update of a one-row "clock" table carrying the commit's sequence
// number. The clock lives in one page that every commit rewrites, so every
// LTX file a replicator ships holds it, and the newest sequence number in a
// file says exactly which commits the file makes durable.
type writer struct {
	conn      *sqlite.Conn
	shm       *os.File
	o         Options
	clockPgno uint32
	pageSize  int64

	committed atomic.Int64  // sequence number of the last commit
	longest   time.Duration // longest time one commit took (the writer's worst stall)
	mu        sync.Mutex
	at        []time.Duration // at[s-1]: when commit s returned, since start
	frames    []int64         // frames[s-1]: WAL frames written up to commit s
}

func newWriter(path string, o Options) (*writer, error) {
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL)
	if err != nil {
		return nil, err
	}
	w := &writer{conn: conn, o: o}
	for _, q := range []string{"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA busy_timeout=5000",
		"CREATE TABLE clock (id INTEGER PRIMARY KEY, v TEXT)",
		"INSERT INTO clock VALUES (1, 'SEQ:0000000000000000:QES')",
		"CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)"} {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			conn.Close()
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	err = sqlitex.ExecuteTransient(conn, "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_schema WHERE name = 'clock'",
		&sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error {
			w.clockPgno, w.pageSize = uint32(s.ColumnInt64(0)), s.ColumnInt64(1)
			return nil
		}})
	if err == nil && w.clockPgno == 0 {
		err = errors.New("no clock table")
	}
	if err == nil {
		w.shm, err = os.Open(path + "-shm")
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return w, nil
}

func (w *writer) close() {
	w.conn.Close()
	if w.shm != nil {
		w.shm.Close()
	}
}

func (w *writer) run(ctx context.Context, start time.Time) error {
	ins, err := w.conn.Prepare("INSERT INTO t (v) VALUES (randomblob(?))")
	if err != nil {
		return err
	}
	clock, err := w.conn.Prepare("UPDATE clock SET v = ? WHERE id = 1")
	if err != nil {
		return err
	}
	var frames int64
	var lastMx uint32
	var lastSalt uint64
	// tx runs one transaction; a busy error (a replicator holding the write
	// lock past the busy timeout) rolls back, and the caller tries again.
	tx := func(seq int64) error {
		if err := sqlitex.ExecuteTransient(w.conn, "BEGIN IMMEDIATE", nil); err != nil {
			return err
		}
		err := func() error {
			for i := 0; i < w.o.RowsPerTx; i++ {
				ins.BindInt64(1, int64(w.o.RowBytes))
				_, err := ins.Step()
				ins.Reset()
				if err != nil {
					return err
				}
			}
			clock.BindText(1, fmt.Sprintf("SEQ:%016d:QES", seq))
			_, err := clock.Step()
			clock.Reset()
			if err != nil {
				return err
			}
			return sqlitex.ExecuteTransient(w.conn, "COMMIT", nil)
		}()
		if err != nil && !w.conn.AutocommitEnabled() {
			_ = sqlitex.ExecuteTransient(w.conn, "ROLLBACK", nil)
		}
		return err
	}
	for seq := int64(1); ctx.Err() == nil; seq++ {
		began := time.Now()
		for {
			err := tx(seq)
			if err == nil {
				break
			} else if ctx.Err() != nil {
				return nil // stopped while waiting: this commit does not count
			} else if sqlite.ErrCode(err).ToPrimary() != sqlite.ResultBusy {
				return err
			}
		}
		w.longest = max(w.longest, time.Since(began))
		now := time.Since(start)
		// WAL written: the wal-index's mxFrame grows with each commit and
		// starts again from 0 when the log restarts (new salts).
		if mx, salt, ok := readIndex(w.shm); ok {
			if salt != lastSalt {
				frames += int64(mx)
			} else if mx > lastMx {
				frames += int64(mx - lastMx)
			}
			lastMx, lastSalt = mx, salt
		}
		w.mu.Lock()
		w.at = append(w.at, now)
		w.frames = append(w.frames, frames)
		w.mu.Unlock()
		w.committed.Store(seq)
	}
	return nil
}

// readIndex reads the wal-index header: mxFrame and the WAL's salts. (The
// header is in this machine's byte order; the salts are copied verbatim.)
func readIndex(shm *os.File) (mxFrame uint32, salts uint64, ok bool) {
	var b [48]byte
	if _, err := shm.ReadAt(b[:], 0); err != nil {
		return 0, 0, false
	}
	return binary.NativeEndian.Uint32(b[16:]), binary.BigEndian.Uint64(b[32:]), true
}

func (w *writer) walBytes(upTo int64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if upTo <= 0 || upTo > int64(len(w.frames)) {
		return 0
	}
	return w.frames[upTo-1] * (w.pageSize + 24)
}

// monitor lists the replica's level-0 files (Litestream 0.5's S3 layout:
// <prefix>/0000/<min>-<max>.ltx) and reads, from each new one,
// the newest commit it holds.
type monitor struct {
	client    *s3.Client
	prefix    string
	clockPgno uint32

	mu      sync.Mutex
	seen    map[string]bool
	obs     []observation
	lastErr error
}

type observation struct {
	at  time.Time // first poll that listed the object
	seq int64     // newest commit in it
}

func (m *monitor) poll(ctx context.Context) {
	now := time.Now()
	p := s3.NewListObjectsV2Paginator(m.client, &s3.ListObjectsV2Input{Bucket: aws.String("bench"), Prefix: aws.String(m.prefix)})
	var keys []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			m.mu.Lock()
			m.lastErr = err
			m.mu.Unlock()
			return // the next poll lists again
		}
		for _, obj := range page.Contents {
			keys = append(keys, aws.ToString(obj.Key))
		}
	}
	for _, k := range keys {
		m.mu.Lock()
		done := m.seen[k]
		m.mu.Unlock()
		if done || !strings.HasSuffix(k, ".ltx") {
			continue
		}
		seq, err := m.clockIn(ctx, k)
		if err != nil {
			m.mu.Lock()
			m.lastErr = err
			m.mu.Unlock()
			continue // deleted by compaction meanwhile, or a transient error: its successors tell the same
		}
		m.mu.Lock()
		m.seen[k] = true
		m.obs = append(m.obs, observation{at: now, seq: seq})
		m.mu.Unlock()
	}
}

// clockIn returns the newest sequence number in the clock page of an LTX
// file (0 if the file does not hold that page). Older values can linger in
// the page's free space, so the largest one found is the row's.
func (m *monitor) clockIn(ctx context.Context, key string) (int64, error) {
	out, err := m.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bench"), Key: aws.String(key)})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	dec := ltx.NewDecoder(out.Body)
	if err := dec.DecodeHeader(); err != nil {
		return 0, err
	}
	buf := make([]byte, dec.Header().PageSize)
	var best int64
	for {
		var ph ltx.PageHeader
		if err := dec.DecodePage(&ph, buf); err == io.EOF {
			break
		} else if err != nil {
			return 0, err
		}
		if ph.Pgno != m.clockPgno {
			continue
		}
		for rest := buf; ; {
			i := bytes.Index(rest, []byte("SEQ:"))
			if i < 0 || i+4+16+4 > len(rest) {
				break
			}
			if string(rest[i+20:i+24]) == ":QES" {
				if n, err := strconv.ParseInt(string(rest[i+4:i+20]), 10, 64); err == nil && n > best {
					best = n
				}
			}
			rest = rest[i+4:]
		}
	}
	return best, nil
}

func (m *monitor) observations() []observation {
	m.mu.Lock()
	defer m.mu.Unlock()
	obs := append([]observation(nil), m.obs...)
	sort.Slice(obs, func(i, j int) bool { return obs[i].at.Before(obs[j].at) })
	return obs
}

// lagWindows gives each commit up to lastBefore the time from its commit to
// the first poll that saw a file holding it, and summarises them per window
// of commit time. Commits not seen by the end are counted as missing.
func lagWindows(w *writer, obs []observation, lastBefore int64, start time.Time, size time.Duration, sigAt time.Time) ([]window, int64) {
	w.mu.Lock()
	at := append([]time.Duration(nil), w.at[:lastBefore]...)
	w.mu.Unlock()
	// Running maximum: a file seen at t makes durable every commit up to its seq.
	var maxSeq int64
	for i := range obs {
		maxSeq = max(maxSeq, obs[i].seq)
		obs[i].seq = maxSeq
	}
	var missing int64
	lags := map[int][]time.Duration{}
	for s := int64(1); s <= lastBefore; s++ {
		j := sort.Search(len(obs), func(j int) bool { return obs[j].seq >= s })
		if j == len(obs) {
			missing++
			continue
		}
		lag := obs[j].at.Sub(start) - at[s-1]
		k := int(at[s-1] / size)
		lags[k] = append(lags[k], max(lag, 0))
	}
	var out []window
	for k := 0; time.Duration(k)*size < sigAt.Sub(start)-time.Second; k++ {
		l := lags[k]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		win := window{from: time.Duration(k) * size, to: min(time.Duration(k+1)*size, sigAt.Sub(start)), n: len(l)}
		if len(l) > 0 {
			win.p50, win.p99 = l[len(l)/2], l[min(len(l)-1, len(l)*99/100)]
		}
		out = append(out, win)
	}
	return out, missing
}

func report(o Options, rs []*result) {
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, format+"\n", args...) }
	say("")
	say("sluice bench capture: one writer flat out (%d-byte rows, %d per transaction, synchronous=NORMAL, default autocheckpoint) for %s;", o.RowBytes, o.RowsPerTx, o.Duration)
	say("each replicator ships to the same MinIO at a 1 s sync interval, in its own run on a fresh database.")
	say("Lag: from a commit's return in the writer to the first bucket poll (every %s) listing a level-0 file that", o.Poll)
	say("holds it. Every commit also updates a one-row clock table with its sequence number; the clock page is")
	say("in every file shipped, so the newest number in a file says which commits it makes durable. The lag is")
	say("thus measured end to end from outside both tools, rounded up to the poll period.")
	say("CPU and peak RSS: the replicator process's getrusage after exit; WAL written: the wal-index's frame")
	say("count summed over restarts. SIGTERM is sent while the writer still writes; every commit before it must")
	say("be in the bucket once the process has exited.")
	say("")
	cols := make([]string, len(rs))
	for i, r := range rs {
		cols[i] = r.tool
	}
	row := func(label string, f func(r *result) string, ratio func(r *result) float64) {
		line := fmt.Sprintf("%-30s", label)
		for _, r := range rs {
			line += fmt.Sprintf(" %22s", f(r))
		}
		if ratio != nil && len(rs) == 2 && ratio(rs[1]) != 0 {
			line += fmt.Sprintf(" %10.2fx", ratio(rs[0])/ratio(rs[1]))
		}
		say("%s", line)
	}
	header := fmt.Sprintf("%-30s", "")
	for _, c := range cols {
		header += fmt.Sprintf(" %22s", c)
	}
	if len(rs) == 2 {
		header += fmt.Sprintf(" %11s", rs[0].tool+"/"+rs[1].tool)
	}
	say("%s", header)
	mb := func(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
	row("commits (before SIGTERM)", func(r *result) string { return fmt.Sprintf("%d (%.0f/s)", r.commits, r.writerRate) }, nil)
	row("WAL written", func(r *result) string {
		return fmt.Sprintf("%s (%.1f MB/s)", mb(r.walBytes), float64(r.walBytes)/1e6/o.Duration.Seconds())
	}, nil)
	row("database size", func(r *result) string { return mb(r.dbBytes) }, nil)
	row("peak RSS", func(r *result) string { return mb(r.peakRSS) }, func(r *result) float64 { return float64(r.peakRSS) })
	row("CPU", func(r *result) string { return fmt.Sprintf("%.1f s", r.cpu.Seconds()) }, func(r *result) float64 { return r.cpu.Seconds() })
	cpuPerGB := func(r *result) float64 {
		if r.walBytes == 0 {
			return 0
		}
		return r.cpu.Seconds() / (float64(r.walBytes) / 1e9)
	}
	row("CPU s per GB of WAL", func(r *result) string { return fmt.Sprintf("%.2f", cpuPerGB(r)) }, cpuPerGB)
	row("WAL peak size", func(r *result) string { return mb(r.walPeak) }, func(r *result) float64 { return float64(r.walPeak) })
	if len(rs) > 0 {
		for i, win := range rs[0].windows {
			label := fmt.Sprintf("lag p50/p99 %.0f-%.0fs", win.from.Seconds(), win.to.Seconds())
			p := func(r *result) (window, bool) {
				if i < len(r.windows) {
					return r.windows[i], r.windows[i].n > 0
				}
				return window{}, false
			}
			row(label, func(r *result) string {
				if w, ok := p(r); ok {
					return fmt.Sprintf("%.2f / %.2f s", w.p50.Seconds(), w.p99.Seconds())
				}
				return "-"
			}, func(r *result) float64 { w, _ := p(r); return w.p99.Seconds() })
		}
	}
	row("writer's longest commit", func(r *result) string { return fmt.Sprintf("%.0f ms", float64(r.longest)/1e6) },
		func(r *result) float64 { return r.longest.Seconds() })
	row("SIGTERM to exit", func(r *result) string { return fmt.Sprintf("%.2f s", r.stop.Seconds()) }, func(r *result) float64 { return r.stop.Seconds() })
	row("missing after exit", func(r *result) string { return strconv.FormatInt(r.missing, 10) }, nil)
	row("level-0 files seen", func(r *result) string { return strconv.Itoa(r.objects) }, nil)
	row("full re-reads (log)", func(r *result) string {
		if r.tool != "sluice" {
			return "n/a"
		}
		return strconv.Itoa(r.fullReads)
	}, nil)
	say("(ratio column: %s / %s, lower is better; for lag rows it is the ratio of the p99s)", cols[0], cols[len(cols)-1])
}

// tailBuffer keeps a child's output (bounded: the last 1 MB).
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
	n  int // full-read messages in the part already dropped
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2<<20 {
		drop := t.b[:len(t.b)-1<<20]
		t.n += bytes.Count(drop, []byte("resynchronising by full read"))
		t.b = append([]byte(nil), t.b[len(t.b)-1<<20:]...)
	}
	return len(p), nil
}

// fullReads counts sluice's full-read log lines, dropped ones included.
func (t *tailBuffer) fullReads() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n + bytes.Count(t.b, []byte("resynchronising by full read"))
}

func (t *tailBuffer) tail(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.b)
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
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
