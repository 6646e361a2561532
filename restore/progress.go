package restore

import "sync"

// progress serialises the caller's callback: downloads run in parallel but
// the callback is never called concurrently.
type progress struct {
	mu    sync.Mutex
	done  int64
	total int64
	fn    func(doneBytes, totalBytes int64)
}

func (p *progress) add(n int64) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if p.fn != nil {
		p.fn(p.done, p.total)
	}
}

// finish reports completion: done equals total even if a store returned
// fewer bytes than listed (a size mismatch is caught by the decoder anyway).
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fn != nil {
		p.fn(p.total, p.total)
	}
}
