package replicaurl_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/replica/azure"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/replica/gcs"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/replica/s3"
)

func TestFileURLs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"/var/lib/x":            "/var/lib/x",
		"./rel/dir":             filepath.Join(wd, "rel/dir"),
		"./rel":                 filepath.Join(wd, "rel"),
		"file:///abs/path":      "/abs/path",
		"file:///abs/path/":     "/abs/path",
		"file://localhost/abs":  "/abs",
		"file://./x":            filepath.Join(wd, "x"),
		"file://./x/y/z":        filepath.Join(wd, "x/y/z"),
		"file://../up":          filepath.Join(wd, "../up"),
		"./odd:name/with:colon": filepath.Join(wd, "odd:name/with:colon"),
	} {
		s, err := replicaurl.Open(context.Background(), in)
		if err != nil {
			t.Errorf("Open(%q): %v", in, err)
			continue
		}
		fs, ok := s.(*file.Store)
		if !ok {
			t.Errorf("Open(%q) = %T, want *file.Store", in, s)
			continue
		}
		if fs.Root() != want {
			t.Errorf("Open(%q) root = %q, want %q", in, fs.Root(), want)
		}
	}
}

func TestCloudURLs(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AZURE_STORAGE_ACCOUNT", "acct")
	t.Setenv("AZURE_STORAGE_KEY", "a2V5") // base64 of "key"
	ctx := context.Background()
	cases := []struct {
		in       string
		wantType any
		wantStr  string
	}{
		{"s3://bkt/db/one?endpoint=http://127.0.0.1:9000&force-path-style=true", &s3.Store{}, "s3://bkt/db/one?endpoint=http://127.0.0.1:9000"},
		{"s3://bkt", &s3.Store{}, "s3://bkt/"},
		{"gs://bkt/p?endpoint=http://127.0.0.1:4443", &gcs.Store{}, "gs://bkt/p?endpoint=http://127.0.0.1:4443"},
		{"abs://cont/p/q?endpoint=http://127.0.0.1:10000/acct", &azure.Store{}, "abs://cont/p/q?endpoint=http://127.0.0.1:10000/acct"},
	}
	for _, c := range cases {
		s, err := replicaurl.Open(ctx, c.in)
		if err != nil {
			t.Errorf("Open(%q): %v", c.in, err)
			continue
		}
		defer s.Close()
		switch c.wantType.(type) {
		case *s3.Store:
			_, ok := s.(*s3.Store)
			if !ok {
				t.Errorf("Open(%q) = %T, want *s3.Store", c.in, s)
			}
		case *gcs.Store:
			if _, ok := s.(*gcs.Store); !ok {
				t.Errorf("Open(%q) = %T, want *gcs.Store", c.in, s)
			}
		case *azure.Store:
			if _, ok := s.(*azure.Store); !ok {
				t.Errorf("Open(%q) = %T, want *azure.Store", c.in, s)
			}
		}
		if s.String() != c.wantStr {
			t.Errorf("Open(%q).String() = %q, want %q", c.in, s.String(), c.wantStr)
		}
	}
}

func TestBadURLs(t *testing.T) {
	for in, wantMsg := range map[string]string{
		"":                             "empty replica URL",
		"ftp://host/x":                 `unknown scheme "ftp"`,
		"s3:///prefix-only":            "no bucket",
		"gs:///prefix-only":            "no bucket",
		"abs:///prefix-only":           "no container",
		"file://":                      "names no directory",
		"s3://b/p?skip-verify=perhaps": "not a boolean",
	} {
		_, err := replicaurl.Open(context.Background(), in)
		if err == nil || !strings.Contains(err.Error(), wantMsg) {
			t.Errorf("Open(%q): err = %v, want one containing %q", in, err, wantMsg)
		}
	}
}

// Typos are refused with what was probably meant, never taken as a local folder.
func TestMalformedURLsAreRefusedWithASuggestion(t *testing.T) {
	for in, want := range map[string]string{
		"s3:/bucket/app":      "did you mean s3://bucket/app?",
		"s3:bucket/app":       "did you mean s3://bucket/app?",
		"file:/tmp/x":         "did you mean file:///tmp/x?",
		"file://tmp/x":        "did you mean file:///tmp/x?",
		"gs:/bkt/db":          "did you mean gs://bkt/db?",
		"sftp://host/backups": `unknown scheme "sftp"`,
		"s4://bucket/app":     "did you mean s3://bucket/app?",
		"s3:///app":           "no bucket (did you mean s3://app?)",
		"gs://":               "no bucket",
		"abs:///":             "no container",
		"  ":                  "empty replica URL",
		"file://":             "names no directory",
		"htps:/bucket":        "malformed",
		"my-bucket/app":       "has no scheme (did you mean s3://my-bucket/app or gs://my-bucket/app?)",
		"s3://b/app?endpont=http://127.0.0.1:9000&region=us-east-1": `unknown parameter "endpont" (did you mean endpoint?)`,
		"s3://b/app?force-path-styl=true":                           `unknown parameter "force-path-styl" (did you mean force-path-style?)`,
		"file:///tmp/x?bogus=1":                                     "a file:// URL takes no parameters",
		"gs://b/app?region=eu":                                      `unknown parameter "region"`,
		"backups":                                                   "has no scheme",
		"backup:2026/x":                                             "has no scheme",
	} {
		err := replicaurl.Check(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v, want an error containing %q", in, err, want)
		}
		if _, err := replicaurl.Open(context.Background(), in); err == nil {
			t.Errorf("Open(%q) accepted a malformed URL", in)
		}
		if _, err := os.Stat(strings.SplitN(strings.TrimSpace(in), "/", 2)[0]); err == nil && strings.Contains(in, ":") {
			t.Errorf("Open(%q) created a local folder", in)
		}
	}
	t.Chdir(t.TempDir())
	if err := os.MkdirAll("existing/dir", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{"existing/dir", "s3://bucket/app?endpoint=http://127.0.0.1:9000&region=us-east-1&force-path-style=true&skip-verify=false", "s3://bucket/app", "file:///tmp/x", "file://./rel", "/var/lib/x", "./rel/dir", "../rel", "./backup:2026/x", ".", "gs://b", "abs://c/p"} {
		if err := replicaurl.Check(ok); err != nil {
			t.Errorf("Check(%q): %v", ok, err)
		}
	}
}
