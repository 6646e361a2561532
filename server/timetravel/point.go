// Package timetravel answers reads at a past state of a database: a point
// (a TXID, a read-your-writes bookmark, which is a TXID, or an RFC 3339
// time) is resolved against the replica's history, the state there is
// restored once into a bounded cache under the data directory (shared by
// concurrent requests for the same point, evicted least recently used) and
// served read-only through the server's read connections.
//
// It imports restore, replica, server/sqlconn, server/coldopen (reads
// while a state is restored), server/dbhost (for the Database interface
// it implements) and server/dberr; the server package mounts it.
package timetravel

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
)

// Point names a past state: a TXID, or the newest state at or before a time.
// The zero Point is the newest state.
type Point struct {
	TXID ltx.TXID
	Time time.Time
}

func (p Point) String() string {
	if !p.Time.IsZero() {
		return p.Time.UTC().Format(time.RFC3339Nano)
	}
	if p.TXID == 0 {
		return "latest"
	}
	return strconv.FormatUint(uint64(p.TXID), 10)
}

// ParsePoint reads a point as clients write it: decimal digits are a TXID
// (a Sluice-Bookmark is one), 16 hex digits a TXID as LTX file names write
// it (as sluice restore -txid reads them), anything else an RFC 3339 time.
func ParsePoint(s string) (Point, error) {
	if s == "" {
		return Point{}, dberr.New(dberr.CodeBadRequest, "empty point in time: give a TXID (a bookmark) or an RFC 3339 time such as 2026-11-26T10:00:00Z")
	}
	if len(s) == 16 && strings.Trim(s, "0123456789abcdefABCDEF") == "" { // as in LTX file names, like sluice restore -txid
		if n, err := ltx.ParseTXID(strings.ToLower(s)); err == nil && n > 0 {
			return Point{TXID: n}, nil
		}
	}
	if strings.Trim(s, "0123456789") == "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return Point{}, dberr.New(dberr.CodeBadRequest, "point in time "+strconv.Quote(s)+": a TXID is a number from 1")
		}
		return Point{TXID: ltx.TXID(n)}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Point{}, dberr.New(dberr.CodeBadRequest, "point in time "+strconv.Quote(s)+
			": not a TXID (digits) nor an RFC 3339 time such as 2026-11-26T10:00:00Z")
	}
	return Point{Time: t}, nil
}

// Resolve turns p into the TXID of database name's replica (under root)
// that a restore reaches; errors are dberr's: NOT_FOUND for a database
// without a replica, POINT_UNAVAILABLE (naming the states available) for a
// point outside its history.
func Resolve(ctx context.Context, root replica.Store, name string, p Point) (ltx.TXID, error) {
	txid, _, err := resolve(ctx, root, name, p)
	return txid, err
}

// resolve is Resolve that also returns the newest TXID in the replica.
func resolve(ctx context.Context, root replica.Store, name string, p Point) (ltx.TXID, ltx.TXID, error) {
	txid, span, err := restore.ResolvePoint(ctx, replica.Sub(root, name), restore.Options{TXID: p.TXID, Timestamp: p.Time})
	if err == nil {
		return txid, span.Newest, nil
	}
	return 0, 0, resolveError(ctx, name, p, err)
}

func resolveError(ctx context.Context, name string, p Point, err error) error {
	var pe *restore.PointError
	switch {
	case errors.Is(err, restore.ErrNoReplica):
		return dbhost.NotFound(name)
	case errors.As(err, &pe):
		return &dberr.Error{Code: dberr.CodePointUnavailable, Name: name,
			Message: "database \"" + name + "\" at " + p.String() + ": " + pe.Reason, Err: err}
	case ctx.Err() != nil:
		return dberr.ForDatabase(dberr.CodeTimeout, name, "database \""+name+"\" at "+p.String()+": "+ctx.Err().Error())
	}
	return &dberr.Error{Code: dberr.CodeUnavailable, Name: name,
		Message: "database \"" + name + "\" at " + p.String() + ": read the replica's history: " + err.Error(), Err: err}
}
