package dbhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/groupcommit"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// open opens name (the caller holds its lock). create: make an empty
// database if neither a local file nor a replica exists. exclusive: a
// database restored from the replica is reported as a conflict.
func (h *Host) open(ctx context.Context, name string, create, exclusive bool) (*database, error) {
	path := h.path(name)
	store := replica.Sub(h.opts.Store, name)
	log := h.opts.Logger.With("db", name)
	notFound := false
	if h.leases != nil { // the lease first: restore must see the previous holder's last upload
		var release func()
		var err error
		if e := h.takeHandedLease(name); e != nil {
			release, err = e.wait()
			e.cancel() // its context served the acquisition only
		} else {
			release, err = h.acquireLease(ctx, name, store)
		}
		if err != nil {
			return nil, err
		}
		h.adoptCopy(ctx, name, path, store, log)
		if h.opts.OnWriterOpening != nil {
			h.opts.OnWriterOpening(name)
		}
		defer func() {
			h.mu.Lock()
			opened := h.dbs[name] != nil
			h.mu.Unlock()
			switch {
			case opened:
			case notFound:
				// No such database: its lease object would be the
				// name's only trace in the bucket.
				h.leases.Discard(name)
			default:
				release()
			}
		}()
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		restored, err := h.restore(ctx, store, path, log)
		switch {
		case err != nil:
			return nil, err
		case !restored && !create:
			notFound = true
			return nil, NotFound(name)
		case !restored:
			if err := createEmpty(path); err != nil {
				return nil, dberr.New(dberr.CodeInternal, "create database "+quote(name)+": "+err.Error())
			}
			log.Info("created database", "path", path)
		case exclusive:
			if _, err := h.start(ctx, name, path, store, log); err != nil {
				return nil, err
			}
			return nil, dberr.ForDatabase(dberr.CodeExists, name, "database "+quote(name)+" already exists in the replica; it was restored")
		}
	}
	return h.start(ctx, name, path, store, log)
}

// restore restores path from store; restored=false if the replica is empty.
func (h *Host) restore(ctx context.Context, store replica.Store, path string, log *slog.Logger) (bool, error) {
	start := time.Now()
	err := h.opts.Replication.Restore(ctx, store, path)
	if h.opts.Replication.noReplica(err) {
		return false, nil
	}
	if err != nil {
		h.restoreDamaged(strings.TrimSuffix(filepath.Base(path), ".db"), store, err)
		return false, dberr.New(dberr.CodeUnavailable, fmt.Sprintf("restore of %s from %s failed: %v; check the replica and retry", filepath.Base(path), store, err))
	}
	h.restoreHealed(strings.TrimSuffix(filepath.Base(path), ".db"))
	log.Info("restored database from replica", "replica", store.String(), "took", time.Since(start))
	return true, nil
}

// createEmpty creates a WAL-mode database with its first page written, so
// the engine has something to snapshot.
func createEmpty(path string) error {
	c, err := sqlconn.Open(path, sqlconn.OwnWriter, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Run("PRAGMA user_version=0")
}

// start opens its replication and connections; on a diverged local file
// (sync mode: the bucket is the truth) it drops the file and restores.
func (h *Host) start(ctx context.Context, name, path string, store replica.Store, log *slog.Logger) (*database, error) {
	release, err := h.reserveSlot(ctx, name)
	if err != nil {
		return nil, err
	}
	defer release() // after the database is in the table (or failed)
	db := &database{name: name, path: path, opts: &h.opts, log: log, store: store,
		sessions: map[*session]struct{}{}, reopenAs: h.Get, turn: groupcommit.NewTurn(h.opts.IdleWriteTimeout)}
	db.touch()
	rep, err := h.openReplication(ctx, db)
	if h.opts.Replication.diverged(err) {
		// Sync mode: only what the bucket holds was ever acknowledged, so the
		// local file's extra commits are dropped (not kept aside: a copy per
		// reopen would pile up) and the replica is restored.
		log.Warn("local database differs from its replica; dropping its unshipped commits (none was acknowledged: the bucket is the truth in sync mode) and restoring the replica",
			"err", err)
		for _, suffix := range localFileSuffixes {
			if rerr := os.Remove(path + suffix); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				return nil, dberr.New(dberr.CodeInternal, "remove diverged database: "+rerr.Error())
			}
		}
		if _, rerr := h.restore(ctx, store, path, log); rerr != nil {
			return nil, rerr
		}
		rep, err = h.openReplication(ctx, db)
	}
	if err != nil {
		if h.opts.Replication.fenced(err) {
			return nil, dberr.ForDatabase(dberr.CodeUnavailable, name, "database "+quote(name)+": another writer owns its replica (fenced): "+err.Error())
		}
		return nil, dberr.ForDatabase(dberr.CodeUnavailable, name, "database "+quote(name)+": start replication to "+store.String()+": "+err.Error())
	}
	db.rep = rep
	if err := db.openConns(); err != nil {
		rep.Close(ctx, false)
		return nil, dberr.ForDatabase(dberr.CodeInternal, name, "database "+quote(name)+": "+err.Error())
	}
	db.commits = groupcommit.New(groupcommit.Options{
		Name: name, Writer: db.writer, Replica: rep, ReplicaName: store.String(), Logger: log,
		Observer: h.opts.Observer, Durability: h.opts.Durability,
		MaxGroupRequests: h.opts.MaxGroupRequests, UploadTimeout: h.opts.UploadTimeout,
		CommitWindow: h.opts.CommitWindow, Uploads: h.uploads, Pipeline: h.opts.UploadPipeline,
		ExternalPoll: h.opts.ExternalPoll, IdempotencyWindow: h.opts.IdempotencyWindow,
		Stall: h.opts.Stall, WriteStallTimeout: h.opts.WriteStallTimeout,
		Turn: db.turn,
	})
	h.mu.Lock()
	h.dbs[name] = db
	h.mu.Unlock()
	log.Info("opened database", "txid", uint64(rep.Pos().TXID), "durability", h.opts.Durability.String())
	return db, nil
}

func (db *database) openConns() error {
	w, err := sqlconn.Open(db.path, sqlconn.SharedWriter, db.opts.StatementTimeout)
	if err != nil {
		return err
	}
	db.writer = w
	db.readers = make(chan *sqlconn.Handle, db.opts.ReadConns)
	for i := 0; i < db.opts.ReadConns; i++ {
		r, err := sqlconn.Open(db.path, sqlconn.SharedReader, db.opts.StatementTimeout)
		if err != nil {
			w.Close()
			close(db.readers)
			for c := range db.readers {
				c.Close()
			}
			return err
		}
		db.readers <- r
	}
	return nil
}
