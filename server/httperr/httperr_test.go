package httperr

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/sluicedb/sluice/server/dberr"
)

// Every code answers with the status clients have always seen for it.
func TestStatusOfEveryCode(t *testing.T) {
	for code, want := range map[string]int{
		dberr.CodeBadRequest: 400, dberr.CodeBadName: 400, dberr.CodeArgsInvalid: 400,
		dberr.CodeNeedsOwnConnection: 400, dberr.CodeUnauthorized: 401, dberr.CodeForbidden: 403,
		dberr.CodeNotFound: 404, dberr.CodeTimeout: 408, dberr.CodeExists: 409, dberr.CodeTooLarge: 413,
		dberr.CodeKeyReused: 422, dberr.CodeInternal: 500, dberr.CodeNotDurable: 500,
		dberr.CodeUnavailable: 503, dberr.CodeNotLeader: 503, dberr.CodeLagging: 503,
		"SQLITE_ERROR": 400, "SQLITE_RANGE": 400, "SQLITE_CONSTRAINT": 409, "SQLITE_CONSTRAINT_UNIQUE": 409,
		"SQLITE_BUSY": 503, "SQLITE_BUSY_SNAPSHOT": 503, "SQLITE_LOCKED": 503, "SQLITE_READONLY": 403,
		"SQLITE_READONLY_DBMOVED": 403, "SQLITE_IOERR_READ": 500, "SQLITE_CORRUPT": 500, "SQLITE_FULL": 500,
		"SQLITE_NOMEM": 500, "SQLITE_CANTOPEN": 500, "SQLITE_INTERNAL": 500, "SOMETHING_ELSE": 400,
	} {
		if got := Status(dberr.New(code, "m")); got != want {
			t.Errorf("%s: status %d, want %d", code, got, want)
		}
	}
}

// Wrapped errors keep their code; errors without one are internal; an edge
// handler's own status wins.
func TestStatusCodeMessageThroughWrapping(t *testing.T) {
	inner := dberr.New(dberr.CodeNotDurable, "committed locally")
	wrapped := fmt.Errorf("write: %w", inner)
	if Status(wrapped) != 500 || Code(wrapped) != dberr.CodeNotDurable || Message(wrapped) != "committed locally" {
		t.Fatalf("wrapped: %d %s %q", Status(wrapped), Code(wrapped), Message(wrapped))
	}
	plain := errors.New("boom")
	if Status(plain) != 500 || Code(plain) != dberr.CodeInternal || Message(plain) != "boom" {
		t.Fatalf("plain: %d %s %q", Status(plain), Code(plain), Message(plain))
	}
	gw := WithStatus(http.StatusBadGateway, dberr.New(dberr.CodeUnavailable, "forwarding failed"))
	if Status(gw) != 502 || Code(gw) != dberr.CodeUnavailable || !errors.Is(gw, dberr.ErrUnavailable) {
		t.Fatalf("with status: %d %s", Status(gw), Code(gw))
	}
	h := http.Header{}
	SetRetryAfter(h, Status(dberr.New(dberr.CodeLagging, "behind")))
	if h.Get("Retry-After") != "1" {
		t.Fatal("503 without Retry-After")
	}
	h = http.Header{}
	if SetRetryAfter(h, Status(inner)); h.Get("Retry-After") != "" {
		t.Fatal("a write committed but not durable must not invite a retry")
	}
}

// Hrana's v1 endpoints answer what the client caused with 400, as sqld does.
func TestV1StatementStatus(t *testing.T) {
	for code, want := range map[string]int{
		dberr.CodeUnavailable: 503, dberr.CodeInternalError: 500, dberr.CodeNotDurable: 500,
		dberr.CodeKeyReused: 422, dberr.CodeTimeout: 408, dberr.CodeTransactionTimeout: 408,
		dberr.CodeRequestTimeout: 408, dberr.CodeForbidden: 403, dberr.CodeNotFound: 404,
		"SQLITE_CONSTRAINT_UNIQUE": 400, "SQLITE_BUSY": 400, dberr.CodeExists: 400,
	} {
		if got := V1StatementStatus(code); got != want {
			t.Errorf("%s: %d, want %d", code, got, want)
		}
	}
}
