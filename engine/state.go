package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// Litestream 0.5 writes LTX files without rolling checksums (HeaderFlagNoChecksum)
// and its restore rejects files that carry one, so sluice's files carry none
// either. The rolling checksum of the last shipped state is kept here instead,
// beside the database, so that a restart can tell "the local database is exactly
// the replica's last TXID" (continue) from anything else (ship every page).
// A missing or stale file only costs one full-page upload, so it is written
// without fsync.

// stateSuffix names the file beside the database: <db>-sluice.
const stateSuffix = "-sluice"

type localState struct {
	Replica  string       `json:"replica"`
	TXID     ltx.TXID     `json:"txid"`
	Checksum ltx.Checksum `json:"checksum"`
}

// RecordPosition notes that the database at dbPath is exactly replica's state
// at pos (restore calls it after writing a database), so that replication
// continues from pos without re-uploading the database.
func RecordPosition(dbPath, replica string, pos ltx.Pos) error {
	b, err := json.Marshal(localState{Replica: replica, TXID: pos.TXID, Checksum: pos.PostApplyChecksum})
	if err != nil {
		return err
	}
	tmp := dbPath + stateSuffix + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("record replication position of %s: %w", dbPath, err)
	}
	if err := os.Rename(tmp, dbPath+stateSuffix); err != nil {
		return fmt.Errorf("record replication position of %s: %w", dbPath, err)
	}
	return nil
}

// recordedChecksum returns the checksum recorded for replica at txid, or 0.
func recordedChecksum(dbPath, replica string, txid ltx.TXID) ltx.Checksum {
	b, err := os.ReadFile(dbPath + stateSuffix)
	if errors.Is(err, fs.ErrNotExist) || err != nil {
		return 0
	}
	var st localState
	if json.Unmarshal(b, &st) != nil || st.Replica != replica || st.TXID != txid {
		return 0
	}
	return st.Checksum
}

// positionFile keeps <db>-sluice open while the database replicates, so that
// recording the position after an upload is one write instead of a create, a
// write and a rename (about a millisecond under load, on every upload's
// latency). The record is padded with spaces to the file's length, so one
// write replaces it whole (JSON ignores the trailing spaces); a torn record
// only costs one full-page upload after a restart, as a missing one does.
type positionFile struct {
	f    *os.File
	size int
}

func (pf *positionFile) record(dbPath, replica string, pos ltx.Pos) error {
	if pf.f == nil {
		f, err := os.OpenFile(dbPath+stateSuffix, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("record replication position of %s: %w", dbPath, err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("record replication position of %s: %w", dbPath, err)
		}
		pf.f, pf.size = f, int(st.Size())
	}
	b, err := json.Marshal(localState{Replica: replica, TXID: pos.TXID, Checksum: pos.PostApplyChecksum})
	if err != nil {
		return err
	}
	for len(b) < pf.size {
		b = append(b, ' ')
	}
	if _, err := pf.f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("record replication position of %s: %w", dbPath, err)
	}
	pf.size = len(b)
	return nil
}

func (pf *positionFile) close() {
	if pf.f != nil {
		_ = pf.f.Close()
		pf.f = nil
	}
}

// replicaPos is the replica's newest position from its listing: the newest
// file's trailer, unless a restore that wrote this database just read and
// verified that very file (Options.Verified) and recorded the position it
// reached there, which then says the same without a request.
func (db *DB) replicaPos(ctx context.Context, levels [][]replica.LTXFile) (ltx.Pos, error) {
	if f, ok := replica.Latest(levels); ok {
		for _, v := range db.opts.Verified {
			if v.Key != f.Key || v.Size != f.Size {
				continue
			}
			if sum := recordedChecksum(db.path, db.store.String(), f.MaxTXID); sum != 0 {
				return ltx.Pos{TXID: f.MaxTXID, PostApplyChecksum: sum}, nil
			}
		}
	}
	return replica.PosOf(ctx, db.store, levels)
}
