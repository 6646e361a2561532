// Package coldstartbench measures a cold open: databases of several sizes
// that exist only in the bucket are queried through a freshly started
// `sluice serve` (nothing local), and the time to the first answered point
// query and to a 100-row range query after it is printed beside, from the
// same MinIO in the same run, a full `sluice restore` and one GET of the
// database's snapshot object, with the store requests and bytes the cold
// open fetched (from the server's own log line) and how long the background
// restore took. The same is measured for a time-travel read (a past TXID,
// the state before the last few commits) on another fresh server. With a store latency (bench/storelatency) every party pays
// it: the proxy fronts MinIO for the serve, the restore and the GET.
package coldstartbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	Sizes        []int64 // database sizes in bytes
	Labels       []string
	Runs         int // cold opens per size (a fresh server and data directory each); the median is reported
	Sluice       string
	WorkDir      string
	Out          io.Writer
	StoreLatency storelatency.Spec
}

// rowBytes: the rows of the single-row-insert workload's JSON document
// take about 49.5 bytes each.
const rowBytes = 49.5

const seedRow = `{"age":10, "name":"yamada", "class":"A"}`

type result struct {
	label                 string
	dbBytes               int64
	point, rng, restore   []time.Duration
	get                   []time.Duration
	hydrate               []time.Duration
	requests, fetched     []int64
	lease, open           []time.Duration // from the server's log: taking the lease, and opening the view
	ttPoint, ttRange      []time.Duration // a time-travel read at a past TXID on a fresh server
	ttRequests, ttFetched []int64
	ttTXID                uint64
	hydratedBeforeAnswers int
	getLatency            time.Duration // added per GET by the proxy (median), 0 without
}

// Run builds each size, replicates it with sluice, and measures.
func Run(ctx context.Context, o Options) error {
	if o.Runs <= 0 {
		o.Runs = 3
	}
	dir, err := os.MkdirTemp(o.WorkDir, "sluice-bench-coldstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, format+"\n", args...) }
	say("starting MinIO…")
	m, err := minioproc.Start(ctx, filepath.Join(dir, "minio"))
	if err != nil {
		return err
	}
	defer m.Stop()
	if err := m.CreateBucket(ctx, "bench"); err != nil {
		return err
	}
	var results []result
	for i, size := range o.Sizes {
		r, err := runSize(ctx, o, m, filepath.Join(dir, o.Labels[i]), o.Labels[i], size, say)
		if err != nil {
			return fmt.Errorf("size %s: %w", o.Labels[i], err)
		}
		results = append(results, r)
	}
	say("")
	say("summary (medians of %d cold opens each; store latency: %s)", o.Runs, latencyLabel(o.StoreLatency))
	say("%-7s %8s | %9s %9s %9s %9s | %9s %9s | %9s %9s | %9s %9s | %s", "size", "db MB", "1st point", "(lease", "open)", "range", "tt point", "tt range", "restore", "1 GET", "hydrated", "bound", "cold-open fetch; time travel's")
	for _, r := range results {
		bound := 100*time.Millisecond + 3*r.getLatency
		say("%-7s %8.1f | %9s %9s %9s %9s | %9s %9s | %9s %9s | %9s %9s | %d range reads + LISTs, %.2f MB; %d, %.2f MB",
			r.label, float64(r.dbBytes)/1e6, ms(median(r.point)), ms(median(r.lease)), ms(median(r.open)), ms(median(r.rng)), ms(median(r.ttPoint)), ms(median(r.ttRange)),
			ms(median(r.restore)), ms(median(r.get)), ms(median(r.hydrate)), ms(bound), medianInt(r.requests), float64(medianInt(r.fetched))/1e6,
			medianInt(r.ttRequests), float64(medianInt(r.ttFetched))/1e6)
	}
	say("1st point: from sending the query to its answer on a server that never saw the database; (lease, open): of which")
	say("taking the lease (beside the first read where the server does so) and opening the on-demand view (plan and page indexes), from its log;")
	say("tt point, tt range: the same queries on another fresh server at a past TXID (?at=, the state before the last commits), read on demand")
	say("target: first point query <= 100 ms + 3 store round trips (the bound column) at every size")
	for _, r := range results {
		if p := median(r.point); p > 100*time.Millisecond+3*r.getLatency {
			say("  %s: first point query %s is over the bound", r.label, ms(p))
		}
		if p := median(r.ttPoint); p > 100*time.Millisecond+3*r.getLatency {
			say("  %s: time-travel point query %s is over the bound", r.label, ms(p))
		}
		if r.hydratedBeforeAnswers > 0 {
			say("  %s: in %d of %d runs the restore had finished before the answers (the figures then are a local file's)", r.label, r.hydratedBeforeAnswers, o.Runs)
		}
	}
	return nil
}

func runSize(ctx context.Context, o Options, m *minioproc.Server, dir, label string, size int64, say func(string, ...any)) (result, error) {
	r := result{label: label}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	env := append(os.Environ(), m.Env()...)
	rows := int(float64(size) / rowBytes)
	src := filepath.Join(dir, "src.db")
	say("[%s] building a %d-row database and replicating it with sluice…", label, rows)
	if err := buildBulk(src, rows); err != nil {
		return r, err
	}
	prefix := "coldstart-" + label
	past, err := replicate(ctx, m, o.Sluice, env, src, prefix, rows)
	if err != nil {
		return r, err
	}
	r.ttTXID = past
	fi, err := os.Stat(src)
	if err != nil {
		return r, err
	}
	r.dbBytes = fi.Size()
	_ = os.Remove(src)
	snapshot, err := largestObject(ctx, m, prefix+"/db/")
	if err != nil {
		return r, err
	}

	proxy, unproxy, err := storelatency.Front(m, o.StoreLatency)
	if err != nil {
		return r, err
	}
	defer func() {
		if s := unproxy(); s != "" {
			say("[%s] store latency added by the proxy (%s): %s", label, o.StoreLatency, s)
		}
	}()
	env = append(os.Environ(), m.Env()...)
	id := rows / 2
	for run := 0; run < o.Runs; run++ {
		p, rg, hydrated, reqs, fetched, hyd, lease, open, err := coldOpen(ctx, o.Sluice, env, m.URL("bench", prefix), filepath.Join(dir, fmt.Sprintf("data%d", run)), id+run*997, 0, rows)
		if err != nil {
			return r, err
		}
		tp, trg, _, treqs, tfetched, _, _, _, err := coldOpen(ctx, o.Sluice, env, m.URL("bench", prefix), filepath.Join(dir, fmt.Sprintf("tt%d", run)), id+run*991, past, rows)
		if err != nil {
			return r, fmt.Errorf("time travel at TXID %d: %w", past, err)
		}
		r.ttPoint, r.ttRange, r.ttRequests, r.ttFetched = append(r.ttPoint, tp), append(r.ttRange, trg), append(r.ttRequests, treqs), append(r.ttFetched, tfetched)
		r.point, r.rng, r.requests, r.fetched, r.hydrate = append(r.point, p), append(r.rng, rg), append(r.requests, reqs), append(r.fetched, fetched), append(r.hydrate, hyd)
		r.lease, r.open = append(r.lease, lease), append(r.open, open)
		if hydrated {
			r.hydratedBeforeAnswers++
		}
		out := filepath.Join(dir, "restored.db")
		start := time.Now()
		cmd := exec.CommandContext(ctx, o.Sluice, "restore", "-q", "-o", out, m.URL("bench", prefix+"/db"))
		cmd.Env = env
		if b, err := cmd.CombinedOutput(); err != nil {
			return r, fmt.Errorf("sluice restore: %v\n%s", err, b)
		}
		r.restore = append(r.restore, time.Since(start))
		_ = os.Remove(out)
		_ = os.Remove(out + "-sluice")
		start = time.Now()
		obj, err := m.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bench"), Key: aws.String(snapshot)})
		if err != nil {
			return r, err
		}
		_, err = io.Copy(io.Discard, obj.Body)
		obj.Body.Close()
		if err != nil {
			return r, err
		}
		r.get = append(r.get, time.Since(start))
	}
	if proxy != nil {
		r.getLatency, _, _ = proxy.Added(storelatency.Get)
	}
	say("[%s] %.1f MB: first point query %s, 100-row range query %s, restore %s, one GET of the %s snapshot %s; background restore %s; cold open fetched %d range reads, %.2f MB (runs: point %s)",
		label, float64(r.dbBytes)/1e6, ms(median(r.point)), ms(median(r.rng)), ms(median(r.restore)), filepath.Base(snapshot), ms(median(r.get)),
		ms(median(r.hydrate)), medianInt(r.requests), float64(medianInt(r.fetched))/1e6, msList(r.point))
	say("[%s] lease taken in %s, view open in %s", label, msList(r.lease), msList(r.open))
	say("[%s] time travel at TXID %d: first point query %s, 100-row range query %s, %d range reads, %.2f MB (runs: point %s)", label, r.ttTXID,
		ms(median(r.ttPoint)), ms(median(r.ttRange)), medianInt(r.ttRequests), float64(medianInt(r.ttFetched))/1e6, msList(r.ttPoint))
	return r, nil
}

var (
	opened    = regexp.MustCompile(`cold open: answering reads.* took=(\S+)`)
	leaseTook = regexp.MustCompile(`cold open: lease taken.* took=(\S+)|cold open: answering reads.*lease_took=(\S+)`) // the second: servers that took it before the first read
	firstRead = regexp.MustCompile(`cold open: first read answered.*requests=(\d+) bytes=(\d+)`)
	restored  = regexp.MustCompile(`cold open: restored.*restore_took=(\S+)`)
	ttOpened  = regexp.MustCompile(`time travel: answering reads on demand.*requests=(\d+) bytes_fetched=(\d+)`)
	ttRead    = regexp.MustCompile(`time travel: reads answered on demand.*requests=(\d+) bytes_fetched=(\d+)`)
	ttDone    = regexp.MustCompile(`time travel: past state restored`)
)

// coldOpen starts a server on an empty data directory, times a point query
// by rowid on database "db" (in the bucket only) and a 100-row range query
// after it, reads the server's cold-open log lines, waits for the restore
// to finish and stops the server. With at > 0 the queries read the state
// at that TXID (time travel), which holds rows rows (none past them).
func coldOpen(ctx context.Context, bin string, env []string, replicaURL, data string, id int, at uint64, rows int) (point, rng time.Duration, hydrated bool, requests, fetched int64, hydrate, lease, open time.Duration, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.CommandContext(ctx, bin, "serve", "-data", data, "-replica", replicaURL, "-listen", addr)
	cmd.Env = env
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err = cmd.Start(); err != nil {
		return
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = os.RemoveAll(data)
	}()
	base := "http://" + addr
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, e := http.Get(base + "/ready"); e == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			err = fmt.Errorf("serve not ready after a minute:\n%s", logs.String())
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	if err = query(base, at, fmt.Sprintf("SELECT json FROM t WHERE id = %d", id), 1); err != nil {
		err = fmt.Errorf("%w\n%s", err, logs.String())
		return
	}
	point = time.Since(start)
	start = time.Now()
	if err = query(base, at, fmt.Sprintf("SELECT id, json FROM t WHERE id >= %d ORDER BY id LIMIT 100", id+5000), 100); err != nil {
		return
	}
	rng = time.Since(start)
	if at > 0 {
		// The past state holds none of the later commits' rows.
		if err = query(base, at, fmt.Sprintf("SELECT id FROM t WHERE id > %d", rows), 0); err != nil {
			return
		}
		return timeTravelLog(logs, point, rng)
	}
	out := logs.String()
	hydrated = strings.Contains(out, "cold open: restored")
	if mm := opened.FindStringSubmatch(out); mm != nil {
		open, _ = time.ParseDuration(mm[1])
	}
	if mm := firstRead.FindStringSubmatch(out); mm != nil {
		requests, _ = strconv.ParseInt(mm[1], 10, 64)
		fetched, _ = strconv.ParseInt(mm[2], 10, 64)
	} else {
		err = fmt.Errorf("no cold open in the server's log (was the database opened from a local file?):\n%s", out)
		return
	}
	for !restored.MatchString(logs.String()) {
		if time.Now().After(start.Add(10 * time.Minute)) {
			err = fmt.Errorf("the background restore did not finish in 10 minutes:\n%s", logs.String())
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	hydrate, _ = time.ParseDuration(restored.FindStringSubmatch(logs.String())[1])
	if mm := leaseTook.FindStringSubmatch(logs.String()); mm != nil {
		lease, _ = time.ParseDuration(mm[1] + mm[2])
	}
	return
}

// timeTravelLog waits for the past state's restore to end and reads the
// requests and bytes its on-demand reads fetched from the server's log.
func timeTravelLog(logs *syncBuffer, point, rng time.Duration) (time.Duration, time.Duration, bool, int64, int64, time.Duration, time.Duration, time.Duration, error) {
	deadline := time.Now().Add(10 * time.Minute)
	for !ttDone.MatchString(logs.String()) {
		if time.Now().After(deadline) {
			return 0, 0, false, 0, 0, 0, 0, 0, fmt.Errorf("the past state's restore did not finish in 10 minutes:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	out := logs.String()
	mm := ttRead.FindStringSubmatch(out)
	if mm == nil {
		mm = ttOpened.FindStringSubmatch(out)
	}
	if mm == nil {
		return 0, 0, false, 0, 0, 0, 0, 0, fmt.Errorf("the time-travel read was not answered on demand (no such line in the server's log):\n%s", out)
	}
	requests, _ := strconv.ParseInt(mm[1], 10, 64)
	fetched, _ := strconv.ParseInt(mm[2], 10, 64)
	return point, rng, false, requests, fetched, 0, 0, 0, nil
}

// query runs q through the JSON API (at a past TXID if at > 0) and checks
// it returned want rows.
func query(base string, at uint64, q string, want int) error {
	body, _ := json.Marshal(map[string]string{"sql": q})
	url := base + "/v1/databases/db/query"
	if at > 0 {
		url += "?at=" + strconv.FormatUint(at, 10)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d %s", q, resp.StatusCode, b)
	}
	var r struct {
		Results []struct {
			Rows []json.RawMessage `json:"rows"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Results) != 1 || len(r.Results[0].Rows) != want {
		return fmt.Errorf("%s: want %d rows, got %s", q, want, b)
	}
	return nil
}

// buildBulk writes rows of the single-row-insert workload's JSON document
// in large transactions.
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
		q := fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < %d)
			INSERT INTO t (json) SELECT '%s' FROM n`, min(batch, rows-done), seedRow)
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			return fmt.Errorf("bulk insert: %w", err)
		}
	}
	return sqlitex.ExecuteTransient(conn, "PRAGMA journal_mode=WAL", nil)
}

// pastCommits: rows added one commit at a time after the bulk load is
// shipped, so the bulk load's TXID is a past state for time travel.
const pastCommits = 3

// replicate ships src to prefix/db with sluice replicate, waits until the
// replica stops growing, commits pastCommits single rows (each shipped
// before the next), and stops it with SIGTERM (which ships the rest). It
// returns the TXID of the state before those commits.
func replicate(ctx context.Context, m *minioproc.Server, bin string, env []string, src, prefix string, rows int) (uint64, error) {
	cmd := exec.CommandContext(ctx, bin, "replicate", src, m.URL("bench", prefix+"/db"))
	cmd.Env = env
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	fail := func(err error) (uint64, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, err
	}
	last, err := settle(ctx, m, prefix)
	if err != nil {
		return fail(err)
	}
	if last <= 0 {
		return fail(fmt.Errorf("sluice replicate uploaded nothing:\n%s", logs.String()))
	}
	past, err := newestTXID(ctx, m, prefix)
	if err != nil {
		return fail(err)
	}
	conn, err := sqlite.OpenConn(src, sqlite.OpenReadWrite)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	for i := 1; i <= pastCommits; i++ {
		before, err := newestTXID(ctx, m, prefix)
		if err != nil {
			return fail(err)
		}
		if err := sqlitex.ExecuteTransient(conn, fmt.Sprintf("INSERT INTO t (id, json) VALUES (%d, '%s')", rows+i, seedRow), nil); err != nil {
			return fail(err)
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			now, err := newestTXID(ctx, m, prefix)
			if err != nil {
				return fail(err)
			}
			if now > before {
				break
			}
			if time.Now().After(deadline) {
				return fail(fmt.Errorf("a commit was not shipped within a minute:\n%s", logs.String()))
			}
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("sluice replicate: %v\n%s", err, logs.String())
	}
	return past, nil
}

// settle waits until the replica stops growing and returns its bytes.
func settle(ctx context.Context, m *minioproc.Server, prefix string) (int64, error) {
	var last int64 = -1
	stable := time.Now()
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		_, b, err := footprint(ctx, m, prefix+"/db/")
		if err != nil {
			return 0, err
		}
		if b != last {
			last, stable = b, time.Now()
		} else if b > 0 && time.Since(stable) >= 2*time.Second {
			break
		}
	}
	return last, nil
}

// newestTXID is the highest TXID an LTX file of the replica ends at.
func newestTXID(ctx context.Context, m *minioproc.Server, prefix string) (uint64, error) {
	var newest uint64
	p := s3.NewListObjectsV2Paginator(m.Client(), &s3.ListObjectsV2Input{Bucket: aws.String("bench"), Prefix: aws.String(prefix + "/db/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return 0, err
		}
		for _, o := range page.Contents {
			var lo, hi uint64
			if _, err := fmt.Sscanf(filepath.Base(aws.ToString(o.Key)), "%016x-%016x.ltx", &lo, &hi); err == nil {
				newest = max(newest, hi)
			}
		}
	}
	return newest, nil
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

func largestObject(ctx context.Context, m *minioproc.Server, prefix string) (string, error) {
	var key string
	var size int64
	p := s3.NewListObjectsV2Paginator(m.Client(), &s3.ListObjectsV2Input{Bucket: aws.String("bench"), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", err
		}
		for _, o := range page.Contents {
			if aws.ToInt64(o.Size) > size && strings.HasSuffix(aws.ToString(o.Key), ".ltx") {
				key, size = aws.ToString(o.Key), aws.ToInt64(o.Size)
			}
		}
	}
	if key == "" {
		return "", fmt.Errorf("no LTX file under %s", prefix)
	}
	return key, nil
}

// syncBuffer is an output buffer safe to read while a child writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func latencyLabel(s storelatency.Spec) string {
	if s.Zero() {
		return "none (MinIO on loopback)"
	}
	return s.String()
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func medianInt(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func msList(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond))
	}
	return strings.Join(parts, " ") + " ms"
}
