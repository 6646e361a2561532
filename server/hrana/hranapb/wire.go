package hranapb

import (
	"fmt"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The wire helpers the message codecs are written with.

// pbField is one decoded field: varint and fixed values in num, length-
// delimited ones in raw.
type pbField struct {
	num protowire.Number
	typ protowire.Type
	val uint64
	raw []byte
}

// maxCondDepth bounds nested batch conditions, so that a small message
// cannot recurse the decoder (or the evaluator) into a stack overflow.
const maxCondDepth = 100

// pbEach calls fn for every field of message b, in order. Unknown fields are
// the caller's to ignore (forward compatibility); groups are skipped.
func pbEach(b []byte, fn func(f pbField) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return pbParseError(n)
		}
		b = b[n:]
		f := pbField{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.val, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			f.val, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			f.val = uint64(v)
		case protowire.BytesType:
			f.raw, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n >= 0 {
				b = b[n:]
				continue
			}
		}
		if n < 0 {
			return pbParseError(n)
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

func pbParseError(n int) error {
	return fmt.Errorf("malformed protobuf: %v", protowire.ParseError(n))
}

// want checks that f has the wire type its field number is declared with.
func (f pbField) want(typ protowire.Type) error {
	if f.typ != typ {
		return fmt.Errorf("protobuf field %d has wire type %d, want %d", f.num, f.typ, typ)
	}
	return nil
}

func (f pbField) str() (string, error) {
	if err := f.want(protowire.BytesType); err != nil {
		return "", err
	}
	if !utf8.Valid(f.raw) {
		return "", fmt.Errorf("protobuf field %d is not valid UTF-8", f.num)
	}
	return string(f.raw), nil
}

func (f pbField) int32() (int32, error) {
	if err := f.want(protowire.VarintType); err != nil {
		return 0, err
	}
	return int32(f.val), nil // proto3 int32: the low 32 bits
}

func (f pbField) uint32() (uint32, error) {
	if err := f.want(protowire.VarintType); err != nil {
		return 0, err
	}
	return uint32(f.val), nil
}

func (f pbField) bool() (bool, error) {
	if err := f.want(protowire.VarintType); err != nil {
		return false, err
	}
	return f.val != 0, nil
}

func (f pbField) message() ([]byte, error) {
	return f.raw, f.want(protowire.BytesType)
}

// pbWriter appends a message.
type pbWriter struct{ b []byte }

func (w *pbWriter) str(num protowire.Number, s string) {
	w.b = protowire.AppendTag(w.b, num, protowire.BytesType)
	w.b = protowire.AppendString(w.b, s)
}

// optStr writes s when it is set (proto3 optional).
func (w *pbWriter) optStr(num protowire.Number, s *string) {
	if s != nil {
		w.str(num, *s)
	}
}

func (w *pbWriter) bytes(num protowire.Number, v []byte) {
	w.b = protowire.AppendTag(w.b, num, protowire.BytesType)
	w.b = protowire.AppendBytes(w.b, v)
}

func (w *pbWriter) varint(num protowire.Number, v uint64) {
	w.b = protowire.AppendTag(w.b, num, protowire.VarintType)
	w.b = protowire.AppendVarint(w.b, v)
}

// uvarint writes a proto3 scalar, skipping the default zero.
func (w *pbWriter) uvarint(num protowire.Number, v uint64) {
	if v != 0 {
		w.varint(num, v)
	}
}

func (w *pbWriter) boolean(num protowire.Number, v bool) {
	if v {
		w.varint(num, 1)
	}
}

func (w *pbWriter) sint64(num protowire.Number, v int64) {
	w.varint(num, protowire.EncodeZigZag(v))
}

func (w *pbWriter) double(num protowire.Number, v float64) {
	w.b = protowire.AppendTag(w.b, num, protowire.Fixed64Type)
	w.b = protowire.AppendFixed64(w.b, math.Float64bits(v))
}

// message writes field num as the message body appends, length-prefixed in
// place (no intermediate buffer per nesting level).
func (w *pbWriter) message(num protowire.Number, body func(w *pbWriter)) {
	w.b = protowire.AppendTag(w.b, num, protowire.BytesType)
	start := len(w.b)
	w.b = append(w.b, 0) // a one-byte length, widened below if need be
	body(w)
	n := len(w.b) - start - 1
	if n < 0x80 {
		w.b[start] = byte(n)
		return
	}
	size := protowire.SizeVarint(uint64(n))
	w.b = append(w.b, make([]byte, size-1)...)
	copy(w.b[start+size:], w.b[start+1:start+1+n])
	protowire.AppendVarint(w.b[:start], uint64(n))
}
