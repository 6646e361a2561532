package libsqlsync

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// PageSize is the only page size libSQL's sync protocol carries: its
// clients split responses into 24+4096-byte frames.
const PageSize = 4096

// DefaultHistoryBytes bounds the page bytes History keeps per database,
// and DefaultHistoryTotalBytes across every database of the server (the
// largest windows give way first).
const (
	DefaultHistoryBytes      = 16 << 20
	DefaultHistoryTotalBytes = 64 << 20
)

// entry is one shipped LTX file: the newest version of each page it changed.
type entry struct {
	min, max uint64
	commit   uint32 // database size in pages after max
	pages    map[uint32][]byte
}

// dbHistory is the window of one database's recently shipped files,
// contiguous in TXID: entries[0].min == from, entries[last].max == head.
type dbHistory struct {
	entries []entry
	bytes   int
	from    uint64 // oldest TXID whose changes are known (head+1: none)
	head    uint64 // newest TXID known; 0 until the first file or Seed

	// reached[{generation, frames}] is the oldest TXID a client holding
	// that many frames of that generation was brought to, so that its next
	// request says where it is. It is kept only for generations above
	// memoFrom, the head when this memory began: a client can hold such a
	// generation only through requests answered since, all recorded here
	// (generations are TXIDs the head had reached), so no entry can stand
	// for a client it never saw. Losing it (the bound, a restart) only
	// costs pages sent again.
	reached  map[[2]uint64]uint64
	memoFrom uint64
	// ended[g] is the TXID every client that left generation g (its local
	// WAL full) was at, where the next generation starts. Kept only when
	// no /info handed out generation g+1 (issued, or any generation up to
	// maxInfo once issued overflowed): a replica that bootstrapped at g+1
	// may be older.
	ended   map[uint64]uint64
	issued  map[uint64]bool
	maxInfo uint64

	// gap is the TXID of a file that continued the window but came
	// without its body (the shipper keeps only small files in memory), so
	// the window starts just after it: a sync may fill it from the bucket
	// (fill), which spares the replicas that bootstrapped at gap the whole
	// database. 0 once any client was told to walk past the window's
	// start: then the start must not move back.
	gap uint64

	// changed is closed (and dropped) when the window changes: syncs
	// waiting for the next transaction look again.
	changed chan struct{}
}

// wake tells d's waiting syncs that its window changed (caller holds mu).
func (d *dbHistory) wake() {
	if d.changed != nil {
		close(d.changed)
		d.changed = nil
	}
}

// memoLimit bounds reached (and ended, and issued) per database, some
// 800 KB at most: the frame counts (up to walFrames and a diff each) of
// the few generations replicas are in at once, so that replicas syncing
// in a loop never push the others' positions out.
const memoLimit = 16384

// History keeps, for every database, the pages of its recently shipped
// files, fed by Shipped on the shipping goroutine.
type History struct {
	mu         sync.Mutex
	dbs        map[string]*dbHistory
	limit      int // per database
	totalLimit int
	total      int
}

// NewHistory keeps up to limitBytes of pages per database and four times
// that in all (<= 0: the defaults).
func NewHistory(limitBytes int) *History {
	total := 4 * limitBytes
	if limitBytes <= 0 {
		limitBytes, total = DefaultHistoryBytes, DefaultHistoryTotalBytes
	}
	return &History{dbs: map[string]*dbHistory{}, limit: limitBytes, totalLimit: total}
}

// clear empties d's window, which then starts at from.
func (h *History) clear(d *dbHistory, from uint64) {
	h.total -= d.bytes
	d.entries, d.bytes, d.from = nil, 0, from
}

// dropOldest moves d's window past its oldest file.
func (h *History) dropOldest(d *dbHistory) {
	size := len(d.entries[0].pages) * PageSize
	d.bytes -= size
	h.total -= size
	d.from = d.entries[0].max + 1
	d.entries[0] = entry{} // let its pages go
	d.entries = d.entries[1:]
}

// Shipped records a file the store accepted. A file that cannot be read
// (another page size, a damaged body) empties the window: the next
// clients receive the whole database rather than a diff with a hole.
func (h *History) Shipped(db string, f replica.LTXFile, body []byte) {
	e, err := decode(body)
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.dbs[db]
	if d == nil {
		d = &dbHistory{from: uint64(f.MinTXID), memoFrom: uint64(f.MinTXID) - 1}
		h.dbs[db] = d
	}
	defer d.wake()                            // after every change below, still under mu
	recreated := f.MinTXID == 1 && d.head > 0 // a database deleted and created again
	if recreated {
		d.reached, d.ended, d.issued, d.memoFrom, d.maxInfo = nil, nil, nil, 0, 0
	}
	if !recreated && d.head > 0 && uint64(f.MaxTXID) <= d.head {
		return // already covered: the window was seeded past it
	}
	if err != nil || uint64(f.MinTXID) != d.head+1 || recreated {
		// Not a continuation (a gap, a body the engine did not keep, a
		// recreated database): start the window at this file. Its start
		// never moves back except for a new database, so a client that
		// walked to it is never skipped past the whole-database answer.
		from := uint64(f.MinTXID)
		if err != nil {
			from = uint64(f.MaxTXID) + 1
		}
		if !recreated && from < d.from {
			from = d.from
		}
		h.clear(d, from)
		d.gap = 0
		if err != nil && f.MinTXID == f.MaxTXID && from == uint64(f.MaxTXID)+1 {
			d.gap = uint64(f.MaxTXID)
		}
	}
	d.head = uint64(f.MaxTXID)
	if err != nil {
		return
	}
	size := len(e.pages) * PageSize
	if size > h.limit {
		h.clear(d, e.max+1)
		return
	}
	d.entries = append(d.entries, e)
	d.bytes += size
	h.total += size
	for d.bytes > h.limit {
		h.dropOldest(d)
	}
	for h.total > h.totalLimit {
		var largest *dbHistory
		for _, o := range h.dbs {
			if len(o.entries) > 0 && (largest == nil || o.bytes > largest.bytes) {
				largest = o
			}
		}
		h.dropOldest(largest)
	}
}

// Forget drops a database's window (it was deleted).
func (h *History) Forget(db string) {
	h.mu.Lock()
	if d := h.dbs[db]; d != nil {
		h.total -= d.bytes
		d.wake()
	}
	delete(h.dbs, db)
	h.mu.Unlock()
}

// view is what one sync request decides on, taken under the lock.
type view struct {
	from, head uint64
	known      bool // from..head is known (a window exists)
	// changed is closed once the window moves past this view: a sync
	// that found nothing new may wait on it for the next transaction.
	changed <-chan struct{}
}

// view returns the window of db; pos (the database's shipped position)
// seeds an empty window so that "nothing known before pos" holds.
func (h *History) view(db string, pos uint64) view {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.dbs[db]
	if d == nil {
		d = &dbHistory{head: pos, from: pos + 1, memoFrom: pos}
		h.dbs[db] = d
	}
	if d.head < pos && len(d.entries) == 0 {
		d.head, d.from = pos, pos+1
	}
	if d.changed == nil {
		d.changed = make(chan struct{})
	}
	return view{from: d.from, head: d.head, known: true, changed: d.changed}
}

// known reports whether db has a window (then view will not seed one).
func (h *History) known(db string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dbs[db] != nil
}

// seed starts db's window with the file that made TXID pos (its body),
// unless a window exists already. A window that starts just after pos
// would send the whole database to every replica that bootstraps at pos
// (the generation before a window may hold replicas that walked there
// from older ones, so it gets the whole database); one that starts at
// pos's own file sends them the pages changed since. It must be done
// before any answer is given from a window of db: a window's start never
// moves back.
func (h *History) seed(db string, pos uint64, body []byte) {
	e, err := decode(body)
	if err != nil || e.min != pos || e.max != pos {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dbs[db] != nil {
		return
	}
	size := len(e.pages) * PageSize
	if size > h.limit || h.total+size > h.totalLimit {
		return // view seeds an empty window
	}
	h.dbs[db] = &dbHistory{entries: []entry{e}, bytes: size, from: pos, head: pos, memoFrom: pos}
	h.total += size
}

// gapAt reports whether db's window starts just after a file that came
// without its body, TXID txid, and may still be filled.
func (h *History) gapAt(db string, txid uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.dbs[db]
	return d != nil && d.gap != 0 && d.gap == txid && d.from == txid+1
}

// walked records that a client was told to walk past db's window start:
// the start must not move back any more.
func (h *History) walked(db string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d := h.dbs[db]; d != nil {
		d.gap = 0
	}
}

// fill puts TXID txid's file (its body, read from the bucket) back at the
// start of db's window, if the window still starts just after it and no
// client walked past that start; false otherwise.
func (h *History) fill(db string, txid uint64, body []byte) bool {
	e, err := decode(body)
	if err != nil || e.min != txid || e.max != txid {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.dbs[db]
	if d == nil || d.gap != txid || d.from != txid+1 {
		return false
	}
	if (len(d.entries) > 0 && d.entries[0].min != txid+1) || (len(d.entries) == 0 && d.head != txid) {
		return false
	}
	size := len(e.pages) * PageSize
	if d.bytes+size > h.limit || h.total+size > h.totalLimit {
		return false
	}
	d.entries = append([]entry{e}, d.entries...)
	d.bytes += size
	h.total += size
	d.from, d.gap = txid, 0
	return true
}

// diff returns every page changed after TXID g, at its newest version, the
// database size in pages at the newest TXID known and that TXID; ok is
// false when the window does not reach back to g+1.
func (h *History) diff(db string, g uint64) (pages map[uint32][]byte, commit uint32, head uint64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.dbs[db]
	if d == nil || d.from > g+1 || len(d.entries) == 0 {
		return nil, 0, 0, false
	}
	pages = map[uint32][]byte{}
	for _, e := range d.entries {
		if e.max <= g {
			continue
		}
		for pgno, data := range e.pages {
			pages[pgno] = data // later entries overwrite: newest wins
		}
		commit = e.commit
	}
	for pgno := range pages {
		if pgno > commit { // the database shrank after this page was written
			delete(pages, pgno)
		}
	}
	return pages, commit, d.head, true
}

var errPageSize = errors.New("page size is not 4096")

func decode(body []byte) (entry, error) {
	if body == nil {
		return entry{}, errors.New("no body")
	}
	dec := ltx.NewDecoder(bytes.NewReader(body))
	if err := dec.DecodeHeader(); err != nil {
		return entry{}, err
	}
	hdr := dec.Header()
	if hdr.PageSize != PageSize {
		return entry{}, errPageSize
	}
	e := entry{min: uint64(hdr.MinTXID), max: uint64(hdr.MaxTXID), commit: hdr.Commit, pages: map[uint32][]byte{}}
	for {
		var ph ltx.PageHeader
		data := make([]byte, PageSize)
		if err := dec.DecodePage(&ph, data); err == io.EOF {
			break
		} else if err != nil {
			return entry{}, fmt.Errorf("decode page: %w", err)
		}
		e.pages[ph.Pgno] = data
	}
	if err := dec.Close(); err != nil {
		return entry{}, err
	}
	return e, nil
}

// sortedPgnos lists pages' numbers in ascending order.
func sortedPgnos(pages map[uint32][]byte) []uint32 {
	out := make([]uint32, 0, len(pages))
	for p := range pages {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// reach records that a client holding frames frames of generation gen was
// brought to txid (the oldest such TXID wins: clients share the key).
func (h *History) reach(db string, gen, frames, txid uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.dbs[db]
	if d == nil || gen <= d.memoFrom {
		return
	}
	if len(d.reached) >= memoLimit || len(d.ended) >= memoLimit {
		forgetOldGenerations(d)
		if gen <= d.memoFrom {
			return
		}
	}
	if d.reached == nil {
		d.reached = map[[2]uint64]uint64{}
	}
	k := [2]uint64{gen, frames}
	if old, ok := d.reached[k]; !ok || txid < old {
		d.reached[k] = txid
	}
}

// forgetOldGenerations raises d.memoFrom past the oldest generations
// remembered, dropping what it knew of them, until at most half of the
// bound is used: the generations above it stay whole (every answer to a
// client there since the memory began is still recorded), so the clients
// that follow the head keep syncing only what changed; only clients in
// the forgotten generations walk on (pages sent again). A single
// generation holding everything is forgotten whole, as a restart would.
func forgetOldGenerations(d *dbHistory) {
	count := map[uint64]int{}
	for k := range d.reached {
		count[k[0]]++
	}
	for g := range d.ended {
		count[g]++
	}
	gens := make([]uint64, 0, len(count))
	for g := range count {
		gens = append(gens, g)
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	left := len(d.reached) + len(d.ended)
	floor := d.memoFrom
	for _, g := range gens {
		if left <= memoLimit/2 {
			break
		}
		floor = g
		left -= count[g]
	}
	if floor == gens[len(gens)-1] { // everything: start over above the head, as before
		floor = max(floor, d.head)
	}
	d.memoFrom = max(d.memoFrom, floor)
	for k := range d.reached {
		if k[0] <= d.memoFrom {
			delete(d.reached, k)
		}
	}
	for g := range d.ended {
		if g <= d.memoFrom {
			delete(d.ended, g)
		}
	}
}

// sentFrames reports whether a client of generation gen was sent frames.
func (h *History) sentFrames(db string, gen uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.dbs[db]
	if d == nil {
		return false
	}
	if gen <= d.memoFrom {
		return true // not remembered: maybe
	}
	for k := range d.reached {
		if k[0] == gen && k[1] > 0 {
			return true
		}
	}
	return false
}

// reachedBy returns the TXID a client holding frames frames of generation
// gen is at (or later), if known.
func (h *History) reachedBy(db string, gen, frames uint64) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.dbs[db]
	if d == nil || gen <= d.memoFrom {
		return 0, false
	}
	n, ok := d.reached[[2]uint64{gen, frames}]
	return n, ok
}

// info records that /info hands out generation gen, unless a client that
// left gen-1 already made gen start later than gen (then it returns false:
// a replica bootstrapped at gen could be older than that start).
func (h *History) info(db string, gen uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.dbs[db]
	if d == nil {
		return true
	}
	if e, ok := d.ended[gen-1]; ok && e > gen {
		return false
	}
	if gen <= d.maxInfo {
		return true
	}
	if len(d.issued) >= memoLimit { // forget which: treat every one up to here as issued
		d.issued, d.maxInfo = nil, max(d.head, gen)
		return true
	}
	if d.issued == nil {
		d.issued = map[uint64]bool{}
	}
	d.issued[gen] = true
	return true
}

// end records that a client left generation gen at txid, if every client
// that enters gen+1 is known to be at least as new (see ended).
func (h *History) end(db string, gen, txid uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.dbs[db]
	if d == nil || gen <= d.memoFrom || gen+1 <= d.maxInfo || d.issued[gen+1] {
		return
	}
	if d.ended == nil {
		d.ended = map[uint64]uint64{}
	}
	if _, ok := d.ended[gen]; !ok {
		d.ended[gen] = txid
	}
}

// startOf is the TXID a client at frame 1 of generation gen is at or
// after: where the previous generation ended, if known, else gen.
func (h *History) startOf(db string, gen uint64) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.dbs[db]
	if d == nil || gen-1 <= d.memoFrom {
		return gen
	}
	if e, ok := d.ended[gen-1]; ok && e > gen {
		return e
	}
	return gen
}
