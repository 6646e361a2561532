package stream

import (
	"crypto/rand"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicedb/sluice/server/dbhost"
)

// Config tunes the registry. Zero values take the defaults below.
type Config struct {
	// IdleTimeout closes a stream (rolling back its transaction) after this long
	// without a request. Default 10 s.
	IdleTimeout time.Duration
	// TxTimeout rolls back an interactive transaction that stays open longer
	// than this, because it holds the database's writer. Default 5 s.
	TxTimeout time.Duration
	// BatonKey signs batons; empty means a random key (batons then do not
	// survive a restart, which is fine: neither do streams).
	BatonKey []byte
	Logger   *slog.Logger

	// Stream quotas, so that no caller can exhaust streams another needs:
	// open streams per owner, per database and in all.
	// Defaults 1000, 5000, 20000.
	MaxStreamsPerToken    int
	MaxStreamsPerDatabase int
	MaxStreams            int
	// MaxSessionsPerToken bounds the interactive transactions one owner holds
	// open at once (the database's own budget bounds them per database).
	// Default 16.
	MaxSessionsPerToken int
	// MaxPinnedDatabases bounds the databases one token (or, without
	// authentication, one client address) holds sessions on at once: each
	// keeps its database open (pins.go). Default 8.
	MaxPinnedDatabases int
	// RequestTimeout bounds one request's execution: every statement of its
	// batches, including the time it holds the writer. Past it the request's
	// work is rolled back and it is answered REQUEST_TIMEOUT. Default 10 s.
	RequestTimeout time.Duration
	// MaxResponseBytes bounds what one request's answer holds, all its
	// statements together (proto.Budget; limits.max-response-bytes).
	// 0: no limit.
	MaxResponseBytes int
}

const (
	defaultIdleTimeout = 10 * time.Second
	defaultTxTimeout   = 5 * time.Second
	// MaxStoredSQL bounds the SQL texts one stream (or one WebSocket
	// connection) stores, as sqld.
	MaxStoredSQL = 150

	defaultMaxStreamsPerToken    = 1000
	defaultMaxStreamsPerDatabase = 5000
	defaultMaxStreams            = 20000
	defaultMaxSessionsPerToken   = 16
	defaultMaxPinnedDatabases    = 8
	defaultRequestTimeout        = 10 * time.Second
)

// Registry holds the streams that outlive a request, their quotas and the
// interactive sessions counted per owner, and reaps idle streams and
// abandoned transactions.
type Registry struct {
	cfg    Config
	log    *slog.Logger
	signer batonSigner

	mu       sync.Mutex
	streams  map[streamID]*Stream
	perOwner map[string]int            // counted streams by owner
	perDB    map[string]int            // counted streams by database
	total    int                       // counted streams
	sessions map[string]int            // interactive sessions by owner
	pins     map[string]map[string]int // sessions by client, then database (pins.go)
	closed   bool

	resumables      map[streamID]resumable // idled-out streams that held nothing (resume.go)
	resumableOwners map[string]int         // remembered streams by owner
	resumeQueue     []resumeEntry

	stop      chan struct{}
	reaperOut chan struct{}
	closeOnce sync.Once
}

// NewRegistry returns a registry and starts its stream reaper; call Close to stop it.
func NewRegistry(cfg Config) *Registry {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = defaultIdleTimeout
	}
	if cfg.TxTimeout <= 0 {
		cfg.TxTimeout = defaultTxTimeout
	}
	cfg.MaxStreamsPerToken = orDefault(cfg.MaxStreamsPerToken, defaultMaxStreamsPerToken)
	cfg.MaxStreamsPerDatabase = orDefault(cfg.MaxStreamsPerDatabase, defaultMaxStreamsPerDatabase)
	cfg.MaxStreams = orDefault(cfg.MaxStreams, defaultMaxStreams)
	cfg.MaxSessionsPerToken = orDefault(cfg.MaxSessionsPerToken, defaultMaxSessionsPerToken)
	cfg.MaxPinnedDatabases = orDefault(cfg.MaxPinnedDatabases, defaultMaxPinnedDatabases)
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = defaultRequestTimeout
	}
	key := cfg.BatonKey
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			panic("hrana: no randomness for the baton key: " + err.Error())
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Registry{
		cfg:             cfg,
		log:             log,
		signer:          batonSigner{key: key},
		streams:         map[streamID]*Stream{},
		perOwner:        map[string]int{},
		perDB:           map[string]int{},
		sessions:        map[string]int{},
		pins:            map[string]map[string]int{},
		resumables:      map[streamID]resumable{},
		resumableOwners: map[string]int{},
		stop:            make(chan struct{}),
		reaperOut:       make(chan struct{}),
	}
	go r.reap()
	return r
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// Config returns the registry's configuration, defaults filled in.
func (r *Registry) Config() Config { return r.cfg }

// Streams returns how many streams are registered (kept between requests).
func (r *Registry) Streams() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.streams)
}

// Close rolls back and closes every registered stream, refuses new ones and
// stops the reaper.
func (r *Registry) Close() {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.reaperOut
		r.mu.Lock()
		r.closed = true
		var sessions []dbhost.Session
		for id, s := range r.streams {
			if s.sess != nil && !s.busy {
				sessions = append(sessions, s.sess)
				s.sess = nil
			}
			delete(r.streams, id)
		}
		r.mu.Unlock()
		for _, sess := range sessions {
			r.closeSession(sess, "handler closed")
		}
	})
}
