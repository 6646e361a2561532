package hrana

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/followers"
	"github.com/sluicedb/sluice/server/hrana/hranapb"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/stream"
)

// Reads on a read replica. A server that does not write a database asks,
// before anything runs, whether a request may be answered by its follower
// (InspectRead, then followers.StatementsReadOnly on the follower), and answers
// it there with ServeRead.

// Read is what a Hrana request over HTTP says of itself before it runs.
type Read struct {
	// Replica: a read replica may answer the request if every statement of
	// Statements reads. False: the request belongs to the writer: it
	// continues a stream (a baton) or leaves one open (no close), opens a
	// transaction that outlives its batch, or is a cursor.
	Replica bool
	// Statements are the SQL texts the request runs outside transaction
	// control, as its stream would run them.
	Statements []string
	// ReplicationIndex is the highest replication_index the request
	// carries (0: none): the position the answer must reflect.
	ReplicationIndex dbhost.Bookmark
}

// InspectRead reads an HTTP request's path and body. A body that does not
// decode, or a request the handler refuses before running anything, may be
// answered anywhere: it is reported as a replica read with no statements.
func InspectRead(path string, body []byte) Read {
	var requests []proto.StreamRequest
	switch stripDatabasePrefix(path) {
	case "/v2/pipeline", "/v3/pipeline":
		var p proto.PipelineRequest
		if json.Unmarshal(body, &p) != nil {
			return Read{Replica: true}
		}
		if p.Baton != nil && *p.Baton != "" {
			return Read{}
		}
		requests = p.Requests
	case "/v3-protobuf/pipeline":
		p, err := hranapb.DecodePipelineRequest(body)
		if err != nil {
			return Read{Replica: true}
		}
		if p.Baton != nil && *p.Baton != "" {
			return Read{}
		}
		requests = p.Requests
	case "/v1/execute":
		var v1 v1ExecuteReq
		if json.Unmarshal(body, &v1) != nil || v1.Stmt == nil {
			return Read{Replica: true}
		}
		requests = []proto.StreamRequest{{Type: "execute", Stmt: v1.Stmt}, {Type: "close"}}
	case "/v1/batch":
		var v1 v1BatchReq
		if json.Unmarshal(body, &v1) != nil || v1.Batch == nil {
			return Read{Replica: true}
		}
		requests = []proto.StreamRequest{{Type: "batch", Batch: v1.Batch}, {Type: "close"}}
	case "/":
		stmts, _, msg := decodeLegacy(body)
		if msg != "" {
			return Read{Replica: true}
		}
		requests = []proto.StreamRequest{{Type: "batch", Batch: legacyBatch(stmts)}, {Type: "close"}}
	default:
		return Read{}
	}
	for i := range requests {
		if requests[i].Validate() != nil {
			return Read{Replica: true}
		}
	}
	stmts, ok := pipelineStatements(requests)
	if !ok {
		return Read{}
	}
	return Read{Replica: true, Statements: stmts, ReplicationIndex: dbhost.Bookmark(replicationIndex(body))}
}

// pipelineStatements lists what a new stream would run for requests, and
// reports false unless the stream closes and no batch needs a session (a
// transaction left open, a savepoint, BEGIN READONLY), as runSteps decides.
func pipelineStatements(requests []proto.StreamRequest) ([]string, bool) {
	stored := map[int32]string{}
	resolve := func(sql *string, id *int32) (string, bool) {
		switch {
		case sql != nil && id != nil:
			return "", false
		case sql != nil:
			return *sql, true
		case id != nil:
			text, ok := stored[*id]
			return text, ok
		}
		return "", false
	}
	single := func(st *proto.Stmt) (string, bool) {
		sql, ok := resolve(st.SQL, st.SQLID)
		if !ok {
			return "", false
		}
		sql, e := stream.SingleStatement(sql)
		return sql, e == nil
	}
	var out []string
	for _, req := range requests {
		var batch []string // statements that run (the others fail before they do)
		switch req.Type {
		case "execute":
			if sql, ok := single(req.Stmt); ok {
				batch = append(batch, sql)
			}
		case "batch":
			for i := range req.Batch.Steps {
				if sql, ok := single(&req.Batch.Steps[i].Stmt); ok {
					batch = append(batch, sql)
				}
			}
		case "sequence":
			if text, ok := resolve(req.SQL, req.SQLID); ok {
				batch = sqltext.Split(text)
			}
		case "store_sql":
			stored[*req.SQLID] = *req.SQL
		case "close_sql":
			delete(stored, *req.SQLID)
		case "close":
			return out, true // later requests find the stream closed
		}
		plain, pooled := pooledBatch(batch)
		if !pooled {
			return nil, false
		}
		out = append(out, plain...)
	}
	return nil, false // the stream stays open: its baton must lead to the writer
}

// pooledBatch returns a batch's statements other than transaction control,
// and whether the batch runs on the read pool: no transaction control, or a
// transaction that begins and ends inside it (see runSteps).
func pooledBatch(sqls []string) ([]string, bool) {
	txControl, virtualOK, endsTx := false, true, false
	plain := make([]string, 0, len(sqls))
	for _, sql := range sqls {
		class := sqltext.Classify(sql)
		if !class.IsTxControl() {
			plain = append(plain, sql)
			continue
		}
		txControl = true
		switch {
		case class.Kind == sqltext.Savepoint, class.ReadOnlyBegin:
			virtualOK = false
		case class.Kind == sqltext.Commit || class.Kind == sqltext.Rollback:
			endsTx = true
		}
	}
	return plain, !txControl || (virtualOK && endsTx)
}

// replicationIndex is the highest replication_index a JSON Hrana request
// carries (Hrana puts it on each stmt and batch, as a decimal string), or 0.
func replicationIndex(body []byte) uint64 {
	if !bytes.Contains(body, []byte(`"replication_index"`)) {
		return 0
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return 0
	}
	var most uint64
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "replication_index" {
					var n uint64
					switch idx := e.(type) {
					case string:
						n, _ = strconv.ParseUint(idx, 10, 64)
					case float64:
						n = uint64(idx)
					}
					most = max(most, n)
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return most
}

// ServeRead answers, on db (a read replica), a POST that InspectRead found
// a replica may answer. It returns a *followers.NeedsWriterError, having
// written nothing, when the request needs the writer after all (a write
// that only SQLite saw, a transaction its batch left open): the caller
// then sends it to the writer.
func (h *Handler) ServeRead(w http.ResponseWriter, r *http.Request, db dbhost.Database) error {
	post := h.readablePost(stripDatabasePrefix(r.URL.Path))
	if post == nil || r.Method != http.MethodPost {
		return &followers.NeedsWriterError{Name: db.Name()} // not a request InspectRead passes
	}
	return post(w, r, db)
}
