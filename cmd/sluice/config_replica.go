package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Replica settings of a Litestream-shaped config → one sluice replica URL,
// with credentials exported where the store clients read them.

// pickReplica returns the URL of the first replica sluice can write; sluice
// ships each database to one replica, so the others are reported.
func (c *sidecarConfig) pickReplica(where string, reps []replicaConfig, notice func(string)) (string, int, error) {
	var firstErr error
	for i, r := range reps {
		u, err := c.replicaURL(r)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s.replica: %w", where, err)
			}
			continue
		}
		for j := range reps {
			if j != i {
				notice(fmt.Sprintf("%s: sluice ships each database to one replica; using %s, not replica %d", where, redactURL(u), j+1))
			}
		}
		return u, i, nil
	}
	return "", 0, firstErr
}

// replicaURL builds the replica URL from url:, or from type/bucket/path and
// the S3 settings, global ones filling what the replica leaves unset.
func (c *sidecarConfig) replicaURL(r replicaConfig) (string, error) {
	if len(r.Age.Identities)+len(r.Age.Recipients)+len(c.Age.Identities)+len(c.Age.Recipients) > 0 {
		return "", fmt.Errorf("age encryption is not supported: sluice would write the database unencrypted")
	}
	s := r.replicaSettings
	g := c.replicaSettings
	fill := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	fill(&s.AccessKeyID, g.AccessKeyID)
	fill(&s.SecretAccessKey, g.SecretAccessKey)
	fill(&s.Region, g.Region)
	fill(&s.Bucket, g.Bucket)
	fill(&s.Endpoint, g.Endpoint)
	fill(&s.AccountName, g.AccountName)
	fill(&s.AccountKey, g.AccountKey)
	if s.ForcePathStyle == nil {
		s.ForcePathStyle = g.ForcePathStyle
	}
	s.SkipVerify = s.SkipVerify || g.SkipVerify

	typ := r.Type
	if r.URL != "" {
		if r.Path != "" && r.Bucket == "" && (typ == "" || typ == "file") {
			return "", fmt.Errorf("give url or path, not both")
		}
		u, err := url.Parse(r.URL)
		if err != nil || !strings.Contains(r.URL, "://") {
			return r.URL, nil // a plain path or a malformed URL: replicaurl explains
		}
		typ = u.Scheme
		if err := setCredentials(typ, s); err != nil {
			return "", err
		}
		return addS3Params(u, s), nil
	}
	if typ == "" {
		typ = "file"
	}
	switch typ {
	case "file":
		if r.Path == "" {
			return "", fmt.Errorf("a file replica needs a directory: give path or url in the config")
		}
		p, err := expandHome(r.Path)
		if err != nil {
			return "", err
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
	case "s3", "gs", "gcs", "abs":
		if s.Bucket == "" {
			return "", fmt.Errorf("%s replica needs bucket: (or url: %s://BUCKET/PATH)", typ, typ)
		}
		scheme := map[string]string{"s3": "s3", "gs": "gs", "gcs": "gs", "abs": "abs"}[typ]
		u := &url.URL{Scheme: scheme, Host: s.Bucket, Path: "/" + strings.TrimPrefix(r.Path, "/")}
		if err := setCredentials(scheme, s); err != nil {
			return "", err
		}
		return addS3Params(u, s), nil
	default:
		return "", fmt.Errorf("replica type %q is not supported (sluice writes to s3, gs, abs and file replicas)", typ)
	}
}

// addS3Params carries endpoint, region, force-path-style and skip-verify into an s3:// URL.
func addS3Params(u *url.URL, s replicaSettings) string {
	q := u.Query()
	changed := false
	set := func(k, v string) {
		if v != "" && q.Get(k) == "" {
			q.Set(k, v)
			changed = true
		}
	}
	switch u.Scheme {
	case "s3":
		set("endpoint", s.Endpoint)
		set("region", s.Region)
		if s.ForcePathStyle != nil {
			set("force-path-style", fmt.Sprint(*s.ForcePathStyle))
		}
		if s.SkipVerify {
			set("skip-verify", "true")
		}
	case "gs", "abs":
		set("endpoint", s.Endpoint)
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// setCredentials exports the config's credentials to the environment the
// store clients read; the config takes precedence, as in Litestream. One
// process has one set per kind of store.
func setCredentials(scheme string, s replicaSettings) error {
	pairs := map[string][2]string{}
	switch scheme {
	case "s3":
		pairs["AWS_ACCESS_KEY_ID"] = [2]string{s.AccessKeyID, "access-key-id"}
		pairs["AWS_SECRET_ACCESS_KEY"] = [2]string{s.SecretAccessKey, "secret-access-key"}
	case "abs":
		pairs["AZURE_STORAGE_ACCOUNT"] = [2]string{s.AccountName, "account-name"}
		pairs["AZURE_STORAGE_KEY"] = [2]string{s.AccountKey, "account-key"}
	}
	for env, v := range pairs {
		if v[0] == "" {
			continue
		}
		if prev, ok := configCredentials[env]; ok && prev != v[0] {
			return fmt.Errorf("two different %s values: sluice uses one per process", v[1])
		}
		configCredentials[env] = v[0]
		os.Setenv(env, v[0])
	}
	return nil
}

// configCredentials remembers what setCredentials exported.
var configCredentials = map[string]string{}

// applyLitestreamEnv maps Litestream's credential variables to the ones the
// store clients read, unless those are set (to something not empty).
func applyLitestreamEnv() {
	for from, to := range map[string]string{
		"LITESTREAM_ACCESS_KEY_ID":     "AWS_ACCESS_KEY_ID",
		"LITESTREAM_SECRET_ACCESS_KEY": "AWS_SECRET_ACCESS_KEY",
		"LITESTREAM_AZURE_ACCOUNT_KEY": "AZURE_STORAGE_KEY",
	} {
		if v := os.Getenv(from); v != "" && os.Getenv(to) == "" {
			os.Setenv(to, v)
		}
	}
}

// joinURLPath appends rel to the path of a replica URL or directory.
func joinURLPath(raw, rel string) (string, error) {
	if !strings.Contains(raw, "://") {
		return filepath.Join(raw, filepath.FromSlash(rel)), nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + rel
	return u.String(), nil
}
