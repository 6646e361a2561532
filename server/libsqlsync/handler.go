package libsqlsync

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/auth"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/httperr"
	"github.com/sluicedb/sluice/server/httpjson"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// Options configure a Handler.
type Options struct {
	Host    *dbhost.Host
	Store   replica.Store // the server's bucket; each database is replica.Sub(Store, name)
	History *History
	// Dir holds the whole-database images bootstraps and far-behind
	// clients are sent (one per database, replaced when outdated).
	Dir string
	// WriteError answers a failed request the server's way.
	WriteError func(w http.ResponseWriter, r *http.Request, err error)
	// Follower, if set, returns the copy name is served from when this
	// instance follows it (History being fed the files it applies); ok
	// false: Host's database, written here.
	Follower func(ctx context.Context, name string) (db dbhost.Database, ok bool, err error)
	// Observe, if set, hears every answer to /export and /sync: which
	// answer ("export", "diff", "database", "end") and the bytes of pages
	// it sent (operators and benchmarks read what a sync costs).
	Observe func(db, answer string, bytes int64)
}

// Handler answers the sync endpoints of every database.
type Handler struct {
	opts    Options
	mu      sync.Mutex
	images  map[string]*image
	closing chan struct{} // closed by Close: waiting syncs answer at once
	waiting atomic.Int64  // syncs held in waitForNext
	contMu  sync.Mutex
	cont    map[string][2]uint64 // see sent
	fillMu  sync.Mutex           // one fillGap at a time
	close   sync.Once
}

// image is a restore of one database at one TXID, shared by every client
// that needs the whole database at that point.
type image struct {
	mu    sync.Mutex // held while restoring: concurrent clients wait for one restore
	txid  uint64
	path  string
	pages uint32
	used  time.Time // under Handler.mu
}

// New returns the handler.
func New(opts Options) *Handler {
	_ = os.RemoveAll(opts.Dir) // images an earlier run left; rebuilt on demand
	return &Handler{opts: opts, images: map[string]*image{}, closing: make(chan struct{})}
}

// Close answers every sync waiting for the next transaction now (the
// server is shutting down), and every later one without waiting.
func (h *Handler) Close() { h.close.Do(func() { close(h.closing) }) }

// AnswerHeader says which answer a sync request got: "diff" (the pages
// changed since its generation), "database" (every page) or "end" (end of
// generation), for tests and for operators reading traces.
const AnswerHeader = "Sluice-Sync-Answer"

// frameHeaderSize is a WAL frame header: page number, database size after
// a commit (0 otherwise), salts and checksums, which libSQL's client ignores.
const frameHeaderSize = 24

// database authorises the request (reading is enough: a sync only reads)
// and opens the database it names. A database whose pages the clients
// cannot take is refused, except by /info (info): a client refused there
// falls back to libSQL's other replication protocol and reports only a
// handshake timeout, while the refusal of /export reaches the user.
func (h *Handler) database(r *http.Request, info bool) (string, uint64, error) {
	name := r.PathValue("name")
	if err := dbhost.ValidateName(name); err != nil {
		return "", 0, err
	}
	if !auth.FromContext(r.Context()).CanRead(name) {
		return "", 0, dberr.ForDatabase(dberr.CodeForbidden, name, "this token may not read database \""+name+"\", so it may not sync an embedded replica of it")
	}
	pos, pageSize, err := h.position(r.Context(), name)
	if err != nil {
		return "", 0, err
	}
	if pageSize != PageSize {
		if !info {
			return "", 0, errPageSizeFor(name, pageSize)
		}
		return name, pos, nil
	}
	if pos > 0 && !h.opts.History.known(name) {
		h.seedWindow(r.Context(), name, pos)
	}
	return name, pos, nil
}

// position is the TXID name is served at (its follower's, or its own) and
// its page size.
func (h *Handler) position(ctx context.Context, name string) (uint64, int64, error) {
	var db dbhost.Database
	if h.opts.Follower != nil {
		f, ok, err := h.opts.Follower(ctx, name)
		if err != nil {
			return 0, 0, err
		}
		if ok {
			db = f
		}
	}
	if db == nil {
		var err error
		if db, err = h.opts.Host.Get(ctx, name); err != nil {
			return 0, 0, err
		}
	}
	var pageSize int64
	pos, err := db.Read(ctx, func(c sqlconn.Conn) error {
		res, err := c.Exec(ctx, sqlconn.Stmt{SQL: "PRAGMA page_size", WantRows: true})
		if err == nil && len(res.Rows) == 1 && len(res.Rows[0]) == 1 {
			pageSize = res.Rows[0][0].Int
		}
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return uint64(pos), pageSize, nil
}

// errPageSizeFor refuses a database whose pages libSQL's clients cannot
// take: they cut every sync answer into 4096-byte pages. Not 400, which
// the clients read as "end of generation" and report as a JSON error.
func errPageSizeFor(name string, pageSize int64) error {
	return httperr.WithStatus(http.StatusUnprocessableEntity, dberr.ForDatabase(dberr.CodeBadRequest, name, fmt.Sprintf(
		"database %q has %d-byte pages; libSQL embedded replicas sync only databases with 4096-byte pages "+
			"(rebuild it with PRAGMA page_size=4096 then VACUUM, or read it remotely over Hrana)", name, pageSize)))
}

// seedWindow starts name's window with the level-0 file of pos, read from
// the bucket (one GET, the first time a database is synced in this
// process): replicas that bootstrap at pos then sync the pages changed
// since, not the whole database. Without that file (compacted away) the
// window starts empty, after pos.
func (h *Handler) seedWindow(ctx context.Context, name string, pos uint64) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rc, err := replica.Sub(h.opts.Store, name).Get(ctx, replica.LTXKey(0, ltx.TXID(pos), ltx.TXID(pos)))
	if err != nil {
		return
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, int64(h.opts.History.limit)+1<<20))
	if err != nil {
		return
	}
	h.opts.History.seed(name, pos, body)
}

// fillGap reads TXID txid's level-0 file from the bucket (one GET) and
// puts it back at the start of name's window (History.fill). Concurrent
// syncs wait for one read.
func (h *Handler) fillGap(ctx context.Context, name string, txid uint64) bool {
	h.fillMu.Lock()
	defer h.fillMu.Unlock()
	if !h.opts.History.gapAt(name, txid) {
		return h.opts.History.view(name, 0).from <= txid // filled meanwhile
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rc, err := replica.Sub(h.opts.Store, name).Get(ctx, replica.LTXKey(0, ltx.TXID(txid), ltx.TXID(txid)))
	if err != nil {
		return false // compacted away: the whole database, as before
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, int64(h.opts.History.limit)+1<<20))
	if err != nil {
		return false
	}
	return h.opts.History.fill(name, txid, body)
}

// Info answers GET …/info: the generation a new replica starts from.
func (h *Handler) Info(w http.ResponseWriter, r *http.Request) {
	name, pos, err := h.database(r, true)
	if err != nil {
		h.opts.WriteError(w, r, err)
		return
	}
	v := h.opts.History.view(name, pos)
	gen := max(v.head, 1)
	// A replica may start from the database image already made for
	// others, if its changes since are still known: no restore per
	// bootstrap while the database takes writes.
	// Not into a generation whose replicas were already sent frames,
	// though: positions are remembered per (generation, frame count), so
	// a newcomer there would share its counts with replicas at other
	// TXIDs and be sent the same pages over and over.
	if e, ok := h.cachedImage(name); ok && e >= v.from && e <= v.head && !h.opts.History.sentFrames(name, e) && h.opts.History.info(name, e) {
		gen = e
	} else {
		h.opts.History.info(name, gen) // the head: every generation that ended started at or before it
	}
	httpjson.Write(w, http.StatusOK, map[string]uint64{"current_generation": gen})
}

// Export answers GET …/export/{generation}: a database image at or after
// the generation (the one /info named it for, or a new one at the head).
func (h *Handler) Export(w http.ResponseWriter, r *http.Request) {
	name, pos, err := h.database(r, false)
	if err != nil {
		h.opts.WriteError(w, r, err)
		return
	}
	gen, err := strconv.ParseUint(r.PathValue("generation"), 10, 32)
	if err != nil {
		h.opts.WriteError(w, r, dberr.New(dberr.CodeBadRequest, "export: generation must be a number"))
		return
	}
	v := h.opts.History.view(name, pos)
	// Any image at or after the generation will do: the client holds it
	// as that generation (at or after it, as every generation means).
	f, pages, err := h.openImage(r.Context(), name, min(gen, v.head), v.head)
	if err != nil {
		h.opts.WriteError(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(int64(pages)*PageSize, 10))
	w.WriteHeader(http.StatusOK)
	n, _ := io.CopyN(w, f, int64(pages)*PageSize)
	h.observe(name, "export", n)
}

func (h *Handler) observe(db, answer string, bytes int64) {
	if h.opts.Observe != nil {
		h.opts.Observe(db, answer, bytes)
	}
}

// Sync answers GET …/sync/{generation}/{start}/{end}. The client applies
// what it is sent at frame start of its local WAL in this generation and
// asks again, until told the generation ended (a 400 naming the newest
// generation: it stops when that is not newer than its own, else it
// checkpoints and asks for frame 1 of the next). A generation is a TXID
// the client's state is at or after. The rules:
//   - frame 1 at or after the head: end of generation naming its own;
//   - frame 1 of the generation just before the window: the whole
//     database (clients that walked past older generations without frames
//     land here);
//   - frame 1 of an older generation: end of generation, no frames,
//     naming the head (the client walks on);
//   - a later frame whose sender History remembers (reachedBy): it is at
//     that TXID; up to date: end of generation naming its own, so it
//     stops (after walFrames frames: naming the head, so it checkpoints
//     and moves on, and the next generation starts at that TXID, see
//     History.end); behind: the pages changed since, as one transaction;
//   - a later frame nobody remembers: end of generation naming the head
//     (the client, past its generation, moves one generation on);
//   - frame 1 otherwise: the pages changed after the generation's start
//     (History.startOf), as one transaction, or end of generation (naming
//     its own) if none.
//
// A client up to date at its own generation is answered end of generation
// at once, unless its sync URL asked to wait (WaitPath): then the answer
// waits until the next transaction is shipped (and carries it) or the
// wait is over, so a replica that calls sync() in a loop follows the
// primary within a request's time instead of spinning.
func (h *Handler) Sync(w http.ResponseWriter, r *http.Request) {
	var deadline time.Time
	if d := waitOf(r.Context()); d > 0 {
		deadline = time.Now().Add(d)
	}
	for {
		name, v, gen, start, done := h.syncOnce(w, r)
		if done {
			return
		}
		// The client asks again after every answer carrying frames, within
		// the same sync() call: that request is answered at once (sync()
		// returns with what it got); the next sync() call waits.
		if !deadline.IsZero() && !h.continued(r.RemoteAddr, gen, start-1) && h.waitForNext(r.Context(), v, deadline) {
			continue
		}
		h.endOfGeneration(w, name, gen)
		return
	}
}

// MaxWaiting bounds the syncs held waiting at once, whatever their token
// or database: past it a sync is answered at once, as without a wait (the
// client then polls), so that waiting connections cannot pile up.
const MaxWaiting = 1024

// waitForNext waits, until deadline, for the window to move past v; false
// when it did not (the wait is over, the client left, the server closes).
func (h *Handler) waitForNext(ctx context.Context, v view, deadline time.Time) bool {
	left := time.Until(deadline)
	if deadline.IsZero() || left <= 0 {
		return false
	}
	if h.waiting.Add(1) > MaxWaiting {
		h.waiting.Add(-1)
		return false // answered at once, as without a wait: the client polls
	}
	defer h.waiting.Add(-1)
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-v.changed:
		return true
	case <-t.C:
	case <-ctx.Done():
	case <-h.closing:
	}
	return false
}

// endOfGeneration answers libSQL's "end of generation", naming newest.
func (h *Handler) endOfGeneration(w http.ResponseWriter, name string, newest uint64) {
	h.observe(name, "end", 0)
	w.Header().Set(AnswerHeader, "end")
	httpjson.Write(w, http.StatusBadRequest, map[string]any{"generation": max(newest, 1), "message": "end of generation"})
}

// syncOnce answers one sync request by the rules above (done), or finds
// the client up to date at its own generation gen and answers nothing:
// the caller answers end of generation, at once or after waiting on v.
func (h *Handler) syncOnce(w http.ResponseWriter, r *http.Request) (name string, v view, gen, start uint64, done bool) {
	name, pos, err := h.database(r, false)
	if err != nil {
		h.opts.WriteError(w, r, err)
		return name, v, 0, 0, true
	}
	gen, err1 := strconv.ParseUint(r.PathValue("generation"), 10, 32)
	start, err2 := strconv.ParseUint(r.PathValue("start"), 10, 32)
	if err1 != nil || err2 != nil || start == 0 || gen == 0 {
		h.opts.WriteError(w, r, dberr.New(dberr.CodeBadRequest, "sync: generation and start must be positive numbers"))
		return name, v, gen, start, true
	}
	hist := h.opts.History
	v = hist.view(name, pos)
	upToDate := func() (string, view, uint64, uint64, bool) { return name, v, gen, start, false }
	endOfGeneration := func(newest uint64) (string, view, uint64, uint64, bool) {
		h.endOfGeneration(w, name, newest)
		return name, v, gen, start, true
	}
	image := func() (string, view, uint64, uint64, bool) {
		n, ok := h.sendImage(w, r, name, v.head)
		h.observe(name, "database", int64(n)*(frameHeaderSize+PageSize))
		if ok {
			hist.reach(name, gen, start-1+uint64(n), v.head)
			h.sent(r, gen, start-1+uint64(n))
		}
		return name, v, gen, start, true
	}
	var base uint64 // the TXID the client is known to hold
	if start == 1 {
		switch {
		case gen >= v.head:
			// Nothing new (a client that walked here without frames gets
			// the whole database once there is). Frames are only ever
			// sent up to a newer head: a client holding frames of a
			// generation is past it, which the rule for forgotten senders
			// below relies on.
			return upToDate()
		case gen == v.from-1:
			if hist.gapAt(name, gen) && h.fillGap(r.Context(), name, gen) {
				return h.syncOnce(w, r) // gen is in the window now: a diff
			}
			return image()
		case gen < v.from-1:
			hist.walked(name)
			return endOfGeneration(v.head)
		}
		base = hist.startOf(name, gen)
	} else {
		n, ok := hist.reachedBy(name, gen, start-1)
		if !ok {
			return endOfGeneration(v.head)
		}
		if n >= v.head {
			if start-1 >= walFrames {
				hist.end(name, gen, n)
				return endOfGeneration(v.head)
			}
			return upToDate()
		}
		base = n
	}
	pages, commit, head, ok := hist.diff(name, base)
	if !ok { // the window no longer reaches back to base: the whole database is always right
		return image()
	}
	pgnos := sortedPgnos(pages)
	if len(pgnos) == 0 { // the commits changed no page: the client's pages are the head's
		hist.reach(name, gen, start-1, head)
		return upToDate()
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(AnswerHeader, "diff")
	w.WriteHeader(http.StatusOK)
	frame := make([]byte, frameHeaderSize+PageSize)
	for i, pgno := range pgnos {
		size := uint32(0)
		if i == len(pgnos)-1 {
			size = commit
		}
		putFrame(frame, pgno, size, pages[pgno])
		if _, err := w.Write(frame); err != nil {
			h.observe(name, "diff", int64(i)*int64(len(frame)))
			return name, v, gen, start, true
		}
	}
	h.observe(name, "diff", int64(len(pgnos))*int64(len(frame)))
	hist.reach(name, gen, start-1+uint64(len(pgnos)), head)
	h.sent(r, gen, start-1+uint64(len(pgnos)))
	return name, v, gen, start, true
}

// walFrames is how many frames a client's local WAL may hold before its
// generation is ended (the client checkpoints, emptying it): about 4 MB.
const walFrames = 1000

func putFrame(frame []byte, pgno, sizeAfter uint32, data []byte) {
	clear(frame[:frameHeaderSize])
	binary.BigEndian.PutUint32(frame[0:4], pgno)
	binary.BigEndian.PutUint32(frame[4:8], sizeAfter)
	copy(frame[frameHeaderSize:], data)
}

// sendImage sends the whole database at txid as one transaction and
// reports how many frames it sent, all of them.
func (h *Handler) sendImage(w http.ResponseWriter, r *http.Request, name string, txid uint64) (uint32, bool) {
	f, pages, err := h.openImage(r.Context(), name, txid, txid)
	if err != nil {
		h.opts.WriteError(w, r, err)
		return 0, false
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(AnswerHeader, "database")
	w.WriteHeader(http.StatusOK)
	frame := make([]byte, frameHeaderSize+PageSize)
	for pgno := uint32(1); pgno <= pages; pgno++ {
		if _, err := io.ReadFull(f, frame[frameHeaderSize:]); err != nil {
			return 0, false // the client sees a short body and fails its sync
		}
		size := uint32(0)
		if pgno == pages {
			size = pages
		}
		binary.BigEndian.PutUint32(frame[0:4], pgno)
		binary.BigEndian.PutUint32(frame[4:8], size)
		if _, err := w.Write(frame); err != nil {
			return 0, false
		}
	}
	return pages, true
}

// openImage opens the database restored at exactly txid and its size in
// pages. The file stays readable after a newer image replaces it (the open
// descriptor keeps it), so a slow client never holds up the others.
func (h *Handler) openImage(ctx context.Context, name string, atLeast, txid uint64) (*os.File, uint32, error) {
	img, err := h.image(ctx, name, atLeast, txid)
	if err != nil {
		return nil, 0, err
	}
	defer img.mu.Unlock()
	f, err := os.Open(img.path)
	if err != nil {
		return nil, 0, err
	}
	return f, img.pages, nil
}

// image returns, locked, the database's image if it is at atLeast..txid,
// else a new one restored at txid.
func (h *Handler) image(ctx context.Context, name string, atLeast, txid uint64) (*image, error) {
	h.mu.Lock()
	img := h.images[name]
	if img == nil {
		img = &image{}
		h.images[name] = img
	}
	img.used = time.Now()
	h.mu.Unlock()
	img.mu.Lock()
	if img.path != "" && img.txid >= atLeast && img.txid <= txid {
		return img, nil
	}
	h.evictImages(img)
	if img.path != "" {
		_ = os.Remove(img.path)
		img.path = ""
	}
	if err := os.MkdirAll(h.opts.Dir, 0o700); err != nil {
		img.mu.Unlock()
		return nil, err
	}
	path := filepath.Join(h.opts.Dir, name+"-"+strconv.FormatUint(txid, 10)+".image")
	_ = os.Remove(path) // left by an earlier run
	res, err := restore.Restore(ctx, replica.Sub(h.opts.Store, name), path, restore.Options{TXID: ltx.TXID(txid)})
	if err != nil {
		img.mu.Unlock()
		return nil, dberr.ForDatabase(dberr.CodeUnavailable, name, fmt.Sprintf("embedded replica sync: cannot rebuild database %q at TXID %d from the replica: %v", name, txid, err))
	}
	if res.PageSize != PageSize { // changed since the request began
		_ = os.Remove(path)
		img.mu.Unlock()
		return nil, errPageSizeFor(name, int64(res.PageSize))
	}
	img.txid, img.path, img.pages = txid, path, res.Pages
	return img, nil
}

// maxImages bounds the images kept on disk: the least recently used of
// other databases is removed first (made again when needed).
const maxImages = 4

// evictImages removes images of other databases beyond maxImages,
// skipping any being read or made.
func (h *Handler) evictImages(keep *image) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		var oldest *image
		n := 0
		for _, o := range h.images {
			if o == keep || o.path == "" {
				continue
			}
			n++
			if oldest == nil || o.used.Before(oldest.used) {
				oldest = o
			}
		}
		if n < maxImages || oldest == nil || !oldest.mu.TryLock() {
			return
		}
		if oldest.path != "" {
			_ = os.Remove(oldest.path)
			oldest.path = ""
		}
		oldest.mu.Unlock()
	}
}

// cachedImage returns the TXID of the database's image, if one is made.
func (h *Handler) cachedImage(name string) (uint64, bool) {
	h.mu.Lock()
	img := h.images[name]
	h.mu.Unlock()
	if img == nil || !img.mu.TryLock() {
		return 0, false
	}
	defer img.mu.Unlock()
	return img.txid, img.path != ""
}

// Forget drops a database's image and window (it was deleted).
func (h *Handler) Forget(name string) {
	h.opts.History.Forget(name)
	h.mu.Lock()
	img := h.images[name]
	delete(h.images, name)
	h.mu.Unlock()
	if img != nil {
		img.mu.Lock()
		if img.path != "" {
			_ = os.Remove(img.path)
		}
		img.mu.Unlock()
	}
}

// CleanPath lets a sync URL written with a trailing slash
// (http://HOST/db/NAME/) reach the endpoints: libSQL's client appends
// "/info", giving "/db/NAME//info", which Go's router would redirect and the
// client does not follow.
func CleanPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if strings.HasPrefix(p, "/db/") && strings.Contains(p, "//") && r.Method == http.MethodGet {
			rest := strings.TrimPrefix(p, "/db/")
			if name, tail, ok := strings.Cut(rest, "//"); ok && !strings.Contains(name, "/") &&
				(tail == "info" || strings.HasPrefix(tail, "export/") || strings.HasPrefix(tail, "sync/")) {
				r2 := r.Clone(r.Context())
				r2.URL.Path = "/db/" + name + "/" + tail
				r2.URL.RawPath = ""
				next.ServeHTTP(w, r2)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// RefusePush answers POST …/sync/{generation}/{start}/{end}, libSQL's push
// of frames written offline in a local replica: not accepted (a replica's
// writes go to the server over Hrana), said in one line rather than as an
// unknown endpoint.
func (h *Handler) RefusePush(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", http.MethodGet)
	h.opts.WriteError(w, r, httperr.WithStatus(http.StatusMethodNotAllowed, dberr.New(dberr.CodeBadRequest,
		"pushing frames written offline in an embedded replica is not supported by sluice: open the replica with a sync URL "+
			"so that its writes go to the server (remote writes), and sync() pulls")))
}
