package proto

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/internal/jsonstr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// The JSON shapes of Hrana 1-3 over HTTP (libSQL's specs: https://github.com/tursodatabase/libsql/blob/main/docs/HRANA_3_SPEC.md,
// HTTP_V1_SPEC.md and HTTP_V2_SPEC.md beside it).

// PipelineRequest is a pipeline request body (PipelineReqBody).
type PipelineRequest struct {
	Baton    *string         `json:"baton"`
	Requests []StreamRequest `json:"requests"`
}

// PipelineResponse is a pipeline answer (PipelineRespBody).
type PipelineResponse struct {
	Baton   *string        `json:"baton"`
	BaseURL *string        `json:"base_url"`
	Results []StreamResult `json:"results"`
}

// CursorRequest is a cursor request body (CursorReqBody).
type CursorRequest struct {
	Baton *string `json:"baton"`
	Batch *Batch  `json:"batch"`
}

// CursorResponse heads a cursor answer (CursorRespBody).
type CursorResponse struct {
	Baton   *string `json:"baton"`
	BaseURL *string `json:"base_url"`
}

// StreamRequest is one request of a pipeline (and of a WebSocket request).
type StreamRequest struct {
	Type  string  `json:"type"`
	Stmt  *Stmt   `json:"stmt"`
	Batch *Batch  `json:"batch"`
	SQL   *string `json:"sql"`
	SQLID *int32  `json:"sql_id"`
}

// StreamResult is the outcome of one StreamRequest.
type StreamResult struct {
	Type     string `json:"type"` // "ok" or "error"
	Response any    `json:"response,omitempty"`
	Error    *Error `json:"error,omitempty"`
}

// Stmt is a statement with its arguments.
type Stmt struct {
	SQL       *string    `json:"sql"`
	SQLID     *int32     `json:"sql_id"`
	Args      []Value    `json:"args"`
	NamedArgs []NamedArg `json:"named_args"`
	WantRows  *bool      `json:"want_rows"`
}

// NamedArg is an argument bound by name.
type NamedArg struct {
	Name  string `json:"name"`
	Value Value  `json:"value"`
}

// Batch is statements run in order, each under an optional condition.
type Batch struct {
	Steps []BatchStep `json:"steps"`
}

// BatchStep is one statement of a Batch.
type BatchStep struct {
	Condition *BatchCond `json:"condition"`
	Stmt      Stmt       `json:"stmt"`
}

// BatchCond decides whether a BatchStep runs.
type BatchCond struct {
	Type  string      `json:"type"`
	Step  *uint32     `json:"step"`
	Cond  *BatchCond  `json:"cond"`
	Conds []BatchCond `json:"conds"`
}

// StmtResult is the result of one statement.
type StmtResult struct {
	Cols             []Col     `json:"cols"`
	Rows             [][]Value `json:"rows"`
	AffectedRowCount int64     `json:"affected_row_count"`
	LastInsertRowID  *string   `json:"last_insert_rowid"`
	RowsRead         int64     `json:"rows_read"`
	RowsWritten      int64     `json:"rows_written"`
	QueryDurationMS  float64   `json:"query_duration_ms"`
	ReplicationIndex *string   `json:"replication_index,omitempty"`
	// RowsJSON, when set, are the rows already encoded (the elements of
	// "rows"), streamed from SQLite; Rows is then empty.
	RowsJSON []byte `json:"-"`
}

// Col is a result column.
type Col struct {
	Name     *string `json:"name"`
	DeclType *string `json:"decltype"`
}

// BatchResult is the result of a Batch, step by step.
type BatchResult struct {
	StepResults      []*StmtResult `json:"step_results"`
	StepErrors       []*Error      `json:"step_errors"`
	ReplicationIndex *string       `json:"replication_index,omitempty"`
}

// DescribeResult describes a statement without running it.
type DescribeResult struct {
	Params     []DescribeParam `json:"params"`
	Cols       []DescribeCol   `json:"cols"`
	IsExplain  bool            `json:"is_explain"`
	IsReadonly bool            `json:"is_readonly"`
}

// DescribeParam is a parameter of a described statement.
type DescribeParam struct {
	Name *string `json:"name"`
}

// DescribeCol is a result column of a described statement.
type DescribeCol struct {
	Name     string  `json:"name"`
	DeclType *string `json:"decltype"`
}

// Error is Hrana's error structure. The HTTP error bodies also carry it under
// "error" as a plain string, which libsql-client-go reads before "message".
type Error struct {
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
	// ExtendedCode is SQLite's extended result code when Code is its primary
	// one (SQLITE_CONSTRAINT_UNIQUE under SQLITE_CONSTRAINT): sqld sends the
	// primary code alone, and clients compare it, so the detail travels
	// beside it (JSON only; clients ignore a field they do not know).
	ExtendedCode string `json:"extended_code,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Value is one Hrana value: integers as decimal strings, blobs as base64.
type Value sqlconn.Value

func (v *Value) UnmarshalJSON(data []byte) error {
	var raw struct {
		Type   string          `json:"type"`
		Value  json.RawMessage `json:"value"`
		Base64 *string         `json:"base64"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("value %s: %w", data, err)
	}
	switch raw.Type {
	case "null":
		*v = Value{Type: sqlconn.Null}
	case "integer":
		s := string(bytes.Trim(raw.Value, `"`))
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("integer value %s is not a 64-bit integer", raw.Value)
		}
		*v = Value{Type: sqlconn.Integer, Int: n}
	case "float":
		f := 0.0
		if len(raw.Value) > 0 {
			s := string(bytes.Trim(raw.Value, `"`))
			var err error
			if f, err = strconv.ParseFloat(s, 64); err != nil && !isRangeErr(err) {
				return fmt.Errorf("float value %s is not a number", raw.Value)
			}
		}
		*v = Value{Type: sqlconn.Float, Float: f}
	case "text":
		var s string
		if err := json.Unmarshal(raw.Value, &s); err != nil {
			return fmt.Errorf("text value %s is not a string", raw.Value)
		}
		*v = Value{Type: sqlconn.Text, Text: s}
	case "blob":
		if raw.Base64 == nil {
			return fmt.Errorf("blob value has no base64 field")
		}
		b, err := decodeBase64(*raw.Base64)
		if err != nil {
			return fmt.Errorf("blob value: %w", err)
		}
		*v = Value{Type: sqlconn.Blob, Blob: b}
	default:
		return fmt.Errorf("unknown value type %q (want null, integer, float, text or blob)", raw.Type)
	}
	return nil
}

func isRangeErr(err error) bool { return errors.Is(err, strconv.ErrRange) }

// decodeBase64 accepts padded and unpadded, standard and URL-safe base64:
// libsql-client-go sends it unpadded, Python and JS padded.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

func (v Value) MarshalJSON() ([]byte, error) {
	return appendValue(nil, sqlconn.Value(v)), nil
}

// appendValue encodes v as Hrana JSON. Blobs go out unpadded, as sqld sends
// them: libsql-client-go decodes only unpadded base64, and the JS and Python
// clients accept both.
func appendValue(b []byte, v sqlconn.Value) []byte {
	switch v.Type {
	case sqlconn.Integer:
		b = append(b, `{"type":"integer","value":"`...)
		b = strconv.AppendInt(b, v.Int, 10)
		return append(b, `"}`...)
	case sqlconn.Float:
		b = append(b, `{"type":"float","value":`...)
		if math.IsInf(v.Float, 0) || math.IsNaN(v.Float) {
			// JSON has no infinity: sqld sends null, which every client's
			// JSON parser accepts (the protobuf encoding carries the value).
			b = append(b, "null"...)
		} else {
			b = appendFloatValue(b, v.Float)
		}
		return append(b, '}')
	case sqlconn.Text:
		b = append(b, `{"type":"text","value":`...)
		b = jsonstr.Append(b, v.Text)
		return append(b, '}')
	case sqlconn.Blob:
		return appendBlob(b, v.Blob)
	default:
		return append(b, `{"type":"null"}`...)
	}
}

func appendBlob(b, blob []byte) []byte {
	b = append(b, `{"type":"blob","base64":"`...)
	b = base64.RawStdEncoding.AppendEncode(b, blob)
	return append(b, `"}`...)
}
