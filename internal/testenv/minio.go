package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// MinIO credentials and region, also exported to the process environment.
const (
	MinIOUser     = "sluice-test"
	MinIOPassword = "sluice-test-secret"
	MinIORegion   = "us-east-1"
)

// MinIOServer is the test process's MinIO.
type MinIOServer struct {
	proc    *process
	port    int
	dataDir string
	client  *s3.Client
}

var (
	minioOnce   sync.Once
	minioServer *MinIOServer
	minioErr    error
	bucketSeq   atomic.Int64
)

// MinIO returns the test process's MinIO, starting it on first use. The binary
// is $SLUICE_MINIO, else ~/.cache/sluice-tools/bin/minio, else minio on PATH.
// It also sets AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION in this
// process so in-process S3 stores authenticate.
func MinIO(t testing.TB) *MinIOServer {
	t.Helper()
	minioOnce.Do(func() { minioServer, minioErr = startMinIO() })
	if minioErr != nil {
		fatalf(t, "%v", minioErr)
	}
	return minioServer
}

func startMinIO() (*MinIOServer, error) {
	bin := findTool("SLUICE_MINIO", filepath.Join(toolsDir(), "bin", "minio"), "minio")
	if bin == "" {
		return nil, fmt.Errorf("minio not found: run scripts/install-test-deps.sh (or set SLUICE_MINIO)")
	}
	dir, err := os.MkdirTemp("", "sluice-minio-*")
	if err != nil {
		return nil, err
	}
	port, consolePort := FreePort(), FreePort()
	m := &MinIOServer{port: port, dataDir: dir}
	m.proc = &process{
		name: "minio", path: bin, logPath: filepath.Join(dir, "minio.log"),
		args: []string{"server", "--quiet", "--address", "127.0.0.1:" + strconv.Itoa(port),
			"--console-address", "127.0.0.1:" + strconv.Itoa(consolePort), filepath.Join(dir, "data")},
		env: []string{"MINIO_ROOT_USER=" + MinIOUser, "MINIO_ROOT_PASSWORD=" + MinIOPassword,
			"MINIO_BROWSER=off", "MINIO_UPDATE=off"},
	}
	onCleanup(func() { m.proc.stop(); os.RemoveAll(dir) })
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	m.client = s3.New(s3.Options{
		Region:       MinIORegion,
		BaseEndpoint: aws.String(m.Endpoint()),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(MinIOUser, MinIOPassword, ""),
	})
	if err := m.start(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *MinIOServer) start() error {
	if err := m.proc.start(); err != nil {
		return err
	}
	return m.proc.waitReady(60*time.Second, func() error {
		resp, err := http.Get(m.Endpoint() + "/minio/health/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health check: %s", resp.Status)
		}
		return nil
	})
}

// Endpoint is MinIO's base URL, http://127.0.0.1:PORT.
func (m *MinIOServer) Endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(m.port) }

// Env returns the variables a child process needs to reach MinIO.
func (m *MinIOServer) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + MinIOUser, "AWS_SECRET_ACCESS_KEY=" + MinIOPassword, "AWS_REGION=" + MinIORegion}
}

// URL is an s3:// replica URL for bucket/prefix on this MinIO.
func (m *MinIOServer) URL(bucket, prefix string) string {
	q := url.Values{"endpoint": {m.Endpoint()}, "region": {MinIORegion}, "force-path-style": {"true"}}
	return "s3://" + bucket + "/" + prefix + "?" + q.Encode()
}

// NewBucket creates a bucket with a unique name.
func (m *MinIOServer) NewBucket(t testing.TB) string {
	t.Helper()
	var rnd [4]byte
	rand.Read(rnd[:])
	name := fmt.Sprintf("test-%d-%s", bucketSeq.Add(1), hex.EncodeToString(rnd[:]))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		fatalf(t, "create bucket %s on MinIO %s: %v", name, m.Endpoint(), err)
	}
	return name
}

// Stop kills MinIO (as a crash would). Start brings it back.
func (m *MinIOServer) Stop() { m.proc.stop() }

// Start restarts a stopped MinIO on the same port and data directory and
// waits until it is ready (a no-op if it is running).
func (m *MinIOServer) Start() error {
	if err := m.start(); err != nil {
		return fmt.Errorf("restart minio: %w", err)
	}
	return nil
}
