package serve

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the crawler listener's series, registered on worker 0's serve registry, which
// the supervisor's /metrics gathers with its own (names are part of the API: README's Metrics).
type Metrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	rushes   *prometheus.CounterVec
}

// Results a request ends with, the result label.
const (
	ResultHit   = "hit"   // a stored page within its cadence
	ResultStale = "stale" // a stored page past its cadence, served marked
	ResultMiss  = "miss"  // no servable page: rendered on miss (or refused while trying)
	ResultError = "error" // refused before any page was looked for (token, URL, host, method)
)

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "freshq_serve_requests_total",
			Help: "Crawler-listener requests by what they got (hit, stale, miss, error), the status answered, the crawler family the User-Agent claims (none: no crawler) and its verification (verified, unverified, unverifiable, unchecked, none): a bounded set whatever the User-Agent."},
			[]string{"result", "code", "family", "verification"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "freshq_serve_seconds",
			Help:    "Crawler-listener answer time, by result.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, 1, 5, 20}}, []string{"result"}),
		rushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "freshq_serve_stale_rushes_total",
			Help: "Rows of expired pages the crawler listener served, moved up (rushed), or not (already urgent or rendering, over the host's rate, queue full)."}, []string{"outcome"}),
	}
	reg.MustRegister(m.requests, m.seconds, m.rushes)
	return m
}

func (m *Metrics) observe(result string, code int, family, verification string, seconds float64) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(result, strconv.Itoa(code), family, verification).Inc()
	m.seconds.WithLabelValues(result).Observe(seconds)
}

func (m *Metrics) rush(outcome string) {
	if m != nil {
		m.rushes.WithLabelValues(outcome).Inc()
	}
}
