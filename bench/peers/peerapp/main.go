// Command peerapp is the tiny HTTP app that sluice's benchmarks compare sluice
// with: the same routes for every scenario, backed by one of three stores —
//
//	-store sqlite   net/http + mattn/go-sqlite3, the reference stack (run
//	                `litestream replicate` beside it to make it durable)
//	-store mariadb  the same SQL on MariaDB (github.com/go-sql-driver/mysql)
//	-store file     append-only files, as a text-file BBS would
//
// It is its own main package so that mattn/go-sqlite3 never enters the sluice
// binary (two SQLite libraries in one process break POSIX locks).
//
// Routes: POST /setup?scenario=S, GET /count?scenario=S, POST /count_up,
// POST /rpc/put-object, POST /bbs/write, GET /bbs/read, GET /bbs/read_limit,
// GET /d1/read, GET /d1/write?region=R, GET /health.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
)

// store is what each backend implements; scenario names are sluice's
// (counter, put-object, bbs-*, d1-*).
type store interface {
	Setup(scenario string) error
	Count(scenario string) (int64, error)
	CountUp() (int64, error)
	PutObject(doc string) error
	BBSWrite(category, text string) error
	BBSRead(limit int) ([]post, error) // limit 0: every post
	D1Read() ([]d1row, error)
	D1Write(region string) (d1row, error)
	Close() error
}

type post struct {
	ID       int64  `json:"id"`
	Category string `json:"category"`
	Text     string `json:"text"`
}

type d1row struct {
	ID        int64  `json:"id"`
	Timestamp string `json:"timestamp"`
	Region    string `json:"region"`
}

// The insert scenario's JSON document and the BBS post, as the scenarios send them.
const (
	seedJSON = `{"age":10, "name":"yamada", "class":"A"}`
	bbsText  = "Hello from the bench: a short BBS post of about twenty bytes."
	bbsSeed  = 10000
)

func main() {
	kind := flag.String("store", "sqlite", "sqlite, mariadb or file")
	listen := flag.String("listen", "127.0.0.1:0", "listen address (port 0: pick one and print it)")
	dbPath := flag.String("db", "peer.db", "sqlite: database file")
	dsn := flag.String("dsn", "", "mariadb: DSN, e.g. root@tcp(127.0.0.1:3306)/bench")
	dir := flag.String("dir", "peer-files", "file: directory of the append-only files")
	flag.Parse()

	var (
		s   store
		err error
	)
	switch *kind {
	case "sqlite":
		s, err = openSQLite(*dbPath)
	case "mariadb":
		s, err = openMariaDB(*dsn)
	case "file":
		s, err = openFiles(*dir)
	default:
		err = fmt.Errorf("unknown -store %q (sqlite, mariadb or file)", *kind)
	}
	if err != nil {
		log.Fatalf("peerapp: %v", err)
	}
	defer s.Close()

	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("peerapp: listen %s: %v", *listen, err)
	}
	// The bench reads this line to learn the port.
	fmt.Printf("listening on http://%s\n", l.Addr())
	os.Stdout.Sync()
	log.Fatal(http.Serve(l, routes(s)))
}

func routes(s store) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("POST /setup", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Setup(r.URL.Query().Get("scenario")); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, r *http.Request) {
		n, err := s.Count(r.URL.Query().Get("scenario"))
		if err != nil {
			fail(w, err)
			return
		}
		io.WriteString(w, strconv.FormatInt(n, 10)+"\n")
	})
	mux.HandleFunc("POST /count_up", func(w http.ResponseWriter, r *http.Request) {
		n, err := s.CountUp()
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, map[string]int64{"count": n})
	})
	mux.HandleFunc("POST /rpc/put-object", func(w http.ResponseWriter, r *http.Request) {
		if err := s.PutObject(seedJSON); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /bbs/write", func(w http.ResponseWriter, r *http.Request) {
		if err := s.BBSWrite("general", bbsText); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	read := func(limit int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			posts, err := s.BBSRead(limit)
			if err != nil {
				fail(w, err)
				return
			}
			writeJSON(w, posts)
		}
	}
	mux.HandleFunc("GET /bbs/read", read(0))
	mux.HandleFunc("GET /bbs/read_limit", read(100))
	mux.HandleFunc("GET /d1/read", func(w http.ResponseWriter, r *http.Request) {
		rows, err := s.D1Read()
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, map[string]any{"results": rows})
	})
	mux.HandleFunc("GET /d1/write", func(w http.ResponseWriter, r *http.Request) {
		row, err := s.D1Write(r.URL.Query().Get("region"))
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, map[string]any{"results": []d1row{row}})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, err error) {
	log.Printf("peerapp: %v", err)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// family maps a scenario to the table (or file) it works on.
func family(scenario string) (string, error) {
	switch scenario {
	case "counter":
		return "counters", nil
	case "put-object":
		return "t", nil
	case "bbs-write", "bbs-read-all", "bbs-read-100", "bbs-mixed":
		return "bbs", nil
	case "d1-read", "d1-write":
		return "d1", nil
	}
	return "", fmt.Errorf("unknown scenario %q", scenario)
}

// seededRows is how many rows a scenario needs before its load starts.
func seededRows(scenario string) int64 {
	switch scenario {
	case "bbs-read-all", "bbs-read-100", "bbs-mixed":
		return bbsSeed
	case "d1-read":
		return 1
	}
	return 0
}
