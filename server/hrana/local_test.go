package hrana_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the local file the answers are compared with ("sqlite")
)

// answer is what a statement gave, in a form both a local file and sluice
// can be compared in: column names, declared types, values tagged with
// their storage class, or SQLite's error message.
type answer struct {
	Cols  []string
	Types []string
	Rows  [][]string
	Err   string
}

func (a answer) String() string {
	if a.Err != "" {
		return "error: " + a.Err
	}
	return fmt.Sprintf("cols %q types %q rows %q", a.Cols, a.Types, a.Rows)
}

// normal makes empty lists nil, so that "no columns" compares equal.
func (a answer) normal() answer {
	if len(a.Cols) == 0 {
		a.Cols = nil
	}
	if len(a.Types) == 0 {
		a.Types = nil
	}
	if len(a.Rows) == 0 {
		a.Rows = nil
	}
	return a
}

// localFile is one connection to a local SQLite file, the reference.
func localFile(t *testing.T) *sql.Conn {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "local.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	localAnswer(c, "PRAGMA journal_mode=WAL")
	return c
}

// errSuffix is the result code the modernc driver appends to SQLite's
// message; errPrefix the code's own text it puts first.
var (
	errSuffix = regexp.MustCompile(` \(\d+\)$`)
	errPrefix = regexp.MustCompile(`^[^:]*: `)
)

// localMessage is sqlite3_errmsg from the modernc driver's error.
func localMessage(err error) string {
	msg := errSuffix.ReplaceAllString(err.Error(), "")
	return errPrefix.ReplaceAllString(msg, "")
}

func localAnswer(c *sql.Conn, q string, args ...any) answer {
	rows, err := c.QueryContext(context.Background(), q, args...)
	if err != nil {
		return answer{Err: localMessage(err)}
	}
	defer rows.Close()
	var a answer
	a.Cols, _ = rows.Columns()
	types, _ := rows.ColumnTypes()
	for _, ct := range types {
		a.Types = append(a.Types, strings.ToUpper(ct.DatabaseTypeName()))
	}
	for rows.Next() {
		vals := make([]any, len(a.Cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return answer{Err: err.Error()}
		}
		var row []string
		for _, v := range vals {
			switch v := v.(type) {
			case nil:
				row = append(row, "n")
			case int64:
				row = append(row, fmt.Sprintf("i:%d", v))
			case float64:
				row = append(row, fmt.Sprintf("f:%v", v))
			case string:
				row = append(row, "t:"+v)
			case []byte:
				row = append(row, fmt.Sprintf("b:%x", v))
			default:
				row = append(row, fmt.Sprintf("?:%v", v))
			}
		}
		a.Rows = append(a.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return answer{Err: localMessage(err)}
	}
	return a
}

// hranaAnswer converts a Hrana execute result (or error).
func hranaAnswer(r map[string]any) answer {
	if r["type"] != "ok" {
		e, _ := r["error"].(map[string]any)
		return answer{Err: fmt.Sprint(e["message"])}
	}
	res := r["response"].(map[string]any)["result"].(map[string]any)
	var a answer
	for _, c := range res["cols"].([]any) {
		col := c.(map[string]any)
		a.Cols = append(a.Cols, fmt.Sprint(col["name"]))
		dt, _ := col["decltype"].(string)
		a.Types = append(a.Types, strings.ToUpper(dt))
	}
	for _, row := range res["rows"].([]any) {
		var out []string
		for _, v := range row.([]any) {
			val := v.(map[string]any)
			switch val["type"] {
			case "null":
				out = append(out, "n")
			case "integer":
				out = append(out, "i:"+fmt.Sprint(val["value"]))
			case "float":
				out = append(out, fmt.Sprintf("f:%v", val["value"]))
			case "text":
				out = append(out, "t:"+fmt.Sprint(val["value"]))
			case "blob":
				b, _ := base64.RawStdEncoding.DecodeString(strings.TrimRight(fmt.Sprint(val["base64"]), "="))
				out = append(out, fmt.Sprintf("b:%x", b))
			}
		}
		a.Rows = append(a.Rows, out)
	}
	return a
}

// jsonAnswer runs one statement through the JSON API and converts its
// result (the JSON API has no declared types).
func jsonAnswer(t *testing.T, base, db, token, q string) answer {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"sql": q})
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/databases/"+db+"/query", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out struct {
		Results []struct {
			Columns []string `json:"columns"`
			Rows    [][]any  `json:"rows"`
		} `json:"results"`
		Error struct{ Message string } `json:"error"`
	}
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("%s: %v: %s", q, err, raw)
	}
	if resp.StatusCode != http.StatusOK {
		return answer{Err: out.Error.Message}
	}
	a := answer{Cols: out.Results[0].Columns}
	for _, row := range out.Results[0].Rows {
		var vals []string
		for _, v := range row {
			switch v := v.(type) {
			case nil:
				vals = append(vals, "n")
			case json.Number:
				if strings.ContainsAny(v.String(), ".eE") {
					f, _ := v.Float64()
					vals = append(vals, fmt.Sprintf("f:%v", f))
				} else {
					vals = append(vals, "i:"+v.String())
				}
			case string:
				vals = append(vals, "t:"+v)
			case map[string]any:
				b, _ := base64.StdEncoding.DecodeString(fmt.Sprint(v["base64"]))
				vals = append(vals, fmt.Sprintf("b:%x", b))
			}
		}
		a.Rows = append(a.Rows, vals)
	}
	return a
}

// sameAnswer compares an answer of sluice with the local file's; types
// false leaves declared types out (the JSON API has none).
func sameAnswer(t *testing.T, what string, got, want answer, types bool) {
	t.Helper()
	if !types {
		got.Types, want.Types = nil, nil
	}
	got, want = got.normal(), want.normal()
	if (got.Err == "") != (want.Err == "") || !reflect.DeepEqual(got.Cols, want.Cols) || !reflect.DeepEqual(got.Rows, want.Rows) ||
		!reflect.DeepEqual(got.Types, want.Types) {
		t.Errorf("%s:\n sluice %v\n  local %v", what, got, want)
	}
}
