package gcs_test

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/gcs"
	"github.com/sluicedb/sluice/replica/replicatest"
)

// startFakeGCS runs fake-gcs-server in-process on 127.0.0.1 over HTTP with
// one bucket.
func startFakeGCS(t *testing.T, bucket string) *fakestorage.Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", Port: 0, Writer: io.Discard,
	})
	if err != nil {
		t.Fatalf("start fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	return srv
}

func TestConformance(t *testing.T) {
	srv := startFakeGCS(t, "sluice")
	n := 0
	replicatest.RunConformance(t, func(t *testing.T) replica.Store {
		n++
		u, _ := url.Parse(fmt.Sprintf("gs://sluice/db%d/x?endpoint=%s", n, url.QueryEscape(srv.URL())))
		s, err := gcs.OpenURL(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestParseURL(t *testing.T) {
	u, _ := url.Parse("gs://bkt/a/b/?endpoint=http://127.0.0.1:4443")
	c, err := gcs.ParseURL(u)
	if err != nil || c != (gcs.Config{Bucket: "bkt", Prefix: "a/b", Endpoint: "http://127.0.0.1:4443"}) {
		t.Errorf("ParseURL = %+v, %v", c, err)
	}
	u, _ = url.Parse("gs:///prefix")
	if _, err := gcs.ParseURL(u); err == nil {
		t.Error("ParseURL without a bucket succeeded")
	}
}

// STORAGE_EMULATOR_HOST alone (no ?endpoint=) points the store at an emulator.
func TestEmulatorHostEnv(t *testing.T) {
	srv := startFakeGCS(t, "envbucket")
	t.Setenv("STORAGE_EMULATOR_HOST", srv.URL())
	u, _ := url.Parse("gs://envbucket/p")
	s, err := gcs.OpenURL(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.PutIfAbsent(ctx, "k", strings.NewReader("v"), 1); err != nil {
		t.Fatalf("PutIfAbsent via STORAGE_EMULATOR_HOST: %v", err)
	}
	obj, err := srv.GetObject("envbucket", "p/k")
	if err != nil || string(obj.Content) != "v" {
		t.Fatalf("emulator holds %q, %v; want \"v\" at p/k", obj.Content, err)
	}
}
