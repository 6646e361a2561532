package dbhost

import (
	"strings"

	"zombiezen.com/go/sqlite"
)

// guard is the authorizer installed on every connection. It refuses whatever
// could reach files outside the database (ATTACH, VACUUM INTO, file pragmas)
// or change the connection's durability settings, and records whether the
// statement being prepared writes, so Describe can report ReadOnly.
type guard struct {
	writes  bool // set during prepare when an action modifies the database
	noTx    bool // the group writer: requests run inside the group's transaction
	allowTx bool // set while the writer itself runs BEGIN/COMMIT/ROLLBACK
	reason  string
}

// safePragmas maps the pragmas clients may run to whether they may also be
// set (PRAGMA x = v). Anything else (journal_mode=, synchronous=,
// temp_store_directory, database_list, ...) is refused.
var safePragmas = map[string]bool{
	"table_info": false, "table_xinfo": false, "table_list": false,
	"index_list": false, "index_info": false, "index_xinfo": false,
	"foreign_key_list": false, "foreign_key_check": false,
	"integrity_check": false, "quick_check": false,
	"page_count": false, "page_size": false, "freelist_count": false,
	"schema_version": false, "data_version": false, "collation_list": false,
	"function_list": false, "pragma_list": false, "module_list": false,
	"journal_mode": false, "encoding": false, "compile_options": false,
	"user_version": true, "application_id": true,
	"foreign_keys": true, "defer_foreign_keys": true, "recursive_triggers": true,
	"case_sensitive_like": true, "optimize": true, "analysis_limit": true,
	"legacy_alter_table": true, "reverse_unordered_selects": true,
}

func (g *guard) Authorize(a sqlite.Action) sqlite.AuthResult {
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
		settable, ok := safePragmas[strings.ToLower(a.Pragma())]
		if !ok || (a.PragmaArg() != "" && !settable) {
			g.reason = "PRAGMA " + a.Pragma() + " is not on the server's safe list"
			return sqlite.AuthResultDeny
		}
		if a.PragmaArg() != "" {
			g.writes = true
		}
	case sqlite.OpInsert, sqlite.OpUpdate, sqlite.OpDelete,
		sqlite.OpCreateIndex, sqlite.OpCreateTable, sqlite.OpCreateTrigger, sqlite.OpCreateView,
		sqlite.OpDropIndex, sqlite.OpDropTable, sqlite.OpDropTrigger, sqlite.OpDropView,
		sqlite.OpAlterTable, sqlite.OpReindex, sqlite.OpAnalyze,
		sqlite.OpCreateVTable, sqlite.OpDropVTable:
		if a.Database() != "temp" {
			g.writes = true
		}
	}
	return sqlite.AuthResultOK
}
