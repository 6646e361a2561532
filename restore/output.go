package restore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// createTemp creates the temp file the database is rebuilt in, beside
// outPath, creating outPath's missing parent folders first (a fresh machine
// restoring into /data/app/db.sqlite has no /data/app yet). The file is
// created with mode 0666 so the umask decides its permissions, as for any
// file an application creates: an application running as another user of the
// same group can open the restored database.
func createTemp(outPath string) (*os.File, error) {
	dir, base := filepath.Split(outPath)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("restore %s: create its folder: %w", outPath, err)
	}
	for range 100 {
		name := filepath.Join(dir, "."+base+".restore-"+strconv.FormatUint(rand.Uint64(), 36)+".tmp")
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("restore %s: create temp file beside it: %w", outPath, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("restore %s: create temp file beside it: 100 names taken", outPath)
}
