package proto

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/sluicedb/sluice/internal/jsonscan"
)

// Bodies as libSQL's clients and ORMs send them, and variations the scanner
// must either read exactly as encoding/json does or hand to it.
var pipelineBodies = []string{
	`{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT * FROM posts ORDER BY id DESC LIMIT 100","args":[]}},{"type":"close"}]}`,
	`{"baton":"abc.def","requests":[{"type":"execute","stmt":{"sql":"INSERT INTO t VALUES (?, ?, ?)","args":[{"type":"integer","value":"42"},{"type":"text","value":"héllo wörld"},{"type":"null"}],"named_args":[],"want_rows":true}}]}`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT :a, @b","named_args":[{"name":":a","value":{"type":"integer","value":-9223372036854775808}},{"name":"@b","value":{"type":"text","value":""}}],"want_rows":false}},{"type":"close"}]}`,
	` { "requests" : [ { "type" : "execute" , "stmt" : { "sql" : "SELECT 1" , "args" : null , "named_args" : null , "want_rows" : null } } ] } ` + "\n",
	`{"baton":null,"requests":[]}`,
	`{"baton":null,"requests":null}`,
	`{"requests":[{"type":"sequence","sql":"BEGIN; SELECT 1; COMMIT"},{"type":"get_autocommit"},{"type":"close"}]}`,
	`{"requests":[{"type":"execute","stmt":null},{"type":"execute","stmt":{"sql":null}}]}`,
	`{"requests":[{"type":"batch","batch":{"steps":[{"stmt":{"sql":"SELECT 1"}},{"condition":{"type":"ok","step":0},"stmt":{"sql":"SELECT 2"}}]}}]}`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT ?","args":[{"type":"float","value":1.5}]}}]}`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT ?","args":[{"type":"blob","base64":"AAEC"}]}}]}`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT ?","args":[{"type":"integer","value":"007"}]}}]}`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT ?","args":[{"type":"text","value":"a \"quoted\" word\n"}]}}]}`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT ?","args":[{"value":"x","type":"text"}]}}]}`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT 1","sql":"SELECT 2"}}]}`,
	`{"Requests":[{"Type":"execute","Stmt":{"SQL":"SELECT 1"}}]}`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT 1"}}]} trailing`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT 1","sql_id":3}}]}`,
	`{"requests":[{"type":"store_sql","sql_id":1,"sql":"SELECT 1"}]}`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT ?","args":[{"type":"integer","value":"99999999999999999999"}]}}]}`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT ?","args":[{"type":"integer","value":"12"},{"type":"null","value":null}]}}]}`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT ?, ?","args":[{"type":"integer","value":"42 "},{"type":"integer","value":" 42"}]}}]}`,
	`{"requests":[{"type":"execute","stmt":{"sql":"SELECT ?","args":[{"type":"integer","value": "-7" },{"type":"integer" , "value" : 8 }]}}]}`,
	`null`,
	``,
}

// agrees decodes body both ways. When the scanner accepts it, encoding/json
// must accept it too and produce the same request.
func agrees(t testing.TB, body []byte) (scanned bool) {
	var fast PipelineRequest
	if !(&pipelineScanner{Scanner: jsonscan.Scanner{B: body}}).request(&fast) {
		return false
	}
	var slow PipelineRequest
	if err := json.Unmarshal(body, &slow); err != nil {
		t.Fatalf("the scanner read %q, encoding/json refuses it: %v", body, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q: the scanner read %+v, encoding/json %+v", body, fast, slow)
	}
	return true
}

func TestPipelineScannerReadsClientBodiesAsEncodingJSONDoes(t *testing.T) {
	scanned := 0
	for _, b := range pipelineBodies {
		if agrees(t, []byte(b)) {
			scanned++
		}
		// DecodePipelineRequest answers what encoding/json answers, whichever path reads it.
		var got, want PipelineRequest
		gotErr, wantErr := DecodePipelineRequest([]byte(b), &got), json.Unmarshal([]byte(b), &want)
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: DecodePipelineRequest gave %+v, %v; encoding/json %+v, %v", b, got, gotErr, want, wantErr)
		}
	}
	// The first five are the client shapes the scanner exists for.
	if scanned < 5 {
		t.Errorf("the scanner read %d of the bodies, want at least the 5 client shapes", scanned)
	}
}

// Mutated bodies: whatever the scanner accepts, encoding/json reads the same.
func TestPipelineScannerNeverDisagreesOnMutatedBodies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("{}[]:,\" \t\n\\-0123456789aenrsltuxyp.\x00\x1f\xc3\xa9\xff")
	scanned, total := 0, 0
	for _, seed := range pipelineBodies {
		for range 4000 {
			b := []byte(seed)
			for range 1 + rng.IntN(3) {
				switch op := rng.IntN(4); {
				case len(b) == 0 || op == 0:
					b = append(b, alphabet[rng.IntN(len(alphabet))])
				case op == 1:
					i := rng.IntN(len(b))
					b = append(b[:i:i], b[i+1:]...)
				case op == 2:
					b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
				default:
					i := rng.IntN(len(b) + 1)
					b = append(b[:i:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
				}
			}
			total++
			if agrees(t, b) {
				scanned++
			}
		}
	}
	// Some mutations keep the body in the scanner's shape (a changed letter
	// in the SQL, a digit in an integer, white space): enough of them must
	// have been read by the scanner for the comparison to mean something.
	if scanned < 1000 {
		t.Errorf("the scanner read %d of %d mutated bodies; the comparison exercised too little", scanned, total)
	}
}

func FuzzPipelineScanner(f *testing.F) {
	for _, b := range pipelineBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) { agrees(t, body) })
}

// A body with more requests than the caller allows is given up as soon as
// the scanner passes the limit; one at the limit decodes as before.
func TestDecodeStopsPastMaxRequests(t *testing.T) {
	body := []byte(`{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT 1"}},{"type":"execute","stmt":{"sql":"SELECT 2"}},{"type":"close"}]}`)
	var p PipelineRequest
	if tooMany, err := DecodePipelineRequestAtMost(body, &p, 2); !tooMany || err != nil || len(p.Requests) != 0 {
		t.Fatalf("3 requests, at most 2: tooMany %v, err %v, %d decoded", tooMany, err, len(p.Requests))
	}
	if tooMany, err := DecodePipelineRequestAtMost(body, &p, 3); tooMany || err != nil || len(p.Requests) != 3 {
		t.Fatalf("3 requests, at most 3: tooMany %v, err %v, %d decoded", tooMany, err, len(p.Requests))
	}
}
