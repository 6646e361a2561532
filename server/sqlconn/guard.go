package sqlconn

import (
	"strings"

	"zombiezen.com/go/sqlite"
)

// guard is the authorizer installed on every connection. It refuses whatever
// could reach files outside the database (ATTACH, VACUUM INTO, file pragmas)
// or change the connection's durability settings, and, on connections that
// several clients share, whatever would change the connection for the next
// client: connection-state pragmas and TEMP objects. Those statements need a
// connection of the client's own (needsOwn tells the caller).
type guard struct {
	shared   bool // pooled reader or group writer: connection state is not the client's
	readOnly bool // query_only connection: keep it so
	noTx     bool // the group writer: requests run inside the group's transaction
	allowTx  bool // set while the writer itself runs BEGIN/COMMIT/ROLLBACK
	reason   string
	needsOwn bool // the refusal is only because the connection is shared
	internal bool // sluice itself runs a statement (ALTER COLUMN's schema edit): allow it
}

// reset forgets the previous statement's refusal.
func (g *guard) reset() { g.reason, g.needsOwn = "", false }

func (g *guard) Authorize(a sqlite.Action) sqlite.AuthResult {
	if g.internal {
		return sqlite.AuthResultOK
	}
	// VACUUM INTO and ATTACH work on a schema other than main/temp; deny
	// every action on such a schema, whatever statement produced it.
	switch db := a.Database(); db {
	case "", "main", "temp":
	default:
		g.reason = "access to a schema other than main (VACUUM INTO, attached files) is refused"
		return sqlite.AuthResultDeny
	}
	switch a.Type() {
	case sqlite.OpAttach, sqlite.OpDetach:
		g.reason = "ATTACH and DETACH are refused"
		return sqlite.AuthResultDeny
	case sqlite.OpTransaction:
		if g.noTx && !g.allowTx {
			g.reason = "BEGIN/COMMIT/ROLLBACK are refused here: each request already runs in its own transaction (use a batch, or an interactive session)"
			return sqlite.AuthResultDeny
		}
	case sqlite.OpPragma:
		return g.pragma(strings.ToLower(a.Pragma()), a.PragmaArg())
	case sqlite.OpCreateTempIndex, sqlite.OpCreateTempTable, sqlite.OpCreateTempTrigger, sqlite.OpCreateTempView,
		sqlite.OpDropTempIndex, sqlite.OpDropTempTable, sqlite.OpDropTempTrigger, sqlite.OpDropTempView:
		return g.temp()
	case sqlite.OpInsert, sqlite.OpUpdate, sqlite.OpDelete, sqlite.OpAlterTable,
		sqlite.OpCreateIndex, sqlite.OpCreateTable, sqlite.OpCreateTrigger, sqlite.OpCreateView,
		sqlite.OpDropIndex, sqlite.OpDropTable, sqlite.OpDropTrigger, sqlite.OpDropView:
		if a.Database() == "temp" {
			return g.temp()
		}
	}
	return sqlite.AuthResultOK
}

// temp allows TEMP objects only on a connection of the client's own: on a
// shared one they would outlive the request and act on other clients'
// statements (a TEMP trigger on a main table fires for everyone).
func (g *guard) temp() sqlite.AuthResult {
	if g.shared {
		g.reason, g.needsOwn = "TEMP tables, views and triggers belong to the connection that made them", true
		return sqlite.AuthResultDeny
	}
	return sqlite.AuthResultOK
}

func (g *guard) pragma(name, arg string) sqlite.AuthResult {
	kind, ok := pragmaKinds[name]
	if !ok {
		g.reason = "PRAGMA " + name + " is not available through the server"
		return sqlite.AuthResultDeny
	}
	if arg == "" {
		return sqlite.AuthResultOK // every known pragma may be read
	}
	switch kind {
	case pragmaState:
		if g.readOnly && name == "query_only" {
			g.reason = "PRAGMA query_only cannot be changed with read-only access"
			return sqlite.AuthResultDeny
		}
		if g.shared && changesSharedState(name, arg) {
			g.reason, g.needsOwn = "PRAGMA "+name+" changes the connection's state", true
			return sqlite.AuthResultDeny
		}
	case pragmaIgnored:
		return sqlite.AuthResultIgnore // SQLite then runs the pragma as a no-op
	case pragmaOwned:
		g.reason = "PRAGMA " + name + " is set by the server (its durability depends on it) and cannot be changed; reading it works"
		return sqlite.AuthResultDeny
	}
	return sqlite.AuthResultOK
}
