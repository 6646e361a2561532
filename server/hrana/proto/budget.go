package proto

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/sluicedb/sluice/internal/largeturn"
	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// Budget is what one request's answer may hold (limits.max-response-bytes):
// every statement's rows are charged to it as SQLite steps them, all the
// statements of a pipeline or batch to the same one. The row that would
// pass it stops its statement, which fails SQLITE_TOOBIG naming the limit;
// nothing more of its rows is kept, so a request never holds more than the
// cap however many rows it asks for. A nil *Budget has no cap.
type Budget struct {
	max  int // the limit as configured (the error names it)
	room int // what rows and results may take: max less the answer's frame
	used int
	// Measure is a value's size in the answer's encoding (hranapb.ValueSize
	// for protobuf); nil: its JSON size.
	Measure func(sqlconn.Value) int
	// RowOverhead is what a row costs around its values: a JSON array and
	// its comma (the default), a cursor entry line, a protobuf message.
	RowOverhead int
	// Wait, when set, is the context in which a statement whose rows take
	// the answer past largeturn.Size waits for a turn to build it (shared
	// with the JSON API), kept until Built.
	Wait context.Context
	turn bool
}

// Built gives back the turn a statement took to build a large answer: its
// rows are encoded (writing them costs the CPU little).
func (b *Budget) Built() {
	if b == nil {
		return
	}
	b.Wait = nil // set per statement: no turn is taken outside one
	if b.turn {
		b.turn = false
		largeturn.Give()
	}
}

// answerFrame is kept out of the rows' room for what surrounds them (the
// baton, the results' brackets), so that an answer within its budget is
// within the limit too.
const answerFrame = 1 << 10

// NewBudget returns a budget of max bytes, or nil (no cap) when max <= 0.
func NewBudget(max int) *Budget {
	if max <= 0 {
		return nil
	}
	return &Budget{max: max, room: max - min(answerFrame, max/4), RowOverhead: 3}
}

// Used is what the answer holds so far.
func (b *Budget) Used() int {
	if b == nil {
		return 0
	}
	return b.used
}

// Rewind gives back everything charged since Used returned mark: work that
// runs again (a batch moved from a read to a write connection) starts over.
func (b *Budget) Rewind(mark int) {
	if b != nil && b.used > mark {
		b.used = mark
	}
}

// charge adds n bytes and reports whether the answer still fits.
func (b *Budget) charge(n int) bool {
	if b == nil {
		return true
	}
	b.used += n
	if b.Wait != nil && !b.turn && b.used > largeturn.Size {
		b.turn = largeturn.Take(b.Wait)
	}
	return b.used <= b.room
}

// refund takes back n bytes charged for rows that were dropped.
func (b *Budget) refund(n int) {
	if b != nil {
		b.used = max(0, b.used-n)
	}
}

// ChargeResult charges what a statement's result holds besides its rows
// (columns, counts); it never fails a statement that already ran, but
// leaves less room for the rows of the next.
func (b *Budget) ChargeResult(cols int) { b.charge(256 + 64*cols) }

// ChargeRows charges rows a connection collected itself (one that does not
// stream them through a RowWriter) and reports whether they fit.
func (b *Budget) ChargeRows(rows [][]sqlconn.Value) bool {
	if b == nil {
		return true
	}
	for _, row := range rows {
		n := b.RowOverhead
		for _, v := range row {
			n += b.valueSize(v)
		}
		if !b.charge(n) {
			return false
		}
	}
	return true
}

func (b *Budget) valueSize(v sqlconn.Value) int {
	if b.Measure != nil {
		return b.Measure(v)
	}
	return jsonValueSize(v)
}

// TooBig is the error of the statement whose rows passed the budget.
func (b *Budget) TooBig() *dberr.Error {
	return dberr.New(dberr.CodeTooBig, fmt.Sprintf("the answer is larger than the server's limit of %s "+
		"(limits.max-response-bytes), counting every statement of the request; this statement was stopped and none of its rows are returned: "+
		"select fewer rows or columns, or page with LIMIT and a WHERE on the last key", units.FormatSize(int64(b.max))))
}

// jsonValueSize is about the length of appendValue's encoding of v (text
// counted unescaped), computed without encoding it.
func jsonValueSize(v sqlconn.Value) int {
	switch v.Type {
	case sqlconn.Integer:
		return 29 + len(strconv.FormatInt(v.Int, 10))
	case sqlconn.Float:
		return 50
	case sqlconn.Text:
		return 26 + len(v.Text)
	case sqlconn.Blob:
		return 28 + base64.RawStdEncoding.EncodedLen(len(v.Blob))
	}
	return 15
}

// RowsCollector keeps a statement's rows as Values (for the answers encoded
// after the request ran: protobuf, WebSocket, cursors) and charges each to
// the budget as SQLite steps it. Past the budget it drops what it holds and
// calls Stop (which interrupts the statement).
type RowsCollector struct {
	Budget  *Budget
	Stop    func()
	rows    [][]Value
	charged int
	started bool
	tooBig  bool
}

// Columns starts the rows over (a statement run again starts from scratch).
func (c *RowsCollector) Columns([]sqlconn.Column) {
	c.Budget.refund(c.charged)
	c.rows, c.charged, c.started, c.tooBig = nil, 0, true, false
}

// Row keeps the row SQLite is on, unless the budget is spent.
func (c *RowsCollector) Row(r *sqlconn.Row) {
	if c.tooBig {
		return
	}
	row := make([]Value, r.Len())
	n := 0
	if c.Budget != nil {
		n = c.Budget.RowOverhead
	}
	for i := range row {
		v := r.Value(i)
		row[i] = Value(v)
		if c.Budget != nil {
			n += c.Budget.valueSize(v)
		}
	}
	c.charged += n
	if !c.Budget.charge(n) {
		c.drop()
		return
	}
	c.rows = append(c.rows, row)
}

func (c *RowsCollector) drop() {
	c.Budget.refund(c.charged)
	c.rows, c.charged, c.tooBig = nil, 0, true
	if c.Stop != nil {
		c.Stop()
	}
}

// Collected returns the rows, and false when the Conn did not stream (it
// filled Result.Rows instead).
func (c *RowsCollector) Collected() ([][]Value, bool) { return c.rows, c.started }

// TooBig reports whether the rows passed the budget (and were dropped).
func (c *RowsCollector) TooBig() bool { return c.tooBig }
