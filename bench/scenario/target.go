package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/bench/load"
)

// Protocols a Target speaks.
const (
	JSON  = "json"  // sluice's POST /v1/databases/<db>/query
	Hrana = "hrana" // POST /db/<db>/v2/pipeline, as libSQL clients send it
	Peer  = "peer"  // the fixed routes of bench/peers/peerapp
)

// Target is a server under load and the way to talk to it.
type Target struct {
	BaseURL  string // http://127.0.0.1:PORT
	DB       string // database name (JSON and Hrana)
	Protocol string
	Token    string // optional bearer token
}

func (t *Target) headers(contentType bool) []string {
	var h []string
	if contentType {
		h = append(h, "Content-Type: application/json")
	}
	if t.Token != "" {
		h = append(h, "Authorization: Bearer "+t.Token)
	}
	return h
}

// Requests prepares one request per op of the scenario, in op order.
func (t *Target) Requests(s *Scenario) ([]*load.Request, error) {
	var reqs []*load.Request
	for _, op := range s.Ops {
		var (
			r   *load.Request
			err error
		)
		switch t.Protocol {
		case JSON, "":
			body, _ := json.Marshal(map[string]any{"sql": op.SQL, "params": nonNil(op.Params)})
			r, err = load.NewRequest("POST", t.BaseURL+"/v1/databases/"+url.PathEscape(t.DB)+"/query", body, t.headers(true)...)
		case Hrana:
			r, err = load.NewRequest("POST", t.hranaURL(), hranaBody(op.SQL, op.Params), t.headers(true)...)
			if r != nil {
				r.Check = hranaCheck
			}
		case Peer:
			method, path, _ := strings.Cut(op.PeerRoute, " ")
			r, err = load.NewRequest(method, t.BaseURL+path, nil, t.headers(false)...)
		default:
			return nil, fmt.Errorf("unknown protocol %q (json, hrana or peer)", t.Protocol)
		}
		if err != nil {
			return nil, err
		}
		r.Write = op.Write
		reqs = append(reqs, r)
	}
	return reqs, nil
}

func (t *Target) hranaURL() string { return t.BaseURL + "/db/" + url.PathEscape(t.DB) + "/v2/pipeline" }

func nonNil(p []any) []any {
	if p == nil {
		return []any{}
	}
	return p
}

// hranaBody is a Hrana pipeline with one execute and a close.
func hranaBody(sql string, params []any) []byte {
	args := make([]map[string]any, 0, len(params))
	for _, p := range params {
		switch v := p.(type) {
		case string:
			args = append(args, map[string]any{"type": "text", "value": v})
		case int:
			args = append(args, map[string]any{"type": "integer", "value": strconv.Itoa(v)})
		case int64:
			args = append(args, map[string]any{"type": "integer", "value": strconv.FormatInt(v, 10)})
		default:
			args = append(args, map[string]any{"type": "text", "value": fmt.Sprint(v)})
		}
	}
	body, _ := json.Marshal(map[string]any{"requests": []any{
		map[string]any{"type": "execute", "stmt": map[string]any{"sql": sql, "args": args}},
		map[string]any{"type": "close"},
	}})
	return body
}

// hranaCheck fails a 200 pipeline answer that carries an error result. It
// knows hranaBody's pipeline, one execute and a close: an answer short enough
// to hold no rows is searched whole; in a longer one only the two results'
// types are read, the first after "results":[ and the last at the end, so
// the rows between are not scanned. Searching a 30 KB answer whole for
// "type":"error" cost the load generator a third of a core at 9,000 answers a
// second, on the cores the server under test shares.
func hranaCheck(body []byte) string {
	if len(body) <= hranaShortAnswer {
		if bytes.Contains(body, hranaErrorType) {
			return "hrana error"
		}
		return ""
	}
	first := bytes.Index(body, []byte(`"results":[`))
	if first < 0 || !bytes.HasPrefix(body[first+len(`"results":[`):], []byte(`{"type":"ok"`)) {
		return "hrana error"
	}
	// The last object with a "type" is the close's own response, or the error
	// result that replaced it (an error's message is a string, so any braces or
	// quotes in it are escaped).
	last := bytes.LastIndex(body, []byte(`{"type":"`))
	if last < 0 || bytes.HasPrefix(body[last+1:], hranaErrorType) {
		return "hrana error"
	}
	return ""
}

// hranaShortAnswer bounds an answer without rows: two results, one of them an
// error whose message SQLite or sluice keeps short.
const hranaShortAnswer = 4 << 10

var hranaErrorType = []byte(`"type":"error"`)

var client = &http.Client{Timeout: 2 * time.Minute}

// Setup creates the database (sluice), the schema and any seed rows.
func (t *Target) Setup(ctx context.Context, s *Scenario) error {
	if t.Protocol == Peer {
		_, err := t.call(ctx, "POST", t.BaseURL+"/setup?scenario="+url.QueryEscape(s.Name), nil)
		return err
	}
	// Create the database; an existing one is fine (409).
	req, _ := http.NewRequestWithContext(ctx, "PUT", t.BaseURL+"/v1/databases/"+url.PathEscape(t.DB), nil)
	t.auth(req)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("create database %s at %s: %w (is the server running?)", t.DB, t.BaseURL, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusConflict {
		return fmt.Errorf("create database %s at %s: HTTP %d: %s", t.DB, t.BaseURL, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	for _, q := range s.Schema {
		if _, err := t.Query(ctx, q); err != nil {
			return fmt.Errorf("schema of %s: %w", s.Name, err)
		}
	}
	if s.SeedRows > 0 {
		n, err := t.Count(ctx, s)
		if err != nil {
			return err
		}
		if missing := int64(s.SeedRows) - n; missing > 0 {
			if _, err := t.Query(ctx, s.SeedSQL, missing); err != nil {
				return fmt.Errorf("seed rows of %s: %w", s.Name, err)
			}
		}
	}
	return nil
}

// Count runs the scenario's count query: the number acknowledged writes add to.
func (t *Target) Count(ctx context.Context, s *Scenario) (int64, error) {
	if t.Protocol == Peer {
		b, err := t.call(ctx, "GET", t.BaseURL+"/count?scenario="+url.QueryEscape(s.Name), nil)
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	v, err := t.Query(ctx, s.CountSQL)
	if err != nil {
		return 0, fmt.Errorf("count for %s on database %s: %w", s.Name, t.DB, err)
	}
	return v, nil
}

// Query runs one statement and returns the first column of its first row as
// an integer (0 if there is none).
func (t *Target) Query(ctx context.Context, sql string, params ...any) (int64, error) {
	if t.Protocol == Hrana {
		b, err := t.call(ctx, "POST", t.hranaURL(), hranaBody(sql, params))
		if err != nil {
			return 0, err
		}
		var out struct {
			Results []struct {
				Type     string
				Error    struct{ Message string }
				Response struct {
					Result struct {
						Rows [][]struct{ Type, Value json.RawMessage }
					}
				}
			}
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Results) == 0 {
			return 0, fmt.Errorf("hrana answer to %q: %v: %.200s", sql, err, b)
		}
		r := out.Results[0]
		if r.Type != "ok" {
			return 0, fmt.Errorf("hrana %q: %s", sql, r.Error.Message)
		}
		if len(r.Response.Result.Rows) == 0 || len(r.Response.Result.Rows[0]) == 0 {
			return 0, nil
		}
		var s string
		if err := json.Unmarshal(r.Response.Result.Rows[0][0].Value, &s); err != nil {
			return 0, fmt.Errorf("hrana %q: value %s", sql, r.Response.Result.Rows[0][0].Value)
		}
		return strconv.ParseInt(s, 10, 64)
	}
	body, _ := json.Marshal(map[string]any{"sql": sql, "params": nonNil(params)})
	b, err := t.call(ctx, "POST", t.BaseURL+"/v1/databases/"+url.PathEscape(t.DB)+"/query", body)
	if err != nil {
		return 0, err
	}
	var out struct {
		Results []struct{ Rows [][]json.Number }
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&out); err != nil || len(out.Results) == 0 {
		return 0, fmt.Errorf("answer to %q: %v: %.200s", sql, err, b)
	}
	if len(out.Results[0].Rows) == 0 || len(out.Results[0].Rows[0]) == 0 {
		return 0, nil
	}
	return out.Results[0].Rows[0][0].Int64()
}

func (t *Target) auth(req *http.Request) {
	if t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.Token)
	}
}

func (t *Target) call(ctx context.Context, method, u string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	t.auth(req)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: HTTP %d: %s", method, u, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// Fetch sends the scenario's first op once and returns the answer's body:
// the bytes a reference handler replays.
func (t *Target) Fetch(ctx context.Context, s *Scenario) ([]byte, error) {
	op := s.Ops[0]
	switch t.Protocol {
	case Hrana:
		return t.call(ctx, "POST", t.hranaURL(), hranaBody(op.SQL, op.Params))
	case JSON, "":
		body, _ := json.Marshal(map[string]any{"sql": op.SQL, "params": nonNil(op.Params)})
		return t.call(ctx, "POST", t.BaseURL+"/v1/databases/"+url.PathEscape(t.DB)+"/query", body)
	}
	return nil, fmt.Errorf("fetch: protocol %q has no single answer to replay", t.Protocol)
}
