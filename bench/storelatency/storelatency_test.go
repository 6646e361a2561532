package storelatency_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/sluicedb/sluice/bench/storelatency"
	"github.com/sluicedb/sluice/internal/minioproc"
)

func TestParse(t *testing.T) {
	sp, err := storelatency.Parse("put=25ms,get=15ms,bandwidth=100MiB/s")
	if err != nil {
		t.Fatal(err)
	}
	if sp.Median[storelatency.Put] != 25*time.Millisecond || sp.Median[storelatency.Head] != 15*time.Millisecond ||
		sp.Median[storelatency.List] != 15*time.Millisecond || sp.Median[storelatency.Delete] != 25*time.Millisecond ||
		sp.Bandwidth != 100<<20 || sp.Sigma != storelatency.DefaultSigma {
		t.Fatalf("parsed %+v", sp)
	}
	for _, bad := range []string{"put", "put=fast", "post=1ms", "sigma=9", "bandwidth=-1MB", "get=-5ms"} {
		if _, err := storelatency.Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if sp, err := storelatency.Parse(""); err != nil || !sp.Zero() {
		t.Fatalf("empty spec: %+v %v", sp, err)
	}
}

// proxiedMinIO starts a MinIO with the bucket "bench" behind a proxy with
// spec (storelatency.Front): every client of m goes through the proxy.
func proxiedMinIO(t *testing.T, spec string) (*minioproc.Server, *storelatency.Proxy) {
	t.Helper()
	ctx := context.Background()
	m, err := minioproc.Start(ctx, filepath.Join(t.TempDir(), "minio"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	if err := m.CreateBucket(ctx, "bench"); err != nil {
		t.Fatal(err)
	}
	sp, err := storelatency.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	p, unproxy, err := storelatency.Front(m, sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unproxy() })
	return m, p
}

// Through the proxy, a real MinIO answers as before (signatures, conditional
// creates, listings) but each request takes at least its kind's latency.
func TestProxyDelaysEachKindAndKeepsS3Semantics(t *testing.T) {
	ctx := context.Background()
	m, p := proxiedMinIO(t, "put=40ms,get=20ms,list=30ms,sigma=0")
	c := m.Client()

	timed := func(what string, want time.Duration, fn func() error) error {
		t.Helper()
		start := time.Now()
		err := fn()
		if took := time.Since(start); took < want {
			t.Errorf("%s took %s through the proxy, less than the %s it adds", what, took, want)
		}
		return err
	}
	put := func() error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String("ltx/0/1.ltx"),
			Body: bytes.NewReader([]byte("hello")), IfNoneMatch: aws.String("*")})
		return err
	}
	if err := timed("a conditional PUT", 40*time.Millisecond, put); err != nil {
		t.Fatalf("conditional PUT through the proxy: %v", err)
	}
	err := timed("a second conditional PUT", 40*time.Millisecond, put)
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "PreconditionFailed" {
		t.Fatalf("a second create of the same key through the proxy: %v, want PreconditionFailed", err)
	}
	if err := timed("a GET", 20*time.Millisecond, func() error {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bench"), Key: aws.String("ltx/0/1.ltx")})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		b, _ := io.ReadAll(out.Body)
		if string(b) != "hello" {
			t.Errorf("GET through the proxy read %q", b)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := timed("a LIST", 30*time.Millisecond, func() error {
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bench"), Prefix: aws.String("ltx/")})
		if err == nil && len(out.Contents) != 1 {
			t.Errorf("LIST through the proxy found %d objects", len(out.Contents))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, n := p.Added(storelatency.Put); n != 2 {
		t.Errorf("the proxy counted %d PUTs, want 2", n)
	}
	if _, _, n := p.Added(storelatency.List); n != 1 {
		t.Errorf("the proxy counted %d LISTs, want 1", n)
	}
	if s := p.Summary(); !strings.Contains(s, "put 2") {
		t.Errorf("summary %q", s)
	}
}

// A bandwidth cap makes a large GET take at least size/bandwidth.
func TestProxyCapsBandwidth(t *testing.T) {
	ctx := context.Background()
	m, _ := proxiedMinIO(t, "bandwidth=8MiB")
	c := m.Client()
	body := bytes.Repeat([]byte("x"), 4<<20)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String("big"), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bench"), Key: aws.String("big")})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, out.Body)
	out.Body.Close()
	if took := time.Since(start); n != int64(len(body)) || took < 450*time.Millisecond {
		t.Fatalf("read %d bytes in %s: want all 4 MiB, in at least 0.5 s at 8 MiB/s", n, took)
	}
}
