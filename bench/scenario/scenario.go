// Package scenario holds the benchmark workloads (counter, put-object, a BBS,
// D1-style reads and writes) as data: their schema, the
// statements each virtual user sends, and the query that counts what the
// acknowledged writes left behind. A Target turns them into HTTP requests for
// sluice's JSON API, for Hrana, or for the peer apps' fixed routes.
//
// It imports bench/load and the standard library.
package scenario

import (
	"fmt"
	"sort"
	"strings"
)

// Op is one kind of request a VU sends: a statement for sluice, a route for a peer.
type Op struct {
	Name      string
	Write     bool
	SQL       string
	Params    []any
	PeerRoute string // "METHOD /path" on the peer apps
}

// Scenario is one workload.
type Scenario struct {
	Name        string
	DB          string // default database name; scenarios sharing a schema share it
	Description string
	Schema      []string // statements run once before the load (idempotent)
	SeedRows    int      // rows the table must hold before the load (bbs read scenarios)
	SeedSQL     string   // inserts ? more rows (its single parameter) when SeedRows are missing
	Ops         []Op     // VU i sends Ops[i % len(Ops)]
	CountSQL    string   // what acknowledged writes add to, one per write
	// PeerCountSQL is CountSQL on the peer app's SQLite schema, for counting
	// a restored copy of it (the peer names the BBS and D1 tables bbs and d1).
	PeerCountSQL string
}

// init fills PeerCountSQL from CountSQL.
func init() {
	for _, s := range all {
		switch {
		case strings.HasPrefix(s.Name, "bbs-"):
			s.PeerCountSQL = `SELECT count(*) FROM bbs`
		case strings.HasPrefix(s.Name, "d1-"):
			s.PeerCountSQL = `SELECT count(*) FROM d1`
		default:
			s.PeerCountSQL = s.CountSQL
		}
	}
}

// Writes reports whether the scenario writes (and so can be verified).
func (s *Scenario) Writes() bool {
	for _, op := range s.Ops {
		if op.Write {
			return true
		}
	}
	return false
}

const (
	seedJSON    = `{"age":10, "name":"yamada", "class":"A"}`
	bbsText     = "Hello from the bench: a short BBS post of about twenty bytes."
	seedRowsSQL = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO test (category, text) SELECT 'general', 'seeded post ' || i FROM n`
)

var bbsSchema = []string{`CREATE TABLE IF NOT EXISTS test (id INTEGER PRIMARY KEY AUTOINCREMENT, category TEXT, text TEXT)`}

var (
	bbsWrite   = Op{Name: "write", Write: true, SQL: `INSERT INTO test (category, text) VALUES (?, ?)`, Params: []any{"general", bbsText}, PeerRoute: "POST /bbs/write"}
	bbsReadAll = Op{Name: "read-all", SQL: `SELECT id, category, text FROM test`, PeerRoute: "GET /bbs/read"}
	bbsRead100 = Op{Name: "read-100", SQL: `SELECT id, category, text FROM test ORDER BY id DESC LIMIT 100`, PeerRoute: "GET /bbs/read_limit"}
)

var all = []*Scenario{
	{
		Name: "counter", DB: "bench-counter", Description: "POST /count_up: one row incremented by every request",
		Schema: []string{
			`CREATE TABLE IF NOT EXISTS counters (id TEXT PRIMARY KEY, count INTEGER NOT NULL)`,
			`INSERT OR IGNORE INTO counters (id, count) VALUES ('count_up', 0)`,
		},
		Ops:      []Op{{Name: "count_up", Write: true, SQL: `UPDATE counters SET count = count + 1 WHERE id = 'count_up' RETURNING count`, PeerRoute: "POST /count_up"}},
		CountSQL: `SELECT count FROM counters WHERE id = 'count_up'`,
	},
	{
		Name: "put-object", DB: "bench-put-object", Description: "POST /rpc/put-object: insert one JSON row",
		Schema:   []string{`CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON)`},
		Ops:      []Op{{Name: "put-object", Write: true, SQL: `INSERT INTO t (json) VALUES (?)`, Params: []any{seedJSON}, PeerRoute: "POST /rpc/put-object"}},
		CountSQL: `SELECT count(*) FROM t`,
	},
	{
		Name: "bbs-write", DB: "bench-bbs", Description: "POST write: append one short post",
		Schema: bbsSchema, Ops: []Op{bbsWrite}, CountSQL: `SELECT count(*) FROM test`,
	},
	{
		Name: "bbs-read-all", DB: "bench-bbs", Description: "GET read: every post (10,000 rows, ~200 KB)",
		Schema: bbsSchema, SeedRows: 10000, SeedSQL: seedRowsSQL, Ops: []Op{bbsReadAll}, CountSQL: `SELECT count(*) FROM test`,
	},
	{
		Name: "bbs-read-100", DB: "bench-bbs", Description: "GET read_limit: the latest 100 posts",
		Schema: bbsSchema, SeedRows: 10000, SeedSQL: seedRowsSQL, Ops: []Op{bbsRead100}, CountSQL: `SELECT count(*) FROM test`,
	},
	{
		Name: "bbs-mixed", DB: "bench-bbs", Description: "write and read-all, alternating",
		Schema: bbsSchema, SeedRows: 10000, SeedSQL: seedRowsSQL, Ops: []Op{bbsWrite, bbsReadAll}, CountSQL: `SELECT count(*) FROM test`,
	},
	{
		Name: "d1-read", DB: "bench-d1", Description: "GET /read: SELECT * FROM test LIMIT 1",
		Schema: d1Schema, SeedRows: 1, SeedSQL: `INSERT INTO test (timestamp, region) SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'seed' FROM (SELECT ? AS n)`,
		Ops: []Op{{Name: "read", SQL: `SELECT * FROM test LIMIT 1`, PeerRoute: "GET /d1/read"}}, CountSQL: `SELECT count(*) FROM test`,
	},
	{
		Name: "d1-write", DB: "bench-d1", Description: "GET /write?region=X: insert (timestamp, region)",
		Schema:   d1Schema,
		Ops:      []Op{{Name: "write", Write: true, SQL: `INSERT INTO test (timestamp, region) VALUES (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?)`, Params: []any{"local"}, PeerRoute: "GET /d1/write?region=local"}},
		CountSQL: `SELECT count(*) FROM test`,
	},
}

var d1Schema = []string{`CREATE TABLE IF NOT EXISTS test (id INTEGER PRIMARY KEY, timestamp TEXT, region TEXT)`}

// Get returns the scenario with that name.
func Get(name string) (*Scenario, error) {
	for _, s := range all {
		if s.Name == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("unknown scenario %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Names lists every scenario.
func Names() []string {
	var n []string
	for _, s := range all {
		n = append(n, s.Name)
	}
	sort.Strings(n)
	return n
}

// All returns every scenario in a stable order.
func All() []*Scenario { return append([]*Scenario(nil), all...) }
