package server

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// postWith posts a JSON API query with headers and returns status, body and
// response headers.
func postWith(t *testing.T, base, body string, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/databases/default/query", strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, readAll(resp), resp.Header
}

// Read-your-writes on a -follow replica: every read carrying the bookmark of
// a write made on the leader sees that write, and is answered by the
// replica itself; writes sent to the replica are forwarded to the leader.
func TestServeFollowReplicaServesReadsWithReadYourWrites(t *testing.T) {
	url, a, _, minio := startPair(t)
	c := startServe(t, buildSluice(t), minio.Env(), "-data", t.TempDir(), "-replica", url, "-follow", "-follow-poll", "50ms")
	for i := 1; i <= 30; i++ {
		code, body, hdr := postWith(t, a.base, incrementSQL, nil)
		if code != 200 {
			t.Fatalf("write %d on a: %d %s", i, code, body)
		}
		bookmark := hdr.Get("Sluice-Bookmark")
		code, body, hdr = postWith(t, c.base, `{"sql":"SELECT count FROM counters"}`, map[string]string{"Sluice-Bookmark": bookmark})
		n, ok := firstInt(t, body)
		if code != 200 || !ok || n != int64(i) {
			t.Fatalf("read %d on the replica with bookmark %s: %d %s\n%s", i, bookmark, code, body, c.log.String())
		}
		if hdr.Get("Sluice-Served-By") != "replica" {
			t.Fatalf("read %d was not served by the replica's follower (headers %v)", i, hdr)
		}
		written, _ := strconv.ParseUint(bookmark, 10, 64)
		read, err := strconv.ParseUint(hdr.Get("Sluice-Bookmark"), 10, 64)
		if err != nil || written == 0 || read < written {
			t.Fatalf("replica answered with bookmark %q, the write had %q", hdr.Get("Sluice-Bookmark"), bookmark)
		}
	}

	// A write sent to the replica is forwarded to a and applied once.
	code, body, hdr := postWith(t, c.base, incrementSQL, nil)
	if n, ok := firstInt(t, body); code != 200 || !ok || n != 31 || hdr.Get("Sluice-Served-By") != "" {
		t.Fatalf("write through the replica: %d %s %v", code, body, hdr)
	}

	// Without a bookmark the replica still answers from its own copy.
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body, hdr = postWith(t, c.base, `{"sql":"SELECT count FROM counters"}`, nil)
		if n, _ := firstInt(t, body); code == 200 && n == 31 && hdr.Get("Sluice-Served-By") == "replica" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not catch up with the forwarded write within 5s: %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A bookmark nobody has written yet: a bounded wait, then a retryable 503.
	start := time.Now()
	code, body, hdr = postWith(t, c.base, `{"sql":"SELECT count FROM counters"}`, map[string]string{"Sluice-Bookmark": "999999"})
	if code != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(body, "LAGGING") {
		t.Fatalf("read with an unreachable bookmark: %d %s %v", code, body, hdr)
	}
	if waited := time.Since(start); waited < 4*time.Second {
		t.Fatalf("the unreachable bookmark was refused after %s, before the 5s wait", waited)
	}

	// Hrana: a read pipeline is answered by the replica, a write pipeline forwarded.
	hrana := func(sql string) (int, string, http.Header) {
		body := `{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"` + sql + `"}},{"type":"close"}]}`
		resp, err := http.Post(c.base+"/v2/pipeline", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, readAll(resp), resp.Header
	}
	code, body, hdr = hrana("SELECT count FROM counters")
	if code != 200 || !strings.Contains(body, `"value":"31"`) || hdr.Get("Sluice-Served-By") != "replica" {
		t.Fatalf("Hrana read on the replica: %d %s %v", code, body, hdr)
	}
	code, body, hdr = hrana("UPDATE counters SET count = count + 1 WHERE id = 'count_up' RETURNING count")
	if code != 200 || !strings.Contains(body, `"value":"32"`) || hdr.Get("Sluice-Served-By") != "" {
		t.Fatalf("Hrana write through the replica: %d %s %v", code, body, hdr)
	}
	// Read-your-writes over Hrana: the write's replication_index, sent back on
	// the next statement, makes the replica wait until it has applied it.
	idx := regexp.MustCompile(`"replication_index":"(\d+)"`).FindStringSubmatch(body)
	if idx == nil {
		t.Fatalf("Hrana write answered without a replication_index: %s", body)
	}
	for i := 33; i <= 40; i++ {
		code, body, _ = hrana("UPDATE counters SET count = count + 1 WHERE id = 'count_up' RETURNING count")
		idx = regexp.MustCompile(`"replication_index":"(\d+)"`).FindStringSubmatch(body)
		if code != 200 || idx == nil {
			t.Fatalf("Hrana write %d: %d %s", i, code, body)
		}
		read := `{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT count FROM counters","replication_index":"` + idx[1] + `"}},{"type":"close"}]}`
		resp, err := http.Post(c.base+"/v2/pipeline", "application/json", strings.NewReader(read))
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(resp)
		if resp.StatusCode != 200 || !strings.Contains(got, `"value":"`+strconv.Itoa(i)+`"`) || resp.Header.Get("Sluice-Served-By") != "replica" {
			t.Fatalf("Hrana read with replication_index %s on the replica: %d %s %v", idx[1], resp.StatusCode, got, resp.Header)
		}
	}

	resp, err := http.Get(c.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m := readAll(resp)
	for _, series := range []string{`sluice_follower_txid{db="default"}`, `sluice_follower_lag_txids{db="default"}`, `sluice_follower_lag_seconds{db="default"}`} {
		if !strings.Contains(m, series) {
			t.Fatalf("/metrics lacks %s:\n%s", series, m)
		}
	}
}
