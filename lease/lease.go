// Package lease makes one instance the only writer of a database, using
// nothing but the bucket: a small JSON object at <db prefix>/sluice/lease
// (replica.SluiceDir, which Litestream never reads) names the holder, its
// advertised URL, an epoch and an expiry.
//
//   - acquire: a conditional create (PutIfAbsent) when no lease exists;
//   - renew: a conditional replace (PutIfMatch on the ETag) every TTL/3;
//   - take over: PutIfMatch with epoch+1, only once the lease has expired;
//   - release: PutIfMatch with an expiry in the past, so a waiter takes it
//     at its next poll instead of after the TTL;
//   - hand over: an instance started later than the holder writes a
//     takeover request into the record (RequestTakeover, a PutIfMatch that
//     keeps the expiry); the holder's next renewal meets the changed ETag,
//     reads the request and closes HandOver(): its owner finishes what is
//     queued, ships it and releases the lease, which stays reserved for the
//     requester for a while so that nobody else takes it first. A deploy's
//     new instance thus becomes the writer within one renewal interval,
//     without a network route to the old one and without its SIGTERM.
//
// A holder that cannot renew before its local deadline stops writing at
// once (Valid is false: suspended); a renewal that finds the object changed
// means the lease is lost, and Lost() is closed then. A suspended holder
// whose conditional replace later succeeds resumes: nobody else took the
// lease meanwhile (the ETag proves it), so its history is still the one. The local deadline is measured on the
// monotonic clock from the moment the last successful renewal was *sent*,
// minus a safety margin, so the holder always stops before a contender
// (which compares the stored expiry with its own wall clock) may take over,
// provided clocks agree to within the margin. The conditional create of each
// LTX file remains the last line of defence if they do not. GuardStore is
// how a holder keeps that promise: a store that refuses every write once
// the lease no longer holds. Table keeps the leases one process holds, by
// database name, for the server and the sidecar alike.
//
// It imports replica and the standard library only.
package lease

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// Key is the lease object's key, relative to a database's replica root.
const Key = replica.SluiceDir + "/lease"

// DefaultTTL is how long a lease lasts without renewal.
const DefaultTTL = 10 * time.Second

// Record is the lease object's content.
type Record struct {
	Holder  string    `json:"holder"`
	URL     string    `json:"url,omitempty"` // where the holder takes writes (forwarding)
	Epoch   uint64    `json:"epoch"`         // +1 on every change of holder
	Expires time.Time `json:"expires"`
	// Started is when the holder's process started: only a later one may
	// ask it to hand over, so two overlapping instances never pass the
	// lease back and forth.
	Started time.Time `json:"started,omitempty"`
	// Takeover is a newer instance's request for the lease; after a release
	// it reserves the lease for that instance until Takeover.Until.
	Takeover *Takeover `json:"takeover,omitempty"`
	// Final, set by a release after the holder shipped everything, is the
	// replica's position then: the next holder checks a copy it already
	// has (a follower's) against it instead of restoring from the bucket.
	Final *Final `json:"final,omitempty"`
	// HandedBy names the holder that wrote this record for the one it
	// names (HandTo): that one takes it as written, without a write of its
	// own, while it has not expired.
	HandedBy string `json:"handed_by,omitempty"`
}

// Successor is an instance waiting for the lease, which the holder may
// hand it to when it stops (HandTo).
type Successor struct {
	Holder  string    `json:"holder"`
	URL     string    `json:"url,omitempty"`
	Started time.Time `json:"started"`
}

// Final is the position a holder released the lease at: every TXID up to
// TXID is in the bucket, and the database there has Checksum (LTX's
// rolling checksum of its pages).
type Final struct {
	TXID     uint64 `json:"txid"`
	Checksum uint64 `json:"checksum"`
}

// Takeover is a request for the lease from a newer instance.
type Takeover struct {
	Holder  string    `json:"holder"`
	URL     string    `json:"url,omitempty"`
	Started time.Time `json:"started"`
	Until   time.Time `json:"until"` // the request (and the reservation after a release) lapses then
}

// newer reports whether an instance started at started (holder id) comes
// after the one that started at than (id thanID). Equal starts (one
// process's leases) are neither: nobody asks, as before takeovers existed.
func newer(started time.Time, id string, than time.Time, thanID string) bool {
	return started.After(than) && id != thanID
}

// reservedForOther reports whether a live takeover request keeps the lease
// for an instance other than holder.
func (r Record) reservedForOther(holder string, now time.Time) bool {
	t, ok := r.reservedFor(now)
	return ok && t.Holder != holder
}

// reservedFor returns the instance a released lease is kept for, if any.
func (r Record) reservedFor(now time.Time) (Takeover, bool) {
	if r.Takeover == nil || !now.Before(r.Takeover.Until) {
		return Takeover{}, false
	}
	return *r.Takeover, true
}

// Expired reports whether the lease is free to take at now.
func (r Record) Expired(now time.Time) bool { return !now.Before(r.Expires) }

// Released reports whether the holder gave the lease up (expiry set in the
// past by Release rather than by time running out).
func (r Record) Released() bool { return r.Expires.IsZero() || r.Expires.Unix() <= 1 }

// ErrHeld: another instance holds an unexpired lease. Errors wrapping it
// are *HeldError, which carries the holder's record.
var ErrHeld = errors.New("the database's lease is held by another instance")

// ErrLost: this instance no longer holds the lease; it must stop writing.
var ErrLost = errors.New("lease lost: another instance may be writing; stop writing")

// ErrLate: an upload was accepted by the store only after this holder's
// lease deadline, when another instance may already hold the lease: its
// writes must not be acknowledged as if nothing happened (the file is in
// the history; the new holder adopts it).
var ErrLate = errors.New("uploaded after this instance's lease deadline: another instance may hold the lease by now")

// HeldError says who holds the lease.
type HeldError struct {
	Store  string
	Record Record
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s: holder %q (url %q, epoch %d) until %s", Key+" in "+e.Store+" is held by another instance",
		e.Record.Holder, e.Record.URL, e.Record.Epoch, e.Record.Expires.Format(time.RFC3339Nano))
}

func (e *HeldError) Unwrap() error { return ErrHeld }

// Options configure a lease. Holder must be unique per process (NewHolderID).
type Options struct {
	Holder string
	URL    string
	TTL    time.Duration // [DefaultTTL]
	// Poll is how often Acquire looks at a held lease [250ms]: a released
	// lease is taken within one poll.
	Poll time.Duration
	// Started is when this instance started [the process's start]: a
	// holder hands over only to an instance started after it.
	Started time.Time
	Logger  *slog.Logger
}

// processStart is the default Options.Started.
var processStart = time.Now()

func (o Options) withDefaults() Options {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Started.IsZero() {
		o.Started = processStart
	}
	return o
}

// margin is how long before the stored expiry the holder stops writing.
func (o Options) margin() time.Duration { return o.TTL / 5 }

// NewHolderID returns "<hostname>-<pid>-<random>", unique per call.
func NewHolderID() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Read returns the current lease record and its ETag. A database without a
// lease object is an error wrapping replica.ErrNotFound.
func Read(ctx context.Context, store replica.Store) (Record, string, error) {
	// One request where the store gives the ETag with the body: the lease
	// is read on every hand-over's path, twice after a crash.
	rc, info, err := replica.GetInfo(ctx, store, Key)
	if err != nil {
		return Record{}, "", fmt.Errorf("read lease %s in %s: %w", Key, store, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 64<<10))
	if err != nil {
		return Record{}, "", fmt.Errorf("read lease %s in %s: %w", Key, store, err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, "", fmt.Errorf("lease %s in %s is not valid JSON (%v); delete it to reset the lease", Key, store, err)
	}
	// Where the ETag came from a Stat before the Get and the object changed
	// between them, the ETag is stale and the next PutIfMatch fails safely.
	return rec, info.ETag, nil
}

func encode(rec Record) []byte {
	b, _ := json.Marshal(rec)
	return b
}

// Lease is a held lease, renewed in the background until Release or loss.
type Lease struct {
	store replica.Store
	opts  Options

	mu       sync.Mutex
	rec      Record
	etag     string
	deadline time.Time // monotonic: stop writing at this instant
	lostErr  error

	lost     chan struct{} // closed on loss or release
	released chan struct{} // closed once the bucket says released (after Release's write)
	handOver chan struct{} // closed when a newer instance asked for the lease
	handed   *Final        // the previous holder's Final, when this lease was taken from its release
	stop     chan struct{}
	done     chan struct{}
}

// TryAcquire takes the lease if it is free (absent, expired or released)
// and starts renewing it. A lease held by another instance is a *HeldError.
func TryAcquire(ctx context.Context, store replica.Store, opts Options) (*Lease, error) {
	opts = opts.withDefaults()
	if opts.Holder == "" {
		return nil, errors.New("lease: Options.Holder is empty; use lease.NewHolderID()")
	}
	cur, etag, err := Read(ctx, store)
	exists := true
	if errors.Is(err, replica.ErrNotFound) {
		exists = false
	} else if err != nil {
		return nil, err
	}
	return tryAcquireFrom(ctx, store, opts, cur, etag, exists)
}

// tryAcquireFrom is TryAcquire once the stored lease is known: cur with
// etag (or no object, !exists). Its writes are conditional on that ETag,
// so a record that is no longer the stored one only costs a refusal.
func tryAcquireFrom(ctx context.Context, store replica.Store, opts Options, cur Record, etag string, exists bool) (*Lease, error) {
	opts = opts.withDefaults()
	if exists && cur.HandedBy != "" && cur.Holder == opts.Holder && !cur.Expired(time.Now()) {
		return takeHanded(store, opts, cur, etag), nil
	}
	if exists && !cur.Expired(time.Now()) && cur.Holder != opts.Holder {
		return nil, &HeldError{Store: store.String(), Record: cur}
	}
	if t, ok := cur.reservedFor(time.Now()); ok && exists && cur.Released() && t.Holder != opts.Holder {
		// Handed over to a newer instance, which takes it at its next poll.
		return nil, &HeldError{Store: store.String(), Record: Record{Holder: t.Holder, URL: t.URL, Epoch: cur.Epoch,
			Expires: t.Until, Started: t.Started}}
	}
	sent := time.Now()
	rec := Record{Holder: opts.Holder, URL: opts.URL, Epoch: cur.Epoch + 1, Expires: sent.Add(opts.TTL).UTC(),
		Started: opts.Started.UTC()}
	body := encode(rec)
	var info replica.ObjectInfo
	var err error
	if exists {
		info, err = store.PutIfMatch(ctx, Key, bytes.NewReader(body), int64(len(body)), etag)
	} else {
		info, err = store.PutIfAbsent(ctx, Key, bytes.NewReader(body), int64(len(body)))
	}
	if errors.Is(err, replica.ErrPreconditionFailed) || errors.Is(err, replica.ErrExists) || errors.Is(err, replica.ErrNotFound) {
		// Someone else changed it first: report who.
		if now, _, rerr := Read(ctx, store); rerr == nil {
			return nil, &HeldError{Store: store.String(), Record: now}
		}
		return nil, &HeldError{Store: store.String(), Record: cur}
	}
	if err != nil {
		return nil, fmt.Errorf("acquire lease %s in %s: %w", Key, store, err)
	}
	if info.ETag == "" {
		return nil, fmt.Errorf("acquire lease %s in %s: the store returned no ETag, so the lease cannot be renewed safely", Key, store)
	}
	opts.Logger.Info("lease acquired", "replica", store.String(), "holder", rec.Holder, "epoch", rec.Epoch,
		"previous_holder", cur.Holder)
	return startLease(store, opts, rec, info.ETag, sent.Add(opts.TTL-opts.margin()), handedFinal(cur, exists)), nil
}

// Acquire waits until the lease is free and takes it, polling every
// Options.Poll, and trying again at the very moment the holder's lease
// expires when that comes first (a crashed holder is replaced one TTL
// after its last renewal, not a poll later). It returns ctx's error if ctx
// ends first; onHeld (may be nil) is called with each holder seen while
// waiting.
func Acquire(ctx context.Context, store replica.Store, opts Options, onHeld func(Record)) (*Lease, error) {
	return acquire(ctx, store, opts, onHeld, nil, nil)
}

func knownRecord(known func() (Record, string, bool)) (Record, string, bool) {
	if known == nil {
		return Record{}, "", false
	}
	return known()
}

// acquire is Acquire that also tries again whenever wake receives: someone
// told this waiter that the holder released the lease.
// known, if set, returns the record and ETag a waker said the bucket holds
// (the holder's own word on its release): the try then skips the read.
func acquire(ctx context.Context, store replica.Store, opts Options, onHeld func(Record), wake <-chan struct{},
	known func() (Record, string, bool)) (*Lease, error) {
	opts = opts.withDefaults()
	for {
		var l *Lease
		var err error
		if rec, etag, ok := knownRecord(known); ok {
			l, err = tryAcquireFrom(ctx, store, opts, rec, etag, true)
		} else {
			l, err = TryAcquire(ctx, store, opts)
		}
		var held *HeldError
		wait := opts.Poll
		switch {
		case err == nil:
			return l, nil
		case errors.As(err, &held):
			if onHeld != nil {
				onHeld(held.Record)
			}
			wait = untilExpiry(held.Record, opts.Poll, time.Now())
		default:
			opts.Logger.Warn("acquiring lease failed; retrying", "replica", store.String(), "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for lease %s in %s: %w (last: %v)", Key, store, ctx.Err(), err)
		case <-t.C:
		case <-wake:
			t.Stop()
		}
	}
}

// untilExpiry is how long a waiter sleeps after seeing rec: one poll, or
// less if the lease (or a reservation for another instance) ends sooner,
// then just past that instant.
func untilExpiry(rec Record, poll time.Duration, now time.Time) time.Duration {
	if rec.Expires.IsZero() {
		return poll
	}
	if d := rec.Expires.Sub(now) + time.Millisecond; d < poll {
		return max(d, time.Millisecond)
	}
	return poll
}

// takeHanded makes this instance the holder of cur, the record a stopping
// holder wrote for it (HandTo), without writing: the record already says
// so, and its ETag is what the first renewal replaces. The local deadline
// is measured from the stored expiry on this instance's clock (clocks agree
// within the margin, as everywhere here), and never beyond one TTL.
func takeHanded(store replica.Store, opts Options, cur Record, etag string) *Lease {
	now := time.Now()
	mine := cur
	mine.Final, mine.HandedBy = nil, ""
	var handed *Final
	if cur.Final != nil {
		f := *cur.Final
		handed = &f
	}
	opts.Logger.Info("lease acquired", "replica", store.String(), "holder", cur.Holder, "epoch", cur.Epoch,
		"previous_holder", cur.HandedBy, "handed_over", true)
	return startLease(store, opts, mine, etag, now.Add(min(cur.Expires.Sub(now), opts.TTL)-opts.margin()), handed)
}

// startLease returns the lease held as rec (stored with etag) until
// deadline, renewing it in the background.
func startLease(store replica.Store, opts Options, rec Record, etag string, deadline time.Time, handed *Final) *Lease {
	l := &Lease{store: store, opts: opts, rec: rec, etag: etag, deadline: deadline, handed: handed,
		lost: make(chan struct{}), released: make(chan struct{}), handOver: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.renewLoop()
	return l
}

// handedFinal is cur's Final when cur was released with one: taking the
// lease by a conditional replace of that very record proves nobody wrote
// the database between that release and this holder.
func handedFinal(cur Record, exists bool) *Final {
	if !exists || !cur.Released() || cur.Final == nil {
		return nil
	}
	f := *cur.Final
	return &f
}

// Handed returns the position the previous holder released the lease at,
// if it was taken from such a release (Record.Final).
func (l *Lease) Handed() (Final, bool) {
	if l.handed == nil {
		return Final{}, false
	}
	return *l.handed, true
}

// Record returns the lease as last written by this holder.
func (l *Lease) Record() Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec
}

// Valid reports whether this instance may still write: not lost, not
// released, and before the local deadline.
func (l *Lease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr == nil && time.Now().Before(l.deadline)
}

// Lost is closed when the lease is lost or released.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// HandOver is closed when a renewal found a takeover request from a newer
// instance: the owner should finish what is queued, ship it and Release,
// which reserves the lease for the requester. Renewals go on meanwhile.
func (l *Lease) HandOver() <-chan struct{} { return l.handOver }

// Err says why the lease ended (wrapping ErrLost), or nil while it is held.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

func (l *Lease) markLost(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr == nil {
		l.lostErr = err
		close(l.lost)
	}
}

// renewLoop renews every TTL/3; after a failed attempt it retries every
// TTL/10. Past the local deadline without a renewal the lease is suspended
// (Valid is false: nothing is written or acknowledged) but not given up:
// the next renewal that succeeds is a conditional replace of the object as
// this holder last wrote it, which proves nobody took the lease meanwhile,
// and resumes it; one that finds the object changed ends it (Lost).
func (l *Lease) renewLoop() {
	defer close(l.done)
	interval := l.opts.TTL / 3
	retry := max(l.opts.TTL/10, 10*time.Millisecond)
	timer := time.NewTimer(interval)
	defer timer.Stop()
	suspended := false
	for {
		l.mu.Lock()
		deadline := l.deadline
		l.mu.Unlock()
		var expire <-chan time.Time
		if !suspended {
			expire = time.After(time.Until(deadline))
		}
		select {
		case <-l.stop:
			return
		case <-expire:
			suspended = true
			l.opts.Logger.Error("LEASE SUSPENDED: not renewed before its deadline; this instance writes and acknowledges nothing until a renewal proves no other instance took it",
				"replica", l.store.String())
			continue
		case <-timer.C:
		}
		err := l.renew(deadline)
		switch {
		case err == nil:
			if suspended {
				suspended = false
				l.opts.Logger.Warn("lease renewed after its deadline: no other instance took it; writing again", "replica", l.store.String())
			}
			timer.Reset(interval)
		case errors.Is(err, ErrLost):
			l.markLost(err)
			l.opts.Logger.Error("LEASE LOST: another instance took it; this instance stops writing", "replica", l.store.String(), "err", err)
			return
		default:
			l.opts.Logger.Warn("lease renewal failed; retrying", "replica", l.store.String(), "err", err,
				"deadline_in", time.Until(deadline).Round(time.Millisecond))
			timer.Reset(retry)
		}
	}
}

// awaitRenewal waits while the lease is suspended: until a renewal resumes
// it, it is lost or released, or ctx ends (its error).
func (l *Lease) awaitRenewal(ctx context.Context) error {
	for l.Suspended() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.lost:
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// Suspended reports whether the lease missed its deadline without being
// lost: writes wait (retryable) until a renewal resumes it or it is lost.
func (l *Lease) Suspended() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr == nil && !time.Now().Before(l.deadline)
}

// renew extends the lease by one TTL from now.
func (l *Lease) renew(deadline time.Time) error {
	// Before the deadline a renewal may not outlast it; after it, each
	// attempt gets half a TTL.
	until := deadline
	if !time.Now().Before(deadline) {
		until = time.Now().Add(l.opts.TTL / 2)
	}
	ctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	l.mu.Lock()
	rec, etag := l.rec, l.etag
	l.mu.Unlock()
	sent := time.Now()
	rec.Expires = sent.Add(l.opts.TTL).UTC()
	rec, info, err := l.putMine(ctx, rec, etag)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.rec, l.etag, l.deadline = rec, info.ETag, sent.Add(l.opts.TTL-l.opts.margin())
	l.mu.Unlock()
	return nil
}

// putMine replaces the lease if it is still ours and returns what it wrote.
// A precondition failure may mean an earlier attempt succeeded but its
// answer was lost, or that a newer instance wrote a takeover request: if the
// stored record is still ours (same holder and epoch) it adopts its ETag
// (and the request, which it keeps in every later write and signals on
// HandOver) and retries.
func (l *Lease) putMine(ctx context.Context, rec Record, etag string) (Record, replica.ObjectInfo, error) {
	for attempt := 0; ; attempt++ {
		body := encode(rec)
		info, err := l.store.PutIfMatch(ctx, Key, bytes.NewReader(body), int64(len(body)), etag)
		if err == nil {
			return rec, info, nil
		}
		if !errors.Is(err, replica.ErrPreconditionFailed) && !errors.Is(err, replica.ErrNotFound) {
			return rec, replica.ObjectInfo{}, err
		}
		cur, curTag, rerr := Read(ctx, l.store)
		if rerr != nil && !errors.Is(rerr, replica.ErrNotFound) {
			return rec, replica.ObjectInfo{}, rerr
		}
		if rerr != nil || cur.Holder != rec.Holder || cur.Epoch != rec.Epoch || cur.Released() || attempt > 2 {
			return rec, replica.ObjectInfo{}, fmt.Errorf("%w: %s in %s now names holder %q epoch %d", ErrLost, Key, l.store, cur.Holder, cur.Epoch)
		}
		if t := cur.Takeover; t != nil && newer(t.Started, t.Holder, l.opts.Started, rec.Holder) && time.Now().Before(t.Until) {
			rec.Takeover = t
			l.signalHandOver(*t)
		}
		etag = curTag
	}
}

func (l *Lease) signalHandOver(t Takeover) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.handOver:
	default:
		l.opts.Logger.Info("a newer instance asks for the lease; handing over once what is queued is shipped",
			"replica", l.store.String(), "to", t.Holder, "url", t.URL)
		close(l.handOver)
	}
}

// RequestTakeover asks the holder of the lease, if it started before this
// instance (opts.Started), to hand the lease over at its next renewal. It
// reports whether a request of this instance is in place. It keeps the
// stored expiry: asking never extends nor shortens the holder's lease.
func RequestTakeover(ctx context.Context, store replica.Store, opts Options) (bool, error) {
	opts = opts.withDefaults()
	cur, etag, err := Read(ctx, store)
	if err != nil {
		return false, err
	}
	now := time.Now()
	if cur.Holder == opts.Holder || cur.Expired(now) || !newer(opts.Started, opts.Holder, cur.Started, cur.Holder) {
		return false, nil
	}
	if t := cur.Takeover; t != nil && now.Before(t.Until) {
		return t.Holder == opts.Holder, nil // one request at a time; the newest requester asks again when it lapses
	}
	cur.Takeover = &Takeover{Holder: opts.Holder, URL: opts.URL, Started: opts.Started.UTC(), Until: now.Add(2 * opts.TTL).UTC()}
	body := encode(cur)
	if _, err := store.PutIfMatch(ctx, Key, bytes.NewReader(body), int64(len(body)), etag); err != nil {
		if errors.Is(err, replica.ErrPreconditionFailed) || errors.Is(err, replica.ErrNotFound) {
			return false, nil // changed meanwhile (a renewal): asked again at the next poll
		}
		return false, fmt.Errorf("request takeover of %s in %s: %w", Key, store, err)
	}
	opts.Logger.Info("asked the lease holder to hand over", "replica", store.String(), "holder", cur.Holder, "epoch", cur.Epoch)
	return true, nil
}

// Release stops renewing and marks the lease free (expiry in the past) so a
// waiting instance takes it at its next poll. Call it only after the last
// write is uploaded. Releasing a lost lease is a no-op.
func (l *Lease) Release(ctx context.Context) error { return l.release(ctx, nil, nil) }

// ReleaseAt is Release by a holder that shipped everything it wrote, up to
// final, which the record keeps for the next holder (Handed).
func (l *Lease) ReleaseAt(ctx context.Context, final Final) error { return l.release(ctx, &final, nil) }

// HandTo is ReleaseAt that names next as the holder instead of leaving the
// lease free: one conditional write, with the epoch advanced and a full TTL
// from now, after which next holds it without a write of its own (it is
// told the record by the push stream, or reads it). A live takeover request
// for another instance is honoured (Accepts): the lease is released for
// it instead. If the write meets a changed object, it releases as Release.
func (l *Lease) HandTo(ctx context.Context, next Successor, final Final) error {
	return l.release(ctx, &final, &next)
}

// Accepts reports whether HandTo may name s: no live takeover request of
// another instance reserves the lease.
func (l *Lease) Accepts(s Successor) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.rec.reservedForOther(s.Holder, time.Now())
}

func (l *Lease) release(ctx context.Context, final *Final, next *Successor) error {
	if !l.end("released") {
		return nil
	}
	l.mu.Lock()
	rec, etag := l.rec, l.etag
	l.mu.Unlock()
	if next != nil && next.Holder != "" && next.Holder != rec.Holder {
		err := l.handTo(ctx, rec, etag, *next, final)
		if err == nil {
			return nil
		}
		l.opts.Logger.Info("handing the lease over failed; releasing it instead", "replica", l.store.String(), "to", next.Holder, "err", err)
	}
	rec.Final = final
	rec.Expires = time.Unix(1, 0).UTC()
	if rec.Takeover != nil { // reserved for the requester until it lapses
		rec.Takeover.Until = time.Now().Add(l.opts.TTL).UTC()
	}
	rec, info, err := l.putMine(ctx, rec, etag)
	if err != nil {
		return fmt.Errorf("release lease %s in %s: %w (it expires by itself at %s)", Key, l.store, err, l.rec.Expires.Format(time.RFC3339))
	}
	l.mu.Lock()
	l.rec, l.etag = rec, info.ETag
	l.mu.Unlock()
	close(l.released)
	l.opts.Logger.Info("lease released", "replica", l.store.String(), "holder", rec.Holder, "epoch", rec.Epoch)
	return nil
}

// handTo writes the record naming next (release's first try).
func (l *Lease) handTo(ctx context.Context, cur Record, etag string, next Successor, final *Final) error {
	if cur.reservedForOther(next.Holder, time.Now()) {
		return fmt.Errorf("a takeover request reserves it for %s", cur.Takeover.Holder)
	}
	rec := Record{Holder: next.Holder, URL: next.URL, Epoch: cur.Epoch + 1, Expires: time.Now().Add(l.opts.TTL).UTC(),
		Started: next.Started.UTC(), Final: final, HandedBy: cur.Holder}
	body := encode(rec)
	info, err := l.store.PutIfMatch(ctx, Key, bytes.NewReader(body), int64(len(body)), etag)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.rec, l.etag = rec, info.ETag
	l.mu.Unlock()
	close(l.released)
	l.opts.Logger.Info("lease handed over", "replica", l.store.String(), "holder", cur.Holder, "to", next.Holder,
		"url", next.URL, "epoch", rec.Epoch)
	return nil
}

// end stops renewing and marks the lease ended for why; false if it had
// ended already (lost, released), when there is nothing left to write.
func (l *Lease) end(why string) bool {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
	if l.Err() != nil {
		return false
	}
	l.markLost(fmt.Errorf("%w: %s", ErrLost, why))
	return true
}

// Discard ends a lease taken for a database that turned out not to exist:
// it stops renewing and, while the lease is still this holder's, deletes
// its object, so that a name asked for and not found leaves nothing in the
// bucket. A lease no longer valid is released as Release does.
func (l *Lease) Discard(ctx context.Context) error {
	if !l.Valid() {
		return l.Release(ctx)
	}
	if !l.end("discarded (no such database)") {
		return nil
	}
	if err := l.store.Delete(ctx, Key); err != nil && !errors.Is(err, replica.ErrNotFound) {
		return fmt.Errorf("delete lease %s in %s: %w (it expires by itself at %s)", Key, l.store, err, l.Record().Expires.Format(time.RFC3339))
	}
	close(l.released)
	return nil
}

// ReleasedAs returns, once Released is closed, the record Release wrote
// and its ETag: what a waiter replaces to take the lease.
func (l *Lease) ReleasedAs() (Record, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec, l.etag
}

// Released is closed once Release has written the lease free (reserved
// for a takeover requester, if any): from then on a waiter that tries gets
// it. Tell waiters then, not at Lost, which closes before that write.
func (l *Lease) Released() <-chan struct{} { return l.released }
