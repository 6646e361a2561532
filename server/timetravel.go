package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/auth"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/ws"
	"github.com/sluicedb/sluice/server/httpjson"
	"github.com/sluicedb/sluice/server/jsonapi"
	"github.com/sluicedb/sluice/server/timetravel"
)

// PastStatesDir is where past states restored for time-travel reads live,
// under the data directory; it is emptied at start.
const PastStatesDir = ".past"

// TimeTravel is the config's time-travel section: how much restored past
// state the cache keeps (zero: the defaults, 1 GiB and 16 states).
type TimeTravel struct {
	MaxBytes  units.Size `yaml:"max-bytes"`
	MaxStates int        `yaml:"max-states"`
}

// newPastStates is the cache of past states that time-travel reads use.
func newPastStates(cfg Config, store replica.Store, logger *slog.Logger) (*timetravel.Cache, error) {
	return timetravel.New(timetravel.Options{
		Dir:              filepath.Join(cfg.DataDir, PastStatesDir),
		Store:            store,
		MaxBytes:         int64(cfg.TimeTravel.MaxBytes),
		MaxEntries:       cfg.TimeTravel.MaxStates,
		ReadConns:        2,
		StatementTimeout: time.Duration(cfg.Limits.StatementTimeout),
		OnDemand:         pastOnDemand(cfg),
		Logger:           logger,
	})
}

// jsonAt serves POST /v1/databases/NAME/query?at=TXID|RFC3339 from the past
// state; without ?at=, next. Any instance answers it: the state comes from
// the bucket.
func (s *Server) jsonAt(j *jsonapi.API, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if !q.Has("at") {
			next(w, r)
			return
		}
		name := r.PathValue("name")
		if err := dbhost.ValidateName(name); err != nil {
			writeError(w, r, err)
			return
		}
		if !auth.FromContext(r.Context()).CanRead(name) {
			writeError(w, r, dberr.New(dberr.CodeForbidden, "this token may not use database \""+name+"\""))
			return
		}
		p, err := timetravel.ParsePoint(q.Get("at"))
		if err != nil {
			writeError(w, r, err)
			return
		}
		db, err := s.past.At(r.Context(), name, p)
		if err != nil {
			writeError(w, r, err)
			return
		}
		w.Header().Set(dbhost.BookmarkHeader, strconv.FormatUint(uint64(dbhost.CurrentBookmark(db)), 10))
		if err := j.ServeRead(w, r, db); err != nil {
			writeError(w, r, err)
		}
	}
}

// hranaAt serves Hrana requests to /db/NAME@POINT/... from the past state
// (a database name never holds '@'); other names go to next.
func (s *Server) hranaAt(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		base, at, ok := strings.Cut(r.PathValue("name"), "@")
		if !ok || r.Method == http.MethodGet {
			next(w, r)
			return
		}
		r.SetPathValue("name", base)
		p, err := timetravel.ParsePoint(at)
		if err != nil {
			writeError(w, r, err)
			return
		}
		name, owner, _, ok := s.hranaAccess(w, r)
		if !ok {
			return
		}
		db, err := s.past.At(r.Context(), name, p)
		if err != nil {
			writeError(w, r, err)
			return
		}
		w.Header().Set(dbhost.BookmarkHeader, strconv.FormatUint(uint64(dbhost.CurrentBookmark(db)), 10))
		ctx := hrana.WithOwner(hrana.WithDatabase(r.Context(), db), owner)
		s.hrana.ServeHTTP(w, r.WithContext(ctx))
	}
}

// pastWebSocket makes authorize's grants open database name at point at:
// the credential is checked as for the database itself.
func (s *Server) pastWebSocket(authorize ws.Authorizer, name, at string) ws.Authorizer {
	return func(ctx context.Context, jwt string) (*ws.Grant, *proto.Error) {
		g, perr := authorize(ctx, jwt)
		if perr != nil {
			return nil, perr
		}
		g.Open = func(ctx context.Context) (dbhost.Database, error) {
			p, err := timetravel.ParsePoint(at)
			if err != nil {
				return nil, err
			}
			return s.past.At(ctx, name, p)
		}
		return g, nil
	}
}

// forgetPastOnDelete drops the past states cached here of a database once
// it is deleted: a database created anew under its name restarts at TXID 1.
func (s *Server) forgetPastOnDelete(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		next(w, r)
		if sw, ok := w.(*statusWriter); ok && sw.status/100 == 2 {
			s.past.Forget(r.PathValue("name"))
		}
	}
}

// branchRequest is PUT /v1/databases/NEW's body for a branch.
type branchRequest struct {
	From string `json:"from"`
	At   string `json:"at"`
}

// branchOr serves PUT /v1/databases/NEW with {"from":"SRC","at":...}: NEW
// is created holding SRC's state at that point (absent: its newest). A PUT
// without a body is next's (an empty database).
func (s *Server) branchOr(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, r, dberr.New(dberr.CodeBadRequest, "read request body: "+err.Error()))
			return
		}
		if len(bytes.TrimSpace(body)) == 0 {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next(w, r)
			return
		}
		var req branchRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.From == "" {
			msg := `a PUT body branches a database: {"from":"SOURCE","at":"TXID or RFC 3339 time"} ("at" optional)`
			if err != nil {
				msg += ": " + err.Error()
			}
			writeError(w, r, dberr.New(dberr.CodeBadRequest, msg))
			return
		}
		name := r.PathValue("name")
		for _, n := range []string{name, req.From} {
			if err := dbhost.ValidateName(n); err != nil {
				writeError(w, r, err)
				return
			}
		}
		pr := auth.FromContext(r.Context())
		if !pr.CanWrite(name) || !pr.CanRead(req.From) {
			writeError(w, r, dberr.New(dberr.CodeForbidden, "this token may not create database \""+name+"\" from \""+req.From+"\" (read-only, or limited to other databases)"))
			return
		}
		var p timetravel.Point
		if req.At != "" {
			if p, err = timetravel.ParsePoint(req.At); err != nil {
				writeError(w, r, err)
				return
			}
		}
		txid, err := timetravel.Resolve(r.Context(), s.store, req.From, p)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if _, err := s.host.Branch(r.Context(), name, req.From, txid); err != nil {
			writeError(w, r, err)
			return
		}
		info, _ := s.host.Describe(name)
		httpjson.Write(w, http.StatusCreated, map[string]any{"name": name, "from": req.From, "from_txid": uint64(txid), "txid": info.TXID})
	}
}
