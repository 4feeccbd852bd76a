package sweeploop

import (
	"testing"
	"time"
)

// The sweep loop's wait: the interval; sooner for a paused host's resumption, never sooner than
// minResumeWait (also when the pause already ended); and never shorter than the sweep took, so
// that a sweep longer than the interval leaves worker 0 half its time.
func TestSweepWaitIsNeverShorterThanTheSweep(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	for _, c := range []struct {
		interval, took time.Duration
		resumes        bool
		resumeIn, want time.Duration
	}{
		{s, 150 * ms, false, 0, s},
		{s, 150 * ms, true, 300 * ms, 300 * ms},
		{s, 5 * ms, true, -40 * ms, minResumeWait},
		{s, 3 * s, false, 0, 3 * s},
		{s, 3 * s, true, 100 * ms, 3 * s},
		{500 * ms, 400 * ms, true, 2 * s, 500 * ms},
	} {
		if got := sweepWait(c.interval, c.took, c.resumes, c.resumeIn); got != c.want {
			t.Errorf("interval %v, took %v, resumes %v in %v: wait %v, want %v", c.interval, c.took, c.resumes, c.resumeIn, got, c.want)
		}
	}
}

// An early sweep for an exhausted set waits two sweep durations (20 ms at least), but never
// past the sweep the loop was waiting for; since that wait is never shorter than the sweep,
// sweeps stay at least a sweep apart whatever their length.
func TestKickWaitSpacesEarlySweeps(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	for _, c := range []struct{ took, sinceEnd, wait, want time.Duration }{
		{100 * ms, 10 * ms, s, 200 * ms},
		{2 * ms, 0, s, 20 * ms},
		{100 * ms, 900 * ms, s, 100 * ms},
		{3 * s, 0, 3 * s, 3 * s},
		{3 * s, 2 * s, 3 * s, s},
		{100 * ms, 2 * s, s, 0},
	} {
		if got := kickWait(c.took, c.sinceEnd, c.wait); got != c.want {
			t.Errorf("took %v, kicked %v after, waiting %v: %v, want %v", c.took, c.sinceEnd, c.wait, got, c.want)
		}
	}
}
