package sqlconn

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/server/dberr"
	"zombiezen.com/go/sqlite"
)

func needsOwnConnection(why string) *dberr.Error {
	return dberr.New(dberr.CodeNeedsOwnConnection, why+
		": it runs only on a connection of the client's own (a Hrana stream or a JSON API request gets one when it needs it)")
}

// Translate turns an error of the driver (or the caller's context) into a
// *dberr.Error with SQLite's code name (SQLITE_CONSTRAINT_UNIQUE, ...);
// an error that already carries a code is returned as it is.
func Translate(err error) error { return sqlError(err, false) }

// sqlError turns an error from zombiezen into a *dberr.Error with SQLite's
// code name (SQLITE_CONSTRAINT_UNIQUE, ...). timedOut
// says whether the statement deadline (not the caller) fired.
func sqlError(err error, timedOut bool) error {
	return sqlErrorWhy(err, timedOut, "")
}

// sqlErrorWhy is sqlError with the guard's reason for a refused statement.
func sqlErrorWhy(err error, timedOut bool, why string) error {
	if err == nil {
		return nil
	}
	if e := dberr.As(err); e != nil {
		return e
	}
	code := sqlite.ErrCode(err)
	msg := sqliteMessage(err.Error(), code)
	switch {
	case code == sqlite.ResultInterrupt && timedOut:
		return dberr.New(dberr.CodeTimeout,
			"statement interrupted: it ran longer than the server's statement time limit")
	case code == sqlite.ResultInterrupt || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return dberr.New(dberr.CodeTimeout, "statement interrupted: the request was cancelled or timed out")
	case strings.HasSuffix(msg, "not authorized") && code.ToPrimary() == sqlite.ResultError:
		// load_extension() reports this: extension loading is disabled.
		return dberr.New(dberr.CodeForbidden, "statement refused: loading extensions is disabled on this server")
	case code == sqlite.ResultAuth && why != "":
		return dberr.New(dberr.CodeForbidden, "statement refused: "+why)
	case code == sqlite.ResultAuth:
		return dberr.New(dberr.CodeForbidden,
			msg+" (ATTACH, DETACH, VACUUM INTO, load_extension and pragmas outside the safe list are refused)")
	}
	if code == sqlite.ResultTooBig {
		msg = tooBigMessage(msg)
	}
	name := code.String()
	if !strings.HasPrefix(name, dberr.CodeSQLitePrefix) {
		name = dberr.CodeSQLiteError
	}
	return dberr.New(name, msg)
}

// sqliteMessage recovers SQLite's own message (what sqlite3_errmsg says, and
// what a client sees on a local file) from the driver's error text, which
// wraps it as `sqlite: [prepare["SQL"]: ][L:C: ][step: ]<code's generic
// text>: <message>`: clients compare and show SQLite's words, not ours.
func sqliteMessage(text string, code sqlite.ResultCode) string {
	rest := strings.TrimPrefix(text, "sqlite: ")
	if after, ok := strings.CutPrefix(rest, "prepare "); ok {
		if q, err := strconv.QuotedPrefix(after); err == nil {
			rest = strings.TrimPrefix(after[len(q):], ": ")
		}
	}
	rest = strings.TrimPrefix(rest, "prepare: ")
	if i := strings.Index(rest, ": "); i > 0 && isLineCol(rest[:i]) {
		rest = rest[i+2:]
	}
	for _, op := range []string{"step: ", "exec: ", "reset: ", "bind: "} {
		rest = strings.TrimPrefix(rest, op)
	}
	generic := code.Message()
	if m, ok := strings.CutPrefix(rest, generic+": "); ok && m != "" {
		return m
	}
	return rest
}

// isLineCol reports whether s is "line:column", as the driver places
// before a prepare error's message.
func isLineCol(s string) bool {
	l, c, ok := strings.Cut(s, ":")
	_, errL := strconv.Atoi(l)
	_, errC := strconv.Atoi(c)
	return ok && errL == nil && errC == nil
}

// primaryOf maps each extended result code's name to its primary code's
// name (SQLITE_CONSTRAINT_UNIQUE to SQLITE_CONSTRAINT), from SQLite's own
// numbering: an extended code is its primary code plus a multiple of 256.
var primaryOf = func() map[string]string {
	m := map[string]string{}
	for p := 0; p < 256; p++ {
		for k := 1; k < 256; k++ {
			rc := sqlite.ResultCode(p | k<<8)
			if name := rc.String(); strings.HasPrefix(name, dberr.CodeSQLitePrefix) {
				m[name] = rc.ToPrimary().String()
			}
		}
	}
	return m
}()

// PrimaryCode returns the primary result code of SQLite's code name code and
// whether code was an extended one (SQLITE_CONSTRAINT_UNIQUE gives
// SQLITE_CONSTRAINT, true); any other code comes back as it is. sqld answers
// Hrana clients with the primary code, and their applications compare it.
func PrimaryCode(code string) (string, bool) {
	if p, ok := primaryOf[code]; ok {
		return p, true
	}
	return code, false
}
