// Package sqlitestmt answers what SQLite knows about a prepared statement and
// zombiezen.com/go/sqlite does not expose: whether it is empty (the SQL held
// only comments or semicolons), sqlite3_stmt_readonly, sqlite3_stmt_isexplain,
// and each column's name and declared type by position (zombiezen's
// ColumnName looks names up in a map, so a repeated name comes back empty);
// and one fact of the connection: whether foreign-key violations are pending
// (sqlite3_db_status's SQLITE_DBSTATUS_DEFERRED_FKS).
//
// zombiezen keeps the statement handle and the connection's libc thread
// state in unexported fields; this package reads them with reflection, once
// per connection for the thread state. The field layout is checked when the
// package initialises, so a zombiezen upgrade that changes it fails every
// test at start instead of misbehaving. It imports zombiezen and the modernc
// SQLite library zombiezen is built on.
package sqlitestmt

import (
	"encoding/binary"
	"reflect"
	"unsafe"

	"modernc.org/libc"
	lib "modernc.org/sqlite/lib"
	"zombiezen.com/go/sqlite"
)

var (
	stmtHandle = mustField(reflect.TypeFor[sqlite.Stmt](), "stmt", reflect.TypeFor[uintptr]())
	connTLS    = mustField(reflect.TypeFor[sqlite.Conn](), "tls", reflect.TypeFor[*libc.TLS]())
	connDB     = mustField(reflect.TypeFor[sqlite.Conn](), "conn", reflect.TypeFor[uintptr]())
)

func mustField(t reflect.Type, name string, want reflect.Type) []int {
	f, ok := t.FieldByName(name)
	if !ok || f.Type != want {
		panic("sqlitestmt: " + t.String() + "." + name + " is not a " + want.String() + "; the zombiezen version changed its layout")
	}
	return f.Index
}

// Inspector reads statements prepared on one connection. Like the
// connection, it is used by one goroutine at a time.
type Inspector struct {
	tls *libc.TLS
	db  uintptr // the connection's sqlite3*
}

// For returns the inspector of statements prepared on c.
func For(c *sqlite.Conn) Inspector {
	v := reflect.ValueOf(c).Elem()
	f := v.FieldByIndex(connTLS)
	tls := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(*libc.TLS)
	return Inspector{tls: tls, db: uintptr(v.FieldByIndex(connDB).Uint())}
}

// ForeignKeysPending is sqlite3_db_status(SQLITE_DBSTATUS_DEFERRED_FKS): true
// while the connection's transaction holds foreign-key violations that its
// COMMIT would refuse (deferred constraints, or immediate ones under PRAGMA
// defer_foreign_keys). A ROLLBACK TO a savepoint restores the count it had
// when the savepoint began. It costs no statement: SQLite keeps the count.
func (in Inspector) ForeignKeysPending() bool {
	if in.db == 0 {
		return false
	}
	// Out-parameters live in the thread state's C stack, not the Go stack
	// (which may move while the C code runs).
	p := in.tls.Alloc(8)
	defer in.tls.Free(8)
	if lib.Xsqlite3_db_status(in.tls, in.db, lib.SQLITE_DBSTATUS_DEFERRED_FKS, p, p+4, 0) != lib.SQLITE_OK {
		return false
	}
	return binary.NativeEndian.Uint32(libc.GoBytes(p, 4)) != 0
}

func handle(s *sqlite.Stmt) uintptr {
	return uintptr(reflect.ValueOf(s).Elem().FieldByIndex(stmtHandle).Uint())
}

// Empty reports whether s holds no statement: SQLite prepared only blanks,
// comments or semicolons. Such a Stmt must not be stepped, bound or reset.
func Empty(s *sqlite.Stmt) bool { return handle(s) == 0 }

// ReadOnly is sqlite3_stmt_readonly: true when running s cannot change the
// database file as prepared now (a schema change re-prepares it).
func (in Inspector) ReadOnly(s *sqlite.Stmt) bool {
	h := handle(s)
	return h == 0 || lib.Xsqlite3_stmt_readonly(in.tls, h) != 0
}

// Explain reports whether s is an EXPLAIN or EXPLAIN QUERY PLAN statement.
func (in Inspector) Explain(s *sqlite.Stmt) bool {
	h := handle(s)
	return h != 0 && lib.Xsqlite3_stmt_isexplain(in.tls, h) != 0
}

// ColumnName is sqlite3_column_name: the name of result column i, repeated
// names included.
func (in Inspector) ColumnName(s *sqlite.Stmt, i int) string {
	h := handle(s)
	if h == 0 {
		return ""
	}
	return libc.GoString(lib.Xsqlite3_column_name(in.tls, h, int32(i)))
}

// DeclType is sqlite3_column_decltype: the declared type of the table
// column behind result column i, or "" for an expression.
func (in Inspector) DeclType(s *sqlite.Stmt, i int) string {
	h := handle(s)
	if h == 0 {
		return ""
	}
	return libc.GoString(lib.Xsqlite3_column_decltype(in.tls, h, int32(i)))
}
