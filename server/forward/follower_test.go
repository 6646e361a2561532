package forward_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/server/auth"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/followers"
	"github.com/sluicedb/sluice/server/forward"
	"github.com/sluicedb/sluice/server/hrana"
	"github.com/sluicedb/sluice/server/jsonapi"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// writerStub stands for the database's writer: it records what was
// proxied to it and answers "from the writer".
type writerStub struct {
	*httptest.Server
	mu  sync.Mutex
	got []string // "<path> <forwarded-by> <body>"
}

func newWriterStub(t *testing.T) *writerStub {
	ws := &writerStub{}
	ws.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ws.mu.Lock()
		ws.got = append(ws.got, r.URL.Path+" "+r.Header.Get(forward.HeaderForwardedBy)+" "+string(b))
		ws.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"from":"writer"}`))
	}))
	t.Cleanup(ws.Close)
	return ws
}

func (ws *writerStub) proxied() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]string(nil), ws.got...)
}

// followerHost is a follow-only instance whose database's lease names the
// writer stub; its follower is a real read replica.
type followerHost struct {
	*dbhost.Host
	replicas *followers.Set
	writer   string
}

func (h followerHost) Get(ctx context.Context, name string) (dbhost.Database, error) {
	return nil, &dbhost.NotLeaderError{Name: name, Leader: lease.Record{Holder: "w", URL: h.writer, Expires: time.Now().Add(time.Hour)}}
}

func (h followerHost) ReadReplica(ctx context.Context, name string, bm dbhost.Bookmark) (forward.Replica, error) {
	v, err := h.replicas.View(ctx, name, bm)
	if err != nil {
		return nil, err
	}
	return v, nil
}

func newHost(t *testing.T, store replica.Store, mod func(*dbhost.Options)) *dbhost.Host {
	log := slog.New(slog.DiscardHandler)
	opts := dbhost.Options{DataDir: t.TempDir(), Store: store, Replication: dbhost.EngineReplication(log, nil), Logger: log}
	if mod != nil {
		mod(&opts)
	}
	h, err := dbhost.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// instance serves the routes the front door gives forward, on a follower;
// served counts the requests handed to a protocol's read path.
func instance(t *testing.T, store replica.Store, writer string, served *atomic.Int64) http.Handler {
	follower := newHost(t, store, func(o *dbhost.Options) {
		o.FollowOnly = true
	})
	replicas := followers.New(followers.Options{DataDir: t.TempDir(), Store: store, Logger: slog.New(slog.DiscardHandler),
		PollInterval: 10 * time.Millisecond, BookmarkWait: 300 * time.Millisecond})
	t.Cleanup(replicas.Close)
	fw := forward.New(forward.Config{Host: followerHost{follower, replicas, writer}, Store: store, Timeout: time.Second,
		WriteError: func(w http.ResponseWriter, r *http.Request, err error) {
			if strings.HasPrefix(r.URL.Path, "/v1/databases/") {
				jsonapi.WriteError(w, err)
			} else {
				hrana.WriteError(w, err)
			}
		}})
	fw.SetSelf("http://follower.invalid")
	api := jsonapi.New(follower, 0)
	h := hrana.NewHandler(hrana.Config{})
	t.Cleanup(h.Close)
	jsonRead := &forward.Reader{
		Inspect: func(r *http.Request, body []byte) forward.Read {
			return forward.Read{Replica: true, Statements: jsonapi.QueryStatements(body)}
		},
		Serve: func(w http.ResponseWriter, r *http.Request, db dbhost.Database) error {
			served.Add(1)
			return api.ServeRead(w, r, db)
		},
	}
	hranaRead := &forward.Reader{
		Inspect: func(r *http.Request, body []byte) forward.Read {
			v := hrana.InspectRead(r.URL.Path, body)
			return forward.Read{Replica: v.Replica, Statements: v.Statements, Bookmark: v.ReplicationIndex}
		},
		Serve: func(w http.ResponseWriter, r *http.Request, db dbhost.Database) error {
			served.Add(1)
			return h.ServeRead(w, r, db)
		},
	}
	local := func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("%s %s was served as if this instance wrote the database", r.Method, r.URL.Path)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/databases/{name}/query", func(w http.ResponseWriter, r *http.Request) {
		fw.Serve(w, r, r.PathValue("name"), local, jsonRead)
	})
	mux.HandleFunc("POST /v2/pipeline", func(w http.ResponseWriter, r *http.Request) {
		fw.Serve(w, r, "default", local, hranaRead)
	})
	a, err := auth.New(auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return a.Middleware(mux, func(w http.ResponseWriter, r *http.Request, err error) { t.Fatal(err) })
}

type answer struct {
	status int
	body   string
	header http.Header
}

func post(t *testing.T, h http.Handler, path, body string, hdr ...string) answer {
	t.Helper()
	r := httptest.NewRequest("POST", path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return answer{w.Code, w.Body.String(), w.Header()}
}

// The follower answers what it can tell, before anything runs, is a pure
// read; everything else goes to the writer, once, untouched.
func TestFollowerAnswersReadsDecidedUpFrontAndProxiesTheRest(t *testing.T) {
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writerHost := newHost(t, store, nil)
	db, err := writerHost.Get(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	bm, err := db.Write(context.Background(), func(c sqlconn.Conn) error {
		_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (41)"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	writer := newWriterStub(t)
	var served atomic.Int64
	h := instance(t, store, writer.URL, &served)
	bookmark := func(b dbhost.Bookmark) string { return strconv.FormatUint(uint64(b), 10) }

	t.Run("JSON read with its write's bookmark is served here", func(t *testing.T) {
		a := post(t, h, "/v1/databases/default/query", `{"sql":"SELECT n + 1 FROM t"}`, dbhost.BookmarkHeader, bookmark(bm))
		if a.status != 200 || !strings.Contains(a.body, "42") || a.header.Get(forward.HeaderServedBy) != forward.ServedByReplica {
			t.Fatalf("read: %d %s %v", a.status, a.body, a.header)
		}
		if a.header.Get(dbhost.BookmarkHeader) == "" {
			t.Fatalf("read answered without a bookmark: %v", a.header)
		}
	})
	t.Run("Hrana read pipeline is served here", func(t *testing.T) {
		a := post(t, h, "/v2/pipeline", `{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT n FROM t","replication_index":"`+bookmark(bm)+`"}},{"type":"close"}]}`)
		if a.status != 200 || !strings.Contains(a.body, `"value":"41"`) || a.header.Get(forward.HeaderServedBy) != forward.ServedByReplica {
			t.Fatalf("Hrana read: %d %s %v", a.status, a.body, a.header)
		}
	})
	if got := writer.proxied(); len(got) != 0 {
		t.Fatalf("reads reached the writer: %q", got)
	}

	// proxiedOnce posts body and checks that the writer answered it;
	// readPath says whether the follower's read path ran it first (only
	// the fallback does).
	proxiedOnce := func(t *testing.T, readPath bool, path, body string, hdr ...string) {
		t.Helper()
		before := len(writer.proxied())
		servedBefore := served.Load()
		a := post(t, h, path, body, hdr...)
		if ran := served.Load() > servedBefore; ran != readPath {
			t.Fatalf("%s %s: ran on the follower: %v, want %v", path, body, ran, readPath)
		}
		got := writer.proxied()
		if a.status != 200 || a.body != `{"from":"writer"}` || a.header.Get(forward.HeaderServedBy) != "" || len(got) != before+1 {
			t.Fatalf("%s %s: %d %s %v (proxied %q)", path, body, a.status, a.body, a.header, got)
		}
		if want := path + " http://follower.invalid " + body; got[before] != want {
			t.Fatalf("the writer got %q, want %q", got[before], want)
		}
	}
	t.Run("JSON write is proxied", func(t *testing.T) {
		proxiedOnce(t, false, "/v1/databases/default/query", `{"sql":"INSERT INTO t VALUES (1)"}`)
	})
	t.Run("Hrana write is proxied", func(t *testing.T) {
		proxiedOnce(t, false, "/v2/pipeline", `{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"INSERT INTO t VALUES (1)"}},{"type":"close"}]}`)
	})
	t.Run("Hrana request continuing a stream is proxied", func(t *testing.T) {
		proxiedOnce(t, false, "/v2/pipeline", `{"baton":"abc","requests":[{"type":"execute","stmt":{"sql":"SELECT n FROM t"}},{"type":"close"}]}`)
	})
	t.Run("Hrana read that leaves its stream open is proxied", func(t *testing.T) {
		proxiedOnce(t, false, "/v2/pipeline", `{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT n FROM t"}}]}`)
	})
	t.Run("Hrana transaction that needs a session is proxied", func(t *testing.T) {
		proxiedOnce(t, false, "/v2/pipeline", `{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"BEGIN"}},{"type":"execute","stmt":{"sql":"SELECT n FROM t"}},{"type":"close"}]}`)
	})
	// The fallback: every statement reads, but the batch leaves its
	// transaction open when its second step fails while it runs (integer
	// overflow), which only running it shows. The follower answers nothing
	// and the writer gets the request.
	t.Run("Hrana read that needs the writer while it runs is proxied", func(t *testing.T) {
		proxiedOnce(t, true, "/v2/pipeline", `{"baton":null,"requests":[{"type":"batch","batch":{"steps":[`+
			`{"stmt":{"sql":"BEGIN"}},{"stmt":{"sql":"SELECT abs(-9223372036854775808)"}},`+
			`{"condition":{"type":"ok","step":1},"stmt":{"sql":"COMMIT"}}]}},{"type":"close"}]}`)
	})

	t.Run("bookmark ahead of the follower waits, then answers LAGGING", func(t *testing.T) {
		start := time.Now()
		a := post(t, h, "/v1/databases/default/query", `{"sql":"SELECT n FROM t"}`, dbhost.BookmarkHeader, "999999")
		if a.status != 503 || !strings.Contains(a.body, dberr.CodeLagging) || a.header.Get("Retry-After") == "" {
			t.Fatalf("unreachable bookmark: %d %s %v", a.status, a.body, a.header)
		}
		if waited := time.Since(start); waited < 300*time.Millisecond {
			t.Fatalf("refused after %s, before the follower's bookmark wait", waited)
		}
		a = post(t, h, "/v2/pipeline", `{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT n FROM t","replication_index":"999999"}},{"type":"close"}]}`)
		if a.status != 503 || !strings.Contains(a.body, dberr.CodeLagging) {
			t.Fatalf("unreachable replication_index: %d %s %v", a.status, a.body, a.header)
		}
	})
	t.Run("bookmark that is not a TXID is refused", func(t *testing.T) {
		a := post(t, h, "/v1/databases/default/query", `{"sql":"SELECT n FROM t"}`, dbhost.BookmarkHeader, "x")
		if a.status != 400 {
			t.Fatalf("bookmark x: %d %s", a.status, a.body)
		}
	})
}
