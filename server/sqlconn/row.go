package sqlconn

import "zombiezen.com/go/sqlite"

// Row is the row a statement is on, handed to a RowWriter. It is valid only
// during RowWriter.Row; Bytes' slice only until the next call to Bytes.
type Row struct {
	s       *sqlite.Stmt
	n       int
	scratch []byte
}

// Len is the number of columns.
func (r *Row) Len() int { return r.n }

// Type is column i's storage class in this row.
func (r *Row) Type(i int) ValueType {
	switch r.s.ColumnType(i) {
	case sqlite.TypeInteger:
		return Integer
	case sqlite.TypeFloat:
		return Float
	case sqlite.TypeText:
		return Text
	case sqlite.TypeBlob:
		return Blob
	}
	return Null
}

// Int is column i as an integer.
func (r *Row) Int(i int) int64 { return r.s.ColumnInt64(i) }

// Float is column i as a float.
func (r *Row) Float(i int) float64 { return r.s.ColumnFloat(i) }

// Bytes is column i's text or blob, in a buffer the row reuses.
func (r *Row) Bytes(i int) []byte {
	n := r.s.ColumnLen(i)
	if cap(r.scratch) < n {
		r.scratch = make([]byte, n, max(n, 2*cap(r.scratch)))
	}
	r.scratch = r.scratch[:n]
	return r.scratch[:r.s.ColumnBytes(i, r.scratch)]
}

// Value is column i as a Value (copying text and blobs).
func (r *Row) Value(i int) Value {
	switch r.Type(i) {
	case Integer:
		return Value{Type: Integer, Int: r.Int(i)}
	case Float:
		return Value{Type: Float, Float: r.Float(i)}
	case Text:
		return Value{Type: Text, Text: string(r.Bytes(i))}
	case Blob:
		return Value{Type: Blob, Blob: append([]byte{}, r.Bytes(i)...)}
	}
	return Value{Type: Null}
}
