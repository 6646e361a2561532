package dbhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/dberr"
)

// Branch creates database name holding database from's state at TXID txid
// (0: its newest in the replica): from's replica is restored into name's
// file, which then replicates as any database, to its own prefix, with a
// history that starts with a snapshot of that state. It returns once that
// snapshot is in the bucket. name must exist neither here nor in the
// replica (ALREADY_EXISTS); from must have a replica (NOT_FOUND).
func (h *Host) Branch(ctx context.Context, name, from string, txid ltx.TXID) (Database, error) {
	for _, n := range []string{name, from} {
		if err := ValidateName(n); err != nil {
			return nil, err
		}
	}
	if name == from {
		return nil, dberr.ForDatabase(dberr.CodeBadRequest, name, "a branch needs a new name: "+quote(name)+" is its source")
	}
	if h.opts.FollowOnly {
		return nil, h.followOnlyLeader(ctx, name)
	}
	unlock := h.lock(name)
	defer unlock()
	exists := dberr.ForDatabase(dberr.CodeExists, name, "database "+quote(name)+" already exists")
	if db, err := h.cached(name); db != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return nil, exists
	}
	path := h.path(name)
	for _, suffix := range localFileSuffixes {
		if _, err := os.Lstat(path + suffix); err == nil {
			return nil, exists
		}
	}
	own, err := replica.ListAllLTX(ctx, replica.Sub(h.opts.Store, name))
	if err != nil {
		return nil, dberr.ForDatabase(dberr.CodeUnavailable, name, "list the replica of "+quote(name)+": "+err.Error()+"; retry")
	}
	for _, lvl := range own {
		if len(lvl) > 0 {
			return nil, dberr.ForDatabase(dberr.CodeExists, name, "database "+quote(name)+" already exists in the replica")
		}
	}
	start := time.Now()
	src := replica.Sub(h.opts.Store, from)
	res, err := restore.Restore(ctx, src, path, restore.Options{TXID: txid})
	switch {
	case errors.Is(err, restore.ErrNoReplica):
		return nil, NotFound(from)
	case err != nil:
		return nil, dberr.ForDatabase(dberr.CodeUnavailable, name, fmt.Sprintf("branch %s from %s: restore failed: %v; retry", quote(name), quote(from), err))
	}
	// Replication starts at open: the engine ships a snapshot of the file
	// (TXID 1 of the new history) before open returns.
	db, err := h.open(ctx, name, false, false)
	if err != nil {
		for _, suffix := range localFileSuffixes {
			_ = os.Remove(path + suffix)
		}
		return nil, err
	}
	h.opts.Logger.Info("branched database", "db", name, "from", from, "from_txid", uint64(res.Pos.TXID),
		"bytes_fetched", res.Bytes, "pages", res.Pages, "txid", uint64(db.rep.Pos().TXID), "took", time.Since(start).Round(time.Millisecond))
	return db, nil
}
