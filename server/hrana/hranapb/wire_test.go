package hranapb

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/sqlconn"
	"google.golang.org/protobuf/encoding/protowire"
)

// Nested messages longer than 127 and 16383 bytes get their length widened
// in place; the encoding must still parse field by field.
func TestProtobufLongNestedMessages(t *testing.T) {
	for _, n := range []int{0, 127, 128, 16383, 16384, 3 << 20} {
		text, col := strings.Repeat("x", n), "c"
		res := &proto.StmtResult{Cols: []proto.Col{{Name: &col}}, Rows: [][]proto.Value{{{Type: sqlconn.Text, Text: text}}}}
		out, err := EncodePipelineResponse(&proto.PipelineResponse{Results: []proto.StreamResult{{Type: "ok", Response: map[string]any{"type": "execute", "result": res}}}})
		if err != nil {
			t.Fatal(err)
		}
		// PipelineRespBody.results[0].ok.execute.result.rows[0].values[0].text
		got, found := "", false
		path := []protowire.Number{3, 1, 2, 1, 2, 1, 4}
		var walk func(b []byte, depth int) error
		walk = func(b []byte, depth int) error {
			return pbEach(b, func(f pbField) error {
				if f.num != path[depth] {
					return nil
				}
				if depth == len(path)-1 {
					got, found = string(f.raw), true
					return nil
				}
				return walk(f.raw, depth+1)
			})
		}
		if err := walk(out, 0); err != nil {
			t.Fatalf("text of %d bytes: %v", n, err)
		}
		if !found || got != text {
			t.Fatalf("text of %d bytes: found %v, %d bytes back", n, found, len(got))
		}
	}
}

// Malformed protobuf bodies are errors, never panics; deep condition nesting
// is refused before it can exhaust the stack.
func TestProtobufMalformedInput(t *testing.T) {
	w := &pbWriter{}
	deep := func(w *pbWriter) { w.varint(1, 0) }
	for range 10000 {
		inner := deep
		deep = func(w *pbWriter) { w.message(3, inner) }
	}
	w.message(2, func(w *pbWriter) { // requests[0]
		w.message(3, func(w *pbWriter) { // batch
			w.message(1, func(w *pbWriter) { // batch.batch
				w.message(1, func(w *pbWriter) { // steps[0]
					w.message(1, deep)
					w.message(2, func(w *pbWriter) { w.str(1, "SELECT 1") })
				})
			})
		})
	})
	if _, err := DecodePipelineRequest(w.b); err == nil || !strings.Contains(err.Error(), "nest deeper") {
		t.Fatalf("deep conditions: %v", err)
	}
	valid := &pbWriter{}
	valid.str(1, "baton")
	valid.message(2, func(w *pbWriter) {
		w.message(2, func(w *pbWriter) {
			w.message(1, func(w *pbWriter) {
				w.str(1, "SELECT ?")
				w.message(3, func(w *pbWriter) { w.sint64(2, -5) })
				w.boolean(5, true)
			})
		})
	})
	body, err := DecodePipelineRequest(valid.b)
	if err != nil || len(body.Requests) != 1 || body.Requests[0].Type != "execute" || body.Requests[0].Stmt.Args[0].Int != -5 {
		t.Fatalf("valid body: %+v %v", body, err)
	}
	for _, bad := range [][]byte{{0xff}, {0x0a, 0x05, 'a'}, {0x12, 0x02, 0x12, 0x09}, {0x08}} {
		if _, err := DecodePipelineRequest(bad); err == nil {
			t.Errorf("% x decoded without an error", bad)
		}
	}
	rng := rand.New(rand.NewSource(1))
	for range 20000 {
		b := append([]byte{}, valid.b...)
		for range 1 + rng.Intn(4) {
			b[rng.Intn(len(b))] = byte(rng.Intn(256))
		}
		_, _ = DecodePipelineRequest(b[:rng.Intn(len(b)+1)])
		_, _ = DecodeCursorRequest(b)
	}
}
