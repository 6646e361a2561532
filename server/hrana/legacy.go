package hrana

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/stream"
	"github.com/sluicedb/sluice/server/httperr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// sqld's legacy HTTP API, older than Hrana and still what some tools send
// (the DBeaver JDBC driver): POST / with {"statements": [...]}, each a SQL
// string or {"q": SQL, "params": [...] | {...}}. The statements run in order
// on one stream, each only if the one before it succeeded, as sqld runs
// them; a transaction a failed statement leaves open is rolled back. The
// answer is one entry per statement: {"results": {...}}, {"error": "..."},
// or null for a statement skipped after an error.

type legacyRequest struct {
	Statements *[]legacyStatement `json:"statements"`
}

// decodeLegacy reads a request body, or says why it is refused and with
// which status: 400 for what is not JSON, 422 for JSON of another shape (as
// sqld answers), 400 for what sqld refuses before running anything.
func decodeLegacy(data []byte) ([]legacyStatement, int, string) {
	var body legacyRequest
	if err := json.Unmarshal(data, &body); err != nil {
		if !json.Valid(data) {
			return nil, http.StatusBadRequest, "the body is not JSON: " + err.Error()
		}
		return nil, http.StatusUnprocessableEntity, "the body is not {\"statements\": [...]}: " + err.Error()
	}
	if body.Statements == nil {
		return nil, http.StatusUnprocessableEntity, "the body is not {\"statements\": [...]}: missing field \"statements\""
	}
	if msg := legacyCheck(*body.Statements); msg != "" {
		return nil, http.StatusBadRequest, msg
	}
	return *body.Statements, 0, ""
}

type legacyStatement struct {
	q     string
	args  []sqlconn.Value
	named map[string]sqlconn.Value
}

func (s *legacyStatement) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		return json.Unmarshal(data, &s.q)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return fmt.Errorf("a statement is a string or an object {\"q\": ..., \"params\": ...}, not %s", clipJSON(data))
	}
	for k := range obj {
		if k != "q" && k != "params" {
			return fmt.Errorf("unknown field %q in a statement, expected \"q\" or \"params\"", k)
		}
	}
	q, ok := obj["q"]
	if !ok {
		return fmt.Errorf("a statement object needs \"q\"")
	}
	if err := json.Unmarshal(q, &s.q); err != nil {
		return fmt.Errorf("\"q\" must be a string: %w", err)
	}
	params, ok := obj["params"]
	if !ok || string(bytes.TrimSpace(params)) == "null" {
		return nil
	}
	params = bytes.TrimSpace(params)
	if len(params) > 0 && params[0] == '{' {
		var named map[string]json.RawMessage
		if err := json.Unmarshal(params, &named); err != nil {
			return fmt.Errorf("params: %w", err)
		}
		s.named = make(map[string]sqlconn.Value, len(named))
		for k, raw := range named {
			v, err := legacyValue(raw)
			if err != nil {
				return fmt.Errorf("params %q: %w", k, err)
			}
			s.named[k] = v
		}
		return nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(params, &list); err != nil {
		return fmt.Errorf("params must be an array or an object: %w", err)
	}
	for i, raw := range list {
		v, err := legacyValue(raw)
		if err != nil {
			return fmt.Errorf("params[%d]: %w", i, err)
		}
		s.args = append(s.args, v)
	}
	return nil
}

// legacyValue reads a parameter as sqld does: null, a boolean (an integer),
// an integer, any other number (a real), a string, or {"base64": ...} (a blob).
func legacyValue(raw json.RawMessage) (sqlconn.Value, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return sqlconn.Value{}, fmt.Errorf("empty value")
	}
	switch raw[0] {
	case 'n':
		return sqlconn.Value{Type: sqlconn.Null}, nil
	case 't', 'f':
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return sqlconn.Value{}, err
		}
		if b {
			return sqlconn.Value{Type: sqlconn.Integer, Int: 1}, nil
		}
		return sqlconn.Value{Type: sqlconn.Integer}, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return sqlconn.Value{}, err
		}
		return sqlconn.Value{Type: sqlconn.Text, Text: s}, nil
	case '{':
		var b struct {
			Base64 *string `json:"base64"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil || b.Base64 == nil {
			return sqlconn.Value{}, fmt.Errorf("an object value must be {\"base64\": \"...\"} (a blob), not %s", clipJSON(raw))
		}
		data, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(*b.Base64, "="))
		if err != nil {
			return sqlconn.Value{}, fmt.Errorf("blob is not base64: %w", err)
		}
		return sqlconn.Value{Type: sqlconn.Blob, Blob: data}, nil
	}
	text := string(raw)
	if !strings.ContainsAny(text, ".eE") {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return sqlconn.Value{Type: sqlconn.Integer, Int: i}, nil
		}
		if u, err := strconv.ParseUint(text, 10, 64); err == nil {
			return sqlconn.Value{Type: sqlconn.Integer, Int: int64(u)}, nil // as sqld casts it
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return sqlconn.Value{}, fmt.Errorf("not a value: %s", clipJSON(raw))
	}
	return sqlconn.Value{Type: sqlconn.Float, Float: f}, nil
}

func clipJSON(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// legacyBatch turns the statements into a Hrana batch with sqld's program:
// each statement runs if the one before succeeded, and a last step rolls
// back a transaction the failed statement left open.
func legacyBatch(stmts []legacyStatement) *proto.Batch {
	b := &proto.Batch{Steps: make([]proto.BatchStep, 0, len(stmts)+1)}
	wantRows := true
	for i := range stmts {
		st := &stmts[i]
		q := st.q
		step := proto.BatchStep{Stmt: proto.Stmt{SQL: &q, WantRows: &wantRows}}
		for _, a := range st.args {
			step.Stmt.Args = append(step.Stmt.Args, proto.Value(a))
		}
		// In key order: an Idempotency-Key covers the request as encoded.
		for _, k := range slices.Sorted(maps.Keys(st.named)) {
			step.Stmt.NamedArgs = append(step.Stmt.NamedArgs, proto.NamedArg{Name: k, Value: proto.Value(st.named[k])})
		}
		if i > 0 {
			prev := uint32(i - 1)
			step.Condition = &proto.BatchCond{Type: "ok", Step: &prev}
		}
		b.Steps = append(b.Steps, step)
	}
	if n := len(stmts); n > 0 {
		last := uint32(n - 1)
		rollback := "ROLLBACK"
		b.Steps = append(b.Steps, proto.BatchStep{
			Stmt: proto.Stmt{SQL: &rollback},
			Condition: &proto.BatchCond{Type: "and", Conds: []proto.BatchCond{
				{Type: "not", Cond: &proto.BatchCond{Type: "ok", Step: &last}},
				{Type: "not", Cond: &proto.BatchCond{Type: "is_autocommit"}},
			}},
		})
	}
	return b
}

// legacyCheck refuses what sqld refuses before running anything: a string
// holding several statements, RELEASE, and statements that would leave a
// transaction open when the request ends (the stream ends with it).
func legacyCheck(stmts []legacyStatement) string {
	inTx := false
	for _, st := range stmts {
		if _, e := stream.SingleStatement(st.q); e != nil {
			return "found more than one command in a single statement string. It is allowed to issue only one command per string."
		}
		role := sqltext.Classify(st.q)
		switch {
		case sqltext.FirstKeyword(st.q) == "RELEASE":
			return "savepoints are not supported in HTTP API, use hrana protocol instead"
		case role.Kind == sqltext.Begin, role.Kind == sqltext.Savepoint && sqltext.FirstKeyword(st.q) == "SAVEPOINT":
			inTx = true
		case role.Kind == sqltext.Commit, role.Kind == sqltext.Rollback:
			inTx = false
		}
	}
	if inTx {
		return "interactive transaction not allowed in HTTP queries"
	}
	return ""
}

// legacyResults is a statement's answer: columns and rows as sqld writes
// them (a blob as {"base64": ...} without padding), then its statistics.
type legacyResults struct {
	Columns         []string `json:"columns"`
	Rows            [][]any  `json:"rows"`
	RowsRead        int64    `json:"rows_read"`
	RowsWritten     int64    `json:"rows_written"`
	QueryDurationMS float64  `json:"query_duration_ms"`
}

func legacyValueJSON(v proto.Value) any {
	switch v.Type {
	case sqlconn.Integer:
		return v.Int
	case sqlconn.Float:
		return legacyReal(v.Float)
	case sqlconn.Text:
		return v.Text
	case sqlconn.Blob:
		return map[string]string{"base64": base64.RawStdEncoding.EncodeToString(v.Blob)}
	}
	return nil
}

// legacyReal is a REAL as sqld writes it: always with a fraction or an
// exponent (1.0, not 1, so clients keep it a float), null when not finite.
type legacyReal float64

func (f legacyReal) MarshalJSON() ([]byte, error) {
	x := float64(f)
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return []byte("null"), nil
	}
	b := strconv.AppendFloat(nil, x, 'g', -1, 64)
	if !bytes.ContainsAny(b, ".e") {
		b = append(b, ".0"...)
	}
	return b, nil
}

func (h *Handler) serveLegacy(w http.ResponseWriter, r *http.Request, db dbhost.Database) error {
	data, e := h.readBody(w, r)
	if e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return nil
	}
	stmts, status, msg := decodeLegacy(data)
	if msg != "" {
		writeHTTPError(w, status, &proto.Error{Code: dberr.CodeProtocolError, Message: msg})
		return nil
	}
	if len(stmts) == 0 {
		writeJSON(w, http.StatusOK, []any{}, 0)
		return nil
	}
	batch := legacyBatch(stmts)
	x, idem, cancel, e := h.oneShot(r, db, batch)
	if e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return nil
	}
	defer cancel()
	released := false
	defer h.endOnPanic(w, x.Stream(), &released)
	defer x.EndSession()
	res, e := x.Batch(batch)
	if err := x.NeedsWriter(); err != nil {
		return err // answered by the writer (ServeRead)
	}
	markReplayed(w, idem)
	if e != nil {
		writeHTTPError(w, httperr.V1StatementStatus(e.Code), e)
		return nil
	}
	out := make([]any, len(stmts))
	for i := range stmts {
		if i < len(res.StepErrors) && res.StepErrors[i] != nil {
			out[i] = map[string]string{"error": res.StepErrors[i].Message}
			continue
		}
		if i >= len(res.StepResults) || res.StepResults[i] == nil {
			continue // skipped after an error: null, as sqld answers
		}
		sr := res.StepResults[i]
		lr := legacyResults{Columns: make([]string, len(sr.Cols)), Rows: make([][]any, len(sr.Rows)),
			RowsRead: sr.RowsRead, RowsWritten: sr.RowsWritten, QueryDurationMS: sr.QueryDurationMS}
		for j, c := range sr.Cols {
			if c.Name != nil {
				lr.Columns[j] = *c.Name
			}
		}
		for j, row := range sr.Rows {
			vals := make([]any, len(row))
			for k, v := range row {
				vals[k] = legacyValueJSON(v)
			}
			lr.Rows[j] = vals
		}
		out[i] = map[string]any{"results": lr}
	}
	writeJSON(w, http.StatusOK, out, x.Bookmark())
	return nil
}
