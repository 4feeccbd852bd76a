package node

import (
	"testing"
	"time"
)

// timer is one of the stop's bounds as the test holds it.
type timer struct {
	d    time.Duration
	fire chan time.Time
}

// testTimers stands in for time.After: each timer asked for is handed to the test, which fires it.
func testTimers() (func(time.Duration) <-chan time.Time, <-chan timer) {
	asked := make(chan timer, 8)
	return func(d time.Duration) <-chan time.Time {
		t := timer{d: d, fire: make(chan time.Time)}
		asked <- t
		return t.fire
	}, asked
}

func within(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second): // a failure's bound only: a passing run never waits for it
		t.Fatalf("%s did not happen", what)
	}
}
