package file

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/sluicedb/sluice/replica"
)

// classify marks errors no retry can fix (a directory sluice may not write,
// a read-only file system, a path through a regular file) as
// replica.ErrAccessDenied; other errors pass unchanged.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	cause := err.Error()
	if errors.As(err, &pe) {
		cause = pe.Op + " " + pe.Path + ": " + pe.Err.Error()
	}
	switch {
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return &replica.StoreError{Kind: replica.ErrAccessDenied, Cause: cause, Fix: "give this user write access to the directory or choose another replica path"}
	case errors.Is(err, syscall.ENOTDIR):
		return &replica.StoreError{Kind: replica.ErrNoBucket, Cause: cause, Fix: "the replica path runs through a file: choose a directory"}
	}
	return err
}
