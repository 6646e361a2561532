package forward

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A body read to judge a request on a cold database, then left to the
// handler, reads the same for the handler; one over the body limit gives
// the handler the same prefix and the same *http.MaxBytesError, so its
// answer (413 and its message) is the one it gives without the judging.
func TestReadBodyLeavesTheHandlerTheSameBody(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/databases/a/query", strings.NewReader(`{"sql": "SELECT 1"}`))
	body, err := readBody(r)
	if err != nil || string(body) != `{"sql": "SELECT 1"}` {
		t.Fatalf("readBody: %q, %v", body, err)
	}
	if again, err := io.ReadAll(r.Body); err != nil || string(again) != string(body) {
		t.Fatalf("the handler reads %q, %v; want the same body", again, err)
	}

	big := httptest.NewRequest(http.MethodPost, "/v1/databases/a/query", strings.NewReader(strings.Repeat("x", 100)))
	big.Body = http.MaxBytesReader(httptest.NewRecorder(), big.Body, 10)
	if _, err := readBody(big); err == nil {
		t.Fatal("readBody of a body over its limit: no error")
	}
	again, err := io.ReadAll(big.Body)
	var tooBig *http.MaxBytesError
	if !errors.As(err, &tooBig) || tooBig.Limit != 10 || string(again) != strings.Repeat("x", 10) {
		t.Fatalf("the handler reads %q, %v; want the 10 bytes within the limit, then *http.MaxBytesError", again, err)
	}
}
