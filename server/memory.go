package server

import (
	"runtime"
	"runtime/metrics"

	"github.com/sluicedb/sluice/internal/sqliteconn"
	sluicemetrics "github.com/sluicedb/sluice/server/metrics"
)

// registerMemoryMetrics splits the process's memory by owner, so a growing
// RSS can be traced to the Go heap, the Go runtime's retained pages or
// SQLite's own allocations (page caches live outside the Go heap).
func registerMemoryMetrics(r *sluicemetrics.Registry) {
	read := func(name string) func() []sluicemetrics.Sample {
		return func() []sluicemetrics.Sample {
			s := []metrics.Sample{{Name: name}}
			metrics.Read(s)
			return []sluicemetrics.Sample{{Value: float64(s[0].Value.Uint64())}}
		}
	}
	r.GaugeFunc("sluice_go_heap_objects_bytes", "Bytes of live and not yet swept Go heap objects.", nil, read("/memory/classes/heap/objects:bytes"))
	r.GaugeFunc("sluice_go_memory_mapped_bytes", "Bytes the Go runtime has mapped, less what it returned to the OS.", nil, func() []sluicemetrics.Sample {
		s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		return []sluicemetrics.Sample{{Value: float64(s[0].Value.Uint64() - s[1].Value.Uint64())}}
	})
	r.GaugeFunc("sluice_go_goroutines", "Goroutines alive (one or more per open connection, stream and database).", nil, func() []sluicemetrics.Sample {
		return []sluicemetrics.Sample{{Value: float64(runtime.NumGoroutine())}}
	})
	r.GaugeFunc("sluice_sqlite_memory_bytes", "Bytes SQLite holds allocated (page caches, statements, schemas) over every database.", nil, func() []sluicemetrics.Sample {
		return []sluicemetrics.Sample{{Value: float64(sqliteconn.MemoryUsed())}}
	})
}
