package watch

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// Damage tracks the damaged replica objects a process has found and not
// healed yet, per database: /ready answers 503 while any is open, and the
// metrics count them. It implements replicated.DamageReporter.
type Damage struct {
	mu     sync.Mutex
	open   map[string]damageReport // by database
	found  int64
	healed int64
	last   *Heal // the last heal, if any
}

// Heal records one healed replica.
type Heal struct {
	DB       string    `json:"db"`
	Object   string    `json:"object"`   // the damaged object reported first
	Snapshot string    `json:"snapshot"` // the snapshot that replaced it for the newest state
	At       time.Time `json:"healed_at"`
	Seconds  float64   `json:"seconds_from_detection"`
}

type damageReport struct {
	err *replica.DamageError
	at  time.Time
}

// NewDamage returns an empty tracker.
func NewDamage() *Damage { return &Damage{open: map[string]damageReport{}} }

// Damaged records a damaged object of db's replica.
func (d *Damage) Damaged(db string, err *replica.DamageError) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.found++
	if _, ok := d.open[db]; !ok {
		d.open[db] = damageReport{err: err, at: time.Now()}
	}
}

// Healed records that db's replica no longer needs its damaged objects.
func (d *Damage) Healed(db string, snapshot string, took time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.open[db]; ok {
		delete(d.open, db)
		d.healed++
		d.last = &Heal{DB: db, Object: r.err.Key, Snapshot: snapshot, At: time.Now().UTC(), Seconds: took.Seconds()}
	}
}

// Forget drops db's report without counting a heal (the database was
// deleted, or another instance writes it now).
func (d *Damage) Forget(db string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.open, db)
}

// DamageStatus is the tracker at one moment.
type DamageStatus struct {
	Unhealed int    // databases whose replica waits for a heal
	Reason   string // the oldest of them, in one line ("" if none)
	Found    int64  // damaged objects reported since start
	Healed   int64  // heals since start
	LastHeal *Heal  // nil before the first
}

// Status reports the open damage.
func (d *Damage) Status() DamageStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := DamageStatus{Unhealed: len(d.open), Found: d.found, Healed: d.healed, LastHeal: d.last}
	dbs := make([]string, 0, len(d.open))
	for db := range d.open {
		dbs = append(dbs, db)
	}
	sort.Slice(dbs, func(i, j int) bool { return d.open[dbs[i]].at.Before(d.open[dbs[j]].at) })
	if len(dbs) > 0 {
		r := d.open[dbs[0]]
		st.Reason = fmt.Sprintf("database %s: %s", dbs[0], r.err)
	}
	return st
}
