package groupcommit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
	"zombiezen.com/go/sqlite"
)

// Writes that are safe to retry. A client that sends an Idempotency-Key with
// a write gets, on a retry with the same key, the answer of the first run
// instead of a second run. The key, a hash of the request and the answer are
// stored in the database itself, in the same transaction as the write: they
// commit, ship, restore and move to a new lease holder together with the
// data, so a retry after a restart, a restore from the bucket or a lease
// hand-off still finds them. The writer runs one request at a time, so a
// retry that arrives while the first run is still queued finds the row the
// first one wrote (same transaction or an earlier one) and never runs twice.

// IdempotencyTable is the table sluice keeps idempotency keys in. It is
// created on the first write that carries a key; the leading underscore and
// the prefix mark it as sluice's own.
const IdempotencyTable = "_sluice_idempotency"

// DefaultIdempotencyWindow is how long a key is remembered by default.
const DefaultIdempotencyWindow = 24 * time.Hour

// maxKeyLen bounds a key; keys are opaque printable ASCII (UUIDs and the like).
const maxKeyLen = 255

// Idempotency is one request's key. The HTTP layer makes it with
// NewIdempotency and passes it down in the context (WithIdempotency); each
// write of the request (Submit) consumes the next sub-key (key, "key 2",
// ...), so a retried request whose writes run in the same order replays
// each of them.
type Idempotency struct {
	key  string
	hash [32]byte
	// Save encodes the answer of the next write (what its fn reported); it
	// runs in the writer right after fn succeeded. Load restores that answer
	// instead of running fn when the key was used before. Set both before
	// each write that may carry the key.
	Save func() ([]byte, error)
	Load func([]byte) error

	mu       sync.Mutex
	n        int
	replayed bool
}

// NewIdempotency checks key and returns the request's Idempotency; request
// is the request's content (a retry must send the same).
func NewIdempotency(key string, request []byte) (*Idempotency, error) {
	if key == "" || len(key) > maxKeyLen {
		return nil, dberr.New(dberr.CodeBadRequest, "Idempotency-Key must be 1 to "+strconv.Itoa(maxKeyLen)+" characters")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return nil, dberr.New(dberr.CodeBadRequest, "Idempotency-Key must be printable ASCII without spaces (a UUID, for example)")
		}
	}
	return &Idempotency{key: key, hash: sha256.Sum256(request)}, nil
}

// Replayed reports whether any write of the request was answered from a
// stored answer instead of running.
func (k *Idempotency) Replayed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.replayed
}

func (k *Idempotency) next() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n++
	if k.n == 1 {
		return k.key
	}
	return k.key + " " + strconv.Itoa(k.n) // a space never occurs in a client's key
}

type idemKey struct{}

// WithIdempotency returns ctx carrying k for the writes made with it.
func WithIdempotency(ctx context.Context, k *Idempotency) context.Context {
	return context.WithValue(ctx, idemKey{}, k)
}

// IdempotencyFrom returns the key ctx carries, or nil.
func IdempotencyFrom(ctx context.Context) *Idempotency {
	k, _ := ctx.Value(idemKey{}).(*Idempotency)
	return k
}

// WithoutIdempotency hides the key from writes sluice makes on its own
// behalf (a session's no-op group that waits for durability).
func WithoutIdempotency(ctx context.Context) context.Context {
	if IdempotencyFrom(ctx) == nil {
		return ctx
	}
	return context.WithValue(ctx, idemKey{}, (*Idempotency)(nil))
}

// idemCall is one write's share of a request's key.
type idemCall struct {
	k    *Idempotency
	sub  string
	save func() ([]byte, error)
	load func([]byte) error
}

func newIdemCall(ctx context.Context) *idemCall {
	k := IdempotencyFrom(ctx)
	if k == nil {
		return nil
	}
	return &idemCall{k: k, sub: k.next(), save: k.Save, load: k.Load}
}

// runReq runs one request of a group: with a key, it first looks for the
// key's stored answer (replay, or refuse a different request under the same
// key), and after fn succeeds stores the answer in the same transaction.
func (c *Committer) runReq(w *sqlconn.Handle, r *writeReq) error {
	call := r.idem
	if call == nil {
		return callReq(w, r.fn)
	}
	now := time.Now()
	found, hash, body, err := c.idemLookup(w.SQLite(), call.sub, now)
	if err != nil {
		return err
	}
	if found {
		if !bytes.Equal(hash, call.k.hash[:]) {
			return dberr.ForDatabase(dberr.CodeKeyReused, c.name, "Idempotency-Key "+quote(call.k.key)+" was already used on database "+quote(c.name)+" for a different request; use a new key for a new request")
		}
		if call.load != nil {
			if err := call.load(body); err != nil {
				return dberr.New(dberr.CodeInternal, "cannot read the stored answer for Idempotency-Key "+quote(call.k.key)+": "+err.Error())
			}
		}
		call.k.mu.Lock()
		call.k.replayed = true
		call.k.mu.Unlock()
		return nil
	}
	if err := callReq(w, r.fn); err != nil {
		return err // rolled back with the request: a retry may run it again
	}
	var answer []byte
	if call.save != nil {
		if answer, err = call.save(); err != nil {
			return dberr.New(dberr.CodeInternal, "cannot store the answer for Idempotency-Key "+quote(call.k.key)+": "+err.Error())
		}
	}
	if answer == nil {
		answer = []byte{}
	}
	st, err := w.SQLite().Prepare("INSERT INTO " + IdempotencyTable + "(key, created, hash, status, body) VALUES (?, ?, ?, 200, ?)")
	if err != nil {
		return sqlconn.Translate(err)
	}
	defer st.Reset()
	st.BindText(1, call.sub)
	st.BindInt64(2, now.UnixMilli())
	st.BindBytes(3, call.k.hash[:])
	st.BindBytes(4, answer)
	if _, err := st.Step(); err != nil {
		return sqlconn.Translate(err)
	}
	c.idemPrune(w.SQLite(), now)
	return nil
}

// idemLookup finds key's row, creating the table on first use; a row older
// than the window counts as absent (and is removed).
func (c *Committer) idemLookup(conn *sqlite.Conn, key string, now time.Time) (found bool, hash, body []byte, err error) {
	st, err := conn.Prepare("SELECT created, hash, body FROM " + IdempotencyTable + " WHERE key = ?")
	var row bool
	if err == nil {
		defer st.Reset()
		st.BindText(1, key)
		row, err = st.Step() // a cached statement reports a dropped table here
	}
	if err != nil && strings.Contains(err.Error(), "no such table") {
		// Created inside the request's transaction: if that rolls back, so
		// does the table, and the next key creates it again.
		if err := sqlconn.Run(conn, "CREATE TABLE IF NOT EXISTS "+IdempotencyTable+
			"(key TEXT PRIMARY KEY, created INTEGER NOT NULL, hash BLOB NOT NULL, status INTEGER NOT NULL, body BLOB NOT NULL) WITHOUT ROWID"); err != nil {
			return false, nil, nil, sqlconn.Translate(err)
		}
		if err := sqlconn.Run(conn, "CREATE INDEX IF NOT EXISTS "+IdempotencyTable+"_created ON "+IdempotencyTable+"(created)"); err != nil {
			return false, nil, nil, sqlconn.Translate(err)
		}
		return false, nil, nil, nil
	}
	if err != nil || !row {
		return false, nil, nil, sqlconn.Translate(err)
	}
	created := st.ColumnInt64(0)
	hash = make([]byte, st.ColumnLen(1))
	st.ColumnBytes(1, hash)
	body = make([]byte, st.ColumnLen(2))
	st.ColumnBytes(2, body)
	st.Reset()
	if now.Sub(time.UnixMilli(created)) >= c.idemWindow() {
		del, err := conn.Prepare("DELETE FROM " + IdempotencyTable + " WHERE key = ?")
		if err != nil {
			return false, nil, nil, sqlconn.Translate(err)
		}
		defer del.Reset()
		del.BindText(1, key)
		if _, err := del.Step(); err != nil {
			return false, nil, nil, sqlconn.Translate(err)
		}
		return false, nil, nil, nil
	}
	return true, hash, body, nil
}

func (c *Committer) idemWindow() time.Duration { return c.opts.IdempotencyWindow }

// idemPrune removes expired keys, at most once a minute (or once a window,
// if shorter), using the index on created: the write path pays for it rarely.
func (c *Committer) idemPrune(conn *sqlite.Conn, now time.Time) {
	every := min(time.Minute, c.idemWindow())
	if now.Sub(c.idemPruned) < every {
		return
	}
	c.idemPruned = now
	st, err := conn.Prepare("DELETE FROM " + IdempotencyTable + " WHERE created < ?")
	if err != nil {
		return
	}
	defer st.Reset()
	st.BindInt64(1, now.Add(-c.idemWindow()).UnixMilli())
	_, _ = st.Step() // best effort: lookups ignore expired rows anyway
}
