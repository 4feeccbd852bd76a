package render

import (
	"context"
	"errors"
	"fmt"
	"html"
	"math"
	"sync/atomic"
	"time"

	"github.com/freshq/freshq/outcome"
)

// Sim is the simulated renderer, for benchmarks and the demo. It does no I/O.
//
// Each render draws, from render.sim:
//   - a latency, log-normal around latency_median (σ = 0.5: the p99 is about 3.2× the median).
//     A zero median returns at once: no timer, no sleep, no allocation beyond the result. A
//     positive one waits on a timer that ctx cuts short (outcome.Timeout). A draw at or beyond
//     render.timeout waits render.timeout and is outcome.Timeout, as a real renderer would be.
//   - an outcome. transient_rate of renders fail with a 503 (outcome.ServerError), at random. A
//     URL is gone (410, outcome.Gone) or noindex (outcome.Noindex) by a hash of the seed and the URL,
//     so the same page is consistently gone or noindex on every render and in every worker, and
//     policy's strike counters see consistent evidence. Over many renders of distinct URLs the
//     outcome shares are the configured rates; the rest are outcome.OK with a small HTML page naming
//     the URL.
//
// The sequence of draws is a pure function of (seed, stream, the n-th render of this Sim): two
// Sims with the same seed and stream give the same results in the same call order. Workers
// should pass their index as the stream (WithStream) so that they do not all draw alike. Sim
// does not apply render.domains: it fetches nothing.
type Sim struct {
	cfg      Options
	urlKey   uint64 // per seed: which URLs are gone or noindex
	drawKey  uint64 // per seed and stream: transient failures and latencies
	n        atomic.Uint64
	medianNs float64
	timeout  time.Duration
	// outcome thresholds: a render's draw u < transient is a 503; else the URL's draw v < gone is
	// gone, v < noindex is noindex.
	transient, gone, noindex float64
}

// simSigma is the log-normal shape of simulated latencies.
const simSigma = 0.5

// NewSim builds the sim renderer with its own random stream (see WithStream).
func NewSim(cfg Options, stream uint64) (*Sim, error) {
	if err := checkCommon(cfg); err != nil {
		return nil, err
	}
	sc := cfg.Sim
	for _, r := range []float64{sc.TransientRate, sc.GoneRate, sc.NoindexRate} {
		if !(r >= 0 && r <= 1) {
			return nil, fmt.Errorf("render: sim rates must be in 0..1, got %v", r)
		}
	}
	if sc.TransientRate+sc.GoneRate+sc.NoindexRate > 1+1e-9 {
		return nil, errors.New("render: sim rates add up to more than 1")
	}
	if sc.LatencyMedian < 0 {
		return nil, errors.New("render: sim latency_median must not be negative")
	}
	s := &Sim{
		cfg:       cfg,
		urlKey:    mix64(uint64(sc.Seed) ^ 0x5851f42d4c957f2d),
		drawKey:   mix64(uint64(sc.Seed) + mix64(stream+0x9e3779b97f4a7c15)),
		medianNs:  float64(sc.LatencyMedian),
		timeout:   cfg.Timeout,
		transient: sc.TransientRate,
	}
	// Gone and noindex are drawn only for renders that were not transient, so scale them to keep
	// their overall shares at the configured rates.
	if rest := 1 - sc.TransientRate; rest > 0 {
		s.gone = sc.GoneRate / rest
		s.noindex = (sc.GoneRate + sc.NoindexRate) / rest
	}
	return s, nil
}

// Render simulates rendering req.URL. See Sim.
func (s *Sim) Render(ctx context.Context, req Request) (res Result) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	defer recovered(&res, start)
	res.FinalURL = req.URL

	n := s.n.Add(1)
	d := mix64(s.drawKey + n*0x9e3779b97f4a7c15)
	if err := ctx.Err(); err != nil {
		return failed(res, outcome.Timeout, StageRequest, "canceled before the render began: "+context.Cause(ctx).Error())
	}
	if s.medianNs > 0 {
		lat, timedOut := s.latency(d), false
		if lat >= s.timeout {
			lat, timedOut = s.timeout, true
		}
		t := time.NewTimer(lat)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return failed(res, outcome.Timeout, StageHeaders, "canceled during the simulated render: "+context.Cause(ctx).Error())
		}
		if timedOut {
			return failed(res, outcome.Timeout, StageHeaders, fmt.Sprintf("render.timeout %s reached (simulated)", s.timeout))
		}
	}

	if unit(d) < s.transient {
		res.Status = 503
		return failed(res, outcome.ServerError, StageHeaders, "status 503 Service Unavailable (simulated)")
	}
	switch v := unit(mix64(s.urlKey ^ fnv64(req.URL))); {
	case v < s.gone:
		res.Status = 410
		return failed(res, outcome.Gone, StageHeaders, "status 410 Gone (simulated)")
	case v < s.noindex:
		res.Outcome, res.Err = outcome.Noindex, "robots meta tag: noindex (simulated)"
		res.Body = simPage(req.URL, `<meta name="robots" content="noindex">`)
	default:
		res.Outcome = outcome.OK
		res.Body = simPage(req.URL, "")
	}
	res.Status, res.Stage = 200, StageBody
	res.Headers = map[string]string{"content-type": "text/html; charset=utf-8"}
	return res
}

// latency draws a log-normal latency around the median from the render's draw d.
func (s *Sim) latency(d uint64) time.Duration {
	u1 := 1 - unit(mix64(d^0xbf58476d1ce4e5b9)) // (0, 1]: the log is finite
	u2 := unit(mix64(d ^ 0x94d049bb133111eb))
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2) // Box–Muller: standard normal
	ns := s.medianNs * math.Exp(simSigma*z)
	if ns >= float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}

func simPage(u, head string) []byte {
	e := html.EscapeString(u)
	return []byte("<!doctype html><html><head><meta charset=\"utf-8\">" + head + "<title>" + e +
		"</title></head><body><h1>" + e + "</h1><p>Rendered by the freshq sim renderer.</p></body></html>\n")
}

// mix64 is splitmix64's finalizer: a bijection that scatters nearby inputs.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// unit maps x to [0, 1) using its top 53 bits.
func unit(x uint64) float64 { return float64(x>>11) / (1 << 53) }

// fnv64 is FNV-1a over s, without allocating.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
