package sqlconn

import (
	"strconv"
	"strings"
)

// pragmaKind says what a client may do with a pragma. A pragma not in
// pragmaKinds is refused: it reaches files (temp_store_directory), runs the
// engine's own work (wal_checkpoint) or is a debugging aid.
type pragmaKind int

const (
	// pragmaRead only reports; an argument names a table, an index or a
	// limit (table_info(t), integrity_check(10)), never a setting.
	pragmaRead pragmaKind = iota + 1
	// pragmaState is a setting of the connection (foreign_keys,
	// legacy_alter_table, ...). Reading it works anywhere. Changing it works
	// only on a connection of the client's own (an interactive session): on
	// a shared one it would change other clients' results.
	pragmaState
	// pragmaDatabase is stored in the database file (user_version): setting
	// it is a write like any other.
	pragmaDatabase
	// pragmaIgnored tunes waits, caches or memory, which the server owns:
	// reading answers the server's value, setting is a no-op.
	pragmaIgnored
	// pragmaOwned is a setting the server's durability depends on
	// (journal_mode, synchronous): reading answers it, setting is refused.
	pragmaOwned
)

var pragmaKinds = map[string]pragmaKind{
	"table_info": pragmaRead, "table_xinfo": pragmaRead, "table_list": pragmaRead,
	"index_list": pragmaRead, "index_info": pragmaRead, "index_xinfo": pragmaRead,
	"foreign_key_list": pragmaRead, "foreign_key_check": pragmaRead,
	"integrity_check": pragmaRead, "quick_check": pragmaRead,
	"database_list": pragmaRead, "collation_list": pragmaRead, "function_list": pragmaRead,
	"pragma_list": pragmaRead, "module_list": pragmaRead, "compile_options": pragmaRead,
	"page_count": pragmaRead, "freelist_count": pragmaRead, "data_version": pragmaRead,
	"stats": pragmaRead, "shrink_memory": pragmaRead,

	"foreign_keys": pragmaState, "defer_foreign_keys": pragmaState, "legacy_alter_table": pragmaState,
	"case_sensitive_like": pragmaState, "recursive_triggers": pragmaState,
	"reverse_unordered_selects": pragmaState, "ignore_check_constraints": pragmaState,
	"automatic_index": pragmaState, "cell_size_check": pragmaState, "query_only": pragmaState,
	"secure_delete": pragmaState, "trusted_schema": pragmaState, "analysis_limit": pragmaState,
	"full_column_names": pragmaState, "short_column_names": pragmaState, "count_changes": pragmaState,

	"user_version": pragmaDatabase, "application_id": pragmaDatabase,
	"optimize": pragmaDatabase, "incremental_vacuum": pragmaDatabase,

	"busy_timeout": pragmaIgnored, "read_uncommitted": pragmaIgnored, "cache_size": pragmaIgnored,
	"cache_spill": pragmaIgnored, "mmap_size": pragmaIgnored, "temp_store": pragmaIgnored,
	"threads": pragmaIgnored, "soft_heap_limit": pragmaIgnored, "hard_heap_limit": pragmaIgnored,
	"fullfsync": pragmaIgnored, "checkpoint_fullfsync": pragmaIgnored,

	"journal_mode": pragmaOwned, "synchronous": pragmaOwned, "wal_autocheckpoint": pragmaOwned,
	"locking_mode": pragmaOwned, "journal_size_limit": pragmaOwned, "auto_vacuum": pragmaOwned,
	"page_size": pragmaOwned, "max_page_count": pragmaOwned, "schema_version": pragmaOwned,
	"encoding": pragmaOwned, "writable_schema": pragmaOwned,
}

// sharedDefaults are the values the connection-state pragmas have on the
// shared connections (pooled readers and the group writer; openConn sets
// foreign_keys, SQLite's defaults the rest). Setting one of them to this
// value changes nothing, so it runs anywhere: clients that send
// "PRAGMA foreign_keys = ON" on connect need no connection of their own.
var sharedDefaults = map[string]int64{
	"foreign_keys": 1, "defer_foreign_keys": 0, "legacy_alter_table": 0,
	"case_sensitive_like": 0, "recursive_triggers": 0, "reverse_unordered_selects": 0,
	"ignore_check_constraints": 0,
}

// pragmaBool parses a boolean pragma argument as SQLite does (on/yes/true,
// off/no/false, or an integer).
func pragmaBool(arg string) (int64, bool) {
	switch strings.ToLower(strings.Trim(arg, `'"`)) {
	case "on", "yes", "true":
		return 1, true
	case "off", "no", "false":
		return 0, true
	}
	n, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return 0, false
	}
	if n != 0 {
		n = 1
	}
	return n, true
}

// changesSharedState reports whether PRAGMA name = arg would leave a shared
// connection different from what every other client expects.
func changesSharedState(name, arg string) bool {
	want, ok := sharedDefaults[name]
	if !ok {
		return true
	}
	v, ok := pragmaBool(arg)
	return !ok || v != want
}
