package sim

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// TruthMix describes the ground truth the freshness comparison measures against: every page's
// hidden change process and its request process. Change: a share of pages never changes, a
// share changes only in a daily burst, and the rest change as Poisson processes whose mean
// interval is log-normal (heavy-tailed: most pages change rarely, a few every hour or so).
// Requests: Zipf popularity over a random ranking of the pages, independent of change.
type TruthMix struct {
	Name string
	Seed uint64 // every draw of the truth derives from it, apart from the corpus's seed
	// Never is the share of pages that never change; Bursty the share that change only during
	// a daily burst of BurstHours at BurstRate changes per hour (at a time of day drawn per page).
	Never, Bursty         float64
	BurstHours, BurstRate float64
	// The other pages change at 1/interval, the interval log-normal with this median and sigma,
	// clamped to [IntervalMin, IntervalMax].
	IntervalMedian           time.Duration
	IntervalSigma            float64
	IntervalMin, IntervalMax time.Duration
	// ZipfS is the popularity exponent: the page of rank r is requested ∝ 1/r^s.
	// RequestsPerPageHour is the mean request rate over all pages.
	ZipfS               float64
	RequestsPerPageHour float64
}

// StandardTruth is the standard mix of the freshness comparison: 40 % of pages never change,
// 10 % change in a daily hour-long burst, the rest at intervals with a median of 4 days spread
// over more than two orders of magnitude (1 h to 180 days); Zipf popularity with exponent 1.
func StandardTruth(seed uint64) TruthMix {
	return TruthMix{Name: "standard", Seed: seed, Never: 0.4, Bursty: 0.1, BurstHours: 1, BurstRate: 4,
		IntervalMedian: 96 * time.Hour, IntervalSigma: 1.8, IntervalMin: time.Hour, IntervalMax: 180 * 24 * time.Hour,
		ZipfS: 1, RequestsPerPageHour: 1}
}

// HeldOutTruth is the held-out mix: another seed and other distributions, chosen before any
// result was seen — fewer pages that never change (25 %), more and longer bursts (15 %, 3 h at
// one an hour), faster and narrower change intervals (median 36 h, 30 m to 60 days), flatter
// popularity (Zipf 0.7) and fewer requests per page.
func HeldOutTruth(seed uint64) TruthMix {
	return TruthMix{Name: "held-out", Seed: seed, Never: 0.25, Bursty: 0.15, BurstHours: 3, BurstRate: 1,
		IntervalMedian: 36 * time.Hour, IntervalSigma: 1.2, IntervalMin: 30 * time.Minute, IntervalMax: 60 * 24 * time.Hour,
		ZipfS: 0.7, RequestsPerPageHour: 0.2}
}

// Validate reports a mix that cannot be drawn from.
func (m TruthMix) Validate() error {
	switch {
	case m.Never < 0 || m.Bursty < 0 || m.Never+m.Bursty > 1:
		return fmt.Errorf("sim: truth %q: never %g and bursty %g must be shares summing to at most 1", m.Name, m.Never, m.Bursty)
	case m.Bursty > 0 && (!(m.BurstHours > 0) || m.BurstHours >= 24 || !(m.BurstRate > 0)):
		return fmt.Errorf("sim: truth %q: a burst needs 0 < hours < 24 and a positive rate", m.Name)
	case m.IntervalMin <= 0 || m.IntervalMax < m.IntervalMin || m.IntervalMedian <= 0 || m.IntervalSigma < 0:
		return fmt.Errorf("sim: truth %q: change intervals need 0 < min ≤ max, a positive median and sigma ≥ 0", m.Name)
	case m.ZipfS < 0 || !(m.RequestsPerPageHour > 0):
		return fmt.Errorf("sim: truth %q: zipf exponent ≥ 0 and a positive request rate", m.Name)
	}
	return nil
}

// Draw streams of the truth, apart from the corpus's (corpus.go).
const (
	streamChangeKind uint64 = 101 + iota
	streamChangeRate
	streamBurstAt
	streamRank
	streamChange
	streamRequests
	streamRequests2
)

const dayMs = 24 * 3_600_000

// Truth is the ground truth of one corpus under a TruthMix: per page, the change process and
// the request rate. Every change time is a pure function of (mix seed, page, change number),
// so every policy meets the same changes.
type Truth struct {
	Mix TruthMix
	// Lambda is each page's long-run change rate per hour (a bursty page's burst rate times its
	// burst's share of the day); Mu its request rate per hour. The oracle knows both.
	Lambda, Mu []float64
	rate       []float64 // the Poisson rate per hour while the page can change (always, or in its burst)
	burstAtMs  []int64   // a bursty page's burst start within the day; -1: not bursty
}

// NewTruth draws the truth of corpus c.
func NewTruth(c *Corpus, m TruthMix) (*Truth, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	n := c.Len()
	t := &Truth{Mix: m, Lambda: make([]float64, n), Mu: make([]float64, n), rate: make([]float64, n), burstAtMs: make([]int64, n)}
	for i := range n {
		id := uint64(i)
		t.burstAtMs[i] = -1
		switch u := draw(m.Seed, streamChangeKind, id, 0); {
		case u < m.Never:
		case u < m.Never+m.Bursty:
			t.rate[i] = m.BurstRate
			t.burstAtMs[i] = int64(draw(m.Seed, streamBurstAt, id, 0) * dayMs)
			t.Lambda[i] = m.BurstRate * m.BurstHours / 24
		default:
			z := normal(draw(m.Seed, streamChangeRate, id, 0), draw(m.Seed, streamChangeRate, id, 1))
			h := m.IntervalMedian.Hours() * math.Exp(m.IntervalSigma*z)
			h = min(max(h, m.IntervalMin.Hours()), m.IntervalMax.Hours())
			t.rate[i], t.Lambda[i] = 1/h, 1/h
		}
	}
	// Popularity: a random ranking (independent of change), Zipf weights, scaled to the mean.
	order := make([]int, n)
	keys := make([]float64, n)
	for i := range n {
		order[i] = i
		keys[i] = draw(m.Seed, streamRank, uint64(i), 0)
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case keys[a] < keys[b]:
			return -1
		case keys[a] > keys[b]:
			return 1
		}
		return a - b
	})
	sum := 0.0
	for r, i := range order {
		t.Mu[i] = math.Pow(float64(r+1), -m.ZipfS)
		sum += t.Mu[i]
	}
	for i := range t.Mu {
		t.Mu[i] *= m.RequestsPerPageHour * float64(n) / sum
	}
	return t, nil
}

// normal is a standard normal from two uniforms (Box–Muller).
func normal(u1, u2 float64) float64 {
	return math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
}

// NeverMs is the change time of a page that will not change again.
const NeverMs = math.MaxInt64

// nextChange returns page i's k-th change, the first after fromMs (its (k−1)-th change, or
// the start of the sequence): a gap drawn from the page's rate, counted in the time the page
// can change (all of it, or its daily bursts).
func (t *Truth) nextChange(i int, fromMs int64, k uint64) int64 {
	if t.rate[i] == 0 {
		return NeverMs
	}
	gap := -math.Log(1-draw(t.Mix.Seed, streamChange, uint64(i), k)) / t.rate[i] * 3_600_000 // ms of changeable time
	if t.burstAtMs[i] < 0 {
		return fromMs + max(1, int64(math.Ceil(gap)))
	}
	off, length := t.burstAtMs[i], int64(t.Mix.BurstHours*3_600_000)
	at := fromMs
	for {
		start := off + floorDiv(at-off, dayMs)*dayMs // the latest burst to start at or before at
		if end := start + length; at < end {
			if rest := float64(end - at); gap <= rest {
				return max(fromMs+1, at+int64(math.Ceil(gap)))
			}
			gap -= float64(end - at)
		}
		at = start + dayMs
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// requests is the number of requests page i receives in the k-th hour: Poisson at its rate,
// by inversion below a mean of 30 and a rounded normal above.
func (t *Truth) requests(i int, k uint64, hours float64) float64 {
	mean := t.Mu[i] * hours
	u := draw(t.Mix.Seed, streamRequests, uint64(i), k)
	if mean > 30 {
		z := normal(u, draw(t.Mix.Seed, streamRequests2, uint64(i), k))
		return max(0, math.Round(mean+math.Sqrt(mean)*z))
	}
	p := math.Exp(-mean)
	cum, n := p, 0.0
	for u > cum && n < 1000 {
		n++
		p *= mean / n
		cum += p
	}
	return n
}
