package azure_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/azure"
	"github.com/sluicedb/sluice/replica/replicatest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	az := testenv.Azurite(t)
	cont := az.NewContainer(t)
	n := 0
	replicatest.RunConformance(t, func(t *testing.T) replica.Store {
		n++
		u, _ := url.Parse(az.URL(cont, fmt.Sprintf("db%d/x", n)))
		s, err := azure.OpenURL(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestParseURL(t *testing.T) {
	u, _ := url.Parse("abs://cont/a/b/?endpoint=http://127.0.0.1:10000/devstoreaccount1")
	c, err := azure.ParseURL(u)
	if err != nil || c != (azure.Config{Container: "cont", Prefix: "a/b", Endpoint: "http://127.0.0.1:10000/devstoreaccount1"}) {
		t.Errorf("ParseURL = %+v, %v", c, err)
	}
	u, _ = url.Parse("abs://myaccount@cont/db")
	if c, err := azure.ParseURL(u); err != nil || c != (azure.Config{Container: "cont", Prefix: "db", Account: "myaccount"}) {
		t.Errorf("ParseURL with an account = %+v, %v", c, err)
	}
	u, _ = url.Parse("abs:///prefix")
	if _, err := azure.ParseURL(u); err == nil {
		t.Error("ParseURL without a container succeeded")
	}
}

func TestMissingCredentials(t *testing.T) {
	t.Setenv("AZURE_STORAGE_ACCOUNT", "")
	t.Setenv("AZURE_STORAGE_KEY", "")
	if _, err := azure.New(context.Background(), azure.Config{Container: "c"}); err == nil {
		t.Fatal("New without account/key succeeded")
	}
}
