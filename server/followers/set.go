// Package followers keeps live read-only copies of the databases another
// instance writes and answers reads from them. Each copy is a
// follow.Follower kept current from the bucket, in its own file
// (<name>.follower, never the writer's <name>.db); a read that carries a
// bookmark (read-your-writes) first waits until its copy has applied it.
// Writes and sessions on a copy are refused with a *NeedsWriterError, so
// the server forwards the request to the database's writer.
//
// It imports follow, restore and server/dbhost (for the Database it serves
// and its Bookmark and Session types); dbhost never imports it. When this
// instance takes a database's lease, the server drops that database's copy
// (dbhost.Options.OnWriterOpening): the writer restores <name>.db from the
// bucket, which is at least as new.
package followers

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluicedb/sluice/follow"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
)

// Options configure a Set. Zero values get the defaults in brackets.
type Options struct {
	DataDir          string        // each copy is <DataDir>/<name>.follower
	Store            replica.Store // the bucket; name's replica is replica.Sub(Store, name)
	ReadConns        int           // read connections per copy [4]
	StatementTimeout time.Duration // per statement [5s]
	PollInterval     time.Duration // how often a caught-up copy polls the bucket [200ms]
	BookmarkWait     time.Duration // how long a read waits for its bookmark [5s]
	Logger           *slog.Logger
	// Damage, if set, hears when a copy meets a damaged object in the
	// replica and when it moved past it (readiness, metrics).
	Damage DamageReporter
	// Subscribe, if set, runs for each copy until it stops, and calls wake
	// whenever the writer says it shipped TXID txid (0: something; package
	// push): the copy fetches then instead of at its next poll.
	Subscribe func(ctx context.Context, name string, wake func(txid uint64))
	// OnApplied, if set, hears every file a copy applies (embedded
	// replicas' syncs served from this instance's copy).
	OnApplied func(name string, f replica.LTXFile, body []byte)
}

// DamageReporter is replicated.DamageReporter: a follower reports as a
// writer does.
type DamageReporter interface {
	Damaged(db string, err *replica.DamageError)
	Healed(db string, snapshot string, took time.Duration)
}

func (o *Options) setDefaults() {
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = 5 * time.Second
	}
	if o.BookmarkWait <= 0 {
		o.BookmarkWait = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Set is this instance's read replicas, one per database name, each
// started on first use.
type Set struct {
	opts Options

	mu     sync.Mutex
	m      map[string]*followed
	open   map[string]*sync.Mutex // serialises the start of one name's copy
	closed bool
}

// New returns an empty Set.
func New(opts Options) *Set {
	opts.setDefaults()
	return &Set{opts: opts, m: map[string]*followed{}, open: map[string]*sync.Mutex{}}
}

func (s *Set) path(name string) string {
	return filepath.Join(s.opts.DataDir, name+".follower")
}

// follower returns name's copy, restoring and starting it on first use.
func (s *Set) follower(ctx context.Context, name string) (*followed, error) {
	s.mu.Lock()
	if fd := s.m[name]; fd != nil {
		s.mu.Unlock()
		return fd, nil
	}
	l := s.open[name]
	if l == nil {
		l = &sync.Mutex{}
		s.open[name] = l
	}
	s.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	s.mu.Lock()
	fd, closed := s.m[name], s.closed
	s.mu.Unlock()
	if fd != nil {
		return fd, nil
	}
	if closed {
		return nil, dberr.New(dberr.CodeUnavailable, "server is shutting down")
	}
	fd, err := startFollower(ctx, name, s.path(name), replica.Sub(s.opts.Store, name), s.opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.m[name] = fd
	s.mu.Unlock()
	s.opts.Logger.Info("serving reads from a follower", "db", name, "txid", uint64(fd.f.Pos().TXID))
	return fd, nil
}

// Drop stops name's copy and removes its files: this instance is about to
// write name, or is closing.
func (s *Set) Drop(name string) {
	s.mu.Lock()
	fd := s.m[name]
	delete(s.m, name)
	s.mu.Unlock()
	if fd == nil {
		return
	}
	fd.close()
	for _, suffix := range []string{"", "-journal"} {
		_ = os.Remove(s.path(name) + suffix)
	}
	s.opts.Logger.Info("stopped following", "db", name)
}

// Close drops every copy; none starts afterwards.
func (s *Set) Close() {
	s.mu.Lock()
	s.closed = true
	names := make([]string, 0, len(s.m))
	for n := range s.m {
		names = append(names, n)
	}
	s.mu.Unlock()
	for _, n := range names {
		s.Drop(n)
	}
}

// Stats describe one copy, for /metrics and readiness.
type Stats struct {
	Name string
	follow.Stats
}

// Stats returns every running copy's lag.
func (s *Set) Stats() []Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Stats, 0, len(s.m))
	for n, fd := range s.m {
		out = append(out, Stats{Name: n, Stats: fd.f.Stats()})
	}
	return out
}

// View returns a read-only view of name's copy (started on first use) once
// it has applied bookmark (0: no wait). A copy that does not reach the
// bookmark within Options.BookmarkWait is a retryable LAGGING error.
func (s *Set) View(ctx context.Context, name string, bookmark dbhost.Bookmark) (*View, error) {
	if err := dbhost.ValidateName(name); err != nil {
		return nil, err
	}
	fd, err := s.follower(ctx, name)
	if err != nil {
		return nil, err
	}
	if bookmark > 0 {
		if err := fd.waitFor(ctx, bookmark, s.opts.BookmarkWait); err != nil {
			return nil, err
		}
	}
	return &View{fd: fd}, nil
}
