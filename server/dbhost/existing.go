package dbhost

import (
	"context"
	"errors"
	"os"

	"github.com/sluicedb/sluice/server/dberr"
)

// GetExisting is Get that never creates a database, the default one
// included: what exists neither here nor in the replica is NOT_FOUND. A
// read-only caller opens databases this way, since creating one is a write.
func (h *Host) GetExisting(ctx context.Context, name string) (Database, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if h.opts.FollowOnly {
		return nil, h.followOnlyLeader(ctx, name)
	}
	if db, err := h.cached(name); db != nil || err != nil {
		return db, err
	}
	if c := h.coldFor(name); c != nil {
		return c, nil
	}
	unlock := h.lock(name)
	defer unlock()
	if db, err := h.cached(name); db != nil || err != nil {
		return db, err
	}
	if c, err := h.getCold(ctx, name); c != nil || err != nil {
		return c, err
	}
	db, err := h.open(ctx, name, false, false)
	if errors.Is(err, dberr.ErrNotFound) {
		return nil, dberr.ForDatabase(dberr.CodeNotFound, name, "database "+quote(name)+
			" does not exist here or in the replica, and a read-only token cannot create it: create it with a read-write token (PUT /v1/databases/"+name+")")
	}
	if err != nil {
		return nil, err
	}
	return db, nil
}

// Exists reports whether name is a database held here (open or as a local
// file), without opening it or asking the replica: cheap enough to ask
// for every request, e.g. before labelling a metric with the name.
func (h *Host) Exists(name string) bool {
	if ValidateName(name) != nil {
		return false
	}
	h.mu.Lock()
	_, open := h.dbs[name]
	h.mu.Unlock()
	if open {
		return true
	}
	_, err := os.Stat(h.path(name))
	return err == nil
}

// Count is how many databases this host holds as local files.
func (h *Host) Count() (int, error) {
	ents, err := os.ReadDir(h.opts.DataDir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if name, ok := cutDBSuffix(e.Name()); ok && validName(name) {
			n++
		}
	}
	return n, nil
}

func cutDBSuffix(file string) (string, bool) {
	if len(file) > 3 && file[len(file)-3:] == ".db" {
		return file[:len(file)-3], true
	}
	return "", false
}
