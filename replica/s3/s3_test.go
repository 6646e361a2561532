package s3_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicatest"
	"github.com/sluicedb/sluice/replica/s3"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

func open(t *testing.T, rawURL string) *s3.Store {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	s, err := s3.OpenURL(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The suite runs with AWS_CA_BUNDLE set, as in production environments that
// pin a CA bundle: the SDK must still build its HTTP client.
func TestConformance(t *testing.T) {
	if os.Getenv("AWS_CA_BUNDLE") == "" {
		t.Setenv("AWS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
	}
	mn := testenv.MinIO(t)
	bucket := mn.NewBucket(t)
	n := 0
	replicatest.RunConformance(t, func(t *testing.T) replica.Store {
		n++
		return open(t, mn.URL(bucket, "db"+strings.Repeat("x", n)+"/nested"))
	})
}

// A store at the bucket root (no prefix) works too.
func TestNoPrefix(t *testing.T) {
	mn := testenv.MinIO(t)
	bucket := mn.NewBucket(t)
	s := open(t, mn.URL(bucket, ""))
	ctx := context.Background()
	if _, err := s.PutIfAbsent(ctx, "ltx/0/a", strings.NewReader("a"), 1); err != nil {
		t.Fatal(err)
	}
	objs, err := s.List(ctx, "")
	if err != nil || len(objs) != 1 || objs[0].Key != "ltx/0/a" {
		t.Fatalf("List = %+v, %v", objs, err)
	}
	level1 := replica.LTXKey(1, 1, 2)
	if _, err := s.PutIfAbsent(ctx, level1, strings.NewReader("b"), 1); err != nil {
		t.Fatal(err)
	}
	if objs, err := s.ListAfter(ctx, "ltx/", "ltx/0/~"); err != nil || len(objs) != 1 || objs[0].Key != level1 {
		t.Fatalf("ListAfter the level-0 files = %+v, %v; want only %s", objs, err, level1)
	}
}

// A missing bucket is an error naming the bucket, not ErrNotFound.
func TestMissingBucket(t *testing.T) {
	mn := testenv.MinIO(t)
	s := open(t, mn.URL("no-such-bucket-here", "p"))
	_, err := s.PutIfAbsent(context.Background(), "k", strings.NewReader("x"), 1)
	if err == nil || errors.Is(err, replica.ErrExists) || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Fatalf("PutIfAbsent into a missing bucket: err = %v, want a NoSuchBucket error", err)
	}
}

// While MinIO is down calls fail (they do not hang), and the same store works
// again once it is back.
func TestServerRestart(t *testing.T) {
	mn := testenv.MinIO(t)
	bucket := mn.NewBucket(t)
	s := open(t, mn.URL(bucket, "restart"))
	if _, err := s.PutIfAbsent(context.Background(), "before", strings.NewReader("1"), 1); err != nil {
		t.Fatal(err)
	}
	mn.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	_, err := s.PutIfAbsent(ctx, "during", strings.NewReader("2"), 1)
	cancel()
	if err == nil {
		t.Fatal("PutIfAbsent succeeded while MinIO was stopped")
	}
	if err := mn.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfAbsent(context.Background(), "after", bytes.NewReader([]byte("3")), 1); err != nil {
		t.Fatalf("PutIfAbsent after restart: %v", err)
	}
	rc, err := s.Get(context.Background(), "before")
	if err != nil {
		t.Fatalf("data written before the restart is gone: %v", err)
	}
	rc.Close()
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want s3.Config
	}{
		{"s3://b/p/q", s3.Config{Bucket: "b", Prefix: "p/q"}},
		{"s3://b", s3.Config{Bucket: "b"}},
		{"s3://b/p/?endpoint=http://127.0.0.1:9000&region=eu-west-1&force-path-style=true",
			s3.Config{Bucket: "b", Prefix: "p", Endpoint: "http://127.0.0.1:9000", Region: "eu-west-1", ForcePathStyle: true}},
		{"s3://b/p?endpoint=minio.local:9000&forcePathStyle=1&skip-verify=true",
			s3.Config{Bucket: "b", Prefix: "p", Endpoint: "https://minio.local:9000", ForcePathStyle: true, SkipVerify: true}},
	} {
		u, _ := url.Parse(tc.in)
		got, err := s3.ParseURL(u)
		if err != nil || got != tc.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"s3:///prefix", "s3://b/p?force-path-style=maybe", "gs://b/p"} {
		u, _ := url.Parse(bad)
		if _, err := s3.ParseURL(u); err == nil {
			t.Errorf("ParseURL(%q) succeeded, want an error", bad)
		}
	}
}
