package proto

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/sluicedb/sluice/internal/jsonstr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// Hrana answers are written by hand: a result's rows are encoded as SQLite
// steps them (RowsEncoder, a sqlconn.RowWriter) and the pipeline answer is
// assembled around them, with no reflection and no value copied per row.

// RowsEncoder holds a statement's rows as the JSON elements of "rows".
type RowsEncoder struct {
	// Budget, when set, is charged every row as it is encoded; the row
	// that passes it drops what the encoder holds and calls Stop (which
	// interrupts the statement).
	Budget *Budget
	Stop   func()
	// Lines encodes each row as a JSON cursor's row entry (a line of its
	// own) instead of an element of "rows".
	Lines bool

	buf     []byte
	rows    int
	started bool // the Conn streamed (one that does not fills Result.Rows)
	tooBig  bool
}

// Columns starts the rows over (a statement run again starts from scratch).
func (e *RowsEncoder) Columns([]sqlconn.Column) {
	if e.buf == nil {
		e.buf = jsonstr.GetBuffer()
	}
	e.Budget.refund(len(e.buf))
	e.buf, e.rows, e.started, e.tooBig = e.buf[:0], 0, true, false
}

// TooBig reports whether the rows passed the budget (and were dropped).
func (e *RowsEncoder) TooBig() bool { return e.tooBig }

// Encoded returns the rows encoded since Columns, and false when the Conn
// did not stream (it filled Result.Rows instead).
func (e *RowsEncoder) Encoded() ([]byte, bool) {
	if !e.started {
		return nil, false
	}
	if e.buf == nil { // no rows: still streamed, not "look in Rows"
		return []byte{}, true
	}
	return e.buf, true
}

// Detach returns the rows encoded since Columns in a slice of their own
// size and gives the encoder's pooled buffer back, and false when the Conn
// did not stream. A pipeline keeps every statement's rows until its whole
// answer is written: holding a pooled 32 KiB buffer per statement made a
// 100,000-statement pipeline of one-row answers cost gigabytes, so what a
// statement keeps is what its answer needs.
func (e *RowsEncoder) Detach() ([]byte, bool) {
	b, ok := e.Encoded()
	if !ok || e.buf == nil {
		return b, ok
	}
	out := append(make([]byte, 0, len(b)), b...)
	jsonstr.PutBuffer(e.buf)
	e.buf = nil
	return out, true
}

// Row appends the row SQLite is on.
func (e *RowsEncoder) Row(r *sqlconn.Row) {
	if e.tooBig {
		return
	}
	before := len(e.buf)
	defer e.charge(before)
	b := e.buf
	switch {
	case e.Lines:
		b = append(b, `{"type":"row","row":`...)
	case e.rows > 0:
		b = append(b, ',')
	}
	b = append(b, '[')
	for i := range r.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRowValue(b, r, i)
	}
	b = append(b, ']')
	if e.Lines {
		b = append(b, "}\n"...)
	}
	e.buf = b
	e.rows++
}

// charge charges the row just appended (after before) to the budget.
func (e *RowsEncoder) charge(before int) {
	if e.Budget.charge(len(e.buf) - before) {
		return
	}
	e.Budget.refund(len(e.buf))
	e.tooBig = true
	jsonstr.PutBuffer(e.buf)
	e.buf = nil
	if e.Stop != nil {
		e.Stop()
	}
}

// appendRowValue is appendValue for column i of a row being stepped.
func appendRowValue(b []byte, r *sqlconn.Row, i int) []byte {
	switch r.Type(i) {
	case sqlconn.Integer:
		b = append(b, `{"type":"integer","value":"`...)
		b = strconv.AppendInt(b, r.Int(i), 10)
		return append(b, `"}`...)
	case sqlconn.Float:
		return appendValue(b, sqlconn.Value{Type: sqlconn.Float, Float: r.Float(i)})
	case sqlconn.Text:
		b = append(b, `{"type":"text","value":`...)
		b = jsonstr.AppendBytes(b, r.Bytes(i))
		return append(b, '}')
	case sqlconn.Blob:
		return appendBlob(b, r.Bytes(i))
	}
	return append(b, `{"type":"null"}`...)
}

// MarshalJSON writes the result by hand (see appendJSON).
func (r *StmtResult) MarshalJSON() ([]byte, error) { return r.appendJSON(nil), nil }

// appendJSON appends the result: its streamed rows if it has them, else Rows.
func (r *StmtResult) appendJSON(b []byte) []byte {
	b = append(b, `{"cols":[`...)
	for i, c := range r.Cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendStringOrNull(b, c.Name)
		b = append(b, `,"decltype":`...)
		b = appendStringOrNull(b, c.DeclType)
		b = append(b, '}')
	}
	b = append(b, `],"rows":[`...)
	if r.RowsJSON != nil {
		b = append(b, r.RowsJSON...)
	} else {
		for i, row := range r.Rows {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			for j, v := range row {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendValue(b, sqlconn.Value(v))
			}
			b = append(b, ']')
		}
	}
	b = append(b, `],"affected_row_count":`...)
	b = strconv.AppendInt(b, r.AffectedRowCount, 10)
	b = append(b, `,"last_insert_rowid":`...)
	b = appendStringOrNull(b, r.LastInsertRowID)
	b = append(b, `,"rows_read":`...)
	b = strconv.AppendInt(b, r.RowsRead, 10)
	b = append(b, `,"rows_written":`...)
	b = strconv.AppendInt(b, r.RowsWritten, 10)
	b = append(b, `,"query_duration_ms":`...)
	b = appendJSONFloat(b, r.QueryDurationMS)
	if r.ReplicationIndex != nil {
		b = append(b, `,"replication_index":`...)
		b = jsonstr.Append(b, *r.ReplicationIndex)
	}
	return append(b, '}')
}

func appendStringOrNull(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return jsonstr.Append(b, *s)
}

// appendFloatValue writes a REAL value as sqld does: always with a decimal
// point or exponent, so that a client's JSON parser reads a float, and -0.0
// keeps its sign (Python reads a bare -0 as the integer 0).
func appendFloatValue(b []byte, f float64) []byte {
	start := len(b)
	b = strconv.AppendFloat(b, f, 'g', -1, 64)
	for _, c := range b[start:] {
		if c == '.' || c == 'e' {
			return b
		}
	}
	return append(b, ".0"...)
}

// appendJSONFloat formats f as encoding/json does.
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(b, "null"...)
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-07 → e-7, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// ExecuteResponse is the response to an execute request.
type ExecuteResponse struct {
	Result *StmtResult
}

// MarshalJSON writes {"type":"execute","result":...}.
func (e ExecuteResponse) MarshalJSON() ([]byte, error) { return e.appendJSON(nil), nil }

func (e ExecuteResponse) appendJSON(b []byte) []byte {
	b = append(b, `{"type":"execute","result":`...)
	if e.Result == nil {
		b = append(b, "null"...)
	} else {
		b = e.Result.appendJSON(b)
	}
	return append(b, '}')
}

// answerEstimate is a little more than a pipeline answer's size when its
// results are executes: their rows plus what surrounds each.
func answerEstimate(resp *PipelineResponse) int {
	n := 64
	for _, r := range resp.Results {
		n += 256
		if ex, ok := r.Response.(ExecuteResponse); ok && ex.Result != nil {
			n += len(ex.Result.RowsJSON) + 64*len(ex.Result.Cols)
		}
	}
	return n
}

// AppendPipeline appends the pipeline answer; execute results are written
// by hand, the rest (small) through encoding/json.
func AppendPipeline(b []byte, resp *PipelineResponse) ([]byte, error) {
	// One allocation of about the answer's size rather than a doubling
	// series: a long pipeline's answer otherwise costs the collector about
	// three times its size.
	b = slices.Grow(b, answerEstimate(resp))
	b = append(b, `{"baton":`...)
	b = appendStringOrNull(b, resp.Baton)
	b = append(b, `,"base_url":`...)
	b = appendStringOrNull(b, resp.BaseURL)
	b = append(b, `,"results":[`...)
	for i, r := range resp.Results {
		if i > 0 {
			b = append(b, ',')
		}
		if ex, ok := r.Response.(ExecuteResponse); ok && r.Type == "ok" && r.Error == nil {
			b = append(b, `{"type":"ok","response":`...)
			b = ex.appendJSON(b)
			b = append(b, '}')
			continue
		}
		one, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		b = append(b, one...)
	}
	return append(b, "]}"...), nil
}
