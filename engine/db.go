package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/internal/sqliteconn"
	"github.com/superfly/ltx"
	"zombiezen.com/go/sqlite"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/wal"
)

// DB captures one SQLite database into one replica. Its methods are safe for
// concurrent use; they serialise on one mutex.
//
// Why frames cannot be lost between two Syncs (the read-transaction argument):
// one of readers[] always holds a read transaction. A reader holding WAL
// read-mark i>0 forbids a WAL restart or truncation (both need every read-mark
// 1..N exclusively) and any backfill past its mark, so every frame after the
// cursor stays in the log. A reader that got read-mark 0 got it only because
// the log was fully backfilled when it began; the frames then in the log were
// all captured already (each capture reads to the end of the log after its
// reader began). While mark 0 is held no backfill can happen at all (a
// checkpoint needs read-lock 0 exclusively), so the log can be restarted at
// most once — the restart itself needs a fully backfilled log, and nothing
// written after the restart can be backfilled — and a restart seen later (new
// salts) therefore means: the old log was fully captured, read the new one
// from its first frame. Rotation opens the new reader before ending the old
// one, so there is never a moment with no reader.
type DB struct {
	path, walPath string
	store         replica.Store
	opts          Options
	log           *slog.Logger

	// dbFile is the only descriptor sluice opens on the database file, kept
	// until every SQLite connection is closed: closing any descriptor of a
	// file drops all of this process's POSIX locks on it, SQLite's included,
	// which would let the application checkpoint and delete unshipped frames.
	dbFile *os.File
	// shmFile is the wal-index (-shm), read for the frames SQLite has made
	// visible (wal.ReadIndexMaxFrame). Kept open for the same reason: SQLite
	// holds its WAL locks as POSIX locks on this file. nil if there is none
	// (an application in exclusive locking mode keeps the index in memory).
	shmFile *os.File

	mu      sync.Mutex
	lock    *conn    // takes the write lock for checkpoints
	readers [2]*conn // readers[cur] holds the read transaction
	cur     int
	reading bool

	// Captured state: the database as of the last captured commit.
	pageSize  uint32
	commit    uint32
	checksums []ltx.Checksum // per page, index pgno-1; 0 for the lock page
	xor       ltx.Checksum   // XOR of checksums; the DB checksum is ChecksumFlag|xor
	txid      ltx.TXID       // TXID of the last captured file
	wcur      cursor         // WAL cursor just past the last captured commit frame
	// walAhead's state (the sidecar loop only): its last answer, and
	// the cursor offset at which it saw the log shorter than the cursor
	// (truncated and restarted since that capture).
	ahead struct {
		key aheadKey
		n   int64
	}
	walRestartedAt int64
	walIndex       map[uint32]int64 // pgno -> newest captured frame offset in the current WAL generation
	brokenAt       *cursor          // the chain was broken at this cursor on the previous capture
	resyncWhy      string           // non-empty: the next capture must resync by diff

	pos     ltx.Pos                 // last position accepted by the store
	posCopy atomic.Pointer[ltx.Pos] // pos, for Pos() without mu (Sync holds mu during uploads)
	pending *pendingFile            // captured, not yet accepted
	posFile positionFile            // <db>-sluice, rewritten after each upload
	fenced  error
	closed  bool
	// checkpointWarned: when a failing automatic checkpoint was last logged.
	// It is retried at every Sync; a full disk would log it every second.
	checkpointWarned time.Time

	// The pending file's size, for Unshipped() without mu.
	unshippedBytes, unshippedPages atomic.Int64
	pendingTXID                    atomic.Uint64 // the captured file waiting for the store; 0: none (see Captured)
	capMu                          sync.Mutex    // guards capMark, without waiting for mu (held by uploads)
	capMark                        CaptureMark

	// The pipeline (pipeline.go): files in flight, oldest first, guarded by
	// plMu, which uploads take without mu.
	plMu      sync.Mutex
	flights   []*flight
	plFenced  error         // a taken name met by an upload in flight
	plChanged chan struct{} // closed and replaced whenever the pipeline moves
	plWG      sync.WaitGroup

	stats statCounters

	shippedAll bool // set by Close (ShippedAll)
}

// Open starts capturing the database at path into store. The database file
// must exist; Open switches it to WAL mode if needed, reads it consistently
// and compares it with the replica's latest position (see Options.RequireMatch).
func Open(ctx context.Context, path string, store replica.Store, opts Options) (*DB, error) {
	opts = opts.withDefaults()
	var err error
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("database %s does not exist: create it (or restore it from the replica) before replicating: %w", path, err)
		}
		return nil, fmt.Errorf("stat database %s: %w", path, err)
	}
	db := &DB{
		path: path, walPath: path + "-wal", store: store, opts: opts,
		log:       opts.Logger.With("db", path),
		walIndex:  map[uint32]int64{},
		plChanged: make(chan struct{}),
	}
	if db.dbFile, err = os.Open(path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := db.openConns(ctx); err != nil {
		db.closeConns()
		if c := sqlite.ErrCode(err).ToPrimary(); c == sqlite.ResultNotADB || c == sqlite.ResultCorrupt {
			return nil, fmt.Errorf("database %s: %w (%v): give the path of the application's SQLite file", path, ErrNotDatabase, err)
		}
		return nil, err
	}
	if f, err := os.Open(path + "-shm"); err == nil {
		db.shmFile = f
	}
	replicaPos, err := db.findReplicaPos(ctx)
	if err != nil {
		db.closeConns()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if replicaPos.TXID != 0 && replicaPos.PostApplyChecksum == 0 {
		// Files without rolling checksums (sluice's and Litestream's): use the
		// checksum recorded when this database last shipped or was restored.
		replicaPos.PostApplyChecksum = recordedChecksum(path, store.String(), replicaPos.TXID)
	}
	// A full read can race a WAL restart (see view.readPage); it then fails
	// its own verification and is simply done again.
	for attempt := 1; ; attempt++ {
		err = db.start(replicaPos)
		if err == nil || !errors.Is(err, errChangedWhileReading) || attempt == 3 {
			break
		}
		if err = db.rotateRead(ctx); err != nil {
			break
		}
	}
	if err != nil {
		db.closeConns()
		return nil, err
	}
	if db.pending != nil {
		if err := db.upload(ctx); errors.Is(err, ErrFenced) {
			db.closeConns()
			return nil, err
		} else if err != nil {
			db.log.Warn("first upload failed; the next Sync retries it", "err", err)
		}
	}
	return db, nil
}

// findReplicaPos is the replica's newest position, after removing a
// previous writer's in-flight tail (Options.RemoveInFlight). One listing
// serves both: on a real bucket every LIST is a round trip on a new
// holder's way to its first write; none at all with Options.HandedPos.
func (db *DB) findReplicaPos(ctx context.Context) (ltx.Pos, error) {
	if p := db.opts.HandedPos; p != nil {
		return *p, nil
	}
	levels, err := replica.ListNewestLTX(ctx, db.store)
	if err != nil {
		return ltx.Pos{}, fmt.Errorf("read the replica's newest files: %w", err)
	}
	if levels, err = db.removeInFlightTail(ctx, levels); err != nil {
		return ltx.Pos{}, err
	}
	pos, err := db.replicaPos(ctx, levels)
	if err != nil {
		return ltx.Pos{}, fmt.Errorf("read the replica's position: %w", err)
	}
	return pos, nil
}

// replacedError reports, wrapping ErrReplaced, when the path no longer names
// the file opened at Open: SQLite connections keep following the old file
// (unlinked, or renamed away), so nothing written to the new one would ever
// be shipped. A stat per call; the sidecar checks once per interval.
func (db *DB) replacedError() error {
	opened, err := db.dbFile.Stat()
	if err != nil {
		return nil
	}
	now, err := os.Stat(db.path)
	if err == nil && os.SameFile(now, opened) {
		return nil
	}
	what := "another file took its place"
	if errors.Is(err, fs.ErrNotExist) {
		what = "it was deleted"
	} else if err != nil {
		return nil // cannot tell: the next check will
	}
	return fmt.Errorf("%w: %s (%s); the replica holds the old file up to TXID %s: restart replication to ship the file now at that path",
		ErrReplaced, db.path, what, db.Pos().TXID)
}

func (db *DB) openConns(ctx context.Context) error {
	var err error
	if db.lock, err = openConn(db.path); err != nil {
		return err
	}
	before := ""
	if err := execRows(ctx, db.lock, "PRAGMA journal_mode", func(s *sqlite.Stmt) { before = s.ColumnText(0) }); err != nil {
		return fmt.Errorf("read the journal mode of %s: %w", db.path, err)
	}
	mode := ""
	err = execRows(ctx, db.lock, "PRAGMA journal_mode=WAL", func(s *sqlite.Stmt) { mode = s.ColumnText(0) })
	if err != nil {
		return fmt.Errorf("set WAL mode on %s: %w", db.path, err)
	} else if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("set WAL mode on %s: journal mode stays %q (is another process holding it in exclusive mode?)", db.path, mode)
	}
	if !strings.EqualFold(before, "wal") {
		// WAL mode is stored in the file and outlives sluice: the
		// application's own setting changed, so say so once (the next
		// open finds WAL and says nothing).
		db.log.Info("switched the database to WAL mode: sluice reads each commit from the WAL to ship it; the mode is kept in the file",
			"path", db.path, "journal_mode_was", strings.ToUpper(before))
	}
	for i := range db.readers {
		if db.readers[i], err = openConn(db.path); err != nil {
			return err
		}
	}
	if err := beginRead(ctx, db.readers[0]); err != nil {
		return fmt.Errorf("begin the read transaction on %s: %w", db.path, err)
	}
	db.cur, db.reading = 0, true
	return nil
}

// closeConns closes the SQLite connections, then the database descriptor
// (in that order: see DB.dbFile).
func (db *DB) closeConns() {
	for _, c := range append([]*conn{db.lock}, db.readers[:]...) {
		if c != nil {
			_ = endTx(c)
			_ = sqliteconn.Close(c.Conn)
		}
	}
	db.lock, db.readers = nil, [2]*conn{}
	db.reading = false
	db.posFile.close()
	if db.dbFile != nil {
		_ = db.dbFile.Close()
		db.dbFile = nil
	}
	if db.shmFile != nil {
		_ = db.shmFile.Close()
		db.shmFile = nil
	}
}

// start reads the whole database and positions the DB against the replica.
func (db *DB) start(replicaPos ltx.Pos) error {
	v, closeFiles, err := db.openView()
	if err != nil {
		return err
	}
	defer closeFiles()
	if v.pageSize == 0 || v.commit == 0 {
		return fmt.Errorf("database %s has no pages yet: open it once the application has created it", db.path)
	}
	sums, err := v.checksums()
	if err != nil {
		return err
	}
	local := ltx.ChecksumFlag | xorAll(sums)
	if at := db.opts.CopyOfReplicaAt; at != 0 && at == replicaPos.TXID && replicaPos.PostApplyChecksum == 0 {
		replicaPos.PostApplyChecksum = local // built from the replica's files up to here, as a restore is
	}
	switch {
	case replicaPos.TXID == 0:
		db.log.Info("empty replica: shipping a snapshot", "replica", db.store.String(), "pages", v.commit)
	case replicaPos.PostApplyChecksum == local:
		db.log.Info("database matches the replica; continuing", "replica", db.store.String(), "txid", replicaPos.TXID.String())
		db.adopt(v, sums, replicaPos.TXID)
		db.setPos(replicaPos)
		return nil
	case db.opts.RequireMatch:
		return fmt.Errorf("%w: %s has checksum %s, replica %s is at TXID %s with checksum %s; restore the database from the replica",
			ErrDiverged, db.path, local, db.store, replicaPos.TXID, replicaPos.PostApplyChecksum)
	default:
		db.log.Warn("database differs from the replica: shipping every page as the next TXID",
			"replica", db.store.String(), "replica_txid", replicaPos.TXID.String(),
			"replica_checksum", replicaPos.PostApplyChecksum.String(), "local_checksum", local.String())
	}
	db.setPos(replicaPos)
	return db.captureView(v, sums, allPages(v.commit, v.pageSize), replicaPos)
}

// openView opens the database and WAL files and reads a consistent view.
// The database descriptor is db.dbFile (never closed here); only the WAL's,
// which SQLite does not lock, is opened and closed.
func (db *DB) openView() (*view, func(), error) {
	walFile, err := os.Open(db.walPath)
	if errors.Is(err, fs.ErrNotExist) {
		walFile = nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("open WAL %s: %w", db.walPath, err)
	}
	closeFiles := func() {
		if walFile != nil {
			walFile.Close()
		}
	}
	var committed io.ReaderAt
	if walFile != nil {
		if committed, err = db.committedFrames(walFile); err != nil {
			closeFiles()
			return nil, nil, err
		}
	}
	v, err := openView(db.dbFile, walFile, committed)
	if err != nil {
		closeFiles()
		return nil, nil, fmt.Errorf("read %s: %w", db.path, err)
	}
	return v, closeFiles, nil
}

// rotateRead begins a read transaction on the spare connection, then ends the
// old one: never a moment without one (see the DB doc comment).
func (db *DB) rotateRead(ctx context.Context) error {
	next := 1 - db.cur
	start := time.Now()
	if err := beginRead(ctx, db.readers[next]); err != nil {
		return fmt.Errorf("begin a read transaction on %s: %w", db.path, err)
	}
	if d := time.Since(start); d > time.Second {
		db.log.Warn("beginning a read transaction was slow", "took", d)
	}
	if db.reading {
		if err := endTx(db.readers[db.cur]); err != nil {
			db.log.Warn("end the previous read transaction", "err", err)
		}
	}
	db.cur, db.reading = next, true
	return nil
}

// Pos returns the last position accepted by the store. It takes no lock:
// a server's writer asks for it after every commit, while Sync holds the
// mutex for a whole upload.
func (db *DB) Pos() ltx.Pos {
	if p := db.posCopy.Load(); p != nil {
		return *p
	}
	return ltx.Pos{}
}

// setPos records the position the store accepted (under mu).
func (db *DB) setPos(pos ltx.Pos) {
	db.pos = pos
	db.posCopy.Store(&pos)
}

func (db *DB) usable() error {
	if db.fenced != nil {
		return db.fenced
	}
	if db.closed {
		return fmt.Errorf("database %s: replication is closed", db.path)
	}
	return nil
}

// Sync ships every committed frame not shipped yet as one LTX file and returns
// the position the store has accepted. With nothing new it makes no store
// request and takes no lock. After an ErrFenced it refuses every call.
func (db *DB) Sync(ctx context.Context) (ltx.Pos, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.usableFlights(); err != nil {
		return db.Pos(), err
	}
	if err := db.syncLocked(ctx); err != nil {
		return db.Pos(), err
	}
	if db.wcur.frames() >= int64(db.opts.CheckpointPages) {
		if err := db.checkpointLocked(ctx); errors.Is(err, ErrFenced) {
			return db.Pos(), err
		} else if err != nil && time.Since(db.checkpointWarned) >= time.Minute {
			db.checkpointWarned = time.Now()
			db.log.Warn("automatic checkpoint failed; retried at each upload, logged at most once a minute", "err", err)
		}
	}
	return db.Pos(), nil
}

// Changed reports whether Sync has anything to upload: a file captured
// but not accepted yet, or frames past the shipped ones in the WAL. It
// makes no store request, so an idle poll can ask before queueing for an
// upload.
func (db *DB) Changed() (bool, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.usable(); err != nil {
		return false, err
	}
	if db.pending != nil {
		return true, nil
	}
	db.plMu.Lock()
	inFlight := len(db.flights) > 0
	db.plMu.Unlock()
	if inFlight {
		return true, nil
	}
	return db.walChanged()
}

// walAhead is how many bytes of committed frames the WAL holds past the
// last captured commit: from the log's header and the wal-index's mxFrame
// (two small reads), so a log restarted over old frames, truncated or not,
// counts from its start. While neither the log nor the cursor changes it
// is one stat (a commit published just after that stat is seen at the next
// write, or shipped at the interval). Only the sidecar loop calls it.
func (db *DB) walAhead() int64 {
	db.mu.Lock()
	cur := db.wcur
	db.mu.Unlock()
	st, err := os.Stat(db.walPath)
	if err != nil {
		return 0
	}
	key := aheadKey{size: st.Size(), modNs: st.ModTime().UnixNano(), cur: cur}
	if db.ahead.key == key {
		return db.ahead.n
	}
	n, ok := int64(0), false
	if db.shmFile != nil {
		n, ok = db.walAheadFromIndex(cur)
	}
	if !ok {
		n = db.walAheadFromSize(cur, st.Size())
	}
	db.ahead.key, db.ahead.n = key, n
	return n
}

// aheadKey is what walAhead's answer depends on.
type aheadKey struct {
	size  int64
	modNs int64
	cur   cursor
}

func (db *DB) walAheadFromIndex(cur cursor) (int64, bool) {
	f, err := os.Open(db.walPath)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	hdr, err := wal.ReadHeader(f)
	if err != nil {
		return 0, false
	}
	mx, err := wal.ReadIndexMaxFrame(db.shmFile, hdr)
	if err != nil {
		return 0, false
	}
	end := hdr.FrameOffset(int64(mx) + 1)
	if cur.ok && hdr.SameSalts(cur.hdr) {
		return max(end-cur.off, 0), true
	}
	return end - wal.HeaderSize, true
}

// walAheadFromSize is walAhead without a wal-index (exclusive locking
// mode): one stat. A log shorter than the cursor was truncated and
// restarted: all of it is new until the next capture moves the cursor. A
// log restarted over old frames without shrinking reads 0 until it outgrows
// the old cursor.
func (db *DB) walAheadFromSize(cur cursor, size int64) int64 {
	off := cur.off
	if !cur.ok || db.walRestartedAt == off {
		off = 0
	}
	if size < off {
		db.walRestartedAt = off
		return size
	}
	return size - off
}

func (db *DB) syncLocked(ctx context.Context) error {
	if err := db.drainLocked(ctx); err != nil { // the pipeline's files first, then the one pending
		return err
	}
	if err := db.upload(ctx); err != nil {
		return err
	}
	changed, err := db.walChanged()
	if err != nil || !changed {
		return err
	}
	began := time.Now()
	if err := db.rotateRead(ctx); err != nil {
		return err
	}
	db.markCapture(began, time.Now()) // the new read transaction draws this capture's boundary
	start := time.Now()
	if err := db.capture(); err != nil {
		return err
	}
	if d := time.Since(start); d > time.Second {
		db.log.Warn("capture was slow", "took", d)
	}
	return db.upload(ctx)
}

// walChanged is the idle check: a stat-level look at the WAL header and the
// frame at the cursor, with no lock and no store request.
func (db *DB) walChanged() (bool, error) {
	if db.resyncWhy != "" {
		return true, nil
	}
	f, err := os.Open(db.walPath)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("open WAL %s: %w", db.walPath, err)
	}
	defer f.Close()
	hdr, err := wal.ReadHeader(f)
	if errors.Is(err, io.EOF) || errors.Is(err, wal.ErrInvalidHeader) {
		// An empty log: changed only if we still track frames of an old one.
		return db.wcur.ok && db.wcur.off > wal.HeaderSize, nil
	} else if err != nil {
		return false, fmt.Errorf("read WAL header of %s: %w", db.walPath, err)
	}
	if !db.wcur.ok || !hdr.SameSalts(db.wcur.hdr) {
		return true, nil
	}
	fh := make([]byte, wal.FrameHeaderSize)
	if n, _ := f.ReadAt(fh, db.wcur.off); n < len(fh) {
		// Nothing past the cursor, unless the log is shorter than the cursor
		// with the same salts: inconsistent, capture will resync.
		st, err := f.Stat()
		return err == nil && st.Size() < db.wcur.off, nil
	}
	frame, _ := wal.ParseFrameHeader(fh)
	return frame.Salt1 == hdr.Salt1 && frame.Salt2 == hdr.Salt2, nil
}

// Close ships what is left (unless fenced) and releases every lock and
// connection. It is safe to call twice.
func (db *DB) Close(ctx context.Context) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	var err error
	if db.usableFlights() == nil {
		err = db.syncLocked(ctx)
		db.shippedAll = err == nil && db.pending == nil
	}
	db.plWG.Wait() // no upload in flight touches the position file once it is closed
	db.dropFlights()
	db.closeConns()
	db.dropPending()
	db.closed = true
	return err
}

// ShippedAll reports, after Close, whether Close shipped every commit: the
// store holds the database exactly as it was closed, at Pos.
func (db *DB) ShippedAll() bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.closed && db.shippedAll
}
