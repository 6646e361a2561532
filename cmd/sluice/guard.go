package main

import (
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/sluicedb/sluice/replica/replicaurl"
)

// checkReplicaURL refuses a malformed replica URL and warns, in one line,
// when a file replica lies inside localDir (serve's data directory, or the
// database's folder): a copy on the same disk does not survive losing it.
func checkReplicaURL(rawURL, localDir string, log *slog.Logger) error {
	if err := replicaurl.Check(rawURL); err != nil {
		return err
	}
	dir := localReplicaDir(rawURL)
	if dir == "" || localDir == "" {
		return nil
	}
	local, err1 := filepath.Abs(localDir)
	rep, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return nil
	}
	if rel, err := filepath.Rel(local, rep); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		log.Warn("the replica " + rawURL + " is inside " + localDir + ": it is NOT durable against losing this disk; use s3://, gs:// or abs:// in production")
	}
	return nil
}

// localReplicaDir is the directory of a file replica, "" for object storage.
func localReplicaDir(rawURL string) string {
	if !strings.Contains(rawURL, "://") {
		return rawURL
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "file" {
		return ""
	}
	p, err := replicaurl.FilePath(u)
	if err != nil {
		return ""
	}
	return p
}
