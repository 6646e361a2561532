package dbhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/dberr"
)

// List lists the local databases (files in DataDir) with their positions,
// and the databases that exist only in the replica (Local false). A replica
// that cannot be listed fails the listing: an answer missing databases
// would look complete.
func (h *Host) List(ctx context.Context) ([]Info, error) {
	entries, err := os.ReadDir(h.opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", h.opts.DataDir, err)
	}
	var out []Info
	local := map[string]bool{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".db")
		if !ok || e.IsDir() || ValidateName(name) != nil {
			continue
		}
		local[name] = true
		out = append(out, h.localInfo(name))
	}
	remote, err := h.replicaNames(ctx)
	if err != nil {
		return nil, dberr.New(dberr.CodeUnavailable, "list the databases in the replica "+h.opts.Store.String()+": "+err.Error()+"; retry")
	}
	for name := range remote {
		if !local[name] {
			out = append(out, Info{Name: name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Describe returns one local database's listing entry without listing the
// others (the answer to a create).
func (h *Host) Describe(name string) (Info, bool) {
	if ValidateName(name) != nil {
		return Info{}, false
	}
	if _, err := os.Stat(h.path(name)); err != nil {
		return Info{}, false
	}
	return h.localInfo(name), true
}

func (h *Host) localInfo(name string) Info {
	in := Info{Name: name, Local: true}
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(h.path(name) + suffix); err == nil {
			in.SizeBytes += fi.Size()
		}
	}
	h.mu.Lock()
	db := h.dbs[name]
	h.mu.Unlock()
	if db != nil {
		st := db.stats()
		in.Open, in.TXID, in.Unshipped, in.Fenced = true, st.TXID, st.Unshipped, st.Fenced
	}
	return in
}

// Delete closes the database and removes its local files; with purge it
// also deletes its replica. Without purge, the next use restores it.
func (h *Host) Delete(ctx context.Context, name string, purge bool) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	unlock := h.lock(name)
	defer unlock()
	wasCold := h.stopCold(name) // open here, though its file is not complete yet
	h.mu.Lock()
	delete(h.noCold, name)
	db := h.dbs[name]
	delete(h.dbs, name)
	h.mu.Unlock()
	path := h.path(name)
	_, statErr := os.Stat(path)
	if db == nil && statErr != nil && !purge && !wasCold {
		return NotFound(name)
	}
	if db == nil && statErr == nil && !purge {
		// A local file not open here may hold commits the replica lacks (a
		// final upload that failed, a crash under async durability): open
		// it so that closing it uploads them before the file goes.
		opened, err := h.open(ctx, name, false, false)
		if err != nil {
			return err
		}
		h.mu.Lock()
		delete(h.dbs, name)
		h.mu.Unlock()
		db = opened
	}
	if db != nil {
		db.deleting.Store(true)
		if err := db.close(ctx); err != nil {
			if !purge {
				// The replica is what the next use restores: deleting the
				// only copy of acknowledged commits would lose them.
				return dberr.ForDatabase(dberr.CodeUnavailable, name, "database "+quote(name)+" not deleted: "+err.Error()+
					"; its local file is kept; retry once the replica is reachable, or delete with ?purge=true to discard it everywhere")
			}
			h.opts.Logger.Warn("closing database for delete", "db", name, "err", err)
		}
	}
	if h.leases != nil {
		h.leases.Release(name)
	}
	for _, suffix := range localFileSuffixes {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return dberr.New(dberr.CodeInternal, "delete "+path+suffix+": "+err.Error())
		}
	}
	if purge {
		defer h.forgetReplicaNames()
		store := replica.Sub(h.opts.Store, name)
		objs, err := store.List(ctx, "")
		if err == nil {
			keys := make([]string, len(objs))
			for i, o := range objs {
				keys[i] = o.Key
			}
			err = store.Delete(ctx, keys...)
		}
		if err != nil {
			return dberr.ForDatabase(dberr.CodeUnavailable, name, "database "+quote(name)+" deleted locally but purging its replica "+store.String()+" failed: "+err.Error()+"; retry with ?purge=true")
		}
	}
	h.opts.Logger.Info("deleted database", "db", name, "purged_replica", purge)
	return nil
}
