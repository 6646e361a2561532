package follow

import (
	"errors"
	"fmt"
	"os"
)

// CloseInto closes the follower (as Close) and moves its copy to dst as
// the database its writer left: page 1's header gets back the fields the
// copy changed (apply.go), so the file holds exactly the pages the replica
// holds at Pos, in WAL mode. A new lease holder opens it there instead of
// restoring the same state from the bucket, and checks it first against
// the checksum the previous holder released the lease with. Close every
// other SQLite connection of this process on Path first.
func (f *Follower) CloseInto(dst string) error {
	hdr := f.leaderHeader
	if err := f.Close(); err != nil {
		return err
	}
	if len(hdr) != hdrSize {
		return errors.New("follow: the writer's database header is unknown")
	}
	file, err := os.OpenFile(f.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("follow: open %s: %w", f.path, err)
	}
	_, err = file.WriteAt(hdr, 0)
	if err = errors.Join(err, file.Close()); err != nil {
		return fmt.Errorf("follow: restore the writer's header of %s: %w", f.path, err)
	}
	if err := os.Rename(f.path, dst); err != nil {
		return fmt.Errorf("follow: move %s to %s: %w", f.path, dst, err)
	}
	return nil
}
