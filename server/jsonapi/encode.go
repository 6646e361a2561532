package jsonapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicedb/sluice/internal/jsonstr"
	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// resultsEncoder writes the answer {"results":[...],"bookmark":"N"} by hand
// into one reused buffer: values need exact encodings (int64 beyond 2^53,
// floats that stay floats, blobs as base64), and reads stream their rows
// straight from SQLite into it (it is the statements' sqlconn.RowWriter).
type resultsEncoder struct {
	// max caps the answer (0: no cap): past it the encoder keeps nothing
	// more, stops the statement (cancel) and the answer is tooBig.
	max    int
	cancel func()
	tooBig error
	ctx    context.Context // the statements' (waiting for a large-answer turn)
	big    bool            // holds a large-answer turn (largeTurns)

	buf     []byte
	stmt    int  // where the current statement's result starts
	rows    int  // rows written for the current statement
	started bool // Columns was called for the current statement
}

func getEncoder() *resultsEncoder {
	e := &resultsEncoder{buf: jsonstr.GetBuffer()}
	e.reset()
	return e
}

func putEncoder(e *resultsEncoder) {
	e.endLarge()
	jsonstr.PutBuffer(e.buf)
}

func (e *resultsEncoder) reset() {
	e.buf = append(e.buf[:0], `{"results":[`...)
	e.tooBig = nil
}

// full reports whether the answer is past its cap, dropping what it holds
// (and stopping the statement) the first time.
func (e *resultsEncoder) full() bool {
	if e.tooBig != nil {
		return true
	}
	if e.max <= 0 || len(e.buf) <= e.max {
		return false
	}
	e.tooBig = dberr.New(dberr.CodeTooBig, fmt.Sprintf("the answer is larger than the server's limit of %s "+
		"(limits.max-response-bytes): select fewer rows or columns, or page with LIMIT and a WHERE on the last key", units.FormatSize(int64(e.max))))
	e.buf = e.buf[:0]
	if e.cancel != nil {
		e.cancel()
	}
	return true
}

// begin starts statement i's result.
func (e *resultsEncoder) begin(i int) {
	if e.tooBig != nil {
		return
	}
	if i > 0 {
		e.buf = append(e.buf, ',')
	}
	e.stmt, e.rows, e.started = len(e.buf), 0, false
}

// Columns starts (or starts over) the current statement's result.
func (e *resultsEncoder) Columns(cols []sqlconn.Column) {
	if e.tooBig != nil {
		return
	}
	b := append(e.buf[:e.stmt], `{"columns":[`...)
	for j, c := range cols {
		if j > 0 {
			b = append(b, ',')
		}
		b = jsonstr.Append(b, c.Name)
	}
	e.buf = append(b, `],"rows":[`...)
	e.rows, e.started = 0, true
}

// Row appends the row SQLite is on.
func (e *resultsEncoder) Row(r *sqlconn.Row) {
	if e.full() {
		return
	}
	b := e.buf
	if e.rows > 0 {
		b = append(b, ',')
	}
	b = append(b, '[')
	for i := range r.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRowValue(b, r, i)
	}
	e.buf = append(b, ']')
	e.rows++
	if !e.big && len(e.buf) > largeAnswer {
		e.beginLarge()
	}
}

// rowsOf appends rows already read into Values.
func (e *resultsEncoder) rowsOf(rows [][]sqlconn.Value) {
	for _, row := range rows {
		if e.full() {
			return
		}
		b := e.buf
		if e.rows > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for k, v := range row {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, v)
		}
		e.buf = append(b, ']')
		e.rows++
	}
}

// end closes the current statement's result with its meta.
func (e *resultsEncoder) end(res sqlconn.Result) {
	if e.full() {
		return
	}
	if !e.started { // a Conn that does not stream filled res.Rows instead
		e.Columns(res.Columns)
		e.rowsOf(res.Rows)
	}
	b := append(e.buf, `],"meta":{"changes":`...)
	b = strconv.AppendInt(b, res.Changes, 10)
	b = append(b, `,"last_row_id":`...)
	b = strconv.AppendInt(b, res.LastInsertRowID, 10)
	b = append(b, `,"rows_read":`...)
	b = strconv.AppendInt(b, res.RowsRead, 10)
	b = append(b, `,"rows_written":`...)
	b = strconv.AppendInt(b, res.RowsWritten, 10)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendFloat(b, float64(res.Duration)/float64(time.Millisecond), 'f', 3, 64)
	e.buf = append(b, `}}`...)
}

// send closes the answer with the bookmark and writes it in one piece (a
// Content-Length, not chunks).
func (e *resultsEncoder) send(w http.ResponseWriter, bm dbhost.Bookmark) {
	e.endLarge() // built: writing it costs the CPU little
	if e.full() {
		WriteError(w, e.tooBig)
		return
	}
	b := append(e.buf, `],"bookmark":"`...)
	b = strconv.AppendUint(b, uint64(bm), 10)
	e.buf = append(b, "\"}\n"...)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(e.buf))}
	w.Write(e.buf)
}

// writeResults writes results that were read into Values (writes, replays).
func writeResults(w http.ResponseWriter, results []sqlconn.Result, bm dbhost.Bookmark, max int) {
	e := getEncoder()
	e.max = max
	defer putEncoder(e)
	for i, res := range results {
		e.begin(i)
		e.Columns(res.Columns)
		e.rowsOf(res.Rows)
		e.end(res)
	}
	e.send(w, bm)
}
