//go:build testclock

package policy

import "sync/atomic"

// routeMatches counts the policy's route matches (matchRoute) in a test build (the tag
// testclock, testkit/testbin), so that a test can pin how many a decision costs: a key's
// route is resolved once (Resolve) and carried to every decision that reads it. In any other
// build countRouteMatch is empty (routematch_off.go) and nothing is counted.
var routeMatches atomic.Int64

func countRouteMatch() { routeMatches.Add(1) }

// RouteMatches is how many route matches every policy of the process has run (test builds
// only).
func RouteMatches() int64 { return routeMatches.Load() }
