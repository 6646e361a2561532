package dbhost

import (
	"errors"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
)

// restoreDamaged reports a restore on open that failed on a damaged,
// truncated or missing object: no local file holds the truth, so nothing
// heals it here; it stays reported (readiness) until the database opens.
func (h *Host) restoreDamaged(name string, store replica.Store, err error) {
	if h.opts.Damage == nil || !errors.Is(err, replica.ErrDamaged) {
		return
	}
	de := &replica.DamageError{Key: "(restore)", Store: store.String(), What: "damaged", Err: err}
	if key, ok := restore.DamagedKey(err); ok {
		// The log line below has the restore's whole story.
		de.Key, de.What = key, "damaged"
		de.Err = errors.New("a restore on open needs it and no other level covers it; the database stays closed (no local copy to heal from)")
	}
	h.opts.Logger.Error("restore on open met a damaged replica; the database stays closed", "db", name, "key", de.Key, "err", err)
	h.opts.Damage.Damaged(name, de)
}

// restoreHealed clears a restore's damage report once the database opened.
func (h *Host) restoreHealed(name string) {
	if h.opts.Damage != nil {
		h.opts.Damage.Healed(name, "", time.Duration(0))
	}
}
