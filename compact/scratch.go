package compact

import (
	"fmt"
	"os"
)

// tempFile creates a scratch file for merge output in dir ("" = the system
// temp directory).
func tempFile(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "sluice-compact-*.ltx")
	if err != nil {
		return nil, fmt.Errorf("compact: create a scratch file for merge output: %w", err)
	}
	return f, nil
}

func removeTemp(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}
