package jsonapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/internal/jsonstr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// decodeValue turns one JSON parameter into an SQLite value: numbers
// without a fraction or exponent are int64 (exact beyond 2^53, never
// through float64), other numbers float64, strings text, booleans 0/1,
// null NULL and {"base64": "..."} a blob.
func decodeValue(v any) (sqlconn.Value, error) {
	switch x := v.(type) {
	case nil:
		return sqlconn.Value{Type: sqlconn.Null}, nil
	case bool:
		if x {
			return sqlconn.Value{Type: sqlconn.Integer, Int: 1}, nil
		}
		return sqlconn.Value{Type: sqlconn.Integer}, nil
	case string:
		return sqlconn.Value{Type: sqlconn.Text, Text: x}, nil
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return sqlconn.Value{}, fmt.Errorf("integer %s does not fit in 64 bits", s)
			}
			return sqlconn.Value{Type: sqlconn.Integer, Int: i}, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return sqlconn.Value{}, fmt.Errorf("number %s: %v", s, err)
		}
		return sqlconn.Value{Type: sqlconn.Float, Float: f}, nil
	case map[string]any:
		b64, ok := x["base64"].(string)
		if !ok || len(x) != 1 {
			return sqlconn.Value{}, fmt.Errorf(`objects as values must be {"base64": "..."} (a blob)`)
		}
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			if b, err = base64.RawStdEncoding.DecodeString(b64); err != nil {
				return sqlconn.Value{}, fmt.Errorf("blob is not valid base64: %v", err)
			}
		}
		return sqlconn.Value{Type: sqlconn.Blob, Blob: b}, nil
	}
	return sqlconn.Value{}, fmt.Errorf("unsupported parameter value %v (arrays are not values)", v)
}

// appendValue appends v's JSON: integers as exact JSON numbers, floats
// always with a fraction or exponent so clients can tell them from
// integers, blobs as {"base64": "..."}.
func appendValue(b []byte, v sqlconn.Value) []byte {
	switch v.Type {
	case sqlconn.Integer:
		return strconv.AppendInt(b, v.Int, 10)
	case sqlconn.Float:
		return appendFloat(b, v.Float)
	case sqlconn.Text:
		return jsonstr.Append(b, v.Text)
	case sqlconn.Blob:
		return appendBlob(b, v.Blob)
	}
	return append(b, "null"...)
}

// appendRowValue is appendValue for column i of a row being stepped.
func appendRowValue(b []byte, r *sqlconn.Row, i int) []byte {
	switch r.Type(i) {
	case sqlconn.Integer:
		return strconv.AppendInt(b, r.Int(i), 10)
	case sqlconn.Float:
		return appendFloat(b, r.Float(i))
	case sqlconn.Text:
		return jsonstr.AppendBytes(b, r.Bytes(i))
	case sqlconn.Blob:
		return appendBlob(b, r.Bytes(i))
	}
	return append(b, "null"...)
}

func appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	case math.IsNaN(f):
		return append(b, "null"...)
	}
	n := len(b)
	b = strconv.AppendFloat(b, f, 'g', -1, 64)
	for _, c := range b[n:] {
		if c == '.' || c == 'e' || c == 'E' {
			return b
		}
	}
	return append(b, ".0"...)
}

func appendBlob(b, blob []byte) []byte {
	b = append(b, `{"base64":"`...)
	b = base64.StdEncoding.AppendEncode(b, blob)
	return append(b, `"}`...)
}
