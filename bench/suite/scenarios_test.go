package suite

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/bench/report"
	"github.com/sluicedb/sluice/bench/scenario"
	"github.com/sluicedb/sluice/bench/targets"
)

func readReport(t *testing.T, path string) report.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r
}

// Every scenario through the CLI against a real sluice serve it starts itself
// (sync, file replica), with -verify: the database and the restored replica
// hold exactly the acknowledged writes.
func TestEveryScenarioVerifiesAgainstSluiceServe(t *testing.T) {
	cases := []struct{ name, protocol string }{}
	for _, n := range scenario.Names() {
		cases = append(cases, struct{ name, protocol string }{n, "json"})
	}
	cases = append(cases, struct{ name, protocol string }{"counter", "hrana"}, struct{ name, protocol string }{"put-object", "hrana"})
	for _, c := range cases {
		t.Run(c.name+"/"+c.protocol, func(t *testing.T) {
			js := filepath.Join(t.TempDir(), "out.json")
			out, err := bench(t, c.name, "-protocol", c.protocol, "-vus", "4", "-duration", "1s", "-warmup", "200ms", "-verify", "-json", js)
			if err != nil {
				t.Fatalf("sluice-bench %s: %v\n%s", c.name, err, out)
			}
			if !strings.Contains(out, "http_req_duration") || !strings.Contains(out, "verify") {
				t.Fatalf("no k6-like summary:\n%s", out)
			}
			r := readReport(t, js)
			if r.Requests == 0 || r.OK != r.Requests || r.Verify == nil || !r.Verify.OK {
				t.Fatalf("requests %d ok %d verify %+v\n%s", r.Requests, r.OK, r.Verify, out)
			}
			s, _ := scenario.Get(c.name)
			if s.Writes() {
				if r.Writes.Acked == 0 || !r.Verify.RestoreDone || r.Verify.Restored != r.Verify.Live || r.Verify.Live-r.Verify.Before != r.Writes.Acked {
					t.Fatalf("writes %+v verify %+v", r.Writes, r.Verify)
				}
			} else if r.Verify.Live != r.Verify.Before {
				t.Fatalf("a read-only scenario changed the count: %+v", r.Verify)
			}
			if c.name == "bbs-read-all" && r.Verify.Live < 10000 {
				t.Fatalf("read-all ran over %d rows, want 10,000", r.Verify.Live)
			}
		})
	}
}

// Every scenario on the peer app's routes (go-sqlite3), checked the same way.
func TestEveryScenarioOnThePeerApp(t *testing.T) {
	ctx := context.Background()
	env := &targets.Env{Sluice: sluiceBin, Peer: peerBin, Dir: t.TempDir()}
	for _, kind := range []string{"sqlite", "file"} {
		var srv *targets.Server
		var err error
		if kind == "sqlite" {
			srv, err = env.StartPeerSQLite(ctx, false)
		} else {
			srv, err = env.StartPeerFile(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range scenario.All() {
			out, err := Run(ctx, RunOptions{
				Scenario: s, Target: scenario.Target{BaseURL: srv.URL, Protocol: scenario.Peer}, Label: srv.Name,
				VUs: 4, Requests: 300, Verify: true, TempDir: t.TempDir(),
			})
			if err != nil {
				t.Fatalf("%s on %s: %v\n%s", s.Name, kind, err, srv.Logs())
			}
			if out.Result.Requests != 300 || out.Result.OK != 300 || !out.Report.Verify.OK {
				t.Fatalf("%s on %s: %d requests, %d ok, verify %+v", s.Name, kind, out.Result.Requests, out.Result.OK, out.Report.Verify)
			}
			if s.Writes() && out.Live-out.Before != out.Result.AckedWrites {
				t.Fatalf("%s on %s: count grew by %d, %d writes acknowledged", s.Name, kind, out.Live-out.Before, out.Result.AckedWrites)
			}
		}
		srv.Stop()
	}
}

// A restored copy that lacks acknowledged writes fails -verify with the
// numbers: here the replica is restored as of TXID 2, before the load.
func TestVerifyFailsOnAMismatch(t *testing.T) {
	ctx := context.Background()
	env := &targets.Env{Sluice: sluiceBin, Dir: t.TempDir()}
	srv, err := env.StartSluice(ctx, "sync")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	s, _ := scenario.Get("put-object")
	_, err = Run(ctx, RunOptions{
		Scenario: s, Target: scenario.Target{BaseURL: srv.URL, DB: s.DB, Protocol: scenario.JSON}, Label: srv.Name,
		VUs: 2, Duration: 500 * time.Millisecond, Verify: true, TempDir: t.TempDir(),
		Restore: func(ctx context.Context, out string) error {
			_, err := targetsRun(ctx, sluiceBin, "restore", "-q", "-txid", "2", "-o", out, targets.JoinURL(srv.Replica, s.DB))
			return err
		},
	})
	if err == nil || !strings.Contains(err.Error(), "restored replica") || !strings.Contains(err.Error(), "acknowledged") {
		t.Fatalf("want a verify failure naming the restored count, got %v", err)
	}
}
