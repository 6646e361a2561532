package sqlconn

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// Setting a connection pragma to the value the shared connections already
// have runs anywhere (sharedDefaults); that list must be what they have.
func TestSharedDefaultsAreTheSharedConnectionsValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	for _, role := range []Role{SharedWriter, SharedReader} {
		c, err := Open(path, role, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range sharedDefaults {
			sql := "PRAGMA " + name
			if name == "case_sensitive_like" {
				sql = "SELECT 'a' NOT LIKE 'A'" // cannot be read, only observed
			}
			res, err := c.Exec(context.Background(), Stmt{SQL: sql, WantRows: true})
			if err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			if got := res.Rows[0][0].Int; got != want {
				t.Errorf("%s = %d on a shared connection (role %d), sharedDefaults says %d", name, got, role, want)
			}
		}
		c.Close()
	}
}
