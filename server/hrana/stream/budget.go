package stream

import (
	"context"

	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// execCollected runs stmt with its rows kept as Values (answers encoded
// after the request ran: protobuf, WebSocket, cursors), each charged to the
// request's answer budget as SQLite steps it. The row that passes the
// budget interrupts the statement: its rows are dropped and it fails
// SQLITE_TOOBIG naming limits.max-response-bytes, so what a request holds
// never grows past the cap however many rows it asks for; past
// largeturn.Size the statement waits for a turn to build a large answer
// (largeTurn).
func (rc *runConn) execCollected(ctx context.Context, st *step, stmt sqlconn.Stmt) (*proto.StmtResult, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	rc.largeTurn(ctx)
	defer rc.budget.Built()
	rows := &proto.RowsCollector{Budget: rc.budget, Stop: stop}
	stmt.Rows = rows
	res, err := rc.conn.Exec(ctx, stmt)
	if rows.TooBig() {
		return nil, rc.budget.TooBig()
	}
	if err != nil {
		return nil, err
	}
	rc.noteTx(st)
	out := toStmtResult(res, true)
	if collected, streamed := rows.Collected(); streamed {
		out.Rows = collected
		if out.Rows == nil {
			out.Rows = [][]proto.Value{}
		}
	} else if !rc.budget.ChargeRows(res.Rows) { // a Conn that does not stream filled Rows instead
		return nil, rc.budget.TooBig()
	}
	rc.budget.ChargeResult(len(res.Columns))
	return out, nil
}

// largeTurn lets the statement about to run wait for a turn to build a
// large answer (largeturn) in ctx, on a pooled read connection only: a
// statement in a write group or on a session holds the database's writer,
// and waiting there would stall every other writer of the database.
func (rc *runConn) largeTurn(ctx context.Context) {
	if rc.onReader {
		rc.budget.Wait = ctx
	}
}
