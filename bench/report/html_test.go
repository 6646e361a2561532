package report

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/bench/load"
)

// run produces a real result: a short load against a local handler with a
// spread of latencies.
func run(t *testing.T) *load.Result {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1)%50 == 0 {
			time.Sleep(3 * time.Millisecond)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	req := load.MustRequest("POST", srv.URL+"/", []byte("{}"))
	req.Write = true
	res, err := load.Run(context.Background(), load.Config{VUs: 1, Duration: 2500 * time.Millisecond, Next: func(int, uint64) *load.Request { return req }})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestTextAndJSON(t *testing.T) {
	rep := New(Meta{Scenario: "put-object", Description: "d", Target: "test", Protocol: "json"}, run(t))
	var b bytes.Buffer
	rep.WriteText(&b)
	for _, want := range []string{"http_reqs", "http_req_duration", "p(99)=", "acknowledged"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("summary lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"req_per_s"`) || len(rep.Series) < 2 || len(rep.Histogram) == 0 {
		t.Fatalf("JSON or series incomplete: %d points, %d buckets", len(rep.Series), len(rep.Histogram))
	}
}

// TestHTMLRendersCharts renders the report with headless Chromium, with no
// network, and checks the screenshot shows the three charts' colours.
func TestHTMLRendersCharts(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not found: run scripts/install-bench-deps.sh (Debian's chromium)")
	}
	rep := New(Meta{Scenario: "put-object", Description: "insert one JSON row", Target: "test server", Protocol: "json", Warmup: time.Second}, run(t))
	rep.Verify = &Verify{OK: true, Message: "database: 10 writes applied, 10 acknowledged"}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, banned := range []string{"<script", "<link", "src=", "url(", "@import"} {
		if strings.Contains(html, banned) {
			t.Fatalf("report is not self-contained: it contains %q", banned)
		}
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+filepath.Join(dir, "profile"),
		"--window-size=1000,1400", "--screenshot="+shot, "file://"+page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if p := os.Getenv("SLUICE_BENCH_SCREENSHOT"); p != "" {
		data, _ := os.ReadFile(shot)
		_ = os.WriteFile(p, data, 0o644)
	}
	// Each chart has its own colour: the throughput line, the p99 line and the histogram bars.
	for name, c := range map[string][3]uint8{"throughput line": {0x25, 0x63, 0xeb}, "p99 line": {0xdc, 0x26, 0x26}, "histogram bars": {0x7c, 0x3a, 0xed}} {
		if n := countColour(img, c); n < 150 {
			t.Errorf("%s: %d pixels of #%02x%02x%02x in the screenshot; the chart was not drawn", name, n, c[0], c[1], c[2])
		}
	}
	if b := img.Bounds(); b.Dx() < 900 || b.Dy() < 1200 {
		t.Errorf("screenshot is %dx%d", b.Dx(), b.Dy())
	}
}

func countColour(img image.Image, c [3]uint8) int {
	n := 0
	b := img.Bounds()
	near := func(a uint32, b uint8) bool { d := int(a>>8) - int(b); return d > -24 && d < 24 }
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r, c[0]) && near(g, c[1]) && near(bl, c[2]) {
				n++
			}
		}
	}
	return n
}
