package scenario

import (
	"strings"
	"testing"
)

// hranaAnswer is a pipeline answer shaped as sluice writes it: the execute's
// result (rows, or an error) and the close's.
func hranaAnswer(rows int, execErr, closeErr bool) string {
	var b strings.Builder
	b.WriteString(`{"baton":null,"base_url":null,"results":[`)
	if execErr {
		b.WriteString(`{"type":"error","error":{"message":"no such table: posts","code":"SQLITE_ERROR"}}`)
	} else {
		b.WriteString(`{"type":"ok","response":{"type":"execute","result":{"cols":[{"name":"body","decltype":"TEXT"}],"rows":[`)
		for i := range rows {
			if i > 0 {
				b.WriteByte(',')
			}
			// A text value that spells an error result, escaped as JSON escapes it.
			b.WriteString(`[{"type":"text","value":"a post quoting {\"type\":\"error\"} and a few more words to fill it"}]`)
		}
		b.WriteString(`],"affected_row_count":0,"last_insert_rowid":null,"rows_read":100,"rows_written":0,"query_duration_ms":0.2}}}`)
	}
	if closeErr {
		b.WriteString(`,{"type":"error","error":{"message":"stream {\"type\":\"error\"} closed","code":"STREAM_CLOSED"}}]}`)
	} else {
		b.WriteString(`,{"type":"ok","response":{"type":"close"}}]}`)
	}
	return b.String()
}

func TestHranaCheckFindsAnErrorResultWhereverItIs(t *testing.T) {
	for _, rows := range []int{0, 1, 100, 1000} {
		for _, c := range []struct {
			execErr, closeErr bool
		}{{false, false}, {true, false}, {false, true}, {true, true}} {
			body := hranaAnswer(rows, c.execErr, c.closeErr)
			got := hranaCheck([]byte(body))
			want := ""
			if c.execErr || c.closeErr {
				want = "hrana error"
			}
			if got != want {
				t.Errorf("%d rows, execute error %v, close error %v (%d bytes): check says %q, want %q", rows, c.execErr, c.closeErr, len(body), got, want)
			}
		}
	}
}

func TestHranaCheckFailsAnAnswerItCannotRead(t *testing.T) {
	long := strings.Repeat("x", 2*hranaShortAnswer)
	if hranaCheck([]byte(long)) == "" {
		t.Error("a long answer without results passed the check")
	}
}
