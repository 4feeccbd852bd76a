package render

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/freshq/freshq/outcome"
)

func mustSim(t *testing.T, cfg Options, stream uint64) *Sim {
	t.Helper()
	s, err := NewSim(cfg, stream)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func simConfig(seed int64, transient, gone, noindex float64, median time.Duration) Options {
	cfg := testConfig("sim")
	cfg.Sim = SimOptions{Seed: seed, TransientRate: transient, GoneRate: gone, NoindexRate: noindex, LatencyMedian: median}
	return cfg
}

func urlN(i int) string { return fmt.Sprintf("https://shop.example/p/%d?ref=a&b=<c>", i) }

// trace renders n URLs and records what came back, minus the wall time.
func trace(s Renderer, n int) []string {
	out := make([]string, n)
	for i := range out {
		r := s.Render(context.Background(), Request{URL: urlN(i % 97)})
		out[i] = fmt.Sprintf("%s %d %s %q", r.Outcome, r.Status, r.Stage, r.Body)
	}
	return out
}

func TestSimIsDeterministicForASeedAndStream(t *testing.T) {
	cfg := simConfig(42, 0.3, 0.1, 0.1, 0)
	a, b := trace(mustSim(t, cfg, 1), 2000), trace(mustSim(t, cfg, 1), 2000)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("render %d: %s vs %s", i, a[i], b[i])
		}
	}
	differ := func(x, y []string) bool {
		for i := range x {
			if x[i] != y[i] {
				return true
			}
		}
		return false
	}
	if !differ(a, trace(mustSim(t, cfg, 2), 2000)) {
		t.Error("another stream drew the same sequence")
	}
	if !differ(a, trace(mustSim(t, simConfig(43, 0.3, 0.1, 0.1, 0), 1), 2000)) {
		t.Error("another seed drew the same sequence")
	}
}

func TestSimGoneAndNoindexAreAPropertyOfTheURL(t *testing.T) {
	cfg := simConfig(7, 0.2, 0.2, 0.2, 0)
	s1, s2 := mustSim(t, cfg, 1), mustSim(t, cfg, 2)
	ctx := context.Background()
	for i := range 300 {
		req := Request{URL: urlN(i)}
		var first outcome.Outcome
		for k := range 8 { // whenever a render is not a transient 503, the URL's own outcome shows
			s := s1
			if k%2 == 1 {
				s = s2 // another worker agrees on which URLs are gone
			}
			o := s.Render(ctx, req).Outcome
			if o == outcome.ServerError {
				continue
			}
			if first == 0 {
				first = o
			} else if o != first {
				t.Fatalf("%s: %s, then %s", req.URL, first, o)
			}
		}
	}
}

func TestSimHonoursTheRates(t *testing.T) {
	const n = 40_000
	cfg := simConfig(1, 0.10, 0.05, 0.15, 0)
	s := mustSim(t, cfg, 0)
	counts := map[outcome.Outcome]int{}
	for i := range n {
		res := s.Render(context.Background(), Request{URL: urlN(i)})
		counts[res.Outcome]++
		switch res.Outcome {
		case outcome.ServerError:
			if res.Status != 503 || res.Body != nil {
				t.Fatalf("transient: %+v", res)
			}
		case outcome.Gone:
			if res.Status != 410 || res.Body != nil {
				t.Fatalf("gone: %+v", res)
			}
		case outcome.Noindex:
			if res.Status != 200 || !metaNoindex(res.Body) {
				t.Fatalf("noindex without a noindex page: %+v", res)
			}
		case outcome.OK:
			if res.Status != 200 || metaNoindex(res.Body) || !strings.Contains(string(res.Body), "https://shop.example/p/") ||
				strings.Contains(string(res.Body), "<c>") {
				t.Fatalf("ok: %+v", res)
			}
		default:
			t.Fatalf("unexpected %s", res.Outcome)
		}
	}
	for o, rate := range map[outcome.Outcome]float64{outcome.ServerError: 0.10, outcome.Gone: 0.05, outcome.Noindex: 0.15, outcome.OK: 0.70} {
		got := float64(counts[o]) / n
		// 5 standard deviations of a binomial share: a wrong formula fails, chance does not.
		if tol := 5 * math.Sqrt(rate*(1-rate)/n); math.Abs(got-rate) > tol {
			t.Errorf("%s: share %.4f, want %.2f ± %.4f", o, got, rate, tol)
		}
	}

	all := mustSim(t, simConfig(1, 1, 0, 0, 0), 0)
	none := mustSim(t, simConfig(1, 0, 0, 0, 0), 0)
	for i := range 1000 {
		if o := all.Render(context.Background(), Request{URL: urlN(i)}).Outcome; o != outcome.ServerError {
			t.Fatalf("transient_rate 1 gave %s", o)
		}
		if o := none.Render(context.Background(), Request{URL: urlN(i)}).Outcome; o != outcome.OK {
			t.Fatalf("all rates 0 gave %s", o)
		}
	}
}

func TestSimZeroLatencyReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// In the bubble the clock moves only when every goroutine is blocked: a render that
		// slept or waited on a timer would show a non-zero duration.
		s := mustSim(t, simConfig(1, 0.1, 0.1, 0.1, 0), 0)
		start := time.Now()
		for i := range 1000 {
			if res := s.Render(context.Background(), Request{URL: urlN(i)}); res.Duration != 0 {
				t.Fatalf("render %d took %s of fake time", i, res.Duration)
			}
		}
		if time.Since(start) != 0 {
			t.Fatal("time passed")
		}
	})
}

func TestSimLatencyIsLogNormalAroundTheMedian(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const median = 200 * time.Millisecond
		cfg := simConfig(5, 0, 0, 0, median)
		cfg.Timeout = time.Hour
		s := mustSim(t, cfg, 0)
		var ds []time.Duration
		for i := range 2001 {
			res := s.Render(context.Background(), Request{URL: urlN(i)})
			if res.Outcome != outcome.OK {
				t.Fatalf("%s: %s", res.Outcome, res.Err)
			}
			ds = append(ds, res.Duration)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		if p50 := ds[len(ds)/2]; p50 < median*9/10 || p50 > median*11/10 {
			t.Errorf("median %s, want about %s", p50, median)
		}
		// σ = 0.5: the p99 is about e^(2.326·0.5) ≈ 3.2× the median.
		if p99 := ds[len(ds)*99/100]; p99 < median*27/10 || p99 > median*38/10 {
			t.Errorf("p99 %s, want about %s", p99, median*32/10)
		}
	})
}

func TestSimTimeoutAndCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := simConfig(5, 0, 0, 0, time.Second)
		cfg.Timeout = time.Second // half the draws exceed it
		s := mustSim(t, cfg, 0)
		var timeouts int
		for i := range 400 {
			res := s.Render(context.Background(), Request{URL: urlN(i)})
			switch res.Outcome {
			case outcome.Timeout:
				timeouts++
				if res.Duration != time.Second || !strings.Contains(res.Err, "render.timeout") {
					t.Fatalf("timeout after %s: %q", res.Duration, res.Err)
				}
			case outcome.OK:
				if res.Duration >= time.Second {
					t.Fatalf("ok after %s", res.Duration)
				}
			default:
				t.Fatalf("%s", res.Outcome)
			}
		}
		if timeouts < 140 || timeouts > 260 {
			t.Errorf("%d of 400 timed out, want about half", timeouts)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		res := s.Render(ctx, Request{URL: urlN(1)})
		if res.Outcome != outcome.Timeout || res.Duration != 10*time.Millisecond || !strings.Contains(res.Err, "deadline") {
			t.Fatalf("caller's deadline: %+v", res)
		}
		res = s.Render(ctx, Request{URL: urlN(1)})
		if res.Outcome != outcome.Timeout || res.Duration != 0 {
			t.Fatalf("an expired context: %+v", res)
		}
	})
}
