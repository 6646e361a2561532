package dbhost

import (
	"sync"

	"github.com/sluicedb/sluice/replica"
)

// verifiedFiles hands what a restore read whole and verified (its plan,
// restore.Result.Files) to the replication opened on the restored file
// next (replicated.Options.Verified), so the check of the replica's
// unmerged files before the first acknowledgement does not GET them again:
// on a new lease holder's path that is one request per level-0 file the
// previous holder left unmerged (all of them after a crash).
type verifiedFiles struct {
	mu     sync.Mutex
	byPath map[string][]replica.LTXFile
}

// put records files for the database restored at path.
func (v *verifiedFiles) put(path string, files []replica.LTXFile) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byPath == nil {
		v.byPath = map[string][]replica.LTXFile{}
	}
	v.byPath[path] = files
}

// take returns and forgets what was recorded for path.
func (v *verifiedFiles) take(path string) []replica.LTXFile {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	files := v.byPath[path]
	delete(v.byPath, path)
	return files
}
