package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluicedb/sluice/server/httpjson"
)

// serveReady answers 200 while the replica accepted an upload or a probe
// within the error budget and its latest answer was a success (with -follow:
// and every follower is less than the budget behind), else 503: an
// orchestrator then routes writes elsewhere, since this instance could not
// acknowledge them. /health stays 200 while the process runs.
func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	st := s.watch.Status()
	// Without credentials /ready tells only whether: the replica's URL and
	// its errors are configuration, for a caller holding a token.
	detail := s.readyDetail(r)
	body := map[string]any{}
	if detail {
		body["replica"] = s.store.String()
	}
	if !st.LastOK.IsZero() {
		body["last_success_age_seconds"] = time.Since(st.LastOK).Seconds()
	}
	code := http.StatusOK
	body["status"] = "ready"
	if !st.Ready {
		code = http.StatusServiceUnavailable
		body["status"] = "not ready"
		if st.LastErr != nil && !detail {
			body["error"] = "the replica refused the last upload or probe (send a token for the details)"
		} else if st.LastErr != nil {
			body["error"] = st.LastErr.Error()
		} else {
			body["error"] = "no upload or probe accepted within the error budget"
		}
	}
	if st.Ready && s.cfg.Lease.Follow && s.replicas != nil {
		// A read replica is ready while its followers keep up with the bucket.
		budget := time.Duration(s.cfg.ReplicaErrorBudget)
		for _, f := range s.replicas.Stats() {
			if budget > 0 && f.Behind > budget {
				code = http.StatusServiceUnavailable
				body["status"] = "not ready"
				body["error"] = fmt.Sprintf("a follower is %s behind the bucket", f.Behind.Round(time.Second))
				if detail {
					body["error"] = fmt.Sprintf("follower of %s is %s behind the bucket", f.Name, f.Behind.Round(time.Second))
				}
				break
			}
		}
	}
	code = s.damageReadiness(code, body)
	w.Header().Set("Cache-Control", "no-store")
	httpjson.Write(w, code, body)
}

// readyDetail reports whether /ready may show configuration: no
// credentials are configured, or the caller sent a valid one.
func (s *Server) readyDetail(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	if !s.auth.Required() || s.isMetricsToken(h) {
		return true
	}
	_, err := s.auth.Authenticate(h)
	return err == nil
}
