package replicaurl

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sluicedb/sluice/internal/suggest"
)

// knownSchemes are the schemes Open accepts, aliases included.
var knownSchemes = []string{"file", "s3", "gs", "gcs", "abs", "az"}

// schemePrefix matches "scheme:" at the start of a string.
var schemePrefix = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*):`)

// Check refuses a replica URL that is almost certainly a typo rather than
// the local directory it would otherwise name ("s3:/bucket/app" would
// replicate into ./s3:/bucket/app), and says what was probably meant.
func Check(rawURL string) error {
	raw := strings.TrimSpace(rawURL)
	if raw == "" {
		return fmt.Errorf("empty replica URL: give s3://BUCKET/PATH, gs://BUCKET/PATH, abs://CONTAINER/PATH or file:///DIR")
	}
	m := schemePrefix.FindStringSubmatch(raw)
	if !strings.Contains(raw, "://") {
		if m == nil || len(m[1]) == 1 { // a plain path (or a drive letter)
			return checkPlainPath(rawURL, raw)
		}
		scheme, rest := strings.ToLower(m[1]), raw[len(m[0]):]
		known := contains(knownSchemes, scheme)
		if !known && !strings.HasPrefix(rest, "/") {
			return checkPlainPath(rawURL, raw) // a directory whose name has a colon, e.g. ./backup:2026
		}
		if !known {
			if s := suggest.Closest(scheme, knownSchemes); s != "" {
				scheme = s
			}
		}
		return fmt.Errorf("replica URL %q is malformed (did you mean %s?); to name a local directory, write file:///%s",
			rawURL, didYouMean(scheme, rest), strings.TrimLeft(raw, "/"))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("replica URL %q: %w", redact(raw), err)
	}
	scheme := strings.ToLower(u.Scheme)
	if !contains(knownSchemes, scheme) {
		msg := fmt.Sprintf("replica URL %q: unknown scheme %q", u.Redacted(), u.Scheme)
		if s := suggest.Closest(scheme, knownSchemes); s != "" {
			msg += fmt.Sprintf(" (did you mean %s://%s%s?)", s, u.Host, u.EscapedPath())
		}
		return fmt.Errorf("%s; supported: s3://, gs://, abs://, file:///DIR", msg)
	}
	if err := checkParams(u, scheme); err != nil {
		return err
	}
	if scheme == "file" {
		switch u.Host {
		case "", "localhost", ".", "..":
		default:
			return fmt.Errorf("replica URL %q names host %q (did you mean file:///%s%s?); a relative directory is file://./%s%s",
				u.Redacted(), u.Host, u.Host, u.Path, u.Host, u.Path)
		}
		if u.Host == "" && u.Path == "" {
			return fmt.Errorf("replica URL %q names no directory: use file:///abs/path or file://./rel/path", u.Redacted())
		}
		return nil
	}
	if u.Host == "" {
		p := strings.TrimLeft(u.Path, "/")
		what := "bucket"
		if scheme == "abs" || scheme == "az" {
			what = "container"
		}
		hint := scheme + "://" + strings.ToUpper(what) + "/PATH"
		if p != "" {
			hint = scheme + "://" + p
		}
		return fmt.Errorf("replica URL %q has no %s (did you mean %s?)", u.Redacted(), what, hint)
	}
	return nil
}

// knownParams are the query parameters each scheme reads; anything else is
// a typo that would otherwise be ignored (a misspelled endpoint= sends the
// replica to AWS itself).
var knownParams = map[string][]string{
	"s3":  {"endpoint", "region", "force-path-style", "forcePathStyle", "skip-verify", "skipVerify"},
	"gs":  {"endpoint"},
	"gcs": {"endpoint"},
	"abs": {"endpoint"},
	"az":  {"endpoint"},
}

func checkParams(u *url.URL, scheme string) error {
	known := knownParams[scheme]
	for name := range u.Query() {
		if contains(known, name) {
			continue
		}
		msg := fmt.Sprintf("replica URL %q: unknown parameter %q", u.Redacted(), name)
		if s := suggest.Closest(name, known); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		if len(known) == 0 {
			return fmt.Errorf("%s: a %s:// URL takes no parameters", msg, scheme)
		}
		return fmt.Errorf("%s; %s:// reads %s", msg, scheme, strings.Join(known, ", "))
	}
	return nil
}

// checkPlainPath accepts a local directory written as a path only when it is
// plainly one: absolute, or relative from "./" or "../". A bare "bucket/app"
// is far more often a forgotten s3:// than a folder next to the working
// directory, and taking it as a folder would replicate to the local disk
// while the user believes the data is in the bucket. A bare path naming a
// directory that exists is taken as that directory.
func checkPlainPath(rawURL, raw string) error {
	if filepath.IsAbs(raw) || raw == "." || raw == ".." || strings.HasPrefix(raw, "./") || strings.HasPrefix(raw, "../") ||
		(len(raw) > 1 && raw[1] == ':') { // a Windows drive letter
		return nil
	}
	if st, err := os.Stat(raw); err == nil && st.IsDir() {
		return nil // a directory that is already there is what was meant
	}
	rest := strings.TrimLeft(raw, "/")
	return fmt.Errorf("replica URL %q has no scheme (did you mean s3://%s or gs://%s?); a local directory is written /abs/path, ./rel/path or file:///abs/path",
		rawURL, rest, rest)
}

// didYouMean rebuilds "scheme:rest" as scheme://rest, keeping file paths absolute.
func didYouMean(scheme, rest string) string {
	if scheme == "file" {
		return "file:///" + strings.TrimLeft(rest, "/")
	}
	return scheme + "://" + strings.TrimLeft(rest, "/")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// redact hides a password in a URL that did not parse.
func redact(raw string) string {
	if i := strings.Index(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			return raw[:j+3] + "…" + raw[i:]
		}
	}
	return raw
}
