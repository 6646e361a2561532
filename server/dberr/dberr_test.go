package dberr

import (
	"errors"
	"fmt"
	"testing"
)

// An *Error matches the sentinel of its code, through wrapping, and only it.
func TestErrorMatchesItsSentinel(t *testing.T) {
	err := fmt.Errorf("ctx: %w", ForDatabase(CodeNotFound, "d", "database \"d\" does not exist"))
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrExists) {
		t.Fatal("NOT_FOUND does not match ErrNotFound alone")
	}
	if e := As(err); e == nil || e.Name != "d" || e.Code != CodeNotFound {
		t.Fatalf("As: %+v", e)
	}
	if !errors.Is(New("SQLITE_READONLY_DBMOVED", "m"), ErrReadOnly) || errors.Is(New(CodeSQLiteError, "m"), ErrReadOnly) {
		t.Fatal("ErrReadOnly must match every SQLITE_READONLY code and nothing else")
	}
	cause := errors.New("disk")
	if e := (&Error{Code: CodeInternal, Message: "m", Err: cause}); !errors.Is(e, cause) || !errors.Is(e, ErrInternal) {
		t.Fatal("an Error unwraps to its cause and still matches its sentinel")
	}
}
