// Package minioproc runs a local MinIO server process on loopback: the one
// way sluice's tests (through internal/testenv) and benchmarks start MinIO.
// A server can be stopped like a crash and started again on the same port and
// data directory. It imports only the standard library and the AWS SDK (to
// create buckets).
package minioproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Credentials and region of servers started with Start.
const (
	AccessKey = "sluicebench"
	SecretKey = "sluicebench-secret"
	Region    = "us-east-1"
)

// Server is a MinIO process (running or stopped).
type Server struct {
	Endpoint string // http://127.0.0.1:PORT

	bin, dir          string
	user, password    string
	addr, consoleAddr string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Binary finds the MinIO binary: $SLUICE_MINIO, the tools cache
// ($SLUICE_TOOLS or ~/.cache/sluice-tools), then PATH.
func Binary() (string, error) {
	if p := os.Getenv("SLUICE_MINIO"); p != "" {
		return p, nil
	}
	tools := os.Getenv("SLUICE_TOOLS")
	if tools == "" {
		home, _ := os.UserHomeDir()
		tools = filepath.Join(home, ".cache", "sluice-tools")
	}
	if p := filepath.Join(tools, "bin", "minio"); fileExists(p) {
		return p, nil
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	return "", errors.New("minio not found: run scripts/install-test-deps.sh (or set SLUICE_MINIO)")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// New prepares a server keeping its data and log in dir, on free loopback
// ports, with the given root credentials. It does not start it.
func New(dir, user, password string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	console, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	return &Server{Endpoint: "http://" + addr, bin: bin, dir: dir, user: user, password: password,
		addr: addr, consoleAddr: "127.0.0.1:" + strconv.Itoa(console)}, nil
}

// Start launches MinIO with the benchmark credentials and waits until it is ready.
func Start(ctx context.Context, dir string) (*Server, error) {
	s, err := New(dir, AccessKey, SecretKey)
	if err != nil {
		return nil, err
	}
	if err := s.Run(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Run starts the process (a no-op if it is running) and waits until MinIO
// answers its readiness check. After Stop it comes back on the same port with
// the same data.
func (s *Server) Run(ctx context.Context) error {
	if err := s.spawn(); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.Endpoint + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !s.running() {
			return fmt.Errorf("minio exited during start-up; its log:\n%s", s.Log())
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("minio not ready after 60s; its log:\n%s", s.Log())
		}
		select {
		case <-ctx.Done():
			s.Stop()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) spawn() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "minio.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "server", "--quiet", "--address", s.addr, "--console-address", s.consoleAddr,
		filepath.Join(s.dir, "data"))
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+s.user, "MINIO_ROOT_PASSWORD="+s.password,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Die with the parent even if it never calls Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start minio (%s): %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	return nil
}

func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Stop kills MinIO, as a crash would, and waits for it to exit.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
	}
	s.cmd = nil
}

// Pause stops the process with SIGSTOP: it holds its connections and
// answers nothing, as a hung store does (a lost write quorum, a frozen VM).
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("minio is not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Pid is the running process's id, or 0.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Dir is the directory holding the server's data and log.
func (s *Server) Dir() string { return s.dir }

// Log returns the end of MinIO's log, for failure messages.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "minio.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Env is the environment a child process needs to reach the server.
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.user, "AWS_SECRET_ACCESS_KEY=" + s.password, "AWS_REGION=" + Region}
}

// URL is an s3:// replica URL for bucket/prefix on this server.
func (s *Server) URL(bucket, prefix string) string {
	q := url.Values{"endpoint": {s.Endpoint}, "region": {Region}, "force-path-style": {"true"}}
	return "s3://" + bucket + "/" + prefix + "?" + q.Encode()
}

// Client is an S3 client for this server.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.user, s.password, ""),
	})
}

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return fmt.Errorf("create bucket %s on MinIO %s: %w", name, s.Endpoint, err)
	}
	return nil
}

// FreePort returns a TCP port free on 127.0.0.1 right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
