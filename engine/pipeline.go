package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// Pipelined uploads. Begin captures what is committed and starts its
// conditional create without waiting for the uploads already in flight
// (Options.Pipeline bounds them), so at a real bucket's latency the next
// commit ships while the previous one is still on the wire. Flight.Wait
// then answers a file as accepted only once it and every earlier file are
// in the store: the shipped position only ever moves over a contiguous
// history, in TXID order (OnShip, the position file and Pos alike).
//
// A failed attempt leaves its file in the pipeline: every waiter for it or
// a later file is answered with the error (nothing of it acknowledged), and
// the next Begin (or Sync, Close, Snapshot) uploads the same bytes under
// the same name again before the position moves. Meanwhile the store may
// hold N+1 without N: a file in flight, never acknowledged, which a restore
// and a new writer recognise by its place (replica.InFlightTail). A taken
// name fences the writer for good, and the files it had landed past the
// taken one are deleted, so the new owner's history has none of them.

// MaxPipeline is the largest Options.Pipeline: no writer has more files in
// flight, which is what lets a restore tell in-flight files past a gap from
// damage (replica.MaxInFlight).
const MaxPipeline = replica.MaxInFlight

// flight is one captured file in the pipeline, oldest first in db.flights.
type flight struct {
	p      *pendingFile
	ended  chan struct{} // closed when the current attempt is over
	err    error         // the ended attempt's error (nil: accepted)
	landed bool          // accepted by the store (maybe not yet acknowledged)
	f      replica.LTXFile
	// For the debug line at acknowledgement: when the current attempt
	// began and when the store accepted it (the rest is the wait for an
	// earlier file).
	began, landedAt time.Time
}

// Flight is what Begin started: the newest file in the pipeline at that
// moment, or nothing when everything committed had already shipped.
type Flight struct {
	db  *DB
	fl  *flight // nil: nothing in flight
	pos ltx.Pos // the answer when fl is nil
}

// TXID is the TXID the Flight's file ships as (the shipped position when
// nothing was in flight).
func (f *Flight) TXID() ltx.TXID {
	if f.fl == nil {
		return f.pos.TXID
	}
	return f.fl.p.txid
}

// Wait returns once the Flight's file and every earlier one were accepted
// by the store (the shipped position, at least the Flight's TXID), or with
// the first error among them: that file stays in the pipeline and ships
// with the next Begin. It never acknowledges a file past one that is
// missing from the store.
func (f *Flight) Wait(ctx context.Context) (ltx.Pos, error) {
	if f.fl == nil {
		return f.pos, nil
	}
	db := f.db
	for {
		db.plMu.Lock()
		if db.plFenced != nil {
			err := db.plFenced
			db.plMu.Unlock()
			return db.Pos(), err
		}
		if f.fl.p.txid <= db.Pos().TXID {
			db.plMu.Unlock()
			return db.Pos(), nil
		}
		for _, fl := range db.flights {
			if fl.p.txid > f.fl.p.txid {
				break
			}
			if fl.err != nil && isClosed(fl.ended) {
				err := fl.err
				db.plMu.Unlock()
				return db.Pos(), err
			}
		}
		changed := db.plChanged
		db.plMu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return db.Pos(), fmt.Errorf("wait for TXID %s of %s: %w", f.fl.p.txid, db.path, replica.Stalled(ctx, ctx.Err()))
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Pipelined reports whether Begin may have more than one upload in flight.
func (db *DB) Pipelined() bool { return db.opts.Pipeline > 1 }

// Begin captures every committed frame not captured yet as one LTX file,
// starts its upload and returns without waiting for it: Wait on the result.
// It waits only while Options.Pipeline files are in flight. Files whose
// upload failed are uploaded again first, under the same names.
func (db *DB) Begin(ctx context.Context) (*Flight, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.usableFlights(); err != nil {
		return nil, err
	}
	if db.pending != nil { // left by Open or a legacy call: ship it before any later TXID
		if err := db.drainLocked(ctx); err != nil {
			return nil, err
		}
	}
	if err := db.roomLocked(ctx); err != nil {
		return nil, err
	}
	if db.wcur.frames() >= int64(db.opts.CheckpointPages) {
		// A checkpoint ships through the one-file path: empty the pipeline first.
		if err := db.drainLocked(ctx); err != nil {
			return nil, err
		}
		if err := db.checkpointLocked(ctx); errors.Is(err, ErrFenced) {
			return nil, err
		} else if err != nil && time.Since(db.checkpointWarned) >= time.Minute {
			db.checkpointWarned = time.Now()
			db.log.Warn("automatic checkpoint failed; retried at each upload, logged at most once a minute", "err", err)
		}
		if db.pending != nil {
			if err := db.upload(ctx); err != nil {
				return nil, err
			}
		}
	}
	changed, err := db.walChanged()
	if err != nil {
		return nil, err
	}
	if !changed {
		return db.newestFlight(), nil
	}
	began := time.Now()
	if err := db.rotateRead(ctx); err != nil {
		return nil, err
	}
	db.markCapture(began, time.Now())
	if err := db.capture(); err != nil {
		return nil, err
	}
	p := db.pending
	if p == nil {
		return db.newestFlight(), nil
	}
	db.pending = nil // the pipeline owns its bytes now
	fl := &flight{p: p}
	db.plMu.Lock()
	db.flights = append(db.flights, fl)
	db.publishFlightsLocked()
	db.launchLocked(ctx, fl)
	db.plMu.Unlock()
	return &Flight{db: db, fl: fl}, nil
}

// newestFlight is a Flight for everything captured so far.
func (db *DB) newestFlight() *Flight {
	db.plMu.Lock()
	defer db.plMu.Unlock()
	if n := len(db.flights); n > 0 {
		return &Flight{db: db, fl: db.flights[n-1]}
	}
	return &Flight{db: db, pos: db.Pos()}
}

// usableFlights is usable() plus a fence found by an upload in flight.
func (db *DB) usableFlights() error {
	db.plMu.Lock()
	if db.plFenced != nil && db.fenced == nil {
		db.fenced = db.plFenced
	}
	db.plMu.Unlock()
	return db.usable()
}

// roomLocked relaunches failed uploads and waits until fewer than
// Options.Pipeline files are in flight.
func (db *DB) roomLocked(ctx context.Context) error {
	for {
		db.plMu.Lock()
		if db.plFenced != nil {
			err := db.plFenced
			db.plMu.Unlock()
			return err
		}
		db.relaunchLocked(ctx)
		if len(db.flights) < max(db.opts.Pipeline, 1) {
			db.plMu.Unlock()
			return nil
		}
		head := db.flights[0].ended
		db.plMu.Unlock()
		select {
		case <-head:
		case <-ctx.Done():
			return fmt.Errorf("wait for an upload slot of %s: %w", db.path, replica.Stalled(ctx, ctx.Err()))
		}
	}
}

// relaunchLocked starts again every failed upload whose outcome is known
// to its waiters (under plMu).
func (db *DB) relaunchLocked(ctx context.Context) {
	for _, fl := range db.flights {
		if fl.err != nil && isClosed(fl.ended) {
			fl.p.uncertain = true // an attempt that failed may still have landed
			db.launchLocked(ctx, fl)
		}
	}
}

// drainLocked waits for every file in flight and uploads the failed ones
// again, in order, until the pipeline is empty: the one-file paths (Sync,
// checkpoint, Close, Snapshot) then see nothing in flight. Under mu.
func (db *DB) drainLocked(ctx context.Context) error {
	for {
		db.plMu.Lock()
		if db.plFenced != nil {
			if db.fenced == nil {
				db.fenced = db.plFenced
			}
			db.plMu.Unlock()
			return db.fenced
		}
		if len(db.flights) == 0 {
			db.plMu.Unlock()
			return db.upload(ctx) // a file the one-file path captured
		}
		var wait chan struct{}
		for _, fl := range db.flights {
			if !isClosed(fl.ended) {
				wait = fl.ended
				break
			}
		}
		if wait == nil {
			// Every attempt is over and the head failed: one more round.
			head := db.flights[0]
			db.relaunchLocked(ctx)
			wait = head.ended
			db.plMu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return fmt.Errorf("ship TXID %s of %s: %w", head.p.txid, db.path, replica.Stalled(ctx, ctx.Err()))
			}
			db.plMu.Lock()
			err := head.err
			db.plMu.Unlock()
			if err != nil {
				return fmt.Errorf("ship TXID %s of %s (will retry): %w", head.p.txid, db.path, err)
			}
			continue
		}
		db.plMu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("ship %s: %w", db.path, replica.Stalled(ctx, ctx.Err()))
		}
	}
}

// launchLocked starts one attempt at fl's upload (under plMu). The
// attempt's deadline is ctx's; cancelling ctx does not stop it, since the
// caller of Begin returns long before the upload ends.
func (db *DB) launchLocked(ctx context.Context, fl *flight) {
	fl.ended, fl.err, fl.began = make(chan struct{}), nil, time.Now()
	actx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if d, ok := ctx.Deadline(); ok {
		actx, cancel = context.WithDeadline(actx, d)
	}
	db.plWG.Add(1)
	go func() {
		defer db.plWG.Done()
		defer cancel()
		f, err := db.attempt(actx, fl.p)
		db.plMu.Lock()
		defer db.plMu.Unlock()
		fl.err, fl.f = err, f
		if err == nil {
			fl.landed, fl.landedAt = true, time.Now()
		}
		close(fl.ended)
		if errors.Is(err, ErrFenced) && db.plFenced == nil {
			db.plFenced = err
			go db.cleanUpAfterFence(fl.p.txid)
		}
		db.advanceLocked()
	}()
}

// attempt uploads one file, for upload() and for a file in flight: only a
// stalled attempt is retried here (other errors were already retried by the
// store's client, and the caller has its own schedule); a taken name after
// an uncertain attempt (one that may have landed with only its answer lost)
// is read back, and a name another writer took is ErrFenced.
func (db *DB) attempt(ctx context.Context, p *pendingFile) (replica.LTXFile, error) {
	backoff := 100 * time.Millisecond
	var f replica.LTXFile
	var err error
	for n := 1; ; n++ {
		f, err = db.uploadOnce(ctx, p)
		if err == nil || !errors.Is(err, replica.ErrStalled) || n == uploadAttempts || ctx.Err() != nil {
			break
		}
		p.uncertain = true
		db.log.Warn("upload attempt failed; retrying the same TXID", "txid", p.txid.String(), "attempt", n, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff *= 4
	}
	if errors.Is(err, replica.ErrExists) && p.uncertain {
		switch ours, cerr := db.storedIsOurs(ctx, p); {
		case cerr != nil:
			err = fmt.Errorf("%s exists after an uncertain attempt and cannot be read back: %w", replica.LTXKey(0, p.txid, p.txid), cerr)
		case ours:
			err = nil
			f = replica.LTXFile{Level: 0, MinTXID: p.txid, MaxTXID: p.txid, Size: p.data.size, Key: replica.LTXKey(0, p.txid, p.txid)}
		}
	}
	switch {
	case errors.Is(err, replica.ErrExists):
		db.log.Error("replica fenced: another writer shipped the same TXID; this database stops shipping",
			"replica", db.store.String(), "txid", p.txid.String())
		return f, fmt.Errorf("%w: database %s, TXID %s: %v; stop this writer and restore from the replica before writing again",
			ErrFenced, db.path, p.txid, err)
	case err != nil:
		p.uncertain = true
		db.log.Warn("upload failed; will retry the same TXID", "txid", p.txid.String(), "err", err)
		return f, fmt.Errorf("ship TXID %s of %s (will retry): %w", p.txid, db.path, err)
	}
	return f, nil
}

// advanceLocked moves the shipped position over every file at the head of
// the pipeline that the store accepted, in TXID order, and wakes the
// waiters (under plMu).
func (db *DB) advanceLocked() {
	for len(db.flights) > 0 && db.plFenced == nil {
		fl := db.flights[0]
		if !fl.landed {
			break
		}
		db.flights[0] = nil
		db.flights = db.flights[1:]
		p := fl.p
		body := p.data.small()
		p.data.close()
		db.setPos(p.post)
		if err := db.posFile.record(db.path, db.store.String(), p.post); err != nil {
			db.log.Warn("cannot record the shipped position; a restart will re-upload every page", "err", err)
		}
		db.log.Debug("shipped", "txid", p.txid.String(), "pages", p.pages, "bytes", p.data.size,
			"upload", fl.landedAt.Sub(fl.began), "held_for_earlier", time.Since(fl.landedAt))
		if db.opts.OnShip != nil {
			db.opts.OnShip(fl.f, body)
		}
	}
	if db.plFenced != nil {
		for _, fl := range db.flights {
			if isClosed(fl.ended) {
				fl.p.data.close()
			}
		}
	}
	db.publishFlightsLocked()
	close(db.plChanged)
	db.plChanged = make(chan struct{})
}

// publishFlightsLocked updates what Captured and Unshipped report.
func (db *DB) publishFlightsLocked() {
	var bytes, pages int64
	newest := uint64(0)
	for _, fl := range db.flights {
		bytes += fl.p.data.size
		pages += int64(fl.p.pages)
		newest = uint64(fl.p.txid)
	}
	db.unshippedBytes.Store(bytes)
	db.unshippedPages.Store(pages)
	db.pendingTXID.Store(newest)
}

// cleanUpAfterFence deletes the files this writer landed past the TXID it
// lost: they continue its own history, not the new owner's, and left in
// place they would take the new owner's next names. A delete that fails
// (the lease's guard refuses it once the lease is lost) leaves them to the
// next writer, which removes in-flight files past a gap when it opens.
func (db *DB) cleanUpAfterFence(lost ltx.TXID) {
	db.plWG.Wait()
	db.plMu.Lock()
	var keys []string
	for _, fl := range db.flights {
		if fl.landed && fl.p.txid > lost {
			keys = append(keys, fl.f.Key)
		}
	}
	db.plMu.Unlock()
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, k := range keys {
		if err := db.store.Delete(ctx, k); err != nil {
			db.log.Warn("cannot delete a file this fenced writer uploaded past the TXID it lost; the next writer removes it", "key", k, "err", err)
			continue
		}
		db.log.Warn("deleted a file this fenced writer uploaded past the TXID it lost (never acknowledged)", "key", k)
	}
}

// removeInFlightTail deletes, before this writer takes its position from
// the replica, the files a previous writer had in flight past a TXID it
// never landed (replica.InFlightTail): they were never acknowledged, and
// left in place they would take this writer's next names. The lease makes
// this safe: the previous writer acknowledges nothing past its deadline,
// which passed before this writer could take the lease. levels is the
// replica's newest files (replica.ListNewestLTX); it returns them without
// the ones it removed.
func (db *DB) removeInFlightTail(ctx context.Context, levels [][]replica.LTXFile) ([][]replica.LTXFile, error) {
	if !db.opts.RemoveInFlight {
		return levels, nil
	}
	end, tail := replica.InFlightTail(levels)
	if len(tail) == 0 {
		return levels, nil
	}
	newest := tail[len(tail)-1].MaxTXID
	if recordedChecksum(db.path, db.store.String(), newest) != 0 {
		// This file shipped them: they are its acknowledged history and a
		// missing file among them is damage, which it heals (heal.go).
		return levels, nil
	}
	if open, err := replica.LeaseOpen(ctx, db.store); err != nil {
		return nil, err
	} else if !open {
		return levels, nil
	}
	keys := make([]string, len(tail))
	for i, f := range tail {
		keys[i] = f.Key
	}
	if err := db.store.Delete(ctx, keys...); err != nil {
		return nil, fmt.Errorf("remove the files a previous writer had in flight past TXID %s (never acknowledged): %w", end, err)
	}
	db.log.Warn("removed the files a previous writer had in flight past a TXID it never landed (never acknowledged); the history continues from the gap",
		"replica", db.store.String(), "txid", end.String(), "removed", len(keys), "first", keys[0])
	// The listing without them: the position is the gap's.
	kept := make([][]replica.LTXFile, len(levels))
	copy(kept, levels)
	kept[0] = nil
	for _, f := range levels[0] {
		if f.MaxTXID <= end {
			kept[0] = append(kept[0], f)
		}
	}
	return kept, nil
}

// dropFlights releases the bytes of the files still in the pipeline once
// no upload runs (Close): what did not reach the store stays unshipped.
func (db *DB) dropFlights() {
	db.plMu.Lock()
	defer db.plMu.Unlock()
	for _, fl := range db.flights {
		fl.p.data.close()
	}
	db.flights = nil
}
