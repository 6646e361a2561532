package engine

import "time"

// largeFile is the size from which an LTX file's upload is reported while it
// runs and once done: a first snapshot or a resync of a large database can
// take minutes on a slow link, and a log that says nothing meanwhile looks
// like a hang.
var largeFile int64 = 64 << 20

// progressEvery is how often a large upload says it is still running.
var progressEvery = 10 * time.Second

// reportUpload logs, every progressEvery until stop is called, that p is
// still uploading. It reports time, not bytes: a store client may read the
// body twice (to sign it, then to send it), so bytes read are not bytes sent.
func (db *DB) reportUpload(p *pendingFile) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				db.log.Info("still uploading", "txid", p.txid.String(), "mib", mib(p.data.size),
					"since_capture", time.Since(p.captured).Round(time.Second).String())
			}
		}
	}()
	return func() { close(done); <-finished }
}

// mib is n bytes in MiB, to one decimal.
func mib(n int64) float64 { return float64(n*10/(1<<20)) / 10 }
