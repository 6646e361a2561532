package sqlshell

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Remote is a database served by `sluice serve`, used through its JSON API
// (POST /v1/databases/NAME/query). Every statement is its own request, so it
// commits on its own; statements typed between BEGIN and COMMIT are held
// and sent at COMMIT as one batch, which the server runs as one transaction.
type Remote struct {
	base   *url.URL // scheme://host[:port]
	name   string
	token  string
	client *http.Client

	txOpen bool
	tx     []string
}

// APIError is an error answer of the server.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// ParseServedURL splits a served database's URL into the server's base URL
// and the database name: http://host:port/db/NAME (the URL libSQL clients
// use), http://host:port/v1/databases/NAME, or http://host:port/NAME. With no
// path the name is db (-db); a name in both places must agree.
func ParseServedURL(raw, db string) (*url.URL, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", fmt.Errorf("server URL %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, "", fmt.Errorf("server URL %q: want http://HOST:PORT/db/NAME (or https://)", raw)
	}
	p := strings.Trim(u.Path, "/")
	var name string
	switch parts := strings.Split(p, "/"); {
	case p == "":
	case len(parts) == 2 && parts[0] == "db":
		name = parts[1]
	case len(parts) == 3 && parts[0] == "v1" && parts[1] == "databases":
		name = parts[2]
	case len(parts) == 1:
		name = parts[0]
	default:
		return nil, "", fmt.Errorf("server URL %q: the path names no database; want /db/NAME", raw)
	}
	switch {
	case name == "" && db == "":
		return nil, "", fmt.Errorf("server URL %q names no database: add /db/NAME or -db NAME", raw)
	case name != "" && db != "" && name != db:
		return nil, "", fmt.Errorf("server URL %q names database %q but -db says %q", raw, name, db)
	case name == "":
		name = db
	}
	base := &url.URL{Scheme: u.Scheme, Host: u.Host, User: u.User}
	return base, name, nil
}

// OpenRemote returns the backend for database name on the server at base.
// It checks the database exists (and the token may read it) before
// returning; with create, a database that does not exist is created.
func OpenRemote(ctx context.Context, base *url.URL, name, token string, create bool) (*Remote, error) {
	r := &Remote{base: base, name: name, token: token, client: &http.Client{Timeout: 5 * time.Minute}}
	if strings.Contains(name, "@") { // a past state: the point is checked (and restored) at once
		req, err := r.request(ctx, http.MethodPost, r.queryPath(), []byte(`{"sql":"SELECT 1"}`))
		if err == nil {
			_, err = r.do(req)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Describe(), err)
		}
		return r, nil
	}
	req, err := r.request(ctx, http.MethodGet, "/v1/databases/"+url.PathEscape(name), nil)
	if err != nil {
		return nil, err
	}
	_, err = r.do(req)
	var apiErr *APIError
	if create && errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		if req, err = r.request(ctx, http.MethodPut, "/v1/databases/"+url.PathEscape(name), nil); err != nil {
			return nil, err
		}
		_, err = r.do(req)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Describe(), err)
	}
	return r, nil
}

func (r *Remote) Describe() string { return r.base.String() + "/db/" + r.name }

func (r *Remote) Close() error {
	r.client.CloseIdleConnections()
	if r.txOpen && len(r.tx) > 0 {
		return fmt.Errorf("%d statements of an open transaction were not sent (no COMMIT)", len(r.tx))
	}
	return nil
}

func (r *Remote) request(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.base.String()+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	return req, nil
}

// queryPath is the database's query route; NAME@POINT (a TXID or an RFC
// 3339 time, as in a libSQL client's URL) reads that past state, read-only.
func (r *Remote) queryPath() string {
	name, at, past := strings.Cut(r.name, "@")
	p := "/v1/databases/" + url.PathEscape(name) + "/query"
	if past {
		p += "?at=" + url.QueryEscape(at)
	}
	return p
}

// do sends req and returns the body of a 2xx answer, or the server's error.
func (r *Remote) do(req *http.Request) ([]byte, error) {
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 == 2 {
		return body, nil
	}
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return nil, &APIError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return nil, &APIError{Status: resp.StatusCode, Code: resp.Status, Message: strings.TrimSpace(string(body))}
}

// query posts statements: one as {"sql"}, several as {"batch"} (one transaction).
func (r *Remote) query(ctx context.Context, stmts []string) ([]Result, error) {
	var body any
	if len(stmts) == 1 {
		body = map[string]any{"sql": stmts[0]}
	} else {
		batch := make([]map[string]any, len(stmts))
		for i, s := range stmts {
			batch[i] = map[string]any{"sql": s}
		}
		body = map[string]any{"batch": batch}
	}
	raw, _ := json.Marshal(body)
	req, err := r.request(ctx, http.MethodPost, r.queryPath(), raw)
	if err != nil {
		return nil, err
	}
	out, err := r.do(req)
	if err != nil {
		return nil, err
	}
	return decodeResults(out)
}

func decodeResults(body []byte) ([]Result, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var ans struct {
		Results []struct {
			Columns []string `json:"columns"`
			Rows    [][]any  `json:"rows"`
			Meta    struct {
				Changes   int64 `json:"changes"`
				LastRowID int64 `json:"last_row_id"`
			} `json:"meta"`
		} `json:"results"`
	}
	if err := dec.Decode(&ans); err != nil {
		return nil, fmt.Errorf("malformed answer from the server: %w", err)
	}
	out := make([]Result, len(ans.Results))
	for i, res := range ans.Results {
		out[i] = Result{Columns: res.Columns, Changes: res.Meta.Changes, LastInsertID: res.Meta.LastRowID}
		for _, row := range res.Rows {
			vals := make([]Value, len(row))
			for j, v := range row {
				val, err := decodeValue(v)
				if err != nil {
					return nil, err
				}
				vals[j] = val
			}
			out[i].Rows = append(out[i].Rows, vals)
		}
	}
	return out, nil
}

// decodeValue reads the JSON API's value encoding: integers exact, floats
// with a fraction or exponent, blobs as {"base64": ...}.
func decodeValue(v any) (Value, error) {
	switch x := v.(type) {
	case nil:
		return Value{Kind: Null}, nil
	case string:
		return Value{Kind: Text, Text: x}, nil
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return Value{}, fmt.Errorf("integer %s out of range", s)
			}
			return Value{Kind: Integer, Int: n}, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return Value{}, fmt.Errorf("number %s: %w", s, err)
		}
		return Value{Kind: Float, Float: f}, nil
	case map[string]any:
		if s, ok := x["base64"].(string); ok {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return Value{}, fmt.Errorf("blob: %w", err)
			}
			return Value{Kind: Blob, Blob: b}, nil
		}
	}
	return Value{}, fmt.Errorf("unexpected value %v in the server's answer", v)
}

// Exec sends one statement, or holds it while a transaction is open.
func (r *Remote) Exec(ctx context.Context, query string) (Result, error) {
	switch txVerb(query) {
	case "BEGIN":
		if r.txOpen {
			return Result{}, errors.New("cannot start a transaction within a transaction")
		}
		r.txOpen, r.tx = true, nil
		return Result{}, nil
	case "COMMIT":
		if !r.txOpen {
			return Result{}, errors.New("cannot commit - no transaction is active")
		}
		stmts := r.tx
		r.txOpen, r.tx = false, nil
		if len(stmts) == 0 {
			return Result{}, nil
		}
		res, err := r.query(ctx, stmts)
		if err != nil {
			return Result{}, fmt.Errorf("transaction rolled back: %w", err)
		}
		return res[len(res)-1], nil
	case "ROLLBACK":
		if !r.txOpen {
			return Result{}, errors.New("cannot rollback - no transaction is active")
		}
		r.txOpen, r.tx = false, nil
		return Result{}, nil
	}
	if r.txOpen {
		r.tx = append(r.tx, query)
		return Result{}, nil
	}
	res, err := r.query(ctx, []string{query})
	if err != nil {
		return Result{}, err
	}
	if len(res) != 1 {
		return Result{}, fmt.Errorf("server answered %d results for one statement", len(res))
	}
	return res[0], nil
}

// txVerb is BEGIN, COMMIT (or END) or ROLLBACK for the statements that
// delimit a transaction (savepoints excluded), else "".
func txVerb(query string) string {
	q := strings.ToUpper(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(query), ";")))
	fields := strings.Fields(q)
	if len(fields) == 0 {
		return ""
	}
	switch fields[0] {
	case "BEGIN":
		return "BEGIN"
	case "COMMIT", "END":
		return "COMMIT"
	case "ROLLBACK":
		if len(fields) > 1 && (fields[1] == "TO" || len(fields) > 2 && fields[2] == "TO") {
			return "" // ROLLBACK TO SAVEPOINT
		}
		return "ROLLBACK"
	}
	return ""
}

// Snapshot sends the queries as one batch of reads, which the server runs
// in one read transaction.
func (r *Remote) Snapshot(ctx context.Context, queries []string) ([]Result, error) {
	if r.txOpen {
		return nil, errors.New("a transaction is open: COMMIT or ROLLBACK it first")
	}
	return r.query(ctx, queries)
}

// Backup is not done by the server (it refuses file access such as VACUUM
// INTO): the shell rebuilds the copy from a snapshot dump.
func (r *Remote) Backup(context.Context, string) error { return ErrNoDirectBackup }

// ErrNoDirectBackup: the backend cannot copy the file itself.
var ErrNoDirectBackup = errors.New("backend has no direct backup")

// tempPath is a file name beside path for building it before a rename.
func tempPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-"+strconv.Itoa(os.Getpid()))
}
