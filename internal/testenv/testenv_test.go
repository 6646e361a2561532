package testenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

func TestFreePort(t *testing.T) {
	p := FreePort()
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("FreePort returned %d, which cannot be bound: %v", p, err)
	}
	l.Close()
}

func TestMinIO(t *testing.T) {
	m := MinIO(t)
	if MinIO(t) != m {
		t.Fatal("MinIO started a second server in one process")
	}
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if os.Getenv(k) != v {
			t.Errorf("in-process env %s = %q, want %q", k, os.Getenv(k), v)
		}
	}
	b1, b2 := m.NewBucket(t), m.NewBucket(t)
	if b1 == b2 {
		t.Fatalf("NewBucket returned %s twice", b1)
	}
	if _, err := m.Client().HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String(b1)}); err != nil {
		t.Fatalf("bucket %s does not exist: %v", b1, err)
	}
	if u := m.URL(b1, "p/q"); !strings.HasPrefix(u, "s3://"+b1+"/p/q?") || !strings.Contains(u, "force-path-style=true") {
		t.Errorf("URL = %q", u)
	}

	// Stop/Start keeps the port and the data.
	if _, err := m.Client().PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(b1), Key: aws.String("k"), Body: strings.NewReader("v"),
	}); err != nil {
		t.Fatal(err)
	}
	m.Stop()
	if resp, err := http.Get(m.Endpoint() + "/minio/health/ready"); err == nil {
		resp.Body.Close()
		t.Fatal("MinIO still answers after Stop")
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Client().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(b1), Key: aws.String("k")}); err != nil {
		t.Fatalf("object written before Stop is gone after Start: %v", err)
	}
}

func TestAzurite(t *testing.T) {
	a := Azurite(t)
	c := a.NewContainer(t)
	if os.Getenv("AZURE_STORAGE_ACCOUNT") != AzuriteAccount {
		t.Errorf("AZURE_STORAGE_ACCOUNT not set in-process")
	}
	if u := a.URL(c, "p"); !strings.HasPrefix(u, "abs://"+c+"/p?endpoint=") {
		t.Errorf("URL = %q", u)
	}
	a.Stop()
	if conn, err := net.DialTimeout("tcp", strings.TrimPrefix(strings.TrimSuffix(a.Endpoint(), "/"+AzuriteAccount), "http://"), time.Second); err == nil {
		conn.Close()
		t.Fatal("Azurite still accepts connections after Stop")
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	a.NewContainer(t) // answers again
}

// A test binary that exits without calling Cleanup must not leave MinIO
// running: the child runs this test in "child" mode, prints MinIO's pid and
// exits; the parent checks the pid disappears.
func TestMinIODiesWithTestBinary(t *testing.T) {
	if os.Getenv("SLUICE_TESTENV_CHILD") == "1" {
		m := MinIO(t)
		fmt.Printf("PID %d %s\n", m.Pid(), m.Dir())
		os.Exit(0) // no Cleanup
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMinIODiesWithTestBinary$")
	cmd.Env = append(os.Environ(), "SLUICE_TESTENV_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child test binary: %v\n%s", err, out)
	}
	var pid int
	var dir string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "PID %d %s", &pid, &dir); err == nil {
			break
		}
	}
	if pid == 0 {
		t.Fatalf("child printed no MinIO pid:\n%s", out)
	}
	defer os.RemoveAll(dir)
	deadline := time.Now().Add(15 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("MinIO (pid %d) outlived its test binary", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
