// Package replicaurl opens a replica.Store from a URL, dispatching on the
// scheme: file (or a plain path), s3, gs, abs.
//
// It imports replica and its backend packages; commands and the server use it
// so that only this package knows every backend.
package replicaurl

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/azure"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/replica/gcs"
	"github.com/sluicedb/sluice/replica/s3"
)

// Schemes lists the URL schemes Open understands.
var Schemes = []string{"file", "s3", "gs", "abs"}

// Open opens the store rawURL names:
//
//	/abs/path, rel/path, file:///abs/path, file://./rel/path
//	s3://bucket/prefix?endpoint=…&region=…&force-path-style=true&skip-verify=true
//	gs://bucket/prefix?endpoint=…        (or STORAGE_EMULATOR_HOST)
//	abs://container/prefix?endpoint=…    (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY)
//
// A URL that Check finds malformed is refused rather than taken as a directory.
func Open(ctx context.Context, rawURL string) (replica.Store, error) {
	if err := Check(rawURL); err != nil {
		return nil, err
	}
	if !strings.Contains(rawURL, "://") {
		return file.New(rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("replica URL %q: %w", rawURL, err)
	}
	switch u.Scheme {
	case "file":
		p, err := FilePath(u)
		if err != nil {
			return nil, err
		}
		return file.New(p)
	case "s3":
		return s3.OpenURL(ctx, u)
	case "gs", "gcs":
		return gcs.OpenURL(ctx, u)
	case "abs", "az":
		return azure.OpenURL(ctx, u)
	default:
		return nil, fmt.Errorf("replica URL %q: unknown scheme %q (supported: %s, or a plain directory path)",
			u.Redacted(), u.Scheme, strings.Join(Schemes, ", "))
	}
}

// FilePath returns the directory a file:// URL names. file:///abs is absolute
// (so is file://localhost/abs); file://./x and file://../x are relative to
// the working directory.
func FilePath(u *url.URL) (string, error) {
	var p string
	switch u.Host {
	case "", "localhost":
		p = u.Path
	default:
		p = u.Host + u.Path
	}
	if p == "" {
		return "", fmt.Errorf("replica URL %q names no directory: use file:///abs/path or file://rel/path", u.String())
	}
	return filepath.Clean(filepath.FromSlash(p)), nil
}
