package hosts

import (
	"net/http"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/shm"
)

const t0 = int64(1_800_000_000_000)

var (
	ok200   = Observation{Outcome: outcome.OK, Status: 200}
	noindex = Observation{Outcome: outcome.Noindex, Status: 200}
	e500    = Observation{Outcome: outcome.ServerError, Status: 500}
	e503    = Observation{Outcome: outcome.ServerError, Status: 503}
	timeout = Observation{Outcome: outcome.Timeout}
	network = Observation{Outcome: outcome.Network}
	nf404   = Observation{Outcome: outcome.NotFound, Status: 404}
	r429    = Observation{Outcome: outcome.ServerError, Status: 429}
)

func ra(status int, v string) Observation {
	return Observation{Outcome: outcome.ServerError, Status: status, Headers: map[string]string{RetryAfterHeader: v}}
}

func repeat(o Observation, n int) []Observation {
	out := make([]Observation, n)
	for i := range out {
		out[i] = o
	}
	return out
}

func seq(parts ...[]Observation) []Observation {
	var out []Observation
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func one(o Observation) []Observation { return []Observation{o} }

// hostsConfig is render.hosts at its defaults: max_concurrency 4, max_pause 10m, halve_after 3,
// grow_after 10.
func hostsConfig() config.Hosts { return config.Default().Render.Hosts }

// Every rule of Step, as a table: a start state, results observed one a millisecond from t0
// (the last at t0 + len-1), and the state reached after the last, with keep.
func TestStep(t *testing.T) {
	paused := func(untilMs int64) shm.HostState {
		return shm.HostState{PausedUntilMs: untilMs, SinceMs: t0 - 5000, Cause: shm.HostCauseRetryAfter, Status: 429}
	}
	throttled := func(limit uint32) shm.HostState {
		return shm.HostState{Limit: limit, SinceMs: t0 - 5000, Cause: shm.HostCauseErrors, Status: 500}
	}
	for _, tc := range []struct {
		name string
		cur  *shm.HostState // nil: not in the table
		max  int            // 0: 4
		cfg  func(*config.Hosts)
		obs  []Observation
		want shm.HostState
		keep bool
	}{
		// Refusals.
		{name: "429 with Retry-After pauses for it", obs: one(ra(429, "2")),
			want: shm.HostState{PausedUntilMs: t0 + 2000, SinceMs: t0, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},
		{name: "503 with Retry-After pauses for it", obs: one(ra(503, "5")),
			want: shm.HostState{PausedUntilMs: t0 + 5000, SinceMs: t0, Cause: shm.HostCauseRetryAfter, Status: 503}, keep: true},
		{name: "Retry-After as an HTTP date", obs: one(ra(429, time.UnixMilli(t0+30_000).UTC().Format(http.TimeFormat))),
			want: shm.HostState{PausedUntilMs: t0 + 30_000, SinceMs: t0, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},
		{name: "Retry-After capped by max_pause", obs: one(ra(429, "3600")),
			want: shm.HostState{PausedUntilMs: t0 + 600_000, SinceMs: t0, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},
		{name: "Retry-After capped by a reloaded max_pause", cfg: func(h *config.Hosts) { h.MaxPause = config.Duration(3 * time.Second) },
			obs:  one(ra(503, "60")),
			want: shm.HostState{PausedUntilMs: t0 + 3000, SinceMs: t0, Cause: shm.HostCauseRetryAfter, Status: 503}, keep: true},
		{name: "Retry-After 0 still pauses MinPause", obs: one(ra(429, "0")),
			want: shm.HostState{PausedUntilMs: t0 + 1000, SinceMs: t0, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},
		{name: "Retry-After of a passed date pauses MinPause", obs: one(ra(503, "Mon, 01 Jan 2001 00:00:00 GMT")),
			want: shm.HostState{PausedUntilMs: t0 + 1000, SinceMs: t0, Cause: shm.HostCauseRetryAfter, Status: 503}, keep: true},
		{name: "429 without Retry-After pauses MinPause and halves", obs: one(r429),
			want: shm.HostState{PausedUntilMs: t0 + 1000, Limit: 2, SinceMs: t0, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},
		{name: "429 with a garbage Retry-After is one without", obs: one(ra(429, "soon")),
			want: shm.HostState{PausedUntilMs: t0 + 1000, Limit: 2, SinceMs: t0, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},
		{name: "503 without Retry-After is an error, not a pause", obs: one(e503),
			want: shm.HostState{ErrStreak: 1}, keep: true},
		{name: "503 with a garbage Retry-After is an error", obs: one(ra(503, "-1")),
			want: shm.HostState{ErrStreak: 1}, keep: true},
		{name: "three 503 without Retry-After halve", obs: repeat(e503, 3),
			want: shm.HostState{Limit: 2, SinceMs: t0 + 2, Cause: shm.HostCauseErrors, Status: 503}, keep: true},
		{name: "a shorter Retry-After does not shorten a pause", cur: ptr(paused(t0 + 60_000)), obs: one(ra(429, "2")),
			want: shm.HostState{PausedUntilMs: t0 + 60_000, SinceMs: t0 - 5000, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},
		{name: "a longer Retry-After extends a pause, since kept", cur: ptr(paused(t0 + 60_000)), obs: one(ra(503, "120")),
			want: shm.HostState{PausedUntilMs: t0 + 120_000, SinceMs: t0 - 5000, Cause: shm.HostCauseRetryAfter, Status: 503}, keep: true},
		{name: "a refusal ends both streaks", cur: ptr(shm.HostState{Limit: 2, ErrStreak: 2, OKStreak: 7, SinceMs: t0 - 5000, Cause: shm.HostCauseErrors, Status: 500}),
			obs:  one(ra(429, "1")),
			want: shm.HostState{PausedUntilMs: t0 + 1000, Limit: 2, SinceMs: t0 - 5000, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},
		{name: "429 without Retry-After at limit 1 stays at 1", cur: ptr(throttled(1)), obs: one(r429),
			want: shm.HostState{PausedUntilMs: t0 + 1000, Limit: 1, SinceMs: t0 - 5000, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},
		{name: "429 during a pause halves again", cur: ptr(shm.HostState{PausedUntilMs: t0 + 500, Limit: 2, SinceMs: t0 - 5000, Cause: shm.HostCauseRetryAfter, Status: 429}),
			obs:  one(r429),
			want: shm.HostState{PausedUntilMs: t0 + 1000, Limit: 1, SinceMs: t0 - 5000, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},

		// Pauses end at their time, never earlier.
		{name: "a success does not end a pause", cur: ptr(paused(t0 + 60_000)), obs: repeat(ok200, 20),
			want: paused(t0 + 60_000), keep: true},
		{name: "a pause that passed, nothing else: deleted", cur: ptr(paused(t0)), obs: one(network),
			want: shm.HostState{}, keep: false},
		{name: "a pause that passed, on a success: deleted", cur: ptr(paused(t0 - 1)), obs: one(ok200),
			want: shm.HostState{}, keep: false},
		{name: "a pause that passed leaves a lowered limit", cur: ptr(shm.HostState{PausedUntilMs: t0, Limit: 2, SinceMs: t0 - 5000, Cause: shm.HostCauseRetryAfter, Status: 429}),
			obs:  one(network),
			want: shm.HostState{Limit: 2, SinceMs: t0 - 5000, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},
		{name: "a pause not yet passed is kept on a result that says nothing", cur: ptr(paused(t0 + 1)), obs: one(network),
			want: paused(t0 + 1), keep: true},

		// Multiplicative decrease.
		{name: "two 500s: a streak, no halving", obs: repeat(e500, 2), want: shm.HostState{ErrStreak: 2}, keep: true},
		{name: "three 500s halve", obs: repeat(e500, 3),
			want: shm.HostState{Limit: 2, SinceMs: t0 + 2, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "three timeouts halve, status 0", obs: repeat(timeout, 3),
			want: shm.HostState{Limit: 2, SinceMs: t0 + 2, Cause: shm.HostCauseErrors}, keep: true},
		{name: "500s and timeouts count together", obs: seq(one(e500), one(timeout), one(e503)),
			want: shm.HostState{Limit: 2, SinceMs: t0 + 2, Cause: shm.HostCauseErrors, Status: 503}, keep: true},
		{name: "six halve twice", obs: repeat(e500, 6),
			want: shm.HostState{Limit: 1, SinceMs: t0 + 2, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "never below 1", obs: repeat(e500, 30),
			want: shm.HostState{Limit: 1, SinceMs: t0 + 2, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "halve_after 1", cfg: func(h *config.Hosts) { h.HalveAfter = 1 }, obs: one(e500),
			want: shm.HostState{Limit: 2, SinceMs: t0, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "a success ends the error streak", obs: seq(repeat(e500, 2), one(ok200), one(e500)),
			want: shm.HostState{ErrStreak: 1}, keep: true},
		{name: "a 404 ends the error streak", obs: seq(repeat(e500, 2), one(nf404), one(e500)),
			want: shm.HostState{ErrStreak: 1}, keep: true},
		{name: "a network error does not end it", obs: seq(repeat(e500, 2), one(network), one(e500)),
			want: shm.HostState{Limit: 2, SinceMs: t0 + 3, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "an error streak alone, ended: deleted", obs: seq(one(e500), one(ok200)), want: shm.HostState{}, keep: false},
		{name: "errors during a pause keep its cause", cur: ptr(paused(t0 + 60_000)), obs: repeat(e500, 3),
			want: shm.HostState{PausedUntilMs: t0 + 60_000, Limit: 2, SinceMs: t0 - 5000, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},
		{name: "a host whose maximum is 1 cannot go lower", max: 1, obs: repeat(e500, 3), want: shm.HostState{}, keep: false},

		// Additive increase.
		{name: "ten successes raise by one", cur: ptr(throttled(2)), obs: repeat(ok200, 10),
			want: shm.HostState{Limit: 3, SinceMs: t0 - 5000, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "nine do not", cur: ptr(throttled(2)), obs: repeat(ok200, 9),
			want: shm.HostState{Limit: 2, OKStreak: 9, SinceMs: t0 - 5000, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "noindex is a success", cur: ptr(throttled(2)), obs: repeat(noindex, 10),
			want: shm.HostState{Limit: 3, SinceMs: t0 - 5000, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "an error restarts the success streak", cur: ptr(throttled(2)), obs: seq(repeat(ok200, 9), one(e500), repeat(ok200, 9)),
			want: shm.HostState{Limit: 2, OKStreak: 9, SinceMs: t0 - 5000, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "a 404 neither counts nor restarts it", cur: ptr(throttled(2)), obs: seq(repeat(ok200, 9), one(nf404), one(ok200)),
			want: shm.HostState{Limit: 3, SinceMs: t0 - 5000, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "back at the maximum: deleted", cur: ptr(throttled(2)), obs: repeat(ok200, 20), want: shm.HostState{}, keep: false},
		{name: "from 1 to the maximum takes grow_after per step", cur: ptr(throttled(1)), obs: repeat(ok200, 29),
			want: shm.HostState{Limit: 3, OKStreak: 9, SinceMs: t0 - 5000, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "grow_after 1", cfg: func(h *config.Hosts) { h.GrowAfter = 1 }, cur: ptr(throttled(2)), obs: one(ok200),
			want: shm.HostState{Limit: 3, SinceMs: t0 - 5000, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "successes at the maximum are not counted", obs: repeat(ok200, 50), want: shm.HostState{}, keep: false},
		{name: "successes while paused raise the limit, not the pause", cur: ptr(shm.HostState{PausedUntilMs: t0 + 60_000, Limit: 2, SinceMs: t0 - 5000, Cause: shm.HostCauseRetryAfter, Status: 429}),
			obs:  repeat(ok200, 10),
			want: shm.HostState{PausedUntilMs: t0 + 60_000, Limit: 3, SinceMs: t0 - 5000, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},

		// The maximum, and what is not in the table.
		{name: "a maximum lowered under the stored limit: at the maximum", cur: ptr(throttled(3)), max: 2, obs: one(ok200),
			want: shm.HostState{}, keep: false},
		{name: "a maximum raised: the stored limit stays", cur: ptr(throttled(3)), max: 8, obs: one(network),
			want: throttled(3), keep: true},
		{name: "a maximum past the token table is clamped", max: 5000, obs: repeat(e500, 3),
			want: shm.HostState{Limit: MaxTokens / 2, SinceMs: t0 + 2, Cause: shm.HostCauseErrors, Status: 500}, keep: true},
		{name: "a maximum of 0 is 1", max: -3, obs: repeat(e500, 3), want: shm.HostState{}, keep: false},
		{name: "not found: cur is ignored", cur: nil, obs: one(network), want: shm.HostState{}, keep: false},
		{name: "defaults stay defaults on a success", obs: one(ok200), want: shm.HostState{}, keep: false},
		{name: "defaults stay defaults on a 404", obs: one(nf404), want: shm.HostState{}, keep: false},
		{name: "client_error 429 (a remote renderer's word) is a refusal", obs: one(Observation{Outcome: outcome.ClientError, Status: 429, Headers: map[string]string{RetryAfterHeader: "3"}}),
			want: shm.HostState{PausedUntilMs: t0 + 3000, SinceMs: t0, Cause: shm.HostCauseRetryAfter, Status: 429}, keep: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hostsConfig()
			if tc.cfg != nil {
				tc.cfg(&h)
			}
			cfg := LimitsOf(h)
			max := cmpOr(tc.max, 4)
			st, found := shm.HostState{Limit: 77, ErrStreak: 9, PausedUntilMs: t0 + 1e9}, false // ignored unless found
			if tc.cur != nil {
				st, found = *tc.cur, true
			}
			keep := false
			for i, o := range tc.obs {
				st, keep = Step(st, found, o, &cfg, max, t0+int64(i))
				found = keep
				if !keep {
					st = shm.HostState{Limit: 77, ErrStreak: 9, PausedUntilMs: t0 + 1e9} // deleted: what is left must not matter
				}
			}
			if !keep {
				st = shm.HostState{}
			}
			if st != tc.want || keep != tc.keep {
				t.Fatalf("got %+v keep %v\nwant %+v keep %v", st, keep, tc.want, tc.keep)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// Whatever the state and the result, Step keeps its promises: the limit stays within
// 1..maximum (0 meaning the maximum), a pause is never shortened nor longer than max_pause from
// now, and keep is false exactly when the state is the host's defaults.
func TestStepInvariants(t *testing.T) {
	cfg := LimitsOf(hostsConfig())
	obs := []Observation{ok200, noindex, e500, e503, timeout, network, nf404, r429, ra(429, "5"), ra(503, "99999"), ra(503, "x"),
		{Outcome: outcome.Failed}, {Outcome: outcome.Blocked}, {Outcome: outcome.ClientError, Status: 403}}
	for _, max := range []int{1, 2, 4, 7} {
		// A walk over every pair of results from a handful of start states.
		starts := []shm.HostState{{}, {Limit: 1}, {Limit: uint32(max - 1)}, {PausedUntilMs: t0 + 10}, {PausedUntilMs: t0 - 10, Limit: 1, ErrStreak: 2, OKStreak: 9}}
		for _, s0 := range starts {
			for _, a := range obs {
				for _, b := range obs {
					st, found := s0, true
					for i, o := range []Observation{a, b} {
						now := t0 + int64(i)*5
						next, keep := Step(st, found, o, &cfg, max, now)
						if next.Limit != 0 && (next.Limit < 1 || int(next.Limit) >= max) {
							t.Fatalf("max %d from %+v on %+v: limit %d", max, st, o, next.Limit)
						}
						if found && st.PausedUntilMs > now && next.PausedUntilMs < st.PausedUntilMs {
							t.Fatalf("pause shortened: %+v on %+v -> %+v", st, o, next)
						}
						if next.PausedUntilMs > now+cfg.MaxPause.Milliseconds() && next.PausedUntilMs != st.PausedUntilMs {
							t.Fatalf("pause past max_pause: %+v on %+v -> %+v", st, o, next)
						}
						atDefaults := (next.PausedUntilMs == 0 || next.PausedUntilMs <= now) && next.Limit == 0 && next.ErrStreak == 0
						if keep == atDefaults {
							t.Fatalf("keep %v for %+v", keep, next)
						}
						st, found = next, keep
						if !keep {
							st = shm.HostState{}
						}
					}
				}
			}
		}
	}
}

func TestRefusal(t *testing.T) {
	with := map[string]string{RetryAfterHeader: "2"}
	for _, tc := range []struct {
		o       outcome.Outcome
		status  int
		headers map[string]string
		want    bool
	}{
		{outcome.ServerError, 429, nil, true},
		{outcome.ServerError, 429, with, true},
		{outcome.ClientError, 429, nil, true},
		{outcome.ServerError, 503, with, true},
		{outcome.ServerError, 503, map[string]string{RetryAfterHeader: "Tue, 01 Dec 2026 12:00:30 GMT"}, true},
		{outcome.ServerError, 503, nil, false},
		{outcome.ServerError, 503, map[string]string{RetryAfterHeader: "later"}, false},
		{outcome.ServerError, 503, map[string]string{"Retry-After": "2"}, false}, // keys are lower-case
		{outcome.ServerError, 500, with, false},
		{outcome.ServerError, 502, with, false},
		{outcome.OK, 429, with, false},
		{outcome.Timeout, 429, with, false},
		{outcome.ClientError, 403, with, false},
	} {
		if got := Refusal(tc.o, tc.status, tc.headers); got != tc.want {
			t.Errorf("Refusal(%v, %d, %v) = %v, want %v", tc.o, tc.status, tc.headers, got, tc.want)
		}
	}
}

// config bounds render.hosts.max_concurrency by the host tokens a take tries: the two are one
// number, kept in two packages that do not import each other.
func TestMaxConcurrencyBoundIsTheTokenTable(t *testing.T) {
	if config.HostsMaxConcurrencyMax != MaxTokens {
		t.Fatalf("config.HostsMaxConcurrencyMax %d, MaxTokens %d", config.HostsMaxConcurrencyMax, MaxTokens)
	}
	if MinPause != time.Second {
		t.Fatalf("MinPause %v", MinPause)
	}
}
