package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/minioproc"
)

// MinIO credentials and region, also exported to the process environment.
const (
	MinIOUser     = "sluice-test"
	MinIOPassword = "sluice-test-secret"
	MinIORegion   = minioproc.Region
)

// MinIOServer is the test process's MinIO (see internal/minioproc).
type MinIOServer struct {
	*minioproc.Server
}

var (
	minioOnce   sync.Once
	minioServer *MinIOServer
	minioErr    error
	bucketSeq   atomic.Int64
)

// MinIO returns the test process's MinIO, starting it on first use (binary:
// minioproc.Binary). It also sets AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_REGION in this process so in-process S3 stores authenticate.
func MinIO(t testing.TB) *MinIOServer {
	t.Helper()
	minioOnce.Do(func() { minioServer, minioErr = startMinIO() })
	if minioErr != nil {
		fatalf(t, "%v", minioErr)
	}
	return minioServer
}

// PrivateMinIO starts a MinIO of the test's own, stopped at its end: for
// tests that pause or kill it, which would break every other test sharing
// MinIO(t).
func PrivateMinIO(t testing.TB) *MinIOServer {
	t.Helper()
	srv, err := minioproc.New(t.TempDir(), MinIOUser, MinIOPassword)
	if err != nil {
		fatalf(t, "%v", err)
	}
	t.Cleanup(srv.Stop) // SIGKILL ends a paused process too
	if err := srv.Run(context.Background()); err != nil {
		fatalf(t, "%v", err)
	}
	return &MinIOServer{Server: srv}
}

func startMinIO() (*MinIOServer, error) {
	dir, err := os.MkdirTemp("", "sluice-minio-*")
	if err != nil {
		return nil, err
	}
	srv, err := minioproc.New(dir, MinIOUser, MinIOPassword)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	onCleanup(func() { srv.Stop(); os.RemoveAll(dir) })
	m := &MinIOServer{Server: srv}
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	if err := srv.Run(context.Background()); err != nil {
		return nil, err
	}
	return m, nil
}

// Endpoint is MinIO's base URL, http://127.0.0.1:PORT.
func (m *MinIOServer) Endpoint() string { return m.Server.Endpoint }

// NewBucket creates a bucket with a unique name.
func (m *MinIOServer) NewBucket(t testing.TB) string {
	t.Helper()
	var rnd [4]byte
	rand.Read(rnd[:])
	name := fmt.Sprintf("test-%d-%s", bucketSeq.Add(1), hex.EncodeToString(rnd[:]))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.CreateBucket(ctx, name); err != nil {
		fatalf(t, "%v", err)
	}
	return name
}

// Start restarts a stopped MinIO on the same port and data directory and
// waits until it is ready (a no-op if it is running). Stop kills it, as a
// crash would.
func (m *MinIOServer) Start() error {
	if err := m.Run(context.Background()); err != nil {
		return fmt.Errorf("restart minio: %w", err)
	}
	return nil
}
