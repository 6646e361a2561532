package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// Azurite's well-known development account (public, documented by Microsoft).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// AzuriteServer is the test process's Azurite (blob service only).
type AzuriteServer struct {
	proc *process
	port int
}

var (
	azuriteOnce   sync.Once
	azuriteServer *AzuriteServer
	azuriteErr    error
	containerSeq  atomic.Int64
)

// Azurite returns the test process's Azurite blob service, starting it on
// first use. The binary is $SLUICE_AZURITE, else
// ~/.cache/sluice-tools/node_modules/.bin/azurite-blob, else azurite-blob on
// PATH. It sets AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY in this process.
func Azurite(t testing.TB) *AzuriteServer {
	t.Helper()
	azuriteOnce.Do(func() { azuriteServer, azuriteErr = startAzurite() })
	if azuriteErr != nil {
		fatalf(t, "%v", azuriteErr)
	}
	return azuriteServer
}

func startAzurite() (*AzuriteServer, error) {
	bin := findTool("SLUICE_AZURITE", filepath.Join(toolsDir(), "node_modules", ".bin", "azurite-blob"), "azurite-blob")
	if bin == "" {
		return nil, fmt.Errorf("azurite not found: run scripts/install-test-deps.sh (or set SLUICE_AZURITE)")
	}
	dir, err := os.MkdirTemp("", "sluice-azurite-*")
	if err != nil {
		return nil, err
	}
	a := &AzuriteServer{port: FreePort()}
	a.proc = &process{
		name: "azurite", path: bin, logPath: filepath.Join(dir, "azurite.log"),
		args: []string{"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(a.port),
			"--location", filepath.Join(dir, "data"), "--skipApiVersionCheck", "--loose", "--silent"},
	}
	onCleanup(func() { a.proc.stop(); os.RemoveAll(dir) })
	os.Setenv("AZURE_STORAGE_ACCOUNT", AzuriteAccount)
	os.Setenv("AZURE_STORAGE_KEY", AzuriteKey)
	if err := a.start(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *AzuriteServer) start() error {
	if err := a.proc.start(); err != nil {
		return err
	}
	return a.proc.waitReady(60*time.Second, func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(a.port), time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// Endpoint is the blob service URL, http://127.0.0.1:PORT/devstoreaccount1.
func (a *AzuriteServer) Endpoint() string {
	return "http://127.0.0.1:" + strconv.Itoa(a.port) + "/" + AzuriteAccount
}

// Env returns the variables a child process needs to reach Azurite.
func (a *AzuriteServer) Env() []string {
	return []string{"AZURE_STORAGE_ACCOUNT=" + AzuriteAccount, "AZURE_STORAGE_KEY=" + AzuriteKey}
}

// URL is an abs:// replica URL for container/prefix on this Azurite.
func (a *AzuriteServer) URL(containerName, prefix string) string {
	return "abs://" + containerName + "/" + prefix + "?" + url.Values{"endpoint": {a.Endpoint()}}.Encode()
}

// NewContainer creates a container with a unique name.
func (a *AzuriteServer) NewContainer(t testing.TB) string {
	t.Helper()
	var rnd [4]byte
	rand.Read(rnd[:])
	name := fmt.Sprintf("test-%d-%s", containerSeq.Add(1), hex.EncodeToString(rnd[:]))
	cred, err := container.NewSharedKeyCredential(AzuriteAccount, AzuriteKey)
	if err != nil {
		fatalf(t, "azurite credential: %v", err)
	}
	c, err := container.NewClientWithSharedKeyCredential(a.Endpoint()+"/"+name, cred, nil)
	if err != nil {
		fatalf(t, "azurite container client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Create(ctx, nil); err != nil {
		fatalf(t, "create container %s on Azurite %s: %v", name, a.Endpoint(), err)
	}
	return name
}

// Stop kills Azurite. Start brings it back on the same port and data.
func (a *AzuriteServer) Stop() { a.proc.stop() }

// Start restarts a stopped Azurite and waits until it accepts connections.
func (a *AzuriteServer) Start() error {
	if err := a.start(); err != nil {
		return fmt.Errorf("restart azurite: %w", err)
	}
	return nil
}
