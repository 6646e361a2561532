package soak

import (
	"fmt"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// Each insert carries a key the client chose, (VU << 32) | iteration, so a
// restored copy can be checked write by write without trusting the server's
// answers: the key says which VU sent it, when, and (through dbFor) to which
// database.

func rowKey(vu int, iter uint64) int64 { return int64(vu)<<32 | int64(iter&0xffffffff) }

func splitKey(k int64) (vu int, iter uint64) { return int(k >> 32), uint64(k & 0xffffffff) }

// dbFor spreads the VUs' writes over n databases (a hash, so every database
// sees writes from many VUs and every VU writes to many databases).
func dbFor(vu int, iter uint64, n int) int {
	if n <= 1 {
		return 0
	}
	x := uint64(vu)<<32 | iter
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(n))
}

// acks records, per VU, the iterations whose insert was acknowledged (2xx
// with a result) and how many it sent. Each VU's slot is written only by
// that VU's goroutine and read after the load has ended.
type acks struct {
	acked [][]uint32
	sent  []uint64
}

func newAcks(vus int) *acks {
	return &acks{acked: make([][]uint32, vus), sent: make([]uint64, vus)}
}

// Check is the outcome of checking restored copies against the acknowledgements.
type Check struct {
	Acked   int64 `json:"acknowledged"`
	Present int64 `json:"acknowledged_present"`
	// Unacked rows are present although their answer was an error or never
	// came (allowed: a write may commit and its answer be lost); Foreign rows
	// carry a key no VU sent to that database (never allowed).
	Unacked int64  `json:"present_unacknowledged"`
	Foreign int64  `json:"foreign_rows"`
	Rows    int64  `json:"rows"`
	Missing string `json:"first_missing,omitempty"`
}

// check compares the keys of each restored database (keys[db]) with the
// acknowledgements.
func (a *acks) check(keys []map[int64]bool, names []string) Check {
	var c Check
	n := len(keys)
	for vu, iters := range a.acked {
		for _, it := range iters {
			c.Acked++
			db := dbFor(vu, uint64(it), n)
			if keys[db][rowKey(vu, uint64(it))] {
				c.Present++
			} else if c.Missing == "" {
				c.Missing = fmt.Sprintf("database %s, VU %d, insert #%d", names[db], vu, it)
			}
		}
	}
	for db, ks := range keys {
		c.Rows += int64(len(ks))
		for k := range ks {
			vu, it := splitKey(k)
			if vu < 0 || vu >= len(a.sent) || it >= a.sent[vu] || dbFor(vu, it, n) != db {
				c.Foreign++
			}
		}
	}
	c.Unacked = c.Rows - c.Present - c.Foreign
	return c
}

// readKeys reads every key of the soak table of a SQLite file.
func readKeys(path string) (map[int64]bool, error) {
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadOnly)
	if err != nil {
		return nil, fmt.Errorf("open restored copy %s: %w", path, err)
	}
	defer conn.Close()
	keys := map[int64]bool{}
	err = sqlitex.ExecuteTransient(conn, "SELECT k FROM "+table, &sqlitex.ExecOptions{
		ResultFunc: func(st *sqlite.Stmt) error { keys[st.ColumnInt64(0)] = true; return nil },
	})
	if err != nil {
		return nil, fmt.Errorf("read keys of restored copy %s: %w", path, err)
	}
	return keys, nil
}
