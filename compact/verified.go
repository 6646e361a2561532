package compact

import "github.com/sluicedb/sluice/replica"

// Verified tells the compactor which files a restore of this replica has
// just read whole and verified (restore.Result.Files: each file's checksum,
// its TXID range and the chain between them), so that CheckTail does not
// read the level-0 ones among them a second time. A new lease holder
// restores the newest state before it opens: checking those files again
// before its first acknowledgement would cost one GET per unmerged file on
// the hand-over's path and prove nothing new, since keys are never
// overwritten. A file the restore left out as damaged is not among them, so
// CheckTail still reads and reports it; one listed later with another size
// is not taken for the verified one. Call it before the first CheckTail.
func (c *Compactor) Verified(files []replica.LTXFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range files {
		if f.Level != 0 {
			continue // CheckTail reads only level 0
		}
		if c.verified == nil {
			c.verified = map[string]int64{}
		}
		c.verified[f.Key] = f.Size
	}
}

// wasVerified reports whether f is a file Verified named, with its size.
func (c *Compactor) wasVerified(f replica.LTXFile) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	size, ok := c.verified[f.Key]
	return ok && size == f.Size
}
