package suite

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/sluicedb/sluice/bench/report"
	"github.com/sluicedb/sluice/bench/scenario"
	"github.com/sluicedb/sluice/bench/targets"
)

// postText pads a seeded post to about 200 bytes, as a short forum post is.
const postText = "A post on the board: enough words to make a row of about two hundred bytes, as people write them, " +
	"with an author, a body and a time, read back newest first, a hundred at a time."

// readPosts is the read row's workload: the newest 100 of 10,000 posts.
var readPosts = &scenario.Scenario{
	Name: "read-100", DB: "bench-posts", Description: "SELECT * FROM posts ORDER BY id DESC LIMIT 100 (10,000 posts of ~200 bytes)",
	Schema:   []string{`CREATE TABLE IF NOT EXISTS posts (id INTEGER PRIMARY KEY, author TEXT NOT NULL, body TEXT NOT NULL, created_at INTEGER NOT NULL)`},
	SeedRows: 10000,
	SeedSQL: `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO posts (author, body, created_at) SELECT 'user' || (i % 97), 'post ' || i || ': ` + postText + `', 1700000000 + i FROM n`,
	Ops:      []scenario.Op{{Name: "read-100", SQL: `SELECT * FROM posts ORDER BY id DESC LIMIT 100`}},
	CountSQL: `SELECT count(*) FROM posts`,
}

// serveReads is read-100 on the JSON API and on Hrana, each beside a trivial
// handler that returns the same bytes, in interleaved rounds.
func serveReads(ctx context.Context, env *targets.Env, o ServeOptions) ([]ServeRow, error) {
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, format+"\n", args...) }
	var extra []string
	pprofAddr := ""
	if o.ProfileDir != "" {
		port, err := targets.FreePort()
		if err != nil {
			return nil, err
		}
		pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
		extra = append(extra, "-pprof", pprofAddr)
	}
	srv, err := env.StartSluice(ctx, "sync", extra...)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	s := readPosts
	jsonT := scenario.Target{BaseURL: srv.URL, DB: s.DB, Protocol: scenario.JSON}
	hranaT := scenario.Target{BaseURL: srv.URL, DB: s.DB, Protocol: scenario.Hrana}
	say("read-100: seeding %d posts…", s.SeedRows)
	if err := jsonT.Setup(ctx, s); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, srv.Logs())
	}
	type side struct {
		label  string
		target scenario.Target
		bytes  int // the answer's size
		runs   []*report.Report
	}
	sides := map[string]*side{}
	for _, p := range []struct {
		name string
		t    scenario.Target
	}{{"json", jsonT}, {"hrana", hranaT}} {
		body, err := p.t.Fetch(ctx, s)
		if err != nil {
			return nil, err
		}
		file := filepath.Join(env.Dir, "read-100-"+p.name+".body")
		if err := os.WriteFile(file, body, 0o644); err != nil {
			return nil, err
		}
		ceil, err := env.StartCeiling(ctx, file)
		if err != nil {
			return nil, err
		}
		defer ceil.Stop()
		ct := p.t
		ct.BaseURL = ceil.URL
		sides[p.name] = &side{label: p.name, target: p.t, bytes: len(body)}
		sides["ceiling-"+p.name] = &side{label: fmt.Sprintf("trivial handler, same %d bytes", len(body)), target: ct}
	}
	order := []string{"json", "ceiling-json", "hrana", "ceiling-hrana"}
	for round := 1; round <= o.ReadRounds; round++ {
		for _, k := range order {
			sd := sides[k]
			say("read-100, %d connections, %s, round %d of %d: %s…", o.ReadVUs, o.ReadDuration, round, o.ReadRounds, k)
			var stopProfile func() error
			if round == 1 && pprofAddr != "" && (k == "json" || k == "hrana") {
				stopProfile = captureProfile(ctx, pprofAddr, o.ReadDuration, filepath.Join(o.ProfileDir, "read-100-"+k+".pprof"))
			}
			rep, err := runNoSetup(ctx, RunOptions{Scenario: s, Target: sd.target, Label: k, VUs: o.ReadVUs, Duration: o.ReadDuration, Warmup: time.Second})
			if stopProfile != nil {
				if perr := stopProfile(); perr != nil {
					say("  (profile: %v)", perr)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("read-100 on %s: %w\n%s", k, err, srv.Logs())
			}
			if rep.Requests != rep.OK {
				return nil, fmt.Errorf("read-100 on %s: %d of %d requests failed: %v\n%s", k, rep.Requests-rep.OK, rep.Requests, rep.Failures, srv.Logs())
			}
			sd.runs = append(sd.runs, rep)
		}
	}
	row := func(name string, r *side, conns int) ServeRow {
		m := medianRun(r.runs)
		out := ServeRow{Group: "read", Name: name, Conns: conns, Rate: m.Rate, P50MS: m.Latency.Med, P99MS: m.Latency.P99}
		for _, x := range r.runs {
			out.Failures += x.Requests - x.OK
			out.Runs = append(out.Runs, x.Rate)
		}
		return out
	}
	j, cj, h, ch := sides["json"], sides["ceiling-json"], sides["hrana"], sides["ceiling-hrana"]
	jr := row(fmt.Sprintf("read-100, JSON API, %d conns", o.ReadVUs), j, o.ReadVUs)
	cjr := row("", cj, o.ReadVUs)
	jr.Reference = fmt.Sprintf("%s: %.0f/s", cj.label, cjr.Rate)
	jr.Ratio = ratio(jr.Rate, cjr.Rate)
	jr.Target, jr.TargetMet = fmt.Sprintf(">= %.2fx", TargetReadVsCeiling), jr.Ratio >= TargetReadVsCeiling
	hr := row(fmt.Sprintf("read-100, Hrana, %d conns", o.ReadVUs), h, o.ReadVUs)
	hr.Reference = fmt.Sprintf("JSON API: %.0f/s", jr.Rate)
	hr.Ratio = ratio(hr.Rate, jr.Rate)
	hr.Target, hr.TargetMet = fmt.Sprintf(">= %.2fx (within 10%%)", TargetHranaVsJSON), hr.Ratio >= TargetHranaVsJSON
	chr := row("", ch, o.ReadVUs)
	hr.Bound = fmt.Sprintf("Hrana's answer is %.2fx the JSON API's bytes; trivial handlers returning each: Hrana's %.0f/s = %.2fx JSON's %.0f/s",
		ratio(float64(h.bytes), float64(j.bytes)), chr.Rate, ratio(chr.Rate, cjr.Rate), cjr.Rate)
	hc := hr
	hc.Bound = ""
	hc.Name = "  the same Hrana runs"
	hc.Reference = fmt.Sprintf("%s: %.0f/s", ch.label, chr.Rate)
	hc.Ratio = ratio(hr.Rate, chr.Rate)
	hc.Target, hc.TargetMet = "", false
	return []ServeRow{jr, hr, hc}, nil
}

// medianRun is the run with the median rate.
func medianRun(runs []*report.Report) *report.Report {
	s := append([]*report.Report(nil), runs...)
	sort.Slice(s, func(i, j int) bool { return s[i].Rate < s[j].Rate })
	return s[len(s)/2]
}

// captureProfile starts fetching a CPU profile of d from a -pprof address
// into path; the returned function waits for it.
func captureProfile(ctx context.Context, addr string, d time.Duration, path string) func() error {
	done := make(chan error, 1)
	go func() {
		secs := max(int((d+time.Second)/time.Second), 1)
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			done <- err
			return
		}
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	return func() error { return <-done }
}
