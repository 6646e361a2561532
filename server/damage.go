package server

import (
	"net/http"

	"github.com/sluicedb/sluice/replica/watch"
	"github.com/sluicedb/sluice/server/metrics"
)

// newDamage tracks the damaged objects found in the databases' replicas
// (by compaction, or by a restore on open) and exports them: /ready answers
// 503 naming the object while one waits for its heal (the writer's
// snapshot), so an orchestrator knows that the latest state of that
// database cannot be restored from the bucket right now.
func (s *Server) newDamage() *watch.Damage {
	d := watch.NewDamage()
	one := func(f func(watch.DamageStatus) float64) func() []metrics.Sample {
		return func() []metrics.Sample { return []metrics.Sample{{Value: f(d.Status())}} }
	}
	r := s.metrics.reg
	r.GaugeFunc("sluice_replica_damaged_objects_found", "Damaged, truncated or missing replica objects found since the server started.", nil,
		one(func(st watch.DamageStatus) float64 { return float64(st.Found) }))
	r.GaugeFunc("sluice_replica_heals", "Damaged replicas healed with a snapshot of the local database since the server started.", nil,
		one(func(st watch.DamageStatus) float64 { return float64(st.Healed) }))
	r.GaugeFunc("sluice_replica_damaged_databases", "Databases whose replica holds damage not healed yet (/ready is 503 meanwhile).", nil,
		one(func(st watch.DamageStatus) float64 { return float64(st.Unhealed) }))
	return d
}

// damageReadiness makes /ready 503 naming the damaged object while one
// waits for its heal, and adds the last heal to the body.
func (s *Server) damageReadiness(code int, body map[string]any) int {
	if s.damage == nil {
		return code
	}
	st := s.damage.Status()
	if st.LastHeal != nil {
		body["last_heal"] = st.LastHeal
	}
	if st.Reason == "" {
		return code
	}
	body["status"], body["error"] = "not ready", st.Reason
	return http.StatusServiceUnavailable
}
