// Package timers stands in for time.After in the tests of a stop's bounds: each timer the code
// under test asks for is handed to the test, which decides when it fires. So a test of "the
// drain bound passes with a request still running" never sleeps for the bound.
package timers

import (
	"testing"
	"time"
)

// Timer is one bound as the test holds it: how long the code asked for, and the channel that
// fires it (send or close).
type Timer struct {
	D    time.Duration
	Fire chan time.Time
}

// New returns a time.After for the code under test, and the channel on which the test receives
// each timer it asks for (up to 8 outstanding).
func New() (after func(time.Duration) <-chan time.Time, asked <-chan Timer) {
	ch := make(chan Timer, 8)
	return func(d time.Duration) <-chan time.Time {
		t := Timer{D: d, Fire: make(chan time.Time)}
		ch <- t
		return t.Fire
	}, ch
}

// Within fails t unless ch is closed or sends within 10 s: a failure's bound only, which a
// passing run never waits for.
func Within(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}
