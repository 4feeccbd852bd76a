package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/verdict"
)

// verdictMetrics counts the render verdicts' effects with worker 0's own series, which the
// supervisor's /metrics merges (wire.PathServeMetrics), as it does the applier's conditional
// checks: freshq_render_suspect_total{reason}, one series per reason name (verdict.AllNames,
// each created at 0), and freshq_render_suspect_accepted_total. They are counted where the
// applier commits, in worker 0, and start again from 0 when worker 0 restarts (a counter
// reset, which rate() handles); the shared segment's counter slots are a fixed layout with
// too few free for one series per reason.
type verdictMetrics struct {
	suspect  map[string]prometheus.Counter
	accepted prometheus.Counter
}

var _ apply.VerdictCounter = (*verdictMetrics)(nil)

func newVerdictMetrics(reg prometheus.Registerer) *verdictMetrics {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "freshq_render_suspect_total",
		Help: "Renders judged suspect (a completed render that may have lost the page), once per reason of each."},
		[]string{"reason"})
	m := &verdictMetrics{suspect: map[string]prometheus.Counter{},
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "freshq_render_suspect_accepted_total",
			Help: "Suspect renders applied as the page over a good one: by the agreement of renders, or by an operator's accept."})}
	for _, name := range verdict.AllNames() {
		m.suspect[name] = vec.WithLabelValues(name)
	}
	reg.MustRegister(vec, m.accepted)
	return m
}

func (m *verdictMetrics) Suspect(r verdict.Reasons) {
	for _, name := range r.Names() {
		if c, ok := m.suspect[name]; ok {
			c.Inc()
		}
	}
}

func (m *verdictMetrics) Accepted() { m.accepted.Inc() }
