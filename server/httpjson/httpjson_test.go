package httpjson

import (
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWriteAnswersOneJSONLine(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := Write(rec, http.StatusCreated, map[string]string{"name": "a"}); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusCreated || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != "{\"name\":\"a\"}\n" {
		t.Fatalf("status %d, Content-Type %q, body %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
}

// A value JSON cannot carry leaves the answer untouched for the caller's
// own error.
func TestWriteLeavesTheAnswerAloneWhenEncodingFails(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := Write(rec, http.StatusOK, math.Inf(1)); err == nil {
		t.Fatal("an infinity encoded without error")
	}
	if rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
		t.Fatalf("wrote %q with Content-Type %q", rec.Body.String(), rec.Header().Get("Content-Type"))
	}
}
