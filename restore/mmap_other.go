//go:build !unix

package restore

import (
	"errors"
	"os"
)

const mmapSupported = false

func mapFile(*os.File, int64) ([]byte, error) { return nil, errors.New("mmap not supported") }
func unmapFile([]byte) error                  { return nil }
