package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/sluicedb/sluice/server/auth"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
)

// dbQuotas bounds the databases a server holds and those one credential
// created, so that a token creating databases in a loop runs into its own
// limit long before the server runs out of descriptors, disk or memory.
// Who created what is kept in <data>/.sluice-owners.json, so a restart
// does not reset a token's count.
type dbQuotas struct {
	host     *dbhost.Host
	path     string
	max      int // 0: no limit
	perToken int // 0: no limit

	mu      sync.Mutex
	owners  map[string]string // database → credential (auth.Principal.ID)
	pending map[string]int    // creates under way, by credential ("" counts them all)
}

func newDBQuotas(host *dbhost.Host, dataDir string, lim HTTPLimits) *dbQuotas {
	q := &dbQuotas{host: host, path: filepath.Join(dataDir, ".sluice-owners.json"), max: lim.MaxDatabases,
		perToken: lim.MaxDatabasesPerToken, owners: map[string]string{}, pending: map[string]int{}}
	if b, err := os.ReadFile(q.path); err == nil {
		_ = json.Unmarshal(b, &q.owners)
	}
	return q
}

// reserve takes a slot for one create by owner, or says which limit is in
// the way; release gives it back once the create has finished.
func (q *dbQuotas) reserve(owner string) (release func(created bool, name string), err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.max > 0 {
		n, cerr := q.host.Count()
		if cerr == nil && n+q.pending[""] >= q.max {
			return nil, dberr.New(dberr.CodeForbidden, "the server holds "+strconv.Itoa(n)+
				" databases, its limit (limits.max-databases); delete some or raise the limit")
		}
	}
	if q.perToken > 0 && owner != "" {
		n := 0
		for name, o := range q.owners {
			if o != owner {
				continue
			}
			if !q.host.Exists(name) { // deleted some other way
				delete(q.owners, name)
				continue
			}
			n++
		}
		if n+q.pending[owner] >= q.perToken {
			return nil, dberr.New(dberr.CodeForbidden, "this token has created "+strconv.Itoa(n)+
				" databases, its limit (limits.max-databases-per-token); delete some or raise the limit")
		}
	}
	q.pending[""]++
	q.pending[owner]++
	return func(created bool, name string) {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.pending[""]--
		if q.pending[owner]--; q.pending[owner] == 0 {
			delete(q.pending, owner)
		}
		if created && owner != "" {
			q.owners[name] = owner
			q.save()
		}
	}, nil
}

func (q *dbQuotas) forget(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.owners[name]; ok {
		delete(q.owners, name)
		q.save()
	}
}

// save writes the owners (under mu); a failure only loses counts.
func (q *dbQuotas) save() {
	b, err := json.Marshal(q.owners)
	if err != nil {
		return
	}
	tmp := q.path + ".tmp"
	if os.WriteFile(tmp, b, 0o600) == nil {
		_ = os.Rename(tmp, q.path)
	}
}

// databaseQuota wraps the JSON API's PUT (create) and DELETE of a database
// with the database limits; other methods pass through.
func (s *Server) databaseQuota(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		p := auth.FromContext(r.Context())
		switch {
		case r.Method == http.MethodPut && p.CanWrite(name) && r.PathValue("bookmark") == "":
			owner := ""
			if s.auth.Required() {
				owner = p.ID
			}
			release, err := s.quotas.reserve(owner)
			if err != nil {
				writeError(w, r, err)
				return
			}
			sw := &statusWriter{ResponseWriter: w}
			next(sw, r)
			release(sw.status == http.StatusCreated, name)
		case r.Method == http.MethodDelete && p.CanWrite(name):
			sw := &statusWriter{ResponseWriter: w}
			next(sw, r)
			if sw.status == http.StatusOK {
				s.quotas.forget(name)
				s.metrics.reg.Forget(name)
			}
		default:
			next(w, r)
		}
	}
}
