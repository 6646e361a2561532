package hranapb

import (
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/sqlconn"
	"google.golang.org/protobuf/encoding/protowire"
)

// Pieces of answers written as they are made, and sizes for the answer
// budget (proto.Budget) of the protobuf encoding.

// ValueSize is v's size in a Row of the protobuf encoding: the Value
// message, its tag and its length.
func ValueSize(v sqlconn.Value) int {
	n := 0
	switch v.Type {
	case sqlconn.Integer:
		n = 1 + protowire.SizeVarint(protowire.EncodeZigZag(v.Int))
	case sqlconn.Float:
		n = 1 + 8
	case sqlconn.Text:
		n = 1 + protowire.SizeBytes(len(v.Text))
	case sqlconn.Blob:
		n = 1 + protowire.SizeBytes(len(v.Blob))
	default:
		n = 2
	}
	return 1 + protowire.SizeBytes(n)
}

// RowOverhead is what a row costs around its values: a cursor entry's or
// a result's tag and length.
const RowOverhead = 8

// AppendCursorHead appends a cursor answer's CursorRespBody, prefixed with
// its length as EncodeCursorResponse writes it.
func AppendCursorHead(b []byte, head proto.CursorResponse) []byte {
	msg := &pbWriter{}
	msg.optStr(1, head.Baton)
	msg.optStr(2, head.BaseURL)
	b = protowire.AppendVarint(b, uint64(len(msg.b)))
	return append(b, msg.b...)
}

// AppendCursorEntry appends one CursorEntry, prefixed with its length as
// EncodeCursorResponse writes it. scratch is reused between calls.
func AppendCursorEntry(b []byte, e proto.CursorEntry, scratch *[]byte) []byte {
	msg := &pbWriter{b: (*scratch)[:0]}
	pbCursorEntry(msg, e)
	*scratch = msg.b
	b = protowire.AppendVarint(b, uint64(len(msg.b)))
	return append(b, msg.b...)
}
