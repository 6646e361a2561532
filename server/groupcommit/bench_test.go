package groupcommit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicedb/sluice/server/sqlconn"
)

// BenchmarkConcurrentInserts measures the write path's throughput: 64
// clients insert one row each per request into a table with a deferred
// foreign key, synced to a file replica.
func BenchmarkConcurrentInserts(b *testing.B) {
	db := openDB(b, newFileStore(b), nil)
	write(b, db, "CREATE TABLE p(id INTEGER PRIMARY KEY)")
	write(b, db, "INSERT INTO p VALUES (1)")
	write(b, db, "CREATE TABLE c(id INTEGER PRIMARY KEY, pid INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)")
	var next atomic.Int64
	ins := func(c sqlconn.Conn) error {
		_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO c(pid) VALUES (1)"})
		return err
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := db.Submit(context.Background(), ins); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}
