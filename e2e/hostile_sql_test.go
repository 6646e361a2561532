package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/hostile"
)

// Hostile neighbours, SQL side: pipelines of 100,000 statements, gigabyte
// values, streams that pin databases, and abandoned write transactions,
// each beside the canary on another database (see runHostile).
func TestHostileSQL(t *testing.T) {
	if bin := os.Getenv("SLUICE_HOSTILE_BIN"); bin != "" { // measure another build
		old := sluiceBin
		sluiceBin = bin
		defer func() { sluiceBin = old }()
	}
	attacks := []hostile.Attack{
		// No attack: the canary's noise floor on this machine, for the table.
		{Name: "nothing (baseline)", Run: func(ctx context.Context, _ *hostile.Server, _ *hostile.Recorder) error {
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
			return nil
		}},
		{Name: "8 concurrent 100,000-statement pipelines", Run: attackBigPipelines},
		{Name: "printf('%.*c', 999999999) and zeroblob(999999999)", Run: attackHugeValues},
		{Name: "12 pinning streams, -max-open-databases 12", Run: attackPinningStreams},
		{Name: "4 abandoned BEGIN IMMEDIATE loops vs another token's writes", Run: attackAbandonedWriters},
	}
	if only := os.Getenv("SLUICE_HOSTILE_ONLY"); only != "" { // e.g. to measure a build without some limit
		var some []hostile.Attack
		for _, a := range attacks {
			if strings.Contains(a.Name, only) {
				some = append(some, a)
			}
		}
		attacks = some
	}
	runHostile(t, []string{"-max-open-databases", "12", "-database-idle-timeout", "5s"}, attacks...)
}

func hranaPipeline(ctx context.Context, client *http.Client, s *hostile.Server, token, db string, body []byte) (int, []byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v2/pipeline", bytes.NewReader(body))
	req.Header.Set("x-namespace", db)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

type pipeResult struct {
	Baton   *string `json:"baton"`
	Results []struct {
		Type  string `json:"type"`
		Error *struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	} `json:"results"`
}

func execReq(sql string) map[string]any {
	return map[string]any{"type": "execute", "stmt": map[string]any{"sql": sql}}
}

func pipelineBody(baton *string, reqs ...map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"baton": baton, "requests": reqs})
	return b
}

func attackBigPipelines(ctx context.Context, s *hostile.Server, rec *hostile.Recorder) error {
	if code, body, _ := s.Request(ctx, http.MethodPut, "/v1/databases/pipes", hostile.AdminToken, nil); code >= 300 && code != http.StatusConflict {
		return fmt.Errorf("create: %d %s", code, body)
	}
	client := &http.Client{Timeout: 5 * time.Minute}
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	bodies := map[int][]byte{}
	for _, n := range []int{100_000, 10_000} {
		reqs := make([]map[string]any, n)
		for i := range reqs {
			reqs[i] = execReq("SELECT 1")
		}
		bodies[n] = pipelineBody(nil, reqs...)
	}
	// 8 at once of 100,000 statements are refused at once, naming the
	// limit; then 8 at once of 10,000 (the most a pipeline may hold by
	// default) are answered. Rounds for 5 s at least, so that the canary
	// sees the attack.
	answered := 0
	for until, round := time.Now().Add(5*time.Second), 0; round == 0 || time.Now().Before(until); round++ {
		for _, n := range []int{100_000, 10_000} {
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					code, b, err := hranaPipeline(ctx, client, s, hostile.AttackerToken, "pipes", bodies[n])
					switch {
					case err != nil:
						fail(err)
					case code != 200:
						rec.Refused(code, string(b), "limits.max-pipeline-statements")
					default:
						// Counted, not decoded: the client's own CPU is on this
						// machine too, and is not what is being measured.
						if ok := bytes.Count(b, []byte(`{"type":"ok","response":{"type":"execute"`)); ok != n {
							fail(fmt.Errorf("answer of %d bytes: %d ok results of %d: %.300s", len(b), ok, n, b[max(0, len(b)-300):]))
							return
						}
						mu.Lock()
						answered++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
		}
	}
	rec.Notef("%d pipelines of 10,000 statements answered (2.5 MiB each)", answered)
	return firstErr
}

func attackHugeValues(ctx context.Context, s *hostile.Server, rec *hostile.Recorder) error {
	if code, body, _ := s.Request(ctx, http.MethodPut, "/v1/databases/huge", hostile.AdminToken, nil); code >= 300 && code != http.StatusConflict {
		return fmt.Errorf("create: %d %s", code, body)
	}
	client := &http.Client{Timeout: 2 * time.Minute}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// For 3 s at least: the canary must see the attack.
			for j, until := 0, time.Now().Add(3*time.Second); j < 3 || time.Now().Before(until); j++ {
				sql := "SELECT length(printf('%.*c', 999999999, 'x'))"
				if (i+j)%2 == 1 {
					sql = "SELECT length(zeroblob(999999999))"
				}
				start := time.Now()
				code, b, err := hranaPipeline(ctx, client, s, hostile.AttackerToken, "huge", pipelineBody(nil, execReq(sql), map[string]any{"type": "close"}))
				d := time.Since(start)
				mu.Lock()
				worst = max(worst, d)
				mu.Unlock()
				if err != nil {
					rec.Unclear("%s: %v", sql, err)
					continue
				}
				var r pipeResult
				_ = json.Unmarshal(b, &r)
				switch {
				case code != 200 || len(r.Results) == 0:
					rec.Refused(code, string(b), "limits.max-value-bytes")
				case r.Results[0].Error != nil:
					rec.Refused(400, r.Results[0].Error.Message, "limits.max-value-bytes")
				case strings.Contains(sql, "printf") && strings.Contains(string(b), `"null"`):
					// printf stops at the limit and returns NULL, as SQLite does
				default:
					rec.Unclear("%s answered: %.200s", sql, b)
				}
			}
		}()
	}
	wg.Wait()
	rec.Notef("slowest answer %s (statement limit 5s)", worst.Round(time.Millisecond))
	return nil
}

func attackPinningStreams(ctx context.Context, s *hostile.Server, rec *hostile.Recorder) error {
	client := &http.Client{Timeout: time.Minute}
	batons := map[string]*string{}
	pinned := 0
	for i := range 12 {
		db := fmt.Sprintf("pin-%d", i)
		if code, body, _ := s.Request(ctx, http.MethodPut, "/v1/databases/"+db, hostile.AdminToken, nil); code >= 300 && code != http.StatusConflict {
			return fmt.Errorf("create %s: %d %s", db, code, body)
		}
		code, b, err := hranaPipeline(ctx, client, s, hostile.AttackerToken, db, pipelineBody(nil, execReq("CREATE TEMP TABLE pin (x)")))
		if err != nil {
			return err
		}
		var r pipeResult
		_ = json.Unmarshal(b, &r)
		if code == 200 && len(r.Results) == 1 && r.Results[0].Error == nil {
			batons[db] = r.Baton
			pinned++
			continue
		}
		msg := string(b)
		if len(r.Results) == 1 && r.Results[0].Error != nil {
			msg = r.Results[0].Error.Message
		}
		rec.Refused(max(code, 400), msg, "limits.max-pinned-databases")
	}
	// Keep the streams alive (each request leaves the TEMP table, so the
	// stream keeps its connection) while another token opens other databases.
	deadline := time.Now().Add(8 * time.Second)
	others, failed := 0, 0
	for n := 0; time.Now().Before(deadline); n++ {
		for db, baton := range batons {
			if baton == nil {
				continue
			}
			_, b, err := hranaPipeline(ctx, client, s, hostile.AttackerToken, db, pipelineBody(baton, execReq("SELECT count(*) FROM pin")))
			var r pipeResult
			if err == nil && json.Unmarshal(b, &r) == nil {
				batons[db] = r.Baton
			}
		}
		other := fmt.Sprintf("other-%d", n%4) // with the canary's, fits the slots the cap leaves
		if code, body, _ := s.Request(ctx, http.MethodPut, "/v1/databases/"+other, hostile.AdminToken, nil); code >= 300 && code != http.StatusConflict {
			failed++
			rec.Refused(code, body, "max-open-databases")
			continue
		}
		if err := s.Query(ctx, hostile.AdminToken, other, "SELECT 1"); err != nil {
			failed++
			rec.Unclear("another database: %v", err)
			continue
		}
		others++
	}
	rec.Notef("%d of 12 streams pinned a database; another token opened %d databases, %d failed", pinned, others, failed)
	for db, baton := range batons {
		if baton != nil {
			hranaPipeline(ctx, client, s, hostile.AttackerToken, db, pipelineBody(baton, map[string]any{"type": "close"}))
		}
	}
	if others == 0 {
		return fmt.Errorf("no other database could be used while the streams pinned theirs")
	}
	return nil
}

func attackAbandonedWriters(ctx context.Context, s *hostile.Server, rec *hostile.Recorder) error {
	if code, body, _ := s.Request(ctx, http.MethodPut, "/v1/databases/shared", hostile.AdminToken, nil); code >= 300 && code != http.StatusConflict {
		return fmt.Errorf("create: %d %s", code, body)
	}
	if err := s.Query(ctx, hostile.AdminToken, "shared", "CREATE TABLE IF NOT EXISTS t (who TEXT, at INTEGER)"); err != nil {
		return err
	}
	actx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var abandoned sync.Map
	client := &http.Client{Timeout: time.Minute}
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for actx.Err() == nil {
				// BEGIN IMMEDIATE + INSERT, then walk away from the stream.
				code, _, err := hranaPipeline(actx, client, s, hostile.AttackerToken, "shared",
					pipelineBody(nil, execReq("BEGIN IMMEDIATE"), execReq("INSERT INTO t VALUES ('attacker', 0)")))
				if err == nil && code == 200 {
					n++
				}
			}
			abandoned.Store(i, n)
		}()
	}
	// Another token's writes to the same database.
	var lat []time.Duration
	writes, failed := 0, 0
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		start := time.Now()
		err := s.Query(ctx, hostile.AdminToken, "shared", "INSERT INTO t VALUES ('victim', 1)")
		lat = append(lat, time.Since(start))
		if err != nil {
			failed++
			rec.Unclear("victim write: %v", err)
		} else {
			writes++
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	wg.Wait()
	// A client that comes back to its transaction after it was revoked is
	// told so, naming the limit, and its stream stays ended: a later COMMIT
	// fails too, and nothing of the transaction is in the database. On a
	// database of its own, so that it holds the lock before the other write
	// arrives (a waiting write group goes before waiting sessions).
	if code, body, _ := s.Request(ctx, http.MethodPut, "/v1/databases/revoked", hostile.AdminToken, nil); code >= 300 && code != http.StatusConflict {
		return fmt.Errorf("create: %d %s", code, body)
	}
	if err := s.Query(ctx, hostile.AdminToken, "revoked", "CREATE TABLE IF NOT EXISTS t (who TEXT, at INTEGER)"); err != nil {
		return err
	}
	// Not the attacker's token: its abandoned transactions may still count
	// against its session quota until they time out.
	_, b, err := hranaPipeline(ctx, client, s, hostile.AdminToken, "revoked",
		pipelineBody(nil, execReq("BEGIN IMMEDIATE"), execReq("INSERT INTO t VALUES ('returning', 2)")))
	var r pipeResult
	if err != nil || json.Unmarshal(b, &r) != nil || r.Baton == nil || len(r.Results) != 2 || r.Results[0].Error != nil || r.Results[1].Error != nil {
		return fmt.Errorf("open the returning transaction: %v %s", err, b)
	}
	time.Sleep(50 * time.Millisecond)
	if err := s.Query(ctx, hostile.AdminToken, "revoked", "INSERT INTO t VALUES ('victim', 1)"); err != nil {
		return err
	}
	// The first is told why, naming the limit; the stream is then gone.
	for i, sql := range []string{"INSERT INTO t VALUES ('returning', 3)", "COMMIT"} {
		want := "limits.idle-write-timeout"
		if i == 1 {
			want = "was rolled back"
		}
		code, b, err := hranaPipeline(ctx, client, s, hostile.AdminToken, "revoked", pipelineBody(r.Baton, execReq(sql)))
		if err != nil {
			return err
		}
		var next pipeResult
		_ = json.Unmarshal(b, &next)
		switch {
		case code != 200:
			rec.Refused(code, string(b), want)
		case len(next.Results) == 1 && next.Results[0].Error != nil:
			rec.Refused(400, next.Results[0].Error.Message, want)
		default:
			rec.Unclear("%s after the transaction was revoked: %.300s", sql, b)
		}
		if next.Baton != nil {
			r.Baton = next.Baton
		}
	}
	code, left, _ := s.Request(ctx, http.MethodPost, "/v1/databases/revoked/query", hostile.AdminToken, []byte(`{"sql":"SELECT count(*) FROM t WHERE who = 'returning'"}`))
	if code != 200 || !strings.Contains(left, "[[0]]") {
		return fmt.Errorf("rows of the revoked transaction: %d %s", code, left)
	}
	total := 0
	abandoned.Range(func(_, v any) bool { total += v.(int); return true })
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	rec.Notef("victim writes: %d ok, %d failed in 20s, p50 %s p99 %s max %s; attackers abandoned %d transactions", writes, failed,
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), total)
	if p99 > time.Second {
		return fmt.Errorf("the other token's writes: p99 %s over 1s (p50 %s, %d writes)", p99, p50, writes)
	}
	return nil
}
