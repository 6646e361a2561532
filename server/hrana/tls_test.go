package hrana_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/server"
)

// selfSigned writes a fresh self-signed certificate for 127.0.0.1 and its
// key as PEM files and returns their paths.
func selfSigned(t *testing.T) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

// tlsServer runs sluice serve's real listener with -tls-cert/-tls-key on
// 127.0.0.1 and returns host:port.
func tlsServer(t *testing.T, certPath, keyPath string, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	store, err := file.New(filepath.Join(dir, "replica"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.NewWithStore(server.Config{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", Durability: "sync",
		TLSCert: certPath, TLSKey: keyPath}, store, slog.New(slog.DiscardHandler), "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := srv.Host().Create(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// With -tls-cert and -tls-key the stock clients connect with libsql://,
// https:// and wss:// URLs, trusting the certificate as an operator's CA:
// @libsql/client (libsql:// is HTTPS for it, wss:// WebSocket), PyPI
// libsql-client (libsql:// is WSS for it, with its interactive transaction)
// and libsql-client-go (libsql:// over HTTPS, wss:// over WebSocket).
func TestClientsOverTLS(t *testing.T) {
	certPath, keyPath := selfSigned(t)
	addr := tlsServer(t, certPath, keyPath, "node", "nodews", "py", "go", "gows")

	if resp, err := http.Get("http://" + addr + "/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP is served on the TLS listener")
		}
	}

	modules := nodeModules(t)
	env := []string{"NODE_PATH=" + modules, "NODE_EXTRA_CA_CERTS=" + certPath}
	for _, url := range []string{"libsql://" + addr + "/db/node/", "wss://" + addr + "/db/nodews/"} {
		out := runClientScript(t, env, "node", filepath.Join("testdata", "node_client.js"), url)
		expect(t, out, nodeClientExpectations)
	}

	pythonClient(t)
	out := runClientScript(t, []string{"SSL_CERT_FILE=" + certPath}, "python3", filepath.Join("testdata", "python_ws_client.py"), "libsql://"+addr+"/db/py/")
	expect(t, out, pythonWSExpectations)

	// libsql-client-go has no TLS options of its own: it uses Go's default
	// HTTP client, whose trusted roots the test extends for its duration.
	pem, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	saved := defaultTransport.Load()
	transport := saved.Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: roots}
	defaultTransport.Store(transport)
	defer func() { defaultTransport.Store(saved); transport.CloseIdleConnections() }()

	db, err := sql.Open("libsql", "libsql://"+addr+"/db/go")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (x)"); err != nil {
		t.Fatalf("libsql:// over HTTPS: %v", err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES (?)", "over https"); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := db.QueryRow("SELECT x FROM t").Scan(&got); err != nil || got != "over https" {
		t.Fatalf("read back: %q %v", got, err)
	}
	wdb, err := sql.Open("libsql", "wss://"+addr+"/db/gows")
	if err != nil {
		t.Fatal(err)
	}
	defer wdb.Close()
	goClientOverWebSocket(t, wdb)

	// Without the certificate trusted, clients refuse the server.
	defaultTransport.Store(saved)
	transport.CloseIdleConnections()
	untrusted, _ := sql.Open("libsql", "libsql://"+addr+"/db/go")
	defer untrusted.Close()
	if err := untrusted.QueryRow("SELECT 1").Scan(new(int)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted certificate: %v", err)
	}
}

// TLS needs both files, and readable ones.
func TestTLSConfigErrors(t *testing.T) {
	certPath, keyPath := selfSigned(t)
	dir := t.TempDir()
	store, err := file.New(filepath.Join(dir, "replica"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cert, key, want string }{
		{certPath, "", "both a certificate and a key"},
		{"", keyPath, "both a certificate and a key"},
		{certPath, filepath.Join(dir, "missing.pem"), "missing.pem"},
		{keyPath, certPath, "load TLS certificate"},
	} {
		_, err := server.NewWithStore(server.Config{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", TLSCert: c.cert, TLSKey: c.key},
			store, slog.New(slog.DiscardHandler), "test")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cert %q key %q: %v, want an error about %q", c.cert, c.key, err, c.want)
		}
	}
}

// libsql-client-go sends through http.DefaultClient, and its Close sends a
// last request from a goroutine of its own that may outlive the test: the
// default transport is swapped through an atomic, installed once before any
// test runs, never by writing the global while clients use it.
var defaultTransport = func() *atomic.Pointer[http.Transport] {
	p := &atomic.Pointer[http.Transport]{}
	p.Store(http.DefaultTransport.(*http.Transport))
	http.DefaultTransport = swappedTransport{p}
	return p
}()

type swappedTransport struct {
	current *atomic.Pointer[http.Transport]
}

func (s swappedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return s.current.Load().RoundTrip(r)
}
