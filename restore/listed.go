package restore

import (
	"context"
	"fmt"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// Listed is a plan made while a point was resolved (ResolveTXID), for
// OpenPagesPlanned: reading a past state on demand then costs one LIST,
// not one to resolve the point and another to plan it.
type Listed struct {
	plan []replica.LTXFile
	txid ltx.TXID
}

// TXID is the state the plan restores.
func (l Listed) TXID() ltx.TXID { return l.txid }

// ResolveTXID is ResolvePoint for a TXID, from one LIST: the files' headers
// (the span's times) are read only to word an error, which comes from
// ResolvePoint itself. On success the span has no times, and the plan
// comes with it.
func ResolveTXID(ctx context.Context, store replica.Store, txid ltx.TXID) (Span, Listed, error) {
	if txid == 0 {
		return Span{}, Listed{}, fmt.Errorf("restore: ResolveTXID needs a TXID")
	}
	levels, err := replica.ListAllLTX(ctx, store)
	if err != nil {
		return Span{}, Listed{}, err
	}
	files := flatten(levels)
	var span Span
	for _, f := range files {
		if f.MinTXID == 1 && (span.Oldest == 0 || f.MaxTXID < span.Oldest) {
			span.Oldest = f.MaxTXID
		}
		span.Newest = max(span.Newest, f.MaxTXID)
	}
	if span.Oldest != 0 && txid >= span.Oldest && txid <= span.Newest {
		if plan, err := planSorted(files, txid); err == nil {
			return span, Listed{plan: plan, txid: txid}, nil
		}
	}
	// Not restorable from this listing: ResolvePoint's error names what
	// is available (or, the replica having changed meanwhile, it resolves).
	if _, span, err = ResolvePoint(ctx, store, Options{TXID: txid}); err != nil {
		return span, Listed{}, err
	}
	plan, err := Plan(ctx, store, Options{TXID: txid})
	if err != nil {
		return span, Listed{}, err
	}
	return span, Listed{plan: plan, txid: txid}, nil
}

// OpenPagesPlanned is OpenPages from a plan ResolveTXID made (no LIST).
func OpenPagesPlanned(ctx context.Context, store replica.Store, l Listed, head int64) (*Pages, error) {
	if len(l.plan) == 0 {
		return nil, fmt.Errorf("restore: OpenPagesPlanned needs a plan from ResolveTXID")
	}
	return openPlanned(ctx, store, Options{TXID: l.txid}, l.plan, head)
}
