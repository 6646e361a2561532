package server

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certFiles serves a certificate and key from PEM files, reloading them when
// either file changes so that a renewed certificate takes effect without a
// restart (a failed reload keeps the last good pair).
type certFiles struct {
	certPath, keyPath string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time // the later of the two files' modification times
	checked time.Time
}

func loadCertFiles(certPath, keyPath string) (*certFiles, error) {
	if (certPath == "") != (keyPath == "") {
		return nil, fmt.Errorf("TLS needs both a certificate and a key (-tls-cert and -tls-key, or tls-cert and tls-key in the config): got only one")
	}
	if certPath == "" {
		return nil, nil
	}
	c := &certFiles{certPath: certPath, keyPath: keyPath}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certFiles) reload() error {
	mod, err := c.latestModTime()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(c.certPath, c.keyPath)
	if err != nil {
		return fmt.Errorf("load TLS certificate %s and key %s: %w", c.certPath, c.keyPath, err)
	}
	c.cert, c.modTime = &cert, mod
	return nil
}

func (c *certFiles) latestModTime() (time.Time, error) {
	var latest time.Time
	for _, p := range []string{c.certPath, c.keyPath} {
		fi, err := os.Stat(p)
		if err != nil {
			return time.Time{}, fmt.Errorf("TLS: %w", err)
		}
		if fi.ModTime().After(latest) {
			latest = fi.ModTime()
		}
	}
	return latest, nil
}

// getCertificate is tls.Config.GetCertificate: the current pair, looking
// for new files at most once a second.
func (c *certFiles) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) > time.Second {
		c.checked = time.Now()
		if mod, err := c.latestModTime(); err == nil && !mod.Equal(c.modTime) {
			_ = c.reload() // a half-written renewal fails here; the old pair serves until it is complete
		}
	}
	return c.cert, nil
}

// tlsConfig is the server side of TLS: TLS 1.2 or later, HTTP/2 and
// HTTP/1.1 (WebSocket upgrades negotiate HTTP/1.1).
func (c *certFiles) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.getCertificate}
}
