package hrana

import (
	"slices"
	"testing"
)

// InspectRead judges a request from its path and body alone: what a new
// stream would run, and whether that leaves anything for the writer.
func TestInspectReadJudgesRequestsBeforeTheyRun(t *testing.T) {
	for _, c := range []struct {
		name, path, body string
		replica          bool
		stmts            []string
		index            uint64
	}{
		{"one-shot execute", "/v2/pipeline", `{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT 1"}},{"type":"close"}]}`,
			true, []string{"SELECT 1"}, 0},
		{"under /db/<name>, with a replication index", "/db/x/v3/pipeline",
			`{"requests":[{"type":"execute","stmt":{"sql":"SELECT 1","replication_index":"7"}},{"type":"batch","batch":{"steps":[],"replication_index":"9"}},{"type":"close"}]}`,
			true, []string{"SELECT 1"}, 9},
		{"stored SQL, sequence and describe", "/v2/pipeline",
			`{"requests":[{"type":"store_sql","sql":"SELECT 2","sql_id":1},{"type":"execute","stmt":{"sql_id":1}},{"type":"sequence","sql":"SELECT 3; SELECT 4"},{"type":"describe","sql":"PRAGMA x"},{"type":"close"}]}`,
			true, []string{"SELECT 2", "SELECT 3", "SELECT 4"}, 0},
		{"transaction inside one batch", "/v2/pipeline",
			`{"requests":[{"type":"batch","batch":{"steps":[{"stmt":{"sql":"BEGIN"}},{"stmt":{"sql":"SELECT 1"}},{"stmt":{"sql":"COMMIT"}}]}},{"type":"close"}]}`,
			true, []string{"SELECT 1"}, 0},
		{"v1 execute", "/v1/execute", `{"stmt":{"sql":"SELECT 1"}}`, true, []string{"SELECT 1"}, 0},
		{"malformed: answered wherever it lands", "/v2/pipeline", `{"requests":`, true, nil, 0},
		{"a baton continues a stream", "/v2/pipeline", `{"baton":"b","requests":[{"type":"close"}]}`, false, nil, 0},
		{"no close leaves the stream open", "/v2/pipeline", `{"requests":[{"type":"execute","stmt":{"sql":"SELECT 1"}}]}`, false, nil, 0},
		{"BEGIN alone needs a session", "/v2/pipeline",
			`{"requests":[{"type":"execute","stmt":{"sql":"BEGIN"}},{"type":"close"}]}`, false, nil, 0},
		{"BEGIN READONLY needs a session", "/v1/batch",
			`{"batch":{"steps":[{"stmt":{"sql":"BEGIN TRANSACTION READONLY"}},{"stmt":{"sql":"COMMIT"}}]}}`, false, nil, 0},
		{"a cursor", "/v3/cursor", `{"baton":null,"batch":{"steps":[]}}`, false, nil, 0},
	} {
		got := InspectRead(c.path, []byte(c.body))
		if got.Replica != c.replica || !slices.Equal(got.Statements, c.stmts) || uint64(got.ReplicationIndex) != c.index {
			t.Errorf("%s: got %+v, want replica %v, statements %q, index %d", c.name, got, c.replica, c.stmts, c.index)
		}
	}
}
