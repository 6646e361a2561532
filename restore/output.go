package restore

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The temporary file a restore rebuilds the database in is named
// .<output>.restore-<random>.tmp, beside the output. While the restore runs
// it holds an exclusive flock on the file (through its own descriptor, kept
// until the file is renamed into place or removed), so that a later restore
// can tell a live restore's file from one left by a restore that was killed
// (kill -9, a crash, a lost machine): only the latter can be locked, and
// only those are removed. Without that, a crash-looping `sluice run` would
// leave one file of the database's size per attempt until the disk fills.

const (
	tempPrefix = ".restore-"
	tempSuffix = ".tmp"
)

// tempFile is the file the database is rebuilt in and the lock that marks
// it as a live restore's.
type tempFile struct {
	*os.File
	lock *os.File
}

// unlock releases the lock: call it once the file is renamed or removed.
func (t *tempFile) unlock() {
	if t.lock != nil {
		_ = t.lock.Close()
		t.lock = nil
	}
}

// createTemp creates the temp file the database is rebuilt in, beside
// outPath, creating outPath's missing parent folders first (a fresh machine
// restoring into /data/app/db.sqlite has no /data/app yet). The file is
// created with mode 0666 so the umask decides its permissions, as for any
// file an application creates: an application running as another user of the
// same group can open the restored database.
func createTemp(outPath string) (*tempFile, error) {
	dir, base := filepath.Split(outPath)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("restore %s: create its folder: %w", outPath, err)
	}
	for range 100 {
		name := filepath.Join(dir, "."+base+tempPrefix+strconv.FormatUint(rand.Uint64(), 36)+tempSuffix)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("restore %s: create temp file beside it: %w", outPath, err)
		}
		lock, err := lockTemp(name, f)
		if err != nil {
			// Another restore's clean-up took it between the create and
			// the lock (it looked abandoned): try another name.
			_ = f.Close()
			continue
		}
		return &tempFile{File: f, lock: lock}, nil
	}
	return nil, fmt.Errorf("restore %s: create temp file beside it: 100 names taken", outPath)
}

// lockTemp takes the exclusive lock on the file just created at name through
// a descriptor of its own, and checks that name still is that file.
func lockTemp(name string, f *os.File) (*os.File, error) {
	lock, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		return nil, err
	}
	a, errA := f.Stat()
	b, errB := lock.Stat()
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		_ = lock.Close()
		return nil, errors.New("temp file replaced")
	}
	return lock, nil
}

// isTempName reports whether name (a file name without folder) is the temp
// file of a restore to the output named base: exactly
// "." + base + ".restore-" + a base-36 number + ".tmp", so nothing else in
// the folder — another output's temp files, the output, its -wal — matches.
func isTempName(name, base string) bool {
	mid, ok := strings.CutPrefix(name, "."+base+tempPrefix)
	if !ok {
		return false
	}
	mid, ok = strings.CutSuffix(mid, tempSuffix)
	if !ok || mid == "" || len(mid) > 13 { // 2^64 in base 36 has 13 digits
		return false
	}
	_, err := strconv.ParseUint(mid, 36, 64)
	return err == nil && strings.ToLower(mid) == mid
}

// removeAbandonedTemps removes the temp files that earlier restores to
// outPath left when they were killed, with the -wal/-shm/-journal an
// integrity check may have left beside them, and logs each (a warning:
// something killed a restore). A temp file
// whose lock is held belongs to a restore still running and is kept.
// Failures are logged, never fatal: the restore itself does not need them.
func removeAbandonedTemps(outPath string, log *slog.Logger) {
	dir, base := filepath.Split(outPath)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // a missing folder holds no leftovers; createTemp reports the rest
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTempName(e.Name(), base) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := os.Open(path)
		if err != nil {
			continue // gone meanwhile
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close() // a restore to the same output is running now
			continue
		}
		var size int64
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		removeTemp(path)
		_ = f.Close()
		log.Warn("removed the temporary file of an earlier restore of this output that was interrupted",
			"path", path, "bytes", size, "output", outPath)
	}
}
